//! The nemesis: breaks the cluster on a schedule and heals it, logging each step with the
//! history's clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;

use serde::{Deserialize, Serialize};

use crate::check::lease::Disruption;
use crate::cluster::Cluster;
use crate::proxy::Shape;
use crate::recorder::Recorder;

/// The kinds of fault a run may inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Fault {
    /// Network partitions between nodes: the leader isolated, one node isolated, random halves,
    /// or one-way (the leader cannot send).
    Partition,
    /// kill -9 a node (the leader half of the time), restart it on its data dir later.
    Kill,
    /// SIGSTOP a node (the leader half of the time) for longer than the election timeout.
    Pause,
    /// Delay with jitter on every link.
    Delay,
    /// Drop every open connection.
    Reset,
    /// One node's lessor clock runs at 0.5× or 1.5× for the whole run (set at start).
    Clock,
    /// Remove a node from the membership (the leader half of the time), kill it and wipe its
    /// data; at the heal it joins again, empty, as a learner that is promoted once it caught up.
    Membership,
    /// Cut a follower off until the leader has compacted its log past it, heal, and kill -9 the
    /// follower in the middle of the snapshot install that follows (the nodes pause each install
    /// after saving the snapshot, so the kill lands inside it); restarted at the heal.
    SnapshotCrash,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Partition => "partition",
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Delay => "delay",
            Fault::Reset => "reset",
            Fault::Clock => "clock",
            Fault::Membership => "membership",
            Fault::SnapshotCrash => "snapshot-crash",
        }
    }
}

/// How the nemesis schedules its faults. The default is the CI's: a fault every 0.8–2 s, held
/// 1–3 s (at least two election timeouts), aimed at the leader half the time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// How long each fault is held, in ms (a range; at least two election timeouts).
    pub hold_ms: std::ops::Range<u64>,
    /// Aim every fault at the Raft leader (when one is known), and make every partition isolate
    /// it. The self-test uses this to keep a leader cut off for longer than a TTL.
    pub leader_only: bool,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            hold_ms: 1_000..3_000,
            leader_only: false,
        }
    }
}

/// One thing the nemesis did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// Every peer link between different groups is cut, both ways. `isolated`: the first group
    /// is one node cut off from the rest.
    Partition {
        groups: Vec<Vec<u64>>,
        isolated: bool,
    },
    /// `node`'s outgoing peer links are cut: it can receive but not send.
    OneWay { node: u64 },
    /// kill -9; the node is restarted on its data dir at the next heal.
    Kill { node: u64 },
    /// SIGSTOP; SIGCONT at the next heal.
    Pause { node: u64 },
    /// Every link (peer and client) delayed.
    Delay,
    /// Every open connection dropped.
    Reset,
    /// `node` was removed from the membership, killed and its data wiped.
    Remove { node: u64 },
    /// Removing `node` failed; the membership may or may not be changing.
    RemoveFailed { node: u64, error: String },
    /// kill -9 of `node` after its partition was healed; `installing`: it had saved a snapshot
    /// and was in the middle of installing it (else no install began within the wait).
    SnapshotKill { node: u64, installing: bool },
    /// Every link passes again, paused nodes resumed, killed nodes restarted (and ready),
    /// removed nodes members again.
    Heal,
    /// A heal that did not complete: the fault may still be in place.
    HealFailed { error: String },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Partition { groups, isolated } => match (isolated, groups.first()) {
                (true, Some(first)) if first.len() == 1 => {
                    write!(f, "partition: isolate node {}", first[0])
                }
                _ => {
                    let parts: Vec<String> = groups.iter().map(|g| format!("{g:?}")).collect();
                    write!(f, "partition: halves {}", parts.join(" | "))
                }
            },
            Event::OneWay { node } => write!(f, "partition: node {node} cannot send (one-way)"),
            Event::Kill { node } => write!(f, "kill -9 node {node}"),
            Event::Pause { node } => write!(f, "SIGSTOP node {node}"),
            Event::Delay => f.write_str("delay every link 20 ms + up to 40 ms jitter"),
            Event::Reset => f.write_str("reset every connection"),
            Event::Remove { node } => {
                write!(f, "member remove node {node}, kill -9 it, wipe its data")
            }
            Event::RemoveFailed { node, error } => {
                write!(f, "member remove node {node} failed: {error}")
            }
            Event::SnapshotKill { node, installing } => write!(
                f,
                "kill -9 node {node} {}",
                if *installing {
                    "in the middle of a snapshot install"
                } else {
                    "(no snapshot install began)"
                }
            ),
            Event::Heal => f.write_str("heal"),
            Event::HealFailed { error } => write!(f, "heal failed: {error}"),
        }
    }
}

impl Event {
    /// The event's kind, as in `nemesis.jsonl`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Partition { .. } => "partition",
            Event::OneWay { .. } => "one-way",
            Event::Kill { .. } => "kill",
            Event::Pause { .. } => "pause",
            Event::Delay => "delay",
            Event::Reset => "reset",
            Event::Remove { .. } => "remove",
            Event::RemoveFailed { .. } => "remove-failed",
            Event::SnapshotKill {
                installing: true, ..
            } => "snapshot-kill",
            Event::SnapshotKill {
                installing: false, ..
            } => "snapshot-kill-missed",
            Event::Heal => "heal",
            Event::HealFailed { .. } => "heal-failed",
        }
    }
}

/// The log line a node writes when it paused an armed install after saving the snapshot (the
/// `--snapshot-install-pause-ms` window).
const INSTALL_PAUSE_MARKER: &str = "pausing the install";
/// The snapshot-crash fault cuts its follower off at least this long.
const SNAPSHOT_CRASH_MIN_HOLD: Duration = Duration::from_secs(4);
/// How long the snapshot-crash fault waits, after healing, for the install to begin.
const INSTALL_WAIT: Duration = Duration::from_secs(8);

/// What the nemesis did, when (on the history's clock).
pub type Log = Arc<Mutex<Vec<(u64, Event)>>>;

fn note(log: &Log, recorder: &Recorder, what: Event) {
    tracing::info!("nemesis: {what}");
    log.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((recorder.now_ns(), what));
}

/// The nemesis log as the lease checker reads it: one [`Disruption`] per fault, from its event
/// to the heal that ended it, for a cluster of `nodes`. A fault still open at `end_ns` (the run
/// healed everything and found a leader by then) ends there. A failed heal leaves the fault open.
pub fn disruptions(events: &[(u64, Event)], nodes: u64, end_ns: u64) -> Vec<Disruption> {
    let majority = |group: usize| (group as u64) * 2 > nodes;
    let mut open: Vec<Disruption> = Vec::new();
    let mut done = Vec::new();
    for (at, event) in events {
        let started = |majority: bool, restarts: bool, cuts_off: bool| Disruption {
            start_ns: *at,
            heal_ns: u64::MAX,
            majority,
            restarts,
            cuts_off,
        };
        let one_down = majority(nodes.saturating_sub(1) as usize);
        match event {
            Event::Partition { groups, .. } => open.push(started(
                groups.iter().any(|g| majority(g.len())),
                false,
                true,
            )),
            Event::OneWay { .. } => open.push(started(one_down, false, true)),
            // A removed node comes back empty and catches up like a restarted one; a failed
            // removal may still have changed the leader.
            Event::Kill { .. }
            | Event::SnapshotKill { .. }
            | Event::Remove { .. }
            | Event::RemoveFailed { .. } => open.push(started(one_down, true, true)),
            Event::Pause { .. } => open.push(started(one_down, false, true)),
            Event::Delay | Event::Reset => open.push(started(true, false, false)),
            Event::Heal => {
                for mut d in open.drain(..) {
                    d.heal_ns = *at;
                    done.push(d);
                }
            }
            Event::HealFailed { .. } => {}
        }
    }
    for mut d in open {
        d.heal_ns = end_ns.max(d.start_ns);
        done.push(d);
    }
    done.sort_by_key(|d| (d.start_ns, d.heal_ns));
    done
}

/// Cuts `node` off from every other node, both ways.
fn isolate(cluster: &Cluster, log: &Log, recorder: &Recorder, node: u64) {
    let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != node).collect();
    let groups = vec![vec![node], others];
    cluster.partition(&groups);
    note(
        log,
        recorder,
        Event::Partition {
            groups,
            isolated: true,
        },
    );
}

/// What the nemesis works on: the cluster, the faults it may inject and how, and where it notes
/// what it did.
#[derive(Debug)]
pub struct Plan {
    pub cluster: Arc<AsyncMutex<Cluster>>,
    pub faults: Vec<Fault>,
    pub seed: u64,
    pub schedule: Schedule,
    /// The cluster's election timeout: every fault is held at least twice as long.
    pub election_timeout: Duration,
    pub recorder: Arc<Recorder>,
    pub log: Log,
}

/// Injects and heals faults until `stop` (healing the last one before it returns).
pub async fn run(plan: Plan, stop: CancellationToken) {
    let Plan {
        cluster,
        faults,
        seed,
        schedule,
        election_timeout,
        recorder,
        log,
    } = plan;
    let faults: Vec<Fault> = faults.into_iter().filter(|f| *f != Fault::Clock).collect();
    if faults.is_empty() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x006e_656d_6573_6973);
    let sleep = async |duration: Duration| {
        tokio::select! {
            () = stop.cancelled() => false,
            () = tokio::time::sleep(duration) => true,
        }
    };
    loop {
        if !sleep(Duration::from_millis(rng.random_range(800..2_000))).await {
            return;
        }
        let fault = faults[rng.random_range(0..faults.len())];
        let mut hold = Duration::from_millis(rng.random_range(schedule.hold_ms.clone()))
            .max(election_timeout * 2);
        if fault == Fault::SnapshotCrash {
            // Long enough for the leader to compact its log past the cut-off follower.
            hold = hold.max(SNAPSHOT_CRASH_MIN_HOLD);
        }
        let mut guard = cluster.lock().await;
        let ids = guard.ids();
        let leader = guard.leader().await;
        let target = match leader {
            Some(leader) if rng.random_bool(0.5) || schedule.leader_only => leader,
            _ => ids[rng.random_range(0..ids.len())],
        };
        // The snapshot-crash fault's follower, and how many installs it had paused in before.
        let mut installing = None;
        match fault {
            Fault::Partition => {
                let others: Vec<u64> = ids.iter().copied().filter(|id| *id != target).collect();
                let mode = rng.random_range(0..3);
                match if schedule.leader_only { 0 } else { mode } {
                    0 => isolate(&guard, &log, &recorder, target),
                    1 => {
                        let mut shuffled = ids.clone();
                        shuffled.shuffle(&mut rng);
                        let split = shuffled.len() / 2;
                        let (a, b) = shuffled.split_at(split);
                        let groups = vec![a.to_vec(), b.to_vec()];
                        guard.partition(&groups);
                        note(
                            &log,
                            &recorder,
                            Event::Partition {
                                groups,
                                isolated: false,
                            },
                        );
                    }
                    _ => {
                        for other in &others {
                            guard.shape_peer(
                                target,
                                *other,
                                Shape {
                                    cut: true,
                                    ..Shape::default()
                                },
                            );
                        }
                        note(&log, &recorder, Event::OneWay { node: target });
                    }
                }
            }
            Fault::Kill => {
                guard.kill(target).await;
                note(&log, &recorder, Event::Kill { node: target });
            }
            Fault::Pause => {
                guard.pause(target);
                note(&log, &recorder, Event::Pause { node: target });
            }
            Fault::Delay => {
                guard.shape_all(Shape {
                    cut: false,
                    delay: Duration::from_millis(20),
                    jitter: Duration::from_millis(40),
                });
                note(&log, &recorder, Event::Delay);
            }
            Fault::Reset => {
                guard.reset_all();
                note(&log, &recorder, Event::Reset);
            }
            Fault::Membership => match guard.remove_member(target).await {
                Ok(()) => note(&log, &recorder, Event::Remove { node: target }),
                Err(err) => note(
                    &log,
                    &recorder,
                    Event::RemoveFailed {
                        node: target,
                        error: format!("{err:#}"),
                    },
                ),
            },
            Fault::SnapshotCrash => {
                let followers: Vec<u64> = ids
                    .iter()
                    .copied()
                    .filter(|id| Some(*id) != leader)
                    .collect();
                let node = followers[rng.random_range(0..followers.len())];
                isolate(&guard, &log, &recorder, node);
                guard.arm_install_pause(node);
                installing = Some((node, guard.log_count(node, INSTALL_PAUSE_MARKER)));
            }
            Fault::Clock => {}
        }
        drop(guard);
        let completed = sleep(hold).await;
        let mut guard = cluster.lock().await;
        if let Some((node, before)) = installing {
            // Reconnected, the follower needs entries the leader compacted away: it gets a
            // snapshot, and dies in the middle of installing it.
            guard.heal_network();
            let deadline = tokio::time::Instant::now() + INSTALL_WAIT;
            let mut began = false;
            while tokio::time::Instant::now() < deadline {
                if guard.log_count(node, INSTALL_PAUSE_MARKER) > before {
                    began = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            guard.kill(node).await;
            // Unused when no install began: the restarted node must not pause a later one.
            guard.disarm_install_pause(node);
            note(
                &log,
                &recorder,
                Event::SnapshotKill {
                    node,
                    installing: began,
                },
            );
            drop(guard);
            sleep(election_timeout).await;
            guard = cluster.lock().await;
        }
        guard.heal_network();
        if let Err(err) = guard.heal_all().await {
            note(
                &log,
                &recorder,
                Event::HealFailed {
                    error: format!("{err:#}"),
                },
            );
        } else {
            note(&log, &recorder, Event::Heal);
        }
        if !completed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn disruptions_pair_each_fault_with_its_heal() {
        let events = vec![
            (S, Event::Kill { node: 2 }),
            (2 * S, Event::Heal),
            (
                3 * S,
                Event::Partition {
                    groups: vec![vec![1], vec![2, 3]],
                    isolated: true,
                },
            ),
            (4 * S, Event::Heal),
            (5 * S, Event::Delay),
            (
                6 * S,
                Event::HealFailed {
                    error: "node 1 did not start".into(),
                },
            ),
            (7 * S, Event::Pause { node: 3 }),
        ];
        let found = disruptions(&events, 3, 9 * S);
        let fault = |start, heal, majority, restarts, cuts_off| Disruption {
            start_ns: start * S,
            heal_ns: heal * S,
            majority,
            restarts,
            cuts_off,
        };
        assert_eq!(
            found,
            vec![
                fault(1, 2, true, true, true),
                fault(3, 4, true, false, true),
                // A failed heal leaves the fault open; the run's end heals everything.
                fault(5, 9, true, false, false),
                fault(7, 9, true, false, true),
            ]
        );
    }

    #[test]
    fn a_partition_without_a_majority_side_has_none() {
        let split = |groups: Vec<Vec<u64>>| {
            let events = vec![
                (
                    S,
                    Event::Partition {
                        groups,
                        isolated: false,
                    },
                ),
                (2 * S, Event::Heal),
            ];
            disruptions(&events, 4, 3 * S)[0].majority
        };
        assert!(!split(vec![vec![1, 2], vec![3, 4]]));
        assert!(!split(vec![vec![1], vec![2], vec![3, 4]]));
        assert!(split(vec![vec![1], vec![2, 3, 4]]));
    }

    #[test]
    fn events_read_as_before_in_the_text_log() {
        let text: Vec<String> = [
            Event::Partition {
                groups: vec![vec![2], vec![1, 3]],
                isolated: true,
            },
            Event::Partition {
                groups: vec![vec![3], vec![1, 2]],
                isolated: false,
            },
            Event::OneWay { node: 1 },
            Event::Kill { node: 1 },
            Event::Pause { node: 2 },
            Event::Heal,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            text,
            [
                "partition: isolate node 2",
                "partition: halves [3] | [1, 2]",
                "partition: node 1 cannot send (one-way)",
                "kill -9 node 1",
                "SIGSTOP node 2",
                "heal",
            ]
        );
    }
}
