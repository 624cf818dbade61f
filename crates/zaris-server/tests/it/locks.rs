//! Locks over the wire: FIFO hand-over with higher tokens, waits that time out stay queued,
//! fenced release, guarded writes.

use std::time::Duration;

use zaris_client::PutOptions;
use zaris_proto::v1::{Guard, LockResult, PutResult, UnlockResult};

use crate::cluster::TestCluster;

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
    let first = client
        .lock("q", a, true, Duration::from_secs(5))
        .await
        .expect("lock");
    assert_eq!(first.result, LockResult::Held as i32);

    let wait = |lease| {
        let client = client.clone();
        tokio::spawn(async move { client.lock("q", lease, true, Duration::from_secs(20)).await })
    };
    let b_wait = wait(b);
    // C queues behind B: wait until B is in the queue before C asks.
    crate::cluster::eventually("B to queue", Duration::from_secs(10), || async {
        let status = client.lock_status("q").await.ok()?;
        (status.waiters == 1).then_some(())
    })
    .await;
    let c_wait = wait(c);
    crate::cluster::eventually("C to queue", Duration::from_secs(10), || async {
        let status = client.lock_status("q").await.ok()?;
        (status.waiters == 2).then_some(())
    })
    .await;

    // A's lease ends: the lock passes to B, not C.
    client.revoke(a).await.expect("revoke");
    let b_held = b_wait.await.expect("join").expect("B's lock call");
    assert_eq!(b_held.result, LockResult::Held as i32);
    assert!(b_held.token > first.token);

    // A's late write with its old token is refused by the store.
    let late = client
        .put(
            "resource",
            "from A",
            PutOptions {
                guard: Some(Guard {
                    lock_name: "q".into(),
                    token: first.token,
                }),
                ..PutOptions::default()
            },
        )
        .await
        .expect("guarded put answered");
    assert_eq!(late.result, PutResult::GuardFailed as i32);
    // A stale release does nothing.
    let stale = client
        .unlock("q", b, first.token)
        .await
        .expect("unlock answered");
    assert_eq!(stale.result, UnlockResult::NotHolder as i32);

    let released = client.unlock("q", b, b_held.token).await.expect("unlock");
    assert_eq!(released.result, UnlockResult::Released as i32);
    let c_held = c_wait.await.expect("join").expect("C's lock call");
    assert_eq!(c_held.result, LockResult::Held as i32);
    assert!(c_held.token > b_held.token);
    let ok = client
        .put(
            "resource",
            "from C",
            PutOptions {
                guard: Some(Guard {
                    lock_name: "q".into(),
                    token: c_held.token,
                }),
                ..PutOptions::default()
            },
        )
        .await
        .expect("guarded put");
    assert_eq!(ok.result, PutResult::Ok as i32);
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
    client
        .lock("m", a, false, Duration::ZERO)
        .await
        .expect("lock");
    let queued = client
        .lock("m", b, true, Duration::from_millis(200))
        .await
        .expect("lock");
    assert_eq!(queued.result, LockResult::Queued as i32);
    assert_eq!((queued.holder_lease, queued.queue_position), (a, 1));
    let busy = client
        .lock("m", a + b + 100, false, Duration::ZERO)
        .await
        .expect("lock");
    assert_eq!(busy.result, LockResult::LeaseNotFound as i32);

    client.revoke(a).await.expect("revoke");
    let status = client.lock_status("m").await.expect("status");
    assert_eq!(
        status.holder_lease, b,
        "the queued lease got the lock in turn"
    );
    let again = client
        .lock("m", b, true, Duration::from_secs(1))
        .await
        .expect("lock");
    assert_eq!(
        (again.result, again.token),
        (LockResult::Held as i32, status.token)
    );
    cluster.shutdown().await;
}
