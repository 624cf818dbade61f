//! The client library's watch and presence recipes against a real cluster: Expire events with the
//! lease id, and a watch that survives the loss of the member serving it without gaps or
//! duplicates.

use std::time::Duration;

use zaris_client::{
    Client, ClientOptions, EventKind, Presence, PresenceEvent, PutOptions, WatchOptions,
};
use zaris_core::Revision;
use zaris_testkit::cluster::TestCluster;

use crate::proxy::Proxy;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_reports_an_expiry_with_the_lease_id() {
    let cluster = TestCluster::start(3).await;
    cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let mut watcher = client
        .watch("svc/", WatchOptions::prefix())
        .await
        .expect("watch");
    // A raw grant: nothing renews it.
    let lease = client
        .grant(Duration::from_secs(1))
        .await
        .expect("grant")
        .id;
    let bound = PutOptions {
        lease: Some(lease),
        ..PutOptions::default()
    };
    client.put("svc/a", "up", bound.clone()).await.expect("put");
    client.put("svc/b", "up", bound).await.expect("put");

    let mut events = Vec::new();
    while events.len() < 4 {
        let event = tokio::time::timeout(WAIT, watcher.next())
            .await
            .expect("events arrive")
            .expect("watch open")
            .expect("event");
        events.push(event);
    }
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Put,
            EventKind::Put,
            EventKind::Expire,
            EventKind::Expire
        ]
    );
    assert!(events.iter().all(|e| e.lease == lease));
    // Both keys went in one step: one revision.
    assert_eq!(events[2].revision, events[3].revision);
    assert!(events[2].revision > events[1].revision);
    let mut gone: Vec<&[u8]> = events[2..].iter().map(|e| e.key()).collect();
    gone.sort();
    assert_eq!(gone, [&b"svc/a"[..], &b"svc/b"[..]]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_without_gaps_or_duplicates_when_its_member_dies() {
    let mut cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    // The watcher knows every member but starts on the leader (its first call caches it).
    let watching = cluster.client(&[leader, 1, 2, 3]).await;
    watching.status().await.expect("status");
    let mut watcher = watching
        .watch("seq/", WatchOptions::prefix())
        .await
        .expect("watch");
    let writer = cluster.client(&[1, 2, 3]).await;
    const TOTAL: u64 = 60;
    let writes = tokio::spawn(async move {
        for i in 0..TOTAL {
            writer
                .put(format!("seq/{i:03}"), i.to_string(), PutOptions::default())
                .await
                .expect("put");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });

    let mut seen = Vec::new();
    let mut last_revision = Revision::ZERO;
    while (seen.len() as u64) < TOTAL {
        if seen.len() == 20 {
            // The member serving the watch (and leading the cluster) goes away mid-stream.
            cluster.stop(leader).await;
        }
        let event = tokio::time::timeout(WAIT, watcher.next())
            .await
            .expect("events keep coming")
            .expect("watch open")
            .expect("event");
        assert!(event.revision > last_revision, "revisions must increase");
        last_revision = event.revision;
        seen.push(String::from_utf8_lossy(event.key()).into_owned());
    }
    writes.await.expect("writer");
    let expected: Vec<String> = (0..TOTAL).map(|i| format!("seq/{i:03}")).collect();
    assert_eq!(seen, expected, "every write exactly once, in order");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_reports_joins_and_how_members_leave() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let group = Presence::new(&client, "workers");

    let clean = client.lease(Duration::from_secs(30)).await.expect("lease");
    group.join(&clean, "clean", "pid 1").await.expect("join");
    let mut changes = group.watch().await.expect("watch");
    let names: Vec<&str> = changes
        .initial_members()
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["clean"]);

    // A member that will lose the network: it reaches the cluster through a proxy.
    let proxy = Proxy::start(cluster.addrs[&leader]).await;
    let options = ClientOptions::default().with_timeout(Duration::from_secs(2));
    let doomed_client = Client::connect_with([proxy.addr.to_string()], options)
        .await
        .expect("client");
    let doomed = doomed_client
        .lease(Duration::from_secs(1))
        .await
        .expect("lease");
    Presence::new(&doomed_client, "workers")
        .join(&doomed, "doomed", "pid 2")
        .await
        .expect("join");

    let mut next = async || {
        tokio::time::timeout(WAIT, changes.next())
            .await
            .expect("a change")
            .expect("watch open")
            .expect("event")
    };
    match next().await {
        PresenceEvent::Joined(member) => {
            assert_eq!(
                (member.name.as_str(), member.lease),
                ("doomed", doomed.id())
            );
            assert_eq!(member.metadata, b"pid 2");
        }
        other => panic!("expected doomed to join, got {other:?}"),
    }
    proxy.cut();
    match next().await {
        PresenceEvent::Left {
            name, how, lease, ..
        } => assert_eq!(
            (name.as_str(), how, lease),
            ("doomed", EventKind::Expire, doomed.id())
        ),
        other => panic!("expected doomed to expire, got {other:?}"),
    }
    assert!(matches!(
        clean.revoke().await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));
    match next().await {
        PresenceEvent::Left {
            name, how, lease, ..
        } => assert_eq!(
            (name.as_str(), how, lease),
            ("clean", EventKind::Revoke, clean.id())
        ),
        other => panic!("expected clean to be revoked, got {other:?}"),
    }
    assert!(group.members().await.expect("members").0.is_empty());
    cluster.shutdown().await;
}

/// A member may answer more than tonic's default 4 MiB (a Range page of large values, a watch
/// revision deleting them, with their previous values): the client reads it, instead of failing
/// the call on every member alike and ending the watch for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_larger_than_four_mib_reach_the_client() {
    const VALUES: usize = 5;
    let cluster = TestCluster::start(1).await;
    cluster.leader().await;
    let client = cluster.client(&[1]).await;
    let value = vec![b'v'; 1024 * 1024];
    for i in 0..VALUES {
        client
            .put(format!("big/{i}"), value.clone(), PutOptions::default())
            .await
            .expect("put");
    }
    let mut watcher = client
        .watch(
            "big/",
            WatchOptions {
                prev_kv: true,
                ..WatchOptions::prefix()
            },
        )
        .await
        .expect("watch");

    let page = client
        .range(
            "big/",
            zaris_client::RangeOptions {
                prefix: true,
                ..zaris_client::RangeOptions::default()
            },
        )
        .await
        .expect("a 5 MiB range page");
    assert_eq!(page.kvs.len(), VALUES);
    assert!(page.kvs.iter().all(|kv| kv.value == value));

    let deleted = client
        .delete(
            "big/",
            zaris_client::DeleteOptions {
                prefix: true,
                ..zaris_client::DeleteOptions::default()
            },
        )
        .await
        .expect("delete");
    assert_eq!(deleted.deleted, VALUES as u64);
    for _ in 0..VALUES {
        let event = tokio::time::timeout(WAIT, watcher.next())
            .await
            .expect("the delete's events arrive")
            .expect("watch open")
            .expect("event");
        assert_eq!(event.kind, EventKind::Delete);
        assert_eq!(event.prev_kv.map(|kv| kv.value), Some(value.clone()));
    }
    cluster.shutdown().await;
}

/// A quiet watch on a busy cluster receives no events, yet must resume after its member dies:
/// without learning how far it is complete (progress reports), it would resume from where it was
/// created, which every member's history has left by then, and end COMPACTED though it missed
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_watch_on_a_busy_cluster_resumes_after_its_member_dies() {
    let mut cluster = TestCluster::start_configured(3, |config| {
        config.watch_history_max_events = 10;
    })
    .await;
    let leader = cluster.leader().await;
    // The watcher starts on the leader (its first call caches it) and knows every member.
    let watching = cluster.client(&[leader, 1, 2, 3]).await;
    watching.status().await.expect("status");
    let mut watcher = watching
        .watch("quiet", WatchOptions::default())
        .await
        .expect("watch");
    let writer = cluster.client(&[1, 2, 3]).await;
    for i in 0..200 {
        writer
            .put(format!("busy/{i:03}"), "x", PutOptions::default())
            .await
            .expect("put");
    }
    // Long enough for the watch to have asked how far it is complete.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    cluster.stop(leader).await;
    writer
        .put("quiet", "at last", PutOptions::default())
        .await
        .expect("put");
    let event = tokio::time::timeout(WAIT, watcher.next())
        .await
        .expect("the event arrives")
        .expect("watch open")
        .expect("not COMPACTED: the watch missed nothing");
    assert_eq!(event.key(), b"quiet");
    assert_eq!(event.kv.value, b"at last");
    cluster.shutdown().await;
}

/// A member cut off from the cluster (here: removed from it, so no leader writes to it again)
/// sees no new changes; a watch it served would stay open and silent while the others move on.
/// After three election timeouts it ends its watches (CUT_OFF), and the client resumes on a
/// member that sees the changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_leaves_a_member_cut_off_from_the_cluster() {
    let cluster = TestCluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let others: Vec<u64> = (1..=3).filter(|id| *id != follower).collect();
    // The watch starts on the follower: the first endpoint of a client that has called nothing.
    let watching = cluster.client(&[follower, others[0], others[1]]).await;
    let mut watcher = watching
        .watch("k", WatchOptions::default())
        .await
        .expect("watch");
    let writer = cluster.client(&others).await;
    let mut next_value = async |value: &str| {
        writer
            .put("k", value.to_owned(), PutOptions::default())
            .await
            .expect("put");
        let event = tokio::time::timeout(WAIT, watcher.next())
            .await
            .unwrap_or_else(|_| panic!("the put of {value} was not delivered in {WAIT:?}"))
            .expect("watch open")
            .expect("event");
        assert_eq!(event.kv.value, value.as_bytes());
    };
    next_value("before").await;
    cluster
        .client(&others)
        .await
        .member_remove(follower)
        .await
        .expect("remove the follower");
    next_value("after").await;
    cluster.shutdown().await;
}
