//! The HTTP side door: Prometheus metrics named `zaris_*`, liveness, readiness.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zaris_client::PutOptions;
use zaris_server::{Listeners, MonotonicClock, Node};
use zaris_testkit::cluster::{TestCluster, config};
use zaris_testkit::eventually;

pub async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    socket.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_are_served_over_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node_config = config(1, dir.path().join("node-1"));
    node_config.http_listen = Some("127.0.0.1:0".parse().expect("addr"));
    let any = "127.0.0.1:0".parse().expect("addr");
    let listeners = Listeners::bind(any, any).await.expect("bind");
    let node =
        Node::start_with_listeners(node_config, listeners, Arc::new(MonotonicClock::default()))
            .await
            .expect("start");
    let http = node.http_addr.expect("http address");

    assert!(get(http, "/health").await.starts_with("HTTP/1.1 200"));
    eventually("readiness", Duration::from_secs(10), || async {
        get(http, "/ready")
            .await
            .starts_with("HTTP/1.1 200")
            .then_some(())
    })
    .await;

    let client = zaris_client::Client::connect([node.addr.to_string()])
        .await
        .expect("client");
    let lease = client.grant(Duration::from_secs(30)).await.expect("grant");
    client
        .put(
            "k",
            "v",
            PutOptions {
                lease: Some(lease.id),
                ..PutOptions::default()
            },
        )
        .await
        .expect("put");
    let metrics = get(http, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    for name in [
        "zaris_applied_entries_total",
        "zaris_leases_granted_total",
        "zaris_proposals_total",
        "zaris_is_raft_leader",
        "zaris_state_bytes",
        "zaris_state_quota_bytes",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    // Counted, not only registered (the per-request counters are registered up front, at 0).
    for series in [
        "zaris_proposals_total{command=\"grant\",outcome=\"applied\"}",
        "zaris_proposals_total{command=\"put\",outcome=\"applied\"}",
        "zaris_leases_granted_total",
        "zaris_applied_entries_total",
    ] {
        let value = metrics
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse::<f64>().ok());
        assert!(
            value.is_some_and(|v| v >= 1.0),
            "{series} is {value:?} after a grant and a put:\n{metrics}"
        );
    }
    let body = metrics.split("\r\n\r\n").nth(1).unwrap_or_default();
    let samples: Vec<&str> = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(!samples.is_empty());
    for sample in samples {
        // Chunked transfer encoding interleaves hex chunk sizes; skip those.
        if sample.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        assert!(sample.starts_with("zaris_"), "unprefixed metric: {sample}");
    }
    node.shutdown().await;
}

/// Issue 9, item 5: a node whose Raft failed for good kept answering INTERNAL per request while
/// `/health` said ok, and a client that cached it as the leader never moved on. Now `/health`
/// fails, the node reports the failure to its owner (`zaris serve` exits non-zero), and clients
/// rotate to members that work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_raft_failed_fails_its_health_check_and_clients_move_on() {
    let cluster = TestCluster::start_configured(3, |c| {
        c.http_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let leader = cluster.leader().await;
    let http = cluster.node(leader).http_addr.expect("http address");
    assert!(get(http, "/health").await.starts_with("HTTP/1.1 200"));
    // The failed member first, so the client's first attempt goes there.
    let mut ids = vec![leader];
    ids.extend(cluster.followers(leader));
    let client = cluster.client(&ids).await;
    client
        .put("before", "v", PutOptions::default())
        .await
        .expect("put before");

    // openraft's core stops (as it does on a storage I/O error): the node keeps serving gRPC.
    cluster
        .node(leader)
        .raft()
        .shutdown()
        .await
        .expect("stop raft");
    let reason = tokio::time::timeout(Duration::from_secs(10), cluster.node(leader).failed())
        .await
        .expect("the node reports its failed Raft");
    assert!(!reason.is_empty());
    let health = get(http, "/health").await;
    assert!(health.starts_with("HTTP/1.1 503"), "{health}");
    assert!(health.contains("raft failed"), "{health}");
    assert!(get(http, "/ready").await.starts_with("HTTP/1.1 503"));

    // The client cached the failed member as leader; it must move on to the new leader.
    client
        .put("after", "v", PutOptions::default())
        .await
        .expect("a client rotates away from a failed member");
    cluster.shutdown().await;
}
