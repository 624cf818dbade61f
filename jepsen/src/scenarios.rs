//! The CI matrix (short scenarios that must pass) and the self-test (deliberate server bugs the
//! harness must catch).

use std::path::Path;
use std::time::Duration;

use crate::nemesis::{Fault, Schedule};
use crate::run::RunConfig;
use crate::workload::Workload;

/// Where runs find the binary and keep their results.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    pub zaris: &'a Path,
    pub store: &'a Path,
}

fn scenario(
    place: Place<'_>,
    name: &str,
    workload: Workload,
    faults: &[Fault],
    nodes: u64,
    seconds: u64,
    seed: u64,
) -> RunConfig {
    RunConfig {
        name: name.to_owned(),
        workload,
        faults: faults.to_vec(),
        nodes,
        time: Duration::from_secs(seconds),
        seed,
        concurrency: 5,
        bugs: Vec::new(),
        clock_rate: None,
        schedule: Schedule::default(),
        zaris: place.zaris.to_path_buf(),
        store: place.store.to_path_buf(),
        secure: false,
    }
}

/// `config` with TLS on every link and access control on.
fn secure(mut config: RunConfig) -> RunConfig {
    config.name.push_str("-secure");
    config.secure = true;
    config
}

/// Short scenarios, 3 and 5 nodes, every workload and fault kind at least once. Three run with
/// TLS on every link and access control on (`-secure`), one per workload; with `all_secure`,
/// every one does.
pub fn ci(seed: u64, place: Place<'_>, all_secure: bool) -> Vec<RunConfig> {
    use Fault::*;
    use Workload::*;
    let secured = [
        "register-partition-3",
        "lease-pause-kill-delay-3",
        "lock-kill-delay-reset-5",
    ];
    let matrix = vec![
        scenario(
            place,
            "register-partition-3",
            Register,
            &[Partition],
            3,
            15,
            seed,
        ),
        scenario(
            place,
            "register-kill-pause-membership-5",
            Register,
            &[Kill, Pause, Membership],
            5,
            15,
            seed,
        ),
        scenario(
            place,
            "lease-pause-kill-delay-3",
            Lease,
            &[Pause, Kill, Delay],
            3,
            15,
            seed,
        ),
        scenario(
            place,
            "lease-partition-clock-5",
            Lease,
            &[Partition, Clock],
            5,
            15,
            seed,
        ),
        scenario(
            place,
            "lock-partition-pause-3",
            Lock,
            &[Partition, Pause],
            3,
            15,
            seed,
        ),
        scenario(
            place,
            "lock-kill-delay-reset-5",
            Lock,
            &[Kill, Delay, Reset],
            5,
            15,
            seed,
        ),
        scenario(
            place,
            "lease-membership-snapshot-crash-3",
            Lease,
            &[Membership, SnapshotCrash],
            3,
            20,
            seed,
        ),
    ];
    matrix
        .into_iter()
        .map(|config| {
            if all_secure || secured.contains(&config.name.as_str()) {
                secure(config)
            } else {
                config
            }
        })
        .collect()
}

/// The soak's rotation: every workload and every nemesis, 3 and 5 nodes, several faults per run.
const SOAK_ROTATION: &[(Workload, &[Fault], u64)] = {
    use Fault::*;
    use Workload::*;
    &[
        (Register, &[Partition, Kill, Pause, Membership], 5),
        (Lease, &[Partition, Kill, Pause, SnapshotCrash], 3),
        (Lock, &[Partition, Membership, Delay, Reset], 3),
        (Lease, &[Partition, Clock, Membership], 5),
        (Register, &[SnapshotCrash, Delay, Reset], 3),
        (Lock, &[Kill, Pause, SnapshotCrash, Clock], 5),
        (Lease, &[Membership, SnapshotCrash, Delay, Reset, Kill], 3),
        (Lock, &[Partition, Pause], 5),
    ]
};

/// Run `round` of a soak: the rotation's next scenario, `seconds` of faults, seed `seed +
/// round`.
pub fn soak(seed: u64, round: u64, seconds: u64, place: Place<'_>) -> RunConfig {
    let (workload, faults, nodes) = SOAK_ROTATION[(round % SOAK_ROTATION.len() as u64) as usize];
    let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
    scenario(
        place,
        &format!("soak-{}-{}-{nodes}", workload.name(), names.join("-")),
        workload,
        faults,
        nodes,
        seconds,
        seed.wrapping_add(round),
    )
}

/// What a self-test case must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The named checker fails, and one of its explanations comes from `rule` (a rule's
    /// explanations start with `[rule]`), if given.
    Caught {
        checker: &'static str,
        rule: Option<&'static str>,
    },
    /// The named checker fails and every other one passes: a bug the client-side checkers
    /// cannot observe by design, which only a white-box check sees (see jepsen/README.md).
    OnlyCaught { checker: &'static str },
}

/// One deliberate bug, the scenario that must expose it, and what the checkers must say.
#[derive(Debug)]
pub struct BugCase {
    pub bug: &'static str,
    pub config: RunConfig,
    pub expect: Expect,
}

fn caught(checker: &'static str, rule: &'static str) -> Expect {
    Expect::Caught {
        checker,
        rule: Some(rule),
    }
}

pub fn selftest(seed: u64, place: Place<'_>) -> Vec<BugCase> {
    use Fault::*;
    use Workload::*;
    let case = |bug: &'static str, name: &str, workload, faults: &[Fault], expect| {
        let mut config = scenario(
            place,
            &format!("selftest-{name}"),
            workload,
            faults,
            3,
            12,
            seed,
        );
        config.bugs = vec![bug.to_owned()];
        BugCase {
            bug,
            config,
            expect,
        }
    };
    let linearizable = Expect::Caught {
        checker: "linearizable",
        rule: None,
    };
    let never_early = caught("lease", "lease-never-early");
    let mut cases = vec![
        case(
            "stale-reads",
            "stale-reads",
            Register,
            &[Partition],
            linearizable,
        ),
        case(
            "ack-before-commit",
            "ack-before-commit",
            Register,
            &[],
            linearizable,
        ),
        case("early-expiry", "early-expiry", Lease, &[], never_early),
        case(
            "lock-ignores-holder",
            "lock-ignores-holder",
            Lock,
            &[],
            Expect::Caught {
                checker: "lock",
                rule: None,
            },
        ),
        case(
            "slightly-early-expiry",
            "slightly-early-expiry",
            Lease,
            &[],
            never_early,
        ),
    ];
    // The same 10% under the clock fault. The early margin allows a fast lessor clock's drift
    // (at 1.5x, TTL / 1.5: 33% early), which would hide a leader that is 10% early; a slow clock
    // (0.5x) widens only the late margin, so normal-speed leaders stay judged exactly. Partitions
    // move the leadership between the slow node and the others.
    let mut clock = case(
        "slightly-early-expiry",
        "slightly-early-expiry-clock",
        Lease,
        &[Partition, Clock],
        never_early,
    );
    clock.config.clock_rate = Some(0.5);
    cases.push(clock);
    // Not observable by the client-side checkers in Zaris (renewals are replicated, and an
    // expiry is skipped for a lease renewed since the leader looked): the white-box check of the
    // nodes' lessor log lines catches it.
    // Every fault is aimed at the leader, so that every one changes it (seed 4 once drew only
    // partitions of followers, and the first leader never lost its place).
    let mut promotion = case(
        "no-promotion-extension",
        "no-promotion-extension",
        Lease,
        &[Partition, Pause, Kill],
        Expect::OnlyCaught {
            checker: "promotion-extension",
        },
    );
    promotion.config.schedule = Schedule {
        leader_only: true,
        ..Schedule::default()
    };
    cases.push(promotion);
    // The leader is cut off for longer than a TTL and an election, while the workload's
    // keepalive client keeps renewing through it: the majority's leader expires leases whose
    // renewals the old one acknowledged.
    let mut renew = case(
        "renew-ack-before-commit",
        "renew-ack-before-commit",
        Lease,
        &[Partition],
        never_early,
    );
    renew.config.schedule = Schedule {
        hold_ms: 3_500..4_500,
        leader_only: true,
    };
    cases.push(renew);
    cases.push(case(
        "lease-id-reuse",
        "lease-id-reuse",
        Lease,
        &[],
        caught("lease", "lease-granted-once"),
    ));
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn the_soak_cycles_every_nemesis_and_workload_on_3_and_5_nodes() {
        let place = Place {
            zaris: Path::new("zaris"),
            store: Path::new("store"),
        };
        let runs: Vec<RunConfig> = (0..SOAK_ROTATION.len() as u64)
            .map(|round| soak(7, round, 60, place))
            .collect();
        for fault in Fault::value_variants() {
            assert!(
                runs.iter().any(|r| r.faults.contains(fault)),
                "{fault:?} is never soaked"
            );
        }
        for workload in Workload::value_variants() {
            assert!(
                runs.iter().any(|r| r.workload == *workload),
                "{workload:?} is never soaked"
            );
        }
        for nodes in [3, 5] {
            assert!(runs.iter().any(|r| r.nodes == nodes));
        }
        assert_eq!(runs[1].seed, 8, "each round has its own seed");
        assert_eq!(
            soak(7, SOAK_ROTATION.len() as u64, 60, place).faults,
            runs[0].faults,
            "the rotation wraps around"
        );
    }

    #[test]
    fn the_ci_matrix_has_every_nemesis() {
        let place = Place {
            zaris: Path::new("zaris"),
            store: Path::new("store"),
        };
        let runs = ci(1, place, false);
        for fault in Fault::value_variants() {
            assert!(
                runs.iter().any(|r| r.faults.contains(fault)),
                "{fault:?} is not in the CI matrix"
            );
        }
        // One secure run per workload by default; every run with --secure.
        for workload in Workload::value_variants() {
            assert!(
                runs.iter().any(|r| r.secure && r.workload == *workload),
                "no secure {workload:?} run in the CI matrix"
            );
        }
        assert!(ci(1, place, true).iter().all(|r| r.secure));
    }
}
