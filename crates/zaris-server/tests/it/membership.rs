//! Growing 3 → 5 and shrinking back to 3 at runtime, serving throughout.

use std::time::Duration;

use zaris_client::PutOptions;
use zaris_proto::v1::MemberKind;

use crate::cluster::TestCluster;

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
        client
            .member_add(id, addr.to_string(), true)
            .await
            .expect("member add");
    }
    let members = client.member_list().await.expect("members").members;
    let voters = members
        .iter()
        .filter(|m| m.kind == MemberKind::Voter as i32)
        .count();
    assert_eq!(voters, 5);
    let put = client
        .put("during", "5", PutOptions::default())
        .await
        .expect("put");
    let revision = put.header.map_or(0, |h| h.revision);
    cluster.wait_applied(revision).await;
    for id in [4, 5] {
        assert!(
            cluster
                .node(id)
                .state()
                .read(|d| d.state.get(b"before").is_some())
        );
    }

    // Shrink: remove two of the original members, including (possibly) the leader.
    for id in [1, 2] {
        client.member_remove(id).await.expect("member remove");
    }
    for id in [1, 2] {
        cluster.stop(id).await;
    }
    cluster.leader().await;
    let client = cluster.client(&[3, 4, 5]).await;
    let members = client.member_list().await.expect("members").members;
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
            .found
    );
    cluster.shutdown().await;
}
