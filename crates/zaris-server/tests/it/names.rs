//! Issue 11, item 1: members known by host name. Every address here is `localhost:{port}`, so
//! every connection (peer to peer, client to member, a joiner added by name) resolves a name,
//! and status and member lists keep the name the operator gave.

use std::time::Duration;

use zaris_client::{Error, MemberKind, PutOptions};
use zaris_testkit::cluster::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_known_by_name_replicate_fail_over_and_keep_their_names() {
    let mut cluster = TestCluster::start_named(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let lease = client.grant(Duration::from_secs(30)).await.expect("grant");
    let put = client
        .put(
            "worker/a",
            "up",
            PutOptions {
                lease: Some(lease.id),
                ..PutOptions::default()
            },
        )
        .await
        .expect("put through names");
    cluster.wait_applied(put.revision).await;

    let members = client.member_list().await.expect("members");
    let addresses: Vec<(u64, String)> = members.iter().map(|m| (m.id, m.address.clone())).collect();
    let expected: Vec<(u64, String)> = (1..=3).map(|id| (id, cluster.address(id))).collect();
    assert_eq!(addresses, expected, "member addresses keep the names given");
    assert!(addresses.iter().all(|(_, a)| a.starts_with("localhost:")));
    let leader_seen = client.leader().await.expect("leader");
    assert_eq!(leader_seen.address, cluster.address(leader));

    // The leader stops: the others, who reach each other by name, elect one and keep the data.
    cluster.stop(leader).await;
    let next = cluster.leader().await;
    assert_ne!(next, leader);
    let survivors: Vec<u64> = cluster.running();
    let client = cluster.client(&survivors).await;
    assert!(client.get("worker/a").await.expect("get").is_some());
    client
        .put("after", "1", PutOptions::default())
        .await
        .expect("put after failover");

    // Back by name: it catches up.
    cluster.restart(leader).await;
    let put = client
        .put("after-restart", "1", PutOptions::default())
        .await
        .expect("put");
    cluster.wait_applied(put.revision).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_add_takes_a_name_and_refuses_one_that_does_not_resolve() {
    let mut cluster = TestCluster::start_named(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;

    // `.invalid` never resolves (RFC 2606): refused at once, the membership unchanged.
    let refused = client
        .member_add(4, "zaris-4.invalid:7001", "zaris-4.invalid:7101", false)
        .await
        .expect_err("unresolvable");
    match &refused {
        Error::Rpc(rpc) => {
            assert_eq!(rpc.code(), tonic::Code::InvalidArgument, "{refused}");
            assert!(
                refused
                    .to_string()
                    .contains("cannot resolve zaris-4.invalid:7001"),
                "{refused}"
            );
        }
        other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
    }
    for bad in ["zaris_4:7001", "zaris-4", "zaris-4:0"] {
        for (address, peer) in [(bad, "localhost:7101"), ("localhost:7001", bad)] {
            let err = client
                .member_add(4, address, peer, false)
                .await
                .expect_err(bad);
            assert!(err.is_definite(), "{bad}: {err}");
            assert!(err.to_string().contains(bad), "{bad}: {err}");
        }
    }
    // The peer address is required, and is not the client's.
    let err = client
        .member_add(4, "localhost:7001", "", false)
        .await
        .expect_err("no peer address");
    assert!(err.to_string().contains("peer address is empty"), "{err}");
    let err = client
        .member_add(4, "localhost:7001", "localhost:7001", false)
        .await
        .expect_err("one address for both");
    assert!(err.to_string().contains("a port of its own"), "{err}");
    // Nor another member's.
    let err = client
        .member_add(4, "localhost:7001", cluster.peer_address(2), false)
        .await
        .expect_err("member 2's peer address");
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(client.member_list().await.expect("members").len(), 3);

    // A joiner named `localhost:{port}` is added by that name and catches up.
    cluster.start_joiner(4).await;
    let name = cluster.address(4);
    client
        .member_add(4, name.clone(), cluster.peer_address(4), true)
        .await
        .expect("member add by name");
    let members = client.member_list().await.expect("members");
    let added = members.iter().find(|m| m.id == 4).expect("member 4");
    assert_eq!(
        (added.address.as_str(), added.kind),
        (name.as_str(), MemberKind::Voter)
    );
    assert_eq!(added.peer_address, cluster.peer_address(4));
    let put = client
        .put("k", "v", PutOptions::default())
        .await
        .expect("put");
    cluster.wait_applied(put.revision).await;
    assert!(
        cluster
            .node(4)
            .state()
            .read(|d| d.state.get(b"k").is_some())
    );
    cluster.shutdown().await;
}
