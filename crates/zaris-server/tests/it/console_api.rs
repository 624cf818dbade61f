//! The console's JSON API (`/api/v1/...` on `--http`) against a real 3-node cluster: any member
//! answers, a follower through the leader, with the gRPC API's checks and limits.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zaris_client::{LockOutcome, PutOptions};
use zaris_core::LeaseId;
use zaris_testkit::cluster::TestCluster;

/// One HTTP/1.1 call: the status and the body parsed as JSON.
pub async fn call(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    authorization: Option<&str>,
) -> (u16, Value) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut auth =
        authorization.map_or(String::new(), |value| format!("Authorization: {value}\r\n"));
    if method == "POST" {
        auth.push_str("X-Zaris-Action: 1\r\n");
    }
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: 0\r\n\
         Connection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    socket.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, body)
}

/// `size` nodes, each serving `--http` on a port the OS picks (`NodeHandle::http_addr`).
pub async fn with_http(size: u64) -> TestCluster {
    TestCluster::start_configured(size, |config| {
        config.http_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await
}

pub async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    call(addr, "GET", path, None).await
}

pub fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_answers_the_json_api_through_the_leader() {
    let cluster = with_http(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let http = |id: u64| cluster.node(id).http_addr.expect("http address");
    let client = cluster.client(&[1, 2, 3]).await;
    let ttl = Duration::from_secs(60);
    let holder = client.grant(ttl).await.expect("grant").id;
    let waiter = client.grant(ttl).await.expect("grant").id;
    let with_lease = |lease: LeaseId| PutOptions {
        lease: Some(lease),
        ..PutOptions::default()
    };
    client
        .put("svc/a", "10.0.0.1", with_lease(holder))
        .await
        .expect("put");
    client
        .put("presence/workers/w-1", "up", with_lease(holder))
        .await
        .expect("join");
    let held = client
        .lock("jobs/x", holder, false, Duration::ZERO)
        .await
        .expect("lock");
    let LockOutcome::Held { token } = held else {
        panic!("{held:?}")
    };
    let queued = client
        .lock("jobs/x", waiter, true, Duration::from_millis(50))
        .await
        .expect("queue");
    assert!(matches!(queued, LockOutcome::Queued { .. }), "{queued:?}");

    // A follower's answers come from the leader, and say so.
    let (status, page) = get(http(follower), "/api/v1/leases?limit=10").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["answered_by"], leader);
    let ids: Vec<u64> = page["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|lease| lease["id"].as_u64().expect("id"))
        .collect();
    assert_eq!(ids, [holder.get(), waiter.get()]);
    let first = &page["leases"][0];
    assert_eq!(first["key_count"], 2);
    assert_eq!(first["lock_count"], 1);
    assert_eq!(first["ttl_ms"], 60_000);
    assert!(first["remaining_ttl_ms"].as_u64().expect("remaining") > 50_000);
    assert!(first["granted_revision"].as_u64().expect("granted") > 0);
    let (_, second_page) = get(
        http(follower),
        &format!("/api/v1/leases?after={}&limit=1", holder.get()),
    )
    .await;
    assert_eq!(second_page["leases"][0]["id"], waiter.get());

    let (status, lease) = get(http(follower), &format!("/api/v1/leases/{}", holder.get())).await;
    assert_eq!(status, 200, "{lease}");
    assert_eq!(
        lease["keys"],
        serde_json::json!(["presence/workers/w-1", "svc/a"])
    );
    assert_eq!(lease["locks_held"], serde_json::json!(["jobs/x"]));
    let (_, waiting) = get(http(leader), &format!("/api/v1/leases/{}", waiter.get())).await;
    assert_eq!(waiting["locks_waiting"], serde_json::json!(["jobs/x"]));
    assert_eq!(waiting["answered_by"], leader);

    let (status, locks) = get(http(follower), "/api/v1/locks?prefix=jobs%2F").await;
    assert_eq!(status, 200, "{locks}");
    assert_eq!(
        locks["locks"],
        serde_json::json!([{"name": "jobs/x", "holder_lease": holder.get(), "token": token.get(),
                            "waiters": [waiter.get()], "waiter_count": 1}])
    );

    let (status, group) = get(http(follower), "/api/v1/presence/workers").await;
    assert_eq!(status, 200, "{group}");
    assert_eq!(group["members"][0]["member"], "w-1");
    assert_eq!(group["members"][0]["lease"], holder.get());

    let (status, members) = get(http(follower), "/api/v1/cluster").await;
    assert_eq!(status, 200, "{members}");
    assert_eq!(members["leader_id"], leader);
    let rows = members["members"].as_array().expect("members");
    assert_eq!(rows.len(), 3);
    for row in rows {
        let id = row["id"].as_u64().expect("id");
        let role = if id == leader { "leader" } else { "follower" };
        assert_eq!(row["role"], role, "{row}");
        assert!(row["last_contact_ms"].as_u64().is_some(), "{row}");
    }

    // The leader's last minutes: the grants and its commit latency show within a sample or two.
    let (status, stats) = get(http(follower), "/api/v1/stats").await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["answered_by"], leader);
    assert_eq!(stats["interval_ms"], 2_000);
    zaris_testkit::eventually(
        "a sample with the grants",
        Duration::from_secs(10),
        || async {
            let (_, stats) = get(http(follower), "/api/v1/stats").await;
            stats["samples"].as_array()?.iter().find(|sample| {
                sample["grants_per_s"]
                    .as_f64()
                    .is_some_and(|rate| rate > 0.0)
                    && sample["commit_ms"].as_f64().is_some_and(|ms| ms > 0.0)
            })?;
            Some(())
        },
    )
    .await;

    // `node` is the answering member's own view, never forwarded.
    let (_, node) = get(http(follower), "/api/v1/node").await;
    assert_eq!(node["id"], follower);
    assert_eq!(node["role"], "follower");
    assert_eq!(node["leader_id"], leader);
    assert_eq!(node["answered_by"], follower);

    // Bad input: a clear, typed error, whichever member gets it.
    let refused = [
        ("/api/v1/leases?limit=0", 400, "INVALID_ARGUMENT"),
        ("/api/v1/leases?limit=20000", 400, "LIMIT_EXCEEDED"),
        ("/api/v1/leases?sort=ttl", 400, "INVALID_ARGUMENT"),
        ("/api/v1/leases/999999", 404, "NOT_FOUND"),
        ("/api/v1/leases/abc", 400, "INVALID_ARGUMENT"),
        ("/api/v1/nothing", 404, "NOT_FOUND"),
        ("/api/v1/locks?prefix=%FF", 400, "INVALID_ARGUMENT"),
    ];
    for (path, status, code) in refused {
        for id in [leader, follower] {
            let (got, body) = get(http(id), path).await;
            assert_eq!((got, error_code(&body)), (status, code), "{path}: {body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty())
            );
        }
    }
    let (status, body) = call(http(follower), "GET", "/api/v1/leases", Some("Basic x")).await;
    assert_eq!(
        (status, error_code(&body)),
        (401, "UNAUTHENTICATED"),
        "{body}"
    );
    let (status, body) = call(http(follower), "DELETE", "/api/v1/leases/1", None).await;
    assert_eq!(status, 405, "{body}");
    let (status, body) = call(http(follower), "POST", "/api/v1/leases", None).await;
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_ARGUMENT"),
        "{body}"
    );

    // A POST another site's page could make a browser send is refused: without the action
    // header, or from another origin.
    let revoke = format!("/api/v1/leases/{}/revoke", holder.get());
    for extra in ["", "X-Zaris-Action: 1\r\nOrigin: http://evil.example\r\n"] {
        let mut socket = tokio::net::TcpStream::connect(http(follower))
            .await
            .expect("connect");
        let request = format!(
            "POST {revoke} HTTP/1.1\r\nHost: localhost\r\n{extra}Content-Length: 0\r\n\
             Connection: close\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        socket.read_to_string(&mut response).await.expect("read");
        assert!(
            response.starts_with("HTTP/1.1 403"),
            "{extra:?}: {response}"
        );
    }
    assert!(
        client.get("svc/a").await.expect("get").is_some(),
        "not revoked"
    );

    // Revoking through a follower ends the lease on the leader: its keys go, its lock passes on.
    let (status, revoked) = call(http(follower), "POST", &revoke, None).await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["result"], "revoked");
    let (_, again) = call(http(follower), "POST", &revoke, None).await;
    assert_eq!(again["result"], "not_found");
    assert!(client.get("svc/a").await.expect("get").is_none());
    let (_, locks) = get(http(leader), "/api/v1/locks").await;
    assert_eq!(locks["locks"][0]["holder_lease"], waiter.get());
    assert_eq!(locks["locks"][0]["waiter_count"], 0);
    let (_, group) = get(http(follower), "/api/v1/presence/workers").await;
    assert_eq!(group["members"], serde_json::json!([]));
    cluster.shutdown().await;
}

/// A follower whose leader is gone answers at once that no leader can answer, instead of
/// hanging; once a new leader is elected it answers through that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_answers_through_whichever_member_leads() {
    let mut cluster = with_http(3).await;
    let first = cluster.leader().await;
    let follower = cluster.followers(first)[0];
    let http = cluster.node(follower).http_addr.expect("http address");
    let (_, before) = get(http, "/api/v1/cluster").await;
    assert_eq!(before["leader_id"], first);
    cluster.stop(first).await;
    let next = zaris_testkit::eventually("a new leader", Duration::from_secs(15), || async {
        let (status, body) = get(http, "/api/v1/cluster").await;
        (status == 200 && body["leader_id"] != first).then(|| body["leader_id"].clone())
    })
    .await;
    assert_ne!(next, first);
    let (_, node) = get(http, "/api/v1/node").await;
    assert_eq!(node["leader_id"], next);
    cluster.shutdown().await;
}

/// Asks for the event feed of `prefix` (URL-encoded) on `socket`, and reads until the response's
/// head has arrived (and whatever came with it).
async fn open_feed(socket: &mut tokio::net::TcpStream, prefix: &str) -> String {
    let request = format!(
        "GET /api/v1/events?prefix={prefix} HTTP/1.1\r\nHost: localhost\r\n\
         Connection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    while !seen.contains("\r\n\r\n") {
        let n = socket.read(&mut buffer).await.expect("read");
        assert!(n > 0, "the feed ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    seen
}

/// `/api/v1/events` streams a member's applied changes under a prefix as Server-Sent Events,
/// the lease's id on an EXPIRE or REVOKE; a parameter it does not take is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_feed_streams_changes_under_its_prefix() {
    let cluster = with_http(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let http = cluster.node(follower).http_addr.expect("http address");
    // A follower that has not applied the cluster's first entries answers 503 (still
    // initializing): wait until every member has applied a write.
    let client = cluster.client(&[1, 2, 3]).await;
    let warm = client
        .put("warm", "1", PutOptions::default())
        .await
        .expect("put");
    cluster.wait_applied(warm.revision).await;
    let (status, body) = get(http, "/api/v1/events?from=1").await;
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_ARGUMENT"),
        "{body}"
    );

    let mut socket = tokio::net::TcpStream::connect(http).await.expect("connect");
    // The feed starts at the next applied revision: write only once its head has arrived.
    let mut seen = open_feed(&mut socket, "svc%2F").await;
    let lease = client
        .grant(Duration::from_secs(60))
        .await
        .expect("grant")
        .id;
    let bound = PutOptions {
        lease: Some(lease),
        ..PutOptions::default()
    };
    client
        .put("other/x", "1", bound.clone())
        .await
        .expect("put");
    client.put("svc/x", "1", bound).await.expect("put");
    assert!(matches!(
        client.revoke(lease).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        while !seen.contains("\"REVOKE\"") {
            let n = socket.read(&mut buffer).await.expect("read");
            assert!(n > 0, "the feed ended: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    })
    .await;
    assert!(read.is_ok(), "no REVOKE in the feed: {seen}");
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("text/event-stream"), "{seen}");
    assert!(seen.contains("event: change"), "{seen}");
    assert!(seen.contains(r#""key":"svc/x""#), "{seen}");
    assert!(!seen.contains("other/x"), "outside the prefix: {seen}");
    let revoke_line = seen
        .lines()
        .find(|line| line.contains("\"REVOKE\""))
        .expect("the REVOKE");
    assert!(
        revoke_line.contains(&format!("\"lease\":{}", lease.get())),
        "{revoke_line}"
    );
    cluster.shutdown().await;
}

/// A member stops (gracefully, as on SIGTERM) while a client of its event feed has stopped
/// reading. Found by review: the HTTP server's graceful stop waited for every connection to
/// close, and that one never did (its feed, no longer polled, never saw the stop), so the node's
/// stop waited forever. The stop now waits a grace period, as for the gRPC listeners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_stops_while_an_event_feed_client_reads_nothing() {
    let cluster = with_http(1).await;
    let http = cluster.node(1).http_addr.expect("http address");
    let client = cluster.client(&[1]).await;
    // A member that has not applied the cluster's first entries answers 503: write first.
    let warm = client
        .put("warm", "1", PutOptions::default())
        .await
        .expect("put");
    cluster.wait_applied(warm.revision).await;
    // A small receive buffer, so the kernel soaks up little of what the client leaves unread.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    let mut socket = socket.connect(http).await.expect("connect");
    let head = open_feed(&mut socket, "big%2F").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Far more than the socket buffers and the server's own buffer hold, none of it read.
    let value = "v".repeat(512 * 1024);
    for i in 0..48 {
        client
            .put(format!("big/{i}"), value.as_str(), PutOptions::default())
            .await
            .expect("put");
    }
    tokio::time::timeout(Duration::from_secs(30), cluster.shutdown())
        .await
        .expect("the member stops while a feed's client reads nothing");
    drop(socket);
}

/// The status of a GET naming `host` in its `Host` header.
async fn status_for_host(addr: std::net::SocketAddr, path: &str, host: &str) -> u16 {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    socket.read_to_string(&mut response).await.expect("read");
    response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status: {response}"))
}

/// DNS rebinding: a page whose own name was made to resolve to a member's address is
/// same-origin for the browser, but names its own host. The console and its API answer only for
/// addresses, localhost, the member's advertised names and the names allowed by configuration;
/// probes and metrics for any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_refuses_requests_naming_a_host_it_does_not_serve() {
    let cluster = TestCluster::start_configured(1, |config| {
        config.http_listen = Some("127.0.0.1:0".parse().expect("addr"));
        config.http_allowed_hosts = vec!["console.example".into()];
    })
    .await;
    cluster.leader().await;
    let http = cluster.node(1).http_addr.expect("http address");
    let port = http.port();
    for path in ["/api/v1/node", "/api/v1/leases", "/", "/console/app.js"] {
        for (host, status) in [
            (format!("evil.example:{port}"), 403),
            (format!("127.0.0.1.evil.example:{port}"), 403),
            (format!("127.0.0.1:{port}"), 200),
            (format!("localhost:{port}"), 200),
            (format!("console.example:{port}"), 200),
        ] {
            assert_eq!(
                status_for_host(http, path, &host).await,
                status,
                "GET {path} for host {host}"
            );
        }
    }
    let (status, body) = call(http, "GET", "/api/v1/node", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        status_for_host(http, "/metrics", &format!("evil.example:{port}")).await,
        200,
        "metrics answer for any host"
    );
    cluster.shutdown().await;
}
