//! Group commit for keepalives: renewals from every client stream are merged into one `Renew`
//! entry per batch (one Raft round trip and one fsync for thousands of leases), with one batch in
//! flight at once unless `--renew-inflight` says more (`group_commit`). A renewal is acknowledged only after its entry is committed and applied.
//!
//! The batcher hands each request back the applied outcome ([`Renewal`], core types only); the
//! Lease service turns it into the wire answer (`convert::lease::keepalive_response`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zaris_core::{Command, DurationMs, LeaseId, Outcome, Request, Response, Revision};
use zaris_raft::StateHandle;

use crate::error::ApiError;
use crate::group_commit::{Slots, linger_expired, next_queued, next_want, refuse_unproposed};
use crate::metrics as m;
use crate::propose::Proposer;

/// The outcome of the Renew entry that carried a keepalive request's ids, shared by every
/// request in the batch (answer each with `convert::lease::keepalive_response`).
#[derive(Clone, Debug)]
pub struct Renewal {
    pub revision: Revision,
    pub renewals: Arc<Renewals>,
}

/// The outcome of one applied Renew (possibly the group-committed ids of many KeepAlive requests),
/// indexed by lease id so that each request in the batch is answered without rescanning it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Renewals {
    renewed: HashMap<LeaseId, DurationMs>,
    not_found: HashSet<LeaseId>,
}

impl Renewals {
    /// From the Renew's response; a rejection (a batch over `max_batch_ids`, say) is the error
    /// every request in the batch gets.
    pub fn from_response(response: &Response) -> Result<Self, ApiError> {
        match response {
            Ok(Outcome::Renewed { renewed, not_found }) => Ok(Renewals {
                renewed: renewed.iter().copied().collect(),
                not_found: not_found.iter().copied().collect(),
            }),
            Err(rejection) => Err(rejection.clone().into()),
            Ok(other) => Err(ApiError::unexpected("KeepAlive", other)),
        }
    }

    /// The TTL lease `id` was renewed with, if the Renew renewed it.
    pub fn renewed(&self, id: LeaseId) -> Option<DurationMs> {
        self.renewed.get(&id).copied()
    }

    /// Whether the Renew found no lease `id` (it ended: expired or revoked).
    pub fn not_found(&self, id: LeaseId) -> bool {
        self.not_found.contains(&id)
    }

    /// These renewals, with `ids` (found missing before the Renew was proposed) not found too.
    pub fn with_not_found(self: &Arc<Self>, ids: &[LeaseId]) -> Arc<Self> {
        if ids.is_empty() {
            return self.clone();
        }
        let mut renewals = Renewals::clone(self);
        renewals.not_found.extend(ids.iter().copied());
        Arc::new(renewals)
    }
}

struct Pending {
    ids: Vec<LeaseId>,
    reply: oneshot::Sender<Result<Renewal, ApiError>>,
}

/// Queue of keepalives waiting to be batched. Bounded: a full queue pushes back on clients.
#[derive(Clone, Debug)]
pub struct RenewBatcher {
    tx: mpsc::Sender<Pending>,
    /// The pipeline slots, shared with the batcher task.
    slots: Arc<Slots>,
    /// Proposes a caller's renewal that takes a free slot itself.
    direct: Proposer,
    /// `renew-ack-before-commit` answers before the Renew commits.
    early_ack: Option<(Proposer, StateHandle, TaskTracker)>,
}

/// Keepalive requests that may wait for a batch.
const QUEUE_DEPTH: usize = 4_096;

impl RenewBatcher {
    pub fn start(
        proposer: Proposer,
        state: StateHandle,
        inflight: usize,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let batcher_tracker = tracker.clone();
        let slots = Slots::new(inflight);
        tracker.spawn(run(
            rx,
            proposer.clone(),
            state,
            slots.clone(),
            batcher_tracker,
            shutdown,
        ));
        RenewBatcher {
            tx,
            slots,
            direct: proposer,
            early_ack: None,
        }
    }

    /// Switches on the `renew-ack-before-commit` bug (fault-injection builds only).
    pub fn with_early_ack(
        mut self,
        proposer: Proposer,
        state: StateHandle,
        tracker: TaskTracker,
    ) -> Self {
        self.early_ack = Some((proposer, state, tracker));
        self
    }

    /// Renews `ids` (already validated: non-empty, within the batch limit): alone if
    /// [`Slots::for_caller`] gives it a slot, else in the next batch.
    pub async fn renew(&self, ids: Vec<LeaseId>) -> Result<Renewal, ApiError> {
        if let Some(early) = self.ack_early(&ids) {
            return early;
        }
        if let Some(_slot) = self.slots.for_caller(&self.tx) {
            // Boxed: inline, a proposal's future (openraft's write, large) would make every
            // keepalive's future as large, and a future is copied whole each time it moves (into
            // its task, into a queue), whichever path it then takes.
            return Box::pin(propose_renew(&self.direct, ids)).await;
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Pending { ids, reply })
            .await
            .map_err(|_| ApiError::ShuttingDown { proposed: false })?;
        // The batch may have been proposed before the node stopped.
        rx.await
            .map_err(|_| ApiError::ShuttingDown { proposed: true })?
    }
}

impl RenewBatcher {
    /// The `renew-ack-before-commit` bug: on the node that believes it leads, answer from the
    /// leases live now and propose the Renew in the background, whatever becomes of it.
    fn ack_early(&self, ids: &[LeaseId]) -> Option<Result<Renewal, ApiError>> {
        let (proposer, state, tracker) = self.early_ack.as_ref()?;
        if !proposer.is_raft_leader() {
            return None;
        }
        let (revision, outcome) = state.read(|d| {
            let mut renewed = Vec::new();
            let mut not_found = Vec::new();
            for id in ids {
                match d.state.lease(*id, false) {
                    Some(lease) => renewed.push((*id, lease.ttl_ms)),
                    None => not_found.push(*id),
                }
            }
            (
                d.state.last_applied(),
                Outcome::Renewed { renewed, not_found },
            )
        });
        let proposer = proposer.clone();
        let command = Command::Renew { ids: ids.to_vec() };
        tracker.spawn(async move {
            let _ = proposer.propose(Request::new(command)).await;
        });
        Some(
            Renewals::from_response(&Ok(outcome)).map(|renewals| Renewal {
                revision,
                renewals: Arc::new(renewals),
            }),
        )
    }
}

async fn run(
    mut rx: mpsc::Receiver<Pending>,
    proposer: Proposer,
    state: StateHandle,
    slots: Arc<Slots>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut carry: Option<Pending> = None;
    let mut want = 0;
    while let Some((permit, first)) = slots.next_batch_start(&mut carry, &mut rx, &shutdown).await {
        // The cluster's current bound on ids per entry (replicated, so read it each time).
        let max_batch_ids = state
            .read(|d| d.state.limits().max_batch_ids as usize)
            .max(1);
        // With one slot: the requests `group_commit::next_want` expects, if they come soon.
        let linger = slots.linger_deadline().map(|deadline| (deadline, want));
        let batch = collect_batch(first, &mut rx, &mut carry, max_batch_ids, linger).await;
        let requests = batch.len();
        let expired = linger_expired("renew", linger.map(|(deadline, _)| deadline));
        let proposer = proposer.clone();
        let proposal = async move { propose_batch(&proposer, batch).await };
        slots
            .propose(permit, requests, carry.is_some(), &tracker, proposal)
            .await;
        want = next_want(requests, expired, &rx, &carry);
    }
    refuse_unproposed(carry, &mut rx, |pending| {
        let _ = pending
            .reply
            .send(Err(ApiError::ShuttingDown { proposed: false }));
    });
}

/// `first` and what is queued behind it, up to `max_batch_ids` ids (a request that does not fit
/// is left in `carry`, to start the next batch). With `linger` = `Some((deadline, requests))`
/// (one pipeline slot: `group_commit`'s linger), waits until `deadline` for more until the
/// batch holds that many requests.
async fn collect_batch<T: HasIds>(
    first: T,
    rx: &mut mpsc::Receiver<T>,
    carry: &mut Option<T>,
    max_batch_ids: usize,
    linger: Option<(Instant, usize)>,
) -> Vec<T> {
    let deadline = linger.map(|(deadline, _)| deadline);
    let want = linger.map_or(0, |(_, requests)| requests);
    let mut ids = first.ids();
    let mut batch = vec![first];
    while let Some(next) = next_queued(
        rx,
        deadline,
        short_of(batch.len(), ids, want, max_batch_ids),
    )
    .await
    {
        if ids + next.ids() > max_batch_ids {
            *carry = Some(next);
            break;
        }
        ids += next.ids();
        batch.push(next);
    }
    batch
}

/// Whether a batch of `requests` renewing `ids` still lacks requests the linger waits for
/// (`want`), and could take them: a batch holding `max_batch_ids` ids waits for no more.
fn short_of(requests: usize, ids: usize, want: usize, max_batch_ids: usize) -> bool {
    requests < want && ids < max_batch_ids
}

/// What a queued request contributes to a batch's size.
trait HasIds {
    fn ids(&self) -> usize;
}

impl HasIds for Pending {
    fn ids(&self) -> usize {
        self.ids.len()
    }
}

async fn propose_batch(proposer: &Proposer, batch: Vec<Pending>) {
    let ids: Vec<LeaseId> = batch.iter().flat_map(|p| p.ids.iter().copied()).collect();
    let result = propose_renew(proposer, ids).await;
    for pending in batch {
        let _ = pending.reply.send(result.clone());
    }
}

/// Proposes one Renew of `ids` (duplicates renew once) and waits until it is applied.
async fn propose_renew(proposer: &Proposer, mut ids: Vec<LeaseId>) -> Result<Renewal, ApiError> {
    ids.sort_unstable();
    ids.dedup();
    metrics::counter!(m::RENEW_BATCHES).increment(1);
    let reply = proposer
        .propose(Request::new(Command::Renew { ids }))
        .await?;
    let renewals = Renewals::from_response(&reply.response)?;
    Ok(Renewal {
        revision: reply.revision,
        renewals: Arc::new(renewals),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::group_commit::LINGER;

    impl HasIds for usize {
        fn ids(&self) -> usize {
            *self
        }
    }

    /// A linger starting now, until the batch holds `requests`.
    fn linger(requests: usize) -> Option<(Instant, usize)> {
        Some((Instant::now() + LINGER, requests))
    }

    #[tokio::test(start_paused = true)]
    async fn takes_what_is_queued_without_waiting_when_told_not_to() {
        let (tx, mut rx) = mpsc::channel(8);
        tx.send(2).await.expect("the queue is open");
        let mut carry = None;
        let started = Instant::now();
        let batch = collect_batch(1, &mut rx, &mut carry, 100, None).await;
        assert_eq!(batch, vec![1, 2]);
        assert_eq!(started.elapsed(), Duration::ZERO);
        // Nor when the requests wanted are there already.
        tx.send(5).await.expect("the queue is open");
        let batch = collect_batch(1, &mut rx, &mut carry, 100, linger(2)).await;
        assert_eq!(batch, vec![1, 5]);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_the_requests_wanted_within_the_linger() {
        let (tx, mut rx) = mpsc::channel(8);
        // Sends once the batcher waits (the test's runtime has one thread), each time.
        let sender = tokio::spawn(async move {
            for n in [7, 1] {
                tokio::task::yield_now().await;
                tx.send(n).await.expect("the queue is open");
            }
            tx
        });
        let started = Instant::now();
        let batch = collect_batch(1, &mut rx, &mut None, 100, linger(3)).await;
        assert_eq!(batch, vec![1, 7, 1], "three requests, whatever their ids");
        assert!(
            started.elapsed() < LINGER,
            "ends as soon as the requests are there"
        );
        drop(sender.await.expect("the sender finished"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_linger_that_runs_out_sends_what_it_has() {
        let (tx, mut rx) = mpsc::channel::<usize>(8);
        let started = Instant::now();
        let batch = collect_batch(4, &mut rx, &mut None, 100, linger(64)).await;
        assert_eq!(batch, vec![4]);
        assert!(started.elapsed() >= LINGER);
        assert!(started.elapsed() < 3 * LINGER);
        // A closed queue (the node stops) ends the wait too.
        drop(tx);
        let started = Instant::now();
        let batch = collect_batch(4, &mut rx, &mut None, 100, linger(64)).await;
        assert_eq!(batch, vec![4]);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_does_not_fit_starts_the_next_batch() {
        let (tx, mut rx) = mpsc::channel(8);
        for n in [3, 5, 1] {
            tx.send(n).await.expect("the queue is open");
        }
        let mut carry = None;
        let batch = collect_batch(2, &mut rx, &mut carry, 6, linger(50)).await;
        assert_eq!(batch, vec![2, 3], "5 ids: the next would make 10, over 6");
        assert_eq!(carry, Some(5), "kept, in order, for the next batch");
        assert_eq!(rx.try_recv(), Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_waits_for_no_more() {
        let (_tx, mut rx) = mpsc::channel::<usize>(8);
        let started = Instant::now();
        let batch = collect_batch(4, &mut rx, &mut None, 6, linger(3)).await;
        assert_eq!(batch, vec![4], "room left: 2 ids");
        assert!(started.elapsed() >= LINGER, "so it waited");
        let started = Instant::now();
        let batch = collect_batch(6, &mut rx, &mut None, 6, linger(3)).await;
        assert_eq!(batch, vec![6]);
        assert_eq!(started.elapsed(), Duration::ZERO, "full: no wait");
        assert!(short_of(1, 4, 3, 6));
        assert!(!short_of(1, 6, 3, 6), "full, so not short");
        assert!(!short_of(3, 4, 3, 6), "all there");
    }
}
