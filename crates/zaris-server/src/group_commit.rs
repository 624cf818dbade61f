//! What the two group-commit batchers (`renew.rs` for keepalives, `batch.rs` for client writes)
//! share: a batch starts only when one of a few pipeline slots is free, so that while all are
//! busy requests pile up in the queue and the next batch takes them together.
//!
//! A request that finds a slot free and nobody queued before it takes the slot itself and is
//! proposed by its caller's own task ([`slot_for_caller`]): under light load a request then
//! skips two task hand-offs (to the batcher, and from it to a proposing task), which on this
//! path cost more than the work itself. The batcher takes a slot before it waits for a request,
//! so this needs more than one slot. Either way at most `inflight` entries are in Raft.
//!
//! With one slot (the default for both) batches are Raft rounds, one after another, and a batch
//! may wait up to [`LINGER`] for as many requests as the batch before it took ([`next_queued`]).
//! Clients that each wait for their answer before they send again get their answers together
//! when a batch applies, and send their next requests together; proposing the first of those as
//! soon as the slot was free split them into two batches that alternated (the first alone, then
//! the rest), so each request waited two rounds and its entry carried half as many.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a batch may wait for as many requests as the one before it took, with one pipeline
/// slot. tokio's timer counts in whole milliseconds, so the wait ends within two; it ends at
/// once when the requests are there, and a lone client (batches of one) never waits.
pub const LINGER: Duration = Duration::from_millis(1);

/// When the batch being gathered stops waiting for requests: `None` if it never waits (more
/// than one pipeline slot).
pub(crate) fn linger_deadline(lingers: bool) -> Option<Instant> {
    lingers.then(|| Instant::now() + LINGER)
}

/// The next request for the batch being gathered: one queued now; else, while the batch is
/// `short` of the size of the one before it, the next to arrive before `deadline`. `None`: the
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

/// Waits for a free pipeline slot, then for the first request of the next batch: the one the
/// last batch could not take (`carry`), else the next queued. `None`: the node is stopping or
/// the queue closed.
pub(crate) async fn next_batch_start<T>(
    inflight: &Arc<Semaphore>,
    carry: &mut Option<T>,
    rx: &mut mpsc::Receiver<T>,
    shutdown: &CancellationToken,
) -> Option<(OwnedSemaphorePermit, T)> {
    let permit = tokio::select! {
        _ = shutdown.cancelled() => return None,
        permit = inflight.clone().acquire_owned() => permit.ok()?,
    };
    let first = match carry.take() {
        Some(pending) => pending,
        None => tokio::select! {
            _ = shutdown.cancelled() => return None,
            next = rx.recv() => next?,
        },
    };
    Some((permit, first))
}

/// A pipeline slot for a caller to propose its request alone, at once: only if one is free and
/// no request is queued (a queued one is older and goes first, in the next batch). The
/// semaphore is fair, so a batcher waiting for a slot gets the next one released; callers
/// taking free slots never starve the queue.
pub(crate) fn slot_for_caller<T>(
    inflight: &Arc<Semaphore>,
    queue: &mpsc::Sender<T>,
) -> Option<OwnedSemaphorePermit> {
    if queue.capacity() < queue.max_capacity() {
        return None;
    }
    inflight.clone().try_acquire_owned().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_caller_takes_a_free_slot_only_while_nobody_is_queued() {
        let inflight = Arc::new(Semaphore::new(2));
        let (tx, mut rx) = mpsc::channel::<u32>(8);

        let first = slot_for_caller(&inflight, &tx).expect("a free slot, an empty queue");
        let second = slot_for_caller(&inflight, &tx).expect("the second slot");
        assert!(
            slot_for_caller(&inflight, &tx).is_none(),
            "every slot is taken"
        );
        drop(first);

        tx.send(7).await.expect("the queue is open");
        assert!(
            slot_for_caller(&inflight, &tx).is_none(),
            "a queued request goes before a newcomer"
        );
        assert_eq!(rx.recv().await, Some(7));
        assert!(slot_for_caller(&inflight, &tx).is_some());
        drop(second);
    }

    #[tokio::test]
    async fn a_batcher_waiting_for_a_slot_gets_the_next_one_released() {
        let inflight = Arc::new(Semaphore::new(1));
        let (tx, mut rx) = mpsc::channel::<u32>(8);
        let shutdown = CancellationToken::new();
        let held = slot_for_caller(&inflight, &tx).expect("the only slot");

        let mut carry = Some(1);
        let batcher = {
            let inflight = inflight.clone();
            tokio::spawn(async move {
                next_batch_start(&inflight, &mut carry, &mut rx, &shutdown)
                    .await
                    .map(|(_permit, first)| first)
            })
        };
        // The test runtime has one thread: yielding lets the batcher run until it waits for the
        // slot.
        tokio::task::yield_now().await;
        assert!(!batcher.is_finished());
        drop(held);
        assert!(
            slot_for_caller(&inflight, &tx).is_none(),
            "the released slot went to the waiting batcher"
        );
        assert_eq!(batcher.await.expect("the batcher task ran"), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn next_queued_waits_only_while_short_and_within_the_linger() {
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
        let deadline = linger_deadline(true);
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
        assert_eq!(linger_deadline(false), None);
        drop(tx);
        let deadline = linger_deadline(true);
        assert_eq!(
            next_queued(&mut rx, deadline, true).await,
            None,
            "a closed queue"
        );
    }
}
