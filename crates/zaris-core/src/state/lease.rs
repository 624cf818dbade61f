//! Leases: grant, renew, revoke, expire — and what ending a lease does to its keys and locks.

use std::collections::BTreeSet;

use super::size::lock_place_bytes;
use super::{Holder, Lease, State};
use crate::command::ExpiredLease;
use crate::limits::LimitKind;
use crate::outcome::{Effects, EventKind, LeaseEffect, LockEffect, Outcome, Rejection, Response};
use crate::types::{DurationMs, FencingToken, LeaseId, Revision};

impl State {
    pub(super) fn grant(
        &mut self,
        rev: Revision,
        requested: LeaseId,
        ttl_ms: DurationMs,
        fx: &mut Effects,
    ) -> Response {
        let id = self.grantable_id(requested)?;
        self.check_room(super::size::LEASE_BYTES)?;
        Ok(self.create_lease(rev, id, ttl_ms, fx))
    }

    /// Creates lease `id`, which [`State::grantable_id`] gave and whose room was checked.
    pub(super) fn create_lease(
        &mut self,
        rev: Revision,
        id: LeaseId,
        ttl_ms: DurationMs,
        fx: &mut Effects,
    ) -> Outcome {
        self.next_lease_id = self.next_lease_id.max(id.next());
        self.leases.insert(
            id,
            Lease {
                ttl_ms,
                granted_revision: rev,
                renewed_revision: rev,
                key_count: 0,
                holding: BTreeSet::new(),
                waiting: BTreeSet::new(),
            },
        );
        fx.leases.push(LeaseEffect::Refreshed {
            id,
            ttl_ms,
            renewed_revision: rev,
        });
        Outcome::Granted { id, ttl_ms }
    }

    /// The id a grant of `requested` would get (the next free one for [`LeaseId::NONE`]), or
    /// why it is refused before any room is looked at: the lease count, or an id already used.
    pub(super) fn grantable_id(&self, requested: LeaseId) -> Result<LeaseId, Rejection> {
        if self.leases.len() as u64 >= self.limits.max_leases {
            return Err(Rejection::LimitExceeded {
                limit: LimitKind::Leases,
                max: self.limits.max_leases,
                actual: self.leases.len() as u64 + 1,
            });
        }
        // Lease ids are never reused: every id below `next_lease_id` was granted (or skipped) once,
        // so an ended lease's old owner can never renew, bind to or lock with a newer lease that
        // happens to get its id (contract §3, no resurrection).
        let id = if requested == LeaseId::NONE {
            self.next_lease_id.max(LeaseId::new(1))
        } else if (requested < self.next_lease_id && !self.faults.lease_id_reuse())
            || self.leases.contains_key(&requested)
        {
            return Err(Rejection::LeaseIdUsed {
                id: requested,
                next_free: self.next_lease_id,
            });
        } else {
            requested
        };
        if id > LeaseId::MAX {
            // Unreachable in practice: 2^62 ids remain above the largest a client may choose.
            return Err(Rejection::InvalidArgument(format!(
                "no lease ids left (the largest is {})",
                LeaseId::MAX
            )));
        }
        Ok(id)
    }

    pub(super) fn renew(&mut self, rev: Revision, ids: &[LeaseId], fx: &mut Effects) -> Outcome {
        let mut renewed = Vec::new();
        let mut not_found = Vec::new();
        for id in ids {
            match self.leases.get_mut(id) {
                Some(lease) => {
                    lease.renewed_revision = rev;
                    renewed.push((*id, lease.ttl_ms));
                    fx.leases.push(LeaseEffect::Refreshed {
                        id: *id,
                        ttl_ms: lease.ttl_ms,
                        renewed_revision: rev,
                    });
                }
                None => not_found.push(*id),
            }
        }
        Outcome::Renewed { renewed, not_found }
    }

    pub(super) fn revoke(&mut self, rev: Revision, id: LeaseId, fx: &mut Effects) -> Response {
        if !self.leases.contains_key(&id) {
            return Err(Rejection::LeaseNotFound(id));
        }
        let keys_deleted = self.end_leases(rev, &[id], EventKind::Revoke, fx);
        Ok(Outcome::Revoked { id, keys_deleted })
    }

    /// Expires the leases the leader found overdue, except those renewed after the leader looked
    /// (the renew won the race) and those already gone.
    pub(super) fn expire(
        &mut self,
        rev: Revision,
        leases: &[ExpiredLease],
        fx: &mut Effects,
    ) -> Outcome {
        let mut revoked = Vec::new();
        let mut skipped = Vec::new();
        let mut seen = BTreeSet::new();
        for expired in leases {
            let overdue = seen.insert(expired.id)
                && self
                    .leases
                    .get(&expired.id)
                    .is_some_and(|l| l.renewed_revision <= expired.observed_renewed_revision);
            if overdue {
                revoked.push(expired.id);
            } else {
                skipped.push(expired.id);
            }
        }
        self.end_leases(rev, &revoked, EventKind::Expire, fx);
        Outcome::Expired { revoked, skipped }
    }

    /// Ends live leases in one step: deletes their keys, drops their queue places and releases their
    /// locks; only then hands each released lock to its next waiter, so a lock changes hands at most
    /// once per entry (and its token strictly increases). Returns the number of keys deleted.
    fn end_leases(
        &mut self,
        rev: Revision,
        ids: &[LeaseId],
        kind: EventKind,
        fx: &mut Effects,
    ) -> u64 {
        let mut keys_deleted = 0;
        let mut released = BTreeSet::new();
        for &id in ids {
            let keys: Vec<Vec<u8>> = self.keys_of(id).map(<[u8]>::to_vec).collect();
            for key in keys {
                if self.remove_key(rev, &key, kind, id, fx).is_some() {
                    keys_deleted += 1;
                }
            }
            let Some(lease) = self.leases.remove(&id) else {
                continue;
            };
            self.auth.forget_lease(id);
            self.forget_lock_epochs(id);
            for name in &lease.waiting {
                if let Some(lock) = self.locks.get_mut(name) {
                    let before = lock.waiters.len();
                    lock.waiters.retain(|w| *w != id);
                    self.footprint.lock_places -=
                        (before - lock.waiters.len()) as u64 * lock_place_bytes(name);
                }
            }
            for name in lease.holding {
                if let Some(lock) = self.locks.get(&name) {
                    fx.locks.push(LockEffect::Released {
                        name: name.clone(),
                        lease: id,
                        token: lock.holder.token,
                    });
                }
                released.insert(name);
            }
            fx.leases.push(LeaseEffect::Revoked {
                id,
                expired: kind == EventKind::Expire,
            });
        }
        for name in released {
            self.hand_over(rev, &name, fx);
        }
        keys_deleted
    }

    /// Passes a lock whose holder let go to its next waiter, or removes it if nobody waits.
    pub(super) fn hand_over(
        &mut self,
        rev: Revision,
        name: &str,
        fx: &mut Effects,
    ) -> Option<(LeaseId, FencingToken)> {
        let lock = self.locks.get_mut(name)?;
        // The holder's place goes: to the next waiter, whose waiting place it was, or with the
        // lock.
        self.footprint.lock_places -= lock_place_bytes(name);
        let Some(next) = lock.waiters.pop_front() else {
            self.locks.remove(name);
            return None;
        };
        let token = FencingToken::acquired_at(rev);
        lock.holder = Holder { lease: next, token };
        if let Some(lease) = self.leases.get_mut(&next) {
            lease.waiting.remove(name);
            lease.holding.insert(name.to_string());
        }
        fx.locks.push(LockEffect::Acquired {
            name: name.to_string(),
            lease: next,
            token,
        });
        Some((next, token))
    }
}
