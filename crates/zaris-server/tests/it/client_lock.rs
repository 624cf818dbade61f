//! The client library's lock guard and election recipes against a real cluster.

use std::time::Duration;

use zaris_client::{Election, Error, PutOptions};
use zaris_core::LeaseId;
use zaris_testkit::cluster::TestCluster;
use zaris_testkit::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_are_granted_fifo_with_increasing_tokens() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let ttl = Duration::from_secs(30);
    let holder = client.lease(ttl).await.expect("lease");
    let first = holder.lock("q").await.expect("lock");
    assert!(first.is_held());

    let mut waits = Vec::new();
    for queued in 1..=3u64 {
        let lease = client.lease(ttl).await.expect("lease");
        waits.push(tokio::spawn(async move {
            let guard = lease.lock("q").await;
            (lease, guard)
        }));
        eventually("the waiter to queue", Duration::from_secs(10), || async {
            let status = client.lock_status("q").await.ok()?;
            (status.waiters == queued).then_some(())
        })
        .await;
    }
    // try_lock never queues, lock_timeout gives up and leaves the queue.
    let impatient = client.lease(ttl).await.expect("lease");
    assert!(impatient.try_lock("q").await.expect("try").is_none());
    let timed_out = impatient
        .lock_timeout("q", Duration::from_millis(200))
        .await
        .expect("lock_timeout");
    assert!(timed_out.is_none());
    assert_eq!(client.lock_status("q").await.expect("status").waiters, 3);

    let mut token = first.token();
    first.unlock().await.expect("unlock");
    for wait in waits {
        let (lease, guard) = wait.await.expect("join");
        let guard = guard.expect("granted in turn");
        assert!(guard.token() > token, "tokens must increase");
        token = guard.token();
        let status = client.lock_status("q").await.expect("status");
        assert_eq!(
            status.holder.map(|h| h.lease),
            Some(lease.id()),
            "served in queue order"
        );
        guard.unlock().await.expect("unlock");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_tokens_cannot_write_or_release() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let a = client.lease(Duration::from_secs(30)).await.expect("lease");
    let b = client.lease(Duration::from_secs(30)).await.expect("lease");
    let a_guard = a.lock("res").await.expect("A locks");
    a_guard
        .put("res/data", "A1", PutOptions::default())
        .await
        .expect("A writes while holding");

    // A's lease is revoked behind its back (an operator, or another client): B takes over.
    assert!(matches!(
        client.revoke(a.id()).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    let b_guard = b.lock("res").await.expect("B locks");
    assert!(b_guard.token() > a_guard.token());

    let stale_write = a_guard.put("res/data", "A2", PutOptions::default()).await;
    assert!(
        matches!(stale_write, Err(Error::NotHeld { .. })),
        "{stale_write:?}"
    );
    let stale_delete = a_guard
        .delete("res/data", zaris_client::DeleteOptions::default())
        .await;
    assert!(
        matches!(stale_delete, Err(Error::NotHeld { .. })),
        "{stale_delete:?}"
    );
    let stale_release = a_guard.unlock().await;
    assert!(
        matches!(stale_release, Err(Error::NotHeld { .. })),
        "{stale_release:?}"
    );
    assert!(b_guard.is_held());
    let status = client.lock_status("res").await.expect("status");
    assert_eq!(
        status.holder.map(|h| (h.lease, h.token)),
        Some((b.id(), b_guard.token()))
    );
    assert_eq!(
        client
            .get("res/data")
            .await
            .expect("get")
            .expect("kept")
            .value,
        b"A1"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_ends_when_the_waiting_lease_is_lost() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let holder = client.lease(Duration::from_secs(30)).await.expect("lease");
    let _held = holder.lock("busy").await.expect("lock");
    let waiter = client.lease(Duration::from_secs(30)).await.expect("lease");
    let wait = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.lock("busy").await })
    };
    eventually("the waiter to queue", Duration::from_secs(10), || async {
        let status = client.lock_status("busy").await.ok()?;
        (status.waiters == 1).then_some(())
    })
    .await;
    assert!(matches!(
        client.revoke(waiter.id()).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    let result = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the wait ends")
        .expect("join");
    assert!(matches!(result, Err(Error::LeaseLost { .. })), "{result:?}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_passes_to_the_next_candidate_and_observers_follow() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let election = Election::new(&client, "scheduler");
    assert_eq!(election.leader().await.expect("leader"), None);
    let mut observer = election.observe().await.expect("observe");
    assert_eq!(observer.next().await.expect("first").expect("ok"), None);

    let a = client.lease(Duration::from_secs(30)).await.expect("lease");
    let b = client.lease(Duration::from_secs(30)).await.expect("lease");
    let a_lead = election.campaign(&a, "node-a").await.expect("A campaigns");
    let incumbent = election.leader().await.expect("leader").expect("A leads");
    assert_eq!(
        (incumbent.value.as_slice(), incumbent.lease),
        (&b"node-a"[..], a.id())
    );
    let seen = observer.next().await.expect("event").expect("ok");
    assert_eq!(seen.map(|i| i.value), Some(b"node-a".to_vec()));

    let b_campaign = {
        let election = election.clone();
        let b = b.clone();
        tokio::spawn(async move { election.campaign(&b, "node-b").await })
    };
    eventually("B to queue", Duration::from_secs(10), || async {
        let status = client.lock_status(election.key()).await.ok()?;
        (status.waiters == 1).then_some(())
    })
    .await;
    a_lead.proclaim("node-a v2").await.expect("proclaim");
    let seen = observer.next().await.expect("event").expect("ok");
    assert_eq!(seen.map(|i| i.value), Some(b"node-a v2".to_vec()));

    // A's lease expires (here: is revoked): its value vanishes and B takes over, fenced.
    let a_token = a_lead.token();
    assert!(matches!(
        client.revoke(a.id()).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    let b_lead = b_campaign.await.expect("join").expect("B leads");
    assert!(b_lead.token() > a_token);
    // A's lease handle learns of the revoke at its next renewal; a refused fenced write tells
    // it at once.
    assert!(matches!(
        a_lead.proclaim("stale").await,
        Err(Error::NotHeld { .. })
    ));
    assert!(!a_lead.is_leader());
    let seen = observer.next().await.expect("event").expect("ok");
    assert_eq!(seen, None, "A's value is removed with its lease");
    let seen = observer.next().await.expect("event").expect("ok");
    assert_eq!(
        seen.map(|i| (i.value, i.lease)),
        Some((b"node-b".to_vec(), b.id()))
    );

    b_lead.resign().await.expect("resign");
    assert_eq!(election.leader().await.expect("leader"), None);
    cluster.shutdown().await;
}

/// Waits until lock `name` has `waiters` waiters and, if `holder` is given, is held by it (or,
/// with `None`, is free).
async fn wait_for_queue(
    client: &zaris_client::Client,
    name: &str,
    holder: Option<LeaseId>,
    waiters: u64,
) {
    eventually(
        "the lock queue to settle",
        Duration::from_secs(15),
        || async {
            let status = client.lock_status(name).await.ok()?;
            (status.waiters == waiters && status.holder.map(|h| h.lease) == holder).then_some(())
        },
    )
    .await;
}

/// Issue 9, hole 3: a lock wait dropped by a timeout, a `select!` or an aborted task left its
/// lease queued; when the entry reached the head, the lease held the lock with no guard, kept
/// alive by the background keeper, and nobody else could take it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_lock_waits_and_campaigns_give_their_queue_places_back() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let ttl = Duration::from_secs(30);
    let holder = client.lease(ttl).await.expect("lease");
    let held = holder.lock("q").await.expect("lock");

    // A wait given up by a timeout around the future (not lock_timeout).
    let impatient = client.lease(ttl).await.expect("lease");
    let gave_up = tokio::time::timeout(Duration::from_millis(300), impatient.lock("q")).await;
    assert!(
        gave_up.is_err(),
        "the lock is held: the wait must still be pending"
    );
    // A wait in a task that is aborted once it is queued.
    let aborted = client.lease(ttl).await.expect("lease");
    let task = {
        let aborted = aborted.clone();
        tokio::spawn(async move { aborted.lock("q").await })
    };
    wait_for_queue(&client, "q", Some(LeaseId::new((holder.id()).get())), 1).await;
    task.abort();
    // A campaign dropped while it waits (its lock is the election's).
    let election = Election::new(&client, "q-election");
    let incumbent = client.lease(ttl).await.expect("lease");
    let _leading = election
        .campaign(&incumbent, "one")
        .await
        .expect("campaign");
    let candidate = client.lease(ttl).await.expect("lease");
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        election.campaign(&candidate, "two"),
    )
    .await;
    assert!(
        dropped.is_err(),
        "the election has a leader: the campaign must still wait"
    );

    wait_for_queue(&client, "q", Some(LeaseId::new((holder.id()).get())), 0).await;
    wait_for_queue(
        &client,
        &election.key(),
        Some(LeaseId::new((incumbent.id()).get())),
        0,
    )
    .await;
    // Released, the lock is free for anyone: no abandoned waiter took it over.
    held.unlock().await.expect("unlock");
    wait_for_queue(&client, "q", None, 0).await;
    let newcomer = client.lease(ttl).await.expect("lease");
    assert!(newcomer.try_lock("q").await.expect("try_lock").is_some());
    cluster.shutdown().await;
}

/// The review of 2026-12-04: a claim abandoned while the cluster is out of reach (a guard
/// dropped, or a wait given up) was given back with one attempt, which failed, and never again:
/// once the cluster was back, the lease (alive, kept by its keeper) held the lock with no guard
/// until it ended. The give-back now tries again for as long as the lease may live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_while_the_cluster_is_down_releases_the_lock_once_it_is_up() {
    let mut cluster = TestCluster::start(1).await;
    cluster.leader().await;
    cluster.set_client_options(
        zaris_client::ClientOptions::default().with_timeout(Duration::from_millis(800)),
    );
    let client = cluster.client(&[1]).await;
    let lease = client.lease(Duration::from_secs(60)).await.expect("lease");
    let guard = lease.lock("down").await.expect("lock");

    cluster.stop(1).await;
    drop(guard);
    // Long enough for the release's first attempts to fail (each within the client's 0.8 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.restart(1).await;
    cluster.leader().await;

    wait_for_queue(&client, "down", None, 0).await;
    assert!(lease.is_valid(), "the lease itself lives on");
    let other = client.lease(Duration::from_secs(60)).await.expect("lease");
    assert!(other.try_lock("down").await.expect("try_lock").is_some());
    cluster.shutdown().await;
}

/// The review of 2026-12-04: a Lock call cancelled by its client while it waited left its wait
/// registered on the node until its lease ended (for good, for a lease that never existed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_call_cancelled_while_it_waits_leaves_no_wait_behind() {
    use zaris_client::proto::LockRequest;
    use zaris_client::proto::lock_client::LockClient;

    let cluster = TestCluster::start(1).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[leader]).await;
    let holder = client.lease(Duration::from_secs(60)).await.expect("lease");
    let _held = holder.lock("busy").await.expect("lock");
    let waiter = client.grant(Duration::from_secs(60)).await.expect("grant");
    let mut raw = LockClient::connect(format!("http://{}", cluster.address(leader)))
        .await
        .expect("connect");
    let call = raw.lock(LockRequest {
        name: "busy".into(),
        lease: waiter.id.get(),
        wait: true,
        timeout_ms: 60_000,
        seen_revision: None,
    });
    // Cancelled by the client while the node waits (the stream is reset).
    assert!(
        tokio::time::timeout(Duration::from_millis(300), call)
            .await
            .is_err(),
        "the lock is held: the call must still be waiting"
    );
    eventually(
        "the cancelled waits to be forgotten",
        Duration::from_secs(10),
        || async { (cluster.node(leader).lock_waits() == 0).then_some(()) },
    )
    .await;
    assert_eq!(client.lock_status("busy").await.expect("status").waiters, 1);
    cluster.shutdown().await;
}

/// A Lock request that reaches the leader after its caller withdrew the wait (held up in the
/// network, or in a paused process) says when it was sent, and the cluster refuses it as
/// OVERTAKEN: it must not queue the lease again, which would then hold the lock with no guard.
/// Over a real cluster's API: the proto field, the conversion, the replicated check, and the
/// epoch surviving a restart (it is replicated state).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_request_sent_before_its_lease_withdrew_is_overtaken() {
    use zaris_client::proto::lock_client::LockClient;
    use zaris_client::proto::{LockRequest, LockResponse, LockResult, UnlockRequest, UnlockResult};

    async fn raw(address: String) -> LockClient<tonic::transport::Channel> {
        LockClient::connect(format!("http://{address}"))
            .await
            .expect("connect")
    }
    async fn lock(address: String, request: LockRequest) -> LockResponse {
        raw(address)
            .await
            .lock(request)
            .await
            .expect("lock")
            .into_inner()
    }

    let mut cluster = TestCluster::start(1).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[leader]).await;
    let holder = client.lease(Duration::from_secs(60)).await.expect("lease");
    let _held = holder.lock("busy").await.expect("lock");
    let waiter = client.grant(Duration::from_secs(60)).await.expect("grant");
    let sent_after = client.seen_revision().get();
    let request = |seen_revision| LockRequest {
        name: "busy".into(),
        lease: waiter.id.get(),
        wait: true,
        timeout_ms: 0,
        seen_revision,
    };
    // The give-back arrives first, and finds nothing to withdraw.
    let withdrawn = raw(cluster.address(leader))
        .await
        .unlock(UnlockRequest {
            name: "busy".into(),
            lease: waiter.id.get(),
            token: 0,
            request_id: None,
        })
        .await
        .expect("withdraw")
        .into_inner();
    assert_eq!(withdrawn.result(), UnlockResult::NotHolder);
    let withdrawn_at = withdrawn.header.expect("header").revision;

    // Then the Lock it gave back.
    let late = lock(cluster.address(leader), request(Some(sent_after))).await;
    assert_eq!(late.result(), LockResult::Overtaken);
    assert!(late.header.expect("header").revision > withdrawn_at);
    assert_eq!(client.lock_status("busy").await.expect("status").waiters, 0);

    // Still so after the member restarts from what it stored.
    cluster.stop(leader).await;
    cluster.restart(leader).await;
    let leader = cluster.leader().await;
    let late = lock(cluster.address(leader), request(Some(sent_after))).await;
    assert_eq!(late.result(), LockResult::Overtaken);
    // Sent as of the withdrawal, a Lock queues as before.
    let queued = lock(cluster.address(leader), request(Some(withdrawn_at))).await;
    assert_eq!(queued.result(), LockResult::Queued);
    assert_eq!(client.lock_status("busy").await.expect("status").waiters, 1);
    cluster.shutdown().await;
}

/// One lease for all of a worker's locks (a session, as etcd's concurrency package has): its
/// tasks take and release different locks at once, and none is refused for another's release
/// (a lock's epoch is kept per lock name, so an Unlock of one overtakes no Lock of another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_takes_and_releases_many_locks_at_once() {
    let cluster = TestCluster::start(1).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[leader]).await;
    let session = client.lease(Duration::from_secs(60)).await.expect("lease");
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let session = session.clone();
            tokio::spawn(async move {
                for round in 0..10 {
                    let name = format!("shard/{task}");
                    let guard = session.lock(name.clone()).await?;
                    guard
                        .put(name, format!("{round}"), PutOptions::default())
                        .await?;
                    guard.unlock().await?;
                }
                Ok::<(), Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await
            .expect("task")
            .expect("every lock, write and unlock");
    }
    for task in 0..8 {
        let kv = client.get(format!("shard/{task}")).await.expect("get");
        assert_eq!(kv.map(|kv| kv.value), Some(b"9".to_vec()));
    }
    cluster.shutdown().await;
}

/// Issue 9, hole 3: a wait dropped after the lock was handed to it (the answer HELD was on its
/// way) must release the lock, not keep it with no guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_dropped_as_the_lock_arrives_releases_it() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let ttl = Duration::from_secs(30);
    let holder = client.lease(ttl).await.expect("lease");
    let waiter = client.lease(ttl).await.expect("lease");
    for round in 0..5 {
        let held = holder.lock("hand-over").await.expect("lock");
        let task = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.lock("hand-over").await })
        };
        wait_for_queue(
            &client,
            "hand-over",
            Some(LeaseId::new((holder.id()).get())),
            1,
        )
        .await;
        // Hand the lock over and abort the waiter at about the same moment, at a different
        // offset each round.
        let release = held.unlock();
        tokio::time::sleep(Duration::from_millis(round * 2)).await;
        task.abort();
        release.await.expect("unlock");
        // Whether the abort came before or after the hand-over, the lock ends up free.
        wait_for_queue(&client, "hand-over", None, 0).await;
    }
    cluster.shutdown().await;
}

/// Issue 9, item 7: `lock_timeout(Duration::MAX)` panicked (`Instant + Duration` overflowed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_without_a_bound_waits_like_lock() {
    let cluster = TestCluster::start(1).await;
    cluster.leader().await;
    let client = cluster.client(&[1]).await;
    let lease = client.lease(Duration::from_secs(30)).await.expect("lease");
    let guard = lease
        .lock_timeout("free", Duration::MAX)
        .await
        .expect("lock_timeout")
        .expect("a free lock is granted");
    assert!(guard.is_held());
    cluster.shutdown().await;
}

/// A guard dropped (released in the background) and the same lock taken again by the same lease
/// at once: the background release must not take the new guard's lock away. (The cluster cannot
/// tell the two apart: both are the same lease.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_does_not_release_a_new_guard_of_the_same_lease() {
    let cluster = TestCluster::start(1).await;
    cluster.leader().await;
    let client = cluster.client(&[1]).await;
    let lease = client.lease(Duration::from_secs(30)).await.expect("lease");
    for _ in 0..10 {
        let first = lease.lock("again").await.expect("lock");
        drop(first);
        let second = lease.lock("again").await.expect("lock again");
        // Give any background release time to land, then check the lock is still ours.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = client.lock_status("again").await.expect("status");
        assert_eq!(
            status.holder.map(|h| (h.lease, h.token)),
            Some((lease.id(), second.token())),
            "the new guard lost its lock"
        );
        second.unlock().await.expect("unlock");
    }
    cluster.shutdown().await;
}

/// The review of 2026-12-04: two guards of one lease for one lock hold the same token, so when
/// one releases it the other holds nothing either, and must say so. A later lock of the lease
/// gets a higher token and is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_released_by_its_twin_of_the_same_lease_is_not_held() {
    let cluster = TestCluster::start(1).await;
    cluster.leader().await;
    let client = cluster.client(&[1]).await;
    let lease = client.lease(Duration::from_secs(30)).await.expect("lease");
    let other = client.lease(Duration::from_secs(30)).await.expect("lease");
    let first = lease.lock("twin").await.expect("lock");
    let second = lease.lock("twin").await.expect("lock again");
    assert_eq!(first.token(), second.token());
    assert!(first.is_held() && second.is_held());

    first.unlock().await.expect("unlock");
    assert!(!second.is_held(), "its twin released the lock");
    // Someone else takes it; the released twin's fenced write is refused by the store too.
    let taken = other.lock("twin").await.expect("lock by another lease");
    assert!(taken.token() > second.token());
    assert!(matches!(
        second.put("twin/k", "v", PutOptions::default()).await,
        Err(Error::NotHeld { .. })
    ));
    drop(second);
    let taken_token = taken.token();
    taken.unlock().await.expect("unlock");

    let again = lease.lock("twin").await.expect("lock once more");
    assert!(again.token() > taken_token);
    assert!(
        again.is_held(),
        "a new lock of the lease holds its new token"
    );
    cluster.shutdown().await;
}

/// The lock-name limit counts the election's hidden `election/` prefix; a name that is too long
/// is refused in terms of the name the caller gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_name_too_long_is_refused_naming_the_room_left() {
    let cluster = TestCluster::start(1).await;
    cluster.leader().await;
    let client = cluster.client(&[1]).await;
    let lease = client.lease(Duration::from_secs(5)).await.expect("lease");
    let limit = zaris_core::Limits::default().max_lock_name_bytes as usize;
    let room = limit - "election/".len();

    let fits = Election::new(&client, "n".repeat(room));
    let leadership = fits.campaign(&lease, "a").await.expect("a name that fits");
    leadership.resign().await.expect("resign");

    let too_long = Election::new(&client, "n".repeat(room + 1));
    match too_long.campaign(&lease, "a").await {
        Err(Error::InvalidArgument { reason }) => {
            assert!(reason.contains(&format!("at most {room} fit")), "{reason}");
            assert!(
                reason.contains(&format!("is {} bytes", room + 1)),
                "{reason}"
            );
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    cluster.shutdown().await;
}

/// LockList pages the held locks by name under a prefix, each with its holder, token and FIFO
/// queue, through a follower too (redirected), and bounds what it is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_list_pages_holders_and_queues_by_name() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let client = cluster.client(&[follower]).await;
    let ttl = Duration::from_secs(30);
    let holder = client.lease(ttl).await.expect("lease");
    let mut guards = Vec::new();
    for name in ["jobs/a", "jobs/b", "jobs/c", "other"] {
        guards.push(holder.lock(name).await.expect("lock"));
    }
    let (mut waiting, mut queued) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let lease = client.lease(ttl).await.expect("lease");
        let id = lease.id();
        waiting.push(id);
        // Each waiter keeps its lease and, once it gets it, the lock, until the test ends.
        queued.push(tokio::spawn(async move {
            let guard = lease.lock("jobs/b").await;
            std::future::pending::<()>().await;
            drop((lease, guard));
        }));
        wait_for_queue(&client, "jobs/b", Some(holder.id()), waiting.len() as u64).await;
    }

    let first = client.lock_list("jobs/", "", 2).await.expect("page 1");
    let names: Vec<&str> = first.locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["jobs/a", "jobs/b"]);
    assert!(first.more, "jobs/c follows");
    let b = &first.locks[1];
    assert_eq!(b.holder.lease, holder.id());
    assert_eq!(b.holder.token, guards[1].token());
    assert_eq!(b.waiters, waiting, "the queue in FIFO order");
    assert_eq!(b.waiter_count, 2);
    assert!(first.revision.get() > 0);

    let second = client
        .lock_list("jobs/", "jobs/b", 0)
        .await
        .expect("page 2");
    let names: Vec<&str> = second.locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["jobs/c"], "the prefix ends the page");
    assert!(!second.more);
    let all = client.lock_list("", "", 0).await.expect("all");
    assert_eq!(all.locks.len(), 4);

    let too_many = client
        .lock_list("", "", 1_001)
        .await
        .expect_err("over the page limit");
    assert!(too_many.to_string().contains("max_lock_list"), "{too_many}");
    let long = "x".repeat(10_000);
    let too_long = client
        .lock_list(long, "", 0)
        .await
        .expect_err("prefix too long");
    assert!(
        too_long.to_string().contains("max_lock_name_bytes"),
        "{too_long}"
    );

    // A released lock leaves the list; its next waiter holds it.
    let b_guard = guards.remove(1);
    b_guard.unlock().await.expect("unlock");
    wait_for_queue(&client, "jobs/b", Some(waiting[0]), 1).await;
    let after = client
        .lock_list("jobs/b", "", 0)
        .await
        .expect("after release");
    assert_eq!(after.locks[0].holder.lease, waiting[0]);
    assert_eq!(after.locks[0].waiters, [waiting[1]]);
    queued.iter().for_each(tokio::task::JoinHandle::abort);
    cluster.shutdown().await;
}
