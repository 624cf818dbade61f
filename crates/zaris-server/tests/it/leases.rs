//! Expiry: never early, bounded late (also across a leader change), atomic, no resurrection.

use std::time::{Duration, Instant};

use zaris_client::PutOptions;
use zaris_testkit::cluster::{ELECTION_TIMEOUT_MS, MIN_TTL_MS, TestCluster};
use zaris_testkit::eventually;

/// Slack for scheduling on a loaded 2-core CI machine; the bound under test is TTL + election
/// timeout, and this only absorbs the expiry loop's tick, the commit and test polling.
const MARGIN_MS: u64 = 1_500;

/// Watches one node until the lease and both its keys are gone; checks they go together.
async fn wait_until_expired(cluster: &TestCluster, observer: u64, lease: u64) -> Instant {
    eventually("the lease to expire", Duration::from_secs(30), || async {
        let (lease_live, a, b) = cluster.node(observer).state().read(|d| {
            (
                d.state.lease(lease, false).is_some(),
                d.state.get(b"worker/a").is_some(),
                d.state.get(b"worker/b").is_some(),
            )
        });
        assert!(
            lease_live == a && a == b,
            "a lease and its keys must disappear in one step: lease {lease_live}, keys {a} {b}"
        );
        (!lease_live).then(Instant::now)
    })
    .await
}

async fn grant_with_keys(cluster: &TestCluster) -> (zaris_client::Client, u64, Instant) {
    let client = cluster.client(&cluster.running()).await;
    let sent = Instant::now();
    let lease = client
        .grant(Duration::from_millis(MIN_TTL_MS))
        .await
        .expect("grant");
    let mut revision = 0;
    for key in ["worker/a", "worker/b"] {
        let put = client
            .put(
                key,
                "up",
                PutOptions {
                    lease: Some(lease.id),
                    ..PutOptions::default()
                },
            )
            .await
            .expect("put");
        revision = put.revision;
    }
    // Observers check that the keys go with the lease, so every node must have them first.
    cluster.wait_applied(revision).await;
    (client, lease.id, sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_lease_expires_after_its_ttl_and_not_much_later() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let observer = cluster.followers(leader)[0];
    let (client, lease, _) = grant_with_keys(&cluster).await;
    // Renew once; the bounds count from when this renewal was sent.
    let sent = Instant::now();
    let renewed = client.keep_alive_once([lease]).await.expect("renew");
    assert_eq!(renewed.renewed.len(), 1);
    let gone = wait_until_expired(&cluster, observer, lease).await;
    let elapsed_ms = gone.duration_since(sent).as_millis() as u64;
    println!(
        "expiry timing: ttl {MIN_TTL_MS} ms, keys gone {elapsed_ms} ms after the renew was sent"
    );
    assert!(
        elapsed_ms >= MIN_TTL_MS,
        "expired early: {elapsed_ms} ms < TTL"
    );
    assert!(
        elapsed_ms <= MIN_TTL_MS + ELECTION_TIMEOUT_MS + MARGIN_MS,
        "expired too late: {elapsed_ms} ms"
    );
    // No resurrection.
    let after = client
        .keep_alive_once([lease])
        .await
        .expect("renew after expiry");
    assert_eq!(after.not_found, vec![lease]);
    assert!(
        client
            .time_to_live(lease, false)
            .await
            .expect("ttl")
            .is_none()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_bounds_hold_across_a_leader_change() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let (client, lease, _) = grant_with_keys(&cluster).await;
    let sent = Instant::now();
    client.keep_alive_once([lease]).await.expect("renew");
    cluster.stop(leader).await;
    let observer = cluster.running()[0];
    let gone = wait_until_expired(&cluster, observer, lease).await;
    let elapsed_ms = gone.duration_since(sent).as_millis() as u64;
    println!(
        "expiry timing across failover: ttl {MIN_TTL_MS} ms, election timeout \
         {ELECTION_TIMEOUT_MS} ms, keys gone {elapsed_ms} ms after the renew was sent"
    );
    assert!(
        elapsed_ms >= MIN_TTL_MS,
        "expired early: {elapsed_ms} ms < TTL"
    );
    assert!(
        elapsed_ms <= MIN_TTL_MS + 2 * ELECTION_TIMEOUT_MS + MARGIN_MS,
        "expired too late: {elapsed_ms} ms"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_lease_does_not_expire() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let (client, lease, _) = grant_with_keys(&cluster).await;
    let until = Instant::now() + Duration::from_millis(3 * MIN_TTL_MS);
    while Instant::now() < until {
        let renewed = client.keep_alive_once([lease]).await.expect("renew");
        assert_eq!(renewed.renewed.len(), 1, "a renewed lease was lost");
        tokio::time::sleep(Duration::from_millis(MIN_TTL_MS / 4)).await;
    }
    assert!(
        client
            .time_to_live(lease, false)
            .await
            .expect("ttl")
            .is_some()
    );
    cluster.shutdown().await;
}

/// Issue 9, item 7: an Expire batch larger than the cluster's `max_batch_ids` was rejected on
/// apply and proposed again forever, so those leases never expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_overdue_leases_than_the_batch_limit_all_expire() {
    let cluster = TestCluster::start_configured(1, |c| c.limits.max_batch_ids = 2).await;
    cluster.leader().await;
    let client = cluster.client(&cluster.running()).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let lease = client
            .grant(Duration::from_millis(MIN_TTL_MS))
            .await
            .expect("grant");
        ids.push(lease.id);
    }
    let node = cluster.running()[0];
    eventually("every lease to expire", Duration::from_secs(20), || async {
        cluster
            .node(node)
            .state()
            .read(|d| d.state.lease_count() == 0)
            .then_some(())
    })
    .await;
    cluster.shutdown().await;
}

/// Issue 9, hole 1: after an operator revoked a lock holder's lease, granting a lease with the
/// same id let the old holder's keepalive renew the new lease, so it never noticed it lost the
/// lock. Ids are never granted again, and the old owner's renewals find nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_lease_id_cannot_be_granted_again() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&cluster.running()).await;
    let ttl = Duration::from_millis(5 * MIN_TTL_MS);
    let lease = client.grant(ttl).await.expect("grant").id;
    assert!(matches!(
        client.revoke(lease).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    assert_eq!(
        client.grant_with_id(lease, ttl).await.expect("grant again"),
        None,
        "an ended lease's id must never be granted again"
    );
    let renewed = client.keep_alive_once([lease]).await.expect("renew");
    assert_eq!(renewed.not_found, vec![lease]);
    // A fresh id above every used one is fine.
    let fresh = client
        .grant_with_id(lease + 10, ttl)
        .await
        .expect("grant a fresh id");
    assert_eq!(fresh.map(|g| g.id), Some(lease + 10));
    cluster.shutdown().await;
}
