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
