//! `--compare etcd`: the lease workloads on a 3-node Zaris cluster and a 3-member etcd cluster
//! (Debian's `etcd-server`) on this machine, at the same Raft timings, in one run. Each workload
//! runs on Zaris and then at once on etcd; the table gives both figures and their ratio. With
//! `--rounds N` each runs N times per system, the order alternating, and a row shows the pair
//! with the median ratio beside every pair's ratio (`rounds.rs`).
//!
//! Both clusters stay up during the workloads (an idle cluster costs a few heartbeats a second),
//! so a workload's two runs are seconds apart. Failover runs last, on fresh clusters.

mod cost;
mod etcd;
mod floor_target;
mod rounds;
mod target;
mod zaris;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::Mutex;

use self::cost::{Spent, costed};
use self::etcd::EtcdCluster;
use self::floor_target::FloorTarget;
use self::rounds::{Better, Measured, Pair, alternating, median_pair, ratios_note};
use self::target::{Renewer, Target};
use self::zaris::ZarisCluster;
pub(crate) use self::zaris::ZarisTarget;
use crate::Args;
use crate::floor::{self, FloorCluster};
use crate::load::{CALL_TIMEOUT, Sample, closed_loop, open_loop};

/// Leases granted with this TTL outlive every workload.
const TTL: Duration = Duration::from_secs(600);
/// The workloads `--compare` runs unless `--workloads` names fewer.
pub(crate) const COMPARE_WORKLOADS: &[&str] = &[
    "read1",
    "read16",
    "put1",
    "floor1",
    "floorapi1",
    "floorput1w2",
    "put16",
    "putopen",
    "grant16",
    "floorgrant16",
    "floorgrant16w2",
    "keepalive8x64",
    "keepalive64x1",
    "floorka64",
    "floorka64w2",
    "lock4",
    "floorlock4",
    "lock16",
    "populate",
    "populate1",
    "failover",
];
/// Async workers of the node-shaped floors' gRPC leader (`floorput1w2`, `floorgrant16w2`,
/// `floorka64w2`): as many as a Zaris node runs (tokio's default, one per core: two on the
/// development machine), so that the floor pays the runtime's hand-offs as a node does. The
/// other floors run their leader on `--floor-workers` (default one thread).
fn node_workers() -> u16 {
    std::thread::available_parallelism()
        .map_or(1, |cores| u16::try_from(cores.get()).unwrap_or(64))
        .min(64)
}
/// Calls per second of the open-loop put workload: about what one closed-loop client makes on
/// either system here, so that calls often overlap without queueing up.
const OPEN_LOOP_RATE: u32 = 1_000;
/// Workers of the populate phase.
const POPULATE_WORKERS: usize = 32;

/// One row of the table.
struct Row {
    workload: String,
    zaris: f64,
    etcd: f64,
    unit: &'static str,
    /// What the ratio zaris / etcd should be, as the issue states it.
    target: &'static str,
    detail: String,
}

pub async fn run(args: &Args) -> anyhow::Result<()> {
    let etcd_bin = etcd::ensure_installed(args.etcd.as_deref()).await?;
    let root = tempfile::tempdir()?;
    let seconds = Duration::from_secs(args.seconds);
    let rounds = usize::try_from(args.rounds)?;
    let zaris_cluster = ZarisCluster::start(&args.zaris, &root.path().join("zaris")).await?;
    let etcd_cluster = EtcdCluster::start_retrying(&etcd_bin, &root.path().join("etcd")).await?;
    let z = zaris_cluster.target().await?;
    let e = etcd_cluster.target().await?;
    println!(
        "zaris: 3 nodes on {}; etcd {}: 3 members; {} s per workload",
        zaris_cluster.endpoints().join(", "),
        etcd_bin.display(),
        args.seconds
    );
    let wants = |key: &str| args.workloads.iter().any(|w| w == key);
    let (zpids, epids) = (zaris_cluster.pids(), etcd_cluster.pids());
    let mut rows = Vec::new();
    // `both!(t => workload(t, ...))`: the workload on each system (`t` is its target), `rounds`
    // times, alternating, each run with what it cost that system's processes.
    macro_rules! both {
        ($t:ident => $workload:expr) => {
            alternating(
                rounds,
                |_| {
                    let $t = &z;
                    costed(&zpids, $workload)
                },
                |_| {
                    let $t = &e;
                    costed(&epids, $workload)
                },
            )
            .await?
        };
    }
    // `floor_beside!(name, workers, t => workload(t, ...))`: the workload on a fresh gRPC floor
    // cluster (logs under `name-round`, its leader on `workers` async threads) for the first
    // column and on etcd for the second, as `both!`.
    macro_rules! floor_beside {
        ($name:literal, $workers:expr, $t:ident => $workload:expr) => {
            alternating(
                rounds,
                |round| {
                    let dir = root.path().join(format!("{}-{round}", $name));
                    on_floor(dir, $workers, |floor| async move {
                        let $t = &floor;
                        $workload.await
                    })
                },
                |_| {
                    let $t = &e;
                    costed(&epids, $workload)
                },
            )
            .await?
        };
    }
    let result = async {
        if wants("read1") {
            rows.push(throughput_row(
                "serializable read, 1 client (no Raft round: the call alone)",
                "(floor)",
                both!(t => local_reads(t, 1, seconds)),
            )?);
        }
        if wants("read16") {
            rows.push(throughput_row(
                "serializable read, 16 clients (no Raft round: the calls alone, at grant × 16's \
                 concurrency)",
                "(floor)",
                both!(t => local_reads(t, 16, seconds)),
            )?);
        }
        if wants("put1") {
            rows.push(throughput_row(
                "put with lease, 1 client",
                "≥ 2",
                both!(t => puts(t, 1, seconds)),
            )?);
        }
        if wants("floor1") {
            rows.push(throughput_row(
                "replication floor, 1 client: 3 bare processes, TCP + fdatasync, no Raft, no \
                 gRPC (column 1; etcd: put with lease, 1 client)",
                "(floor)",
                alternating(
                    rounds,
                    |round| bare_floor(root.path().join(format!("floor-{round}")), seconds),
                    |_| costed(&epids, puts(&e, 1, seconds)),
                )
                .await?,
            )?);
        }
        if wants("floorapi1") {
            rows.push(throughput_row(
                "replication floor through gRPC, 1 client: the floor's leader behind a tonic \
                 unary call, no Raft (column 1; etcd: put with lease, 1 client)",
                "(floor)",
                alternating(
                    rounds,
                    |round| {
                        let dir = root.path().join(format!("floorapi-{round}"));
                        on_floor(dir, args.floor_workers, |f| {
                            floor::write_api_until(f.0, Instant::now() + seconds)
                        })
                    },
                    |_| costed(&epids, puts(&e, 1, seconds)),
                )
                .await?,
            )?);
        }
        if wants("floorput1w2") {
            rows.push(throughput_row(
                "replication floor through gRPC on a Zaris node's async workers (one per core), 1 \
                 client, each write a group-committed round, no Raft (column 1; etcd: put with \
                 lease, 1 client)",
                "(floor)",
                floor_beside!("floorput1w2", node_workers(), t => puts(t, 1, seconds)),
            )?);
        }
        if wants("put16") {
            rows.push(throughput_row(
                "put with lease, 16 clients",
                "≥ 3",
                both!(t => puts(t, 16, seconds)),
            )?);
        }
        if wants("putopen") {
            rows.push(latency_row(
                &format!(
                    "put with lease, open loop at {OPEN_LOOP_RATE}/s (independent clients): p99 latency"
                ),
                "(no target: what the write linger costs)",
                both!(t => open_puts(t, OPEN_LOOP_RATE, seconds)),
            )?);
        }
        if wants("grant16") {
            rows.push(throughput_row(
                "lease grant, 16 clients",
                "≥ 3",
                both!(t => grants(t, 16, seconds)),
            )?);
        }
        if wants("floorgrant16") {
            rows.push(throughput_row(
                "replication floor through gRPC, 16 clients group-committed, no Raft (column 1; \
                 etcd: lease grant, 16 clients)",
                "(floor)",
                floor_beside!("floorgrant16", args.floor_workers, t => grants(t, 16, seconds)),
            )?);
        }
        if wants("floorgrant16w2") {
            rows.push(throughput_row(
                "replication floor through gRPC on a Zaris node's async workers (one per core), 16 \
                 clients group-committed, no Raft (column 1; etcd: lease grant, 16 clients)",
                "(floor)",
                floor_beside!("floorgrant16w2", node_workers(), t => grants(t, 16, seconds)),
            )?);
        }
        if wants("keepalive8x64") {
            rows.push(throughput_row(
                "keepalive, 8 streams × 64 in flight",
                "≥ 1",
                both!(t => keepalives(t, 8, 64, seconds)),
            )?);
        }
        if wants("keepalive64x1") {
            rows.push(throughput_row(
                "keepalive, 64 streams × 1 in flight",
                "≥ 1.5",
                both!(t => keepalives(t, 64, 1, seconds)),
            )?);
        }
        if wants("floorka64") {
            rows.push(throughput_row(
                "replication floor through gRPC, 64 streams × 1 in flight, every message \
                 group-committed, no Raft (column 1; etcd: keepalive, 64 streams × 1)",
                "(floor)",
                floor_beside!("floorka64", args.floor_workers, t => keepalives(t, 64, 1, seconds)),
            )?);
        }
        if wants("floorka64w2") {
            rows.push(throughput_row(
                "replication floor through gRPC on a Zaris node's async workers (one per core), 64 \
                 streams × 1 in flight, every message group-committed, no Raft (column 1; etcd: \
                 keepalive, 64 streams × 1)",
                "(floor)",
                floor_beside!("floorka64w2", node_workers(), t => keepalives(t, 64, 1, seconds)),
            )?);
        }
        if wants("lock4") {
            rows.push(throughput_row(
                "lock + unlock, 4 clients / 4 locks",
                "≥ 2",
                both!(t => locks(t, 4, 4, seconds)),
            )?);
        }
        if wants("floorlock4") {
            rows.push(throughput_row(
                "replication floor through gRPC, 4 clients, two group-committed rounds per cycle, \
                 no Raft (column 1; etcd: lock + unlock, 4 clients / 4 locks)",
                "(floor)",
                floor_beside!("floorlock4", args.floor_workers, t => locks(t, 4, 4, seconds)),
            )?);
        }
        if wants("lock16") {
            rows.push(throughput_row(
                "lock + unlock, 16 clients / 4 locks",
                "keep ≈ 7",
                both!(t => locks(t, 16, 4, seconds)),
            )?);
        }
        if wants("populate") {
            let count = args.compare_leases;
            let zp = costed(&zpids, populate(&z, count)).await?;
            let ep = costed(&epids, populate(&e, count)).await?;
            rows.push(throughput_row(
                &format!("populate {count} leases with a key each"),
                "≥ 3",
                vec![Pair {
                    zaris: zp,
                    etcd: ep,
                }],
            )?);
            let (zr, er) = (
                max_rss_mib(&zaris_cluster.pids()),
                max_rss_mib(&etcd_cluster.pids()),
            );
            rows.push(Row {
                workload: format!("RSS of the largest node with {count} leases + keys"),
                zaris: zr,
                etcd: er,
                unit: "MiB",
                target: "≤ 0.5",
                detail: String::new(),
            });
        }
        if wants("populate1") {
            let count = args.compare_leases;
            let zp = costed(&zpids, populate_in_one_call(&z, count)).await?;
            let ep = costed(&epids, populate_in_one_call(&e, count)).await?;
            rows.push(throughput_row(
                &format!(
                    "populate {count} leases with a key each, one call per pair where the API \
                     has one (etcd: grant + put)"
                ),
                "≥ 3",
                vec![Pair {
                    zaris: zp,
                    etcd: ep,
                }],
            )?);
        }
        anyhow::Ok(())
    }
    .await;
    zaris_cluster.stop().await;
    etcd_cluster.stop().await;
    let result = match result {
        Ok(()) if wants("failover") => failovers(args, &etcd_bin, root.path())
            .await
            .map(|(zaris, etcd)| rows.push(failover_row(&zaris, &etcd)))
            .map_err(|e| e.context("failover")),
        other => other,
    };
    // What was measured before a failure is printed too.
    print_table(&rows);
    result
}

/// Runs `workload` on a fresh floor cluster with a gRPC leader (logs under `dir`), and what it
/// cost the floor's three processes.
async fn on_floor<F, Fut>(
    dir: std::path::PathBuf,
    workers: u16,
    workload: F,
) -> anyhow::Result<Measured>
where
    F: FnOnce(FloorTarget) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Sample>>,
{
    let cluster = FloorCluster::start_api(&dir, workers).await?;
    let fpids = cluster.pids();
    let measured = async {
        let target = FloorTarget(floor::channel(cluster.leader()).await?);
        costed(&fpids, workload(target)).await
    }
    .await;
    cluster.stop().await;
    measured
}

/// One client writing to a fresh bare replication pipeline (logs under `dir`) for `seconds`, and
/// what it cost the floor's three processes.
async fn bare_floor(dir: std::path::PathBuf, seconds: Duration) -> anyhow::Result<Measured> {
    let floor = FloorCluster::start(&dir).await?;
    let fpids = floor.pids();
    let leader = floor.leader();
    let measured = costed(&fpids, async move {
        let until = Instant::now() + seconds;
        tokio::task::spawn_blocking(move || floor::write_until(leader, until)).await?
    })
    .await;
    floor.stop().await;
    measured
}

/// The failover row: the median time from kill -9 of the leader to the first write.
fn failover_row(zf: &Sample, ef: &Sample) -> Row {
    Row {
        workload: "failover: kill -9 of the leader → first write (median)".into(),
        zaris: zf.percentile(0.5).as_secs_f64() * 1e3,
        etcd: ef.percentile(0.5).as_secs_f64() * 1e3,
        unit: "ms",
        target: "zaris ≤ 500 ms",
        detail: format!(
            "runs: zaris {} ms; etcd {} ms",
            millis_list(&zf.latencies),
            millis_list(&ef.latencies)
        ),
    }
}

/// A throughput row; its detail also says what a request cost each cluster's processes (all
/// three nodes: CPU time and context switches, the workload's setup included), and the load
/// client's CPU per request (this process, for that system's run).
fn throughput_row(workload: &str, target: &'static str, pairs: Vec<Pair>) -> anyhow::Result<Row> {
    for pair in &pairs {
        println!(
            "{workload}: zaris {:.0}/s, etcd {:.0}/s",
            pair.zaris.0.rate(),
            pair.etcd.0.rate()
        );
    }
    let (chosen, ratios) = median_pair(pairs, Better::Higher, |p| {
        p.zaris.0.rate() / p.etcd.0.rate().max(1e-9)
    })
    .ok_or_else(|| anyhow::anyhow!("{workload}: nothing measured"))?;
    let Pair {
        zaris: (zaris, zaris_cost),
        etcd: (etcd, etcd_cost),
    } = chosen;
    let detail = format!(
        "p50 {:.1} / {:.1} ms, p99 {:.1} / {:.1} ms; failed {} / {}; {}; load client's CPU {:.0} / {:.0} µs",
        ms(zaris.percentile(0.5)),
        ms(etcd.percentile(0.5)),
        ms(zaris.percentile(0.99)),
        ms(etcd.percentile(0.99)),
        zaris.failed,
        etcd.failed,
        per_request((&zaris, &zaris_cost), (&etcd, &etcd_cost)),
        zaris_cost.client.cpu_us_per(&zaris),
        etcd_cost.client.cpu_us_per(&etcd),
    ) + &ratios_note(&ratios);
    Ok(Row {
        workload: workload.to_owned(),
        zaris: zaris.rate(),
        etcd: etcd.rate(),
        unit: "/s",
        target,
        detail,
    })
}

/// A latency row for a load of fixed rate: the p99 of each system, lower being better; its
/// detail adds p50, the slowest call, what was answered and what a request cost.
fn latency_row(workload: &str, target: &'static str, pairs: Vec<Pair>) -> anyhow::Result<Row> {
    let max = |s: &Sample| s.latencies.iter().max().copied().unwrap_or_default();
    let p99 = |s: &Sample| s.percentile(0.99).as_secs_f64();
    for pair in &pairs {
        println!(
            "{workload}: zaris {:.2} ms, etcd {:.2} ms",
            p99(&pair.zaris.0) * 1e3,
            p99(&pair.etcd.0) * 1e3
        );
    }
    let (chosen, ratios) = median_pair(pairs, Better::Lower, |p| {
        p99(&p.zaris.0) / p99(&p.etcd.0).max(1e-9)
    })
    .ok_or_else(|| anyhow::anyhow!("{workload}: nothing measured"))?;
    let Pair {
        zaris: (zaris, zaris_cost),
        etcd: (etcd, etcd_cost),
    } = chosen;
    let detail = format!(
        "p50 {:.2} / {:.2} ms, max {:.1} / {:.1} ms; answered {:.0} / {:.0} /s, failed {} / {}; {}",
        ms(zaris.percentile(0.5)),
        ms(etcd.percentile(0.5)),
        ms(max(&zaris)),
        ms(max(&etcd)),
        zaris.rate(),
        etcd.rate(),
        zaris.failed,
        etcd.failed,
        per_request((&zaris, &zaris_cost), (&etcd, &etcd_cost)),
    ) + &ratios_note(&ratios);
    Ok(Row {
        workload: workload.to_owned(),
        zaris: p99(&zaris) * 1e6,
        etcd: p99(&etcd) * 1e6,
        unit: "µs",
        target,
        detail,
    })
}

/// What a request cost each cluster's servers: CPU time and context switches, Zaris / etcd.
fn per_request(
    (zaris, zaris_cost): (&Sample, &Spent),
    (etcd, etcd_cost): (&Sample, &Spent),
) -> String {
    let mut text = format!(
        "per request: CPU {:.0} / {:.0} µs, context switches {:.1} / {:.1}",
        zaris_cost.servers.cpu_us_per(zaris),
        etcd_cost.servers.cpu_us_per(etcd),
        zaris_cost.servers.switches_per(zaris),
        etcd_cost.servers.switches_per(etcd),
    );
    if zaris_cost.host.disturbed() || etcd_cost.host.disturbed() {
        text += &format!(
            "; the host took {:.0}% / {:.0}% of the CPU (steal): not this machine's rates",
            zaris_cost.host.steal_share() * 100.0,
            etcd_cost.host.steal_share() * 100.0
        );
    }
    text
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn millis_list(samples: &[Duration]) -> String {
    let all: Vec<String> = samples.iter().map(|d| d.as_millis().to_string()).collect();
    all.join(", ")
}

fn print_table(rows: &[Row]) {
    println!();
    println!("| workload | zaris | etcd | zaris / etcd | target | detail (zaris / etcd) |");
    println!("|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {:.0} {} | {:.0} {} | {:.2} | {} | {} |",
            row.workload,
            row.zaris,
            row.unit,
            row.etcd,
            row.unit,
            row.zaris / row.etcd.max(1e-9),
            row.target,
            row.detail
        );
    }
}

async fn grant_many<T: Target>(target: &T, count: usize) -> anyhow::Result<Vec<u64>> {
    futures::stream::iter((0..count).map(|_| target.grant(TTL)))
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

async fn puts<T: Target>(target: &T, workers: usize, duration: Duration) -> anyhow::Result<Sample> {
    let lease = target.grant(TTL).await?;
    // 256 keys per worker: 16 workers stay well within max_keys_per_lease (10,000).
    Ok(closed_loop(target, workers, duration, move |t, worker, n| {
        t.put(format!("bench/{worker}/{}", n % 256), vec![b'x'; 64], lease)
    })
    .await)
}

/// Puts with a lease at `rate_per_s`, whatever the puts in flight (`load::open_loop`), each to a
/// key of its own among 256.
async fn open_puts<T: Target>(
    target: &T,
    rate_per_s: u32,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let lease = target.grant(TTL).await?;
    Ok(open_loop(target, rate_per_s, duration, move |t, n| {
        t.put(format!("bench/open/{}", n % 256), vec![b'x'; 64], lease)
    })
    .await)
}

/// `workers` workers reading one key from the member they talk to, without a Raft round: what a
/// call costs each system, the floor under the rows with as many clients.
async fn local_reads<T: Target>(
    target: &T,
    workers: usize,
    duration: Duration,
) -> anyhow::Result<Sample> {
    Ok(closed_loop(target, workers, duration, |t, _, _| {
        t.read_local("bench/read".into())
    })
    .await)
}

async fn grants<T: Target>(
    target: &T,
    workers: usize,
    duration: Duration,
) -> anyhow::Result<Sample> {
    Ok(
        closed_loop(target, workers, duration, |t, _, _| async move {
            t.grant(TTL).await.map(drop)
        })
        .await,
    )
}

/// `locks` locks shared round-robin by `workers` workers, each with a lease of its own: every
/// call acquires (waiting its turn) and releases.
async fn locks<T: Target>(
    target: &T,
    workers: usize,
    locks: usize,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let leases = Arc::new(grant_many(target, workers).await?);
    Ok(closed_loop(target, workers, duration, move |t, worker, _| {
        let name = format!("bench-lock/{workers}x{locks}/{}", worker % locks);
        t.lock_cycle(name, leases[worker])
    })
    .await)
}

/// `streams` KeepAlive streams, each keeping `depth` renewals in flight, one lease per request
/// (each stream renews its own `depth` leases in turn).
async fn keepalives<T: Target>(
    target: &T,
    streams: usize,
    depth: usize,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let leases = grant_many(target, streams * depth).await?;
    let mut tasks = Vec::new();
    let started = Instant::now();
    let until = started + duration;
    for mine in leases.chunks(depth).map(<[u64]>::to_vec) {
        let mut renewer = target.renewer().await?;
        tasks.push(tokio::spawn(async move {
            let mut sample = Sample::default();
            let mut sent = VecDeque::new();
            for &lease in &mine {
                renewer.send(lease).await?;
                sent.push_back(Instant::now());
            }
            let mut next_lease = mine.iter().cycle();
            while Instant::now() < until {
                let result = match tokio::time::timeout(CALL_TIMEOUT, renewer.next()).await {
                    Ok(result) => result,
                    Err(_) => anyhow::bail!("a renewal went unanswered for {CALL_TIMEOUT:?}"),
                };
                if Instant::now() > until {
                    break;
                }
                let at = sent.pop_front().unwrap_or(until);
                match result {
                    Ok(()) => {
                        sample.ok += 1;
                        sample.latencies.push(at.elapsed());
                    }
                    Err(_) => sample.failed += 1,
                }
                if let Some(&lease) = next_lease.next() {
                    renewer.send(lease).await?;
                    sent.push_back(Instant::now());
                }
            }
            anyhow::Ok(sample)
        }));
    }
    let mut total = Sample::default();
    for task in tasks {
        total.merge(task.await??);
    }
    total.elapsed = duration;
    Ok(total)
}

/// `count` leases, each with one 64-byte key bound to it, granted and put by 32 workers: the
/// rate of (grant, put) pairs.
pub(crate) async fn populate<T: Target>(target: &T, count: usize) -> anyhow::Result<Sample> {
    populate_with_ttl(target, count, |_| TTL).await
}

/// [`populate`] (under `populate1/`), each pair in one call where the system has one
/// ([`Target::grant_with_key`]).
async fn populate_in_one_call<T: Target>(target: &T, count: usize) -> anyhow::Result<Sample> {
    populate_pairs(target, count, |target, i| {
        target.grant_with_key(TTL, format!("populate1/{i:08}"), vec![b'v'; 64])
    })
    .await
}

/// [`populate`], with each lease's TTL chosen when it is granted (`ttl(now)`).
pub(crate) async fn populate_with_ttl<T: Target>(
    target: &T,
    count: usize,
    ttl: impl Fn(Instant) -> Duration + Clone + Send + Sync + 'static,
) -> anyhow::Result<Sample> {
    populate_pairs(target, count, move |target, i| {
        let (target, ttl) = (target.clone(), ttl.clone());
        Box::pin(async move {
            let lease = target.grant(ttl(Instant::now())).await?;
            target
                .put(format!("populate/{i:08}"), vec![b'v'; 64], lease)
                .await?;
            Ok(lease)
        })
    })
    .await
}

/// Creates `count` leases with a key each, `pair(target, i)` making the `i`-th, from
/// [`POPULATE_WORKERS`] workers.
async fn populate_pairs<T: Target>(
    target: &T,
    count: usize,
    pair: impl Fn(&T, usize) -> futures::future::BoxFuture<'static, anyhow::Result<u64>>
    + Clone
    + Send
    + Sync
    + 'static,
) -> anyhow::Result<Sample> {
    let next = Arc::new(Mutex::new(0usize));
    let started = Instant::now();
    let tasks: Vec<_> = (0..POPULATE_WORKERS)
        .map(|_| {
            let (target, next, pair) = (target.clone(), next.clone(), pair.clone());
            tokio::spawn(async move {
                let mut sample = Sample::default();
                loop {
                    let i = {
                        let mut next = next.lock().await;
                        if *next >= count {
                            break;
                        }
                        *next += 1;
                        *next
                    };
                    let sent = Instant::now();
                    match tokio::time::timeout(CALL_TIMEOUT, pair(&target, i)).await {
                        Ok(Ok(_)) => {
                            sample.ok += 1;
                            sample.latencies.push(sent.elapsed());
                        }
                        Ok(Err(_)) | Err(_) => sample.failed += 1,
                    }
                }
                sample
            })
        })
        .collect();
    let mut total = Sample::default();
    for task in tasks {
        total.merge(task.await?);
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// The largest resident set among `pids`, in MiB (from /proc).
fn max_rss_mib(pids: &[u32]) -> f64 {
    pids.iter().copied().map(resident_mib).fold(0.0, f64::max)
}

/// A process's resident size (`VmRSS`), in MiB; 0 if it cannot be read.
pub(crate) fn resident_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// Kill -9 of the leader to the first acknowledged write, `args.failover_runs` times per system,
/// alternating, each on a fresh cluster.
async fn failovers(
    args: &Args,
    etcd_bin: &std::path::Path,
    root: &std::path::Path,
) -> anyhow::Result<(Sample, Sample)> {
    let (mut zaris, mut etcd) = (Sample::default(), Sample::default());
    for run in 0..args.failover_runs.max(1) {
        // Zaris as `--failover` measures it, at its default timings (those etcd runs at).
        let measured = crate::failover::one(&args.zaris, (None, None), false).await?;
        zaris.latencies.push(measured);

        let mut cluster =
            EtcdCluster::start_retrying(etcd_bin, &root.join(format!("etcd-failover-{run}")))
                .await?;
        let measured = async {
            cluster
                .target()
                .await?
                .put("warm".into(), b"up".to_vec(), 0)
                .await?;
            let survivors = cluster.kill_leader().await?;
            let stopped = Instant::now();
            etcd::put_somewhere(&survivors, Duration::from_secs(30)).await?;
            anyhow::Ok(stopped.elapsed())
        }
        .await;
        cluster.stop().await;
        etcd.latencies.push(measured?);
    }
    Ok((zaris, etcd))
}
