//! Closed-loop load: workers that each call as soon as their last call ended, and what they
//! measured. Shared by the Zaris-only workloads and the side-by-side comparison.

use std::time::{Duration, Instant};

/// Longest any one call may take before it counts as failed (a hung call must not hang the run).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What one workload measured.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub ok: u64,
    pub failed: u64,
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
}

impl Sample {
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        match sorted.len() {
            0 => Duration::ZERO,
            n => sorted[((n - 1) as f64 * p).round() as usize],
        }
    }

    pub fn merge(&mut self, other: Sample) {
        self.ok += other.ok;
        self.failed += other.failed;
        self.latencies.extend(other.latencies);
    }
}

/// Runs `workers` loops of `op` (given the target, the worker and its call count) for `duration`,
/// each call timed. Only calls that end within `duration` count.
pub async fn closed_loop<T, F, Fut>(target: &T, workers: usize, duration: Duration, op: F) -> Sample
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T, usize, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let started = Instant::now();
    let until = started + duration;
    let tasks: Vec<_> = (0..workers)
        .map(|worker| {
            let (target, op) = (target.clone(), op.clone());
            tokio::spawn(async move {
                let mut sample = Sample::default();
                let mut n = 0u64;
                while Instant::now() < until {
                    let sent = Instant::now();
                    let result =
                        tokio::time::timeout(CALL_TIMEOUT, op(target.clone(), worker, n)).await;
                    // Only calls that end within the run count, so the rate is over `duration`
                    // exactly, whatever the calls in flight at its end do.
                    if Instant::now() > until {
                        break;
                    }
                    match result {
                        Ok(Ok(())) => {
                            sample.ok += 1;
                            sample.latencies.push(sent.elapsed());
                        }
                        Ok(Err(_)) | Err(_) => sample.failed += 1,
                    }
                    n += 1;
                }
                sample
            })
        })
        .collect();
    let mut total = Sample::default();
    for task in tasks {
        match task.await {
            Ok(sample) => total.merge(sample),
            // A worker that panicked: its calls are lost to the figure, so say so.
            Err(e) => {
                eprintln!("a worker failed: {e}");
                total.failed += 1;
            }
        }
    }
    total.elapsed = duration;
    total
}

/// Open-loop load: a call of `op` (given the target and the call's number) started every
/// 1/`rate_per_s` for `duration`, whatever the calls still in flight, as independent clients
/// would: a slow answer does not slow the arrivals. Each call is timed from when it was sent;
/// every call sent counts, the run waiting for the last (each bounded by [`CALL_TIMEOUT`]).
/// tokio's timer counts in milliseconds, so above 1,000/s calls leave in bursts per tick.
pub async fn open_loop<T, F, Fut>(target: &T, rate_per_s: u32, duration: Duration, op: F) -> Sample
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let period = Duration::from_secs(1) / rate_per_s.max(1);
    let started = tokio::time::Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for n in 0u64.. {
        let due = started + period.mul_f64(n as f64);
        if due >= started + duration {
            break;
        }
        tokio::time::sleep_until(due).await;
        let (target, op) = (target.clone(), op.clone());
        calls.spawn(async move {
            let sent = tokio::time::Instant::now();
            let result = tokio::time::timeout(CALL_TIMEOUT, op(target, n)).await;
            matches!(result, Ok(Ok(()))).then(|| sent.elapsed())
        });
    }
    let mut total = Sample {
        elapsed: duration,
        ..Sample::default()
    };
    while let Some(call) = calls.join_next().await {
        match call {
            Ok(Some(latency)) => {
                total.ok += 1;
                total.latencies.push(latency);
            }
            Ok(None) | Err(_) => total.failed += 1,
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn an_open_loop_sends_at_its_rate_whatever_the_calls_in_flight() {
        let in_flight_max = Arc::new(AtomicU64::new(0));
        let in_flight = Arc::new(AtomicU64::new(0));
        let sample = open_loop(
            &(in_flight.clone(), in_flight_max.clone()),
            100,
            Duration::from_millis(300),
            |(now, max), n| async move {
                let inside = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(inside, Ordering::SeqCst);
                // Each call takes 50 ms, five periods: a closed loop would send far fewer.
                tokio::time::sleep(Duration::from_millis(50)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                if n % 10 == 9 {
                    anyhow::bail!("every tenth call fails");
                }
                Ok(())
            },
        )
        .await;
        assert_eq!((sample.ok, sample.failed), (27, 3), "30 calls due in 0.3 s");
        assert_eq!(sample.elapsed, Duration::from_millis(300));
        assert!(
            in_flight_max.load(Ordering::SeqCst) >= 5,
            "calls overlapped: {}",
            in_flight_max.load(Ordering::SeqCst)
        );
        assert!(
            sample
                .latencies
                .iter()
                .all(|l| *l >= Duration::from_millis(50))
        );
    }
}
