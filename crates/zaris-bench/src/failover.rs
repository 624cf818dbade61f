//! Failover: from stopping the Raft leader to the first write the rest of the cluster
//! acknowledges, for a crash (`kill -9`) and for a planned stop (SIGTERM, which hands
//! leadership over first), each on fresh 3-node clusters at the server's default timings (or
//! those `--election-timeout-ms` and `--heartbeat-ms` give).

use std::path::Path;
use std::time::{Duration, Instant};

use zaris_client::{Client, ClientOptions, PutOptions};
use zaris_testkit::{Serve, grow_cluster};

use crate::{Args, READY_TIMEOUT};

/// How long one write may keep retrying after the stop.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn compare(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.failover_runs > 0, "--failover-runs must be at least 1");
    for (what, planned) in [
        ("kill -9 of the leader", false),
        ("SIGTERM to the leader", true),
    ] {
        let mut samples = Vec::new();
        for _ in 0..args.failover_runs {
            let timings = (args.election_timeout_ms, args.heartbeat_ms);
            samples.push(one(&args.zaris, timings, planned).await?);
        }
        samples.sort();
        let median = samples[samples.len() / 2];
        let all: Vec<String> = samples
            .iter()
            .map(|s| format!("{}", s.as_millis()))
            .collect();
        println!(
            "failover, {what} -> first acknowledged write: median {} ms (runs: {} ms)",
            median.as_millis(),
            all.join(", ")
        );
    }
    Ok(())
}

/// One fresh 3-node cluster of `zaris` at `timings` (election timeout and heartbeat in ms, the
/// server's defaults where None): the time from stopping its leader (SIGTERM if `planned`, else
/// kill -9) to the first write the other two acknowledge.
pub async fn one(
    zaris: &Path,
    timings: (Option<u64>, Option<u64>),
    planned: bool,
) -> anyhow::Result<Duration> {
    let root = tempfile::tempdir()?;
    let (election_timeout_ms, heartbeat_ms) = timings;
    let mut nodes = grow_cluster(3, |id| {
        let mut serve = Serve::new(zaris, id, root.path()).ready_timeout(READY_TIMEOUT);
        if let Some(ms) = election_timeout_ms {
            serve = serve.election_timeout_ms(ms);
        }
        if let Some(ms) = heartbeat_ms {
            serve = serve.heartbeat_ms(ms);
        }
        serve
    })
    .await?;
    let endpoints: Vec<String> = nodes.iter().map(|n| n.endpoint().to_owned()).collect();
    let options = ClientOptions::default().with_timeout(WRITE_TIMEOUT);
    let client = Client::connect_with(endpoints, options.clone()).await?;
    client.put("warm", "up", PutOptions::default()).await?;
    let leader = client.leader().await?.id;
    let survivors: Vec<String> = nodes
        .iter()
        .filter(|n| n.id() != leader)
        .map(|n| n.endpoint().to_owned())
        .collect();
    let after = Client::connect_with(survivors, options).await?;
    let victim = nodes
        .iter_mut()
        .find(|n| n.id() == leader)
        .ok_or_else(|| anyhow::anyhow!("no process for leader {leader}"))?;
    let stopped = Instant::now();
    if planned {
        victim.terminate()?;
    } else {
        victim.kill().await;
    }
    after.put("after/stop", "ok", PutOptions::default()).await?;
    let elapsed = stopped.elapsed();
    for node in &mut nodes {
        node.kill().await;
    }
    Ok(elapsed)
}
