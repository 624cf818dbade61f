//! The Raft peer service: on its own listener, never on the client port; its bounds: a batch of entries larger than one peer message goes in parts
//! (a follower that fell behind by more than a message's worth of large entries catches up from
//! the log), and garbage, another cluster's messages or oversized ones are refused with clear
//! errors, counted, and their connections cut off, while the node goes on serving.

use tonic::Code;
use zaris_client::PutOptions;
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
