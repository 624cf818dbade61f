//! [`Client::watch`]: a stream of key changes that survives member failures and leader changes by
//! re-subscribing from the revision after the last one it delivered (no gaps, no duplicates).

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use zaris_proto::v1::{
    self as pb, EventType, WatchCancelReason, WatchCreateRequest, WatchRequest, WatchResponse,
    watch_request,
};
use zaris_types::{LeaseId, Revision};

use crate::client::Client;
use crate::client::watch_service;
use crate::endpoint::Target;
use crate::error::{Error, RpcError};
use crate::kv::KeyValue;
use crate::routing::{Next, Router};

/// Batches of events buffered between the watch task and the caller. When the caller reads
/// slower than events arrive, the task stops reading; the server then ends the watch as a slow
/// consumer and the task re-subscribes, so memory stays bounded on both sides.
const DELIVERY_BUFFER: usize = 16;
/// The one watch id this client uses per stream (one watch per stream keeps resumption simple).
const WATCH_ID: u64 = 1;
/// How often a subscription asks its member how far it is complete (a progress request). A quiet
/// watch on a busy cluster receives no events, so without it the revision it resumes from after
/// its member fails would stay where it was created, and could have left every member's history
/// (COMPACTED) although it missed nothing. The history holds 100,000 events by default: one
/// second is far inside it at any write rate a member sustains.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// What kind of change a [`WatchEvent`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The key was written.
    Put,
    /// The key was deleted by a delete (or a delete in a transaction).
    Delete,
    /// The key was deleted because its lease expired.
    Expire,
    /// The key was deleted because its lease was revoked.
    Revoke,
}

impl EventKind {
    fn from_wire(value: i32) -> Option<EventKind> {
        match EventType::try_from(value).ok()? {
            EventType::Put => Some(EventKind::Put),
            EventType::Delete => Some(EventKind::Delete),
            EventType::Expire => Some(EventKind::Expire),
            EventType::Revoke => Some(EventKind::Revoke),
            EventType::Unspecified => None,
        }
    }

    fn to_wire(self) -> i32 {
        match self {
            EventKind::Put => EventType::Put as i32,
            EventKind::Delete => EventType::Delete as i32,
            EventKind::Expire => EventType::Expire as i32,
            EventKind::Revoke => EventType::Revoke as i32,
        }
    }

    /// True for the three kinds that remove the key.
    pub fn is_removal(self) -> bool {
        !matches!(self, EventKind::Put)
    }

    /// Lower-case name, as the CLI prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Put => "put",
            EventKind::Delete => "delete",
            EventKind::Expire => "expire",
            EventKind::Revoke => "revoke",
        }
    }
}

/// One change to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// What happened.
    pub kind: EventKind,
    /// Put: the key-value pair after the write. Removals: the key, with an empty value.
    pub kv: KeyValue,
    /// The pair before the change, if [`WatchOptions::prev_kv`] was asked for and it existed.
    pub prev_kv: Option<KeyValue>,
    /// Expire and Revoke: the lease that ended. Put: the lease the key is bound to (0 = none).
    pub lease: LeaseId,
    /// Revision of the change (all keys removed by one lease ending share it).
    pub revision: Revision,
}

impl WatchEvent {
    /// The key that changed.
    pub fn key(&self) -> &[u8] {
        &self.kv.key
    }

    fn from_wire(event: pb::Event) -> Option<WatchEvent> {
        Some(WatchEvent {
            kind: EventKind::from_wire(event.r#type)?,
            kv: KeyValue::from(event.kv.unwrap_or_default()),
            prev_kv: event.prev_kv.map(KeyValue::from),
            lease: LeaseId::new(event.lease),
            revision: Revision::new(event.revision),
        })
    }
}

/// Options of [`Client::watch`]. The default watches one key from the next revision on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Treat the key as a prefix.
    pub prefix: bool,
    /// Watch the range `[key, range_end)`. Exclusive with `prefix`.
    pub range_end: Option<Vec<u8>>,
    /// First revision to deliver (inclusive); 0 = the revision after the current one. A
    /// revision older than the server's retained history fails with [`Error::Compacted`].
    pub start_revision: Revision,
    /// Include each event's previous pair.
    pub prev_kv: bool,
    /// Deliver only these kinds; empty = all.
    pub kinds: Vec<EventKind>,
}

impl WatchOptions {
    /// Watch every key under the prefix.
    pub fn prefix() -> Self {
        WatchOptions {
            prefix: true,
            ..WatchOptions::default()
        }
    }

    /// Sets [`WatchOptions::start_revision`].
    pub fn from_revision(mut self, revision: Revision) -> Self {
        self.start_revision = revision;
        self
    }
}

/// A running watch. Dropping it stops the watch.
///
/// Events arrive in revision order with no gaps and no duplicates, across member failures: the
/// background task re-subscribes (on any member) from the revision after the last one delivered.
/// It ends with an error only when that is impossible ([`Error::Compacted`]: the events in between
/// are gone; re-read with a range and watch again) or the request is invalid.
///
/// ```no_run
/// # async fn demo() -> Result<(), zaris_client::Error> {
/// use zaris_client::{Client, EventKind, WatchOptions};
///
/// let client = Client::connect(["127.0.0.1:7001"]).await?;
/// let mut watcher = client.watch("workers/", WatchOptions::prefix()).await?;
/// while let Some(event) = watcher.next().await {
///     let event = event?;
///     if event.kind == EventKind::Expire {
///         println!("{:?} vanished: lease {} expired", event.key(), event.lease);
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Watcher {
    receiver: mpsc::Receiver<Result<Vec<WatchEvent>, Error>>,
    buffered: VecDeque<WatchEvent>,
    start_revision: Revision,
    task: JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watcher {
    /// The first revision this watch delivers.
    pub fn start_revision(&self) -> Revision {
        self.start_revision
    }

    /// The next event; `None` after the watch ended (following an error).
    pub async fn next(&mut self) -> Option<Result<WatchEvent, Error>> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                return Some(Ok(event));
            }
            match self.receiver.recv().await? {
                Ok(batch) => self.buffered.extend(batch),
                Err(err) => return Some(Err(err)),
            }
        }
    }

    /// The events buffered or next to arrive, as one batch in revision order.
    pub async fn next_batch(&mut self) -> Option<Result<Vec<WatchEvent>, Error>> {
        if !self.buffered.is_empty() {
            return Some(Ok(self.buffered.drain(..).collect()));
        }
        self.receiver.recv().await
    }
}

impl Client {
    /// Watches a key (or a prefix or range, per `options`); returns once the watch is
    /// established on some member, or with the error that prevented it.
    pub async fn watch(
        &self,
        key: impl Into<Vec<u8>>,
        options: WatchOptions,
    ) -> Result<Watcher, Error> {
        let (deliver, receiver) = mpsc::channel(DELIVERY_BUFFER);
        let (created, started) = oneshot::channel();
        let task = WatchTask {
            client: self.clone(),
            key: key.into(),
            options,
            deliver,
            created: Some(created),
        };
        let task = tokio::spawn(task.run());
        match started.await {
            Ok(Ok(start_revision)) => Ok(Watcher {
                receiver,
                buffered: VecDeque::new(),
                start_revision: Revision::new(start_revision),
                task,
            }),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(Error::Protocol {
                endpoint: "the cluster".into(),
                reason: "the watch task ended before the watch was created".into(),
            }),
        }
    }
}

struct WatchTask {
    client: Client,
    key: Vec<u8>,
    options: WatchOptions,
    deliver: mpsc::Sender<Result<Vec<WatchEvent>, Error>>,
    /// Until the first creation: where to report it.
    created: Option<oneshot::Sender<Result<u64, Error>>>,
}

/// How one subscription ended.
enum Ended {
    /// Subscribe again after `delay`, where the endpoints now point (the router moved them if
    /// the member failed).
    Retry { delay: Duration },
    /// The watch is over: report `error` (if any) and stop.
    Fatal(Option<Error>),
}

impl WatchTask {
    async fn run(mut self) {
        // 0 until known: the first creation turns "from now" into a concrete revision.
        let mut next = self.options.start_revision;
        let options = self.client.options().clone();
        let mut router = Router::new(&options);
        let started = Instant::now();
        loop {
            let target = self.client.endpoints_ref().pick();
            let ended = self.subscribe(&target, &mut next, &mut router).await;
            match ended {
                Ended::Fatal(error) => {
                    if let Some(error) = error {
                        self.report(error).await;
                    }
                    return;
                }
                Ended::Retry { delay } => {
                    // Before the first creation the caller is waiting: bound that wait.
                    if self.created.is_some() && started.elapsed() + delay > options.timeout {
                        self.report(Error::Protocol {
                            endpoint: target.authority,
                            reason: "no member accepted the watch within the call timeout".into(),
                        })
                        .await;
                        return;
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    async fn report(&mut self, error: Error) {
        match self.created.take() {
            Some(created) => {
                let _ = created.send(Err(error));
            }
            None => {
                let _ = self.deliver.send(Err(error)).await;
            }
        }
    }

    fn create_request(&self, start_revision: u64) -> WatchRequest {
        WatchRequest {
            request: Some(watch_request::Request::Create(WatchCreateRequest {
                watch_id: WATCH_ID,
                key: self.key.clone(),
                range_end: self.options.range_end.clone().unwrap_or_default(),
                prefix: self.options.prefix,
                start_revision,
                prev_kv: self.options.prev_kv,
                event_types: self.options.kinds.iter().map(|k| k.to_wire()).collect(),
            })),
        }
    }

    /// One subscription on one member, until it ends.
    async fn subscribe(
        &mut self,
        target: &Target,
        next: &mut Revision,
        router: &mut Router,
    ) -> Ended {
        let authority = target.authority.as_str();
        let (requests, outbound) = mpsc::channel(1);
        // The receiver is alive (held below): cannot fail.
        let _ = requests.try_send(self.create_request((*next).get()));
        let limit = {
            let options = self.client.options();
            options.connect_timeout + options.attempt_timeout()
        };
        let mut service = watch_service(target.channel.clone());
        let mut request = tonic::Request::new(ReceiverStream::new(outbound));
        self.client.authorize(&mut request);
        let call = service.watch(request);
        let mut inbound = match tokio::time::timeout(limit, call).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => {
                return self.failed(RpcError::from_status(&status, authority), target, router);
            }
            Err(_) => return self.failed(RpcError::timed_out(limit, authority), target, router),
        };
        let mut progress =
            tokio::time::interval_at(Instant::now() + PROGRESS_INTERVAL, PROGRESS_INTERVAL);
        progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut created = false;
        loop {
            let received = tokio::select! {
                received = inbound.message() => received,
                _ = progress.tick(), if created => {
                    // At most one outstanding: a request the member has not read yet is enough.
                    let _ = requests.try_send(WatchRequest {
                        request: Some(watch_request::Request::Progress(
                            pb::WatchProgressRequest {},
                        )),
                    });
                    continue;
                }
            };
            let message = match received {
                Ok(Some(message)) => message,
                Ok(None) => {
                    let status = tonic::Status::unavailable("the watch stream ended");
                    return self.failed(RpcError::from_status(&status, authority), target, router);
                }
                Err(status) => {
                    return self.failed(RpcError::from_status(&status, authority), target, router);
                }
            };
            if let Err(err) = self.client.check_cluster(&message, target) {
                return Ended::Fatal(Some(err));
            }
            created |= message.watch_id == WATCH_ID && message.created;
            if let Some(ended) = self.handle(message, next, target, router).await {
                drop(requests);
                return ended;
            }
        }
    }

    /// Handles one response; `Some` ends the subscription.
    async fn handle(
        &mut self,
        message: WatchResponse,
        next: &mut Revision,
        target: &Target,
        router: &mut Router,
    ) -> Option<Ended> {
        if message.watch_id == 0 && *next != Revision::ZERO {
            // A progress report: the stream's one watch has received every event up to the
            // header's revision (the member sends them before it), so a resumption may start
            // after it.
            let complete_through = message.header.as_ref().map_or(0, |h| h.revision);
            *next = (*next).max(Revision::new(complete_through.saturating_add(1)));
            return None;
        }
        if message.watch_id != WATCH_ID {
            return None;
        }
        let header_revision = message.header.as_ref().map_or(0, |h| h.revision);
        if message.canceled {
            let reason = WatchCancelReason::try_from(message.cancel_reason)
                .unwrap_or(WatchCancelReason::Unspecified);
            tracing::debug!(?reason, message = %message.cancel_message, "watch canceled");
            return Some(match reason {
                WatchCancelReason::Compacted => Ended::Fatal(Some(Error::Compacted {
                    requested: *next,
                    compact_revision: Revision::new(message.compact_revision),
                })),
                WatchCancelReason::ClientRequested => Ended::Fatal(None),
                WatchCancelReason::SlowConsumer => Ended::Retry {
                    delay: Duration::ZERO,
                },
                _ => {
                    self.client.endpoints_ref().failed(target.index);
                    Ended::Retry {
                        delay: router.next_backoff(),
                    }
                }
            });
        }
        if message.created {
            if *next == Revision::ZERO {
                *next = Revision::new(header_revision + 1);
            }
            router.succeeded(self.client.endpoints_ref(), target.index);
            if let Some(created) = self.created.take() {
                let _ = created.send(Ok((*next).get()));
            }
        }
        if message.events.is_empty() {
            return None;
        }
        let mut batch = Vec::with_capacity(message.events.len());
        // Members never split one revision across responses, so everything below the resume
        // point was delivered already: skipping it keeps the no-duplicates promise even if a
        // member replays from further back than asked.
        let resume = *next;
        for event in message.events {
            if event.revision < resume.get() {
                continue;
            }
            *next = Revision::new(event.revision + 1);
            // Kinds added in later versions are skipped, as the protocol asks.
            if let Some(event) = WatchEvent::from_wire(event) {
                batch.push(event);
            }
        }
        if !batch.is_empty() && self.deliver.send(Ok(batch)).await.is_err() {
            // The Watcher was dropped.
            return Some(Ended::Fatal(None));
        }
        None
    }

    fn failed(&self, err: RpcError, target: &Target, router: &mut Router) -> Ended {
        match router.failed(self.client.endpoints_ref(), target.index, &err) {
            Next::GiveUp => Ended::Fatal(Some(err.into())),
            Next::Retry(delay) => {
                tracing::debug!(error = %err, ?delay, "watch stream failed; re-subscribing");
                Ended::Retry { delay }
            }
        }
    }
}
