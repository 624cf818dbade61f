//! The CI matrix (short scenarios that must pass) and the self-test (deliberate server bugs the
//! harness must catch).

use std::path::Path;
use std::time::Duration;

use crate::nemesis::Fault;
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
        zaris: place.zaris.to_path_buf(),
        store: place.store.to_path_buf(),
    }
}

/// Short scenarios, 3 and 5 nodes, every workload and fault kind at least once.
pub fn ci(seed: u64, place: Place<'_>) -> Vec<RunConfig> {
    use Fault::*;
    use Workload::*;
    vec![
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
            "register-kill-pause-5",
            Register,
            &[Kill, Pause],
            5,
            15,
            seed,
        ),
        scenario(
            place,
            "lease-pause-kill-3",
            Lease,
            &[Pause, Kill],
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
    ]
}

/// One deliberate bug, the scenario that must expose it, and the checker that must fail.
#[derive(Debug)]
pub struct BugCase {
    pub bug: &'static str,
    pub config: RunConfig,
    pub must_fail: &'static str,
}

pub fn selftest(seed: u64, place: Place<'_>) -> Vec<BugCase> {
    use Fault::*;
    use Workload::*;
    let case = |bug: &'static str, workload, faults: &[Fault], must_fail| {
        let mut config = scenario(
            place,
            &format!("selftest-{bug}"),
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
            must_fail,
        }
    };
    vec![
        case("stale-reads", Register, &[Partition], "linearizable"),
        case("ack-before-commit", Register, &[], "linearizable"),
        case("early-expiry", Lease, &[], "lease"),
        case("lock-ignores-holder", Lock, &[], "lock"),
    ]
}
