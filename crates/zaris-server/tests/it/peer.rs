//! The Raft peer service: on its own listener, never on the client port; its bounds: a batch of entries larger than one peer message goes in parts
//! (a follower that fell behind by more than a message's worth of large entries catches up from
//! the log), and garbage, another cluster's messages or oversized ones are refused with clear
//! errors, counted, and their connections cut off, while the node goes on serving.

use tonic::Code;
use zaris_client::{DeleteOptions, PutOptions};
use zaris_proto::v1::RaftMessage;
use zaris_proto::v1::raft_service_client::RaftServiceClient;
use zaris_server::MAX_RAFT_MESSAGE_BYTES;
use zaris_testkit::cluster::TestCluster;

use crate::counter;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_by_more_than_a_message_catches_up_from_the_log() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let behind = cluster.followers(leader)[0];
    cluster.stop(behind).await;
    let ids: Vec<u64> = cluster.running();
    let client = cluster.client(&ids).await;
    // 24 entries of about 1 MiB each: together more than one peer message may carry.
    let value = vec![b'v'; 1_000_000];
    let mut last = None;
    for i in 0..24 {
        last = Some(
            client
                .put(format!("big/{i:02}"), value.clone(), PutOptions::default())
                .await
                .expect("put")
                .revision,
        );
    }
    assert!(24 * value.len() > MAX_RAFT_MESSAGE_BYTES);
    cluster.restart(behind).await;
    cluster.wait_applied(last.expect("a write")).await;
    let caught_up = cluster.node(behind).state().read(|d| d.state.key_count());
    assert_eq!(caught_up, 24);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_peer_service_is_refused_counted_and_cut_off_and_the_node_serves_on() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let cluster_id = cluster.cluster_id();
    let peer_addr = cluster.peer_addrs[&leader];
    // A connection of its own for each case, kept open by the test: each one is cut off by the
    // node after its refusal.
    let connect = || async {
        RaftServiceClient::connect(format!("http://{peer_addr}"))
            .await
            .expect("connect")
            .max_encoding_message_size(64 * 1024 * 1024)
    };
    let refused = |reason: &str| {
        counter(
            "zaris_peer_messages_refused_total",
            &format!("reason=\"{reason}\""),
        )
    };
    let cut = || counter("zaris_connections_cut_total", "listener=\"peer\"");
    let (malformed_before, cluster_before, large_before, cut_before) = (
        refused("malformed"),
        refused("cluster"),
        refused("too_large"),
        cut(),
    );

    let mut connections = Vec::new();
    connections.push(connect().await);
    let garbage = connections[0]
        .append_entries(RaftMessage {
            cluster_id,
            payload: b"\x02 not an AppendEntries at all".to_vec(),
        })
        .await
        .expect_err("garbage");
    assert_eq!(garbage.code(), Code::InvalidArgument, "{garbage:?}");
    assert!(
        garbage.message().contains("bad Raft message"),
        "{garbage:?}"
    );

    connections.push(connect().await);
    let unversioned = connections[1]
        .vote(RaftMessage {
            cluster_id,
            payload: vec![0xff; 64],
        })
        .await
        .expect_err("an unknown format version");
    assert_eq!(unversioned.code(), Code::InvalidArgument, "{unversioned:?}");

    connections.push(connect().await);
    let stranger = connections[2]
        .append_entries(RaftMessage {
            cluster_id: cluster_id ^ 1,
            payload: Vec::new(),
        })
        .await
        .expect_err("another cluster");
    assert!(
        stranger.message().contains("belongs to cluster"),
        "{stranger:?}"
    );

    connections.push(connect().await);
    let oversized = connections[3]
        .append_entries(RaftMessage {
            cluster_id,
            payload: vec![0; MAX_RAFT_MESSAGE_BYTES + 1],
        })
        .await
        .expect_err("a message over the limit");
    assert_eq!(oversized.code(), Code::OutOfRange, "{oversized:?}");

    assert!(refused("malformed") >= malformed_before + 2.0);
    assert!(refused("cluster") > cluster_before);
    assert!(refused("too_large") > large_before);
    // Each of the four connections is closed by the node: counted when it is really dropped.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while cut() < cut_before + 4.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of 4 refused connections were cut off",
            cut() - cut_before
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(connections);
    // The node (still the leader) serves, and the cluster commits: its members' connections
    // were never cut.
    client
        .put("after/garbage", "ok", PutOptions::default())
        .await
        .expect("put after the garbage");
    assert_eq!(cluster.leader().await, leader);
    cluster.shutdown().await;
}

/// A peer message whose string claims far more bytes than the message holds (here a lock name of
/// a tebibyte inside an AppendEntries) is refused as malformed before anything is allocated for
/// it; the node serves on. Until 2026-12-06 the decoder allocated the claimed length first, and
/// the allocation's failure aborted the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_message_with_a_forged_length_is_refused_and_the_node_serves_on() {
    use openraft::async_runtime::WatchReceiver as _;
    use openraft::entry::RaftEntry as _;
    use openraft::raft::AppendEntriesRequest;
    use zaris_core::{Command, LeaseId, Request};
    use zaris_raft::{Entry, LogId, Proposal, TypeConfig};

    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    let cluster_id = cluster.cluster_id();
    let peer_addr = cluster.peer_addrs[&follower];
    let refused_before = counter("zaris_peer_messages_refused_total", "reason=\"malformed\"");

    let lock = Command::LockAcquire {
        name: "n".to_owned(),
        lease: LeaseId::new(1),
        wait: false,
        sent_after: None,
    };
    let request = AppendEntriesRequest::<TypeConfig> {
        vote: cluster
            .node(follower)
            .raft()
            .metrics()
            .borrow_watched()
            .vote,
        prev_log_id: None,
        leader_commit: None,
        entries: vec![Entry::new_normal(
            LogId::new(
                openraft::impls::leader_id_adv::LeaderId {
                    term: 1,
                    node_id: leader,
                },
                1,
            ),
            Proposal(Request::new(lock)),
        )],
    };
    let encoded = zaris_core::codec::encode(&request).expect("encode");
    // The name's length (1) before its one byte, as a u64 varint of 2^40 instead.
    let at = encoded
        .windows(2)
        .position(|w| w == [1, b'n'])
        .expect("the name's length");
    let mut forged = encoded[..at].to_vec();
    forged.push(253);
    forged.extend_from_slice(&(1u64 << 40).to_le_bytes());
    forged.extend_from_slice(&encoded[at + 1..]);

    let mut connection = RaftServiceClient::connect(format!("http://{peer_addr}"))
        .await
        .expect("connect");
    let refusal = connection
        .append_entries(RaftMessage {
            cluster_id,
            payload: forged,
        })
        .await
        .expect_err("a forged length");
    assert_eq!(refusal.code(), Code::InvalidArgument, "{refusal:?}");
    assert!(
        refusal.message().contains("bad Raft message"),
        "{refusal:?}"
    );
    assert!(counter("zaris_peer_messages_refused_total", "reason=\"malformed\"") > refused_before);
    drop(connection);
    // The follower is alive and still a member that acknowledges: a write to all three commits
    // on it too.
    let put = client
        .put("after/forged", "ok", PutOptions::default())
        .await
        .expect("put after the forged message");
    cluster.wait_applied(put.revision).await;
    cluster.shutdown().await;
}

/// A replication stream (`AppendStream`) is held to the rules of a single AppendEntries: a
/// first request that does not decode is refused before the stream is answered, and the
/// connection is cut off; a request that does not decode later ends the stream with the same
/// refusal, after the requests before it were answered, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_stream_answers_in_order_and_ends_at_the_first_refused_request() {
    use futures::StreamExt;
    use openraft::async_runtime::WatchReceiver as _;
    use openraft::raft::{AppendEntriesRequest, StreamAppendResult};
    use zaris_raft::TypeConfig;

    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let cluster_id = cluster.cluster_id();
    let peer_addr = cluster.peer_addrs[&follower];
    let connect = || async {
        RaftServiceClient::connect(format!("http://{peer_addr}"))
            .await
            .expect("connect")
    };
    let garbage = || RaftMessage {
        cluster_id,
        payload: b"\x02 not an AppendEntries at all".to_vec(),
    };
    let cut = || counter("zaris_connections_cut_total", "listener=\"peer\"");
    let cut_before = cut();

    let mut first_refused = connect().await;
    let refusal = first_refused
        .append_stream(futures::stream::iter([garbage()]))
        .await
        .expect_err("a garbage first request");
    assert_eq!(refusal.code(), Code::InvalidArgument, "{refusal:?}");
    assert!(
        refusal.message().contains("bad Raft message"),
        "{refusal:?}"
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while cut() < cut_before + 1.0 {
        assert!(tokio::time::Instant::now() < deadline, "not cut off");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // What the leader could send: its own vote, nothing to match, no entries.
    let vote = cluster
        .node(follower)
        .raft()
        .metrics()
        .borrow_watched()
        .vote;
    let empty = AppendEntriesRequest::<TypeConfig> {
        vote,
        prev_log_id: None,
        leader_commit: None,
        entries: Vec::new(),
    };
    let valid = || RaftMessage {
        cluster_id,
        payload: zaris_core::codec::encode(&empty).expect("encode"),
    };
    let mut later_refused = connect().await;
    let mut answers = later_refused
        .append_stream(futures::stream::iter([
            valid(),
            valid(),
            garbage(),
            valid(),
        ]))
        .await
        .expect("a valid first request opens the stream")
        .into_inner();
    for n in 0..2 {
        let answer = answers
            .next()
            .await
            .expect("an answer")
            .expect("the answer to a valid request");
        let result: StreamAppendResult<TypeConfig> =
            zaris_core::codec::decode(&answer.payload, MAX_RAFT_MESSAGE_BYTES).expect("decode");
        assert_eq!(result, Ok(None), "answer {n}");
    }
    let refusal = answers
        .next()
        .await
        .expect("the refusal")
        .expect_err("the garbage request is refused");
    assert_eq!(refusal.code(), Code::InvalidArgument, "{refusal:?}");
    assert!(answers.next().await.is_none(), "nothing after the refusal");
    cluster.shutdown().await;
}

/// Clients never reach the Raft service: the client port does not serve it, and the peer port
/// serves nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raft_service_is_served_on_the_peer_port_only() {
    let cluster = TestCluster::start(1).await;
    let leader = cluster.leader().await;
    let cluster_id = cluster.cluster_id();
    let message = || RaftMessage {
        cluster_id,
        payload: Vec::new(),
    };
    let mut on_client_port =
        RaftServiceClient::connect(format!("http://{}", cluster.addrs[&leader]))
            .await
            .expect("connect");
    for status in [
        on_client_port.vote(message()).await.expect_err("vote"),
        on_client_port
            .append_entries(message())
            .await
            .expect_err("append"),
        on_client_port
            .transfer_leader(message())
            .await
            .expect_err("transfer"),
    ] {
        assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
    }
    // The same empty message on the peer port reaches the Raft service (and is refused there).
    let mut on_peer_port =
        RaftServiceClient::connect(format!("http://{}", cluster.peer_addrs[&leader]))
            .await
            .expect("connect");
    let refused = on_peer_port.vote(message()).await.expect_err("empty vote");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");

    let mut kv_on_peer_port = zaris_proto::v1::kv_client::KvClient::connect(format!(
        "http://{}",
        cluster.peer_addrs[&leader]
    ))
    .await
    .expect("connect");
    let status = kv_on_peer_port
        .range(zaris_proto::v1::RangeRequest::default())
        .await
        .expect_err("no client API on the peer port");
    assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
    cluster.shutdown().await;
}

/// Limits small enough to fill: a 1 MiB quota and a small de-duplication table, so that the
/// largest snapshot these limits allow is about 1.2 MiB.
fn small_quota(config: &mut zaris_server::config::NodeConfig) {
    config.limits.max_state_bytes = zaris_core::limits::MIN_STATE_BYTES;
    config.limits.dedup_max_bytes = zaris_core::limits::MIN_DEDUP_MAX_BYTES;
    config.limits.dedup_capacity = 16;
    config.snapshot_entries = 10;
}

/// The snapshot bound follows from the cluster's limits: a full state's snapshot fits it (a
/// follower that fell behind past the log catches up from one), a larger stream is refused and
/// counted, and a write past the quota is refused with CAPACITY_EXCEEDED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_bound_follows_from_the_limits_and_a_full_state_fits_it() {
    let mut cluster = TestCluster::start_configured(3, small_quota).await;
    let leader = cluster.leader().await;
    let behind = cluster.followers(leader)[0];
    let stopped_at = {
        use openraft::async_runtime::WatchReceiver as _;
        cluster
            .node(behind)
            .raft()
            .metrics()
            .borrow_watched()
            .last_log_index
    }
    .unwrap_or(0);
    cluster.stop(behind).await;
    let client = cluster.client(&cluster.running()).await;
    let bound = zaris_core::Limits {
        max_state_bytes: zaris_core::limits::MIN_STATE_BYTES,
        dedup_max_bytes: zaris_core::limits::MIN_DEDUP_MAX_BYTES,
        dedup_capacity: 16,
        ..zaris_core::Limits::default()
    }
    .max_snapshot_bytes();

    // Fill the state to its quota with 64 KiB values, then write past it.
    let value = vec![b'v'; 64 * 1024];
    let mut written = 0;
    let refusal = loop {
        match client
            .put(
                format!("fill/{written:03}"),
                value.clone(),
                PutOptions::default(),
            )
            .await
        {
            Ok(_) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 64, "the quota never filled");
    };
    assert_eq!(
        refusal.error_code(),
        Some(zaris_proto::v1::ErrorCode::CapacityExceeded),
        "{refusal:?}"
    );
    assert!(
        refusal.to_string().contains("max_state_bytes")
            && refusal.to_string().contains("the state quota is full"),
        "{refusal}"
    );
    assert!(written >= 14, "only {written} values fitted a 1 MiB quota");
    // Small writes to push the log past the follower: it must catch up from a snapshot.
    for i in 0..30 {
        client
            .delete(format!("nothing/{i}"), DeleteOptions::default())
            .await
            .expect("a delete always fits");
    }
    let last = client
        .delete("nothing/last", DeleteOptions::default())
        .await
        .expect("delete")
        .revision;
    let (footprint, snapshot_bytes) = cluster.node(leader).state().read(|d| {
        let snapshot = d.state.snapshot().expect("snapshot").len() as u64;
        (d.state.footprint_bytes(), snapshot)
    });
    assert!(footprint <= zaris_core::limits::MIN_STATE_BYTES);
    assert!(
        snapshot_bytes > 900 * 1024 && snapshot_bytes <= bound,
        "a full state's snapshot, {snapshot_bytes} bytes, against the bound of {bound}"
    );
    // The leader has dropped the log the follower would need (snapshots are built and the log
    // purged in the background).
    let leader_raft = cluster.node(leader).raft().clone();
    zaris_testkit::eventually(
        "the log purged past the stopped follower",
        std::time::Duration::from_secs(20),
        || {
            let raft = leader_raft.clone();
            async move {
                use openraft::async_runtime::WatchReceiver as _;
                let purged = raft.metrics().borrow_watched().purged.map(|id| id.index);
                purged.is_some_and(|index| index > stopped_at).then_some(())
            }
        },
    )
    .await;
    cluster.restart(behind).await;
    cluster.wait_applied(last).await;
    let installed = {
        use openraft::async_runtime::WatchReceiver as _;
        cluster
            .node(behind)
            .raft()
            .metrics()
            .borrow_watched()
            .snapshot
    };
    assert!(
        installed.is_some(),
        "the follower caught up without a snapshot"
    );
    assert_eq!(
        cluster.node(behind).state().read(|d| d.state.key_count()),
        written
    );

    // A stream over the bound is refused before it is buffered whole, and counted. The
    // connection stays: a member started with a larger quota than this node's could earn this.
    let large_before = crate::counter("zaris_peer_messages_refused_total", "reason=\"too_large\"");
    let mut raw = RaftServiceClient::connect(format!("http://{}", cluster.peer_addrs[&leader]))
        .await
        .expect("connect");
    let cluster_id = cluster.cluster_id();
    let head = zaris_proto::v1::RaftSnapshotChunk {
        cluster_id,
        meta: zaris_core::codec::encode(&(
            zaris_raft::Vote::new(1, leader),
            zaris_raft::SnapshotMeta::default(),
        ))
        .expect("encode"),
        data: Vec::new(),
    };
    let chunk = vec![0u8; 256 * 1024];
    let chunks = (bound as usize / chunk.len()) + 2;
    let stream = futures::stream::iter(std::iter::once(head).chain((0..chunks).map(move |_| {
        zaris_proto::v1::RaftSnapshotChunk {
            cluster_id,
            meta: Vec::new(),
            data: chunk.clone(),
        }
    })));
    let refused = raw
        .install_snapshot(stream)
        .await
        .expect_err("a snapshot over the bound");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("max_snapshot_bytes"),
        "{refused:?}"
    );
    assert!(
        crate::counter("zaris_peer_messages_refused_total", "reason=\"too_large\"") > large_before
    );
    drop(raw);
    // The cluster serves on, and a delete makes room again.
    client
        .delete("fill/000", DeleteOptions::default())
        .await
        .expect("delete");
    client
        .put("after", "fits again", PutOptions::default())
        .await
        .expect("room again");
    cluster.shutdown().await;
}

/// Members build their snapshots at points staggered over the snapshot interval (by rank of
/// their ids), not all at the same index: with 3 members and an interval of 60 entries, members
/// 1, 2 and 3 snapshot at indexes 0, 20 and 40 past each multiple of 60. Under openraft's own
/// policy all three would snapshot at about the same index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_build_their_snapshots_at_staggered_points() {
    use openraft::async_runtime::WatchReceiver as _;
    const INTERVAL: u64 = 60;
    // Entries applied after a point before the build copies the state: the puts below are
    // sequential, so a build lands within a few entries of its point.
    const SLACK: u64 = 10;

    let cluster = TestCluster::start_configured(3, |config| {
        config.snapshot_entries = INTERVAL;
    })
    .await;
    let ids = cluster.running();
    assert_eq!(ids, vec![1, 2, 3]);
    let client = cluster.client(&ids).await;
    let mut last = 0;
    for i in 0..150 {
        last = client
            .put(format!("stagger/{i:03}"), "v", PutOptions::default())
            .await
            .expect("put")
            .revision
            .get();
    }
    for (rank, id) in ids.iter().enumerate() {
        let phase = rank as u64 * INTERVAL / 3;
        // This member's last point at or below the last write.
        let point = (last - phase) / INTERVAL * INTERVAL + phase;
        let raft = cluster.node(*id).raft().clone();
        let snapshot = zaris_testkit::wait::eventually(
            &format!("member {id} snapshots at its point {point}"),
            std::time::Duration::from_secs(10),
            || {
                let metrics = raft.metrics().borrow_watched().clone();
                let index = metrics.snapshot.map(|s| s.index);
                async move { index.filter(|&index| index >= point) }
            },
        )
        .await;
        assert!(
            (snapshot - phase) % INTERVAL < SLACK,
            "member {id} (phase {phase}) built its snapshot at {snapshot}, off its points"
        );
    }
    cluster.shutdown().await;
}
