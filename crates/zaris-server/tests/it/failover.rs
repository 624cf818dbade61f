//! Redirects, leader loss, restarts, and what a minority can (not) do.

use std::time::Duration;

use zaris_client::{LockHolder, LockOutcome, PutOptions, RangeOptions};
use zaris_core::Revision;
use zaris_testkit::cluster::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_sent_to_a_follower_succeed_through_the_redirect() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[follower]).await;
    let lease = client
        .grant(Duration::from_secs(30))
        .await
        .expect("grant via follower");
    let put = client
        .put(
            "job/1",
            "owner",
            PutOptions {
                lease: Some(lease.id),
                ..PutOptions::default()
            },
        )
        .await
        .expect("put via follower");
    assert!(put.revision > Revision::ZERO);
    let kv = client.get("job/1").await.expect("get").expect("key exists");
    assert_eq!(
        (kv.value.as_slice(), kv.lease),
        (&b"owner"[..], Some(lease.id))
    );
    assert_eq!(
        client.cached_raft_leader(),
        Some(cluster.addrs[&leader].to_string()),
        "the client learned the leader from the redirect"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_keys_and_locks_survive_losing_the_leader() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let lease = client.grant(Duration::from_secs(5)).await.expect("grant");
    let bound = PutOptions {
        lease: Some(lease.id),
        ..PutOptions::default()
    };
    client.put("presence/a", "up", bound).await.expect("put");
    let lock = client
        .lock("jobs", lease.id, false, Duration::ZERO)
        .await
        .expect("lock");
    let LockOutcome::Held { token } = lock else {
        panic!("the free lock was not granted: {lock:?}");
    };
    // Renewed just before the leader goes away.
    let renewed = client.keep_alive_once([lease.id]).await.expect("renew");
    assert_eq!(renewed.renewed.len(), 1);

    cluster.stop(leader).await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, leader);
    let survivor = cluster.client(&cluster.running()).await;
    let ttl = survivor
        .time_to_live(lease.id, true)
        .await
        .expect("ttl")
        .expect("the lease survived the failover");
    assert_eq!(ttl.bound_keys, vec![b"presence/a".to_vec()]);
    assert_eq!(ttl.locks_held, vec!["jobs".to_string()]);
    // The new leader extended the lease: it has at least what was left, minus the time taken.
    assert!(ttl.remaining_ttl > Duration::ZERO);
    let status = survivor.lock_status("jobs").await.expect("lock status");
    assert_eq!(
        status.holder,
        Some(LockHolder {
            lease: lease.id,
            token
        })
    );
    let renewed = survivor
        .keep_alive_once([lease.id])
        .await
        .expect("renew after failover");
    assert_eq!(renewed.renewed.len(), 1);
    println!("failover: node {leader} stopped, node {new_leader} took over with the lease intact");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_catches_up_from_its_data_dir() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let lagging = cluster.followers(leader)[0];
    cluster.stop(lagging).await;
    let client = cluster.client(&cluster.running()).await;
    let mut last = Revision::ZERO;
    for i in 0..20 {
        let put = client
            .put(format!("k{i}"), "v", PutOptions::default())
            .await
            .expect("put");
        last = put.revision;
    }
    cluster.restart(lagging).await;
    cluster.wait_applied(last).await;
    let keys = cluster.node(lagging).state().read(|d| d.state.key_count());
    assert_eq!(keys, 20);
    // And it serves stale reads from what it caught up to.
    let local = cluster.client(&[lagging]).await;
    let read = local
        .range(
            "k",
            RangeOptions {
                prefix: true,
                serializable: true,
                ..RangeOptions::default()
            },
        )
        .await
        .expect("serializable read");
    assert_eq!(read.count, 20);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_with_two_down_still_serve() {
    let mut cluster = TestCluster::start(5).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&cluster.running()).await;
    let lease = client.grant(Duration::from_secs(10)).await.expect("grant");
    let put = client
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
    assert!(put.revision > Revision::ZERO);
    // Two of five down, the leader among them: three remain, still a majority.
    let follower = cluster.followers(leader)[0];
    cluster.stop(follower).await;
    cluster.stop(leader).await;
    cluster.leader().await;
    let client = cluster.client(&cluster.running()).await;
    assert!(client.get("k").await.expect("get").is_some());
    let put = client
        .put("k2", "v", PutOptions::default())
        .await
        .expect("put with two down");
    assert!(put.revision > Revision::ZERO);
    assert!(
        client
            .time_to_live(lease.id, false)
            .await
            .expect("ttl")
            .is_some()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_cannot_acknowledge_anything() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[leader]).await;
    client
        .put("before", "1", PutOptions::default())
        .await
        .expect("put");
    for id in cluster.followers(leader) {
        cluster.stop(id).await;
    }
    let lone = cluster.client(&[leader]).await;
    let attempt = tokio::time::timeout(
        Duration::from_secs(30),
        lone.put("after", "1", PutOptions::default()),
    )
    .await
    .expect("the client gives up within its deadline");
    let error = attempt.expect_err("a lone node must not acknowledge a write");
    println!("minority write failed as it must: {error}");
    let state_has_it = cluster
        .node(leader)
        .state()
        .read(|d| d.state.get(b"after").is_some());
    assert!(!state_has_it, "nothing was applied without a majority");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_from_many_clients_share_entries() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let mut leases = Vec::new();
    for _ in 0..64 {
        leases.push(
            client
                .grant(Duration::from_secs(30))
                .await
                .expect("grant")
                .id,
        );
    }
    let renewals = leases.iter().map(|id| {
        let client = client.clone();
        let id = *id;
        async move { client.keep_alive_once([id]).await }
    });
    let results = futures::future::join_all(renewals).await;
    let mut revisions: Vec<Revision> = results
        .into_iter()
        .map(|r| r.expect("renew").revision)
        .collect();
    revisions.sort_unstable();
    revisions.dedup();
    println!(
        "64 concurrent renewals committed in {} entries",
        revisions.len()
    );
    assert!(
        revisions.len() < 64,
        "concurrent renewals were not group-committed"
    );
    cluster.shutdown().await;
}

/// A leader that falls silent is replaced by an election the designated follower (the lowest id
/// left) calls as soon as the leader's lease on it runs out; the other follower keeps its random
/// timer and calls none. Writes go on under the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lowest_follower_calls_the_election_when_the_leader_falls_silent() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let followers = cluster.followers(leader);
    let designated = *followers.iter().min().expect("two followers");
    let other = *followers.iter().max().expect("two followers");
    let before: Vec<u64> = followers
        .iter()
        .map(|id| cluster.node(*id).elections_called())
        .collect();
    assert_eq!(before, [0, 0], "nobody calls while the leader speaks");

    cluster.stop(leader).await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, leader);
    assert!(
        cluster.node(designated).elections_called() >= 1,
        "node {designated} should have called the election"
    );
    assert_eq!(
        cluster.node(other).elections_called(),
        0,
        "node {other} is not the designated caller"
    );
    let client = cluster.client(&cluster.running()).await;
    writes_go_on(cluster, &client, "after/failover").await;
}

/// A write through `client` is acknowledged under whichever leader the cluster has now; then
/// the cluster stops.
async fn writes_go_on(cluster: TestCluster, client: &zaris_client::Client, key: &str) {
    client
        .put(key, "ok", PutOptions::default())
        .await
        .expect("a write under the new leader");
    cluster.shutdown().await;
}

/// Timings for the dead-leader tests: a lease (election timeout) long enough that a new leader
/// elected while it runs can only come from the dead-leader path.
fn long_lease(config: &mut zaris_server::config::NodeConfig) {
    config.election_timeout_ms = 8_000;
    config.heartbeat_ms = 100;
    config.limits.min_ttl_ms = zaris_core::DurationMs::new(10_000);
}

/// The leader this node follows, if any.
pub(crate) fn leader_seen_by(cluster: &TestCluster, id: u64) -> Option<u64> {
    use openraft::async_runtime::WatchReceiver;
    cluster
        .node(id)
        .raft()
        .metrics()
        .borrow_watched()
        .current_leader
}

/// Waits up to `within` for one of `followers` to follow a leader other than `old`, and
/// returns that leader.
pub(crate) async fn new_leader_among(
    cluster: &TestCluster,
    followers: &[u64],
    old: u64,
    within: Duration,
) -> u64 {
    zaris_testkit::wait::eventually("a new leader", within, || {
        let seen = followers
            .iter()
            .filter_map(|id| leader_seen_by(cluster, *id))
            .find(|l| *l != old);
        async move { seen }
    })
    .await
}

/// A leader whose process is gone (its peer port refuses connections) is replaced as soon as
/// both followers have probed it, long before its lease on them (8 s here) runs out: each
/// follower finds it dead on its own probe, and the designated one calls the election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_before_its_lease_runs_out() {
    let mut cluster = TestCluster::start_configured(3, long_lease).await;
    let leader = cluster.leader().await;
    let followers = cluster.followers(leader);
    let designated = *followers.iter().min().expect("two followers");
    let client = cluster.client(&followers).await;

    cluster.stop(leader).await;
    let stopped = std::time::Instant::now();
    let new_leader = new_leader_among(&cluster, &followers, leader, Duration::from_secs(4)).await;
    assert!(
        stopped.elapsed() < Duration::from_secs(8),
        "only the dead-leader path can elect before the 8 s lease ends"
    );
    assert!(followers.contains(&new_leader));
    for id in &followers {
        assert!(
            cluster.node(*id).leaders_found_dead() >= 1,
            "node {id} should have found leader {leader} dead on its own probe"
        );
    }
    assert!(cluster.node(designated).elections_called() >= 1);
    writes_go_on(cluster, &client, "after/dead-leader").await;
}

/// A leader that is alive but silent (its heartbeats switched off) still accepts connections, so
/// nobody finds it dead: its lease holds, and no follower calls an election while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_but_live_leader_keeps_its_lease() {
    let cluster = TestCluster::start_configured(3, long_lease).await;
    let leader = cluster.leader().await;
    let followers = cluster.followers(leader);
    cluster
        .node(leader)
        .raft()
        .runtime_config()
        .heartbeat(false);

    // Ten heartbeats of silence: five times what triggers a probe, well inside the 8 s lease.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for id in &followers {
        assert_eq!(
            cluster.node(*id).leaders_found_dead(),
            0,
            "node {id} found a live leader dead"
        );
        assert_eq!(cluster.node(*id).elections_called(), 0);
        assert_eq!(leader_seen_by(&cluster, *id), Some(leader));
    }
    cluster.node(leader).raft().runtime_config().heartbeat(true);
    let client = cluster.client(&followers).await;
    client
        .put("after/silence", "ok", PutOptions::default())
        .await
        .expect("a write under the same leader");
    assert_eq!(cluster.leader().await, leader);
    cluster.shutdown().await;
}

/// Five members, the leader and the designated election caller (the lowest id left) both gone
/// at once: nobody calls the prompt election, and the other three fall back to openraft's own
/// election timers (the fallback the dead-leader path must not break). Writes go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_and_a_dead_designated_caller_are_still_replaced() {
    let mut cluster = TestCluster::start(5).await;
    let leader = cluster.leader().await;
    let designated = *cluster
        .followers(leader)
        .iter()
        .min()
        .expect("four followers");
    cluster.stop(designated).await;
    cluster.stop(leader).await;
    let survivors = cluster.running();
    let new_leader = cluster.leader().await;
    assert!(
        survivors.contains(&new_leader),
        "{new_leader} of {survivors:?}"
    );
    let client = cluster.client(&survivors).await;
    writes_go_on(cluster, &client, "after/two-down").await;
}

/// A leader stopped and restarted at once, on the same ports, before anyone noticed it gone
/// (it may come back in the term it led, openraft resuming its committed vote): a lease it was
/// keeping is neither expired early (its key is there until the TTL has passed) nor kept
/// forever (nobody renews it, and it expires within the restart bound: restart + TTL +
/// election timeout, plus scheduling margin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_restarted_at_once_neither_expires_early_nor_forgets_to_expire() {
    use openraft::async_runtime::WatchReceiver;
    let ttl = Duration::from_secs(3);
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&cluster.running()).await;
    let sent = std::time::Instant::now();
    let lease = client.grant(ttl).await.expect("grant");
    client
        .put(
            "abandoned/key",
            "v",
            PutOptions {
                lease: Some(lease.id),
                ..PutOptions::default()
            },
        )
        .await
        .expect("put");
    let term_before = cluster
        .node(leader)
        .raft()
        .metrics()
        .borrow_watched()
        .current_term;

    cluster.stop(leader).await;
    cluster.restart(leader).await;
    let new_leader = cluster.leader().await;
    let term_after = cluster
        .node(new_leader)
        .raft()
        .metrics()
        .borrow_watched()
        .current_term;
    eprintln!(
        "leader {leader} (term {term_before}) restarted; leader now {new_leader} (term {term_after})"
    );

    // Never early: read until shortly before the TTL has passed since the grant was sent.
    let mut reads = 0;
    while sent.elapsed() + Duration::from_millis(150) < ttl {
        let read_at = sent.elapsed();
        let present = client.get("abandoned/key").await.expect("get").is_some();
        if read_at + Duration::from_millis(150) < ttl {
            assert!(
                present,
                "the key went {read_at:?} after the grant, TTL {ttl:?}"
            );
            reads += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        reads > 0,
        "the restart took the whole TTL: nothing was checked"
    );
    zaris_testkit::wait::eventually(
        "the abandoned lease's key to go",
        ttl + Duration::from_millis(zaris_testkit::cluster::ELECTION_TIMEOUT_MS) * 2
            + Duration::from_secs(5),
        || {
            let client = client.clone();
            async move {
                match client.get("abandoned/key").await {
                    Ok(None) => Some(()),
                    _ => None,
                }
            }
        },
    )
    .await;
    cluster.shutdown().await;
}
