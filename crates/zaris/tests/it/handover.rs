//! A planned stop (SIGTERM) of the Raft leader hands leadership over before the process exits:
//! when it is gone, another node already leads, so the cluster does not wait an election
//! timeout to notice, and every acknowledged write and lease is there.

use std::time::Duration;

use zaris_client::PutOptions;

use crate::procs::{client, three_nodes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_the_leader_hands_leadership_over_before_it_exits() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path()).await;
    let all: Vec<&str> = nodes.iter().map(|n| n.endpoint()).collect();
    let client = client(&all).await;
    let lease = client.grant(Duration::from_secs(30)).await.expect("grant");
    client
        .put(
            "owner/job",
            "worker-a",
            PutOptions {
                lease: Some(lease.id),
                ..PutOptions::default()
            },
        )
        .await
        .expect("put");
    let old = client.leader().await.expect("leader");

    let victim = nodes
        .iter_mut()
        .find(|n| n.id() == old.id)
        .expect("the leader's process");
    victim.terminate().expect("SIGTERM");
    let exit = tokio::time::timeout(Duration::from_secs(20), victim.wait())
        .await
        .expect("the leader exits after SIGTERM")
        .expect("wait");
    assert!(exit.success(), "{exit:?}: {}", victim.log_tail(20));
    let log = std::fs::read_to_string(victim.log_path()).expect("the stopped node's log");
    let handed = log
        .lines()
        .find(|line| line.contains("handed leadership over before stopping"))
        .unwrap_or_else(|| panic!("no handover in the log:\n{}", victim.log_tail(20)));

    // The node it handed over to leads already, as the stopped node saw before it exited.
    let successor = nodes
        .iter()
        .filter(|n| n.id() != old.id)
        .find(|n| handed.contains(&format!("new_leader=Some({})", n.id())))
        .unwrap_or_else(|| panic!("the handover names no other member: {handed}"));
    let status = crate::procs::client(&[successor.endpoint()])
        .await
        .status()
        .await
        .expect("status");
    assert_eq!(status.raft_leader_id, Some(successor.id()), "{status:?}");
    assert!(status.raft_term > old.raft_term, "{status:?} after {old:?}");

    // Nothing acknowledged is lost, and the cluster writes on.
    let survivors: Vec<&str> = nodes
        .iter()
        .filter(|n| n.is_running())
        .map(|n| n.endpoint())
        .collect();
    let after = crate::procs::client(&survivors).await;
    let kv = after
        .get("owner/job")
        .await
        .expect("get")
        .expect("the key is there");
    assert_eq!(kv.value, b"worker-a");
    assert!(
        after
            .time_to_live(lease.id, false)
            .await
            .expect("ttl")
            .is_some(),
        "the lease lives on"
    );
    after
        .put("after/handover", "ok", PutOptions::default())
        .await
        .expect("a write after the handover");
    for node in &mut nodes {
        node.kill().await;
    }
}
