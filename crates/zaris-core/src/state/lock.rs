//! Locks: acquire (at once or queued FIFO), fenced release, and withdrawing from the queue.

use std::collections::VecDeque;

use super::size::lock_place_bytes;
use super::{Holder, Lock, State};
use crate::limits::LimitKind;
use crate::outcome::{
    CancelOutcome, Effects, LockEffect, LockOutcome, Outcome, Rejection, Response,
};
use crate::types::{FencingToken, LeaseId, Revision};

impl State {
    pub(super) fn lock_acquire(
        &mut self,
        rev: Revision,
        name: &str,
        lease: LeaseId,
        wait: bool,
        sent_after: Option<Revision>,
        fx: &mut Effects,
    ) -> Response {
        if !self.leases.contains_key(&lease) {
            return Err(Rejection::LeaseNotFound(lease));
        }
        // A Lock that arrives after a later Unlock of this lock by its lease (a wait given back
        // while its Lock call was held up in the network or a paused process) would queue the
        // lease again, and the lease would hold the lock in turn with nobody to release it.
        if let Some(sent_after) = sent_after
            && self.lock_overtaken(lease, name, sent_after)
        {
            return Ok(Outcome::Lock(LockOutcome::Overtaken));
        }
        if self.faults.lock_ignores_holder()
            && let Some(token) = self.take_over_lock(rev, name, lease, fx)
        {
            return Ok(Outcome::Lock(LockOutcome::Held { token }));
        }
        let max_waiters = self.limits.max_waiters_per_lock;
        let place_bytes = lock_place_bytes(name);
        // Asked here, taken where a new place (holder of a free lock, or a waiter) is made: the
        // lock table is borrowed there.
        let room = self.check_room(place_bytes);
        let outcome = match self.locks.get_mut(name) {
            None => {
                room?;
                self.footprint.lock_places += place_bytes;
                let token = FencingToken::acquired_at(rev);
                self.locks.insert(
                    name.to_string(),
                    Lock {
                        holder: Holder { lease, token },
                        waiters: VecDeque::new(),
                    },
                );
                if let Some(l) = self.leases.get_mut(&lease) {
                    l.holding.insert(name.to_string());
                }
                fx.locks.push(LockEffect::Acquired {
                    name: name.to_string(),
                    lease,
                    token,
                });
                LockOutcome::Held { token }
            }
            // Re-acquiring is idempotent: a client retrying after a lost response learns its token.
            Some(lock) if lock.holder.lease == lease => LockOutcome::Held {
                token: lock.holder.token,
            },
            Some(lock) => {
                if let Some(at) = lock.waiters.iter().position(|w| *w == lease) {
                    LockOutcome::Queued {
                        position: at as u32 + 1,
                    }
                } else if !wait {
                    LockOutcome::Busy {
                        holder: lock.holder.lease,
                        token: lock.holder.token,
                    }
                } else if let Err(full) = room {
                    return Err(full);
                } else if lock.waiters.len() >= max_waiters as usize {
                    return Err(Rejection::LimitExceeded {
                        limit: LimitKind::WaitersPerLock,
                        max: max_waiters.into(),
                        actual: lock.waiters.len() as u64 + 1,
                    });
                } else {
                    self.footprint.lock_places += place_bytes;
                    lock.waiters.push_back(lease);
                    if let Some(l) = self.leases.get_mut(&lease) {
                        l.waiting.insert(name.to_string());
                    }
                    LockOutcome::Queued {
                        position: lock.waiters.len() as u32,
                    }
                }
            }
        };
        Ok(Outcome::Lock(outcome))
    }

    /// The `lock-ignores-holder` bug (reachable only in fault-injection builds): grants a lock held by another
    /// lease to `lease` at once, as if the holder's lease had ended. The previous holder loses the
    /// lock (its lease and keys stay), `lease` leaves the queue if it was waiting, and the other
    /// waiters keep their places. Every invariant still holds, so snapshots restore: the harness
    /// must find the bug by what clients see (two holders at once), not by a crash. Returns the
    /// new token, or `None` when the lock is free or already held by `lease` (the usual path).
    fn take_over_lock(
        &mut self,
        rev: Revision,
        name: &str,
        lease: LeaseId,
        fx: &mut Effects,
    ) -> Option<FencingToken> {
        let lock = self.locks.get_mut(name)?;
        let previous = lock.holder;
        if previous.lease == lease {
            return None;
        }
        let before = lock.waiters.len();
        lock.waiters.retain(|w| *w != lease);
        // The old holder's place goes to `lease`; its waiting place, if any, goes.
        self.footprint.lock_places -= (before - lock.waiters.len()) as u64 * lock_place_bytes(name);
        let token = FencingToken::acquired_at(rev);
        lock.holder = Holder { lease, token };
        if let Some(l) = self.leases.get_mut(&previous.lease) {
            l.holding.remove(name);
        }
        if let Some(l) = self.leases.get_mut(&lease) {
            l.waiting.remove(name);
            l.holding.insert(name.to_string());
        }
        fx.locks.push(LockEffect::Released {
            name: name.to_string(),
            lease: previous.lease,
            token: previous.token,
        });
        fx.locks.push(LockEffect::Acquired {
            name: name.to_string(),
            lease,
            token,
        });
        Some(token)
    }

    /// Releases a lock if `lease` holds it with `token`; a stale token is rejected, so a holder that
    /// lost the lock cannot release its successor's.
    pub(super) fn lock_release(
        &mut self,
        rev: Revision,
        name: &str,
        lease: LeaseId,
        token: FencingToken,
        fx: &mut Effects,
    ) -> Response {
        let held = self
            .locks
            .get(name)
            .is_some_and(|l| l.holder == Holder { lease, token });
        if !held {
            return Err(Rejection::NotHolder {
                lock: name.to_string(),
                lease,
                token,
            });
        }
        if let Some(l) = self.leases.get_mut(&lease) {
            l.holding.remove(name);
        }
        self.note_unlock(lease, name, rev);
        fx.locks.push(LockEffect::Released {
            name: name.to_string(),
            lease,
            token,
        });
        let next = self.hand_over(rev, name, fx);
        Ok(Outcome::Unlocked { next })
    }

    /// Withdraws `lease` from the queue of `name`. Whatever it finds, a live lease's Lock
    /// requests of `name` sent before it are overtaken from now on: the withdrawal of a wait
    /// whose Lock has not arrived yet finds nothing to withdraw, and must still keep that Lock
    /// from queueing.
    pub(super) fn lock_cancel(&mut self, rev: Revision, name: &str, lease: LeaseId) -> Outcome {
        self.note_unlock(lease, name, rev);
        let Some(lock) = self.locks.get_mut(name) else {
            return Outcome::Cancelled(CancelOutcome::NotWaiting);
        };
        if lock.holder.lease == lease {
            return Outcome::Cancelled(CancelOutcome::Held {
                token: lock.holder.token,
            });
        }
        let before = lock.waiters.len();
        lock.waiters.retain(|w| *w != lease);
        if lock.waiters.len() == before {
            return Outcome::Cancelled(CancelOutcome::NotWaiting);
        }
        self.footprint.lock_places -= lock_place_bytes(name);
        if let Some(l) = self.leases.get_mut(&lease) {
            l.waiting.remove(name);
        }
        Outcome::Cancelled(CancelOutcome::Withdrawn)
    }
}
