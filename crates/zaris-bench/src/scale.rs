//! `--scale N`: a 3-node cluster loaded through the API with N leases (a million by default), each
//! with a key, as issue 13 asks: the populate rate; a concurrent single writer's latency while the
//! load crosses snapshot points (each node builds one every `--snapshot-entries` entries); each
//! node's resident size; a follower killed with kill -9, restarted on its data dir, until it
//! serves again caught up; and then all N leases expiring at one instant (each was granted with
//! the TTL that ends at a common deadline), with a single writer's latency while the leader
//! revokes them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use zaris_client::{Client, ClientOptions, PutOptions, RangeOptions};
use zaris_testkit::{Serve, ServeProcess, grow_cluster};

use crate::compare::{ZarisTarget, populate_with_ttl, resident_mib};
use crate::load::Sample;
use crate::{Args, CLIENT_TIMEOUT, READY_TIMEOUT};

/// Longest the restarted follower may take to catch up before the run gives up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(300);

/// The populate rate the common expiry deadline assumes (pairs/s); the deadline is then
/// [`DEADLINE_MARGIN`] later. On a slower machine the last leases get [`MIN_BURST_TTL`] and
/// expire after the burst, which the report shows (their keys outlive the deadline).
const ASSUMED_POPULATE_RATE: u64 = 2_000;
const DEADLINE_MARGIN: Duration = Duration::from_secs(30);
const MIN_BURST_TTL: Duration = Duration::from_secs(30);
/// Longest the expiry of all leases may take before the run gives up.
const BURST_TIMEOUT: Duration = Duration::from_secs(600);

pub async fn run(args: &Args, count: u64) -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    let serve = |id| Serve::new(&args.zaris, id, root.path()).ready_timeout(READY_TIMEOUT);
    let mut nodes = grow_cluster(3, serve).await?;
    let result = measure(count, &serve, &mut nodes).await;
    // Gone before the temporary directory is removed, whatever happened.
    for node in &mut nodes {
        node.kill().await;
    }
    result
}

async fn measure(
    count: u64,
    serve: &impl Fn(u64) -> Serve,
    nodes: &mut [ServeProcess],
) -> anyhow::Result<()> {
    let endpoints: Vec<String> = nodes.iter().map(|n| n.endpoint().to_owned()).collect();
    let options = ClientOptions::default().with_timeout(CLIENT_TIMEOUT);
    let client = Client::connect_with(endpoints.clone(), options.clone()).await?;
    println!("scale: 3 zaris processes on {}", endpoints.join(", "));

    // A writer of its own, one put at a time, for as long as the load runs.
    let stop = Arc::new(AtomicBool::new(false));
    let probe = tokio::spawn(probe_writer(client.clone(), stop.clone()));
    // Every lease expires at the same instant: its TTL runs out at `deadline`.
    let deadline =
        Instant::now() + Duration::from_secs(count / ASSUMED_POPULATE_RATE) + DEADLINE_MARGIN;
    let ttl = move |now: Instant| deadline.saturating_duration_since(now).max(MIN_BURST_TTL);
    let loaded = populate_with_ttl(&ZarisTarget(client.clone()), count as usize, ttl).await;
    stop.store(true, Ordering::Relaxed);
    let probe = probe.await?;
    let loaded = loaded?;
    println!(
        "scale: populated {} leases with a key each at {:.0}/s (p50 {:.1} ms, p99 {:.1} ms, {} \
         failed)",
        loaded.ok,
        loaded.rate(),
        ms(loaded.percentile(0.5)),
        ms(loaded.percentile(0.99)),
        loaded.failed
    );
    let snapshots: usize = nodes
        .iter()
        .map(|n| std::fs::read_to_string(n.log_path()).unwrap_or_default())
        .map(|log| log.matches("snapshot built").count())
        .sum();
    println!(
        "scale: meanwhile a single writer's put took p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
         ({} puts, {} failed), while the nodes built {snapshots} snapshots between them",
        ms(probe.percentile(0.5)),
        ms(probe.percentile(0.99)),
        ms(probe.percentile(1.0)),
        probe.ok,
        probe.failed
    );
    let resident: Vec<String> = nodes
        .iter()
        .filter_map(ServeProcess::pid)
        .map(|pid| format!("{:.0}", resident_mib(pid)))
        .collect();
    println!("scale: resident size per node: {} MiB", resident.join(", "));

    // A follower killed with kill -9 and started again on its data dir, on its old addresses.
    let leader = client.leader().await?.id;
    let index = nodes
        .iter()
        .position(|n| n.id() != leader)
        .ok_or_else(|| anyhow::anyhow!("no follower"))?;
    nodes[index].kill().await;
    let revision = client
        .put("scale/after-kill", "1", PutOptions::default())
        .await?
        .revision;
    let started = Instant::now();
    let restarted = serve(nodes[index].id())
        .listen_as(&nodes[index])
        .start()
        .await?;
    let listening = started.elapsed();
    let local = Client::connect_with([restarted.endpoint().to_owned()], options).await?;
    loop {
        if let Ok(status) = local.status().await
            && status.applied_index >= revision.get()
        {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < CATCH_UP_TIMEOUT,
            "the restarted follower did not catch up within {CATCH_UP_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let caught_up = started.elapsed();
    nodes[index] = restarted;
    println!(
        "scale: a follower killed with kill -9 and restarted: listening after {:.2} s, caught up \
         (applied the write made while it was down) after {:.2} s",
        listening.as_secs_f64(),
        caught_up.as_secs_f64()
    );
    expiry_burst(&client, deadline).await
}

/// Waits for the common deadline with a single writer running, and measures how long the
/// leader takes to expire every lease (each expiry a replicated revoke deleting its key).
async fn expiry_burst(client: &Client, deadline: Instant) -> anyhow::Result<()> {
    let populated = || async {
        let options = RangeOptions {
            prefix: true,
            limit: Some(1),
            ..RangeOptions::default()
        };
        client.range("populate/", options).await.map(|r| r.count)
    };
    let before = populated().await?;
    tokio::time::sleep_until(
        deadline
            .checked_sub(Duration::from_secs(2))
            .unwrap_or(deadline)
            .into(),
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let probe = tokio::spawn(probe_writer(client.clone(), stop.clone()));
    let mut first_gone = None;
    let all_gone = loop {
        let left = populated().await;
        let now = Instant::now();
        match left {
            Ok(0) => break Some(now),
            Ok(left) if left < before && first_gone.is_none() => first_gone = Some(now),
            _ => {}
        }
        if now > deadline + BURST_TIMEOUT {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.store(true, Ordering::Relaxed);
    let probe = probe.await?;
    let after = |at: Option<Instant>| {
        at.map_or("never".to_owned(), |at| {
            format!(
                "{:.2} s",
                at.saturating_duration_since(deadline).as_secs_f64()
            )
        })
    };
    let rate = all_gone.map_or(0.0, |at| {
        before as f64
            / at.saturating_duration_since(deadline)
                .as_secs_f64()
                .max(1e-3)
    });
    println!(
        "scale: {before} leases with a key each expiring at one instant: the first keys gone \
         after {}, all after {} ({rate:.0} expiries/s); meanwhile a single writer's put took \
         p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} puts, {} failed)",
        after(first_gone),
        after(all_gone),
        ms(probe.percentile(0.5)),
        ms(probe.percentile(0.99)),
        ms(probe.percentile(1.0)),
        probe.ok,
        probe.failed
    );
    anyhow::ensure!(
        all_gone.is_some(),
        "keys of expired leases were still there {BURST_TIMEOUT:?} after the deadline"
    );
    Ok(())
}

async fn probe_writer(client: Client, stop: Arc<AtomicBool>) -> Sample {
    let mut sample = Sample::default();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        match client.put("scale/probe", "x", PutOptions::default()).await {
            Ok(_) => {
                sample.ok += 1;
                sample.latencies.push(sent.elapsed());
            }
            Err(_) => sample.failed += 1,
        }
    }
    sample.elapsed = started.elapsed();
    sample
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
