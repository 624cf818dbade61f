//! The background keepalive: one KeepAlive stream per [`Client`] carries the renewals of every
//! [`Lease`](crate::Lease) handle made from it, and keeps each lease's safe deadline.
//!
//! The safe deadline is computed from the *send* time of the last acknowledged renewal: the
//! leader starts the new TTL when it applies the renewal, which is after we sent it, so
//! `sent + ttl * (1 - drift)` is a moment before which the cluster cannot have expired the lease
//! (as long as the two clocks' rates differ by less than `drift`). Nothing the client learns
//! later can move it back, and a renewal whose acknowledgement is lost does not move it forward.
//!
//! The task owns the stream and the bookkeeping; handles only read the shared deadline and state.
//! It lives while leases are tracked and exits when the last one is dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use zaris_proto::v1::{LeaseKeepAliveRequest, LeaseKeepAliveResponse};
use zaris_types::LeaseId;

use crate::client::Client;
use crate::client::lease_service;
use crate::error::RpcError;
use crate::routing::{Next, Router};

/// Most lease ids in one KeepAlive message (the cluster's `max_batch_ids` is 10,000 by default).
pub const MAX_IDS_PER_RENEWAL: usize = 1_000;
/// Renewal messages sent but not yet acknowledged on one stream.
const MAX_IN_FLIGHT: usize = 64;
/// Shortest wait for an acknowledgement before the stream is given up as stuck.
const MIN_ACK_TIMEOUT: Duration = Duration::from_millis(100);

/// Where a lease stands, as far as this client can prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// Renewals are being acknowledged on time.
    Valid,
    /// A renewal is overdue (more than half the TTL since the last acknowledged one was sent):
    /// the lease still holds until the safe deadline, but work that needs it should wind down.
    Jeopardy,
    /// The lease can no longer be assumed held. Terminal.
    Expired(ExpiredReason),
}

impl LeaseState {
    /// True for [`LeaseState::Expired`].
    pub fn is_expired(&self) -> bool {
        matches!(self, LeaseState::Expired(_))
    }
}

/// Why a lease counts as [`LeaseState::Expired`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiredReason {
    /// The safe deadline passed without an acknowledged renewal. The cluster may or may not have
    /// expired it yet; this client stops renewing and revokes it (best effort).
    DeadlinePassed,
    /// The cluster answered that the lease does not exist (it expired or was revoked elsewhere).
    NotFound,
    /// This client revoked it.
    Revoked,
}

/// Lease timing, pure (time is an argument): when to renew, when Jeopardy starts, the safe deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// The TTL the cluster last granted.
    pub(crate) ttl: Duration,
    /// Send time of the request behind the latest acknowledgement (grant or renewal).
    pub(crate) acked_sent: Instant,
    /// Fraction of the TTL kept as margin for clock-rate differences, in parts per thousand.
    pub(crate) drift_permille: u32,
}

impl Timing {
    pub(crate) fn safe_deadline(&self) -> Instant {
        let keep = 1_000u32.saturating_sub(self.drift_permille.min(1_000));
        self.acked_sent + self.ttl * keep / 1_000
    }

    pub(crate) fn jeopardy_at(&self) -> Instant {
        self.acked_sent + self.ttl / 2
    }

    /// When the next renewal is due: a third of the TTL after the last acknowledged send, so two
    /// attempts fit before Jeopardy.
    pub(crate) fn renew_at(&self) -> Instant {
        self.acked_sent + self.ttl / 3
    }

    /// Renewals due this soon are sent together with one that is due now.
    pub(crate) fn renew_window_start(&self) -> Instant {
        self.acked_sent + self.ttl / 4
    }

    pub(crate) fn state_at(&self, now: Instant) -> LeaseState {
        if now >= self.safe_deadline() {
            LeaseState::Expired(ExpiredReason::DeadlinePassed)
        } else if now >= self.jeopardy_at() {
            LeaseState::Jeopardy
        } else {
            LeaseState::Valid
        }
    }

    /// An acknowledgement of a request sent at `sent` granting `ttl`. Send times only move
    /// forward: an old acknowledgement arriving late proves nothing new.
    pub(crate) fn acknowledged(&mut self, sent: Instant, ttl: Duration) {
        if sent >= self.acked_sent {
            self.acked_sent = sent;
            self.ttl = ttl;
        }
    }
}

/// What a handle and the task share about one lease.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) timing: Mutex<Timing>,
    pub(crate) state: watch::Sender<LeaseState>,
}

impl Shared {
    pub(crate) fn new(timing: Timing, now: Instant) -> Arc<Shared> {
        let (state, _) = watch::channel(timing.state_at(now));
        Arc::new(Shared {
            timing: Mutex::new(timing),
            state,
        })
    }

    pub(crate) fn timing(&self) -> Timing {
        *self.timing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves to `next` unless already expired (Expired is terminal).
    pub(crate) fn set_state(&self, next: LeaseState) {
        self.state.send_if_modified(|current| {
            if current.is_expired() || *current == next {
                return false;
            }
            *current = next;
            true
        });
    }

    pub(crate) fn state(&self) -> LeaseState {
        *self.state.borrow()
    }

    /// True while the lease is certainly held: before the safe deadline, and not reported lost.
    /// Checked against the clock on every call, not only when the background task wakes.
    pub(crate) fn is_valid(&self) -> bool {
        !self.state().is_expired() && Instant::now() < self.timing().safe_deadline()
    }
}

/// Messages from handles to the task.
#[derive(Debug)]
pub(crate) enum Command {
    Track { id: LeaseId, shared: Arc<Shared> },
    Untrack { id: LeaseId },
}

/// The per-client slot holding the task's command channel (`None` while no task runs).
#[derive(Debug, Default)]
pub(crate) struct Slot(Mutex<Option<mpsc::UnboundedSender<Command>>>);

impl Slot {
    /// Sends `command` to the running task, starting one if none runs.
    pub(crate) fn send(&self, client: &Client, command: Command) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let command = match slot.as_ref() {
            Some(sender) => match sender.send(command) {
                Ok(()) => return,
                Err(mpsc::error::SendError(command)) => command,
            },
            None => command,
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        // Cannot fail: the receiver is alive, right here.
        let _ = sender.send(command);
        *slot = Some(sender);
        tokio::spawn(run(client.clone(), receiver));
    }

    /// Sends `command` to the running task, if one runs (an untrack needs no new task).
    pub(crate) fn notify(&self, command: Command) {
        let slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = slot.as_ref() {
            let _ = sender.send(command);
        }
    }

    /// The task is about to exit for lack of leases: succeeds (and clears the slot) only if no
    /// command is waiting, so a handle registering concurrently always finds a live task.
    fn retire(&self, receiver: &mut mpsc::UnboundedReceiver<Command>) -> Option<Command> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match receiver.try_recv() {
            Ok(command) => Some(command),
            Err(_) => {
                *slot = None;
                None
            }
        }
    }
}

struct Tracked {
    shared: Arc<Shared>,
    /// The renewal message this lease rides in, if one is unacknowledged.
    in_flight: Option<u64>,
}

struct InFlight {
    sent: Instant,
    ids: Vec<LeaseId>,
}

type Connecting =
    Pin<Box<dyn Future<Output = Result<Streaming<LeaseKeepAliveResponse>, RpcError>> + Send>>;

enum Conn {
    /// No stream; (re)connect at `retry_at`.
    Idle { retry_at: Instant },
    Connecting {
        index: usize,
        authority: String,
        outbound: mpsc::Sender<LeaseKeepAliveRequest>,
        future: Connecting,
    },
    Open {
        index: usize,
        authority: String,
        outbound: mpsc::Sender<LeaseKeepAliveRequest>,
        inbound: Box<Streaming<LeaseKeepAliveResponse>>,
    },
}

enum ConnEvent {
    Connected(Streaming<LeaseKeepAliveResponse>),
    Ack(LeaseKeepAliveResponse),
    Broken(RpcError),
}

impl Conn {
    async fn event(&mut self) -> ConnEvent {
        match self {
            Conn::Idle { .. } => std::future::pending().await,
            Conn::Connecting { future, .. } => match future.as_mut().await {
                Ok(inbound) => ConnEvent::Connected(inbound),
                Err(err) => ConnEvent::Broken(err),
            },
            Conn::Open {
                inbound, authority, ..
            } => match inbound.message().await {
                Ok(Some(ack)) => ConnEvent::Ack(ack),
                Ok(None) => ConnEvent::Broken(RpcError::from_status(
                    &tonic::Status::unavailable("the KeepAlive stream ended"),
                    authority.clone(),
                )),
                Err(status) => ConnEvent::Broken(RpcError::from_status(&status, authority.clone())),
            },
        }
    }

    fn index(&self) -> Option<usize> {
        match self {
            Conn::Idle { .. } => None,
            Conn::Connecting { index, .. } | Conn::Open { index, .. } => Some(*index),
        }
    }
}

struct Task {
    client: Client,
    leases: BTreeMap<LeaseId, Tracked>,
    /// By the request's `seq`.
    in_flight: BTreeMap<u64, InFlight>,
    conn: Conn,
    router: Router,
}

async fn run(client: Client, mut commands: mpsc::UnboundedReceiver<Command>) {
    let options = client.options().clone();
    let mut task = Task {
        client,
        leases: BTreeMap::new(),
        in_flight: BTreeMap::new(),
        conn: Conn::Idle {
            retry_at: Instant::now(),
        },
        router: Router::new(&options),
    };
    tracing::debug!(
        client_id = task.client.client_id(),
        "keepalive task started"
    );
    loop {
        let now = Instant::now();
        task.update_states(now);
        if task.leases.is_empty() && commands.is_empty() {
            match task.client.keepalive_slot().retire(&mut commands) {
                Some(command) => task.command(command),
                None => break,
            }
            continue;
        }
        task.connect_if_due(now);
        task.send_due(now);
        let wake = task.next_wake(now);
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                Some(command) => task.command(command),
                None => break,
            },
            event = task.conn.event() => task.conn_event(event),
            () = tokio::time::sleep_until(wake) => {}
        }
    }
    tracing::debug!(
        client_id = task.client.client_id(),
        "keepalive task stopped"
    );
}

impl Task {
    fn command(&mut self, command: Command) {
        match command {
            Command::Track { id, shared } => {
                self.leases.insert(
                    id,
                    Tracked {
                        shared,
                        in_flight: None,
                    },
                );
            }
            Command::Untrack { id } => {
                self.leases.remove(&id);
            }
        }
    }

    /// Publishes Valid/Jeopardy/Expired; an expired lease stops being renewed and is revoked
    /// (best effort), so the cluster does not keep what this client has given up.
    fn update_states(&mut self, now: Instant) {
        let mut expired = Vec::new();
        for (id, lease) in &self.leases {
            let state = lease.shared.timing().state_at(now);
            lease.shared.set_state(state);
            if lease.shared.state().is_expired() {
                expired.push(*id);
            }
        }
        for id in expired {
            self.leases.remove(&id);
            tracing::info!(
                lease_id = id.get(),
                "lease passed its safe deadline; revoking"
            );
            let client = self.client.clone();
            tokio::spawn(async move {
                if let Err(err) = client.revoke(id).await {
                    tracing::debug!(lease_id = id.get(), error = %err, "revoking an expired lease failed");
                }
            });
        }
    }

    fn connect_if_due(&mut self, now: Instant) {
        let Conn::Idle { retry_at } = self.conn else {
            return;
        };
        if now < retry_at {
            return;
        }
        let target = self.client.endpoints_ref().pick();
        let (outbound, receiver) = mpsc::channel(MAX_IN_FLIGHT);
        let options = self.client.options();
        let limit = options.connect_timeout + options.attempt_timeout();
        let channel = target.channel;
        let authority = target.authority.clone();
        let mut request = tonic::Request::new(ReceiverStream::new(receiver));
        self.client.authorize(&mut request);
        let future = async move {
            let mut service = lease_service(channel);
            let call = service.keep_alive(request);
            match tokio::time::timeout(limit, call).await {
                Ok(Ok(response)) => Ok(response.into_inner()),
                Ok(Err(status)) => Err(RpcError::from_status(&status, authority)),
                Err(_) => Err(RpcError::timed_out(limit, authority)),
            }
        };
        self.conn = Conn::Connecting {
            index: target.index,
            authority: target.authority,
            outbound,
            future: Box::pin(future),
        };
    }

    /// Sends one message per batch of leases whose renewal is due (those within their renewal
    /// window ride along), on the stream if it is open or connecting.
    fn send_due(&mut self, now: Instant) {
        let outbound = match &self.conn {
            Conn::Open { outbound, .. } | Conn::Connecting { outbound, .. } => outbound.clone(),
            Conn::Idle { .. } => return,
        };
        let any_due = self
            .leases
            .values()
            .any(|l| l.in_flight.is_none() && l.shared.timing().renew_at() <= now);
        if !any_due {
            return;
        }
        let ready: Vec<LeaseId> = self
            .leases
            .iter()
            .filter(|(_, l)| l.in_flight.is_none() && l.shared.timing().renew_window_start() <= now)
            .map(|(id, _)| *id)
            .collect();
        for ids in ready.chunks(MAX_IDS_PER_RENEWAL) {
            if self.in_flight.len() >= MAX_IN_FLIGHT {
                return;
            }
            let seq = self.client.next_keepalive_seq();
            let request = LeaseKeepAliveRequest {
                ids: ids.iter().map(|id| id.get()).collect(),
                seq,
            };
            // Full means the stream is stuck; the acknowledgement timeout will replace it.
            if outbound.try_send(request).is_err() {
                return;
            }
            for id in ids {
                if let Some(lease) = self.leases.get_mut(id) {
                    lease.in_flight = Some(seq);
                }
            }
            self.in_flight.insert(
                seq,
                InFlight {
                    sent: now,
                    ids: ids.to_vec(),
                },
            );
        }
    }

    /// How long an acknowledgement may take before the stream counts as stuck: a quarter of the
    /// shortest TTL riding in it, so a replacement stream still has time before Jeopardy.
    fn ack_timeout(&self, ids: &[LeaseId]) -> Duration {
        let shortest = ids
            .iter()
            .filter_map(|id| self.leases.get(id))
            .map(|l| l.shared.timing().ttl)
            .min()
            .unwrap_or(self.client.options().attempt_timeout());
        (shortest / 4)
            .min(self.client.options().attempt_timeout())
            .max(MIN_ACK_TIMEOUT)
    }

    fn next_wake(&mut self, now: Instant) -> Instant {
        let mut wake = now + Duration::from_secs(3_600);
        for lease in self.leases.values() {
            let timing = lease.shared.timing();
            if lease.in_flight.is_none() {
                wake = wake.min(timing.renew_at());
            }
            let jeopardy = timing.jeopardy_at();
            if jeopardy > now {
                wake = wake.min(jeopardy);
            }
            wake = wake.min(timing.safe_deadline());
        }
        let mut stuck = false;
        for flight in self.in_flight.values() {
            let limit = flight.sent + self.ack_timeout(&flight.ids);
            if limit <= now {
                stuck = true;
            }
            wake = wake.min(limit);
        }
        if stuck {
            let authority = match &self.conn {
                Conn::Open { authority, .. } | Conn::Connecting { authority, .. } => {
                    authority.clone()
                }
                Conn::Idle { .. } => String::new(),
            };
            let err = RpcError::timed_out(MIN_ACK_TIMEOUT, authority);
            self.broken(err);
            return now;
        }
        if let Conn::Idle { retry_at } = self.conn {
            wake = wake.min(retry_at);
        }
        wake.max(now)
    }

    fn conn_event(&mut self, event: ConnEvent) {
        match event {
            ConnEvent::Connected(inbound) => {
                let previous = std::mem::replace(
                    &mut self.conn,
                    Conn::Idle {
                        retry_at: Instant::now(),
                    },
                );
                if let Conn::Connecting {
                    index,
                    authority,
                    outbound,
                    ..
                } = previous
                {
                    tracing::debug!(endpoint = %authority, "keepalive stream open");
                    self.conn = Conn::Open {
                        index,
                        authority,
                        outbound,
                        inbound: Box::new(inbound),
                    };
                }
            }
            ConnEvent::Ack(ack) => self.acknowledged(ack),
            ConnEvent::Broken(err) => self.broken(err),
        }
    }

    fn acknowledged(&mut self, ack: LeaseKeepAliveResponse) {
        if let Some(index) = self.conn.index() {
            self.router.succeeded(self.client.endpoints_ref(), index);
        }
        let Some(flight) = self.in_flight.remove(&ack.seq) else {
            return;
        };
        for renewed in &ack.renewed {
            if let Some(lease) = self.leases.get(&LeaseId::new(renewed.id)) {
                let mut timing = lease
                    .shared
                    .timing
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                timing.acknowledged(flight.sent, Duration::from_millis(renewed.ttl_ms));
            }
        }
        for &id in &ack.not_found {
            if let Some(lease) = self.leases.remove(&LeaseId::new(id)) {
                tracing::info!(lease_id = id, "the cluster no longer has this lease");
                lease
                    .shared
                    .set_state(LeaseState::Expired(ExpiredReason::NotFound));
            }
        }
        for id in &flight.ids {
            if let Some(lease) = self.leases.get_mut(id)
                && lease.in_flight == Some(ack.seq)
            {
                lease.in_flight = None;
            }
        }
    }

    /// Drops the stream; unacknowledged renewals are resent on the next one.
    fn broken(&mut self, err: RpcError) {
        let endpoints = self.client.endpoints_ref();
        // The keepalive never gives up while leases are tracked: an error that would end a call
        // only moves the stream to another member.
        let next = match self.conn.index() {
            Some(index) => match self.router.failed(endpoints, index, &err) {
                Next::GiveUp => self.router.rotate(endpoints, index, &err),
                next => next,
            },
            None => Next::Retry(self.router.backoff_delay(&err)),
        };
        let delay = match next {
            Next::Retry(delay) => delay,
            Next::GiveUp => Duration::ZERO,
        };
        tracing::debug!(error = %err, ?delay, "keepalive stream broken; reconnecting");
        self.in_flight.clear();
        for lease in self.leases.values_mut() {
            lease.in_flight = None;
        }
        self.conn = Conn::Idle {
            retry_at: Instant::now() + delay,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(ttl_ms: u64, drift_permille: u32) -> (Instant, Timing) {
        let t0 = Instant::now();
        (
            t0,
            Timing {
                ttl: Duration::from_millis(ttl_ms),
                acked_sent: t0,
                drift_permille,
            },
        )
    }

    #[test]
    fn deadline_counts_from_the_send_time_minus_the_drift_margin() {
        let (t0, timing) = timing(10_000, 50);
        assert_eq!(timing.safe_deadline(), t0 + Duration::from_millis(9_500));
        assert_eq!(timing.renew_at(), t0 + Duration::from_nanos(3_333_333_333));
        assert_eq!(timing.jeopardy_at(), t0 + Duration::from_millis(5_000));
    }

    #[test]
    fn states_follow_the_clock() {
        let (t0, timing) = timing(3_000, 100);
        assert_eq!(timing.state_at(t0), LeaseState::Valid);
        assert_eq!(
            timing.state_at(t0 + Duration::from_millis(1_499)),
            LeaseState::Valid
        );
        assert_eq!(
            timing.state_at(t0 + Duration::from_millis(1_500)),
            LeaseState::Jeopardy
        );
        assert_eq!(
            timing.state_at(t0 + Duration::from_millis(2_699)),
            LeaseState::Jeopardy
        );
        assert_eq!(
            timing.state_at(t0 + Duration::from_millis(2_700)),
            LeaseState::Expired(ExpiredReason::DeadlinePassed)
        );
    }

    #[test]
    fn late_acknowledgements_never_move_the_deadline_back() {
        let (t0, mut timing) = timing(3_000, 0);
        timing.acknowledged(
            t0 + Duration::from_millis(1_000),
            Duration::from_millis(3_000),
        );
        assert_eq!(timing.safe_deadline(), t0 + Duration::from_millis(4_000));
        // The answer to an earlier request arrives after a later one's.
        timing.acknowledged(
            t0 + Duration::from_millis(500),
            Duration::from_millis(3_000),
        );
        assert_eq!(timing.safe_deadline(), t0 + Duration::from_millis(4_000));
    }

    #[test]
    fn a_drift_above_one_expires_at_once_instead_of_overflowing() {
        let (t0, timing) = timing(3_000, 5_000);
        assert_eq!(timing.safe_deadline(), t0);
        assert!(timing.state_at(t0).is_expired());
    }

    #[tokio::test]
    async fn expired_is_terminal() {
        let (t0, timing) = timing(3_000, 0);
        let shared = Shared::new(timing, t0);
        shared.set_state(LeaseState::Expired(ExpiredReason::NotFound));
        shared.set_state(LeaseState::Valid);
        assert_eq!(shared.state(), LeaseState::Expired(ExpiredReason::NotFound));
    }
}
