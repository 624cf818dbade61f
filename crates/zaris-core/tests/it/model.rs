//! Model-based property test: random operation sequences run against the real state machine and a
//! deliberately dumb reference model (flat maps and linear scans), compared after every operation,
//! with the invariants checked after every operation too.
//!
//! A failure prints the seed; rerun it with `ZARIS_SEED=<seed> cargo test -p zaris-core model`.
//! `ZARIS_CASES` sets the number of sequences (default 2,000).

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use zaris_core::{
    BoundKey, CancelOutcome, Command, Compare, CompareOp, CompareTarget, DurationMs, EventKind,
    ExpiredLease, FencingToken, Guard, KeySelector, KeyValue, LeaseId, LeaseInfo, LimitKind,
    Limits, LockEffect, LockInfo, LockOutcome, OpResult, Outcome, Rejection, Request, RequestId,
    Response, Revision, State, Txn, TxnOp,
};

/// Small limits, so that every limit is actually hit by random sequences.
fn limits() -> Limits {
    Limits {
        max_key_bytes: 4,
        max_value_bytes: 3,
        max_lock_name_bytes: 2,
        min_ttl_ms: DurationMs::new(1_000),
        max_ttl_ms: DurationMs::new(60_000),
        max_txn_ops: 4,
        max_batch_ids: 4,
        max_waiters_per_lock: 2,
        max_keys_per_lease: 2,
        max_leases: 5,
        dedup_capacity: 3,
        dedup_max_bytes: zaris_core::limits::MIN_DEDUP_MAX_BYTES,
        // Never hit here (the model knows no quota); `quota_*` tests in state.rs hit it.
        max_state_bytes: zaris_core::limits::MAX_STATE_BYTES,
    }
}

// ---- the reference model -----------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
struct MLease {
    ttl_ms: DurationMs,
    granted: Revision,
    renewed: Revision,
}

#[derive(Clone, Debug, PartialEq)]
struct MLock {
    holder: LeaseId,
    token: FencingToken,
    waiters: Vec<LeaseId>,
}

#[derive(Clone, Debug, Default)]
struct Model {
    limits: Limits,
    last: Revision,
    next_id: LeaseId,
    kv: BTreeMap<Vec<u8>, KeyValue>,
    leases: BTreeMap<LeaseId, MLease>,
    locks: BTreeMap<String, MLock>,
    /// Each live lease's last Unlock (release or withdrawal) of each lock: a Lock of it sent
    /// before that is overtaken. (The model's few lock names never reach the real state's bound
    /// on names remembered per lease.)
    unlocked_at: BTreeMap<(LeaseId, String), Revision>,
    /// `(client_id, seq)`, applied revision, the response (`None`: too large to keep).
    dedup: Vec<((u64, u64), Revision, Option<Response>)>,
    dedup_forgotten_through: Revision,
}

/// What the model says happened to keys, for comparison with the real events.
type Changes = Vec<(EventKind, Vec<u8>, LeaseId)>;

impl Model {
    fn new(limits: Limits) -> Self {
        Model {
            limits,
            next_id: LeaseId::new(1),
            ..Model::default()
        }
    }

    fn apply(&mut self, rev: Revision, request: &Request, changes: &mut Changes) -> Response {
        if rev <= self.last {
            return Ok(Outcome::Ignored);
        }
        self.last = rev;
        if let Command::Batch(requests) = &request.command {
            // The batch's shape is stateless validation, shared with the real thing; each
            // request is then the model's own, at the one revision.
            request.validate(&self.limits)?;
            return Ok(Outcome::Batch(
                requests
                    .iter()
                    .map(|request| self.apply_one(rev, request, changes))
                    .collect(),
            ));
        }
        self.apply_one(rev, request, changes)
    }

    fn apply_one(&mut self, rev: Revision, request: &Request, changes: &mut Changes) -> Response {
        if let Some(id) = request.request_id {
            match self
                .dedup
                .iter()
                .find(|(key, _, _)| *key == (id.client_id, id.seq))
            {
                Some((_, _, Some(response))) => return response.clone(),
                Some((_, applied, None)) => {
                    return Err(Rejection::RequestIdForgotten {
                        forgotten_through: self.dedup_forgotten_through,
                        applied_at: Some(*applied),
                    });
                }
                None if id.seen_revision < self.dedup_forgotten_through => {
                    return Err(Rejection::RequestIdForgotten {
                        forgotten_through: self.dedup_forgotten_through,
                        applied_at: None,
                    });
                }
                None => {}
            }
        }
        // Stateless validation is shared with the real thing (it has its own unit tests); the
        // state-dependent behaviour below is written independently.
        let response = match request.validate(&self.limits) {
            Err(rejection) => Err(rejection),
            Ok(()) => self.execute(rev, &request.command, changes),
        };
        if let Some(id) = request.request_id {
            let kept = (zaris_core::state::response_bytes(&response)
                <= self.limits.dedup_max_bytes / 256)
                .then(|| response.clone());
            self.dedup.push(((id.client_id, id.seq), rev, kept));
            self.shrink_dedup();
        }
        response
    }

    /// Evicts the oldest remembered ids until the table is within both of its bounds.
    fn shrink_dedup(&mut self) {
        let bytes = |dedup: &[((u64, u64), Revision, Option<Response>)]| -> u64 {
            dedup
                .iter()
                .map(|(_, _, r)| {
                    zaris_core::state::DEDUP_ENTRY_OVERHEAD_BYTES
                        + r.as_ref().map_or(0, zaris_core::state::response_bytes)
                })
                .sum()
        };
        while self.dedup.len() > (self.limits.dedup_capacity as usize).max(1)
            || bytes(&self.dedup) > self.limits.dedup_max_bytes
        {
            // A batch's requests share a revision and are forgotten together.
            let (_, evicted, _) = self.dedup.remove(0);
            self.dedup.retain(|(_, at, _)| *at != evicted);
            self.dedup_forgotten_through = self.dedup_forgotten_through.max(evicted);
        }
    }

    fn guard_ok(&self, guard: &Option<Guard>) -> Result<(), Rejection> {
        if let Some(g) = guard {
            let current = self.locks.get(&g.lock).map(|l| l.token);
            if current != Some(g.token) {
                return Err(Rejection::GuardFailed {
                    lock: g.lock.clone(),
                    token: g.token,
                    current,
                });
            }
        }
        Ok(())
    }

    fn bound_count(&self, lease: LeaseId) -> usize {
        self.kv.values().filter(|kv| kv.lease == lease).count()
    }

    fn can_bind(&self, lease: LeaseId, keys: &[Vec<u8>]) -> Result<(), Rejection> {
        if lease.is_none() {
            return Ok(());
        }
        if !self.leases.contains_key(&lease) {
            return Err(Rejection::LeaseNotFound(lease));
        }
        let mut fresh: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|k| self.kv.get(*k).map(|kv| kv.lease) != Some(lease))
            .collect();
        fresh.sort();
        fresh.dedup();
        let total = (self.bound_count(lease) + fresh.len()) as u64;
        let max = self.limits.max_keys_per_lease as u64;
        if total > max {
            return Err(Rejection::LimitExceeded {
                limit: LimitKind::KeysPerLease,
                max,
                actual: total,
            });
        }
        Ok(())
    }

    fn do_put(
        &mut self,
        rev: Revision,
        key: &[u8],
        value: &[u8],
        lease: LeaseId,
        ch: &mut Changes,
    ) -> Option<KeyValue> {
        let prev = self.kv.get(key).cloned();
        let kv = KeyValue {
            key: key.to_vec(),
            value: value.to_vec(),
            create_revision: prev.as_ref().map_or(rev, |p| p.create_revision),
            mod_revision: rev,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
            lease,
        };
        self.kv.insert(key.to_vec(), kv);
        ch.push((EventKind::Put, key.to_vec(), lease));
        prev
    }

    fn do_delete(&mut self, selector: &KeySelector, ch: &mut Changes) -> Vec<KeyValue> {
        let doomed: Vec<Vec<u8>> = self
            .kv
            .keys()
            .filter(|k| selector.contains(k))
            .cloned()
            .collect();
        doomed
            .into_iter()
            .map(|k| {
                ch.push((EventKind::Delete, k.clone(), LeaseId::NONE));
                self.kv.remove(&k).expect("selected key exists")
            })
            .collect()
    }

    fn end(&mut self, rev: Revision, ids: &[LeaseId], kind: EventKind, ch: &mut Changes) -> u64 {
        let mut deleted = 0;
        let mut released = Vec::new();
        for id in ids {
            let doomed: Vec<Vec<u8>> = self
                .kv
                .iter()
                .filter(|(_, kv)| kv.lease == *id)
                .map(|(k, _)| k.clone())
                .collect();
            for k in doomed {
                self.kv.remove(&k);
                ch.push((kind, k, *id));
                deleted += 1;
            }
            self.leases.remove(id);
            self.unlocked_at.retain(|(lease, _), _| lease != id);
            for (name, lock) in self.locks.iter_mut() {
                lock.waiters.retain(|w| w != id);
                if lock.holder == *id {
                    released.push(name.clone());
                }
            }
        }
        released.sort();
        for name in released {
            let lock = self.locks.get_mut(&name).expect("released lock exists");
            if lock.waiters.is_empty() {
                self.locks.remove(&name);
            } else {
                lock.holder = lock.waiters.remove(0);
                lock.token = FencingToken::acquired_at(rev);
            }
        }
        deleted
    }

    fn range(&self, selector: &KeySelector, limit: u32) -> (Vec<KeyValue>, bool) {
        let all: Vec<KeyValue> = self
            .kv
            .values()
            .filter(|kv| selector.contains(&kv.key))
            .cloned()
            .collect();
        let n = if limit == 0 {
            all.len()
        } else {
            all.len().min(limit as usize)
        };
        (all[..n].to_vec(), n < all.len())
    }

    fn grant(&mut self, rev: Revision, id: &LeaseId, ttl_ms: &DurationMs) -> Response {
        if self.leases.len() as u64 >= self.limits.max_leases {
            return Err(Rejection::LimitExceeded {
                limit: LimitKind::Leases,
                max: self.limits.max_leases,
                actual: self.leases.len() as u64 + 1,
            });
        }
        // Ids are never reused: a chosen id must be above every id granted before.
        let id = if id.is_none() {
            self.next_id
        } else if *id < self.next_id {
            return Err(Rejection::LeaseIdUsed {
                id: *id,
                next_free: self.next_id,
            });
        } else {
            *id
        };
        self.next_id = self.next_id.max(id.next());
        self.leases.insert(
            id,
            MLease {
                ttl_ms: *ttl_ms,
                granted: rev,
                renewed: rev,
            },
        );
        Ok(Outcome::Granted {
            id,
            ttl_ms: *ttl_ms,
        })
    }

    fn execute(&mut self, rev: Revision, command: &Command, ch: &mut Changes) -> Response {
        match command {
            Command::Grant { id, ttl_ms } => self.grant(rev, id, ttl_ms),
            Command::GrantBound {
                id, ttl_ms, keys, ..
            } => {
                let granted = self.grant(rev, id, ttl_ms)?;
                if let Outcome::Granted { id, .. } = &granted {
                    for bound in keys {
                        self.do_put(rev, &bound.key, &bound.value, *id, ch);
                    }
                }
                Ok(granted)
            }
            Command::Renew { ids } => {
                let (mut renewed, mut not_found) = (vec![], vec![]);
                for id in ids {
                    match self.leases.get_mut(id) {
                        Some(l) => {
                            l.renewed = rev;
                            renewed.push((*id, l.ttl_ms));
                        }
                        None => not_found.push(*id),
                    }
                }
                Ok(Outcome::Renewed { renewed, not_found })
            }
            Command::Revoke { id } => {
                if !self.leases.contains_key(id) {
                    return Err(Rejection::LeaseNotFound(*id));
                }
                let keys_deleted = self.end(rev, &[*id], EventKind::Revoke, ch);
                Ok(Outcome::Revoked {
                    id: *id,
                    keys_deleted,
                })
            }
            Command::Expire { leases } => {
                let (mut revoked, mut skipped) = (Vec::<LeaseId>::new(), vec![]);
                for e in leases {
                    let due = !revoked.contains(&e.id)
                        && !skipped.contains(&e.id)
                        && self
                            .leases
                            .get(&e.id)
                            .is_some_and(|l| l.renewed <= e.observed_renewed_revision);
                    if due {
                        revoked.push(e.id)
                    } else {
                        skipped.push(e.id)
                    }
                }
                self.end(rev, &revoked, EventKind::Expire, ch);
                Ok(Outcome::Expired { revoked, skipped })
            }
            Command::Put {
                key,
                value,
                lease,
                guard,
                prev_kv,
            } => {
                self.guard_ok(guard)?;
                self.can_bind(*lease, std::slice::from_ref(key))?;
                let prev = self.do_put(rev, key, value, *lease, ch);
                Ok(Outcome::Put {
                    prev: if *prev_kv { prev } else { None },
                })
            }
            Command::Delete {
                selector,
                guard,
                prev_kv,
            } => {
                self.guard_ok(guard)?;
                let prev = self.do_delete(selector, ch);
                Ok(Outcome::Deleted {
                    deleted: prev.len() as u64,
                    prev: if *prev_kv { prev } else { vec![] },
                })
            }
            Command::Txn(txn) => {
                self.guard_ok(&txn.guard)?;
                let succeeded = txn.compares.iter().all(|c| {
                    let kv = self.kv.get(&c.key);
                    match &c.target {
                        CompareTarget::Value(v) => kv.is_some_and(|kv| c.op.holds(&kv.value, v)),
                        CompareTarget::Version(v) => c.op.holds(&kv.map_or(0, |kv| kv.version), v),
                        CompareTarget::CreateRevision(v) => {
                            c.op.holds(&kv.map_or(Revision::ZERO, |kv| kv.create_revision), v)
                        }
                        CompareTarget::ModRevision(v) => {
                            c.op.holds(&kv.map_or(Revision::ZERO, |kv| kv.mod_revision), v)
                        }
                        CompareTarget::Lease(v) => {
                            c.op.holds(&kv.map_or(LeaseId::NONE, |kv| kv.lease), v)
                        }
                    }
                });
                let ops = if succeeded {
                    &txn.success
                } else {
                    &txn.failure
                };
                let mut by_lease: BTreeMap<LeaseId, Vec<Vec<u8>>> = BTreeMap::new();
                for op in ops {
                    if let TxnOp::Put { key, lease, .. } = op
                        && !lease.is_none()
                    {
                        by_lease.entry(*lease).or_default().push(key.clone());
                    }
                }
                for (lease, keys) in &by_lease {
                    self.can_bind(*lease, keys)?;
                }
                let mut results = vec![];
                for op in ops {
                    results.push(match op {
                        TxnOp::Put { key, value, lease } => OpResult::Put {
                            prev: self.do_put(rev, key, value, *lease, ch),
                        },
                        TxnOp::Delete { selector } => OpResult::Deleted {
                            deleted: self.do_delete(selector, ch).len() as u64,
                        },
                        TxnOp::Get { selector, limit } => {
                            let (kvs, more) = self.range(selector, *limit);
                            OpResult::Got { kvs, more }
                        }
                    });
                }
                Ok(Outcome::Txn { succeeded, results })
            }
            Command::LockAcquire {
                name,
                lease,
                wait,
                sent_after,
            } => {
                if !self.leases.contains_key(lease) {
                    return Err(Rejection::LeaseNotFound(*lease));
                }
                let unlocked = self.unlocked_at.get(&(*lease, name.clone()));
                if sent_after.is_some_and(|sent| unlocked.is_some_and(|at| *at > sent)) {
                    return Ok(Outcome::Lock(LockOutcome::Overtaken));
                }
                let max = self.limits.max_waiters_per_lock;
                let Some(lock) = self.locks.get_mut(name) else {
                    self.locks.insert(
                        name.clone(),
                        MLock {
                            holder: *lease,
                            token: FencingToken::acquired_at(rev),
                            waiters: vec![],
                        },
                    );
                    return Ok(Outcome::Lock(LockOutcome::Held {
                        token: FencingToken::acquired_at(rev),
                    }));
                };
                if lock.holder == *lease {
                    return Ok(Outcome::Lock(LockOutcome::Held { token: lock.token }));
                }
                if let Some(i) = lock.waiters.iter().position(|w| w == lease) {
                    return Ok(Outcome::Lock(LockOutcome::Queued {
                        position: i as u32 + 1,
                    }));
                }
                if !wait {
                    return Ok(Outcome::Lock(LockOutcome::Busy {
                        holder: lock.holder,
                        token: lock.token,
                    }));
                }
                if lock.waiters.len() >= max as usize {
                    return Err(Rejection::LimitExceeded {
                        limit: LimitKind::WaitersPerLock,
                        max: max.into(),
                        actual: lock.waiters.len() as u64 + 1,
                    });
                }
                lock.waiters.push(*lease);
                Ok(Outcome::Lock(LockOutcome::Queued {
                    position: lock.waiters.len() as u32,
                }))
            }
            Command::LockRelease { name, lease, token } => {
                let not_holder = Err(Rejection::NotHolder {
                    lock: name.clone(),
                    lease: *lease,
                    token: *token,
                });
                let Some(lock) = self.locks.get_mut(name) else {
                    return not_holder;
                };
                if lock.holder != *lease || lock.token != *token {
                    return not_holder;
                }
                self.unlocked_at.insert((*lease, name.clone()), rev);
                if lock.waiters.is_empty() {
                    self.locks.remove(name);
                    return Ok(Outcome::Unlocked { next: None });
                }
                lock.holder = lock.waiters.remove(0);
                lock.token = FencingToken::acquired_at(rev);
                Ok(Outcome::Unlocked {
                    next: Some((lock.holder, lock.token)),
                })
            }
            Command::SetLimits(limits) => {
                self.limits = limits.clone();
                self.shrink_dedup();
                Ok(Outcome::LimitsSet)
            }
            // Access control has unit and state tests of its own (auth.rs); the model leaves it out.
            Command::GrantOwned { .. } | Command::Auth(_) => {
                unreachable!("the model never generates {}", command.name())
            }
            Command::Batch(_) => Err(Rejection::InvalidArgument(
                "a batch cannot be nested in another".into(),
            )),
            Command::LockCancel { name, lease } => {
                if self.leases.contains_key(lease) {
                    self.unlocked_at.insert((*lease, name.clone()), rev);
                }
                let Some(lock) = self.locks.get_mut(name) else {
                    return Ok(Outcome::Cancelled(CancelOutcome::NotWaiting));
                };
                if lock.holder == *lease {
                    return Ok(Outcome::Cancelled(CancelOutcome::Held {
                        token: lock.token,
                    }));
                }
                let before = lock.waiters.len();
                lock.waiters.retain(|w| w != lease);
                Ok(Outcome::Cancelled(if lock.waiters.len() < before {
                    CancelOutcome::Withdrawn
                } else {
                    CancelOutcome::NotWaiting
                }))
            }
        }
    }

    fn lease_infos(&self) -> Vec<LeaseInfo> {
        self.leases
            .iter()
            .map(|(id, l)| LeaseInfo {
                id: *id,
                ttl_ms: l.ttl_ms,
                granted_revision: l.granted,
                renewed_revision: l.renewed,
                owner: None,
                key_count: self.bound_count(*id) as u32,
                keys: self
                    .kv
                    .values()
                    .filter(|kv| kv.lease == *id)
                    .map(|kv| kv.key.clone())
                    .collect(),
                locks_held: self
                    .locks
                    .iter()
                    .filter(|(_, m)| m.holder == *id)
                    .map(|(n, _)| n.clone())
                    .collect(),
                locks_waiting: self
                    .locks
                    .iter()
                    .filter(|(_, m)| m.waiters.contains(id))
                    .map(|(n, _)| n.clone())
                    .collect(),
            })
            .collect()
    }

    fn lock_infos(&self) -> Vec<LockInfo> {
        self.locks
            .iter()
            .map(|(name, m)| LockInfo {
                name: name.clone(),
                holder: m.holder,
                token: m.token,
                waiters: m.waiters.clone(),
            })
            .collect()
    }
}

// ---- operations ------------------------------------------------------------------------------

/// How an operation picks a token: resolved against the model when it runs.
#[derive(Clone, Copy, Debug)]
enum TokenPick {
    Current,
    Stale,
    Fixed(u64),
}

/// How an expiry picks the observed revision.
#[derive(Clone, Copy, Debug)]
enum ObservedPick {
    Current,
    Stale,
}

#[derive(Clone, Debug)]
enum Op {
    Grant {
        id: LeaseId,
        ttl_ms: DurationMs,
    },
    GrantBound {
        id: LeaseId,
        ttl_ms: DurationMs,
        keys: Vec<(Vec<u8>, Vec<u8>)>,
    },
    Renew {
        ids: Vec<LeaseId>,
    },
    Revoke {
        id: LeaseId,
    },
    Expire {
        leases: Vec<(LeaseId, ObservedPick)>,
    },
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: LeaseId,
        guard: Option<(String, TokenPick)>,
        prev_kv: bool,
    },
    Delete {
        selector: KeySelector,
        guard: Option<(String, TokenPick)>,
        prev_kv: bool,
    },
    Txn {
        compares: Vec<Compare>,
        success: Vec<TxnOp>,
        failure: Vec<TxnOp>,
        guard: Option<(String, TokenPick)>,
    },
    Acquire {
        name: String,
        lease: LeaseId,
        wait: bool,
        /// Sent after the revision this many entries back (`None`: unchecked).
        sent_lag: Option<u64>,
    },
    Release {
        name: String,
        lease: LeaseId,
        token: TokenPick,
    },
    Cancel {
        name: String,
        lease: LeaseId,
    },
    /// Replace the real state by restore(snapshot(state)).
    SnapshotRestore,
    /// Send the previous request again, same id.
    Retry,
    /// A log entry with no command (Raft blank or membership entry).
    Blank,
    /// Replace the limits: 0 = the starting ones, 1 = tighter, 2 = inconsistent (rejected).
    SetLimits(u8),
    /// Grants, puts and lock calls sharing one entry (`Command::Batch`), each possibly with a
    /// request id; the runner leaves out those touching what an earlier one touches.
    Batch(Vec<(Op, Option<u8>)>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::sample::select(vec!["a", "ab", "abc", "b", "ba", "c"]).prop_map(|k| k.as_bytes().to_vec()),
        1 => Just(Vec::new()),
        1 => Just(b"toolong".to_vec()),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..5)
}

fn lease_id() -> impl Strategy<Value = LeaseId> {
    prop_oneof![1 => Just(0u64), 6 => 1u64..8].prop_map(LeaseId::new)
}

fn lock_name() -> impl Strategy<Value = String> {
    prop_oneof![8 => prop::sample::select(vec!["m", "n"]).prop_map(String::from), 1 => Just(String::new()), 1 => Just("xyz".to_string())]
}

fn token_pick() -> impl Strategy<Value = TokenPick> {
    prop_oneof![4 => Just(TokenPick::Current), 2 => Just(TokenPick::Stale), 1 => (0u64..50).prop_map(TokenPick::Fixed)]
}

fn guard() -> impl Strategy<Value = Option<(String, TokenPick)>> {
    prop::option::weighted(0.3, (lock_name(), token_pick()))
}

fn selector() -> impl Strategy<Value = KeySelector> {
    prop_oneof![
        key().prop_map(KeySelector::Key),
        prop::sample::select(vec!["", "a", "ab", "b", "z"])
            .prop_map(|p| KeySelector::Prefix(p.as_bytes().to_vec())),
        (key(), prop::sample::select(vec!["", "a", "b", "bb", "c"])).prop_map(|(start, end)| {
            KeySelector::Range {
                start,
                end: end.as_bytes().to_vec(),
            }
        }),
    ]
}

fn txn_op() -> impl Strategy<Value = TxnOp> {
    prop_oneof![
        (key(), value(), lease_id()).prop_map(|(key, value, lease)| TxnOp::Put {
            key,
            value,
            lease
        }),
        selector().prop_map(|selector| TxnOp::Delete { selector }),
        (selector(), 0u32..3).prop_map(|(selector, limit)| TxnOp::Get { selector, limit }),
    ]
}

fn compare() -> impl Strategy<Value = Compare> {
    let target = prop_oneof![
        value().prop_map(CompareTarget::Value),
        (0u64..4).prop_map(CompareTarget::Version),
        (0u64..40).prop_map(|r| CompareTarget::CreateRevision(Revision::new(r))),
        (0u64..40).prop_map(|r| CompareTarget::ModRevision(Revision::new(r))),
        (0u64..8).prop_map(|l| CompareTarget::Lease(LeaseId::new(l))),
    ];
    let op = prop::sample::select(vec![
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::Greater,
        CompareOp::Less,
    ]);
    (key(), target, op).prop_map(|(key, target, op)| Compare { key, target, op })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => single_op(),
        3 => prop::collection::vec((batchable_op(), prop::option::weighted(0.3, 0u8..6)), 1..6)
            .prop_map(Op::Batch),
    ]
}

/// How far behind the applied revision a Lock says it was sent: unchecked, or 0 to 3 entries.
fn sent_lag() -> impl Strategy<Value = Option<u64>> {
    prop::option::of(0u64..4)
}

/// The operations a batch may carry.
fn batchable_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (prop_oneof![2 => Just(0u64), 1 => 1u64..8], prop::sample::select(vec![500u64, 5_000, 60_001]))
            .prop_map(|(id, ttl_ms)| Op::Grant { id: LeaseId::new(id), ttl_ms: DurationMs::new(ttl_ms) }),
        2 => (prop_oneof![2 => Just(0u64), 1 => 1u64..8], prop::sample::select(vec![500u64, 5_000]), prop::collection::vec((key(), value()), 0..4))
            .prop_map(|(id, ttl_ms, keys)| Op::GrantBound { id: LeaseId::new(id), ttl_ms: DurationMs::new(ttl_ms), keys }),
        4 => (key(), value(), lease_id(), guard(), any::<bool>())
            .prop_map(|(key, value, lease, guard, prev_kv)| Op::Put { key, value, lease, guard, prev_kv }),
        3 => (lock_name(), lease_id(), any::<bool>(), sent_lag()).prop_map(|(name, lease, wait, sent_lag)| Op::Acquire { name, lease, wait, sent_lag }),
        2 => (lock_name(), lease_id(), token_pick()).prop_map(|(name, lease, token)| Op::Release { name, lease, token }),
        1 => (lock_name(), lease_id()).prop_map(|(name, lease)| Op::Cancel { name, lease }),
    ]
}

fn single_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop_oneof![2 => Just(0u64), 1 => 1u64..8], prop::sample::select(vec![500u64, 1_000, 5_000, 60_000, 60_001]))
            .prop_map(|(id, ttl_ms)| Op::Grant { id: LeaseId::new(id), ttl_ms: DurationMs::new(ttl_ms) }),
        2 => (prop_oneof![2 => Just(0u64), 1 => 1u64..8], prop::sample::select(vec![500u64, 5_000]), prop::collection::vec((key(), value()), 0..4))
            .prop_map(|(id, ttl_ms, keys)| Op::GrantBound { id: LeaseId::new(id), ttl_ms: DurationMs::new(ttl_ms), keys }),
        3 => prop::collection::vec(lease_id(), 0..6).prop_map(|ids| Op::Renew { ids }),
        2 => lease_id().prop_map(|id| Op::Revoke { id }),
        3 => prop::collection::vec((lease_id(), prop_oneof![Just(ObservedPick::Current), Just(ObservedPick::Stale)]), 0..5)
            .prop_map(|leases| Op::Expire { leases }),
        8 => (key(), value(), lease_id(), guard(), any::<bool>())
            .prop_map(|(key, value, lease, guard, prev_kv)| Op::Put { key, value, lease, guard, prev_kv }),
        3 => (selector(), guard(), any::<bool>()).prop_map(|(selector, guard, prev_kv)| Op::Delete { selector, guard, prev_kv }),
        3 => (prop::collection::vec(compare(), 0..3), prop::collection::vec(txn_op(), 0..3), prop::collection::vec(txn_op(), 0..3), guard())
            .prop_map(|(compares, success, failure, guard)| Op::Txn { compares, success, failure, guard }),
        5 => (lock_name(), lease_id(), any::<bool>(), sent_lag()).prop_map(|(name, lease, wait, sent_lag)| Op::Acquire { name, lease, wait, sent_lag }),
        3 => (lock_name(), lease_id(), token_pick()).prop_map(|(name, lease, token)| Op::Release { name, lease, token }),
        1 => (lock_name(), lease_id()).prop_map(|(name, lease)| Op::Cancel { name, lease }),
        1 => Just(Op::SnapshotRestore),
        1 => Just(Op::Retry),
        1 => Just(Op::Blank),
        1 => (0u8..3).prop_map(Op::SetLimits),
    ]
}

/// A sequence of operations, each possibly with a request id.
fn ops() -> impl Strategy<Value = Vec<(Op, Option<u8>)>> {
    prop::collection::vec((op(), prop::option::weighted(0.3, 0u8..6)), 1..80)
}

// ---- the runner ------------------------------------------------------------------------------

fn resolve_token(model: &Model, name: &str, pick: TokenPick) -> FencingToken {
    let current = model.locks.get(name).map_or(0, |l| l.token.get());
    FencingToken::new(match pick {
        TokenPick::Current => current,
        TokenPick::Stale => current.saturating_sub(1),
        TokenPick::Fixed(t) => t,
    })
}

fn resolve_guard(model: &Model, guard: &Option<(String, TokenPick)>) -> Option<Guard> {
    guard.as_ref().map(|(lock, pick)| Guard {
        lock: lock.clone(),
        token: resolve_token(model, lock, *pick),
    })
}

fn to_command(model: &Model, op: &Op) -> Option<Command> {
    Some(match op.clone() {
        Op::Grant { id, ttl_ms } => Command::Grant { id, ttl_ms },
        Op::GrantBound { id, ttl_ms, keys } => Command::GrantBound {
            id,
            ttl_ms,
            owner: None,
            keys: keys
                .into_iter()
                .map(|(key, value)| BoundKey { key, value })
                .collect(),
        },
        Op::Renew { ids } => Command::Renew { ids },
        Op::Revoke { id } => Command::Revoke { id },
        Op::Expire { leases } => Command::Expire {
            leases: leases
                .into_iter()
                .map(|(id, pick)| {
                    let renewed = model.leases.get(&id).map_or(0, |l| l.renewed.get());
                    let observed_renewed_revision = Revision::new(match pick {
                        ObservedPick::Current => renewed,
                        ObservedPick::Stale => renewed.saturating_sub(1),
                    });
                    ExpiredLease {
                        id,
                        observed_renewed_revision,
                    }
                })
                .collect(),
        },
        Op::Put {
            key,
            value,
            lease,
            guard,
            prev_kv,
        } => Command::Put {
            key,
            value,
            lease,
            guard: resolve_guard(model, &guard),
            prev_kv,
        },
        Op::Delete {
            selector,
            guard,
            prev_kv,
        } => Command::Delete {
            selector,
            guard: resolve_guard(model, &guard),
            prev_kv,
        },
        Op::Txn {
            compares,
            success,
            failure,
            guard,
        } => Command::Txn(Txn {
            compares,
            success,
            failure,
            guard: resolve_guard(model, &guard),
        }),
        Op::Acquire {
            name,
            lease,
            wait,
            sent_lag,
        } => Command::LockAcquire {
            name,
            lease,
            wait,
            sent_after: sent_lag.map(|lag| Revision::new(model.last.get().saturating_sub(lag))),
        },
        Op::Release { name, lease, token } => {
            let token = resolve_token(model, &name, token);
            Command::LockRelease { name, lease, token }
        }
        Op::Cancel { name, lease } => Command::LockCancel { name, lease },
        Op::SetLimits(variant) => Command::SetLimits(match variant {
            0 => limits(),
            1 => Limits {
                max_keys_per_lease: 1,
                max_waiters_per_lock: 1,
                max_leases: 3,
                dedup_capacity: 1,
                ..limits()
            },
            _ => Limits {
                min_ttl_ms: DurationMs::new(10),
                max_ttl_ms: DurationMs::new(5),
                ..limits()
            },
        }),
        Op::SnapshotRestore | Op::Retry | Op::Blank | Op::Batch(_) => return None,
    })
}

/// The request of one operation, its id (if any) issued now.
fn to_request(
    model: &Model,
    op: &Op,
    client: Option<u8>,
    seq: &mut u64,
    rev: Revision,
) -> Option<Request> {
    let command = match op {
        Op::Batch(ops) => {
            let mut touched = std::collections::BTreeSet::new();
            let requests: Vec<Request> = ops
                .iter()
                .filter_map(|(op, client)| to_request(model, op, *client, seq, rev))
                .filter(|request| match request.command.batching() {
                    zaris_core::Batching::Touching(touch) => touched.insert(format!("{touch:?}")),
                    _ => true,
                })
                .collect();
            // The batch itself carries no id; its requests do.
            return Some(Request::new(Command::Batch(requests)));
        }
        op => to_command(model, op)?,
    };
    *seq += 1;
    Some(Request {
        // Mostly issued after the latest revision, sometimes with a stale one, so that refusals
        // of possibly forgotten ids are exercised.
        request_id: client.map(|c| RequestId {
            client_id: u64::from(c),
            seq: *seq,
            seen_revision: Revision::new(if c % 3 == 0 {
                rev.get() / 2
            } else {
                rev.get() - 1
            }),
        }),
        command,
    })
}

fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if condition {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
}

fn run(sequence: &[(Op, Option<u8>)]) -> Result<(), TestCaseError> {
    let mut real = State::new(limits());
    // A second replica fed the same log must end with the same digest.
    let mut replica = State::new(limits());
    let mut model = Model::new(limits());
    let mut last_request: Option<Request> = None;
    let mut last_tokens: BTreeMap<String, FencingToken> = BTreeMap::new();
    let mut seq = 0u64;
    for (step, (op, client)) in sequence.iter().enumerate() {
        let rev = Revision::new(step as u64 + 1);
        let request = match op {
            Op::SnapshotRestore => {
                let bytes = real
                    .snapshot()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let restored =
                    State::restore(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
                check(restored == real, || {
                    format!("step {step}: restore(snapshot(s)) != s")
                })?;
                real = restored;
                None
            }
            Op::Blank => None,
            Op::Retry => last_request.clone(),
            op => to_request(&model, op, *client, &mut seq, rev),
        };
        let Some(request) = request else {
            real.apply_noop(rev);
            replica.apply_noop(rev);
            model.last = rev;
            continue;
        };
        let mut expected_changes = Changes::new();
        let expected = model.apply(rev, &request, &mut expected_changes);
        let applied = real.apply(rev, &request);
        replica.apply(rev, &request);
        check(applied.response == expected, || {
            format!(
                "step {step}: {request:?}\n  real:  {:?}\n  model: {expected:?}",
                applied.response
            )
        })?;
        let changes: Changes = applied
            .effects
            .events
            .iter()
            .map(|e| (e.kind, e.kv.key.clone(), e.lease))
            .collect();
        check(changes == expected_changes, || {
            format!(
                "step {step}: {request:?}\n  real events:  {changes:?}\n  model events: {expected_changes:?}"
            )
        })?;
        for event in &applied.effects.events {
            check(event.kv.mod_revision == rev, || {
                format!("step {step}: event not stamped with revision {rev}")
            })?;
        }
        // Tokens strictly increase per lock, and never exceed the revision that granted them.
        for effect in &applied.effects.locks {
            if let LockEffect::Acquired { name, token, .. } = effect {
                let last = last_tokens.insert(name.clone(), *token).unwrap_or_default();
                check(
                    *token > last && *token == FencingToken::acquired_at(rev),
                    || {
                        format!(
                            "step {step}: lock {name:?} token {token} after {last} at revision {rev}"
                        )
                    },
                )?;
            }
        }
        real.check_invariants()
            .map_err(|broken| TestCaseError::fail(format!("step {step}: {broken}")))?;
        // The quota's running count is what a recount finds, and it bounds the snapshot: what
        // `Limits::max_snapshot_bytes` promises a receiving node.
        let (footprint, recounted) = (real.footprint_bytes(), real.recounted_footprint_bytes());
        check(footprint == recounted, || {
            format!("step {step}: {request:?}\n  footprint {footprint}, recounted {recounted}")
        })?;
        let encoded = real
            .snapshot()
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .len() as u64;
        let limits = real.limits();
        let beyond_quota = limits.max_snapshot_bytes() - limits.max_state_bytes;
        check(encoded <= footprint + beyond_quota, || {
            format!(
                "step {step}: snapshot of {encoded} bytes > footprint {footprint} + {beyond_quota}"
            )
        })?;
        check(real.last_applied() == rev, || {
            format!("step {step}: applied index not advanced")
        })?;
        compare_observable(step, &real, &model)?;
        last_request = Some(request);
    }
    let (a, b) = (real.digest(), replica.digest());
    check(matches!((&a, &b), (Ok(a), Ok(b)) if a == b), || {
        "replicas fed the same log diverged".into()
    })
}

fn compare_observable(step: usize, real: &State, model: &Model) -> Result<(), TestCaseError> {
    let kvs = real.range(&KeySelector::Prefix(Vec::new()), 0).kvs;
    let model_kvs: Vec<KeyValue> = model.kv.values().cloned().collect();
    check(kvs == model_kvs, || {
        format!("step {step}: keys differ\n  real:  {kvs:?}\n  model: {model_kvs:?}")
    })?;
    let leases: Vec<LeaseInfo> = real
        .leases(LeaseId::NONE, usize::MAX)
        .iter()
        .filter_map(|l| real.lease(l.id, true))
        .collect();
    let model_leases = model.lease_infos();
    check(leases == model_leases, || {
        format!("step {step}: leases differ\n  real:  {leases:?}\n  model: {model_leases:?}")
    })?;
    let locks = real.locks();
    let model_locks = model.lock_infos();
    check(locks == model_locks, || {
        format!("step {step}: locks differ\n  real:  {locks:?}\n  model: {model_locks:?}")
    })
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn state_machine_matches_the_reference_model() {
    let seed = env_u64("ZARIS_SEED").unwrap_or_else(|| {
        // A fresh seed per run, printed on failure; no clock needed, the address of a local is
        // random enough under ASLR and the process id differs per run.
        let local = 0u8;
        (&local as *const u8 as u64) ^ (u64::from(std::process::id()) << 32)
    });
    let cases = env_u64("ZARIS_CASES").unwrap_or(2_000) as u32;
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    if let Err(failure) = runner.run(&ops(), |sequence| run(&sequence)) {
        panic!(
            "model test failed with seed {seed} ({cases} cases); reproduce with \
             ZARIS_SEED={seed} cargo test -p zaris-core model\n{failure}"
        );
    }
}
