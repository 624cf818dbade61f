//! The harness's workloads and checkers against a cluster of containers: the lock or lease
//! workload runs from the host through the published ports while a container nemesis kills
//! (`docker kill`, then `docker start`), pauses (`docker pause`) or cuts off (`docker network
//! disconnect`) the Raft leader, one fault at a time. The recorded history goes through the same
//! checkers as the process harness's (`run.rs`): well-formedness, progress, the workload's own
//! rules (lease never-early and bounded-late, lock exclusion, unique and increasing tokens,
//! guarded puts, the fenced resource), the promotion rule from the nodes' logs, and no panics.
//! The history, the nemesis log and the results are saved under the run's directory.
//!
//! Nodes run with the harness's timings ([`Timings::HARNESS`]), which the timing checkers assume.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::{ContainerCluster, SETTLE, Timings};
use crate::check::{self, CheckReport, Verdict};
use crate::nemesis::{self, Event};
use crate::recorder::Recorder;
use crate::run::{self, ELECTION_TIMEOUT_MS, MIN_OK_PER_S};
use crate::workload::{self, Ctx, FencedResource, Workload};

/// How long the nemesis runs (the quiet time after it comes on top).
const FAULT_TIME: Duration = Duration::from_secs(24);
/// Workers.
const CONCURRENCY: u64 = 4;
/// The workload a history scenario drives, by scenario name.
pub fn workload_of(scenario: &str) -> Option<Workload> {
    match scenario {
        "lock-history" => Some(Workload::Lock),
        "lease-history" => Some(Workload::Lease),
        _ => None,
    }
}

/// One fault the nemesis applies to the leader (or, with no leader known, to a random node).
#[derive(Clone, Copy, Debug)]
enum Fault {
    Kill,
    Pause,
    Disconnect,
}

/// Runs `workload` on a fresh three-node cluster of `image` under the container nemesis; fails
/// unless every checker passes. Saves what it recorded in `dir`.
pub async fn run(image: &str, workload: Workload, seed: u64, dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cluster = ContainerCluster::start_with(image, 3, Timings::HARNESS).await?;
    let outcome = drive(&cluster, workload, seed).await;
    if outcome.is_err() {
        cluster.report_logs().await;
    }
    let (recorder, resources, nemesis_events, healthy_after_ns, duration_ns) = outcome?;
    let logs = cluster.logs().await;
    drop(cluster);

    let history = recorder.history();
    std::fs::write(dir.join("history.edn"), crate::edn::to_edn(&history))?;
    std::fs::write(dir.join("history.jsonl"), crate::edn::to_jsonl(&history))?;
    let nemesis_text: String = nemesis_events
        .iter()
        .map(|(t, what)| format!("{:>10.3}s {what}\n", *t as f64 / 1e9))
        .collect();
    std::fs::write(dir.join("nemesis.log"), nemesis_text)?;
    for (id, text) in &logs {
        std::fs::write(dir.join(format!("node-{id}.log")), text)?;
    }

    let faults = nemesis::disruptions(&nemesis_events, 3, healthy_after_ns);
    let (early_margin_ms, late_margin_ms) = run::timing_margins_ms(&BTreeMap::new());
    let mut reports = vec![
        check::well_formed(&history),
        check::min_rate(&history, duration_ns, MIN_OK_PER_S),
    ];
    reports.extend(run::checks_for(
        workload,
        &history,
        &resources,
        &run::Timing {
            faults: &faults,
            early_margin_ms,
            late_margin_ms,
            concurrency: CONCURRENCY,
        },
    ));
    reports.push(check::promotion::check(&logs, ELECTION_TIMEOUT_MS));
    reports.push(CheckReport {
        name: "no-panics",
        verdict: Verdict::from_violations(crate::cluster::panics(&logs)),
    });
    let summary: Vec<String> = reports.iter().map(|r| r.to_string()).collect();
    std::fs::write(dir.join("results.txt"), summary.join("\n") + "\n")?;
    let faults_applied = nemesis_events
        .iter()
        .filter(|(_, event)| !matches!(event, Event::Heal))
        .map(|(_, event)| event.kind())
        .collect::<Vec<_>>();
    println!(
        "  {} ops, faults {faults_applied:?}; history in {}",
        history.ops.len(),
        dir.display()
    );
    for report in &reports {
        println!("  {report}");
    }
    if let Some(failed) = reports.iter().find(|r| !r.verdict.is_pass()) {
        bail!("checker {} failed: {}", failed.name, failed);
    }
    Ok(())
}

type Driven = (
    Arc<Recorder>,
    BTreeMap<String, Arc<FencedResource>>,
    Vec<(u64, Event)>,
    u64,
    u64,
);

async fn drive(cluster: &ContainerCluster, workload: Workload, seed: u64) -> Result<Driven> {
    let ids = cluster.ids();
    let admin = cluster.client(&ids, Duration::from_secs(10)).await?;
    cluster.leader(&admin, None).await?;
    let recorder = Arc::new(Recorder::new(Instant::now()));
    // A client of one endpoint cannot follow a redirect from the host: the leader's address is
    // a name only the cluster's network resolves. So each node's client knows every endpoint,
    // its node's first (where it starts), and reaches the leader through the others.
    let mut per_node = BTreeMap::new();
    for id in &ids {
        let mut order = vec![*id];
        order.extend(ids.iter().copied().filter(|other| other != id));
        per_node.insert(
            *id,
            cluster
                .client_with(&order, workload::client_options())
                .await?,
        );
    }
    let ctx = Ctx::new(
        recorder.clone(),
        cluster
            .client_with(&ids, workload::client_options())
            .await?,
        cluster
            .client_with(&ids, workload::client_options())
            .await?,
        per_node,
        CONCURRENCY,
    );
    let resources = ctx.resources.clone();
    let workers = run::spawn_workers(&ctx, workload, seed);
    let events = nemesis(cluster, &admin, &recorder, seed).await;
    let healthy_after_ns = recorder.now_ns();
    let events = events?;
    let duration_ns = run::quiet_then_stop(&ctx, workers).await;
    Ok((recorder, resources, events, healthy_after_ns, duration_ns))
}

/// Faults the leader, one at a time, for [`FAULT_TIME`]; each lasts 1–3 election timeouts
/// (longer than one, so the others elect a new leader), then is healed and the cluster given
/// time to elect. Ends with every node running and connected and a leader elected.
async fn nemesis(
    cluster: &ContainerCluster,
    admin: &zaris_client::Client,
    recorder: &Recorder,
    seed: u64,
) -> Result<Vec<(u64, Event)>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut events = Vec::new();
    let ids = cluster.ids();
    let until = Instant::now() + FAULT_TIME;
    let election_timeout = Duration::from_millis(ELECTION_TIMEOUT_MS);
    while Instant::now() < until {
        tokio::time::sleep(rng.random_range(election_timeout..4 * election_timeout)).await;
        let target = match tokio::time::timeout(election_timeout, admin.leader()).await {
            Ok(Ok(leader)) if ids.contains(&leader.id) => leader.id,
            _ => ids[rng.random_range(0..ids.len())],
        };
        let fault = [Fault::Kill, Fault::Pause, Fault::Disconnect][rng.random_range(0..3)];
        let others: Vec<u64> = ids.iter().copied().filter(|id| *id != target).collect();
        let event = match fault {
            Fault::Kill => {
                cluster.kill(target).await?;
                Event::Kill { node: target }
            }
            Fault::Pause => {
                cluster.pause(target).await?;
                Event::Pause { node: target }
            }
            Fault::Disconnect => {
                cluster.disconnect(target).await?;
                Event::Partition {
                    groups: vec![vec![target], others],
                    isolated: true,
                }
            }
        };
        tracing::info!("container nemesis: {event}");
        events.push((recorder.now_ns(), event));
        tokio::time::sleep(rng.random_range(election_timeout..3 * election_timeout)).await;
        match fault {
            Fault::Kill => cluster.restart(target).await?,
            Fault::Pause => cluster.unpause(target).await?,
            Fault::Disconnect => cluster.connect(target).await?,
        }
        events.push((recorder.now_ns(), Event::Heal));
        tracing::info!("container nemesis: heal");
        cluster.leader(admin, None).await?;
    }
    // Every node back and serving, not only a majority: a node a heal missed would end the run
    // with the fault still open.
    for id in ids {
        zaris_testkit::try_eventually(&format!("node {id} to serve"), SETTLE, || async {
            let client = cluster.client(&[id], Duration::from_secs(1)).await.ok()?;
            let status = client.status().await.ok()?;
            (status.member_id == id && status.raft_leader_id.is_some()).then_some(())
        })
        .await?;
    }
    Ok(events)
}
