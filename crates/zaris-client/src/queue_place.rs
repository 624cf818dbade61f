//! Who in this process holds a lease's claim on a lock, and giving the claim back when nobody
//! does.
//!
//! The hole this closes (issue 9): a `lease.lock(..)` or `campaign(..)` future dropped by a
//! timeout, a `select!` or a task abort left the lease queued. When the entry reached the head,
//! the lease held the lock with nobody holding a guard, kept alive by the background keeper, and
//! nobody else could ever take it.
//!
//! Three things make giving the claim back subtle:
//! - **A Lock call may still be in flight** when the waiting future is dropped: its LockAcquire
//!   may apply *after* a withdrawal sent at once, queueing the lease again. So every Lock call
//!   runs as its own task, and the withdrawal waits for that task's answer (which comes after its
//!   entry applied) and withdraws again if the answer left the lease queued or holding.
//! - **A lock is held by a lease, not by a call**: the cluster cannot tell two waits (or a wait
//!   and a guard) of one lease for one lock apart. So each (lease, lock) has a [`Claim`] counting
//!   the waits ([`QueuePlace`]) and guards ([`Holding`]) of this process, and a claim is given
//!   back (withdrawn, or released) only when both counts are zero: a wait or guard that still
//!   exists owns it.
//! - **Order**: starting a wait and giving a claim back take the claim's `turn`, so a withdrawal
//!   decided before a new wait began has reached the cluster before that wait's first Lock call.
//! - **The cluster may be out of reach** when the claim is abandoned: a give-back that fails is
//!   tried again (the turn released in between) for as long as the lease may live.
//! - **A Lock request may arrive after the give-back**, held up in the network or in a paused
//!   process past its call's timeout, when no answer will ever come for it. Each request says
//!   which revision this process had seen when it was sent (read before the wait is checked for
//!   a give-back), so one that arrives after the give-back applied is refused as overtaken and
//!   changes nothing.
//! - **A release whose answer was lost may apply late**, when a new leader commits it. Until
//!   then the lease holds the lock with that token, and a new wait of the lease is answered with
//!   the same token, which the late release would free under the new guard. So the claim
//!   remembers the tokens a release was sent for, and a wait handed one of them finishes that
//!   release (answered this time: once the lease no longer holds that token, a late copy frees
//!   nothing) and asks again, getting a higher token.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::lock::{LockAnswer, LockOutcome, MAX_OVERTAKEN, UnlockOutcome, overtaken_too_often};
use tokio::task::JoinHandle;
use zaris_types::{FencingToken, LeaseId};

use crate::backoff::{Backoff, jitter};
use crate::client::{Client, unexpected};
use crate::error::Error;
use crate::keepalive::Shared;

/// What this process has of one (lease, lock).
#[derive(Debug)]
pub(crate) struct Claim {
    /// The lease's keep-alive state: a claim is given back for as long as the lease may live.
    lease: Arc<Shared>,
    turn: tokio::sync::Mutex<()>,
    waits: AtomicUsize,
    guards: AtomicUsize,
    /// The highest token a guard of this lease released the lock with, or learned it had lost:
    /// every guard of the lease holding that token or a lower one holds nothing (a lease that
    /// locks again gets a higher token).
    ended_through: AtomicU64,
    /// The highest token a release was sent with (by a guard, or by a give-back), answered or
    /// not. A release whose answer was lost may still apply later; until one is answered, the
    /// lease may hold the lock with that token, and a new wait of the lease would be handed the
    /// same token back, which the late release would then free under its guard.
    release_sent_through: AtomicU64,
}

impl Claim {
    fn new(lease: Arc<Shared>) -> Self {
        Claim {
            lease,
            turn: tokio::sync::Mutex::default(),
            waits: AtomicUsize::new(0),
            guards: AtomicUsize::new(0),
            ended_through: AtomicU64::new(0),
            release_sent_through: AtomicU64::new(0),
        }
    }

    /// A release of the lock held with `token` is about to be sent.
    pub(crate) fn releasing(&self, token: FencingToken) {
        self.release_sent_through
            .fetch_max(token.get(), Ordering::SeqCst);
    }

    /// A release was sent whose token is not known to have ended.
    fn release_in_doubt(&self) -> bool {
        self.release_sent_through.load(Ordering::SeqCst) > self.ended_through.load(Ordering::SeqCst)
    }

    /// Whether a release of the lock as held with `token` was sent, by any guard of the lease
    /// or by a give-back, whether or not it was answered: a guard with that token no longer
    /// certainly holds the lock.
    pub(crate) fn may_be_released(&self, token: FencingToken) -> bool {
        self.has_ended(token) || self.release_sent_through.load(Ordering::SeqCst) >= token.get()
    }

    /// A guard of this lease released the lock held with `token`, or learned it lost it.
    pub(crate) fn ended(&self, token: FencingToken) {
        self.ended_through.fetch_max(token.get(), Ordering::SeqCst);
    }

    /// Whether the lock as held with `token` has been released or lost, by any guard of the
    /// lease.
    pub(crate) fn has_ended(&self, token: FencingToken) -> bool {
        self.ended_through.load(Ordering::SeqCst) >= token.get()
    }

    /// Nobody here waits for or holds the lock: a claim the cluster still has is unowned.
    fn unowned(&self) -> bool {
        self.waits.load(Ordering::SeqCst) == 0 && self.guards.load(Ordering::SeqCst) == 0
    }
}

/// A lease's claims, by lock name.
#[derive(Debug)]
pub(crate) struct Claims {
    lease: Arc<Shared>,
    by_name: Mutex<BTreeMap<String, Arc<Claim>>>,
}

impl Claims {
    /// The claims of the lease whose keep-alive state is `lease`.
    pub(crate) fn new(lease: Arc<Shared>) -> Self {
        Claims {
            lease,
            by_name: Mutex::default(),
        }
    }

    fn get(&self, name: &str) -> Arc<Claim> {
        let mut claims = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        // Forget claims nobody refers to any more, so a lease that locks many names stays small;
        // but not one with a release in doubt, which a new wait must still see.
        claims.retain(|_, claim| Arc::strong_count(claim) > 1 || claim.release_in_doubt());
        claims
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Claim::new(self.lease.clone())))
            .clone()
    }
}

/// Releases the lock `lease` holds with `token`, fenced, noting the release as sent before it
/// goes and as ended once answered: from then on the lease does not hold that token, so no copy
/// of an earlier release of it can free a later guard.
async fn release_for_good(
    client: &Client,
    name: &str,
    lease: LeaseId,
    claim: &Claim,
    token: FencingToken,
) -> Result<(), Error> {
    claim.releasing(token);
    let _released = client.unlock(name.to_owned(), lease, token).await?;
    claim.ended(token);
    Ok(())
}

/// The first and the longest wait between attempts to give a claim back.
const GIVE_BACK_RETRY_FIRST: Duration = Duration::from_millis(100);
const GIVE_BACK_RETRY_MAX: Duration = Duration::from_secs(2);

/// A Lock call running as its own task, so that dropping the waiter does not drop the call.
/// `None`: the wait was given back before the call sent anything more.
type LockCall = JoinHandle<Result<Option<LockOutcome>, Error>>;

/// One wait of `lease` for lock `name`, from its first Lock call until it is kept (a guard takes
/// over, or it ended without queueing) or given back (explicitly, or on drop).
#[derive(Debug)]
pub(crate) struct QueuePlace {
    client: Client,
    name: String,
    lease: LeaseId,
    claim: Arc<Claim>,
    /// The Lock call whose answer has not been seen yet.
    in_flight: Option<LockCall>,
    armed: bool,
    /// Set when the wait is given back: its Lock call sends nothing more after that.
    given_back: Arc<AtomicBool>,
}

impl QueuePlace {
    /// Starts a wait, after any claim given back earlier has reached the cluster.
    pub(crate) async fn enter(
        client: &Client,
        claims: &Claims,
        name: &str,
        lease: LeaseId,
    ) -> QueuePlace {
        let claim = claims.get(name);
        {
            let _turn = claim.turn.lock().await;
            claim.waits.fetch_add(1, Ordering::SeqCst);
        }
        QueuePlace {
            client: client.clone(),
            name: name.to_owned(),
            lease,
            claim,
            in_flight: None,
            armed: true,
            given_back: Arc::default(),
        }
    }

    /// Runs one Lock call as a task and waits for its answer. If the caller stops waiting, the
    /// call goes on, and the claim's return on drop waits for it.
    pub(crate) async fn call(
        &mut self,
        wait: bool,
        timeout: std::time::Duration,
    ) -> Result<LockOutcome, Error> {
        let (client, name, lease) = (self.client.clone(), self.name.clone(), self.lease);
        let (claim, given_back) = (self.claim.clone(), self.given_back.clone());
        let call = self.in_flight.insert(tokio::spawn(async move {
            let deadline = Instant::now().checked_add(timeout);
            let mut overtaken = 0;
            loop {
                // Read before the give-back is checked: a give-back not seen here is sent after
                // this read, so it applies after this revision, and overtakes the request if
                // the request arrives after it.
                let sent_after = client.seen_revision();
                if given_back.load(Ordering::SeqCst) {
                    return Ok(None);
                }
                let left =
                    deadline.map_or(timeout, |at| at.saturating_duration_since(Instant::now()));
                let answer = client
                    .lock_request(name.clone(), lease, wait, left, Some(sent_after))
                    .await?;
                match answer {
                    // An Unlock of this lock by the lease applied after `sent_after` (a twin
                    // guard's release, say): ask again, as of now, unless the wait was given
                    // back.
                    LockAnswer::Overtaken => {
                        overtaken += 1;
                        if overtaken >= MAX_OVERTAKEN {
                            return Err(overtaken_too_often(&name, lease));
                        }
                    }
                    // The lease still holds the lock with a token it sent a release for (a
                    // dropped guard's, say) that has not applied yet, or whose answer was lost:
                    // that release may still apply, and would free the lock under a guard made
                    // with this token. Finish it, so the token can never hold again, and ask
                    // anew: the lease then gets a higher token, or waits.
                    LockAnswer::Answered(LockOutcome::Held { token })
                        if claim.may_be_released(token) =>
                    {
                        overtaken = 0;
                        release_for_good(&client, &name, lease, &claim, token).await?;
                    }
                    LockAnswer::Answered(outcome) => return Ok(Some(outcome)),
                }
            }
        }));
        let answer = call.await;
        self.in_flight = None;
        match answer {
            Ok(Ok(Some(outcome))) => Ok(outcome),
            Ok(Ok(None)) => Err(unexpected(
                None,
                "a lock call after its wait was given back",
            )),
            Ok(Err(err)) => Err(err),
            Err(joined) => Err(unexpected(
                None,
                format!("the lock call task failed: {joined}"),
            )),
        }
    }

    /// The lock was granted: a guard takes over the claim.
    pub(crate) fn hold(mut self) -> Holding {
        // The guard count rises before the wait count falls: a claim is never seen unowned in
        // between.
        self.claim.guards.fetch_add(1, Ordering::SeqCst);
        self.disarm();
        Holding {
            claim: self.claim.clone(),
        }
    }

    /// The wait ended without queueing (a lock not free for `try_lock`): nothing to give back.
    pub(crate) fn keep(mut self) {
        self.disarm();
    }

    fn disarm(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            self.claim.waits.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Gives the place back now: `Some(token)` if the lock had been handed over meanwhile (the
    /// caller keeps it, through the returned [`Holding`]), `None` once withdrawn.
    pub(crate) async fn withdraw_now(self) -> Result<Option<(FencingToken, Holding)>, Error> {
        self.given_back.store(true, Ordering::SeqCst);
        let turn = self.claim.turn.lock().await;
        let outcome = self
            .client
            .unlock(self.name.clone(), self.lease, FencingToken::NONE)
            .await?;
        drop(turn);
        match outcome {
            // Handed over meanwhile, but with a token a release was sent for (see `call`): not
            // a lock to keep; release it for good.
            UnlockOutcome::HeldNow { token } if self.claim.may_be_released(token) => {
                release_for_good(&self.client, &self.name, self.lease, &self.claim, token).await?;
                self.keep();
                Ok(None)
            }
            UnlockOutcome::HeldNow { token } => Ok(Some((token, self.hold()))),
            UnlockOutcome::Withdrawn | UnlockOutcome::NotHolder => {
                self.keep();
                Ok(None)
            }
            UnlockOutcome::Released => Err(unexpected(None, "RELEASED for a withdrawal")),
        }
    }
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.given_back.store(true, Ordering::SeqCst);
        self.disarm();
        let giveback = GiveBack {
            client: self.client.clone(),
            name: std::mem::take(&mut self.name),
            lease: self.lease,
            claim: self.claim.clone(),
        };
        giveback.spawn(self.in_flight.take(), None);
    }
}

/// A guard's share of a claim; given back (the lock released, fenced) when the last share of the
/// claim is dropped without an explicit release.
#[derive(Debug)]
pub(crate) struct Holding {
    claim: Arc<Claim>,
}

impl Holding {
    /// The claim this share is of.
    pub(crate) fn claim(&self) -> Arc<Claim> {
        self.claim.clone()
    }

    /// The guard released the lock itself (or learned it lost it).
    pub(crate) fn released(self) {
        self.claim.guards.fetch_sub(1, Ordering::SeqCst);
        std::mem::forget(self);
    }

    /// The guard was dropped while holding lock `name` with `token`: release it in the
    /// background, unless another wait or guard of this process for it still exists.
    pub(crate) fn abandon(self, client: &Client, name: &str, lease: LeaseId, token: FencingToken) {
        self.claim.guards.fetch_sub(1, Ordering::SeqCst);
        let giveback = GiveBack {
            client: client.clone(),
            name: name.to_owned(),
            lease,
            claim: self.claim.clone(),
        };
        std::mem::forget(self);
        giveback.spawn(None, Some(token));
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        // Only reached when neither `released` nor `abandon` ran (a guard that never existed).
        self.claim.guards.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Gives back a claim nobody in this process owns any more, in the background.
struct GiveBack {
    client: Client,
    name: String,
    lease: LeaseId,
    claim: Arc<Claim>,
}

impl GiveBack {
    fn spawn(self, in_flight: Option<LockCall>, token: Option<FencingToken>) {
        // No runtime (dropped after it shut down): nothing can be sent; the lease's end gives the
        // claim back.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(self.run(in_flight, token));
    }

    async fn run(self, in_flight: Option<LockCall>, token: Option<FencingToken>) {
        self.give_back_if_unowned(token).await;
        let Some(call) = in_flight else { return };
        // The call's answer comes after its LockAcquire applied: if it left the lease queued or
        // holding, that happened after the withdrawal above, so give the claim back again. So
        // too after an answer that does not say (an indeterminate failure: an earlier attempt
        // of the call may have applied); only a definite answer that placed nothing is spared.
        let answer = call.await;
        let placed_nothing = match &answer {
            Ok(Ok(None)) => true,
            Ok(Ok(Some(outcome))) => !matches!(
                outcome,
                LockOutcome::Held { .. } | LockOutcome::Queued { .. }
            ),
            Ok(Err(err)) => err.is_definite(),
            Err(_joined) => false,
        };
        if !placed_nothing {
            self.give_back_if_unowned(None).await;
        }
    }

    /// Withdraws the lease from the queue (or releases the lock with `token`, or with the token
    /// the withdrawal reports if the lock was handed over meanwhile), unless a wait or guard of
    /// this process for the lock exists now: it owns the claim. A failed attempt (the cluster
    /// unreachable for a while, say) is tried again, with backoff, for as long as the lease may
    /// live: a lease left queued would get the lock in turn and hold it with no guard.
    async fn give_back_if_unowned(&self, token: Option<FencingToken>) {
        let mut backoff = Backoff::new(GIVE_BACK_RETRY_FIRST, GIVE_BACK_RETRY_MAX);
        loop {
            let err = {
                let _turn = self.claim.turn.lock().await;
                if !self.claim.unowned() {
                    return;
                }
                match self.give_back(token).await {
                    Ok(()) => {
                        tracing::debug!(
                            lease_id = self.lease.get(),
                            lock = %self.name,
                            "gave back an abandoned claim on a lock"
                        );
                        return;
                    }
                    Err(err) => err,
                }
            };
            // Only a cluster out of reach, or an answer lost, is worth another attempt; a refusal
            // (the lease has ended, say, and the cluster gave its claims back with it) is final.
            let unreached = match &err {
                Error::DeadlineExhausted { .. } | Error::Unreachable { .. } => true,
                Error::Rpc(_) => !err.is_definite(),
                // Another cluster, or an answer we cannot read: no retry would change that.
                _ => false,
            };
            // Past the lease's safe deadline the keeper revokes the lease or the cluster expires
            // it, and the lock goes with it.
            if !unreached || !self.claim.lease.is_valid() {
                tracing::debug!(
                    lease_id = self.lease.get(),
                    lock = %self.name,
                    error = %err,
                    "not giving back a claim on a lock: refused, or the lease is past its safe \
                     deadline and ends with it"
                );
                return;
            }
            let delay = jitter(backoff.next_delay());
            tracing::debug!(
                lease_id = self.lease.get(),
                lock = %self.name,
                error = %err,
                ?delay,
                "giving back an abandoned claim on a lock failed; trying again"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One attempt of [`Self::give_back_if_unowned`].
    async fn give_back(&self, token: Option<FencingToken>) -> Result<(), Error> {
        let token = match token {
            Some(token) => Some(token),
            None => match self
                .client
                .unlock(self.name.clone(), self.lease, FencingToken::NONE)
                .await?
            {
                UnlockOutcome::HeldNow { token } => Some(token),
                _ => None,
            },
        };
        if let Some(token) = token {
            // Held: release it, fenced by its token.
            release_for_good(&self.client, &self.name, self.lease, &self.claim, token).await?;
        }
        Ok(())
    }
}
