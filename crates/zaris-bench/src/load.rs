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
