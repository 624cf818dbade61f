//! Watch: events in order with no gaps or duplicates, on the leader and on followers, replay from
//! the history and resume on another node, lease ends, filters, bad requests, compaction, slow
//! consumers, progress, shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use zaris_client::{Client, DeleteOptions, PutOptions};
use zaris_core::Revision;
use zaris_proto::v1::watch_client::WatchClient;
use zaris_proto::v1::{
    ErrorCode, Event, EventType, WatchCancelReason, WatchCancelRequest, WatchCreateRequest,
    WatchProgressRequest, WatchRequest, WatchResponse, watch_request,
};
use zaris_server::NodeConfig;
use zaris_testkit::cluster::{MIN_TTL_MS, TestCluster};
use zaris_testkit::eventually;

/// Generous: the tests wait on conditions, never on how fast a 2-core machine is.
const WAIT: Duration = Duration::from_secs(20);

/// A cluster whose every node has applied the cluster's limits: until then, a node refuses
/// watches like reads, as retryable NO_LEADER.
async fn ready_cluster(configure: fn(&mut NodeConfig)) -> TestCluster {
    let cluster = TestCluster::start_configured(3, configure).await;
    cluster.leader().await;
    eventually("the limits on every node", WAIT, || async {
        cluster
            .running()
            .into_iter()
            .all(|id| cluster.node(id).state().read(|d| d.state.limits_set()))
            .then_some(())
    })
    .await;
    cluster
}

fn defaults(_: &mut NodeConfig) {}

/// One Watch stream, driven by hand.
struct WatchStream {
    requests: mpsc::Sender<WatchRequest>,
    responses: tonic::Streaming<WatchResponse>,
}

async fn connect(endpoint: Endpoint) -> WatchStream {
    let channel: Channel = endpoint.connect().await.expect("connect");
    let (requests, rx) = mpsc::channel(16);
    let responses = WatchClient::new(channel)
        .watch(ReceiverStream::new(rx))
        .await
        .expect("watch call")
        .into_inner();
    WatchStream {
        requests,
        responses,
    }
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    Channel::from_shared(format!("http://{addr}")).expect("uri")
}

async fn open(addr: SocketAddr) -> WatchStream {
    connect(endpoint(addr)).await
}

fn create(watch_id: u64, key: &str) -> WatchCreateRequest {
    WatchCreateRequest {
        watch_id,
        key: key.as_bytes().to_vec(),
        ..WatchCreateRequest::default()
    }
}

fn prefix(watch_id: u64, key: &str) -> WatchCreateRequest {
    WatchCreateRequest {
        prefix: true,
        ..create(watch_id, key)
    }
}

impl WatchStream {
    async fn send(&self, request: watch_request::Request) {
        self.requests
            .send(WatchRequest {
                request: Some(request),
            })
            .await
            .expect("stream open");
    }

    async fn create(&self, create: WatchCreateRequest) {
        self.send(watch_request::Request::Create(create)).await;
    }

    async fn cancel(&self, watch_id: u64) {
        self.send(watch_request::Request::Cancel(WatchCancelRequest {
            watch_id,
        }))
        .await;
    }

    async fn progress(&self) {
        self.send(watch_request::Request::Progress(WatchProgressRequest {}))
            .await;
    }

    /// The next message: a response, the stream's end (`Ok(None)`), or its error.
    async fn next_message(&mut self) -> Result<Option<WatchResponse>, tonic::Status> {
        tokio::time::timeout(WAIT, self.responses.message())
            .await
            .expect("a watch response in time")
    }

    async fn next(&mut self) -> WatchResponse {
        match self.next_message().await {
            Ok(Some(response)) => response,
            other => panic!("expected a watch response, got {other:?}"),
        }
    }

    /// Creates a watch and checks that it is confirmed; returns the `created` response.
    async fn created(&mut self, request: WatchCreateRequest) -> WatchResponse {
        let watch_id = request.watch_id;
        self.create(request).await;
        let response = self.next().await;
        assert!(
            response.created && !response.canceled && response.watch_id == watch_id,
            "{response:?}"
        );
        assert!(response.events.is_empty());
        response
    }

    /// Reads until `count` events arrived for `watch_id`; fails on anything else.
    async fn events(&mut self, watch_id: u64, count: usize) -> Vec<Event> {
        let mut events = Vec::new();
        while events.len() < count {
            let response = self.next().await;
            assert_eq!(response.watch_id, watch_id, "{response:?}");
            assert!(!response.created && !response.canceled, "{response:?}");
            check_response(&response);
            events.extend(response.events);
        }
        assert_eq!(events.len(), count, "more events than expected: {events:?}");
        events
    }

    /// Asks for progress and returns the revision of the answer, failing on anything else first.
    async fn progress_revision(&mut self) -> u64 {
        self.progress().await;
        let response = self.next().await;
        assert_eq!(
            response.watch_id, 0,
            "expected a progress answer: {response:?}"
        );
        assert!(
            response.events.is_empty() && !response.created && !response.canceled,
            "{response:?}"
        );
        revision(&response)
    }
}

fn revision(response: &WatchResponse) -> u64 {
    response.header.as_ref().map_or(0, |h| h.revision)
}

/// Every event response: non-empty, in revision order, header = last event's revision.
fn check_response(response: &WatchResponse) {
    assert!(!response.events.is_empty(), "{response:?}");
    let revisions: Vec<u64> = response.events.iter().map(|e| e.revision).collect();
    assert!(revisions.is_sorted(), "{revisions:?}");
    assert_eq!(revision(response), *revisions.last().unwrap_or(&0));
}

/// `(type, key, revision)` of each event, for comparisons.
fn summary(events: &[Event]) -> Vec<(EventType, String, u64)> {
    events
        .iter()
        .map(|e| {
            let key = e.kv.as_ref().map(|kv| kv.key.clone()).unwrap_or_default();
            (
                e.r#type(),
                String::from_utf8_lossy(&key).into_owned(),
                e.revision,
            )
        })
        .collect()
}

async fn put(client: &Client, key: &str, value: &str) -> u64 {
    put_with(client, key, value, PutOptions::default()).await
}

async fn put_with(client: &Client, key: &str, value: &str, options: PutOptions) -> u64 {
    let response = client.put(key, value, options).await.expect("put");
    response.revision.get()
}

async fn delete(client: &Client, key: &str, options: DeleteOptions) -> u64 {
    let response = client.delete(key, options).await.expect("delete");
    response.revision.get()
}

fn cancel_reason(response: &WatchResponse) -> WatchCancelReason {
    response.cancel_reason()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_and_deletes_arrive_in_order_on_the_leader_and_on_a_follower() {
    let cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    let before = put(&client, "app/before", "x").await;
    // A watch "from now" starts at the member's own applied revision: a follower that has not
    // applied the put yet would (rightly) report it. Every member must be past it first.
    cluster.wait_applied(Revision::new(before)).await;

    let mut streams = Vec::new();
    for node in [leader, follower] {
        let mut stream = open(cluster.addrs[&node]).await;
        stream
            .created(WatchCreateRequest {
                prev_kv: true,
                ..create(1, "app/a")
            })
            .await;
        stream.created(prefix(2, "app/")).await;
        streams.push(stream);
    }

    let r1 = put(&client, "app/a", "1").await;
    let r2 = put(&client, "app/b", "2").await;
    let r3 = put(&client, "app/a", "3").await;
    let r4 = delete(&client, "app/a", DeleteOptions::default()).await;
    put(&client, "other/x", "not selected").await;
    let r5 = delete(
        &client,
        "app/",
        DeleteOptions {
            prefix: true,
            ..DeleteOptions::default()
        },
    )
    .await;
    assert!(r1 < r2 && r2 < r3 && r3 < r4 && r4 < r5);

    let key_events = vec![
        (EventType::Put, "app/a".to_string(), r1),
        (EventType::Put, "app/a".to_string(), r3),
        (EventType::Delete, "app/a".to_string(), r4),
    ];
    let prefix_events = vec![
        (EventType::Put, "app/a".to_string(), r1),
        (EventType::Put, "app/b".to_string(), r2),
        (EventType::Put, "app/a".to_string(), r3),
        (EventType::Delete, "app/a".to_string(), r4),
        (EventType::Delete, "app/b".to_string(), r5),
        (EventType::Delete, "app/before".to_string(), r5),
    ];
    for (node, stream) in [leader, follower].into_iter().zip(&mut streams) {
        // The two watches' responses interleave; sort them out per watch.
        let mut by_watch = [Vec::new(), Vec::new()];
        while by_watch[0].len() < key_events.len() || by_watch[1].len() < prefix_events.len() {
            let response = stream.next().await;
            check_response(&response);
            let slot = match response.watch_id {
                1 => 0,
                2 => 1,
                other => panic!("unexpected watch id {other}: {response:?}"),
            };
            by_watch[slot].extend(response.events);
        }
        assert_eq!(summary(&by_watch[0]), key_events, "node {node}");
        assert_eq!(summary(&by_watch[1]), prefix_events, "node {node}");

        let [key, _] = &by_watch;
        let kv = |e: &Event| e.kv.clone().unwrap_or_default();
        assert_eq!((kv(&key[0]).value, kv(&key[0]).version), (b"1".to_vec(), 1));
        assert_eq!(key[0].prev_kv, None, "a new key has no previous value");
        assert_eq!((kv(&key[1]).value, kv(&key[1]).version), (b"3".to_vec(), 2));
        assert_eq!(key[1].prev_kv.clone().map(|p| p.value), Some(b"1".to_vec()));
        assert_eq!((kv(&key[2]).mod_revision, kv(&key[2]).version), (r4, 0));
        assert_eq!(key[2].prev_kv.clone().map(|p| p.value), Some(b"3".to_vec()));
        assert!(
            by_watch[1].iter().all(|e| e.prev_kv.is_none()),
            "prev_kv only when asked for"
        );
        assert!(stream.progress_revision().await >= r5);
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_past_start_replays_history_and_a_resume_elsewhere_has_no_gaps_or_duplicates() {
    let cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    let mut written = Vec::new();
    for i in 0..10 {
        let key = format!("hist/{}", i % 3);
        written.push((EventType::Put, key.clone(), put(&client, &key, "v").await));
    }
    cluster.wait_applied(Revision::new(written[9].2)).await;

    // From the first write's revision: exactly the ten writes, from history.
    let mut first = open(cluster.addrs[&follower]).await;
    let created = first
        .created(WatchCreateRequest {
            start_revision: written[0].2,
            ..prefix(7, "hist/")
        })
        .await;
    assert_eq!(revision(&created), written[0].2 - 1);
    let replayed = first.events(7, 10).await;
    assert_eq!(summary(&replayed), written);
    drop(first);

    // A client that processed only four events resumes on another node from the fourth + 1.
    let resume_from = written[3].2 + 1;
    let mut second = open(cluster.addrs[&leader]).await;
    second
        .created(WatchCreateRequest {
            start_revision: resume_from,
            ..prefix(7, "hist/")
        })
        .await;
    let resumed = second.events(7, 6).await;
    assert_eq!(summary(&resumed), written[4..]);

    // And it goes on live.
    let more = put(&client, "hist/new", "v").await;
    let live = second.events(7, 1).await;
    assert_eq!(
        summary(&live),
        [(EventType::Put, "hist/new".to_string(), more)]
    );

    // A start in the future is fine: the watch waits for it.
    second
        .created(WatchCreateRequest {
            start_revision: more + 1_000_000,
            ..prefix(8, "hist/")
        })
        .await;
    assert!(second.progress_revision().await >= more);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_or_expired_lease_yields_revoke_and_expire_events_with_its_id() {
    let cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    let mut stream = open(cluster.addrs[&follower]).await;
    stream
        .created(WatchCreateRequest {
            prev_kv: true,
            ..prefix(1, "lease/")
        })
        .await;

    let revoked = client
        .grant(Duration::from_millis(60_000))
        .await
        .expect("grant");
    let bound = PutOptions {
        lease: Some(revoked.id),
        ..PutOptions::default()
    };
    let put_revision = put_with(&client, "lease/revoked", "v", bound).await;
    assert!(matches!(
        client.revoke(revoked.id).await.expect("revoke"),
        zaris_client::Revocation::Revoked { .. }
    ));

    let events = stream.events(1, 2).await;
    assert_eq!(events[0].r#type(), EventType::Put);
    assert_eq!(
        (events[0].lease, events[0].revision),
        (revoked.id.get(), put_revision)
    );
    assert_eq!(events[1].r#type(), EventType::Revoke);
    assert_eq!(events[1].lease, revoked.id.get());
    assert_eq!(
        events[1].prev_kv.clone().map(|p| p.lease),
        Some(revoked.id.get())
    );

    let expiring = client
        .grant(Duration::from_millis(MIN_TTL_MS))
        .await
        .expect("grant");
    let bound = PutOptions {
        lease: Some(expiring.id),
        ..PutOptions::default()
    };
    put_with(&client, "lease/expiring/a", "v", bound.clone()).await;
    put_with(&client, "lease/expiring/b", "v", bound).await;
    let puts = stream.events(1, 2).await;
    assert!(puts.iter().all(|e| e.r#type() == EventType::Put));
    // Not renewed: it expires, and both keys go at one revision.
    let expired = stream.events(1, 2).await;
    for event in &expired {
        assert_eq!(event.r#type(), EventType::Expire, "{event:?}");
        assert_eq!(event.lease, expiring.id.get());
        let kv = event.kv.clone().unwrap_or_default();
        assert_eq!(
            (kv.version, kv.lease, kv.mod_revision),
            (0, 0, event.revision)
        );
    }
    assert_eq!(expired[0].revision, expired[1].revision);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_type_filters_deliver_only_the_requested_types() {
    let cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let client = cluster.client(&[1, 2, 3]).await;
    let mut puts_only = open(cluster.addrs[&leader]).await;
    puts_only
        .created(WatchCreateRequest {
            event_types: vec![EventType::Put as i32],
            ..create(1, "f/k")
        })
        .await;
    let mut deletes_only = open(cluster.addrs[&leader]).await;
    deletes_only
        .created(WatchCreateRequest {
            event_types: vec![EventType::Delete as i32, EventType::Revoke as i32],
            ..create(1, "f/k")
        })
        .await;

    let put_revision = put(&client, "f/k", "v").await;
    let delete_revision = delete(&client, "f/k", DeleteOptions::default()).await;
    cluster.wait_applied(Revision::new(delete_revision)).await;

    let puts = puts_only.events(1, 1).await;
    assert_eq!(
        summary(&puts),
        [(EventType::Put, "f/k".to_string(), put_revision)]
    );
    // The progress answer comes after everything up to the delete: no DELETE slipped in.
    assert!(puts_only.progress_revision().await >= delete_revision);

    let deletes = deletes_only.events(1, 1).await;
    assert_eq!(
        summary(&deletes),
        [(EventType::Delete, "f/k".to_string(), delete_revision)]
    );
    assert!(deletes_only.progress_revision().await >= delete_revision);
    cluster.shutdown().await;
}

/// The stream's end with INVALID_ARGUMENT after `request`, on a fresh stream.
async fn assert_ends_with_invalid_argument(addr: SocketAddr, request: WatchCreateRequest) {
    let mut stream = open(addr).await;
    stream.create(request.clone()).await;
    match stream.next_message().await {
        Err(status) => {
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
            let detail = zaris_proto::detail(&status).expect("a Zaris detail");
            assert_eq!(detail.code(), ErrorCode::InvalidArgument);
        }
        other => panic!("{request:?} should end the stream, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_creates_end_the_stream_and_capacity_cancels_only_the_watch() {
    let cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let addr = cluster.addrs[&leader];

    // A duplicate id ends the whole stream, the open watch with it.
    let mut stream = open(addr).await;
    stream.created(create(1, "k")).await;
    stream.create(create(1, "other")).await;
    let status = stream.next_message().await.expect_err("duplicate watch_id");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("already open"), "{status:?}");

    assert_ends_with_invalid_argument(addr, create(0, "k")).await;
    assert_ends_with_invalid_argument(
        addr,
        WatchCreateRequest {
            event_types: vec![EventType::Unspecified as i32],
            ..create(1, "k")
        },
    )
    .await;
    assert_ends_with_invalid_argument(
        addr,
        WatchCreateRequest {
            range_end: b"z".to_vec(),
            ..prefix(1, "k")
        },
    )
    .await;
    assert_ends_with_invalid_argument(addr, create(1, "")).await;

    // Capacity: the watch beyond it is canceled; the stream and its watches carry on.
    let max = zaris_server::config::MAX_WATCHES_PER_STREAM as u64;
    let mut full = open(addr).await;
    for id in 1..=max {
        full.create(create(id, "cap")).await;
        let response = full.next().await;
        assert!(response.created && response.watch_id == id, "{response:?}");
    }
    full.create(create(max + 1, "cap")).await;
    let refused = full.next().await;
    assert!(refused.canceled && !refused.created, "{refused:?}");
    assert_eq!(refused.watch_id, max + 1);
    assert_eq!(cancel_reason(&refused), WatchCancelReason::CapacityExceeded);
    assert!(!refused.cancel_message.is_empty());

    // Canceling frees a place; canceling an unknown id is ignored.
    full.cancel(1).await;
    let canceled = full.next().await;
    assert!(canceled.canceled && canceled.watch_id == 1, "{canceled:?}");
    assert_eq!(cancel_reason(&canceled), WatchCancelReason::ClientRequested);
    full.cancel(424_242).await;
    full.created(create(max + 1, "cap")).await;
    full.progress_revision().await;
    cluster.shutdown().await;
}

fn tiny_history(config: &mut NodeConfig) {
    config.watch_history_max_events = 4;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_older_than_the_history_is_compacted() {
    let cluster = ready_cluster(tiny_history).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    let mut written = Vec::new();
    for i in 0..10 {
        let key = format!("c/{i}");
        written.push((EventType::Put, key.clone(), put(&client, &key, "v").await));
    }
    let last = written[9].2;
    cluster.wait_applied(Revision::new(last)).await;

    let mut stream = open(cluster.addrs[&follower]).await;
    stream
        .create(WatchCreateRequest {
            start_revision: written[0].2,
            ..prefix(1, "c/")
        })
        .await;
    let refused = stream.next().await;
    assert!(refused.canceled && !refused.created, "{refused:?}");
    assert_eq!(cancel_reason(&refused), WatchCancelReason::Compacted);
    let oldest = refused.compact_revision;
    assert!(
        oldest > written[0].2 && oldest <= last,
        "oldest available {oldest} for writes {written:?}"
    );

    // From the oldest available revision on, nothing is missing.
    stream
        .created(WatchCreateRequest {
            start_revision: oldest,
            ..prefix(2, "c/")
        })
        .await;
    let expected: Vec<_> = written
        .iter()
        .filter(|(_, _, r)| *r >= oldest)
        .cloned()
        .collect();
    assert!(!expected.is_empty() && expected.len() <= 4, "{expected:?}");
    let events = stream.events(2, expected.len()).await;
    assert_eq!(summary(&events), expected);
    cluster.shutdown().await;
}

fn tiny_history_by_bytes(config: &mut NodeConfig) {
    config.watch_history_max_events = 4;
    config.watch_history_max_bytes = 256 * 1024;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_canceled_as_a_slow_consumer() {
    let cluster = ready_cluster(tiny_history_by_bytes).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    // Small HTTP/2 windows, so that the transport cannot soak up what the client does not read.
    let mut stream = connect(
        endpoint(cluster.addrs[&follower])
            .initial_stream_window_size(64 * 1024)
            .initial_connection_window_size(64 * 1024),
    )
    .await;
    stream.created(prefix(1, "slow/")).await;

    // Write far more than the history, the stream buffer and the windows hold, without reading.
    let value = "x".repeat(16 * 1024);
    let mut written = Vec::new();
    for i in 0..200 {
        written.push(put(&client, &format!("slow/{i}"), &value).await);
    }
    cluster.wait_applied(Revision::new(written[199])).await;

    // What was delivered is a gap-free prefix of the writes; then the watch is canceled.
    let mut delivered = Vec::new();
    let canceled = loop {
        let response = stream.next().await;
        assert_eq!(response.watch_id, 1, "{response:?}");
        if response.canceled {
            break response;
        }
        check_response(&response);
        delivered.extend(response.events.iter().map(|e| e.revision));
    };
    println!(
        "slow consumer: {} of {} events delivered before the cancel",
        delivered.len(),
        written.len()
    );
    assert_eq!(cancel_reason(&canceled), WatchCancelReason::SlowConsumer);
    assert_eq!(canceled.compact_revision, 0);
    assert!(!canceled.cancel_message.is_empty());
    assert!(
        delivered.len() < written.len(),
        "everything was delivered: the stream was never slow"
    );
    assert_eq!(delivered, written[..delivered.len()]);
    assert!(
        revision(&canceled) >= delivered.last().copied().unwrap_or(0),
        "{canceled:?}"
    );

    // Resuming where it stopped is no longer possible on this node; the stream still works.
    let resume_from = delivered.last().map_or(written[0], |r| r + 1);
    stream
        .create(WatchCreateRequest {
            start_revision: resume_from,
            ..prefix(2, "slow/")
        })
        .await;
    let refused = stream.next().await;
    assert_eq!(cancel_reason(&refused), WatchCancelReason::Compacted);
    assert!(refused.compact_revision > resume_from);

    let metrics = zaris_server::metrics::prometheus()
        .map(|handle| handle.render())
        .unwrap_or_default();
    assert!(
        metrics.contains("zaris_watches_canceled_total{reason=\"slow_consumer\"}"),
        "{metrics}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_answered_with_watch_id_zero() {
    let cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let client = cluster.client(&[1, 2, 3]).await;
    let before = put(&client, "p/unwatched", "v").await;
    cluster.wait_applied(Revision::new(before)).await;

    // No watches: the node's head.
    let mut stream = open(cluster.addrs[&follower]).await;
    assert!(stream.progress_revision().await >= before);

    // A quiet watch still learns a safe resume revision past unrelated writes.
    stream.created(create(1, "p/quiet")).await;
    let unrelated = put(&client, "p/unwatched", "w").await;
    cluster.wait_applied(Revision::new(unrelated)).await;
    let safe = stream.progress_revision().await;
    assert!(safe >= unrelated, "progress {safe} < {unrelated}");

    // Resuming from there misses nothing.
    let watched = put(&client, "p/quiet", "v").await;
    let mut resumed = open(cluster.addrs[&leader]).await;
    resumed
        .created(WatchCreateRequest {
            start_revision: safe + 1,
            ..create(1, "p/quiet")
        })
        .await;
    let events = resumed.events(1, 1).await;
    assert_eq!(events[0].revision, watched);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_node_cancels_its_watches_with_shutting_down() {
    let mut cluster = ready_cluster(defaults).await;
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    let mut stream = open(cluster.addrs[&follower]).await;
    stream.created(create(1, "s/a")).await;
    stream.created(create(2, "s/b")).await;

    cluster.stop(follower).await;
    let mut canceled = Vec::new();
    for _ in 0..2 {
        let response = stream.next().await;
        assert!(response.canceled, "{response:?}");
        assert_eq!(cancel_reason(&response), WatchCancelReason::ShuttingDown);
        canceled.push(response.watch_id);
    }
    canceled.sort_unstable();
    assert_eq!(canceled, [1, 2]);
    // Then the stream ends (cleanly, or with the connection going away).
    assert!(!matches!(stream.next_message().await, Ok(Some(_))));
    cluster.shutdown().await;
}
