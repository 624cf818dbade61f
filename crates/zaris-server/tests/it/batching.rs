//! Group commit of client writes (`batch.rs`): concurrent puts, grants and lock calls share Raft
//! entries, each answered on its own, and two changes to one key, lease or lock never share one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;
use zaris_client::{LockOutcome, PutOptions};
use zaris_core::{FencingToken, LeaseId, Revision};
use zaris_testkit::cluster::TestCluster;

const REQUESTS: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_entries_and_each_gets_its_own_answer() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[leader]).await;

    // Puts to distinct keys, all in flight at once: fewer entries than puts.
    let written = join_all(
        (0..REQUESTS).map(|i| client.put(format!("k{i}"), format!("v{i}"), PutOptions::default())),
    )
    .await;
    let revisions: Vec<Revision> = written
        .into_iter()
        .map(|w| w.expect("put").revision)
        .collect();
    let distinct: BTreeSet<_> = revisions.iter().collect();
    assert!(
        distinct.len() < REQUESTS,
        "{REQUESTS} concurrent puts took {} entries: nothing was batched",
        distinct.len()
    );
    // Every put is there, at the revision it was told, on a follower too.
    cluster
        .wait_applied(**distinct.last().expect("revisions"))
        .await;
    let reader = cluster.client(&[follower]).await;
    for (i, revision) in revisions.iter().enumerate() {
        let kv = reader
            .get(format!("k{i}"))
            .await
            .expect("get")
            .expect("written");
        assert_eq!(kv.value, format!("v{i}").into_bytes());
        assert_eq!(kv.mod_revision, *revision);
    }

    // Grants: distinct ids, shared entries.
    let ttl = Duration::from_secs(30);
    let grants: Vec<_> = join_all((0..REQUESTS).map(|_| client.grant(ttl)))
        .await
        .into_iter()
        .map(|g| g.expect("grant"))
        .collect();
    let ids: BTreeSet<LeaseId> = grants.iter().map(|g| g.id).collect();
    assert_eq!(ids.len(), REQUESTS, "a lease id was handed out twice");
    let grant_revisions: BTreeSet<Revision> = grants.iter().map(|g| g.revision).collect();
    assert!(grant_revisions.len() < REQUESTS, "no grants were batched");

    // Locks of different names: each held, fenced by the revision it was acquired at.
    let leases: Vec<LeaseId> = grants.iter().map(|g| g.id).collect();
    let held = join_all(
        leases
            .iter()
            .enumerate()
            .map(|(i, lease)| client.lock(format!("lock-{i}"), *lease, false, Duration::ZERO)),
    )
    .await;
    let tokens: Vec<FencingToken> = held
        .into_iter()
        .map(|outcome| match outcome.expect("lock") {
            LockOutcome::Held { token } => token,
            other => panic!("a free lock was not granted: {other:?}"),
        })
        .collect();
    let distinct_tokens: BTreeSet<_> = tokens.iter().collect();
    assert!(
        distinct_tokens.len() < REQUESTS,
        "no lock calls were batched"
    );
    for (i, token) in tokens.iter().enumerate() {
        let status = client
            .lock_status(format!("lock-{i}"))
            .await
            .expect("status");
        assert_eq!(
            status.holder.map(|h| (h.lease, h.token)),
            Some((leases[i], *token))
        );
    }
    cluster.shutdown().await;
}

/// Two changes to one key, lease or lock at one revision could not be told apart (a
/// `mod_revision` compare, a fencing token), so concurrent writes to one thing take an entry each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_changes_to_one_key_or_lock_never_share_a_revision() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[leader]).await;

    const SAME: usize = 24;
    let written =
        join_all((0..SAME).map(|i| client.put("one", format!("{i}"), PutOptions::default()))).await;
    let mut by_revision = BTreeMap::new();
    for (i, w) in written.into_iter().enumerate() {
        by_revision.insert(w.expect("put").revision, i);
    }
    assert_eq!(
        by_revision.len(),
        SAME,
        "two puts to one key shared a revision"
    );
    let kv = client.get("one").await.expect("get").expect("written");
    assert_eq!(kv.version, SAME as u64);
    // The last revision's put is the value left.
    let (last_revision, last) = by_revision.last_key_value().expect("puts");
    assert_eq!(kv.mod_revision, *last_revision);
    assert_eq!(kv.value, format!("{last}").into_bytes());

    // Many leases race for one lock without waiting: exactly one holds it.
    let ttl = Duration::from_secs(30);
    let leases: Vec<LeaseId> = join_all((0..SAME).map(|_| client.grant(ttl)))
        .await
        .into_iter()
        .map(|g| g.expect("grant").id)
        .collect();
    let outcomes = join_all(
        leases
            .iter()
            .map(|lease| client.lock("contended", *lease, false, Duration::ZERO)),
    )
    .await;
    let holders: Vec<_> = outcomes
        .iter()
        .zip(&leases)
        .filter_map(|(outcome, lease)| match outcome {
            Ok(LockOutcome::Held { token }) => Some((*lease, *token)),
            Ok(LockOutcome::Busy { .. }) => None,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(holders.len(), 1, "{holders:?}");
    let status = client.lock_status("contended").await.expect("status");
    assert_eq!(status.holder.map(|h| (h.lease, h.token)), Some(holders[0]));
    cluster.shutdown().await;
}
