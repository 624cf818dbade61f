//! What the two group-commit batchers (`renew.rs` for keepalives, `batch.rs` for client writes)
//! share: a batch starts only when one of a few pipeline slots is free, so that while all are
//! busy requests pile up in the queue and the next batch takes them together.
//!
//! A request that finds a slot free and nobody queued before it takes the slot itself and is
//! proposed by its caller's own task ([`slot_for_caller`]): under light load a request then
//! skips two task hand-offs (to the batcher, and from it to a proposing task), which on this
//! path cost more than the work itself. Either way at most `inflight` entries are in Raft.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

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
}
