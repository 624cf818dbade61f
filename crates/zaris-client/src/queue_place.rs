//! [`QueuePlace`]: a lease's place in a lock's queue, owned by the call that is waiting for it, and
//! given back if that call ends without a [`LockGuard`](crate::LockGuard).
//!
//! The hole this closes (issue 9): a `lease.lock(..)` or `campaign(..)` future dropped by a
//! timeout, a `select!` or a task abort left the lease queued. When the entry reached the head,
//! the lease held the lock with nobody holding a guard, kept alive by the background keeper, and
//! nobody else could ever take it.
//!
//! Two things make giving the place back subtle:
//! - **A Lock call may still be in flight** when the waiting future is dropped: its LockAcquire
//!   may apply *after* a withdrawal sent at once, queueing the lease again. So every Lock call
//!   runs as its own task, and the withdrawal waits for that task's answer (which comes after its
//!   entry applied) and withdraws again if the answer left the lease queued or holding.
//! - **A lock is held by a lease, not by a call**: a new wait for the same (lease, lock) that
//!   starts while an old one is being withdrawn is indistinguishable on the server. Each
//!   (lease, lock) has a [`WaitSlot`]: withdrawals and the start of a wait take its `turn` in
//!   order, and a withdrawal stands down once a newer wait (a higher `generation`) has started,
//!   since that wait now owns the place.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use zaris_proto::v1::{LockResponse, LockResult, UnlockResult};

use crate::client::Client;
use crate::error::Error;

/// The turn and generation of one (lease, lock).
#[derive(Debug, Default)]
pub(crate) struct WaitSlot {
    turn: tokio::sync::Mutex<()>,
    generation: AtomicU64,
}

/// A lease's wait slots, by lock name.
#[derive(Debug, Default)]
pub(crate) struct WaitSlots(Mutex<BTreeMap<String, Arc<WaitSlot>>>);

impl WaitSlots {
    fn get(&self, name: &str) -> Arc<WaitSlot> {
        let mut slots = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Forget slots nobody uses any more, so a lease that locks many names does not grow.
        slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        slots.entry(name.to_owned()).or_default().clone()
    }
}

/// A Lock call running as its own task, so that dropping the waiter does not drop the call.
pub(crate) type LockCall = JoinHandle<Result<LockResponse, Error>>;

/// The place of `lease` in the queue of lock `name`, from the first Lock call until a guard takes
/// over ([`QueuePlace::keep`]) or the place is given back (explicitly, or on drop).
#[derive(Debug)]
pub(crate) struct QueuePlace {
    client: Client,
    name: String,
    lease: u64,
    slot: Arc<WaitSlot>,
    generation: u64,
    /// The Lock call whose answer has not been seen yet.
    in_flight: Option<LockCall>,
    armed: bool,
}

impl QueuePlace {
    /// Starts a wait: after any withdrawal of an earlier wait for the same (lease, lock) has sent
    /// its cancel, and making every such withdrawal stand down from now on.
    pub(crate) async fn enter(
        client: &Client,
        slots: &WaitSlots,
        name: &str,
        lease: u64,
    ) -> QueuePlace {
        let slot = slots.get(name);
        let generation = {
            let _turn = slot.turn.lock().await;
            slot.generation.fetch_add(1, Ordering::AcqRel) + 1
        };
        QueuePlace {
            client: client.clone(),
            name: name.to_owned(),
            lease,
            slot,
            generation,
            in_flight: None,
            armed: true,
        }
    }

    /// Runs one Lock call as a task and waits for its answer. If the caller stops waiting, the
    /// call goes on and the withdrawal on drop waits for it.
    pub(crate) async fn call(
        &mut self,
        wait: bool,
        timeout: std::time::Duration,
    ) -> Result<LockResponse, Error> {
        let (client, name, lease) = (self.client.clone(), self.name.clone(), self.lease);
        let call = self.in_flight.insert(tokio::spawn(async move {
            client.lock(name, lease, wait, timeout).await
        }));
        let answer = call.await;
        self.in_flight = None;
        answer.unwrap_or_else(|joined| {
            Err(crate::client::unexpected(
                None,
                format!("the lock call task failed: {joined}"),
            ))
        })
    }

    /// A guard took over the place: nothing to give back.
    pub(crate) fn keep(mut self) {
        self.armed = false;
    }

    /// Gives the place back now: `Some(token)` if the lock had been handed over meanwhile (the
    /// caller may keep it: this place then becomes its guard's), `None` once withdrawn.
    pub(crate) async fn withdraw_now(mut self) -> Result<Option<u64>, Error> {
        let _turn = self.slot.turn.lock().await;
        let response = self.client.unlock(self.name.clone(), self.lease, 0).await?;
        self.armed = false;
        match UnlockResult::try_from(response.result) {
            Ok(UnlockResult::Held) => Ok(Some(response.token)),
            Ok(UnlockResult::Withdrawn | UnlockResult::NotHolder) => Ok(None),
            _ => Err(crate::client::unexpected(
                response.header.as_ref(),
                format!("unlock result {} for a withdrawal", response.result),
            )),
        }
    }
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // No runtime (dropped after it shut down): nothing can be sent; the lease's end frees
        // the place.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let withdrawal = Withdrawal {
            client: self.client.clone(),
            name: std::mem::take(&mut self.name),
            lease: self.lease,
            slot: self.slot.clone(),
            generation: self.generation,
        };
        let in_flight = self.in_flight.take();
        runtime.spawn(withdrawal.run(in_flight));
    }
}

/// Gives back a place whose waiter went away, in the background.
struct Withdrawal {
    client: Client,
    name: String,
    lease: u64,
    slot: Arc<WaitSlot>,
    generation: u64,
}

impl Withdrawal {
    async fn run(self, in_flight: Option<LockCall>) {
        self.cancel_unless_superseded().await;
        let Some(call) = in_flight else { return };
        // The call's answer comes after its LockAcquire applied: if it left the lease queued or
        // holding, that happened after the cancel above, so cancel again.
        let answer = call.await;
        let placed = matches!(
            &answer,
            Ok(Ok(response))
                if matches!(
                    LockResult::try_from(response.result),
                    Ok(LockResult::Held | LockResult::Queued)
                )
        );
        if placed {
            self.cancel_unless_superseded().await;
        }
    }

    /// Withdraws the lease from the queue, releasing the lock if it was handed over meanwhile,
    /// unless a newer wait for the same (lease, lock) started: that wait owns the place now.
    async fn cancel_unless_superseded(&self) {
        let _turn = self.slot.turn.lock().await;
        if self.slot.generation.load(Ordering::Acquire) != self.generation {
            return;
        }
        let result = async {
            let response = self.client.unlock(self.name.clone(), self.lease, 0).await?;
            if UnlockResult::try_from(response.result) == Ok(UnlockResult::Held) {
                // Handed over before the withdrawal applied: release it, fenced by its token.
                self.client
                    .unlock(self.name.clone(), self.lease, response.token)
                    .await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        match result {
            Ok(()) => tracing::debug!(
                lease_id = self.lease,
                lock = %self.name,
                "gave back the queue place of an abandoned lock wait"
            ),
            Err(err) => tracing::debug!(
                lease_id = self.lease,
                lock = %self.name,
                error = %err,
                "giving back the queue place of an abandoned lock wait failed"
            ),
        }
    }
}
