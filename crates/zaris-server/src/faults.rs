//! Fault injection for the Jepsen-style harness (`jepsen/`): rerouted peer links, a skewed lessor
//! clock, and deliberate safety bugs the harness must detect. Compiled only with the
//! `fault-injection` feature (`cargo build -p zaris --features fault-injection`): release builds
//! contain none of it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use anyhow::ensure;
use zaris_core::DurationMs;

/// Slowest and fastest lessor clock rates accepted.
/// The file in the data dir that arms one install pause (see
/// [`FaultConfig::snapshot_install_pause_ms`]); the install removes it.
pub const SNAPSHOT_INSTALL_PAUSE_TRIGGER: &str = "pause-next-snapshot-install";
/// Longest `--snapshot-install-pause-ms`: well below openraft's snapshot install timeout.
pub const MAX_SNAPSHOT_INSTALL_PAUSE_MS: u64 = 10_000;
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
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// `node id → host:port` dialed for Raft RPCs to that node instead of its membership address
    /// (the harness puts a TCP proxy on every directed node→node link).
    pub peer_overrides: BTreeMap<u64, String>,
    /// How fast this node's lessor clock runs relative to real time (1.0: real time). openraft's
    /// own timers (election timeout, heartbeats) are not scaled: only the clock that decides
    /// lease deadlines.
    pub clock_rate: f64,
    pub bugs: BTreeSet<Bug>,
    /// The next snapshot install after [`SNAPSHOT_INSTALL_PAUSE_TRIGGER`] appears in the data
    /// dir pauses this long between saving the snapshot and switching to its state (0: never),
    /// so the harness can kill a node in the middle of an install.
    pub snapshot_install_pause_ms: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            peer_overrides: BTreeMap::new(),
            clock_rate: 1.0,
            bugs: BTreeSet::new(),
            snapshot_install_pause_ms: 0,
        }
    }
}

impl FaultConfig {
    pub fn has(&self, bug: Bug) -> bool {
        self.bugs.contains(&bug)
    }

    /// The lessor clock runs at another rate than real time.
    pub fn clock_skewed(&self) -> bool {
        self.clock_rate != 1.0
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(
            CLOCK_RATE_RANGE.contains(&self.clock_rate),
            "clock rate {} is outside {:?}",
            self.clock_rate,
            CLOCK_RATE_RANGE
        );
        ensure!(
            !self.peer_overrides.contains_key(&0),
            "peer override for node 0: node ids start at 1"
        );
        ensure!(
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

    /// A lease's TTL as this node's lessor counts it: 0.7 × `ttl_ms` with `early-expiry`, 0.9 ×
    /// with `slightly-early-expiry`.
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

#[cfg(test)]
mod tests {
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
