//! kill -9 of the Raft leader: a new leader takes over with every lease, key and lock; a lease
//! renewed just before the kill is still valid; the killed node restarts from its data dir.

use std::time::{Duration, Instant};

use zaris_client::{LockHolder, LockOutcome, PutOptions};
use zaris_testkit::eventually;

use crate::procs::{ELECTION_TIMEOUT_MS, MIN_TTL_MS, client, serve, start, three_nodes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_survives_kill_9_of_the_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path()).await;
    let all: Vec<&str> = nodes.iter().map(|n| n.endpoint()).collect();
    let client = client(&all).await;

    let lease = client.grant(Duration::from_secs(10)).await.expect("grant");
    let short = client
        .grant(Duration::from_millis(MIN_TTL_MS))
        .await
        .expect("grant short");
    let bound = |id| PutOptions {
        lease: Some(id),
        ..PutOptions::default()
    };
    client
        .put("owner/job-1", "worker-a", bound(lease.id))
        .await
        .expect("put");
    client
        .put("presence/short", "up", bound(short.id))
        .await
        .expect("put");
    let lock = client
        .lock("job-queue", lease.id, false, Duration::ZERO)
        .await
        .expect("lock");
    let LockOutcome::Held { token } = lock else {
        panic!("the free lock was not granted: {lock:?}");
    };
    let renewed = client.keep_alive_once([lease.id]).await.expect("renew");
    assert_eq!(renewed.renewed.len(), 1);

    let leader = client.leader().await.expect("leader").id;
    let victim = nodes
        .iter_mut()
        .find(|n| n.id() == leader)
        .expect("leader process");
    let killed_at = Instant::now();
    victim.kill().await;

    let survivors: Vec<&str> = nodes
        .iter()
        .filter(|n| n.is_running())
        .map(|n| n.endpoint())
        .collect();
    let after = crate::procs::client(&survivors).await;
    let new_leader = eventually("a new leader", Duration::from_secs(20), || async {
        let new_leader = after.leader().await.ok()?.id;
        (new_leader != leader).then_some(new_leader)
    })
    .await;
    let ttl = after.time_to_live(lease.id, true).await.expect("ttl");
    let failover_ms = killed_at.elapsed().as_millis();
    println!("failover: leader {leader} killed, node {new_leader} serving after {failover_ms} ms");
    let ttl = ttl.expect("the renewed lease survived");
    assert_eq!(ttl.bound_keys, vec![b"owner/job-1".to_vec()]);
    assert_eq!(ttl.locks_held, vec!["job-queue".to_string()]);
    let status = after.lock_status("job-queue").await.expect("lock status");
    assert_eq!(
        status.holder,
        Some(LockHolder {
            lease: lease.id,
            token
        })
    );
    let kv = after
        .get("owner/job-1")
        .await
        .expect("get")
        .expect("key survived");
    assert_eq!(kv.value, b"worker-a");

    // The short lease nobody renews still expires, within TTL + election timeout + margin of
    // its grant even though the leader died in between.
    let gone = eventually(
        "the short lease to expire",
        Duration::from_secs(20),
        || async {
            let ttl = after.time_to_live(short.id, false).await.ok()?;
            ttl.is_none().then(Instant::now)
        },
    )
    .await;
    assert!(after.get("presence/short").await.expect("get").is_none());
    println!(
        "expiry across kill -9: short lease ({MIN_TTL_MS} ms TTL) gone {} ms after the kill \
         (election timeout {ELECTION_TIMEOUT_MS} ms)",
        gone.duration_since(killed_at).as_millis()
    );

    // The killed node comes back from its data dir, on its old address, and catches up.
    let victim = nodes.iter().find(|n| n.id() == leader).expect("victim");
    let restarted = start(serve(leader, root.path()).listen_as(victim)).await;
    let put = after
        .put("after-restart", "1", PutOptions::default())
        .await
        .expect("put");
    let revision = put.revision;
    let local = crate::procs::client(&[restarted.endpoint()]).await;
    eventually(
        "the restarted node to catch up",
        Duration::from_secs(20),
        || async {
            let status = local.status().await.ok()?;
            (status.applied_index >= revision.get()).then_some(())
        },
    )
    .await;
}
