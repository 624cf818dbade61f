//! The nemesis: breaks the cluster on a schedule and heals it, logging each step with the
//! history's clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;

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
        }
    }
}

/// What the nemesis did, for the run's log.
pub type Log = Arc<Mutex<Vec<(u64, String)>>>;

fn note(log: &Log, recorder: &Recorder, what: String) {
    tracing::info!("nemesis: {what}");
    log.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((recorder.now_ns(), what));
}

pub async fn run(
    cluster: Arc<AsyncMutex<Cluster>>,
    faults: Vec<Fault>,
    seed: u64,
    recorder: Arc<Recorder>,
    log: Log,
    stop: CancellationToken,
    election_timeout: Duration,
) {
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
        let hold = Duration::from_millis(rng.random_range(1_000..3_000)).max(election_timeout * 2);
        let mut guard = cluster.lock().await;
        let ids = guard.ids();
        let leader = guard.leader().await;
        let target = match leader {
            Some(leader) if rng.random_bool(0.5) => leader,
            _ => ids[rng.random_range(0..ids.len())],
        };
        match fault {
            Fault::Partition => {
                let others: Vec<u64> = ids.iter().copied().filter(|id| *id != target).collect();
                match rng.random_range(0..3) {
                    0 => {
                        guard.partition(&[vec![target], others.clone()]);
                        note(&log, &recorder, format!("partition: isolate node {target}"));
                    }
                    1 => {
                        let mut shuffled = ids.clone();
                        shuffled.shuffle(&mut rng);
                        let split = shuffled.len() / 2;
                        let (a, b) = shuffled.split_at(split);
                        guard.partition(&[a.to_vec(), b.to_vec()]);
                        note(&log, &recorder, format!("partition: halves {a:?} | {b:?}"));
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
                        note(
                            &log,
                            &recorder,
                            format!("partition: node {target} cannot send (one-way)"),
                        );
                    }
                }
            }
            Fault::Kill => {
                guard.kill(target).await;
                note(&log, &recorder, format!("kill -9 node {target}"));
            }
            Fault::Pause => {
                guard.pause(target);
                note(&log, &recorder, format!("SIGSTOP node {target}"));
            }
            Fault::Delay => {
                guard.shape_all(Shape {
                    cut: false,
                    delay: Duration::from_millis(20),
                    jitter: Duration::from_millis(40),
                });
                note(
                    &log,
                    &recorder,
                    "delay every link 20 ms + up to 40 ms jitter".into(),
                );
            }
            Fault::Reset => {
                guard.reset_all();
                note(&log, &recorder, "reset every connection".into());
            }
            Fault::Clock => {}
        }
        drop(guard);
        let completed = sleep(hold).await;
        let mut guard = cluster.lock().await;
        guard.heal_network();
        if let Err(err) = guard.heal_all().await {
            note(&log, &recorder, format!("heal failed: {err:#}"));
        } else {
            note(&log, &recorder, "heal".into());
        }
        if !completed {
            return;
        }
    }
}
