//! Fault injection for the Jepsen-style harness (`jepsen/`), the crate's one seam for it:
//! rerouted peer links, a skewed lessor clock, a snapshot-install pause, and deliberate safety
//! bugs the harness must detect. Code elsewhere asks [`FaultConfig`] (`has(bug)`, `peer_addr`,
//! `lessor_ttl`, `lessor_clock`, `store_faults`) and needs no `cfg`: without the
//! `fault-injection` feature, `FaultConfig` is an empty type that answers "no fault" to every
//! question (constants the compiler folds away), and nothing can switch a fault on.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use zaris_core::DurationMs;
use zaris_raft::StoreFaults;

use crate::clock::Clock;

/// Slowest and fastest lessor clock rates accepted.
/// The file in the data dir that arms one install pause (see
/// [`FaultConfig::snapshot_install_pause_ms`]); the install removes it.
#[cfg(feature = "fault-injection")]
pub const SNAPSHOT_INSTALL_PAUSE_TRIGGER: &str = "pause-next-snapshot-install";
/// Longest `--snapshot-install-pause-ms`: well below openraft's snapshot install timeout.
#[cfg(feature = "fault-injection")]
pub const MAX_SNAPSHOT_INSTALL_PAUSE_MS: u64 = 10_000;
#[cfg(feature = "fault-injection")]
pub const CLOCK_RATE_RANGE: std::ops::RangeInclusive<f64> = 0.01..=100.0;

/// A deliberate safety bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bug {
    /// Linearizable Range reads skip the ReadIndex round: any node, followers included, answers
    /// from its own applied state without redirecting.
    StaleReads,
    /// A Lock request for a lock held by another lease is granted at once, as if the holder's
    /// lease had ended (in the state machine, so every replica agrees).
    LockIgnoresHolder,
    /// The lessor gives every lease a deadline of apply time + 0.7 × TTL: the leader expires
    /// leases 30% early.
    EarlyExpiry,
    /// A Put on the leader answers OK (with revision last applied + 1) as soon as it is
    /// proposed, without waiting for the entry to commit.
    AckBeforeCommit,
    /// Like `early-expiry`, but only 10% early: the lessor counts 0.9 × TTL.
    SlightlyEarlyExpiry,
    /// A newly elected leader promotes its lessor at once: it neither waits until it has applied
    /// everything committed before its term nor extends any deadline by the election timeout.
    NoPromotionExtension,
    /// The leader answers a keepalive as soon as its Renew is proposed, before it commits (the
    /// leases it renews are those the leader has live at that moment).
    RenewAckBeforeCommit,
    /// A Grant may ask for the id of a lease that ended (in the state machine, so every replica
    /// agrees): the ended lease's old owner then renews whoever holds that id now.
    LeaseIdReuse,
}

impl Bug {
    pub const ALL: [Bug; 8] = [
        Bug::StaleReads,
        Bug::LockIgnoresHolder,
        Bug::EarlyExpiry,
        Bug::AckBeforeCommit,
        Bug::SlightlyEarlyExpiry,
        Bug::NoPromotionExtension,
        Bug::RenewAckBeforeCommit,
        Bug::LeaseIdReuse,
    ];

    /// The name used on the command line (`--bug NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Bug::StaleReads => "stale-reads",
            Bug::LockIgnoresHolder => "lock-ignores-holder",
            Bug::EarlyExpiry => "early-expiry",
            Bug::AckBeforeCommit => "ack-before-commit",
            Bug::SlightlyEarlyExpiry => "slightly-early-expiry",
            Bug::NoPromotionExtension => "no-promotion-extension",
            Bug::RenewAckBeforeCommit => "renew-ack-before-commit",
            Bug::LeaseIdReuse => "lease-id-reuse",
        }
    }
}

impl fmt::Display for Bug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Bug {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Bug::ALL
            .into_iter()
            .find(|bug| bug.name() == text.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
                format!("unknown bug {text:?}; known: {}", names.join(", "))
            })
    }
}

/// A node's fault-injection settings ([`crate::NodeConfig::faults`]). The default injects
/// nothing.
#[cfg(feature = "fault-injection")]
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// `node id → host:port` dialed for Raft RPCs to that node instead of its membership address
    /// (the harness puts a TCP proxy on every directed node→node link).
    pub peer_overrides: std::collections::BTreeMap<u64, String>,
    /// How fast this node's lessor clock runs relative to real time (1.0: real time). openraft's
    /// own timers (election timeout, heartbeats) are not scaled: only the clock that decides
    /// lease deadlines.
    pub clock_rate: f64,
    pub bugs: std::collections::BTreeSet<Bug>,
    /// The next snapshot install after [`SNAPSHOT_INSTALL_PAUSE_TRIGGER`] appears in the data
    /// dir pauses this long between saving the snapshot and switching to its state (0: never),
    /// so the harness can kill a node in the middle of an install.
    pub snapshot_install_pause_ms: u64,
}

#[cfg(feature = "fault-injection")]
impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            peer_overrides: std::collections::BTreeMap::new(),
            clock_rate: 1.0,
            bugs: std::collections::BTreeSet::new(),
            snapshot_install_pause_ms: 0,
        }
    }
}

#[cfg(feature = "fault-injection")]
impl FaultConfig {
    /// The lessor clock runs at another rate than real time.
    pub fn clock_skewed(&self) -> bool {
        self.clock_rate != 1.0
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            CLOCK_RATE_RANGE.contains(&self.clock_rate),
            "clock rate {} is outside {:?}",
            self.clock_rate,
            CLOCK_RATE_RANGE
        );
        anyhow::ensure!(
            !self.peer_overrides.contains_key(&0),
            "peer override for node 0: node ids start at 1"
        );
        anyhow::ensure!(
            self.snapshot_install_pause_ms <= MAX_SNAPSHOT_INSTALL_PAUSE_MS,
            "snapshot install pause {} ms is above {MAX_SNAPSHOT_INSTALL_PAUSE_MS} ms",
            self.snapshot_install_pause_ms
        );
        Ok(())
    }

    /// The bugs and the clock rate, in words, when any is active (for the startup warning).
    pub fn unsafe_settings(&self) -> Option<String> {
        let mut parts: Vec<String> = self.bugs.iter().map(|b| format!("bug {b}")).collect();
        if self.clock_skewed() {
            parts.push(format!("lessor clock rate {}", self.clock_rate));
        }
        if self.snapshot_install_pause_ms > 0 {
            parts.push(format!(
                "armed snapshot installs pause {} ms",
                self.snapshot_install_pause_ms
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The part that lives in the replicated state machine.
    pub fn state_faults(&self) -> zaris_core::Faults {
        zaris_core::Faults {
            lock_ignores_holder: self.has(Bug::LockIgnoresHolder),
            lease_id_reuse: self.has(Bug::LeaseIdReuse),
        }
    }
}

/// Without the `fault-injection` feature: no fault can be switched on.
#[cfg(not(feature = "fault-injection"))]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    _none: (),
}

#[cfg(not(feature = "fault-injection"))]
impl FaultConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        Ok(())
    }

    pub fn unsafe_settings(&self) -> Option<String> {
        None
    }
}

/// The questions the rest of the node asks, answered alike in both builds' terms.
impl FaultConfig {
    pub fn has(&self, bug: Bug) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.bugs.contains(&bug);
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = bug;
            false
        }
    }

    /// The address to dial for Raft RPCs to node `target`, whose membership address is `addr`.
    pub fn peer_addr<'a>(&'a self, target: u64, addr: &'a str) -> &'a str {
        #[cfg(feature = "fault-injection")]
        if let Some(over) = self.peer_overrides.get(&target) {
            return over;
        }
        let _ = target;
        addr
    }

    /// The state-machine bugs and the install pause, for the store (`data_dir` holds the file
    /// that arms a pause).
    pub fn store_faults(&self, data_dir: &std::path::Path) -> StoreFaults {
        #[cfg(feature = "fault-injection")]
        return StoreFaults::new(
            self.state_faults(),
            std::time::Duration::from_millis(self.snapshot_install_pause_ms),
            data_dir.join(SNAPSHOT_INSTALL_PAUSE_TRIGGER),
        );
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = data_dir;
            StoreFaults::default()
        }
    }

    /// The clock the lessor reads: `clock` itself, or `clock` scaled by the clock rate. Logs the
    /// node's fault settings, loudly when they make it unsafe.
    pub fn lessor_clock(&self, node_id: u64, clock: Arc<dyn Clock>) -> Arc<dyn Clock> {
        if let Some(what) = self.unsafe_settings() {
            tracing::warn!(
                node_id,
                "FAULT INJECTION ACTIVE: {what}; this node is deliberately unsafe (test use only)"
            );
        }
        #[cfg(feature = "fault-injection")]
        {
            if !self.peer_overrides.is_empty() {
                tracing::info!(node_id, overrides = ?self.peer_overrides, "fault injection: peer overrides");
            }
            if self.clock_skewed() {
                return Arc::new(ScaledClock::new(clock, self.clock_rate));
            }
        }
        clock
    }

    /// A lease's TTL as this node's lessor counts it: 0.7 × `ttl` with `early-expiry`, 0.9 × with
    /// `slightly-early-expiry`, else `ttl`.
    pub fn lessor_ttl(&self, ttl: DurationMs) -> DurationMs {
        let tenths = if self.has(Bug::EarlyExpiry) {
            7
        } else if self.has(Bug::SlightlyEarlyExpiry) {
            9
        } else {
            return ttl;
        };
        let ttl_ms = ttl.get();
        DurationMs::new(ttl_ms / 10 * tenths + ttl_ms % 10 * tenths / 10)
    }
}

/// A clock that runs `rate` times as fast as another (a node whose clock drifts, e.g. 0.5 or
/// 1.5). It scales only what reads it: the lessor's deadlines. openraft's election timeout and
/// heartbeats, and the tokio timers of the server's loops, keep real time.
#[cfg(feature = "fault-injection")]
#[derive(Debug)]
pub struct ScaledClock {
    inner: Arc<dyn Clock>,
    rate: f64,
}

#[cfg(feature = "fault-injection")]
impl ScaledClock {
    /// `rate` must be positive and finite (see `FaultConfig::validate`).
    pub fn new(inner: Arc<dyn Clock>, rate: f64) -> Self {
        assert!(
            rate.is_finite() && rate > 0.0,
            "clock rate must be positive: {rate}"
        );
        ScaledClock { inner, rate }
    }
}

#[cfg(feature = "fault-injection")]
impl Clock for ScaledClock {
    fn elapsed(&self) -> std::time::Duration {
        // Monotonic: the inner clock never goes back, and scaling by a positive rate keeps the
        // order. Saturates instead of panicking on overflow.
        std::time::Duration::try_from_secs_f64(self.inner.elapsed().as_secs_f64() * self.rate)
            .unwrap_or(std::time::Duration::MAX)
    }
}

/// Both builds: the default configuration answers "no fault" to every question.
#[cfg(test)]
mod default_tests {
    use super::*;

    #[test]
    fn defaults_inject_nothing() {
        let faults = FaultConfig::default();
        assert_eq!(faults.unsafe_settings(), None);
        assert!(Bug::ALL.iter().all(|bug| !faults.has(*bug)));
        assert_eq!(faults.peer_addr(2, "127.0.0.1:7002"), "127.0.0.1:7002");
        assert_eq!(faults.lessor_ttl(DurationMs::new(10_000)).get(), 10_000);
        assert!(faults.validate().is_ok());
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn bug_names_round_trip_and_unknown_ones_list_the_known() {
        for bug in Bug::ALL {
            assert_eq!(bug.name().parse::<Bug>(), Ok(bug));
        }
        let error = "no-such-bug".parse::<Bug>().expect_err("unknown");
        assert!(error.contains("stale-reads"), "{error}");
    }

    #[test]
    fn defaults_inject_nothing() {
        let faults = FaultConfig::default();
        assert_eq!(faults.unsafe_settings(), None);
        assert_eq!(faults.state_faults(), zaris_core::Faults::default());
        assert_eq!(faults.lessor_ttl(DurationMs::new(10_000)).get(), 10_000);
        assert!(faults.validate().is_ok());
    }

    #[test]
    fn early_expiry_shortens_the_lessor_ttl_by_30_percent() {
        let faults = FaultConfig {
            bugs: BTreeSet::from([Bug::EarlyExpiry]),
            ..FaultConfig::default()
        };
        assert_eq!(faults.lessor_ttl(DurationMs::new(10_000)).get(), 7_000);
        assert_eq!(faults.lessor_ttl(DurationMs::new(1_005)).get(), 703);
        assert_eq!(
            faults.lessor_ttl(DurationMs::new(u64::MAX)).get(),
            u64::MAX / 10 * 7 + 3
        );
        let slightly = FaultConfig {
            bugs: BTreeSet::from([Bug::SlightlyEarlyExpiry]),
            ..FaultConfig::default()
        };
        assert_eq!(slightly.lessor_ttl(DurationMs::new(1_500)).get(), 1_350);
    }

    #[test]
    fn active_settings_are_described_and_bad_rates_refused() {
        let faults = FaultConfig {
            clock_rate: 1.5,
            bugs: BTreeSet::from([Bug::LockIgnoresHolder, Bug::StaleReads]),
            ..FaultConfig::default()
        };
        assert_eq!(
            faults.unsafe_settings().as_deref(),
            Some("bug stale-reads, bug lock-ignores-holder, lessor clock rate 1.5")
        );
        assert!(faults.state_faults().lock_ignores_holder);
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, 1_000.0] {
            let faults = FaultConfig {
                clock_rate: rate,
                ..FaultConfig::default()
            };
            assert!(faults.validate().is_err(), "rate {rate}");
        }
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod scaled_tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::clock::{ManualClock, MonotonicClock};

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
