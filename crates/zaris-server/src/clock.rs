//! The node's monotonic clock, the only source of time for lease deadlines.
//!
//! A trait so that tests (and the fault harness's clock-rate faults) can drive time.

use std::fmt::Debug;
use std::time::Instant;

pub trait Clock: Send + Sync + Debug + 'static {
    /// Milliseconds since an arbitrary, fixed origin; never goes back.
    fn now_ms(&self) -> u64;
}

/// `Instant`-based: immune to wall-clock steps (NTP, manual changes).
#[derive(Debug)]
pub struct MonotonicClock {
    origin: Instant,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that runs `rate` times as fast as another (fault injection: a node whose clock drifts,
/// e.g. 0.5 or 1.5). It scales only what reads it: the lessor's deadlines. openraft's election
/// timeout and heartbeats, and the tokio timers of the server's loops, keep real time.
#[cfg(feature = "fault-injection")]
#[derive(Debug)]
pub struct ScaledClock {
    inner: std::sync::Arc<dyn Clock>,
    rate: f64,
}

#[cfg(feature = "fault-injection")]
impl ScaledClock {
    /// `rate` must be positive and finite (see `FaultConfig::validate`).
    pub fn new(inner: std::sync::Arc<dyn Clock>, rate: f64) -> Self {
        assert!(
            rate.is_finite() && rate > 0.0,
            "clock rate must be positive: {rate}"
        );
        ScaledClock { inner, rate }
    }
}

#[cfg(feature = "fault-injection")]
impl Clock for ScaledClock {
    fn now_ms(&self) -> u64 {
        // Monotonic: the inner clock never goes back, and scaling by a positive rate and rounding
        // down keep the order. The cast saturates at u64::MAX.
        (self.inner.now_ms() as f64 * self.rate) as u64
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// A clock the test sets by hand.
    #[derive(Debug, Default)]
    struct ManualClock(AtomicU64);

    impl Clock for ManualClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn scaled_clock_runs_at_its_rate_and_never_goes_back() {
        let real = Arc::new(ManualClock::default());
        let slow = ScaledClock::new(real.clone(), 0.5);
        let fast = ScaledClock::new(real.clone(), 1.5);
        let same = ScaledClock::new(real.clone(), 1.0);
        let mut last = (0, 0);
        for ms in [0, 1, 2, 3, 999, 1_000, 10_000, 123_457] {
            real.0.store(ms, Ordering::SeqCst);
            assert_eq!(slow.now_ms(), ms / 2);
            assert_eq!(fast.now_ms(), ms * 3 / 2);
            assert_eq!(same.now_ms(), ms);
            assert!(slow.now_ms() >= last.0 && fast.now_ms() >= last.1);
            last = (slow.now_ms(), fast.now_ms());
        }
        real.0.store(u64::MAX, Ordering::SeqCst);
        assert_eq!(fast.now_ms(), u64::MAX);
    }

    #[test]
    fn scaled_monotonic_clock_tracks_real_time_at_its_rate() {
        let fast = ScaledClock::new(Arc::new(MonotonicClock::default()), 2.0);
        let started = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = fast.now_ms();
        // Read after the clock: the clock's origin precedes `started` by a moment, not a
        // millisecond, so this bounds it from above whatever the scheduler did.
        let elapsed = started.elapsed().as_millis() as u64;
        assert!(
            now >= 2 * 50 && now <= 2 * (elapsed + 1),
            "{now} vs {elapsed} ms"
        );
    }
}
