//! The workloads. Each prints one line: what was done, how fast.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use zaris_client::{Client, PutOptions, RangeOptions};
use zaris_core::LeaseId;

use crate::load::closed_loop;

fn rate(count: u64, duration: Duration) -> f64 {
    count as f64 / duration.as_secs_f64()
}

/// Grants per second, printed and returned.
pub async fn grants(client: &Client, clients: usize, duration: Duration) -> anyhow::Result<f64> {
    let sample = closed_loop(client, clients, duration, |client, _, _| async move {
        client.grant(Duration::from_secs(60)).await?;
        Ok(())
    })
    .await;
    println!(
        "grants: {:.0}/s ({clients} clients, {} granted, {} failed)",
        sample.rate(),
        sample.ok,
        sample.failed
    );
    Ok(sample.rate())
}

/// Puts (64-byte values bound to one lease) per second, printed and returned.
pub async fn puts_with_lease(
    client: &Client,
    clients: usize,
    duration: Duration,
) -> anyhow::Result<f64> {
    let lease = client.grant(Duration::from_secs(600)).await?.id;
    let sample = closed_loop(client, clients, duration, move |client, worker, n| {
        let options = PutOptions {
            lease: Some(lease),
            ..PutOptions::default()
        };
        // 5,000 keys in all, whichever worker writes them.
        let key = format!("bench/{}", ((worker as u64) << 32 | n) % 5_000);
        async move {
            client.put(key, vec![b'x'; 64], options).await?;
            Ok(())
        }
    })
    .await;
    println!(
        "puts with a lease: {:.0}/s ({clients} clients, {} put, {} failed)",
        sample.rate(),
        sample.ok,
        sample.failed
    );
    Ok(sample.rate())
}

/// `leases` leases renewed continuously by 16 clients, each sending batches of its share.
pub async fn keepalives(client: &Client, leases: usize, duration: Duration) -> anyhow::Result<()> {
    let mut ids = Vec::with_capacity(leases);
    let grants: Vec<_> = (0..leases)
        .map(|_| {
            let client = client.clone();
            async move { client.grant(Duration::from_secs(120)).await }
        })
        .collect();
    for chunk in futures::stream::iter(grants)
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
    {
        ids.push(chunk?.id);
    }
    let clients = 16;
    let shares: Vec<Vec<LeaseId>> = ids
        .chunks(leases.div_ceil(clients).max(1))
        .map(<[LeaseId]>::to_vec)
        .collect();
    let renewed = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + duration;
    let tasks: Vec<_> = shares
        .into_iter()
        .map(|share| {
            let (client, renewed) = (client.clone(), renewed.clone());
            tokio::spawn(async move {
                while Instant::now() < until {
                    // Each client renews its leases in batches of 100 ids per message.
                    for batch in share.chunks(100) {
                        if let Ok(ack) = client.keep_alive_once(batch.iter().copied()).await {
                            renewed.fetch_add(ack.renewed.len() as u64, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let renewed = renewed.load(Ordering::Relaxed);
    println!(
        "keepalives: {:.0} lease renewals/s over {leases} leases (16 clients, 100 ids per message, \
         each renewal committed through Raft)",
        rate(renewed, duration)
    );
    Ok(())
}

/// How long after its TTL an unrenewed lease's key disappears: `leases` leases granted at once,
/// each with a key; one prefix read every 5 ms sees which keys are gone.
pub async fn expiry_lag(client: &Client, leases: usize) -> anyhow::Result<()> {
    let ttl = Duration::from_secs(2);
    let grants: Vec<_> = (0..leases)
        .map(|i| {
            let client = client.clone();
            async move {
                let sent = Instant::now();
                let lease = client.grant(ttl).await?.id;
                let options = PutOptions {
                    lease: Some(lease),
                    ..PutOptions::default()
                };
                client.put(format!("lag/{i:05}"), "x", options).await?;
                anyhow::Ok((format!("lag/{i:05}").into_bytes(), sent))
            }
        })
        .collect();
    let mut pending: std::collections::BTreeMap<Vec<u8>, Instant> = futures::stream::iter(grants)
        .buffer_unordered(32)
        .filter_map(|r| futures::future::ready(r.ok()))
        .collect()
        .await;
    let mut lags_ms = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pending.is_empty() && Instant::now() < deadline {
        let options = RangeOptions {
            prefix: true,
            ..RangeOptions::default()
        };
        if let Ok(read) = client.range("lag/", options).await {
            let now = Instant::now();
            let present: std::collections::BTreeSet<Vec<u8>> =
                read.kvs.into_iter().map(|kv| kv.key).collect();
            pending.retain(|key, sent| {
                let gone = !present.contains(key);
                if gone {
                    lags_ms.push(
                        now.duration_since(*sent).as_millis() as i64 - ttl.as_millis() as i64,
                    );
                }
                !gone
            });
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lags_ms.sort_unstable();
    let pct = |p: f64| {
        lags_ms
            .get(((lags_ms.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(-1)
    };
    println!(
        "expiry: keys of {} unrenewed {}-s leases gone {} ms (min) / {} ms (p50) / {} ms (p99) / \
         {} ms (max) after the TTL, counted from each grant's send time; {} never seen gone",
        lags_ms.len(),
        ttl.as_secs(),
        lags_ms.first().copied().unwrap_or(-1),
        pct(0.5),
        pct(0.99),
        lags_ms.last().copied().unwrap_or(-1),
        pending.len()
    );
    Ok(())
}

/// `leases` leases expire at once while one client keeps writing: how long do writes stall?
pub async fn revoke_burst(client: &Client, leases: usize) -> anyhow::Result<()> {
    let ttl = Duration::from_secs(3);
    let grants: Vec<_> = (0..leases)
        .map(|_| {
            let client = client.clone();
            async move { client.grant(ttl).await }
        })
        .collect();
    let granted = futures::stream::iter(grants)
        .buffer_unordered(64)
        .filter(|r| futures::future::ready(r.is_ok()))
        .count()
        .await;
    let started = Instant::now();
    let mut worst = Duration::ZERO;
    let mut writes = 0u64;
    while started.elapsed() < ttl + Duration::from_secs(6) {
        let at = Instant::now();
        if client
            .put("burst/probe", "x", PutOptions::default())
            .await
            .is_ok()
        {
            writes += 1;
        }
        worst = worst.max(at.elapsed());
    }
    // Count the burst's leases (they alone have this TTL) still alive, page by page.
    let mut left = 0;
    let mut after = LeaseId::NONE;
    loop {
        let page = client.leases(after, 10_000).await?;
        left += page.leases.iter().filter(|l| l.ttl == ttl).count();
        match page.leases.last() {
            Some(last) if page.more => after = last.id,
            _ => break,
        }
    }
    println!(
        "revoke burst: {granted} leases expiring together; a concurrent writer's slowest put took \
         {} ms ({writes} puts in {:.1} s); burst leases left afterwards: {left}",
        worst.as_millis(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
