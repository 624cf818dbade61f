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
