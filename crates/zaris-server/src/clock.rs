//! The node's monotonic clock, the only source of time for lease deadlines.
//!
//! A trait so that tests (and the fault harness's clock-rate faults) can drive time.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use zaris_core::{DurationMs, InstantMs};

pub trait Clock: Send + Sync + Debug + 'static {
    /// Time since an arbitrary, fixed origin; never goes back.
    fn elapsed(&self) -> Duration;

    /// Whole milliseconds since the origin, rounded down: for "has this deadline passed?", which
    /// must never say yes early.
    fn now(&self) -> InstantMs {
        InstantMs::new(u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// Milliseconds since the origin, rounded up: the start of a lease's time to live, so that a
    /// deadline `start + ttl` never falls before the true `t_apply + ttl` (rounding down could
    /// make it up to a millisecond early).
    fn now_rounded_up(&self) -> InstantMs {
        let elapsed = self.elapsed();
        let floor = self.now();
        if elapsed > Duration::from_millis(floor.get()) {
            floor.after(DurationMs::new(1))
        } else {
            floor
        }
    }
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
    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock a test sets by hand (tests of the lessor's timing without waiting).
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::Mutex<Duration>);

impl ManualClock {
    pub fn set(&self, elapsed: Duration) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = elapsed;
    }
}

impl Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
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
    fn elapsed(&self) -> Duration {
        // Monotonic: the inner clock never goes back, and scaling by a positive rate keeps the
        // order. Saturates instead of panicking on overflow.
        Duration::try_from_secs_f64(self.inner.elapsed().as_secs_f64() * self.rate)
            .unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 9, item 7: a deadline counted from a floored `now` could fall up to 1 ms before
    /// `t_apply + ttl`. Deadlines start from the time rounded up; expiry checks round down.
    #[test]
    fn deadlines_start_rounded_up_and_checks_round_down() {
        let clock = ManualClock::default();
        clock.set(Duration::from_micros(10_400));
        assert_eq!(clock.now().get(), 10);
        assert_eq!(clock.now_rounded_up().get(), 11);
        clock.set(Duration::from_millis(12));
        assert_eq!((clock.now().get(), clock.now_rounded_up().get()), (12, 12));
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod scaled_tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn scaled_clock_runs_at_its_rate_and_never_goes_back() {
        let real = Arc::new(ManualClock::default());
        let slow = ScaledClock::new(real.clone(), 0.5);
        let fast = ScaledClock::new(real.clone(), 1.5);
        let same = ScaledClock::new(real.clone(), 1.0);
        let mut last = (0, 0);
        for ms in [0, 1, 2, 3, 999, 1_000, 10_000, 123_457] {
            real.set(Duration::from_millis(ms));
            assert_eq!(slow.now().get(), ms / 2);
            assert_eq!(fast.now().get(), ms * 3 / 2);
            assert_eq!(same.now().get(), ms);
            assert!(slow.now().get() >= last.0 && fast.now().get() >= last.1);
            last = (slow.now().get(), fast.now().get());
        }
        real.set(Duration::MAX);
        assert_eq!(fast.now().get(), u64::MAX);
    }

    #[test]
    fn scaled_monotonic_clock_tracks_real_time_at_its_rate() {
        let fast = ScaledClock::new(Arc::new(MonotonicClock::default()), 2.0);
        let started = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = fast.now().get();
        // Read after the clock: the clock's origin precedes `started` by a moment, not a
        // millisecond, so this bounds it from above whatever the scheduler did.
        let elapsed = started.elapsed().as_millis() as u64;
        assert!(
            now >= 2 * 50 && now <= 2 * (elapsed + 1),
            "{now} vs {elapsed} ms"
        );
    }
}
