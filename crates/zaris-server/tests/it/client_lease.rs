//! The client library's `Lease` handle against a real cluster: background keepalive from any
//! endpoint and across a leader kill, and the safe deadline — a client cut off from the cluster
//! reports Expired before the cluster can hand its lock to anyone else.

use std::time::Duration;

use tokio::time::Instant;
use zaris_client::{
    Client, ClientOptions, Error, ExpiredReason, LeaseState, PutOptions, Revocation,
};
use zaris_core::{LeaseId, Revision};
use zaris_testkit::cluster::TestCluster;
use zaris_testkit::eventually;

use crate::proxy::Proxy;

/// A 3-node cluster, its leader, a client of the leader and a 30 s lease granted through it.
async fn leader_client_and_lease() -> (TestCluster, u64, Client, LeaseId) {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[leader]).await;
    let lease = client
        .grant(Duration::from_secs(30))
        .await
        .expect("grant")
        .id;
    (cluster, leader, client, lease)
}

/// Polls a client's view of a lease on the cluster.
async fn exists(client: &Client, id: u64) -> bool {
    client
        .time_to_live(LeaseId::new(id), false)
        .await
        .map(|info| info.is_some())
        .unwrap_or(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lives_while_its_handle_does_from_any_endpoint() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    // Knows only a follower: every call is redirected, the keepalive stream too.
    let client = cluster.client(&[follower]).await;
    let lease = client.lease(Duration::from_secs(1)).await.expect("lease");
    let put = PutOptions {
        lease: Some(lease.id()),
        ..PutOptions::default()
    };
    client.put("svc/a", "up", put).await.expect("put");

    // Five TTLs: without renewals the key would be gone after one. (Jeopardy is allowed: on a
    // loaded machine a renewal may be late; giving the lease up is not.)
    let mut states = lease.subscribe();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert!(lease.is_valid(), "lease lost while renewals were possible");
        let _ = tokio::time::timeout(Duration::from_millis(100), states.changed()).await;
        if *states.borrow() == LeaseState::Jeopardy {
            eprintln!("note: a renewal was late (Jeopardy)");
        }
    }
    assert!(client.get("svc/a").await.expect("get").is_some());

    // Revoking ends it at once, keys included, and every clone sees why.
    let clone = lease.clone();
    assert!(matches!(
        lease.revoke().await.expect("revoke"),
        Revocation::Revoked { .. }
    ));
    assert_eq!(clone.state(), LeaseState::Expired(ExpiredReason::Revoked));
    assert!(!clone.is_valid());
    assert!(client.get("svc/a").await.expect("get").is_none());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_revokes_the_lease() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let lease = client.lease(Duration::from_secs(30)).await.expect("lease");
    let id = lease.id();
    let clone = lease.clone();
    drop(lease);
    assert!(exists(&client, id.get()).await, "a clone still holds it");
    drop(clone);
    // Well before the 30 s TTL.
    eventually(
        "the dropped lease to be revoked",
        Duration::from_secs(10),
        || async { (!exists(&client, id.get()).await).then_some(()) },
    )
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_survives_a_leader_kill() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    // Failover takes about an election timeout (600 ms here) plus a vote; 3 s leaves room.
    let lease = client.lease(Duration::from_secs(3)).await.expect("lease");
    let put = PutOptions {
        lease: Some(lease.id()),
        ..PutOptions::default()
    };
    client.put("svc/b", "up", put).await.expect("put");
    let mut states = lease.subscribe();

    cluster.stop(leader).await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, leader);
    // Three TTLs under the new leader.
    let until = Instant::now() + Duration::from_secs(9);
    while Instant::now() < until {
        let _ = tokio::time::timeout(Duration::from_millis(100), states.changed()).await;
        assert!(
            !states.borrow().is_expired(),
            "the client gave the lease up across a failover"
        );
    }
    assert!(lease.is_valid());
    assert_eq!(lease.state(), LeaseState::Valid);
    assert!(client.get("svc/b").await.expect("get").is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_client_expires_before_anyone_else_gets_its_lock() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    // A reaches the cluster only through a proxy in front of the leader.
    let proxy = Proxy::start(cluster.addrs[&leader]).await;
    let options = ClientOptions::default().with_timeout(Duration::from_secs(2));
    let a = Client::connect_with([proxy.addr.to_string()], options)
        .await
        .expect("client A");
    let b = cluster.client(&[1, 2, 3]).await;

    let a_lease = a.lease(Duration::from_secs(1)).await.expect("A's lease");
    let a_guard = a_lease.lock("job").await.expect("A locks");
    let b_lease = b.lease(Duration::from_secs(10)).await.expect("B's lease");
    let b_wait = {
        let b_lease = b_lease.clone();
        tokio::spawn(async move {
            let guard = b_lease.lock("job").await;
            (Instant::now(), guard)
        })
    };
    eventually("B to queue", Duration::from_secs(10), || async {
        let status = b.lock_status("job").await.ok()?;
        (status.waiters == 1).then_some(())
    })
    .await;

    proxy.cut();
    let reason = tokio::time::timeout(Duration::from_secs(10), a_guard.lost())
        .await
        .expect("A notices the loss");
    let a_expired_at = Instant::now();
    assert_eq!(reason, ExpiredReason::DeadlinePassed);
    assert!(!a_guard.is_held());

    let (b_acquired_at, b_guard) = b_wait.await.expect("join");
    let b_guard = b_guard.expect("B gets the lock once A's lease expired");
    assert!(
        a_expired_at < b_acquired_at,
        "B acquired {:?} before A knew it had lost the lock",
        a_expired_at - b_acquired_at
    );
    assert!(b_guard.token() > a_guard.token());
    eprintln!(
        "A knew it lost the lock {:?} before B acquired it",
        b_acquired_at - a_expired_at
    );

    // Healed, A's late fenced write is refused by the store; B's goes through.
    proxy.heal();
    let late = a_guard
        .put("job/output", "from A", PutOptions::default())
        .await;
    assert!(
        matches!(late, Err(Error::NotHeld { token, .. }) if token == a_guard.token()),
        "{late:?}"
    );
    b_guard
        .put("job/output", "from B", PutOptions::default())
        .await
        .expect("B's fenced write");
    let value = b.get("job/output").await.expect("get").expect("written");
    assert_eq!(value.value, b"from B");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_answers_who_leads_and_a_keepalive_stream_pipelines_renewals() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[follower]).await;

    let answer = client.leader().await.expect("leader");
    assert_eq!(answer.id, leader);
    assert_eq!(answer.address, cluster.addrs[&leader].to_string());
    assert!(answer.raft_term > 0);

    let ttl = Duration::from_secs(30);
    let (a, b) = (
        client.grant(ttl).await.expect("grant").id,
        client.grant(ttl).await.expect("grant").id,
    );
    let gone = client.grant(ttl).await.expect("grant").id;
    assert_eq!(
        client.revoke(gone).await.expect("revoke"),
        Revocation::Revoked {
            revision: client.seen_revision()
        }
    );
    assert_eq!(
        client.revoke(gone).await.expect("revoke again"),
        Revocation::NotFound
    );

    // Three requests in flight before any answer is read; the answers come back in order.
    let mut stream = client.keep_alive_stream().await.expect("stream");
    assert_eq!(stream.endpoint(), cluster.addrs[&leader].to_string());
    assert!(
        matches!(stream.next().await, Err(Error::InvalidArgument { .. })),
        "nothing sent: an answer is never coming"
    );
    let seqs = [
        stream.send([a]).await.expect("send"),
        stream.send([a, b]).await.expect("send"),
        stream.send([b, gone]).await.expect("send"),
    ];
    let mut answers = Vec::new();
    for _ in seqs {
        answers.push(stream.next().await.expect("answer"));
    }
    assert_eq!(answers.iter().map(|r| r.seq).collect::<Vec<_>>(), seqs);
    let renewed = |i: usize| answers[i].renewed.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(renewed(0), [a]);
    assert_eq!(renewed(1), [a, b]);
    assert_eq!(renewed(2), [b]);
    assert_eq!(answers[2].not_found, [gone]);
    assert!(answers.iter().all(|r| r.revision > Revision::ZERO
        && r.renewed.iter().all(|x| x.ttl == Duration::from_secs(30))));

    // The stream does not follow a leader change: it fails, and a new one opens on the new
    // leader.
    cluster.stop(leader).await;
    let new_leader = cluster.leader().await;
    let failed = async {
        stream.send([a]).await?;
        stream.next().await
    }
    .await;
    assert!(failed.is_err(), "{failed:?}");
    let survivors = cluster.client(&cluster.running()).await;
    let mut again = survivors.keep_alive_stream().await.expect("reopened");
    assert_eq!(again.endpoint(), cluster.addrs[&new_leader].to_string());
    let seq = again.send([a, b]).await.expect("send");
    let answer = again.next().await.expect("answer");
    assert_eq!((answer.seq, answer.renewed.len()), (seq, 2));

    // Requests in flight on one stream are renewed concurrently: they share Renew entries (one
    // at a time, each of the 64 would have had an entry, and a revision, of its own), and the
    // answers still come in request order, each renewing what it asked for.
    const PIPELINED: usize = 64;
    let mut seqs = Vec::new();
    for i in 0..PIPELINED {
        let ids = if i % 2 == 0 { vec![a] } else { vec![a, b] };
        seqs.push(again.send(ids).await.expect("send"));
    }
    let mut revisions = std::collections::BTreeSet::new();
    for (i, seq) in seqs.iter().enumerate() {
        let answer = again.next().await.expect("pipelined answer");
        assert_eq!(answer.seq, *seq, "answer {i} out of order");
        assert_eq!(answer.renewed.len(), if i % 2 == 0 { 1 } else { 2 });
        revisions.insert(answer.revision);
    }
    // One at a time, each request has an entry of its own, always: any sharing shows the
    // pipeline (how much they share depends on timing, so only sharing is asserted).
    assert!(
        revisions.len() < PIPELINED,
        "{} Renew entries for {PIPELINED} pipelined requests",
        revisions.len()
    );

    // A request that fails is answered after the ones before it, and ends the stream.
    let before = again.send([a]).await.expect("send");
    again.send([LeaseId::new(0)]).await.expect("send");
    again.send([b]).await.expect("send");
    assert_eq!(again.next().await.expect("the answer before").seq, before);
    let refused = again.next().await;
    assert!(
        matches!(&refused, Err(e) if e.code() == Some(tonic::Code::InvalidArgument)),
        "lease id 0 is refused: {refused:?}"
    );
    cluster.shutdown().await;
}

/// A client that pipelines far past the per-stream bound (256 in progress) and reads nothing for
/// a while stalls only itself: other clients are served meanwhile, and every answer then comes,
/// in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_pipelines_past_the_bound_and_reads_late_stalls_only_itself() {
    let (cluster, leader, client, lease) = leader_client_and_lease().await;
    let mut stream = client.keep_alive_stream().await.expect("stream");
    const SENT: usize = 1_000;
    let mut seqs = Vec::with_capacity(SENT);
    for _ in 0..SENT {
        seqs.push(stream.send([lease]).await.expect("send"));
    }
    let other = cluster.client(&[leader]).await;
    other
        .put("meanwhile", "served", PutOptions::default())
        .await
        .expect("another client is served while the stream's answers wait");
    other
        .keep_alive_once([lease])
        .await
        .expect("and so is another stream");
    for (i, seq) in seqs.iter().enumerate() {
        let answer = stream.next().await.expect("every answer comes");
        assert_eq!(answer.seq, *seq, "answer {i} out of order");
        assert_eq!(answer.renewed.len(), 1, "answer {i}");
    }
    cluster.shutdown().await;
}

/// A client that sends its renewals and then closes its side (any gRPC client may) gets every
/// answer and then the end of the stream: the server does not keep the stream open. Found by
/// review: the pipelined pump waited for the node to stop instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_keepalive_stream_is_answered_and_then_ended() {
    use zaris_client::proto::LeaseKeepAliveRequest;
    use zaris_client::proto::lease_client::LeaseClient;

    let (cluster, leader, _client, lease) = leader_client_and_lease().await;
    let mut raw = LeaseClient::connect(format!("http://{}", cluster.addrs[&leader]))
        .await
        .expect("connect");
    let requests: Vec<LeaseKeepAliveRequest> = (1..=3)
        .map(|seq| LeaseKeepAliveRequest {
            ids: vec![lease.get()],
            seq,
        })
        .collect();
    // The request stream ends after three messages: the client's side is closed.
    let mut answers = raw
        .keep_alive(tokio_stream::iter(requests))
        .await
        .expect("open")
        .into_inner();
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        let mut seqs = Vec::new();
        while let Some(answer) = answers.message().await.expect("an answer") {
            seqs.push(answer.seq);
        }
        seqs
    })
    .await;
    assert_eq!(
        ended.expect("the stream ends once every answer is out"),
        [1, 2, 3]
    );
    cluster.shutdown().await;
}

/// A node stops (gracefully, as on SIGTERM) while clients pipeline renewals on KeepAlive streams
/// and never read the answers, until neither the HTTP/2 windows nor the node take more; other
/// clients are served meanwhile. Found by review: the stream's pump waited for room to hand over
/// an answer without watching for the node's stop, and the stop waited for the pump: forever.
/// (While it waited it also stopped driving its other renewals, one of which could hold a
/// renewal slot.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stops_while_keepalive_clients_leave_their_answers_unread() {
    use tokio_stream::wrappers::ReceiverStream;
    use tonic::transport::Endpoint;
    use zaris_client::proto::LeaseKeepAliveRequest;
    use zaris_client::proto::lease_client::LeaseClient;

    let (cluster, leader, client, lease) = leader_client_and_lease().await;
    let other_lease = client
        .grant(Duration::from_secs(30))
        .await
        .expect("grant")
        .id;
    let mut stalled = Vec::new();
    let mut senders = Vec::new();
    let mut probes = Vec::new();
    for _ in 0..4 {
        // HTTP/2's smallest windows, so the transport soaks up few of the unread answers.
        let channel = Endpoint::from_shared(format!("http://{}", cluster.addrs[&leader]))
            .expect("endpoint")
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .expect("connect");
        let (requests, outgoing) = tokio::sync::mpsc::channel(64);
        let answers = LeaseClient::new(channel)
            .keep_alive(ReceiverStream::new(outgoing))
            .await
            .expect("open")
            .into_inner();
        stalled.push(answers);
        probes.push(requests.clone());
        // Sends until the node stops reading the stream, and then waits.
        senders.push(tokio::spawn(async move {
            for seq in 1.. {
                let request = LeaseKeepAliveRequest {
                    ids: vec![lease.get()],
                    seq,
                };
                if requests.send(request).await.is_err() {
                    break;
                }
            }
        }));
    }
    // Every stream stalled: its requests are no longer taken off the client's queue, so the node
    // reads it no further (its answers fill the windows, the response buffer and the bound).
    let stalled_at = Instant::now();
    while probes.iter().any(|probe| probe.capacity() > 0) {
        assert!(
            stalled_at.elapsed() < Duration::from_secs(60),
            "the streams never stalled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(probes);
    let renewed = tokio::time::timeout(
        Duration::from_secs(10),
        client.keep_alive_once([other_lease]),
    )
    .await;
    assert!(
        matches!(&renewed, Ok(Ok(r)) if r.renewed.len() == 1),
        "another client's renewal waited: {renewed:?}"
    );
    tokio::time::timeout(Duration::from_secs(30), cluster.shutdown())
        .await
        .expect("the nodes stop while clients still leave answers unread");
    for sender in senders {
        sender.abort();
    }
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_granted_with_keys_has_them_from_its_first_revision_until_it_ends() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    // Through a follower: the grant is redirected like any other.
    let client = cluster.client(&[cluster.followers(leader)[0]]).await;
    let ttl = Duration::from_secs(30);
    let grant = client
        .grant_with_keys(ttl, [("svc/a", "up"), ("svc/b", "ready")])
        .await
        .expect("grant with keys");
    for (key, value) in [("svc/a", "up"), ("svc/b", "ready")] {
        let kv = client.get(key).await.expect("get").expect("present");
        assert_eq!(kv.value, value.as_bytes());
        assert_eq!(
            (kv.lease, kv.create_revision, kv.mod_revision),
            (Some(grant.id), grant.revision, grant.revision),
            "{key} is born with its lease"
        );
    }

    // A refusal is typed and leaves nothing behind.
    let err = client
        .grant_with_keys(ttl, [("svc/c", "1"), ("svc/c", "2")])
        .await
        .expect_err("a key listed twice");
    assert_eq!(err.code(), Some(tonic::Code::InvalidArgument), "{err}");
    assert!(err.to_string().contains("listed twice"), "{err}");
    assert!(client.get("svc/c").await.expect("get").is_none());

    // Concurrent grants on the same few keys (they share Raft entries under load, never two
    // on one key): each key ends bound to exactly one of them, and the leases' key counts agree.
    let grants = futures::future::join_all((0..24).map(|i| {
        let client = client.clone();
        async move {
            let key = format!("race/{}", i % 3);
            client.grant_with_keys(ttl, [(key, format!("{i}"))]).await
        }
    }))
    .await;
    let ids: Vec<LeaseId> = grants
        .into_iter()
        .map(|g| g.expect("a concurrent grant with a key").id)
        .collect();
    let mut bound = 0;
    for id in &ids {
        let info = client
            .time_to_live(*id, true)
            .await
            .expect("ttl")
            .expect("granted");
        bound += info.bound_keys.len();
        for key in &info.bound_keys {
            let kv = client.get(key.clone()).await.expect("get").expect("bound");
            assert_eq!(kv.lease, Some(*id), "a key's lease lists it");
        }
    }
    assert_eq!(bound, 3, "each of the three keys is bound to one lease");

    assert!(matches!(
        client.revoke(grant.id).await.expect("revoke"),
        Revocation::Revoked { .. }
    ));
    assert!(client.get("svc/a").await.expect("get").is_none());
    assert!(client.get("svc/b").await.expect("get").is_none());

    // The handle form: kept alive in the background, and its key goes with its last drop.
    let handle = client
        .lease_with_keys(Duration::from_secs(2), [("svc/h", "up")])
        .await
        .expect("a lease handle with a key");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kv = client
        .get("svc/h")
        .await
        .expect("get")
        .expect("kept alive past its TTL");
    assert_eq!(kv.lease, Some(handle.id()));
    drop(handle);
    eventually(
        "the dropped handle's key to go",
        Duration::from_secs(10),
        || async {
            client
                .get("svc/h")
                .await
                .ok()
                .and_then(|kv| kv.is_none().then_some(()))
        },
    )
    .await;
    cluster.shutdown().await;
}
