//! `--console [N]`: how the console's JSON API answers with N leases (each with a key) loaded
//! into a 3-node cluster through the gRPC API: each page the console loads, asked of the leader
//! and of a follower (which forwards to the leader), 30 times each, one HTTP/1.1 connection per
//! call as a browser tab refreshing a page would open at worst. Latency p50 / p99 / max and the
//! answer's size show that no page grows with the number of leases.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zaris_client::{Client, ClientOptions};
use zaris_testkit::{Serve, grow_cluster};

use crate::compare::{ZarisTarget, populate};
use crate::load::Sample;
use crate::{Args, CLIENT_TIMEOUT, READY_TIMEOUT};

/// Calls per page and member.
const CALLS: usize = 30;

pub async fn run(args: &Args, count: u64) -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    let http_ports = (0..3)
        .map(|_| free_port())
        .collect::<std::io::Result<Vec<u16>>>()?;
    let mut nodes = grow_cluster(3, |id| {
        let port = http_ports[(id - 1) as usize];
        Serve::new(&args.zaris, id, root.path())
            .ready_timeout(READY_TIMEOUT)
            .args(["--http".to_owned(), format!("127.0.0.1:{port}")])
    })
    .await?;
    let endpoints: Vec<String> = nodes.iter().map(|n| n.endpoint().to_owned()).collect();
    let client = Client::connect_with(
        endpoints,
        ClientOptions::default().with_timeout(CLIENT_TIMEOUT),
    )
    .await?;
    let result = measure(&client, &http_ports, count).await;
    for node in &mut nodes {
        node.kill().await;
    }
    result
}

async fn measure(client: &Client, http_ports: &[u16], count: u64) -> anyhow::Result<()> {
    let loaded = populate(&ZarisTarget(client.clone()), count as usize).await?;
    println!(
        "loaded {count} leases, each with a 64-byte key, at {:.0} pairs/s",
        loaded.rate()
    );
    let leader = client.leader().await?.id;
    let follower = (1..=3u64)
        .find(|id| *id != leader)
        .ok_or_else(|| anyhow::anyhow!("no follower"))?;
    let first = client
        .leases(zaris_client::LeaseId::NONE, 1)
        .await?
        .leases
        .first()
        .map(|lease| lease.id.get())
        .ok_or_else(|| anyhow::anyhow!("no leases"))?;
    let middle = first + count / 2;
    let pages = [
        (
            "leases, first page of 50",
            "/api/v1/leases?limit=50".to_owned(),
        ),
        (
            "leases, a middle page of 50",
            format!("/api/v1/leases?after={middle}&limit=50"),
        ),
        (
            "leases, the last page",
            format!("/api/v1/leases?after={}&limit=50", first + count - 26),
        ),
        ("one lease with its key", format!("/api/v1/leases/{middle}")),
        (
            "locks, first page of 50",
            "/api/v1/locks?limit=50".to_owned(),
        ),
        ("cluster", "/api/v1/cluster".to_owned()),
        ("node (answered locally)", "/api/v1/node".to_owned()),
    ];
    println!();
    println!("| page | asked of | p50 | p99 | max | answer |");
    println!("|---|---|---|---|---|---|");
    for (name, path) in &pages {
        for (role, id) in [("leader", leader), ("follower", follower)] {
            let port = http_ports[(id - 1) as usize];
            let mut sample = Sample::default();
            let mut bytes = 0;
            for _ in 0..CALLS {
                let started = Instant::now();
                let (status, body) = get(port, path).await?;
                sample.latencies.push(started.elapsed());
                anyhow::ensure!(status == 200, "{path} on node {id}: {status} {body}");
                bytes = body.len();
            }
            println!(
                "| {name} | {role} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} KiB |",
                ms(sample.percentile(0.5)),
                ms(sample.percentile(0.99)),
                ms(sample.latencies.iter().copied().max().unwrap_or_default()),
                bytes as f64 / 1024.0
            );
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One GET on its own connection: the status and the body.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(CLIENT_TIMEOUT, socket.read_to_string(&mut response)).await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP head in {response:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}
