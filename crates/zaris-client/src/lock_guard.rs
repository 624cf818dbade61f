//! [`LockGuard`]: a held lock with its fencing token, taken by a [`Lease`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use zaris_types::{FencingToken, Revision};

use crate::lock::{LockOutcome, UnlockOutcome};

use crate::client::unexpected;
use crate::error::Error;
use crate::keepalive::ExpiredReason;
use crate::kv::{DeleteOptions, Fence, PutOptions};
use crate::lease_handle::Lease;
use crate::queue_place::{Claim, Holding, QueuePlace};

/// One Lock call blocks at most this long on the server before the client asks again (below the
/// cluster's `max_lock_wait_ms`; a long wait is a chain of these).
const LOCK_WAIT_CHUNK: Duration = Duration::from_secs(30);

/// A lock held by a [`Lease`], with its **fencing token**.
///
/// What the holder may assume: while [`LockGuard::is_held`] is true, no other lease holds the
/// lock (the cluster hands it on only after this lease ended, and `is_held` turns false before the
/// cluster can end it). What it may *not* assume: that a write it sends now arrives while that is
/// still true — a process can pause, a packet can sit in a queue. So every write that must not
/// come from a former holder carries the token ([`LockGuard::put`], [`LockGuard::fence`]): the
/// store applies it only if the lock is still held with that token, and any other resource can
/// refuse tokens lower than the highest it has seen. Tokens only grow.
///
/// Dropping the guard releases the lock in the background (best effort); [`LockGuard::unlock`]
/// releases it now.
#[derive(Debug)]
pub struct LockGuard {
    lease: Lease,
    name: String,
    token: FencingToken,
    released: AtomicBool,
    /// This guard's share of the lease's claim on the lock (see `queue_place`).
    holding: Mutex<Option<Holding>>,
    /// That claim, shared with the lease's other guards of the lock: one of them releasing it
    /// ends this one too (they hold the same token).
    claim: Arc<Claim>,
}

impl Lease {
    /// Takes lock `name`, waiting in the FIFO queue as long as it takes. Fails with
    /// [`Error::LeaseLost`] if this lease ends first.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zaris_client::Error> {
    /// use std::time::Duration;
    /// use zaris_client::{Client, PutOptions};
    ///
    /// let client = Client::connect(["127.0.0.1:7001"]).await?;
    /// let lease = client.lease(Duration::from_secs(10)).await?;
    /// let guard = lease.lock("jobs/queue").await?;
    /// // Applied only while this guard's token still holds the lock.
    /// guard.put("jobs/last", "42", PutOptions::default()).await?;
    /// guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lock(&self, name: impl Into<String>) -> Result<LockGuard, Error> {
        let name = name.into();
        let mut place = self.enter_queue(&name).await;
        loop {
            if let Some(token) = self.wait_for(&mut place, LOCK_WAIT_CHUNK).await? {
                return self.guard(name, token, place.hold());
            }
        }
    }

    /// Takes lock `name` if it is free (or already held by this lease); `None` if another lease
    /// holds it. Never queues. If this future is dropped before the answer arrives, a lock the
    /// answer would have granted is released in the background.
    pub async fn try_lock(&self, name: impl Into<String>) -> Result<Option<LockGuard>, Error> {
        let name = name.into();
        self.ensure_valid()?;
        let mut place = self.enter_queue(&name).await;
        match place.call(false, Duration::ZERO).await {
            Ok(LockOutcome::Held { token }) => self.guard(name, token, place.hold()).map(Some),
            Ok(LockOutcome::Busy { .. }) => {
                place.keep();
                Ok(None)
            }
            Ok(LockOutcome::Queued { .. }) => {
                Err(unexpected(None, "QUEUED for a lock without waiting"))
            }
            Err(Error::LeaseNotFound { .. }) => Err(self.lost("the cluster has no such lease")),
            Err(err) => Err(err),
        }
    }

    /// Takes lock `name`, waiting up to `timeout` (`Duration::MAX` waits as long as it takes);
    /// `None` if it was not granted in time (the lease is then withdrawn from the queue).
    pub async fn lock_timeout(
        &self,
        name: impl Into<String>,
        timeout: Duration,
    ) -> Result<Option<LockGuard>, Error> {
        let name = name.into();
        // A timeout too long to add to the clock is no timeout at all.
        let Some(deadline) = Instant::now().checked_add(timeout) else {
            return self.lock(name).await.map(Some);
        };
        let mut place = self.enter_queue(&name).await;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(token) = self.wait_for(&mut place, left.min(LOCK_WAIT_CHUNK)).await? {
                return self.guard(name, token, place.hold()).map(Some);
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        // Out of time: leave the queue, unless the lock arrived in the meantime.
        match place.withdraw_now().await? {
            Some((token, holding)) => self.guard(name, token, holding).map(Some),
            None => Ok(None),
        }
    }

    /// Starts waiting for lock `name`: the returned place is given back if the wait ends
    /// without a guard (dropped, failed, lease lost).
    pub(crate) async fn enter_queue(&self, name: &str) -> QueuePlace {
        QueuePlace::enter(self.client(), self.claims(), name, self.id()).await
    }

    /// One Lock call that may block up to `wait`: `Some(token)` once held, `None` while still
    /// queued.
    async fn wait_for(
        &self,
        place: &mut QueuePlace,
        wait: Duration,
    ) -> Result<Option<FencingToken>, Error> {
        self.ensure_valid()?;
        let outcome = tokio::select! {
            outcome = place.call(true, wait) => outcome,
            reason = self.expired() => return Err(self.lost(reason_text(reason))),
        };
        match outcome {
            Ok(LockOutcome::Held { token }) => Ok(Some(token)),
            Ok(LockOutcome::Queued { .. } | LockOutcome::Busy { .. }) => Ok(None),
            Err(Error::LeaseNotFound { .. }) => Err(self.lost("the cluster has no such lease")),
            Err(err) => Err(err),
        }
    }

    fn guard(
        &self,
        name: String,
        token: FencingToken,
        holding: Holding,
    ) -> Result<LockGuard, Error> {
        let guard = LockGuard {
            lease: self.clone(),
            name,
            token,
            released: AtomicBool::new(false),
            claim: holding.claim(),
            holding: Mutex::new(Some(holding)),
        };
        // Granted, but the lease can no longer be proven held: the lock is useless to us. The
        // guard is dropped unreleased, so it is released in the background (fenced by its token).
        if !self.is_valid() {
            return Err(self.lost("the lease passed its safe deadline"));
        }
        tracing::debug!(
            lease_id = self.id().get(),
            lock = %guard.name,
            token = token.get(),
            "lock acquired"
        );
        Ok(guard)
    }

    fn ensure_valid(&self) -> Result<(), Error> {
        if self.is_valid() {
            Ok(())
        } else {
            Err(self.lost(reason_text(match self.state() {
                crate::LeaseState::Expired(reason) => reason,
                _ => ExpiredReason::DeadlinePassed,
            })))
        }
    }

    pub(crate) fn lost(&self, reason: &str) -> Error {
        Error::LeaseLost {
            id: self.id(),
            reason: reason.to_owned(),
        }
    }
}

pub(crate) fn reason_text(reason: ExpiredReason) -> &'static str {
    match reason {
        ExpiredReason::DeadlinePassed => "its safe deadline passed without a renewal",
        ExpiredReason::NotFound => "the cluster no longer has it",
        ExpiredReason::Revoked => "it was revoked",
    }
}

impl LockGuard {
    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fencing token: the revision at which this lease acquired the lock. Greater than the
    /// token of every earlier holder.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The lease holding the lock.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The guard to attach to writes ([`PutOptions::guard`], [`DeleteOptions::guard`], or a
    /// transaction's guard) so the store applies them only while this token holds the lock.
    pub fn fence(&self) -> Fence {
        Fence {
            lock: self.name.clone(),
            token: self.token,
        }
    }

    /// True while the lock is certainly held: no release sent (by this guard or by another guard
    /// of the same lease for the same lock, which holds the same token; answered or not), no
    /// fenced write refused, and the lease valid. A lease revoked by someone else is noticed at its next renewal
    /// (within TTL/3), or at once by a refused fenced write.
    pub fn is_held(&self) -> bool {
        !self.released.load(Ordering::Acquire)
            && !self.claim.may_be_released(self.token)
            && self.lease.is_valid()
    }

    /// Resolves when the lock is lost because its lease ended (or could no longer be proven alive).
    pub async fn lost(&self) -> ExpiredReason {
        self.lease.expired().await
    }

    /// Writes a key only if this token still holds the lock ([`Error::NotHeld`] otherwise);
    /// `options.guard` is replaced by this lock's. Returns the revision of the write.
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: PutOptions,
    ) -> Result<Revision, Error> {
        let options = PutOptions {
            guard: Some(self.fence()),
            ..options
        };
        match self.lease.client().put(key, value, options).await {
            Ok(written) => Ok(written.revision),
            Err(Error::NotHeld { .. }) => Err(self.not_held()),
            Err(Error::LeaseNotFound { .. }) => {
                Err(self.lease.lost("the cluster has no such lease"))
            }
            Err(err) => Err(err),
        }
    }

    /// Deletes keys only if this token still holds the lock ([`Error::NotHeld`] otherwise).
    /// Returns how many were deleted.
    pub async fn delete(
        &self,
        key: impl Into<Vec<u8>>,
        options: DeleteOptions,
    ) -> Result<u64, Error> {
        let options = DeleteOptions {
            guard: Some(self.fence()),
            ..options
        };
        match self.lease.client().delete(key, options).await {
            Ok(deleted) => Ok(deleted.deleted),
            Err(Error::NotHeld { .. }) => Err(self.not_held()),
            Err(err) => Err(err),
        }
    }

    /// Releases the lock (fenced: only if this token still holds it, [`Error::NotHeld`]
    /// otherwise). The next waiter gets it with a higher token.
    pub async fn unlock(self) -> Result<(), Error> {
        // If the call fails, the guard is dropped unreleased and releases in the background.
        // From now on no guard of this lease with this token is certainly held: the release may
        // apply even if its answer is lost.
        self.claim.releasing(self.token);
        let outcome = self
            .lease
            .client()
            .unlock(self.name.clone(), self.lease.id(), self.token)
            .await?;
        match outcome {
            UnlockOutcome::Released => {
                self.mark_released();
                Ok(())
            }
            UnlockOutcome::NotHolder => Err(self.not_held()),
            UnlockOutcome::Withdrawn | UnlockOutcome::HeldNow { .. } => Err(unexpected(
                None,
                format!("{outcome:?} for a release with token {}", self.token),
            )),
        }
    }

    /// The store refused this token: the lock is certainly not held any more.
    fn not_held(&self) -> Error {
        self.mark_released();
        Error::NotHeld {
            lock: self.name.clone(),
            token: self.token,
        }
    }
}

impl LockGuard {
    /// No release is owed any more (released, or lost): this guard's share of the claim ends.
    fn mark_released(&self) {
        self.released.store(true, Ordering::Release);
        self.claim.ended(self.token);
        if let Some(holding) = self.take_holding() {
            holding.released();
        }
    }

    fn take_holding(&self) -> Option<Holding> {
        self.holding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(holding) = self.take_holding() else {
            return;
        };
        // Released by this guard, or by another of the lease's with the same token: nothing to
        // give back.
        if self.released.load(Ordering::Acquire) || self.claim.has_ended(self.token) {
            holding.released();
            return;
        }
        // Released in the background, fenced by the token, unless another wait or guard of this
        // lease for the same lock still owns the claim.
        holding.abandon(self.lease.client(), &self.name, self.lease.id(), self.token);
    }
}
