//! Growing 3 → 5 and shrinking back to 3 at runtime, serving throughout.

use std::time::Duration;

use zaris_client::{MemberKind, PutOptions};
use zaris_testkit::cluster::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_grows_to_five_and_shrinks_back_to_three() {
    let mut cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let lease = client.grant(Duration::from_secs(30)).await.expect("grant");
    client
        .put(
            "before",
            "1",
            PutOptions {
                lease: Some(lease.id),
                ..PutOptions::default()
            },
        )
        .await
        .expect("put");

    for id in [4, 5] {
        let addr = cluster.start_joiner(id).await;
        let peer = cluster.peer_address(id);
        client
            .member_add(id, addr.to_string(), peer, true)
            .await
            .expect("member add");
    }
    let members = client.member_list().await.expect("members");
    let voters = members
        .iter()
        .filter(|m| m.kind == MemberKind::Voter)
        .count();
    assert_eq!(voters, 5);
    let put = client
        .put("during", "5", PutOptions::default())
        .await
        .expect("put");
    let revision = put.revision;
    cluster.wait_applied(revision).await;
    for id in [4, 5] {
        assert!(
            cluster
                .node(id)
                .state()
                .read(|d| d.state.get(b"before").is_some())
        );
    }

    // Shrink: remove two of the original members, including (possibly) the leader. The second
    // removal is asked of the member removed first: still running, but no longer replicated to,
    // it must send the caller to the leader rather than wait for its own view to settle.
    client.member_remove(1).await.expect("member remove 1");
    let removed_member = cluster.client(&[1]).await;
    removed_member
        .member_remove(2)
        .await
        .expect("member remove 2, asked of the removed member 1");
    for id in [1, 2] {
        cluster.stop(id).await;
    }
    cluster.leader().await;
    let client = cluster.client(&[3, 4, 5]).await;
    let members = client.member_list().await.expect("members");
    assert_eq!(
        members.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert!(client.get("before").await.expect("get").is_some());
    assert!(
        client
            .time_to_live(lease.id, false)
            .await
            .expect("ttl")
            .is_some()
    );
    cluster.shutdown().await;
}

/// Issue 9, item 13: one wrong address in `member add` ended a small cluster for good: the dead
/// member became a voter, every write answered NO_LEADER, and `member remove` timed out. Now a
/// member is promoted only once it has caught up; the dead one stays a learner, the cluster keeps
/// serving, the learner can be removed, and `/ready` tells a leader without a quorum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_address_in_member_add_never_becomes_a_voter() {
    for size in [1u64, 3] {
        let cluster = TestCluster::start_configured(size, |c| {
            c.http_listen = Some("127.0.0.1:0".parse().expect("addr"));
        })
        .await;
        let leader = cluster.leader().await;
        let client = cluster.client(&cluster.running()).await;
        let dead = || {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").to_string()
        };
        let error = client
            .member_add(9, dead(), dead(), true)
            .await
            .expect_err("a member that cannot catch up is not promoted");
        assert_eq!(
            error.error_code(),
            Some(zaris_proto::v1::ErrorCode::LearnerNotCaughtUp),
            "{error}"
        );
        assert!(error.to_string().contains("member remove 9"), "{error}");
        let error = client
            .member_promote(9)
            .await
            .expect_err("nor by member promote");
        assert_eq!(
            error.error_code(),
            Some(zaris_proto::v1::ErrorCode::LearnerNotCaughtUp)
        );
        let members = client.member_list().await.expect("members");
        let learner = members.iter().find(|m| m.id == 9).expect("listed");
        assert_eq!(learner.kind, MemberKind::Learner);
        // Only the Raft leader knows how far a member has caught up; the list comes from it.
        assert!(learner.matched_index.is_some(), "{learner:?}");
        // The cluster keeps serving and is ready.
        client
            .put("still", "serving", PutOptions::default())
            .await
            .expect("writes go on");
        let http = cluster.node(leader).http_addr.expect("http");
        let ready = crate::http::get(http, "/ready").await;
        assert!(ready.starts_with("HTTP/1.1 200"), "size {size}: {ready}");
        client.member_remove(9).await.expect("remove the learner");
        let members = client.member_list().await.expect("members");
        assert!(members.iter().all(|m| m.id != 9), "{members:?}");
        cluster.shutdown().await;
    }
}

/// Issue 9, item 13: `/ready` failed nowhere while a leader could not commit. A leader whose
/// quorum is gone is not ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_without_a_quorum_is_not_ready() {
    let mut cluster = TestCluster::start_configured(3, |c| {
        c.http_listen = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let leader = cluster.leader().await;
    let http = cluster.node(leader).http_addr.expect("http");
    zaris_testkit::eventually(
        "the leader to be ready",
        Duration::from_secs(10),
        || async {
            crate::http::get(http, "/ready")
                .await
                .starts_with("HTTP/1.1 200")
                .then_some(())
        },
    )
    .await;
    for follower in cluster.followers(leader) {
        cluster.stop(follower).await;
    }
    let answer = zaris_testkit::eventually(
        "the leader without a quorum to be not ready",
        Duration::from_secs(10),
        || async {
            let answer = crate::http::get(http, "/ready").await;
            answer.starts_with("HTTP/1.1 503").then_some(answer)
        },
    )
    .await;
    assert!(answer.contains("cannot commit"), "{answer}");
    cluster.shutdown().await;
}
