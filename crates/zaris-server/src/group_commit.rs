//! What the two group-commit batchers (`renew.rs` for keepalives, `batch.rs` for client writes)
//! share: a batch starts only when one of a few pipeline slots is free, so that while all are
//! busy requests pile up in the queue and the next batch takes them together.

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
