//! One run: start the cluster, drive a workload while the nemesis works, heal, stop, check.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::check::{self, CheckReport, Verdict};
use crate::cluster::{Cluster, Spec};
use crate::history::History;
use crate::nemesis::{self, Fault, Schedule};
use crate::recorder::Recorder;
use crate::workload::{self, Ctx, FencedResource, Workload};
use crate::{edn, logs};

/// Cluster timing for every run: fast, with the TTL floor above the election timeout.
pub const ELECTION_TIMEOUT_MS: u64 = 500;
pub const HEARTBEAT_MS: u64 = 50;
pub const MIN_TTL_MS: u64 = 1_000;
/// The workloads' lease TTL.
pub const LEASE_TTL_MS: u64 = 1_500;
/// Slack for the revoke lag and scheduling in the bounded-late check (the early checks need none).
pub const TIMING_MARGIN_MS: u64 = 250;
/// Below this many `ok` operations per second the run proves nothing.
pub const MIN_OK_PER_S: f64 = 5.0;
/// Search budget of the linearizability checker, per key.
pub const LINEAR_STEPS_PER_KEY: u64 = 2_000_000;

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub name: String,
    pub workload: Workload,
    pub faults: Vec<Fault>,
    pub nodes: u64,
    pub time: Duration,
    pub seed: u64,
    pub concurrency: u64,
    pub bugs: Vec<String>,
    /// With the `clock` fault: the lessor clock rate of the one skewed node; `None` = chosen by
    /// the seed (0.5 for even seeds, 1.5 for odd ones).
    pub clock_rate: Option<f64>,
    /// How the nemesis schedules its faults.
    pub schedule: Schedule,
    pub zaris: PathBuf,
    /// Where the history and results go (a directory per run is made inside).
    pub store: PathBuf,
    /// TLS on every link and access control on (`secure.rs`).
    pub secure: bool,
}

#[derive(Debug)]
pub struct RunOutcome {
    pub reports: Vec<CheckReport>,
    pub dir: PathBuf,
    pub ops: usize,
    /// What the nemesis did, by event kind (heals included).
    pub faults: BTreeMap<&'static str, usize>,
}

impl RunOutcome {
    pub fn passed(&self) -> bool {
        self.reports.iter().all(|r| r.verdict.is_pass())
    }

    /// Whether the named checker failed outright (not unknown), with an explanation from `rule`
    /// if one is given (a combined checker prefixes each with `[rule]`).
    pub fn failed_check(&self, name: &str, rule: Option<&str>) -> bool {
        self.reports.iter().any(|r| match &r.verdict {
            Verdict::Fail(why) if r.name == name => rule.is_none_or(|rule| {
                let prefix = format!("[{rule}]");
                why.iter().any(|w| w.starts_with(&prefix))
            }),
            _ => false,
        })
    }
}

pub async fn run(config: &RunConfig) -> Result<RunOutcome> {
    let dir = config
        .store
        .join(format!("{}-{}", config.name, config.seed));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut clock_rates = BTreeMap::new();
    if config.faults.contains(&Fault::Clock) {
        // One node's lessor clock runs fast or slow for the whole run, chosen by the seed.
        let node = 1 + config.seed % config.nodes;
        let rate = config
            .clock_rate
            .unwrap_or(if config.seed.is_multiple_of(2) {
                0.5
            } else {
                1.5
            });
        clock_rates.insert(node, rate);
    }
    let spec = Spec {
        nodes: config.nodes,
        zaris: config.zaris.clone(),
        root: dir.clone(),
        election_timeout_ms: ELECTION_TIMEOUT_MS,
        heartbeat_ms: HEARTBEAT_MS,
        min_ttl_ms: MIN_TTL_MS,
        bugs: config.bugs.clone(),
        clock_rates: clock_rates.clone(),
        // Snapshots every few dozen entries, so that a node cut off, removed or killed for a
        // few seconds catches up by snapshot install, not from the log.
        snapshot_entries: catches_up_by_snapshot(&config.faults).then_some(SNAPSHOT_ENTRIES),
        snapshot_install_pause_ms: config
            .faults
            .contains(&Fault::SnapshotCrash)
            .then_some(SNAPSHOT_INSTALL_PAUSE_MS),
        secure: config
            .secure
            .then(|| crate::secure::Secure::new(&dir.join("certs")))
            .transpose()?,
    };
    let cluster = Cluster::start(spec).await?;
    cluster
        .wait_for_leader(Duration::from_secs(20))
        .await
        .context("the cluster never elected a leader")?;
    if let Some(secure) = &cluster.spec.secure {
        secure
            .enable_auth(cluster.endpoints().into_values().collect())
            .await?;
    }
    let cluster = Arc::new(AsyncMutex::new(cluster));
    let outcome = drive(config, &cluster, &dir).await;
    let mut guard = cluster.lock().await;
    guard.stop().await;
    let (recorder, resources, nemesis_log, healthy_after_ns, duration_ns) = outcome?;

    let history = recorder.history();
    std::fs::write(dir.join("history.edn"), edn::to_edn(&history))?;
    std::fs::write(dir.join("history.jsonl"), edn::to_jsonl(&history))?;
    let nemesis_events = nemesis_log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let nemesis_text: String = nemesis_events
        .iter()
        .map(|(t, what)| format!("{:>10.3}s {what}\n", *t as f64 / 1e9))
        .collect();
    std::fs::write(dir.join("nemesis.log"), nemesis_text)?;
    let nemesis_json: String = nemesis_events
        .iter()
        .map(|(time_ns, event)| {
            let mut line = serde_json::json!({ "time_ns": time_ns });
            if let (Some(line), Ok(serde_json::Value::Object(fields))) =
                (line.as_object_mut(), serde_json::to_value(event))
            {
                line.extend(fields);
            }
            line.to_string() + "\n"
        })
        .collect();
    std::fs::write(dir.join("nemesis.jsonl"), nemesis_json)?;
    let faults = nemesis::disruptions(&nemesis_events, config.nodes, healthy_after_ns);

    let mut reports = vec![
        check::well_formed(&history),
        check::min_rate(&history, duration_ns, MIN_OK_PER_S),
    ];
    let (early_margin_ms, late_margin_ms) = timing_margins_ms(&clock_rates);
    // What the timing checks were given, to check the saved history again (see `recheck`).
    let params = serde_json::json!({
        "workload": config.workload.name(),
        "nodes": config.nodes,
        "concurrency": config.concurrency,
        "election_timeout_ms": ELECTION_TIMEOUT_MS,
        "early_margin_ms": early_margin_ms,
        "late_margin_ms": late_margin_ms,
        "healthy_after_ns": healthy_after_ns,
        "clock_rates": clock_rates,
    });
    std::fs::write(dir.join("checks.json"), params.to_string() + "\n")?;
    reports.extend(checks_for(
        config.workload,
        &history,
        &resources,
        &Timing {
            faults: &faults,
            early_margin_ms,
            late_margin_ms,
            concurrency: config.concurrency,
        },
    ));
    let mut node_logs = BTreeMap::new();
    let mut dump_errors = Vec::new();
    for id in guard.ids() {
        match logs::dump(&config.zaris, &guard.data_dir(id)) {
            Ok(log) => {
                node_logs.insert(id, log);
            }
            Err(err) => dump_errors.push(format!("node {id}: {err:#}")),
        }
    }
    reports.push(if dump_errors.is_empty() {
        logs::agree(&node_logs)
    } else {
        CheckReport {
            name: "log-agreement",
            verdict: Verdict::Unknown(dump_errors.join("; ")),
        }
    });
    let node_log_texts = guard.logs();
    reports.push(check::promotion::check(
        &node_log_texts,
        ELECTION_TIMEOUT_MS,
    ));
    let panics = crate::cluster::panics(&node_log_texts);
    reports.push(CheckReport {
        name: "no-panics",
        verdict: Verdict::from_violations(panics),
    });
    let summary: Vec<String> = reports.iter().map(|r| r.to_string()).collect();
    std::fs::write(dir.join("results.txt"), summary.join("\n") + "\n")?;
    let mut fault_counts = BTreeMap::new();
    for (_, event) in &nemesis_events {
        *fault_counts.entry(event.kind()).or_insert(0) += 1;
    }
    Ok(RunOutcome {
        reports,
        dir,
        ops: history.ops.len(),
        faults: fault_counts,
    })
}

type Driven = (
    Arc<Recorder>,
    BTreeMap<String, Arc<FencedResource>>,
    nemesis::Log,
    u64,
    u64,
);

async fn drive(
    config: &RunConfig,
    cluster: &Arc<AsyncMutex<Cluster>>,
    _dir: &std::path::Path,
) -> Result<Driven> {
    let recorder = Arc::new(Recorder::new(Instant::now()));
    let (client, keepalive, per_node) = {
        let guard = cluster.lock().await;
        // Workers call as `worker` in a secure run (the harness's own calls as the admin).
        let options = match &guard.spec.secure {
            Some(secure) => workload::client_options().with_token(secure.worker.clone()),
            None => workload::client_options(),
        };
        let client = guard.client(options.clone()).await?;
        let keepalive = guard.client(options.clone()).await?;
        let mut per_node = BTreeMap::new();
        for id in guard.ids() {
            per_node.insert(id, guard.client_of(id, options.clone()).await?);
        }
        (client, keepalive, per_node)
    };
    let ctx = Ctx::new(
        recorder.clone(),
        client,
        keepalive,
        per_node,
        config.concurrency,
    );
    let resources = ctx.resources.clone();
    let workers = spawn_workers(&ctx, config.workload, config.seed);
    let nemesis_log: nemesis::Log = Arc::new(Mutex::new(Vec::new()));
    let stop_nemesis = CancellationToken::new();
    let nemesis = tokio::spawn(nemesis::run(
        nemesis::Plan {
            cluster: cluster.clone(),
            faults: config.faults.clone(),
            seed: config.seed,
            schedule: config.schedule.clone(),
            election_timeout: Duration::from_millis(ELECTION_TIMEOUT_MS),
            recorder: recorder.clone(),
            log: nemesis_log.clone(),
        },
        stop_nemesis.clone(),
    ));
    tokio::time::sleep(config.time).await;
    stop_nemesis.cancel();
    let _ = nemesis.await;
    {
        let mut guard = cluster.lock().await;
        guard.heal_all().await?;
        guard.wait_for_leader(Duration::from_secs(20)).await?;
    }
    let healthy_after_ns = recorder.now_ns();
    let duration_ns = quiet_then_stop(&ctx, workers).await;
    Ok((
        recorder,
        resources,
        nemesis_log,
        healthy_after_ns,
        duration_ns,
    ))
}

/// The quiet time at the end of a run: the workload goes on against a healthy cluster, so leases
/// left to expire are seen to go, and late effects of the faults show up in the history. Then
/// the workers stop. Returns the run's duration (the recorder's clock).
pub async fn quiet_then_stop(ctx: &Ctx, mut workers: tokio::task::JoinSet<()>) -> u64 {
    tokio::time::sleep(Duration::from_millis(
        3 * LEASE_TTL_MS + 2 * ELECTION_TIMEOUT_MS,
    ))
    .await;
    ctx.stop.cancel();
    while workers.join_next().await.is_some() {}
    ctx.recorder.now_ns()
}

/// Starts `ctx.slots` workers of `workload`; they run until `ctx.stop` is cancelled.
pub fn spawn_workers(ctx: &Arc<Ctx>, workload: Workload, seed: u64) -> tokio::task::JoinSet<()> {
    let mut workers = tokio::task::JoinSet::new();
    for slot in 0..ctx.slots {
        let ctx = ctx.clone();
        workers.spawn(async move {
            match workload {
                Workload::Register => workload::register::run(&ctx, seed, slot).await,
                Workload::Lease => workload::lease::run(&ctx, seed, slot).await,
                Workload::Lock => workload::lock::run(&ctx, seed, slot).await,
            }
        });
    }
    workers
}

/// The timing checks' margins in ms, `(early, late)`, for lessor clocks running at `clock_rates`
/// (empty without the `clock` fault); the contract's bounds hold "up to the clock-rate drift"
/// (docs/semantics.md).
/// - `early` (lease never-early, lock exclusion) has no scheduling slack: those rules compare when
///   an observation *completed* with when a renewal was *invoked*. Only a fast lessor clock,
///   rate `r > 1`, expires early: after `ttl / r` of real time, `ttl * (1 - 1/r)` early. A slow
///   one only expires late.
/// - `late` (lease bounded-late, added to each bound): [`TIMING_MARGIN_MS`] for the revoke lag
///   and scheduling, plus `(ttl + election_timeout) * (1/r - 1)` for a slow clock: a slow lessor
///   counts both the TTL and a promotion's extension slowly.
///
/// Both are rounded up to the millisecond, so neither is below the drift.
pub fn timing_margins_ms(clock_rates: &BTreeMap<u64, f64>) -> (u64, u64) {
    let max_rate = clock_rates.values().copied().fold(1.0f64, f64::max);
    let min_rate = clock_rates.values().copied().fold(1.0f64, f64::min);
    let ttl_ms = LEASE_TTL_MS as f64;
    let early_ms = LEASE_TTL_MS.saturating_sub((ttl_ms / max_rate).floor() as u64);
    let counted_ms = LEASE_TTL_MS + ELECTION_TIMEOUT_MS;
    let late_drift_ms = ((counted_ms as f64 / min_rate).ceil() as u64).saturating_sub(counted_ms);
    (early_ms, TIMING_MARGIN_MS + late_drift_ms)
}

/// `--snapshot-entries` for runs whose faults should make nodes catch up by snapshot (the lease
/// workload commits about 20 entries a second).
const SNAPSHOT_ENTRIES: u64 = 20;
/// `--snapshot-install-pause-ms` for runs with the snapshot-crash fault: the nemesis kills the
/// node within this window.
const SNAPSHOT_INSTALL_PAUSE_MS: u64 = 1_000;

fn catches_up_by_snapshot(faults: &[Fault]) -> bool {
    faults.contains(&Fault::SnapshotCrash) || faults.contains(&Fault::Membership)
}

/// What the timing checks need to know about a run.
#[derive(Clone, Copy, Debug)]
pub struct Timing<'a> {
    pub faults: &'a [check::lease::Disruption],
    pub early_margin_ms: u64,
    pub late_margin_ms: u64,
    pub concurrency: u64,
}

/// The workload's own checkers (lease, lock, linearizability) on a run's history.
pub fn checks_for(
    workload: Workload,
    history: &History,
    resources: &BTreeMap<String, Arc<FencedResource>>,
    timing: &Timing<'_>,
) -> Vec<CheckReport> {
    let Timing {
        faults,
        early_margin_ms,
        late_margin_ms,
        concurrency,
    } = *timing;
    match workload {
        Workload::Register => vec![check::linear::check_linearizable(
            history,
            LINEAR_STEPS_PER_KEY,
        )],
        Workload::Lease => vec![check::lease::check(
            history,
            &check::lease::LeaseParams {
                election_timeout_ms: ELECTION_TIMEOUT_MS,
                early_margin_ms,
                late_margin_ms,
                faults,
                concurrency,
            },
        )],
        Workload::Lock => {
            let logs: BTreeMap<String, Vec<(u64, u64, bool)>> = resources
                .iter()
                .map(|(name, resource)| (name.clone(), resource.log()))
                .collect();
            vec![check::lock::check(
                history,
                &check::lock::LockParams { early_margin_ms },
                &logs,
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::{ok, ok_same};
    use crate::history::Call;
    use crate::workload::lock::LOCK;

    const MS: u64 = 1_000_000;

    fn timing(early_margin_ms: u64, late_margin_ms: u64) -> Timing<'static> {
        Timing {
            faults: &[],
            early_margin_ms,
            late_margin_ms,
            concurrency: 5,
        }
    }

    fn grant(p: u64, lease: u64) -> crate::check::testkit::Spec {
        ok(
            p,
            0,
            MS,
            Call::Grant {
                lease: None,
                ttl_ms: LEASE_TTL_MS,
                keys: Vec::new(),
            },
            Call::Grant {
                lease: Some(lease),
                ttl_ms: LEASE_TTL_MS,
                keys: Vec::new(),
            },
        )
    }

    /// The lease checks as `run` configures them, for one node's lessor clock at `rate` (`None`
    /// = no clock fault), on a lease granted over [0, 1ms], its key put over [2ms, 3ms] and read
    /// gone over [4ms, gone_ms].
    fn lease_gone_at(rate: Option<f64>, gone_ms: u64) -> Verdict {
        let rates: BTreeMap<u64, f64> = rate.map(|r| (1, r)).into_iter().collect();
        let (early, late) = timing_margins_ms(&rates);
        let keys = vec!["a".to_string()];
        let h = crate::check::testkit::history(&[
            grant(1, 5),
            ok_same(
                1,
                2 * MS,
                3 * MS,
                Call::PutLeased {
                    lease: 5,
                    keys: keys.clone(),
                },
            ),
            ok(
                2,
                4 * MS,
                gone_ms * MS,
                Call::GetLeased {
                    lease: 5,
                    keys: keys.clone(),
                    present: None,
                },
                Call::GetLeased {
                    lease: 5,
                    keys,
                    present: Some(vec![]),
                },
            ),
        ]);
        assert_eq!(check::well_formed(&h).verdict, Verdict::Pass);
        let mut reports = checks_for(Workload::Lease, &h, &BTreeMap::new(), &timing(early, late));
        assert_eq!(reports.len(), 1);
        reports.remove(0).verdict
    }

    /// Issue 9, item 8: never-early allows the clock-rate drift and nothing else. A lessor clock
    /// at rate r > 1 legitimately expires at ttl / r of real time; one at r <= 1 never early.
    #[test]
    fn never_early_allows_exactly_the_clock_drift() {
        // (clock rate, earliest legitimate disappearance in ms of a 1500 ms TTL)
        let mut wrong = Vec::new();
        for (rate, earliest_ms) in [(None, 1500), (Some(0.5), 1500), (Some(1.5), 1000)] {
            let on_time = lease_gone_at(rate, earliest_ms);
            if on_time != Verdict::Pass {
                wrong.push(format!(
                    "rate {rate:?}: gone at {earliest_ms}ms: {on_time:?}"
                ));
            }
            let early = lease_gone_at(rate, earliest_ms - 1);
            let caught = matches!(&early, Verdict::Fail(why)
                if why.iter().any(|w| w.starts_with("[lease-never-early]")));
            if !caught {
                wrong.push(format!(
                    "rate {rate:?}: gone at {}ms: {early:?}",
                    earliest_ms - 1
                ));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// Issue 9, item 10: with the margins `run` passes, the lock checks flag a hand-over that
    /// completes before the holder's `t_send + ttl` (no clock fault: no drift to allow).
    #[test]
    fn the_lock_checks_flag_a_hand_over_before_t_send_plus_ttl() {
        let (early, late) = timing_margins_ms(&BTreeMap::new());
        let acquire = |p: u64, lease: u64, start: u64, end: u64, token: u64| {
            ok(
                p,
                start,
                end,
                Call::Acquire {
                    lock: LOCK.into(),
                    lease,
                    token: None,
                },
                Call::Acquire {
                    lock: LOCK.into(),
                    lease,
                    token: Some(token),
                },
            )
        };
        let verdict = |handed_over_ms: u64| {
            let h = crate::check::testkit::history(&[
                grant(1, 1),
                grant(2, 2),
                acquire(1, 1, 2 * MS, 3 * MS, 10),
                acquire(2, 2, 4 * MS, handed_over_ms * MS, 15),
            ]);
            assert_eq!(check::well_formed(&h).verdict, Verdict::Pass);
            let mut reports =
                checks_for(Workload::Lock, &h, &BTreeMap::new(), &timing(early, late));
            assert_eq!(reports.len(), 1);
            reports.remove(0).verdict
        };
        assert_eq!(verdict(LEASE_TTL_MS), Verdict::Pass);
        match verdict(LEASE_TTL_MS - 1) {
            Verdict::Fail(why) => assert!(
                why.iter().any(|w| w.starts_with("[lock-exclusion]")),
                "{why:?}"
            ),
            other => panic!("a hand-over 1ms early passed: {other:?}"),
        }
    }

    /// Calibration, not a check: for the saved lease runs named in `JEPSEN_RUNS` (run dirs,
    /// space separated), how close the sightings of live leases came to their bounded-late
    /// bounds, during the faults and after. Run with `cargo test -p zaris-jepsen -- --ignored
    /// --nocapture late_room`.
    #[test]
    #[ignore = "reads saved runs named in JEPSEN_RUNS"]
    fn late_room_of_saved_runs() {
        let runs = std::env::var("JEPSEN_RUNS").unwrap_or_default();
        for dir in runs.split_whitespace().map(std::path::Path::new) {
            let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let Ok(history) = crate::edn::from_jsonl(&read("history.jsonl")) else {
                continue;
            };
            let params: serde_json::Value =
                serde_json::from_str(&read("checks.json")).unwrap_or_default();
            if params["workload"] != "lease" {
                continue;
            }
            let number = |key: &str| params[key].as_u64().unwrap_or(0);
            let events: Vec<(u64, nemesis::Event)> = read("nemesis.jsonl")
                .lines()
                .filter_map(|line| {
                    let value: serde_json::Value = serde_json::from_str(line).ok()?;
                    let time = value["time_ns"].as_u64()?;
                    Some((time, serde_json::from_value(value).ok()?))
                })
                .collect();
            let healthy = number("healthy_after_ns");
            let faults = nemesis::disruptions(&events, number("nodes"), healthy);
            let sightings = check::lease::late_sightings(
                &history,
                &check::lease::LeaseParams {
                    election_timeout_ms: number("election_timeout_ms"),
                    early_margin_ms: number("early_margin_ms"),
                    late_margin_ms: number("late_margin_ms"),
                    faults: &faults,
                    concurrency: number("concurrency"),
                },
            );
            let room = |during: bool| {
                let rooms: Vec<i128> = sightings
                    .iter()
                    .filter(|(seen, bound)| (*seen < healthy) == during && *bound != u64::MAX)
                    .map(|(seen, bound)| i128::from(*bound) - i128::from(*seen))
                    .collect();
                let least = rooms.iter().min().map(|r| r / 1_000_000);
                (rooms.len(), least)
            };
            let late = sightings
                .iter()
                .filter(|(seen, bound)| seen > bound)
                .count();
            println!(
                "{}: {} sightings, {late} late; during faults (judged, least room ms): {:?}; \
                 after: {:?}",
                dir.display(),
                sightings.len(),
                room(true),
                room(false)
            );
        }
    }
}
