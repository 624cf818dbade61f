//! What the two group-commit batchers (`renew.rs` for keepalives, `batch.rs` for client writes)
//! share: their pipeline [`Slots`]. A batch starts only when a slot is free, so that while all
//! are busy requests pile up in the queue and the next batch takes them together.
//!
//! With one slot (the default for both) batches are Raft rounds, one after another:
//! - the batcher proposes each batch from its own task, since nothing else could go before that
//!   round ends (with more slots each batch gets a task of its own, holding its slot);
//! - a batch may wait up to [`LINGER`] for as many requests as the batch before it took, plus
//!   those that queued while that one was in Raft ([`next_want`], [`next_queued`]). Clients
//!   that each wait for their answer before they send again get their answers together when a
//!   batch applies, and send their next requests together; proposing the first of those as soon
//!   as the slot was free split them into two batches that alternated (the first alone, then
//!   the rest), so each request waited two rounds and its entry carried half as many. Two such
//!   cohorts, once split, would alternate for good if a batch waited only for as many as the
//!   last: waiting for the queued cohort and the one just answered merges them;
//! - while batches carry one request each (a lone client), a request that finds the slot free
//!   and nobody queued takes it and is proposed by its caller's own task ([`Slots::for_caller`]),
//!   skipping two task hand-offs (to the batcher, and its answer back), which on this path cost
//!   more than the work itself. Once a batch carries more, requests go through the batcher again,
//!   so that clients answered together are batched together.
//!
//! With more than one slot a caller takes a free slot itself whenever nobody is queued. Either
//! way the node starts at most as many entries as there are slots at once. A slot bounds what the
//! node starts, not what Raft holds: a caller that gives up (its client went away, its timeout
//! ran out) frees its slot while its entry may still be in Raft, where it keeps its place in the
//! log like any other.
//!
//! A stopping node answers what is queued with `ShuttingDown` rather than start another batch
//! (the batcher looks at the stop first, `biased`), and waits only for the batch in Raft.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics as m;

/// How long a batch may wait for the requests [`next_want`] expects, with one pipeline slot.
/// tokio's timer counts in whole milliseconds, so the wait ends within two; it ends at once when
/// the requests are there, and a lone client (batches of one) never waits.
pub const LINGER: Duration = Duration::from_millis(1);

/// A batcher's pipeline slots: at most this many of its entries are in Raft at once. Shared by
/// the batcher task and the handles its callers hold.
#[derive(Debug)]
pub(crate) struct Slots {
    free: Arc<Semaphore>,
    /// One slot: batches linger, the batcher proposes them itself, and callers go direct only
    /// while batches are of one (see the module comment).
    single: bool,
    /// With one slot: the last batch carried one request.
    lone: AtomicBool,
    /// With one slot: the batcher holds a request it has not proposed yet (taken from the
    /// queue, or carried over from the last batch), which goes before any newcomer.
    holding: AtomicBool,
}

impl Slots {
    /// `count` slots (at least one).
    pub(crate) fn new(count: usize) -> Arc<Self> {
        Arc::new(Slots {
            free: Arc::new(Semaphore::new(count.max(1))),
            single: count <= 1,
            lone: AtomicBool::new(true),
            holding: AtomicBool::new(false),
        })
    }

    /// A slot for a caller to propose its request alone, at once: only if one is free, no
    /// request is queued (a queued one is older and goes first, in the next batch) and, with
    /// one slot, the last batch carried one request and the batcher holds none (taken off the
    /// queue, or carried over, it is older too). The semaphore is fair, so a batcher waiting
    /// for a slot gets the next one released; callers taking free slots never starve the queue.
    pub(crate) fn for_caller<T>(&self, queue: &mpsc::Sender<T>) -> Option<OwnedSemaphorePermit> {
        if queue.capacity() < queue.max_capacity()
            || (self.single
                && (!self.lone.load(Ordering::Acquire) || self.holding.load(Ordering::Acquire)))
        {
            return None;
        }
        self.free.clone().try_acquire_owned().ok()
    }

    /// A free slot and the first request of the next batch: the one the last batch could not
    /// take (`carry`), else the next queued. With one slot the request comes first, so that
    /// the slot stays free for a lone caller while the batcher waits; with more, the slot, so
    /// that requests pile up while all are busy. `None`: the node is stopping (a request taken
    /// is put back in `carry`) or the queue closed.
    pub(crate) async fn next_batch_start<T>(
        &self,
        carry: &mut Option<T>,
        rx: &mut mpsc::Receiver<T>,
        shutdown: &CancellationToken,
    ) -> Option<(OwnedSemaphorePermit, T)> {
        if self.single {
            // A batch that proposed nothing (its first request's caller had gone) left this set.
            if carry.is_none() {
                self.holding.store(false, Ordering::Release);
            }
            let first = first_request(carry, rx, shutdown).await?;
            self.holding.store(true, Ordering::Release);
            let Some(permit) = self.acquire(shutdown).await else {
                // Never proposed: left for `refuse_unproposed`.
                *carry = Some(first);
                return None;
            };
            Some((permit, first))
        } else {
            let permit = self.acquire(shutdown).await?;
            let first = first_request(carry, rx, shutdown).await?;
            Some((permit, first))
        }
    }

    async fn acquire(&self, shutdown: &CancellationToken) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => None,
            permit = self.free.clone().acquire_owned() => permit.ok(),
        }
    }

    /// When the batch being gathered stops waiting for requests: `None` if it never waits
    /// (more than one slot).
    pub(crate) fn linger_deadline(&self) -> Option<Instant> {
        self.single.then(|| Instant::now() + LINGER)
    }

    /// Proposes a gathered batch of `requests`, holding `permit` until `proposal` is done: in
    /// the batcher's own task with one slot, else in a task of its own on `tracker`. `carrying`:
    /// the batcher kept a request for the next batch (one this batch could not take).
    pub(crate) async fn propose<F>(
        &self,
        permit: OwnedSemaphorePermit,
        requests: usize,
        carrying: bool,
        tracker: &TaskTracker,
        proposal: F,
    ) where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.single {
            self.lone.store(requests <= 1, Ordering::Release);
            proposal.await;
            // Before the slot is free: a caller that finds it free knows whether to wait.
            self.holding.store(carrying, Ordering::Release);
            drop(permit);
        } else {
            tracker.spawn(async move {
                proposal.await;
                drop(permit);
            });
        }
    }
}

/// Answers, through `refuse`, each request a stopping batcher never proposed: the one it
/// carried, then those queued (the queue is closed first, so no more come). Their answer can be
/// definite, since nothing of theirs reached Raft.
pub(crate) fn refuse_unproposed<T>(
    carry: Option<T>,
    rx: &mut mpsc::Receiver<T>,
    mut refuse: impl FnMut(T),
) {
    rx.close();
    carry.into_iter().for_each(&mut refuse);
    while let Ok(next) = rx.try_recv() {
        refuse(next);
    }
}

/// Whether a batch's linger (`deadline`) had run out when the batch stopped gathering: it ended
/// short of the requests it waited for, or the last of them came only after the deadline
/// (tokio's timer fires up to a millisecond after it). Either way the clients it waited for did
/// not come back within [`LINGER`], as clients answered together do, so the next batch should
/// not wait for them ([`next_want`]). Counted in [`m::LINGERS_EXPIRED`].
pub(crate) fn linger_expired(batcher: &'static str, deadline: Option<Instant>) -> bool {
    let expired = deadline.is_some_and(|deadline| Instant::now() >= deadline);
    if expired {
        metrics::counter!(m::LINGERS_EXPIRED, "batcher" => batcher).increment(1);
    }
    expired
}

async fn first_request<T>(
    carry: &mut Option<T>,
    rx: &mut mpsc::Receiver<T>,
    shutdown: &CancellationToken,
) -> Option<T> {
    if shutdown.is_cancelled() {
        return None;
    }
    if let Some(pending) = carry.take() {
        return Some(pending);
    }
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => None,
        next = rx.recv() => next,
    }
}

/// How many requests the next batch waits for, with one slot, once a batch of `requests` is
/// applied: its clients, about to send again, and those queued while it was in Raft (`rx` and
/// `carry`: another cohort of clients, which waiting for both merges with this one). None if
/// this batch's linger ran out ([`linger_expired`]): clients that do not come back at once
/// (each sends once, or when it has something to write) would make every batch wait its whole
/// linger, so the next one takes what is queued. Clients that write independently at about one
/// request per linger would otherwise keep every batch waiting for "the next one", which they
/// send a linger later: on 2026-12-05, 1,000 puts/s from independent callers had three in four
/// of the batches that waited made whole only after more than 1 ms, while a closed loop of 16
/// clients granting had 99.6% of them whole within 1 ms.
pub(crate) fn next_want<T>(
    requests: usize,
    expired: bool,
    rx: &mpsc::Receiver<T>,
    carry: &Option<T>,
) -> usize {
    if expired {
        return 0;
    }
    requests + rx.len() + usize::from(carry.is_some())
}

/// The next request for the batch being gathered: one queued now; else, while the batch is
/// `short` of what [`next_want`] expects, the next to arrive before `deadline`. `None`: the
/// batch is complete (nothing queued and no wait left, or the queue closed).
pub(crate) async fn next_queued<T>(
    rx: &mut mpsc::Receiver<T>,
    deadline: Option<Instant>,
    short: bool,
) -> Option<T> {
    if let Ok(next) = rx.try_recv() {
        return Some(next);
    }
    let deadline = deadline.filter(|_| short)?;
    tokio::time::timeout_at(deadline, rx.recv())
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a batcher task starting its next batch got: its slot and first request, if it
    /// started one; and what it left in `carry`.
    type Started = (Option<(OwnedSemaphorePermit, u32)>, Option<u32>);

    /// A batcher task starting its next batch from `carry` and `rx`.
    fn start_batch(
        slots: &Arc<Slots>,
        mut carry: Option<u32>,
        mut rx: mpsc::Receiver<u32>,
        shutdown: &CancellationToken,
    ) -> tokio::task::JoinHandle<Started> {
        let slots = slots.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let started = slots.next_batch_start(&mut carry, &mut rx, &shutdown).await;
            (started, carry)
        })
    }

    /// The first request of the batch a batcher task started, if it started one.
    async fn first_of(batcher: tokio::task::JoinHandle<Started>) -> Option<u32> {
        let (started, _carry) = batcher.await.expect("the batcher task ran");
        started.map(|(_permit, first)| first)
    }

    #[tokio::test]
    async fn a_caller_takes_a_free_slot_only_while_nobody_is_queued() {
        let slots = Slots::new(2);
        let (tx, mut rx) = mpsc::channel::<u32>(8);

        let first = slots.for_caller(&tx).expect("a free slot, an empty queue");
        let second = slots.for_caller(&tx).expect("the second slot");
        assert!(slots.for_caller(&tx).is_none(), "every slot is taken");
        drop(first);

        tx.send(7).await.expect("the queue is open");
        assert!(
            slots.for_caller(&tx).is_none(),
            "a queued request goes before a newcomer"
        );
        assert_eq!(rx.recv().await, Some(7));
        assert!(slots.for_caller(&tx).is_some());
        drop(second);
    }

    #[tokio::test]
    async fn with_one_slot_a_caller_goes_direct_only_while_batches_are_of_one() {
        let slots = Slots::new(1);
        let (tx, _rx) = mpsc::channel::<u32>(8);
        let tracker = TaskTracker::new();
        drop(slots.for_caller(&tx).expect("a lone client at the start"));

        let permit = slots.for_caller(&tx).expect("the slot is free");
        slots.propose(permit, 3, false, &tracker, async {}).await;
        assert!(
            slots.for_caller(&tx).is_none(),
            "after a batch of three, requests go through the batcher"
        );

        let permit = slots.free.clone().try_acquire_owned().expect("free");
        slots.propose(permit, 1, false, &tracker, async {}).await;
        assert!(
            slots.for_caller(&tx).is_some(),
            "after a batch of one, a caller goes direct again"
        );
    }

    #[tokio::test]
    async fn with_one_slot_a_request_the_batcher_holds_goes_before_a_newcomer() {
        let slots = Slots::new(1);
        let (tx, mut rx) = mpsc::channel::<u32>(8);
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();

        // A batch of one that left a request for the next: the slot is free, the queue empty.
        let permit = slots.free.clone().try_acquire_owned().expect("free");
        slots.propose(permit, 1, true, &tracker, async {}).await;
        assert_eq!(slots.free.available_permits(), 1);
        assert!(
            slots.for_caller(&tx).is_none(),
            "the carried request is older: it goes first"
        );
        let mut carry = Some(5);
        let (permit, first) = slots
            .next_batch_start(&mut carry, &mut rx, &shutdown)
            .await
            .expect("the carried request and the slot");
        assert_eq!(first, 5);
        slots.propose(permit, 1, false, &tracker, async {}).await;
        assert!(
            slots.for_caller(&tx).is_some(),
            "nothing held: a lone caller goes direct again"
        );

        // Taken off the queue while a caller holds the slot: the batcher waits for the slot,
        // and gets it before any newcomer.
        let caller = slots.for_caller(&tx).expect("the slot is free");
        tx.send(9).await.expect("the queue is open");
        let batcher = start_batch(&slots, None, rx, &shutdown);
        tokio::task::yield_now().await;
        assert!(!batcher.is_finished(), "it waits for the slot");
        assert!(
            slots.for_caller(&tx).is_none(),
            "the queue is empty, but the batcher holds a request"
        );
        drop(caller);
        assert_eq!(first_of(batcher).await, Some(9));
    }

    #[tokio::test]
    async fn a_stopping_batcher_starts_no_batch() {
        for count in [1, 2] {
            let slots = Slots::new(count);
            let (tx, mut rx) = mpsc::channel::<u32>(8);
            tx.send(1).await.expect("the queue is open");
            let shutdown = CancellationToken::new();
            shutdown.cancel();
            let mut carry = Some(2);
            assert!(
                slots
                    .next_batch_start(&mut carry, &mut rx, &shutdown)
                    .await
                    .is_none(),
                "a free slot, a carried and a queued request, but the node stops ({count} slots)"
            );
            let mut refused = Vec::new();
            refuse_unproposed(carry.take(), &mut rx, |r| refused.push(r));
            assert_eq!(refused, [2, 1], "each answered, in order ({count} slots)");
            assert!(tx.send(3).await.is_err(), "and the queue closed");
        }
    }

    #[tokio::test]
    async fn a_request_taken_when_the_node_stops_is_kept_to_be_refused() {
        let slots = Slots::new(1);
        let (tx, rx) = mpsc::channel::<u32>(8);
        let shutdown = CancellationToken::new();
        let caller = slots.for_caller(&tx).expect("the slot is free");
        tx.send(4).await.expect("the queue is open");
        let batcher = start_batch(&slots, None, rx, &shutdown);
        tokio::task::yield_now().await;
        assert!(
            !batcher.is_finished(),
            "it took the request and waits for the slot"
        );
        shutdown.cancel();
        let (started, carry) = batcher.await.expect("the batcher task ran");
        assert!(started.is_none());
        assert_eq!(carry, Some(4));
        drop(caller);
    }

    #[tokio::test]
    async fn with_one_slot_the_batcher_leaves_the_slot_free_while_it_waits_for_a_request() {
        for (count, free_while_waiting) in [(1, 1), (2, 1)] {
            let slots = Slots::new(count);
            let (tx, rx) = mpsc::channel::<u32>(8);
            let shutdown = CancellationToken::new();
            let batcher = start_batch(&slots, None, rx, &shutdown);
            // The test runtime has one thread: yielding lets the batcher run until it waits for
            // a request.
            tokio::task::yield_now().await;
            let mut taken = Vec::new();
            while let Some(permit) = slots.for_caller(&tx) {
                taken.push(permit);
            }
            assert_eq!(taken.len(), free_while_waiting, "{count} slots");
            // It was waiting for a request: given one, with one slot it waits for the slot (the
            // caller took it); with two it holds one already and goes.
            tx.send(7).await.expect("the queue is open");
            tokio::task::yield_now().await;
            assert_eq!(batcher.is_finished(), count == 2, "{count} slots");
            drop(taken);
            assert_eq!(first_of(batcher).await, Some(7));
        }
    }

    #[tokio::test]
    async fn a_batcher_waiting_for_a_slot_gets_the_next_one_released() {
        for count in [1, 2] {
            let slots = Slots::new(count);
            let (tx, rx) = mpsc::channel::<u32>(8);
            let shutdown = CancellationToken::new();
            let mut held: Vec<_> = (0..count)
                .map(|_| slots.for_caller(&tx).expect("a free slot"))
                .collect();

            let batcher = start_batch(&slots, Some(1), rx, &shutdown);
            tokio::task::yield_now().await;
            assert!(!batcher.is_finished());
            drop(held.pop());
            assert!(
                slots.for_caller(&tx).is_none(),
                "the released slot went to the waiting batcher ({count} slots)"
            );
            assert_eq!(first_of(batcher).await, Some(1));
        }
    }

    #[tokio::test]
    async fn one_slot_proposes_in_the_batchers_task_more_in_tasks_holding_their_slot() {
        for count in [1, 2] {
            let slots = Slots::new(count);
            let (tx, _rx) = mpsc::channel::<u32>(8);
            let tracker = TaskTracker::new();
            let (finish, finished) = tokio::sync::oneshot::channel::<()>();
            let (done_tx, mut done) = tokio::sync::oneshot::channel();
            let watched = slots.clone();
            let proposal = async move {
                let _ = finished.await;
                let _ = done_tx.send(watched.free.available_permits());
            };
            let permit = slots.free.clone().try_acquire_owned().expect("free");
            if count == 1 {
                finish.send(()).expect("the proposal waits");
                slots.propose(permit, 2, false, &tracker, proposal).await;
                assert_eq!(
                    done.try_recv(),
                    Ok(0),
                    "done when propose returns, its slot held meanwhile"
                );
                assert_eq!(slots.free.available_permits(), 1, "and released after");
            } else {
                slots.propose(permit, 2, false, &tracker, proposal).await;
                assert!(done.try_recv().is_err(), "still running");
                assert_eq!(slots.free.available_permits(), 1, "its slot is held");
                finish.send(()).expect("the proposal waits");
                tracker.close();
                tracker.wait().await;
                assert_eq!(slots.free.available_permits(), 2, "and released after");
                assert!(slots.for_caller(&tx).is_some());
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_linger_expires_when_its_batch_gathered_past_the_deadline_whole_or_not() {
        let lingering = Slots::new(1);
        let deadline = lingering.linger_deadline();
        let (tx, mut rx) = mpsc::channel::<u32>(8);
        tx.send(1).await.expect("the queue is open");
        assert_eq!(next_queued(&mut rx, deadline, true).await, Some(1));
        assert!(
            !linger_expired("test", deadline),
            "whole within the linger: its clients came back at once"
        );
        // The last request the batch waited for comes just after the deadline, before tokio's
        // timer (which counts whole milliseconds) ends the wait: the batch is whole, late.
        tokio::time::advance(LINGER + Duration::from_micros(300)).await;
        tx.send(2).await.expect("the queue is open");
        assert_eq!(next_queued(&mut rx, deadline, true).await, Some(2));
        let expired = linger_expired("test", deadline);
        assert!(expired, "whole, but only after the linger");
        assert_eq!(
            next_want(2, expired, &rx, &None),
            0,
            "so the next batch does not wait for these clients"
        );
    }

    #[tokio::test]
    async fn the_next_batch_wants_the_last_ones_clients_and_those_queued_meanwhile() {
        let (tx, rx) = mpsc::channel::<u32>(8);
        assert_eq!(next_want(3, false, &rx, &None), 3, "one cohort");
        tx.send(1).await.expect("the queue is open");
        tx.send(2).await.expect("the queue is open");
        assert_eq!(next_want(3, false, &rx, &None), 5, "another cohort queued");
        assert_eq!(
            next_want(3, false, &rx, &Some(9)),
            6,
            "and one carried over"
        );
        assert_eq!(
            next_want(3, true, &rx, &Some(9)),
            0,
            "after a wait in vain: no wait"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn next_queued_waits_only_while_short_and_within_the_linger() {
        let lingering = Slots::new(1);
        let (tx, mut rx) = mpsc::channel::<u32>(8);
        let started = Instant::now();
        tx.send(1).await.expect("the queue is open");
        assert_eq!(
            next_queued(&mut rx, None, true).await,
            Some(1),
            "queued: taken"
        );
        assert_eq!(
            next_queued(&mut rx, None, true).await,
            None,
            "no linger: no wait"
        );
        let deadline = lingering.linger_deadline();
        assert_eq!(
            next_queued(&mut rx, deadline, false).await,
            None,
            "not short: no wait"
        );
        assert_eq!(started.elapsed(), Duration::ZERO);

        let sender = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.send(2).await.expect("the queue is open");
            tx
        });
        assert_eq!(
            next_queued(&mut rx, deadline, true).await,
            Some(2),
            "arrives while waiting"
        );
        assert_eq!(started.elapsed(), Duration::ZERO);
        let tx = sender.await.expect("the sender ran");
        assert_eq!(
            next_queued(&mut rx, deadline, true).await,
            None,
            "the linger runs out"
        );
        assert!(started.elapsed() >= LINGER && started.elapsed() < 3 * LINGER);
        assert!(linger_expired("test", deadline));
        assert!(!linger_expired("test", None), "no linger");
        assert_eq!(Slots::new(2).linger_deadline(), None);
        drop(tx);
        let deadline = lingering.linger_deadline();
        assert_eq!(
            next_queued(&mut rx, deadline, true).await,
            None,
            "a closed queue"
        );
    }
}
