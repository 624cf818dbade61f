//! The lessor: one node's table of lease deadlines on its own monotonic clock.
//!
//! Every node feeds it from apply effects (a grant or renew applied at local time `now` lives until
//! `now + ttl`); only the Raft leader asks it which leases are overdue. Time is an input: callers
//! pass milliseconds of a monotonic clock, so the lessor is deterministic under test.
//!
//! Deadlines are ordered in a `BTreeSet`, so refresh, removal and finding the next overdue lease are
//! O(log n); promotion rebuilds the index once, in O(n).

use std::collections::{BTreeMap, BTreeSet};

use crate::command::ExpiredLease;
use crate::outcome::LeaseEffect;
use crate::types::{DurationMs, InstantMs, LeaseId, Revision};

/// Default sustained expiry rate, in leases per second.
pub const DEFAULT_REVOKE_RATE_PER_S: u32 = 10_000;
/// Default number of expiries that may go out at once after a quiet period.
pub const DEFAULT_REVOKE_BURST: u32 = 10_000;
/// Default wait before a lease whose expiry was proposed is proposed again (the proposal may have
/// been lost in a leader change).
pub const DEFAULT_RETRY_AFTER: DurationMs = DurationMs::new(1_000);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LessorConfig {
    /// Sustained expiry rate, so a burst of expiring leases cannot crowd out other requests.
    pub revoke_rate_per_s: u32,
    /// Expiries allowed at once after a quiet period.
    pub revoke_burst: u32,
    /// How long an overdue lease handed out by [`Lessor::expired`] is held back before it is
    /// handed out again.
    pub retry_after: DurationMs,
}

impl Default for LessorConfig {
    fn default() -> Self {
        LessorConfig {
            revoke_rate_per_s: DEFAULT_REVOKE_RATE_PER_S,
            revoke_burst: DEFAULT_REVOKE_BURST,
            retry_after: DEFAULT_RETRY_AFTER,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tracked {
    deadline: InstantMs,
    renewed_revision: Revision,
}

/// A token bucket in thousandths of a token, so refill needs no floating point.
#[derive(Clone, Debug)]
struct Bucket {
    milli_tokens: u64,
    refilled_at: InstantMs,
}

#[derive(Debug)]
pub struct Lessor {
    config: LessorConfig,
    leases: BTreeMap<LeaseId, Tracked>,
    by_deadline: BTreeSet<(InstantMs, LeaseId)>,
    /// The Raft term this lessor was promoted in; `None` while it expires nothing. The one record
    /// of "this node's lessor is primary": the server's expiry loop reads it, not a copy.
    primary_term: Option<u64>,
    bucket: Bucket,
}

impl Lessor {
    pub fn new(config: LessorConfig) -> Self {
        let milli_tokens = u64::from(config.revoke_burst) * 1_000;
        Lessor {
            config,
            leases: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
            primary_term: None,
            bucket: Bucket {
                milli_tokens,
                refilled_at: InstantMs::new(0),
            },
        }
    }

    /// Records what an applied command did to leases, at local time `now`.
    pub fn observe(&mut self, now: InstantMs, effect: &LeaseEffect) {
        match *effect {
            LeaseEffect::Refreshed {
                id,
                ttl_ms,
                renewed_revision,
            } => self.refresh(now, id, ttl_ms, renewed_revision),
            LeaseEffect::Revoked { id, .. } => self.remove(id),
        }
    }

    /// The lease lives until `now + ttl`.
    pub fn refresh(
        &mut self,
        now: InstantMs,
        id: LeaseId,
        ttl: DurationMs,
        renewed_revision: Revision,
    ) {
        self.set(
            id,
            Tracked {
                deadline: now.after(ttl),
                renewed_revision,
            },
        );
    }

    pub fn remove(&mut self, id: LeaseId) {
        if let Some(old) = self.leases.remove(&id) {
            self.by_deadline.remove(&(old.deadline, id));
        }
    }

    /// Replaces the table after the state was replaced wholesale (a snapshot installed, or loaded
    /// at restart). A lease this lessor already tracks at the same `renewed_revision` keeps its
    /// deadline: nothing renewed it since, so the deadline is still exact. Every other lease (new
    /// here, or renewed at a revision this node never applied) gets a full TTL from `now`, the
    /// conservative choice when its last renewal time is unknown. Leases not in `leases` are gone.
    pub fn reset(
        &mut self,
        now: InstantMs,
        leases: impl IntoIterator<Item = (LeaseId, DurationMs, Revision)>,
    ) {
        let known = std::mem::take(&mut self.leases);
        self.by_deadline.clear();
        for (id, ttl_ms, renewed_revision) in leases {
            match known.get(&id) {
                Some(tracked) if tracked.renewed_revision == renewed_revision => {
                    self.set(id, *tracked)
                }
                _ => self.refresh(now, id, ttl_ms, renewed_revision),
            }
        }
    }

    /// Called when this node became Raft leader of `term` and has applied everything committed
    /// before it: every deadline becomes `max(deadline, now) + extend` (never shorter), and
    /// expiry starts. `extend` is one election timeout: the time a previous leader may still
    /// have been acknowledging renewals this node has not yet seen applied.
    pub fn promote(&mut self, term: u64, now: InstantMs, extend: DurationMs) {
        for tracked in self.leases.values_mut() {
            tracked.deadline = tracked.deadline.max(now).after(extend);
        }
        self.by_deadline = self
            .leases
            .iter()
            .map(|(id, t)| (t.deadline, *id))
            .collect();
        self.bucket = Bucket {
            milli_tokens: u64::from(self.config.revoke_burst) * 1_000,
            refilled_at: now,
        };
        self.primary_term = Some(term);
    }

    /// Called the moment this node stops being leader: it expires nothing from now on.
    pub fn demote(&mut self) {
        self.primary_term = None;
    }

    /// The term this lessor is primary in, if it is.
    pub fn primary_term(&self) -> Option<u64> {
        self.primary_term
    }

    pub fn is_primary(&self) -> bool {
        self.primary_term.is_some()
    }

    /// Up to `max_batch` overdue leases (earliest deadline first), within the revoke rate; empty
    /// unless this node is primary. Each lease returned is held back for `retry_after`, so a
    /// lease whose expiry is in flight is not proposed twice; if the expiry is lost, it comes back.
    pub fn expired(&mut self, now: InstantMs, max_batch: usize) -> Vec<ExpiredLease> {
        if self.primary_term.is_none() {
            return Vec::new();
        }
        self.refill(now);
        let allowed = (self.bucket.milli_tokens / 1_000).min(max_batch as u64) as usize;
        let due: Vec<(InstantMs, LeaseId)> = self
            .by_deadline
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .take(allowed)
            .copied()
            .collect();
        self.bucket.milli_tokens -= due.len() as u64 * 1_000;
        let retry_at = now.after(self.config.retry_after);
        due.into_iter()
            .filter_map(|(_, id)| {
                let tracked = *self.leases.get(&id)?;
                self.set(
                    id,
                    Tracked {
                        deadline: retry_at,
                        ..tracked
                    },
                );
                Some(ExpiredLease {
                    id,
                    observed_renewed_revision: tracked.renewed_revision,
                })
            })
            .collect()
    }

    /// The earliest deadline, to know how long the expiry loop may sleep.
    pub fn next_deadline(&self) -> Option<InstantMs> {
        self.by_deadline.first().map(|(deadline, _)| *deadline)
    }

    /// This node's deadline for a lease.
    pub fn deadline(&self, id: LeaseId) -> Option<InstantMs> {
        self.leases.get(&id).map(|t| t.deadline)
    }

    /// Time left until this node considers the lease overdue (zero if already overdue).
    pub fn remaining(&self, now: InstantMs, id: LeaseId) -> Option<DurationMs> {
        self.deadline(id).map(|d| d.since(now))
    }

    pub fn len(&self) -> usize {
        self.leases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    fn set(&mut self, id: LeaseId, tracked: Tracked) {
        if let Some(old) = self.leases.insert(id, tracked) {
            self.by_deadline.remove(&(old.deadline, id));
        }
        self.by_deadline.insert((tracked.deadline, id));
    }

    fn refill(&mut self, now: InstantMs) {
        let elapsed_ms = now.since(self.bucket.refilled_at).get();
        let cap = u64::from(self.config.revoke_burst) * 1_000;
        self.bucket.milli_tokens = self
            .bucket
            .milli_tokens
            .saturating_add(elapsed_ms.saturating_mul(u64::from(self.config.revoke_rate_per_s)))
            .min(cap);
        self.bucket.refilled_at = self.bucket.refilled_at.max(now);
    }
}
