//! The Watch service: one task per stream, reading the node's [`WatchHub`] (`crate::watch`).
//!
//! A stream task owns its watches (selection, type filter, and a cursor: the next revision to
//! deliver) and brings them up to the hub's head one bounded read at a time, sending through a
//! small bounded channel. A client that stops reading blocks only its own task. The hub keeps
//! moving meanwhile, and a watch whose cursor falls out of the history is canceled
//! (SLOW_CONSUMER) rather than buffered for. Events come from this node's applied state, so any
//! member serves watches, followers included.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use tracing::debug;
use zaris_core::auth::{Credential, Need};
use zaris_core::{EventKind, KeySelector, Revision};
use zaris_proto::v1::watch_server::Watch;
use zaris_proto::v1::{
    WatchCancelReason, WatchCreateRequest, WatchRequest, WatchResponse, watch_request,
};

use super::NodeContext;
use crate::auth::credential_of;
use crate::config::{
    MAX_WATCH_EVENTS_PER_RESPONSE, MAX_WATCHES_PER_STREAM, WATCH_RESPONSE_TARGET_BYTES,
};
use crate::error::ApiError;
use crate::watch::{HistoryGap, WatchHub};
use crate::{convert, metrics as m};

/// Responses buffered per stream. Small: the history, not this buffer, is what lets a watcher
/// fall behind for a while.
const WATCH_STREAM_BUFFER: usize = 16;
/// How long a stopping node spends telling a stream's watches why they end; a client that does
/// not read must not hold up the shutdown.
const SHUTDOWN_NOTICE: Duration = Duration::from_secs(1);
/// How often a stream with open watches checks that its member is still in touch with the
/// cluster.
const CUT_OFF_CHECK: Duration = Duration::from_secs(1);
/// A member cut off from the cluster for longer than this many election timeouts ends its
/// watches (`WATCH_CANCEL_REASON_CUT_OFF`), and refuses new ones, so that clients move to a
/// member that sees the changes.
const CUT_OFF_AFTER_ELECTION_TIMEOUTS: u32 = 3;

#[derive(Clone, Debug)]
pub struct WatchService(pub NodeContext);

type Message = Result<WatchResponse, Status>;
type WatchResponseStream = Pin<Box<dyn Stream<Item = Message> + Send + 'static>>;

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = WatchResponseStream;

    async fn watch(
        &self,
        request: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (tx, rx) = mpsc::channel(WATCH_STREAM_BUFFER);
        let outbox = Outbox {
            tx,
            shutdown: self.0.shutdown.clone(),
        };
        let task = StreamTask {
            hub: self.0.watch_hub.clone(),
            context: self.0.clone(),
            watches: BTreeMap::new(),
            last_served: 0,
            progress: None,
            credential: credential_of(&request),
        };
        self.0.tasks.spawn(task.run(request.into_inner(), outbox));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Why a stream task ends.
#[derive(Debug)]
enum End {
    /// The node is stopping: each open watch is told (SHUTTING_DOWN).
    Shutdown,
    /// The client closed its side, failed, or stopped receiving.
    Client,
    /// The stream ends with this error (a malformed request).
    Fail(ApiError),
}

/// The sending side of a stream: a send gives up when the node stops.
#[derive(Debug)]
struct Outbox {
    tx: mpsc::Sender<Message>,
    shutdown: CancellationToken,
}

impl Outbox {
    async fn send(&self, message: Message) -> Result<(), End> {
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => Err(End::Shutdown),
            sent = self.tx.send(message) => sent.map_err(|_| End::Client),
        }
    }
}

/// One open watch.
#[derive(Debug)]
struct Watcher {
    selector: KeySelector,
    /// `None`: every kind.
    kinds: Option<Vec<EventKind>>,
    prev_kv: bool,
    /// The next revision to deliver: every matching event below it has been sent.
    cursor: Revision,
}

impl Watcher {
    fn wants(&self, event: &zaris_core::Event) -> bool {
        self.kinds
            .as_ref()
            .is_none_or(|kinds| kinds.contains(&event.kind))
            && self.selector.contains(&event.kv.key)
    }

    /// A revision up to which this watch has been sent everything (never above `head`).
    fn complete_through(&self, head: Revision) -> Revision {
        self.cursor.prev().min(head)
    }
}

/// Progress requests not yet answered: they are answered together once every watch has been
/// brought up to `through` (the head when the last of them arrived).
#[derive(Clone, Copy, Debug)]
struct PendingProgress {
    count: u64,
    through: Revision,
}

#[derive(Debug)]
struct StreamTask {
    context: NodeContext,
    hub: Arc<WatchHub>,
    watches: BTreeMap<u64, Watcher>,
    /// The watch served last, so that one far-behind watch does not starve the others.
    last_served: u64,
    progress: Option<PendingProgress>,
    /// Who opened the stream: each watch created on it is checked against the users and roles
    /// current then. A watch already open is not cut when a role changes (as in etcd).
    credential: Credential,
}

impl Drop for StreamTask {
    fn drop(&mut self) {
        metrics::gauge!(m::OPEN_WATCHES).decrement(self.watches.len() as f64);
    }
}

fn cancel_label(reason: WatchCancelReason) -> &'static str {
    match reason {
        WatchCancelReason::Unspecified => "unspecified",
        WatchCancelReason::ClientRequested => "client_requested",
        WatchCancelReason::Compacted => "compacted",
        WatchCancelReason::CapacityExceeded => "capacity_exceeded",
        WatchCancelReason::SlowConsumer => "slow_consumer",
        WatchCancelReason::ShuttingDown => "shutting_down",
        WatchCancelReason::CutOff => "cut_off",
    }
}

impl StreamTask {
    async fn run(mut self, mut incoming: Streaming<WatchRequest>, outbox: Outbox) {
        let node_id = self.context.node_id;
        let mut notified = self.hub.subscribe();
        // The revision the watches are being brought up to: the head as of the last wake-up.
        let mut target = self.hub.head();
        let mut cut_off_check = tokio::time::interval(CUT_OFF_CHECK);
        cut_off_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let end = loop {
            if let Err(end) = self.answer_progress(&outbox).await {
                break end;
            }
            let due = self.next_due(target);
            tokio::select! {
                _ = outbox.shutdown.cancelled() => break End::Shutdown,
                message = incoming.next() => match message {
                    None => break End::Client,
                    Some(Err(status)) => {
                        debug!(node_id, error = %status, "watch stream failed");
                        break End::Client;
                    }
                    Some(Ok(request)) => {
                        if let Err(end) = self.handle(request, &outbox, &mut target).await {
                            break end;
                        }
                    }
                },
                changed = notified.changed() => {
                    // The hub outlives every stream (this task holds it); gone means stopping.
                    if changed.is_err() {
                        break End::Shutdown;
                    }
                    target = self.hub.head();
                }
                _ = cut_off_check.tick(), if !self.watches.is_empty() => {
                    if let Some(silence) = self.cut_off()
                        && let Err(end) = self.cancel_all_cut_off(&outbox, silence).await
                    {
                        break end;
                    }
                }
                // Capacity first, then the read: a watch whose client does not read stays where
                // it is (and eventually falls out of the history) instead of piling up here.
                permit = outbox.tx.reserve(), if due.is_some() => match (permit, due) {
                    (Ok(permit), Some(id)) => self.deliver(id, permit),
                    _ => break End::Client,
                },
            }
        };
        match end {
            End::Shutdown => self.notify_shutdown(&outbox).await,
            End::Fail(error) => {
                debug!(node_id, %error, "watch stream ended by a bad request");
                let _ = outbox.send(Err(error.into())).await;
            }
            End::Client => {}
        }
        debug!(node_id, "watch stream ended");
    }

    async fn handle(
        &mut self,
        request: WatchRequest,
        outbox: &Outbox,
        target: &mut Revision,
    ) -> Result<(), End> {
        match request.request {
            Some(watch_request::Request::Create(create)) => {
                self.create(create, outbox, target).await
            }
            Some(watch_request::Request::Cancel(cancel)) => match self.close(cancel.watch_id) {
                Some(watcher) => {
                    let complete = watcher.complete_through(self.hub.head());
                    let response = self.canceled(
                        cancel.watch_id,
                        complete,
                        WatchCancelReason::ClientRequested,
                        "canceled by the client".into(),
                        Revision::ZERO,
                    );
                    outbox.send(Ok(response)).await
                }
                None => Ok(()),
            },
            Some(watch_request::Request::Progress(_)) => {
                let head = self.hub.head();
                *target = head;
                let pending = self.progress.get_or_insert(PendingProgress {
                    count: 0,
                    through: head,
                });
                pending.count = pending.count.saturating_add(1);
                pending.through = head;
                Ok(())
            }
            None => Err(End::Fail(ApiError::invalid_argument(
                "a WatchRequest must set one of create, cancel or progress",
            ))),
        }
    }

    async fn create(
        &mut self,
        create: WatchCreateRequest,
        outbox: &Outbox,
        target: &mut Revision,
    ) -> Result<(), End> {
        let id = create.watch_id;
        if id == 0 {
            return Err(End::Fail(ApiError::invalid_argument(
                "watch_id must not be 0: responses with watch_id 0 are progress reports",
            )));
        }
        if self.watches.contains_key(&id) {
            return Err(End::Fail(ApiError::invalid_argument(format!(
                "watch_id {id} is already open on this stream"
            ))));
        }
        let kinds = convert::watch::event_kinds(&create.event_types).map_err(End::Fail)?;
        let limits = self.context.limits().map_err(End::Fail)?;
        let selector =
            convert::read_selector(&create.key, &create.range_end, create.prefix, &limits)
                .map_err(End::Fail)?;
        let caller = self.context.resolve(&self.credential).map_err(End::Fail)?;
        self.context
            .check_access(|auth| auth.check_keys(&caller, &selector, Need::Read))
            .map_err(End::Fail)?;

        let (head, oldest_available) = self.hub.position();
        if let Some(silence) = self.cut_off() {
            let response = self.canceled(
                id,
                head,
                WatchCancelReason::CutOff,
                self.cut_off_message(silence),
                Revision::ZERO,
            );
            return outbox.send(Ok(response)).await;
        }
        if self.watches.len() >= MAX_WATCHES_PER_STREAM {
            let response = self.canceled(
                id,
                head,
                WatchCancelReason::CapacityExceeded,
                format!(
                    "this stream already has {MAX_WATCHES_PER_STREAM} open watches \
                     (max_watches_per_stream); cancel one or open another stream"
                ),
                Revision::ZERO,
            );
            return outbox.send(Ok(response)).await;
        }
        let cursor = if create.start_revision == 0 {
            head.next()
        } else {
            Revision::new(create.start_revision)
        };
        if cursor < oldest_available {
            let response = self.canceled(
                id,
                head,
                WatchCancelReason::Compacted,
                format!(
                    "revision {cursor} is compacted; the oldest revision available on member {} \
                     is {oldest_available}: re-read with Range",
                    self.context.node_id
                ),
                oldest_available,
            );
            return outbox.send(Ok(response)).await;
        }
        let watcher = Watcher {
            selector,
            kinds,
            prev_kv: create.prev_kv,
            cursor,
        };
        let complete = watcher.complete_through(head);
        self.watches.insert(id, watcher);
        metrics::gauge!(m::OPEN_WATCHES).increment(1.0);
        *target = head;
        outbox
            .send(Ok(WatchResponse {
                header: Some(self.context.proposer.header(complete)),
                watch_id: id,
                created: true,
                ..WatchResponse::default()
            }))
            .await
    }

    /// The next watch (round-robin after the last one served) that has revisions up to `target`
    /// left to read.
    fn next_due(&self, target: Revision) -> Option<u64> {
        let after = (Bound::Excluded(self.last_served), Bound::Unbounded);
        self.watches
            .range(after)
            .chain(self.watches.range(..=self.last_served))
            .find(|(_, watcher)| watcher.cursor <= target)
            .map(|(id, _)| *id)
    }

    /// Reads the next piece of watch `id`'s history and sends what it selects (at most one
    /// response), or cancels the watch if the history has moved past its cursor.
    fn deliver(&mut self, id: u64, permit: mpsc::Permit<'_, Message>) {
        self.last_served = id;
        let Some(watcher) = self.watches.get_mut(&id) else {
            return;
        };
        let read = self.hub.read(
            watcher.cursor,
            MAX_WATCH_EVENTS_PER_RESPONSE,
            WATCH_RESPONSE_TARGET_BYTES,
        );
        match read {
            Ok(read) => {
                let events: Vec<_> = read
                    .entries
                    .iter()
                    .flat_map(|(revision, events)| {
                        events
                            .iter()
                            .filter(|event| watcher.wants(event))
                            .map(|event| {
                                convert::watch::watch_event(event, *revision, watcher.prev_kv)
                            })
                    })
                    .collect();
                watcher.cursor = read.next;
                if let Some(last) = events.last().map(|event| event.revision) {
                    permit.send(Ok(WatchResponse {
                        header: Some(self.context.proposer.header(Revision::new(last))),
                        watch_id: id,
                        events,
                        ..WatchResponse::default()
                    }));
                }
            }
            Err(gap) => {
                if let Some(response) = self.fell_behind(id, gap) {
                    permit.send(Ok(response));
                }
            }
        }
    }

    /// Cancels watch `id`, whose next revision is no longer in the history.
    fn fell_behind(&mut self, id: u64, gap: HistoryGap) -> Option<WatchResponse> {
        let head = self.hub.head();
        let watcher = self.close(id)?;
        let complete = watcher.complete_through(head);
        let node_id = self.context.node_id;
        if gap.lost_to_restore {
            // This member installed a snapshot: the events in between never passed through it.
            debug!(node_id, watch_id = id, cursor = watcher.cursor.get(), %gap, "watch compacted by a snapshot");
            Some(self.canceled(
                id,
                complete,
                WatchCancelReason::Compacted,
                format!(
                    "member {node_id} installed a snapshot; revisions {} to {} are not available \
                     here: re-read with Range",
                    watcher.cursor,
                    gap.oldest_available.prev()
                ),
                gap.oldest_available,
            ))
        } else {
            debug!(node_id, watch_id = id, cursor = watcher.cursor.get(), %gap, "watch too slow");
            Some(self.canceled(
                id,
                complete,
                WatchCancelReason::SlowConsumer,
                format!(
                    "the watch fell behind the history of member {node_id} (revision {} is gone, \
                     the oldest available is {}); recreate it from the last delivered revision \
                     + 1",
                    watcher.cursor, gap.oldest_available
                ),
                Revision::ZERO,
            ))
        }
    }

    /// A canceled response. Counts the cancel; a watch that was open must already be removed.
    fn canceled(
        &self,
        id: u64,
        complete_through: Revision,
        reason: WatchCancelReason,
        message: String,
        compact_revision: Revision,
    ) -> WatchResponse {
        metrics::counter!(m::WATCHES_CANCELED, "reason" => cancel_label(reason)).increment(1);
        WatchResponse {
            header: Some(self.context.proposer.header(complete_through)),
            watch_id: id,
            canceled: true,
            cancel_reason: reason.into(),
            cancel_message: message,
            compact_revision: compact_revision.get(),
            ..WatchResponse::default()
        }
    }

    /// Removes watch `id` from the open ones, keeping the gauge right.
    fn close(&mut self, id: u64) -> Option<Watcher> {
        let watcher = self.watches.remove(&id)?;
        metrics::gauge!(m::OPEN_WATCHES).decrement(1.0);
        Some(watcher)
    }

    /// Answers pending progress requests once every watch is complete through their revision.
    async fn answer_progress(&mut self, outbox: &Outbox) -> Result<(), End> {
        let Some(pending) = self.progress else {
            return Ok(());
        };
        let head = self.hub.head();
        let complete = self
            .watches
            .values()
            .map(|watcher| watcher.complete_through(head))
            .min()
            .unwrap_or(head);
        // `through.min(head)`: a snapshot install may have moved the head; never wait past it.
        if complete < pending.through.min(head) {
            return Ok(());
        }
        self.progress = None;
        for _ in 0..pending.count {
            outbox
                .send(Ok(WatchResponse {
                    header: Some(self.context.proposer.header(complete)),
                    watch_id: 0,
                    ..WatchResponse::default()
                }))
                .await?;
        }
        Ok(())
    }

    /// How long this member has been cut off from the cluster, once that is longer than
    /// [`CUT_OFF_AFTER_ELECTION_TIMEOUTS`] election timeouts: a failover takes well under one.
    fn cut_off(&self) -> Option<Duration> {
        let bound = Duration::from_millis(self.context.election_timeout.get())
            .saturating_mul(CUT_OFF_AFTER_ELECTION_TIMEOUTS);
        self.context
            .cut_off_for()
            .filter(|silence| *silence > bound)
    }

    fn cut_off_message(&self, silence: Duration) -> String {
        format!(
            "member {} has heard from no leader (or, leading, from no quorum) for {} ms: it sees \
             no new changes; recreate the watch on another member from the last delivered \
             revision + 1",
            self.context.node_id,
            silence.as_millis()
        )
    }

    /// Ends every watch of the stream: a member cut off from the cluster would keep them open and
    /// silent while the others move on.
    async fn cancel_all_cut_off(&mut self, outbox: &Outbox, silence: Duration) -> Result<(), End> {
        let head = self.hub.head();
        let ids: Vec<u64> = self.watches.keys().copied().collect();
        for id in ids {
            let Some(watcher) = self.close(id) else {
                continue;
            };
            let response = self.canceled(
                id,
                watcher.complete_through(head),
                WatchCancelReason::CutOff,
                self.cut_off_message(silence),
                Revision::ZERO,
            );
            outbox.send(Ok(response)).await?;
        }
        Ok(())
    }

    /// Tells every open watch that the member is stopping, as far as the client reads in time.
    async fn notify_shutdown(&mut self, outbox: &Outbox) {
        let head = self.hub.head();
        let ids: Vec<u64> = self.watches.keys().copied().collect();
        let mut responses = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(watcher) = self.close(id) else {
                continue;
            };
            responses.push(self.canceled(
                id,
                watcher.complete_through(head),
                WatchCancelReason::ShuttingDown,
                format!(
                    "member {} is shutting down; recreate the watch on another member from the \
                     last delivered revision + 1",
                    self.context.node_id
                ),
                Revision::ZERO,
            ));
        }
        let send_all = async {
            for response in responses {
                if outbox.tx.send(Ok(response)).await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(SHUTDOWN_NOTICE, send_all).await;
    }
}
