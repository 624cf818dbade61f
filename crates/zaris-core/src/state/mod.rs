//! The replicated state: keys, leases, locks and the de-duplication table, and `apply`.
//!
//! Everything is kept in ordered maps so that iteration (and so every effect list, every snapshot
//! byte and the digest) is the same on every node that applied the same log.

mod dedup;
mod epoch;
mod kv;
mod lease;
mod lock;
pub(crate) mod persistent;
mod size;
mod txn;

pub use epoch::MAX_NAMED_EPOCHS;
pub use kv::{Keys, MAX_RANGE_PAGE_BYTES};
pub use txn::{MAX_TXN_READ_BYTES, MAX_TXN_READ_KEYS};

use std::collections::{BTreeSet, VecDeque};

use imbl::{OrdMap, OrdSet};
use serde::{Deserialize, Serialize};

use crate::auth::{AuthError, AuthState, Caller, LeaseAccess, LeaseUse, Need};
use crate::command::{Command, Request, TxnOp};
use crate::limits::Limits;
use crate::outcome::{Applied, Effects, Outcome, Rejection, Response};
use crate::types::{DurationMs, FencingToken, KeySelector, KeyValue, LeaseId, Revision};

pub use dedup::{
    Dedup, ENTRY_OVERHEAD_BYTES as DEDUP_ENTRY_OVERHEAD_BYTES, Remembered, response_bytes,
};

/// A stored value; the key is the map key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stored {
    #[serde(with = "crate::codec::bytes")]
    value: Vec<u8>,
    create_revision: Revision,
    mod_revision: Revision,
    version: u64,
    lease: LeaseId,
}

impl Stored {
    fn to_kv(&self, key: &[u8]) -> KeyValue {
        KeyValue {
            key: key.to_vec(),
            value: self.value.clone(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            lease: self.lease,
        }
    }
}

/// A live lease. Its bound keys live in [`State::lease_keys`] rather than here: a per-lease set would
/// allocate a tree node per lease, which a million single-key leases cannot afford.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Lease {
    ttl_ms: DurationMs,
    granted_revision: Revision,
    renewed_revision: Revision,
    key_count: u32,
    /// Locks this lease holds.
    holding: BTreeSet<String>,
    /// Locks this lease is queued for.
    waiting: BTreeSet<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Holder {
    lease: LeaseId,
    token: FencingToken,
}

/// A lock exists while it has a holder; waiters queue behind the holder (never without one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Lock {
    holder: Holder,
    waiters: VecDeque<LeaseId>,
}

/// What introspection reports about a lease. Remaining TTL is the server's business: the state
/// machine knows no time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseInfo {
    pub id: LeaseId,
    pub ttl_ms: DurationMs,
    pub granted_revision: Revision,
    pub renewed_revision: Revision,
    pub key_count: u32,
    /// Bound keys, only when asked for.
    pub keys: Vec<Vec<u8>>,
    pub locks_held: Vec<String>,
    pub locks_waiting: Vec<String>,
    /// The user that granted the lease, when a known user did.
    pub owner: Option<String>,
}

/// What introspection reports about a lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    pub name: String,
    pub holder: LeaseId,
    pub token: FencingToken,
    pub waiters: Vec<LeaseId>,
}

/// What introspection reports of `lock`, listing its first `max_waiters` waiters.
fn lock_info(name: &str, lock: &Lock, max_waiters: usize) -> LockInfo {
    LockInfo {
        name: name.to_owned(),
        holder: lock.holder.lease,
        token: lock.holder.token,
        waiters: lock.waiters.iter().take(max_waiters).copied().collect(),
    }
}

/// The result of a range read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeResult {
    pub kvs: Vec<KeyValue>,
    /// More keys matched than `limit` allowed.
    pub more: bool,
    /// How many keys matched in all.
    pub count: u64,
}

/// The deterministic Zaris state machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    limits: Limits,
    /// Whether `limits` came from a `SetLimits` entry (else they are the defaults).
    limits_set: bool,
    last_applied: Revision,
    next_lease_id: LeaseId,
    #[serde(with = "crate::state::persistent::ord_map")]
    kv: OrdMap<Vec<u8>, Stored>,
    #[serde(with = "crate::state::persistent::ord_map")]
    leases: OrdMap<LeaseId, Lease>,
    /// Secondary index: which keys each lease binds.
    #[serde(with = "crate::state::persistent::ord_set")]
    lease_keys: OrdSet<(LeaseId, Vec<u8>)>,
    #[serde(with = "crate::state::persistent::ord_map")]
    locks: OrdMap<String, Lock>,
    dedup: Dedup,
    /// Users, roles and lease owners. Last, so that a state encoded before auth existed (format
    /// versions 2 and 3) decodes as itself with an empty `AuthState` appended (`State::restore`).
    auth: AuthState,
    /// For each live lease that had an Unlock (a release, or a withdrawal from a queue) applied,
    /// when it last unlocked each lock (`epoch.rs`): a Lock sent before that is refused
    /// ([`Command::LockAcquire`]'s `sent_after`). Last, so that a state of an older format
    /// decodes as itself with an empty map appended.
    #[serde(with = "crate::state::persistent::ord_map")]
    lock_epochs: OrdMap<LeaseId, epoch::LockEpochs>,
    /// What the quota measures (`size.rs`). Derived, not state: counted again on restore.
    #[serde(skip)]
    footprint: size::Footprint,
    /// Deliberate bugs (none unless built with `fault-injection`). Configuration, not state:
    /// never in a snapshot or the digest, so whoever restores a state sets them again
    /// ([`State::set_faults`]).
    #[serde(skip)]
    faults: crate::faults::Faults,
}

impl Default for State {
    fn default() -> Self {
        State::new(Limits::default())
    }
}

impl State {
    pub fn new(limits: Limits) -> Self {
        let mut state = State {
            limits,
            limits_set: false,
            last_applied: Revision::ZERO,
            next_lease_id: LeaseId::new(1),
            kv: OrdMap::new(),
            leases: OrdMap::new(),
            lease_keys: OrdSet::new(),
            locks: OrdMap::new(),
            dedup: Dedup::default(),
            auth: AuthState::default(),
            lock_epochs: OrdMap::new(),
            footprint: size::Footprint::default(),
            faults: crate::faults::Faults::default(),
        };
        state.recount_footprint();
        state
    }

    /// Completes a decoded state: counts its footprint, and gives a state from before the quota
    /// existed (`legacy`) a quota with room to grow: the default, or a quarter more than the
    /// state takes where that is larger (at most `MAX_STATE_BYTES`; a larger state fails the
    /// invariants).
    pub(crate) fn restored(&mut self, legacy: bool) {
        self.recount_footprint();
        if legacy {
            let roomy = self
                .footprint_bytes()
                .saturating_add(self.footprint_bytes() / 4);
            self.limits.max_state_bytes = roomy.clamp(
                crate::limits::DEFAULT_MAX_STATE_BYTES,
                crate::limits::MAX_STATE_BYTES,
            );
        }
    }

    /// Switches deliberate bugs on or off (only `fault-injection` builds have any). Every replica
    /// of a cluster must get the same faults.
    pub fn set_faults(&mut self, faults: crate::faults::Faults) {
        self.faults = faults;
    }

    pub fn faults(&self) -> crate::faults::Faults {
        self.faults
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether the limits were fixed by a replicated `SetLimits` entry.
    pub fn limits_set(&self) -> bool {
        self.limits_set
    }

    /// The index of the last applied entry: the current revision.
    pub fn last_applied(&self) -> Revision {
        self.last_applied
    }

    /// Applies one request from the log entry at `revision`.
    ///
    /// Entries at or below the last applied index are ignored, so replaying a log suffix after a
    /// restart is harmless. A request with a remembered id returns its first response unchanged.
    pub fn apply(&mut self, revision: Revision, request: &Request) -> Applied {
        if revision <= self.last_applied {
            return Applied {
                revision,
                response: Ok(Outcome::Ignored),
                effects: Effects::default(),
            };
        }
        self.last_applied = revision;
        if let Command::Batch(requests) = &request.command {
            return self.apply_batch(revision, request, requests);
        }
        let (response, effects) = self.apply_one(revision, request);
        Applied {
            revision,
            response,
            effects,
        }
    }

    /// Applies a [`Command::Batch`]: its requests one after another at the one `revision`, each
    /// answered on its own (one's rejection leaves the others applied), their effects in order.
    /// A malformed batch changes nothing and is rejected whole.
    fn apply_batch(
        &mut self,
        revision: Revision,
        batch: &Request,
        requests: &[Request],
    ) -> Applied {
        if let Err(rejection) = batch.validate(&self.limits) {
            return Applied {
                revision,
                response: Err(rejection),
                effects: Effects::default(),
            };
        }
        let mut effects = Effects::default();
        let responses = requests
            .iter()
            .map(|request| {
                let (response, more) = self.apply_one(revision, request);
                effects.append(more);
                response
            })
            .collect();
        Applied {
            revision,
            response: Ok(Outcome::Batch(responses)),
            effects,
        }
    }

    /// One request at `revision` (not a batch): answered from the de-duplication table if its id
    /// is remembered, else validated and executed, and its id remembered.
    fn apply_one(&mut self, revision: Revision, request: &Request) -> (Response, Effects) {
        if let Some(id) = request.request_id
            && let Some(response) = self.dedup.answer(&id)
        {
            return (response, Effects::default());
        }
        let mut effects = Effects::default();
        let response = request
            .validate(&self.limits)
            .and_then(|()| self.execute(revision, &request.command, &mut effects));
        debug_assert!(
            response.is_ok() || effects.is_empty(),
            "a rejected command must not change anything"
        );
        if let Some(id) = request.request_id {
            self.dedup.insert(
                id,
                revision,
                response.clone(),
                self.limits.dedup_capacity as usize,
                self.limits.dedup_max_bytes,
            );
        }
        (response, effects)
    }

    /// Advances the applied index for a log entry that carries no command (a Raft blank or a
    /// membership entry), so revisions stay equal to log indexes.
    pub fn apply_noop(&mut self, revision: Revision) {
        self.last_applied = self.last_applied.max(revision);
    }

    /// Moves the revision `by` and the next server-chosen lease id `by` × [`MAX_BATCH_REQUESTS`]
    /// ahead, for a cluster restored from a backup of a cluster that went on writing after it:
    /// each of those entries took a revision and granted at most [`MAX_BATCH_REQUESTS`]
    /// server-chosen lease ids (a batch of grants), so skipping at least as many revisions as
    /// were written keeps fencing tokens (revisions) increasing and server-chosen lease ids
    /// unused across the two clusters. Leaves every key, lease and lock as it was.
    pub fn skip_ahead(&mut self, by: u64) {
        self.last_applied = Revision::new(self.last_applied.get().saturating_add(by));
        let ids = by.saturating_mul(crate::command::MAX_BATCH_REQUESTS as u64);
        let next = self.next_lease_id.get().saturating_add(ids);
        self.next_lease_id = LeaseId::new(next.min(LeaseId::MAX.get()));
    }

    fn execute(&mut self, rev: Revision, command: &Command, fx: &mut Effects) -> Response {
        match command {
            Command::Grant { id, ttl_ms } => self.grant(rev, *id, *ttl_ms, fx),
            Command::GrantOwned { id, ttl_ms, owner } => {
                let granted = self.grant(rev, *id, *ttl_ms, fx)?;
                if let Outcome::Granted { id, .. } = &granted {
                    self.auth.set_lease_owner(*id, owner);
                }
                Ok(granted)
            }
            Command::GrantBound {
                id,
                ttl_ms,
                owner,
                keys,
            } => {
                // Everything that could refuse a key is checked before the grant, so a refusal
                // leaves nothing behind (the keys are distinct and within the per-lease bound:
                // `Request::validate`). The grant's own refusals come first, as for a plain
                // grant: a used id is ID_IN_USE even when the quota is also full.
                let id = self.grantable_id(*id)?;
                let growth = keys.iter().fold(size::LEASE_BYTES, |sum, k| {
                    sum.saturating_add(self.put_growth(&k.key, &k.value))
                });
                self.check_room(growth)?;
                let granted = self.create_lease(rev, id, *ttl_ms, fx);
                if let Some(owner) = owner {
                    self.auth.set_lease_owner(id, owner);
                }
                for bound in keys {
                    self.put(rev, &bound.key, &bound.value, id, fx);
                }
                Ok(granted)
            }
            Command::Renew { ids } => Ok(self.renew(rev, ids, fx)),
            Command::Revoke { id } => self.revoke(rev, *id, fx),
            Command::Expire { leases } => Ok(self.expire(rev, leases, fx)),
            Command::Put {
                key,
                value,
                lease,
                guard,
                prev_kv,
            } => {
                self.check_guard(guard.as_ref())?;
                self.check_can_bind(*lease, std::iter::once(key.as_slice()))?;
                self.check_room(self.put_growth(key, value))?;
                let prev = self.put(rev, key, value, *lease, fx);
                Ok(Outcome::Put {
                    prev: prev.filter(|_| *prev_kv),
                })
            }
            Command::Delete {
                selector,
                guard,
                prev_kv,
            } => {
                self.check_guard(guard.as_ref())?;
                let prev = self.delete(rev, selector, fx);
                Ok(Outcome::Deleted {
                    deleted: prev.len() as u64,
                    prev: if *prev_kv { prev } else { Vec::new() },
                })
            }
            Command::Txn(txn) => self.txn(rev, txn, fx),
            Command::LockAcquire {
                name,
                lease,
                wait,
                sent_after,
            } => self.lock_acquire(rev, name, *lease, *wait, *sent_after, fx),
            Command::LockRelease { name, lease, token } => {
                self.lock_release(rev, name, *lease, *token, fx)
            }
            Command::LockCancel { name, lease } => Ok(self.lock_cancel(rev, name, *lease)),
            Command::SetLimits(limits) => {
                // Bounds apply to what is admitted from now on; what exists stays (a lock may keep
                // more waiters than a lowered limit allows until they leave). The quota is the
                // exception: a snapshot is held to what the limits allow, so a state must never
                // be larger than its quota.
                if self.footprint_bytes() > limits.max_state_bytes {
                    return Err(Rejection::InvalidArgument(format!(
                        "max_state_bytes {} is below the state's current size, {} bytes",
                        limits.max_state_bytes,
                        self.footprint_bytes()
                    )));
                }
                self.limits = limits.clone();
                self.limits_set = true;
                self.dedup
                    .shrink_to(limits.dedup_capacity as usize, limits.dedup_max_bytes);
                Ok(Outcome::LimitsSet)
            }
            Command::Batch(_) => Err(Rejection::InvalidArgument(
                "a batch cannot be nested in another".into(),
            )),
            Command::Auth(change) => {
                // Applied, measured, and undone if it grew the directory past the quota: the
                // exact growth of a change depends on what it replaces. Only users and roles
                // change here (lease owners only on a delete, which never grows).
                let saved = change.may_grow().then(|| self.auth.directory());
                self.auth.apply(change).map_err(Rejection::AuthRefused)?;
                let after = self.auth.directory_bytes();
                let growth = after.saturating_sub(self.footprint.directory);
                if let Err(rejection) = self.check_room(growth) {
                    if let Some(saved) = saved {
                        self.auth.restore_directory(saved);
                    }
                    return Err(rejection);
                }
                self.footprint.directory = after;
                Ok(Outcome::AuthChanged)
            }
        }
    }

    // ---- access control ----------------------------------------------------------------------

    pub fn auth(&self) -> &AuthState {
        &self.auth
    }

    /// Checks that `caller` may have `command` proposed, against this state's users, roles and
    /// lease owners. Returns the leases the command uses that are not live here: the caller must
    /// look again after a linearizable read barrier and answer "lease not found" for any still
    /// missing rather than propose (`AuthState::check_lease`).
    pub fn authorize(&self, caller: &Caller, command: &Command) -> Result<Vec<LeaseId>, AuthError> {
        let auth = &self.auth;
        // Nothing to check (and nothing to copy): auth is off, or an admin calls.
        if !auth.enabled() || caller.admin {
            return Ok(Vec::new());
        }
        let mut unknown = Vec::new();
        let mut lease =
            |id: LeaseId, usage: LeaseUse| self.check_lease_use(caller, id, usage, &mut unknown);
        let guard = |guard: Option<&crate::types::Guard>| match guard {
            Some(guard) => auth.check_lock(caller, &guard.lock, Need::Read),
            None => Ok(()),
        };
        match command {
            Command::Grant { .. } | Command::GrantOwned { .. } => {}
            Command::GrantBound { keys, .. } => {
                for bound in keys {
                    auth.check_keys(caller, &KeySelector::Key(bound.key.clone()), Need::Write)?;
                }
            }
            Command::Renew { ids } => {
                for id in ids {
                    lease(*id, LeaseUse::Renew)?;
                }
            }
            Command::Revoke { id } => lease(*id, LeaseUse::Revoke)?,
            Command::Expire { .. } => auth.check_admin(caller, "expire leases")?,
            // Built by the leader from requests it authorized one by one; never a client's.
            Command::Batch(_) => auth.check_admin(caller, "propose a batch")?,
            Command::SetLimits(_) => auth.check_admin(caller, "change the cluster's limits")?,
            Command::Auth(_) => auth.check_admin(caller, "change users or roles")?,
            Command::Put {
                key,
                lease: id,
                guard: g,
                prev_kv,
                ..
            } => {
                let selector = KeySelector::Key(key.clone());
                auth.check_keys(caller, &selector, Need::Write)?;
                // The answer carries the value it replaced: reading it needs read too.
                if *prev_kv {
                    auth.check_keys(caller, &selector, Need::Read)?;
                }
                guard(g.as_ref())?;
                lease(*id, LeaseUse::Bind)?;
            }
            Command::Delete {
                selector,
                guard: g,
                prev_kv,
                ..
            } => {
                auth.check_keys(caller, selector, Need::Write)?;
                // The answer carries the pairs it deleted: reading them needs read too.
                if *prev_kv {
                    auth.check_keys(caller, selector, Need::Read)?;
                }
                guard(g.as_ref())?;
            }
            Command::Txn(txn) => {
                for compare in &txn.compares {
                    auth.check_keys(caller, &KeySelector::Key(compare.key.clone()), Need::Read)?;
                }
                for op in txn.success.iter().chain(&txn.failure) {
                    match op {
                        TxnOp::Put { key, lease: id, .. } => {
                            auth.check_keys(caller, &KeySelector::Key(key.clone()), Need::Write)?;
                            lease(*id, LeaseUse::Bind)?;
                        }
                        TxnOp::Delete { selector } => {
                            auth.check_keys(caller, selector, Need::Write)?
                        }
                        TxnOp::Get { selector, .. } => {
                            auth.check_keys(caller, selector, Need::Read)?
                        }
                    }
                }
                guard(txn.guard.as_ref())?;
            }
            Command::LockAcquire {
                name, lease: id, ..
            }
            | Command::LockRelease {
                name, lease: id, ..
            }
            | Command::LockCancel { name, lease: id } => {
                auth.check_lock(caller, name, Need::Write)?;
                lease(*id, LeaseUse::Lock)?;
            }
        }
        unknown.sort_unstable();
        unknown.dedup();
        Ok(unknown)
    }

    /// [`State::authorize`] of `Renew { ids }`, without building the command (the keepalive
    /// path checks every request of a stream).
    pub fn authorize_renewal(
        &self,
        caller: &Caller,
        ids: &[LeaseId],
    ) -> Result<Vec<LeaseId>, AuthError> {
        let mut unknown = Vec::new();
        if !self.auth.enabled() || caller.admin {
            return Ok(unknown);
        }
        for &id in ids {
            self.check_lease_use(caller, id, LeaseUse::Renew, &mut unknown)?;
        }
        Ok(unknown)
    }

    /// Whether `caller` may use lease `id` (none: always); a lease not live here goes to
    /// `unknown`.
    fn check_lease_use(
        &self,
        caller: &Caller,
        id: LeaseId,
        usage: LeaseUse,
        unknown: &mut Vec<LeaseId>,
    ) -> Result<(), AuthError> {
        if id == LeaseId::NONE {
            return Ok(());
        }
        let exists = self.leases.contains_key(&id);
        if self.auth.check_lease(caller, id, exists, usage)? == LeaseAccess::Unknown {
            unknown.push(id);
        }
        Ok(())
    }

    // ---- reads -------------------------------------------------------------------------------

    pub fn get(&self, key: &[u8]) -> Option<KeyValue> {
        self.kv.get(key).map(|s| s.to_kv(key))
    }

    /// Keys matching `selector` in key order; `limit == 0` means no limit. A caller holding a
    /// lock on the state reads apart from it instead ([`State::keys`]).
    pub fn range(&self, selector: &KeySelector, limit: u32) -> RangeResult {
        self.keys().range(selector, limit)
    }

    /// A lease's metadata, with its bound keys when `with_keys` is set.
    pub fn lease(&self, id: LeaseId, with_keys: bool) -> Option<LeaseInfo> {
        let lease = self.leases.get(&id)?;
        let keys = if with_keys {
            self.keys_of(id).map(<[u8]>::to_vec).collect()
        } else {
            Vec::new()
        };
        Some(LeaseInfo {
            id,
            ttl_ms: lease.ttl_ms,
            granted_revision: lease.granted_revision,
            renewed_revision: lease.renewed_revision,
            key_count: lease.key_count,
            keys,
            locks_held: lease.holding.iter().cloned().collect(),
            locks_waiting: lease.waiting.iter().cloned().collect(),
            owner: self.auth.lease_owner(id).map(str::to_string),
        })
    }

    /// Up to `limit` leases with ids above `after`, in id order (without their keys).
    pub fn leases(&self, after: LeaseId, limit: usize) -> Vec<LeaseInfo> {
        self.leases
            .range(after.next()..)
            .take(limit)
            .filter_map(|(id, _)| self.lease(*id, false))
            .collect()
    }

    /// Like [`State::leases`], but only leases `keep` accepts count towards `limit`.
    pub fn leases_where(
        &self,
        after: LeaseId,
        limit: usize,
        keep: impl Fn(LeaseId) -> bool,
    ) -> Vec<LeaseInfo> {
        self.leases
            .range(after.next()..)
            .filter(|(id, _)| keep(**id))
            .take(limit)
            .filter_map(|(id, _)| self.lease(*id, false))
            .collect()
    }

    pub fn lease_count(&self) -> usize {
        self.leases.len()
    }

    pub fn key_count(&self) -> usize {
        self.kv.len()
    }

    /// `(id, ttl_ms, renewed_revision)` of every live lease, for rebuilding a lessor after a
    /// snapshot was installed or the node restarted.
    pub fn lease_ttls(&self) -> impl Iterator<Item = (LeaseId, DurationMs, Revision)> + '_ {
        self.leases
            .iter()
            .map(|(id, l)| (*id, l.ttl_ms, l.renewed_revision))
    }

    pub fn lock(&self, name: &str) -> Option<LockInfo> {
        self.locks
            .get(name)
            .map(|lock| lock_info(name, lock, usize::MAX))
    }

    pub fn locks(&self) -> Vec<LockInfo> {
        self.locks.keys().filter_map(|n| self.lock(n)).collect()
    }

    /// Up to `limit` held locks named after `after` and starting with `prefix`, ascending, that
    /// `include` accepts; each lists at most `max_waiters` of its waiters. Visits the locks
    /// after `after` in order and stops at the first name past `prefix`.
    pub fn locks_where(
        &self,
        after: &str,
        prefix: &str,
        limit: usize,
        max_waiters: usize,
        include: impl Fn(&str) -> bool,
    ) -> Vec<(LockInfo, usize)> {
        use std::ops::Bound;
        let start = if after.is_empty() || after < prefix {
            Bound::Included(prefix.to_owned())
        } else {
            Bound::Excluded(after.to_owned())
        };
        self.locks
            .range((start, Bound::Unbounded))
            .take_while(|(name, _)| name.starts_with(prefix))
            .filter(|(name, _)| include(name))
            .take(limit)
            .map(|(name, lock)| (lock_info(name, lock, max_waiters), lock.waiters.len()))
            .collect()
    }

    /// The remembered response for a request id, if it is still in the de-duplication table.
    pub fn remembered(&self, id: &crate::types::RequestId) -> Option<&Response> {
        self.dedup.get(id)
    }

    /// Whether the de-duplication table answers a request with this id without applying it: with
    /// its remembered response, with the revision it applied at, or with a refusal because it may
    /// have applied and been forgotten.
    pub fn answered_without_applying(&self, id: &crate::types::RequestId) -> bool {
        self.dedup.answer(id).is_some()
    }

    /// The de-duplication table's bounds at work: entries, charged bytes, and the highest
    /// revision whose request id may have been forgotten.
    pub fn dedup_usage(&self) -> (usize, u64, Revision) {
        (
            self.dedup.len(),
            self.dedup.bytes(),
            self.dedup.forgotten_through(),
        )
    }

    fn check_guard(&self, guard: Option<&crate::types::Guard>) -> Result<(), Rejection> {
        let Some(guard) = guard else { return Ok(()) };
        let current = self.locks.get(&guard.lock).map(|l| l.holder.token);
        if current == Some(guard.token) {
            Ok(())
        } else {
            Err(Rejection::GuardFailed {
                lock: guard.lock.clone(),
                token: guard.token,
                current,
            })
        }
    }

    // ---- invariants --------------------------------------------------------------------------

    /// Checks every structural invariant; tests call it after each step. Returns the first broken
    /// one, described.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.footprint_bytes() > self.limits.max_state_bytes {
            return Err(format!(
                "the state takes {} bytes, above its quota of {}",
                self.footprint_bytes(),
                self.limits.max_state_bytes
            ));
        }
        // Each check below is one ordered pass or one lookup per entry, no more: at a million
        // leases this runs on every restart and snapshot install, before the node serves.
        let mut bound_keys = 0usize;
        for (key, stored) in &self.kv {
            if stored.version == 0 || stored.create_revision > stored.mod_revision {
                return Err(format!("key {key:?} has inconsistent metadata {stored:?}"));
            }
            if stored.mod_revision > self.last_applied {
                return Err(format!("key {key:?} modified in the future"));
            }
            if stored.lease != LeaseId::NONE {
                bound_keys += 1;
            }
        }
        // Every index entry names a key bound to that lease, and there are as many entries as
        // bound keys. The entries are distinct and a key has one lease, so no two entries name
        // the same key: the index is exactly the keys' bindings.
        for (lease, key) in &self.lease_keys {
            if self.kv.get(key).map(|s| s.lease) != Some(*lease) {
                return Err(format!("index says {key:?} is bound to {lease}, it is not"));
            }
        }
        if self.lease_keys.len() != bound_keys {
            return Err(format!(
                "the lease index holds {} entries for {bound_keys} bound keys",
                self.lease_keys.len()
            ));
        }
        // The index is ordered by lease and so are the leases: one merged pass counts each
        // lease's keys and finds keys bound to a lease that does not exist.
        let mut index = self.lease_keys.iter().peekable();
        let missing = |(lease, key): &(LeaseId, Vec<u8>)| {
            format!("key {key:?} bound to missing lease {lease}")
        };
        for (id, lease) in &self.leases {
            if *id == LeaseId::NONE || *id >= self.next_lease_id {
                return Err(format!(
                    "invalid lease id {id} (next free id {})",
                    self.next_lease_id
                ));
            }
            let mut keys = 0u32;
            while let Some(entry) = index.next_if(|(bound, _)| bound <= id) {
                if entry.0 < *id {
                    return Err(missing(entry));
                }
                keys = keys.saturating_add(1);
            }
            if lease.key_count != keys {
                return Err(format!(
                    "lease {id} counts {} keys, has {keys}",
                    lease.key_count
                ));
            }
            if lease.renewed_revision < lease.granted_revision {
                return Err(format!("lease {id} renewed before it was granted"));
            }
            for name in &lease.holding {
                if self.locks.get(name).map(|l| l.holder.lease) != Some(*id) {
                    return Err(format!("lease {id} thinks it holds {name:?}"));
                }
            }
            for name in &lease.waiting {
                if !self.locks.get(name).is_some_and(|l| l.waiters.contains(id)) {
                    return Err(format!("lease {id} thinks it waits for {name:?}"));
                }
            }
        }
        if let Some(entry) = index.next() {
            return Err(missing(entry));
        }
        for (name, lock) in &self.locks {
            let holder = self
                .leases
                .get(&lock.holder.lease)
                .ok_or_else(|| format!("lock {name:?} held by missing lease"))?;
            if !holder.holding.contains(name) {
                return Err(format!("lock {name:?} holder does not know it"));
            }
            if lock.holder.token > FencingToken::acquired_at(self.last_applied) {
                return Err(format!("lock {name:?} has a token from the future"));
            }
            let mut seen = BTreeSet::new();
            for waiter in &lock.waiters {
                if *waiter == lock.holder.lease || !seen.insert(*waiter) {
                    return Err(format!("lock {name:?} has a duplicate waiter {waiter}"));
                }
                if !self
                    .leases
                    .get(waiter)
                    .is_some_and(|l| l.waiting.contains(name))
                {
                    return Err(format!("lock {name:?} waiter {waiter} is not live"));
                }
            }
        }
        for (id, epochs) in &self.lock_epochs {
            let lease = self
                .leases
                .get(id)
                .ok_or_else(|| format!("lock epochs of lease {id}, which is not live"))?;
            epochs
                .check(lease.granted_revision, self.last_applied)
                .map_err(|broken| format!("lease {id}: {broken}"))?;
        }
        for (id, owner) in self.auth.lease_owners() {
            if !self.leases.contains_key(id) {
                return Err(format!("lease {id} (owner {owner:?}) is not live"));
            }
        }
        self.dedup.check(
            self.limits.dedup_capacity as usize,
            self.limits.dedup_max_bytes,
            self.last_applied,
        )
    }
}

#[cfg(test)]
mod invariant_tests {
    use super::*;
    use crate::command::{Command, Request};
    use crate::outcome::Outcome;

    /// Two leases with a key each, one key unbound.
    fn state() -> (State, [LeaseId; 2]) {
        let mut state = State::new(Limits::default());
        let mut revision = 0;
        let mut apply = |state: &mut State, command: Command| {
            revision += 1;
            state
                .apply(Revision::new(revision), &Request::new(command))
                .response
        };
        let mut leases = [LeaseId::NONE; 2];
        for lease in &mut leases {
            let grant = Command::Grant {
                id: LeaseId::NONE,
                ttl_ms: DurationMs::new(10_000),
            };
            *lease = match apply(&mut state, grant) {
                Ok(Outcome::Granted { id, .. }) => id,
                other => panic!("grant: {other:?}"),
            };
        }
        for (key, lease) in [("a", leases[0]), ("b", leases[1]), ("c", LeaseId::NONE)] {
            let put = Command::Put {
                key: key.into(),
                value: b"v".to_vec(),
                lease,
                guard: None,
                prev_kv: false,
            };
            let response = apply(&mut state, put);
            assert!(response.is_ok(), "{response:?}");
        }
        state.check_invariants().expect("a consistent state");
        (state, leases)
    }

    /// The restart path's checks are merged passes and counts, not a lookup per direction: each
    /// way the lease index can disagree with the keys is still found.
    #[test]
    fn every_disagreement_between_the_lease_index_and_the_keys_is_found() {
        let broken = |corrupt: &dyn Fn(&mut State, [LeaseId; 2])| {
            let (mut state, leases) = state();
            corrupt(&mut state, leases);
            state.check_invariants().expect_err("a corrupt state")
        };
        // A bound key missing from the index.
        let error = broken(&|s, l| {
            s.lease_keys.remove(&(l[0], b"a".to_vec()));
        });
        assert!(
            error.contains("2 bound keys") || error.contains("counts"),
            "{error}"
        );
        // An index entry for a key that is not bound (or not there).
        broken(&|s, l| {
            s.lease_keys.insert((l[0], b"c".to_vec()));
        });
        broken(&|s, l| {
            s.lease_keys.insert((l[1], b"zz".to_vec()));
        });
        // Compensating errors: a bound key missing, an unbound one indexed under no lease.
        broken(&|s, l| {
            s.lease_keys.remove(&(l[0], b"a".to_vec()));
            s.lease_keys.insert((LeaseId::NONE, b"c".to_vec()));
        });
        // A key and its index entry bound to a lease that does not exist, before, between or
        // after the live ones.
        for missing in [LeaseId::NONE, LeaseId::new(u64::MAX)] {
            let error = broken(&|s, l| {
                s.lease_keys.remove(&(l[0], b"a".to_vec()));
                s.lease_keys.insert((missing, b"a".to_vec()));
                if let Some(stored) = s.kv.get_mut(b"a".as_slice()) {
                    stored.lease = missing;
                }
                if let Some(lease) = s.leases.get_mut(&l[0]) {
                    lease.key_count = 0;
                }
            });
            assert!(
                error.contains("missing lease") || error.contains("bound keys"),
                "{error}"
            );
        }
        // A lease that miscounts its keys.
        let error = broken(&|s, l| {
            if let Some(lease) = s.leases.get_mut(&l[1]) {
                lease.key_count = 2;
            }
        });
        assert!(error.contains("counts 2 keys, has 1"), "{error}");
    }
}
