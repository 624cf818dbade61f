//! Expiry: never early, bounded late (also across a leader change), atomic, no resurrection.
//!
//! The timing tests drive every node's lessor with one [`ManualClock`] and wait for the leader's
//! expiry loop to report that it acted on a lease time (`NodeHandle::lessor_progress`) before
//! they look: the bounds are asserted to the millisecond of lease time, with no sleeps and no
//! margins. (Raft's own timers run in real time; they decide who leads, not when a lease ends.)

use std::sync::Arc;
use std::time::Duration;

use zaris_client::PutOptions;
use zaris_core::{LeaseId, Revision};
use zaris_server::{LessorProgress, ManualClock};
use zaris_testkit::cluster::{ELECTION_TIMEOUT_MS, MIN_TTL_MS, TestCluster};
use zaris_testkit::eventually;

/// The lease's TTL in these tests; the cluster's minimum is [`MIN_TTL_MS`].
const TTL_MS: u64 = 2 * MIN_TTL_MS;
/// Lease time when the tests begin (not 0, so that "0 = nothing checked yet" is not confused
/// with a time).
const START_MS: u64 = 10_000;

/// A three-node cluster whose lessors all read `clock`, set to [`START_MS`], with a promoted
/// leader.
async fn cluster_on(clock: &Arc<ManualClock>) -> (TestCluster, u64) {
    clock.set(Duration::from_millis(START_MS));
    let cluster = TestCluster::start_with_clock(3, clock.clone()).await;
    let leader = cluster.leader().await;
    primary(&cluster, leader).await;
    (cluster, leader)
}

/// Waits (in real time, up to 20 s) until `node`'s lessor progress satisfies `done`.
async fn lessor_reaches(
    cluster: &TestCluster,
    node: u64,
    what: &str,
    done: impl FnMut(&LessorProgress) -> bool,
) -> LessorProgress {
    let mut progress = cluster.node(node).lessor_progress();
    let reached = tokio::time::timeout(Duration::from_secs(20), progress.wait_for(done))
        .await
        .unwrap_or_else(|_| panic!("node {node}'s lessor never {what}"))
        .expect("the node runs");
    *reached
}

/// Waits until `node`'s lessor is primary, and returns the lessor time it was promoted at.
async fn primary(cluster: &TestCluster, node: u64) -> u64 {
    lessor_reaches(cluster, node, "became primary", |p| {
        p.primary_term.is_some()
    })
    .await
    .promoted_at
    .get()
}

/// Moves lease time to `ms` and waits until the leader's expiry loop has acted on it: every
/// lease due at or before `ms` has been expired, in the log and on the leader, when this returns.
async fn advance_to(cluster: &TestCluster, clock: &ManualClock, leader: u64, ms: u64) {
    clock.set(Duration::from_millis(ms));
    lessor_reaches(cluster, leader, &format!("checked lease time {ms}"), |p| {
        p.primary_term.is_some() && p.checked.get() >= ms
    })
    .await;
}

/// Whether the lease and its keys exist, read on the leader; they must come and go together.
fn lease_and_keys(cluster: &TestCluster, node: u64, lease: LeaseId) -> bool {
    let (lease_live, a, b) = cluster.node(node).state().read(|d| {
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
    lease_live
}

async fn grant_with_keys(cluster: &TestCluster) -> (zaris_client::Client, LeaseId) {
    let client = cluster.client(&cluster.running()).await;
    let lease = client
        .grant(Duration::from_millis(TTL_MS))
        .await
        .expect("grant");
    let mut revision = Revision::ZERO;
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
    // Keys must be everywhere before anyone checks that they go with the lease.
    cluster.wait_applied(revision).await;
    (client, lease.id)
}

/// Never early, and not a lease-millisecond late: granted at T, a lease with TTL `ttl` is there
/// at T + ttl - 1 and gone, keys with it, once the leader has looked at T + ttl. Followers'
/// lessors see the same clock and expire nothing themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_lease_expires_exactly_at_its_deadline() {
    let clock = Arc::new(ManualClock::default());
    let (cluster, leader) = cluster_on(&clock).await;
    let (_client, lease) = grant_with_keys(&cluster).await;
    let deadline_ms = START_MS + TTL_MS;

    advance_to(&cluster, &clock, leader, deadline_ms - 1).await;
    assert!(lease_and_keys(&cluster, leader, lease), "expired early");

    advance_to(&cluster, &clock, leader, deadline_ms).await;
    assert!(
        !lease_and_keys(&cluster, leader, lease),
        "not expired at its deadline"
    );
    let revision = cluster
        .node(leader)
        .state()
        .read(|d| d.state.last_applied());
    cluster.wait_applied(revision).await;
    for follower in cluster.followers(leader) {
        assert!(!lease_and_keys(&cluster, follower, lease));
        let progress = *cluster.node(follower).lessor_progress().borrow();
        assert_eq!(
            progress.primary_term, None,
            "a follower's lessor is never primary"
        );
    }
    cluster.shutdown().await;
}

/// A renewal restarts the TTL from the lease time at which it applied, exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_restarts_the_ttl_from_when_it_applied() {
    let clock = Arc::new(ManualClock::default());
    let (cluster, leader) = cluster_on(&clock).await;
    let (client, lease) = grant_with_keys(&cluster).await;

    let renewed_at_ms = START_MS + TTL_MS - 1;
    advance_to(&cluster, &clock, leader, renewed_at_ms).await;
    let renewal = client.keep_alive_once([lease]).await.expect("renew");
    assert_eq!(renewal.renewed.len(), 1, "renewed before its deadline");

    // The first deadline passes: nothing happens.
    advance_to(&cluster, &clock, leader, renewed_at_ms + TTL_MS - 1).await;
    assert!(
        lease_and_keys(&cluster, leader, lease),
        "expired before the renewed deadline"
    );
    advance_to(&cluster, &clock, leader, renewed_at_ms + TTL_MS).await;
    assert!(
        !lease_and_keys(&cluster, leader, lease),
        "outlived the renewed deadline"
    );
    let after = client
        .keep_alive_once([lease])
        .await
        .expect("renew after expiry");
    assert_eq!(
        after.not_found,
        vec![lease],
        "an expired lease is never revived"
    );
    cluster.shutdown().await;
}

/// The promotion rule, exactly: the new leader, promoted at lease time P, keeps every lease
/// until max(deadline, P) + one election timeout, and expires it then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_extends_every_lease_by_one_election_timeout() {
    let clock = Arc::new(ManualClock::default());
    let (mut cluster, leader) = cluster_on(&clock).await;
    let (_client, lease) = grant_with_keys(&cluster).await;
    let deadline_ms = START_MS + TTL_MS;

    // Lease time stands still at half the TTL while the leader dies and another takes over.
    advance_to(&cluster, &clock, leader, START_MS + TTL_MS / 2).await;
    cluster.stop(leader).await;
    let successor = cluster.leader().await;
    let promoted_at_ms = primary(&cluster, successor).await;
    assert_eq!(promoted_at_ms, START_MS + TTL_MS / 2);
    let extended_ms = deadline_ms.max(promoted_at_ms) + ELECTION_TIMEOUT_MS;

    // Past the old deadline, within the extension: still there.
    advance_to(&cluster, &clock, successor, extended_ms - 1).await;
    assert!(
        lease_and_keys(&cluster, successor, lease),
        "the new leader expired a lease before its extension ran out"
    );
    advance_to(&cluster, &clock, successor, extended_ms).await;
    assert!(
        !lease_and_keys(&cluster, successor, lease),
        "the new leader kept a lease past its extended deadline"
    );
    cluster.shutdown().await;
}

/// A lease renewed all along outlives many TTLs (lease time moves a third of a TTL per renewal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_lease_does_not_expire() {
    let clock = Arc::new(ManualClock::default());
    let (cluster, leader) = cluster_on(&clock).await;
    let (client, lease) = grant_with_keys(&cluster).await;
    let mut now_ms = START_MS;
    for _ in 0..10 {
        now_ms += TTL_MS / 3;
        advance_to(&cluster, &clock, leader, now_ms).await;
        let renewed = client.keep_alive_once([lease]).await.expect("renew");
        assert_eq!(renewed.renewed.len(), 1, "a renewed lease was lost");
    }
    assert!(now_ms >= START_MS + 3 * TTL_MS);
    assert!(lease_and_keys(&cluster, leader, lease));
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
        .grant_with_id(LeaseId::new(lease.get() + 10), ttl)
        .await
        .expect("grant a fresh id");
    assert_eq!(fresh.map(|g| g.id), Some(LeaseId::new(lease.get() + 10)));
    cluster.shutdown().await;
}
