//! The last minutes of this node's activity, for the console's charts: lease grants, renewals,
//! expiries and revocations applied per second, and the commit latency of the entries it
//! proposed (as leader). Every member applies every entry, so the rates are the cluster's; the
//! latency is the leader's. The Prometheus counters count the same things, but the metrics
//! recorder cannot be read back, so these are counted beside them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// Time between samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(2);
/// Samples kept: five minutes.
pub const SAMPLES_KEPT: usize = 150;

/// What the observer counts as entries apply.
#[derive(Debug, Default)]
pub struct ApplyCounts {
    pub grants: AtomicU64,
    pub renewals: AtomicU64,
    pub expiries: AtomicU64,
    pub revocations: AtomicU64,
}

impl ApplyCounts {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn read(&self) -> [u64; 4] {
        [
            self.grants.load(Ordering::Relaxed),
            self.renewals.load(Ordering::Relaxed),
            self.expiries.load(Ordering::Relaxed),
            self.revocations.load(Ordering::Relaxed),
        ]
    }
}

/// Propose-to-applied time of the entries this node proposed.
#[derive(Debug, Default)]
pub struct CommitLatency {
    total_us: AtomicU64,
    count: AtomicU64,
}

impl CommitLatency {
    pub fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.total_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, u64) {
        (
            self.total_us.load(Ordering::Relaxed),
            self.count.load(Ordering::Relaxed),
        )
    }
}

/// One interval's rates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// End of the interval, in milliseconds since the Unix epoch (this node's wall clock).
    pub at_ms: u64,
    pub grants_per_s: f64,
    pub renewals_per_s: f64,
    pub expiries_per_s: f64,
    pub revocations_per_s: f64,
    /// Mean commit latency of the entries proposed in the interval; `None` if there were none.
    pub commit_ms: Option<f64>,
}

/// The counters and the samples taken of them.
#[derive(Debug, Default)]
pub struct Stats {
    applied: Arc<ApplyCounts>,
    commit: Arc<CommitLatency>,
    samples: Mutex<VecDeque<Sample>>,
}

/// What one sample is taken from: the counters at its start and end, over `seconds`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Reading {
    counts: [u64; 4],
    commit: (u64, u64),
}

fn sample(before: Reading, after: Reading, seconds: f64, at_ms: u64) -> Sample {
    let rate = |i: usize| after.counts[i].saturating_sub(before.counts[i]) as f64 / seconds;
    let entries = after.commit.1.saturating_sub(before.commit.1);
    let total_us = after.commit.0.saturating_sub(before.commit.0);
    Sample {
        at_ms,
        grants_per_s: rate(0),
        renewals_per_s: rate(1),
        expiries_per_s: rate(2),
        revocations_per_s: rate(3),
        commit_ms: (entries > 0).then(|| total_us as f64 / entries as f64 / 1e3),
    }
}

impl Stats {
    pub fn new(applied: Arc<ApplyCounts>, commit: Arc<CommitLatency>) -> Self {
        Stats {
            applied,
            commit,
            samples: Mutex::default(),
        }
    }

    fn reading(&self) -> Reading {
        Reading {
            counts: self.applied.read(),
            commit: self.commit.read(),
        }
    }

    fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if samples.len() == SAMPLES_KEPT {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The samples kept, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        let samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        samples.iter().cloned().collect()
    }
}

/// Takes a sample every [`SAMPLE_INTERVAL`] until the node stops.
pub async fn run(stats: Arc<Stats>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut before = (stats.reading(), tokio::time::Instant::now());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let after = (stats.reading(), tokio::time::Instant::now());
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let seconds = (after.1 - before.1).as_secs_f64().max(1e-3);
        stats.push(sample(before.0, after.0, seconds, at_ms));
        before = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_rates_over_the_interval_and_the_mean_latency() {
        let before = Reading {
            counts: [10, 100, 0, 5],
            commit: (4_000, 2),
        };
        let after = Reading {
            counts: [30, 500, 4, 5],
            commit: (10_000, 5),
        };
        assert_eq!(
            sample(before, after, 2.0, 7),
            Sample {
                at_ms: 7,
                grants_per_s: 10.0,
                renewals_per_s: 200.0,
                expiries_per_s: 2.0,
                revocations_per_s: 0.0,
                commit_ms: Some(2.0),
            }
        );
        assert_eq!(sample(after, after, 2.0, 9).commit_ms, None);
    }

    #[test]
    fn five_minutes_are_kept() {
        let stats = Stats::default();
        for at_ms in 0..(SAMPLES_KEPT as u64 + 10) {
            stats.push(sample(stats.reading(), stats.reading(), 1.0, at_ms));
        }
        let kept = stats.samples();
        assert_eq!(kept.len(), SAMPLES_KEPT);
        assert_eq!(kept[0].at_ms, 10, "the oldest go first");
    }
}
