//! Locks over the wire: FIFO hand-over with higher tokens, waits that time out stay queued,
//! fenced release, guarded writes.

use std::time::Duration;

use zaris_client::Fence;
use zaris_client::{Error, LockHolder, LockOutcome, PutOptions, UnlockOutcome};
use zaris_core::{FencingToken, LeaseId, Revision};
use zaris_testkit::cluster::TestCluster;

/// The fencing token of a lock call that must have been granted.
fn held(outcome: LockOutcome) -> u64 {
    match outcome {
        LockOutcome::Held { token } => token.get(),
        other => panic!("expected the lock to be held, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_the_lock_in_order_with_higher_tokens() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let ttl = Duration::from_secs(30);
    let (a, b, c) = (
        client.grant(ttl).await.expect("grant").id,
        client.grant(ttl).await.expect("grant").id,
        client.grant(ttl).await.expect("grant").id,
    );
    let first = held(
        client
            .lock("q", a, true, Duration::from_secs(5))
            .await
            .expect("lock"),
    );

    let wait = |lease| {
        let client = client.clone();
        tokio::spawn(async move { client.lock("q", lease, true, Duration::from_secs(20)).await })
    };
    let b_wait = wait(b);
    // C queues behind B: wait until B is in the queue before C asks.
    zaris_testkit::eventually("B to queue", Duration::from_secs(10), || async {
        let status = client.lock_status("q").await.ok()?;
        (status.waiters == 1).then_some(())
    })
    .await;
    let c_wait = wait(c);
    zaris_testkit::eventually("C to queue", Duration::from_secs(10), || async {
        let status = client.lock_status("q").await.ok()?;
        (status.waiters == 2).then_some(())
    })
    .await;

    // A's lease ends: the lock passes to B, not C.
    assert!(matches!(
        client.revoke(a).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    let b_held = held(b_wait.await.expect("join").expect("B's lock call"));
    assert!(b_held > first);

    // A's late write with its old token is refused by the store.
    let late = client
        .put(
            "resource",
            "from A",
            PutOptions {
                guard: Some(Fence {
                    lock: "q".into(),
                    token: FencingToken::new(first),
                }),
                ..PutOptions::default()
            },
        )
        .await;
    assert!(
        matches!(&late, Err(Error::NotHeld { lock, token }) if lock == "q" && *token == FencingToken::new(first)),
        "{late:?}"
    );
    // A stale release does nothing.
    let stale = client
        .unlock("q", b, FencingToken::new(first))
        .await
        .expect("unlock answered");
    assert_eq!(stale, UnlockOutcome::NotHolder);

    let released = client
        .unlock("q", b, FencingToken::new(b_held))
        .await
        .expect("unlock");
    assert_eq!(released, UnlockOutcome::Released);
    let c_held = held(c_wait.await.expect("join").expect("C's lock call"));
    assert!(c_held > b_held);
    let ok = client
        .put(
            "resource",
            "from C",
            PutOptions {
                guard: Some(Fence {
                    lock: "q".into(),
                    token: FencingToken::new(c_held),
                }),
                ..PutOptions::default()
            },
        )
        .await
        .expect("guarded put");
    assert!(ok.revision > Revision::ZERO);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_times_out_stays_queued() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let ttl = Duration::from_secs(30);
    let (a, b) = (
        client.grant(ttl).await.expect("grant").id,
        client.grant(ttl).await.expect("grant").id,
    );
    held(
        client
            .lock("m", a, false, Duration::ZERO)
            .await
            .expect("lock"),
    );
    let queued = client
        .lock("m", b, true, Duration::from_millis(200))
        .await
        .expect("lock");
    assert_eq!(
        queued,
        LockOutcome::Queued {
            holder_lease: a,
            position: 1
        }
    );
    let c = client.grant(ttl).await.expect("grant").id;
    let busy = client.lock("m", c, false, Duration::ZERO).await;
    assert_eq!(busy.ok(), Some(LockOutcome::Busy { holder_lease: a }));
    let unknown = LeaseId::new(a.get() + b.get() + 100);
    let missing = client.lock("m", unknown, false, Duration::ZERO).await;
    assert!(
        matches!(missing, Err(Error::LeaseNotFound { id }) if id == unknown),
        "{missing:?}"
    );

    assert!(matches!(
        client.revoke(a).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    let status = client.lock_status("m").await.expect("status");
    let holder = status
        .holder
        .expect("the queued lease got the lock in turn");
    assert_eq!(holder.lease, b, "the queued lease got the lock in turn");
    let again = client
        .lock("m", b, true, Duration::from_secs(1))
        .await
        .expect("lock");
    assert_eq!(
        again,
        LockOutcome::Held {
            token: holder.token
        }
    );
    assert_eq!(
        status.holder,
        Some(LockHolder {
            lease: b,
            token: holder.token
        })
    );
    cluster.shutdown().await;
}
