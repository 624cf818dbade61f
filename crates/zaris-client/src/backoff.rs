//! Exponential backoff between retries on other endpoints.

use std::time::Duration;

/// Delays between retries: `initial`, doubling after every step, capped at `max`.
///
/// Deterministic on purpose (so it can be tested); [`jitter`] spreads the actual sleeps so that
/// many clients retrying after the same leader failure do not retry in lockstep.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            next: initial.min(max),
            max,
        }
    }

    /// The delay before the next retry; every call doubles the following one, up to the cap.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }
}

/// A delay drawn uniformly from `[delay / 2, delay]` ("equal jitter").
pub(crate) fn jitter(delay: Duration) -> Duration {
    let half = delay / 2;
    let spread = u64::try_from((delay - half).as_micros()).unwrap_or(u64::MAX);
    if spread == 0 {
        return delay;
    }
    half + Duration::from_micros(rand::random_range(0..=spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_initial_to_the_cap() {
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
        let delays: Vec<u128> = (0..8).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    }

    #[test]
    fn backoff_initial_above_cap_is_capped() {
        let mut backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(1));
        assert_eq!(backoff.next_delay(), Duration::from_secs(1));
        assert_eq!(backoff.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn backoff_survives_huge_caps_without_overflow() {
        let mut backoff = Backoff::new(Duration::from_secs(u64::MAX / 2), Duration::MAX);
        assert_eq!(backoff.next_delay(), Duration::from_secs(u64::MAX / 2));
        assert_eq!(backoff.next_delay(), Duration::from_secs(u64::MAX - 1));
        assert_eq!(backoff.next_delay(), Duration::MAX);
    }

    #[test]
    fn jitter_stays_within_half_and_full_delay() {
        let delay = Duration::from_millis(400);
        for _ in 0..1000 {
            let jittered = jitter(delay);
            assert!(jittered >= Duration::from_millis(200), "{jittered:?}");
            assert!(jittered <= delay, "{jittered:?}");
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
