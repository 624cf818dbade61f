//! The commands the state machine applies: one [`Request`] per Raft entry.
//!
//! Each command is validated twice: statelessly by [`Request::validate`] before it is proposed (so a
//! bad request never reaches the log), and again, together with the state-dependent checks, when
//! it is applied (so a request proposed by a node with a bug cannot corrupt the state).

use serde::{Deserialize, Serialize};

use crate::auth::AuthCommand;
use crate::limits::{LimitKind, Limits};
use crate::outcome::Rejection;
use crate::types::{DurationMs, FencingToken, Guard, KeySelector, LeaseId, RequestId, Revision};

/// One replicated command and, for retry-safe writes, the id that de-duplicates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// When set, a second request with the same id returns the first one's response and changes
    /// nothing.
    pub request_id: Option<RequestId>,
    pub command: Command,
}

impl Request {
    /// A request without a de-duplication id.
    pub fn new(command: Command) -> Self {
        Request {
            request_id: None,
            command,
        }
    }

    /// A request that is applied at most once per `id`.
    pub fn with_id(id: RequestId, command: Command) -> Self {
        Request {
            request_id: Some(id),
            command,
        }
    }
}

/// What a lease that the leader found expired looked like when the leader decided to expire it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredLease {
    pub id: LeaseId,
    /// The lease's `renewed_revision` as the leader's lessor last saw it. If the lease has been
    /// renewed since (a renew won the race with the expiry), the expiry is skipped.
    pub observed_renewed_revision: Revision,
}

/// A state-machine command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create a lease. `id == 0` lets the state machine choose a fresh id.
    Grant { id: LeaseId, ttl_ms: DurationMs },
    /// Renew many leases at once (group-committed keepalives).
    Renew { ids: Vec<LeaseId> },
    /// A client revokes a lease: its keys are deleted and its locks released.
    Revoke { id: LeaseId },
    /// The leader expires leases whose deadline passed.
    Expire { leases: Vec<ExpiredLease> },
    /// Write a key, optionally bound to a lease and guarded by a lock.
    Put {
        #[serde(with = "crate::codec::bytes")]
        key: Vec<u8>,
        #[serde(with = "crate::codec::bytes")]
        value: Vec<u8>,
        lease: LeaseId,
        guard: Option<Guard>,
        prev_kv: bool,
    },
    /// Delete the selected keys.
    Delete {
        selector: KeySelector,
        guard: Option<Guard>,
        prev_kv: bool,
    },
    /// Compare, then apply one of two operation lists atomically.
    Txn(Txn),
    /// Acquire a lock for a lease: at once if free, else queue (`wait`) or report busy.
    LockAcquire {
        name: String,
        lease: LeaseId,
        wait: bool,
        /// A revision the caller saw applied before it sent the request. If an Unlock of this
        /// lock by the lease (a release, or a withdrawal whatever it found) applied after it,
        /// the request was overtaken by a later call of the caller (a wait given back before
        /// its Lock arrived) and changes nothing ([`crate::LockOutcome::Overtaken`];
        /// `state/epoch.rs` says how long a lease remembers). `None`: not checked.
        sent_after: Option<Revision>,
    },
    /// Release a held lock; fenced: the token must be the holder's.
    LockRelease {
        name: String,
        lease: LeaseId,
        token: FencingToken,
    },
    /// Stop waiting for a lock (a waiter that timed out). If the lock was handed to the lease in the
    /// meantime, the outcome says so and the lock stays held.
    LockCancel { name: String, lease: LeaseId },
    /// Fix the cluster's limits. Proposed once, by the first leader, from its configuration: the
    /// limits then live in the replicated state, so every node applies with the same bounds.
    SetLimits(Limits),
    /// [`Command::Grant`] by a known user, who becomes the lease's owner (`AuthState`). Appended
    /// last, like every newer variant, so older entries decode unchanged.
    GrantOwned {
        id: LeaseId,
        ttl_ms: DurationMs,
        owner: String,
    },
    /// A change to users, roles or the auth switch.
    Auth(AuthCommand),
    /// Requests from different clients that share one Raft entry (group commit). Built by the
    /// leader's write batcher only, never from a client's request. Each request is applied in
    /// order and answered on its own; all take the entry's revision, so no two may touch the same
    /// key, lease or lock ([`Command::batching`]), and a command that changes what many keys or
    /// locks hold (a revoke, a delete, a transaction) never joins one.
    Batch(Vec<Request>),
    /// A grant whose lease is created with keys already bound to it, in one apply step: the
    /// lease and all its keys exist from the same revision on, or nothing is created (ZooKeeper's
    /// ephemeral create in one call, where etcd needs a Grant and then a Put). `owner` as in
    /// [`Command::GrantOwned`]. Appended last, so older entries decode unchanged.
    GrantBound {
        id: LeaseId,
        ttl_ms: DurationMs,
        owner: Option<String>,
        keys: Vec<BoundKey>,
    },
}

/// A key written, bound to its lease, by [`Command::GrantBound`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundKey {
    #[serde(with = "crate::codec::bytes")]
    pub key: Vec<u8>,
    #[serde(with = "crate::codec::bytes")]
    pub value: Vec<u8>,
}

/// Requests in one [`Command::Batch`].
pub const MAX_BATCH_REQUESTS: usize = 256;

/// How a command may share a Raft entry ([`Command::Batch`]) with others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching<'a> {
    /// Never: it may change many keys, leases or locks at once.
    Alone,
    /// With any other batchable command (a grant that lets the server choose the id).
    Freely,
    /// With commands that touch something else: every request of an entry shares its revision,
    /// so two changes to one key or lock in one entry would be told apart by nothing (a
    /// `mod_revision` compare would take the second write for the first, and a lock handed over
    /// twice would give two holders the same fencing token).
    Touching(Touch<'a>),
}

/// The one thing a batchable command changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Touch<'a> {
    Key(&'a [u8]),
    Lease(LeaseId),
    Lock(&'a str),
}

/// A compare-then-else transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    pub compares: Vec<Compare>,
    pub success: Vec<TxnOp>,
    pub failure: Vec<TxnOp>,
    /// When set, the whole transaction applies only while the guard holds.
    pub guard: Option<Guard>,
}

/// One condition on one key. A missing key has version, revisions and lease 0, and no value: a
/// value comparison against a missing key is false whatever the operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    #[serde(with = "crate::codec::bytes")]
    pub key: Vec<u8>,
    pub target: CompareTarget,
    pub op: CompareOp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareTarget {
    Value(#[serde(with = "crate::codec::bytes")] Vec<u8>),
    Version(u64),
    CreateRevision(Revision),
    ModRevision(Revision),
    Lease(LeaseId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Greater,
    Less,
}

impl CompareOp {
    pub fn holds<T: Ord + ?Sized>(self, actual: &T, expected: &T) -> bool {
        match self {
            CompareOp::Equal => actual == expected,
            CompareOp::NotEqual => actual != expected,
            CompareOp::Greater => actual > expected,
            CompareOp::Less => actual < expected,
        }
    }
}

/// An operation inside a transaction branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOp {
    Put {
        #[serde(with = "crate::codec::bytes")]
        key: Vec<u8>,
        #[serde(with = "crate::codec::bytes")]
        value: Vec<u8>,
        lease: LeaseId,
    },
    Delete {
        selector: KeySelector,
    },
    Get {
        selector: KeySelector,
        limit: u32,
    },
}

impl Command {
    /// A short, stable name for logs and metric labels (never the command's data).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Grant { .. } => "grant",
            Command::Renew { .. } => "renew",
            Command::Revoke { .. } => "revoke",
            Command::Expire { .. } => "expire",
            Command::Put { .. } => "put",
            Command::Delete { .. } => "delete",
            Command::Txn(_) => "txn",
            Command::LockAcquire { .. } => "lock",
            Command::LockRelease { .. } => "unlock",
            Command::LockCancel { .. } => "lock_cancel",
            Command::SetLimits(_) => "set_limits",
            Command::GrantOwned { .. } => "grant",
            Command::Auth(_) => "auth",
            Command::Batch(_) => "batch",
            Command::GrantBound { .. } => "grant",
        }
    }

    /// Whether this command may join a [`Command::Batch`], and what it must not share one with.
    /// A put's guard only reads its lock, so it touches the key alone.
    pub fn batching(&self) -> Batching<'_> {
        match self {
            Command::Put { key, .. } => Batching::Touching(Touch::Key(key)),
            Command::Grant { id, .. } | Command::GrantOwned { id, .. } => {
                if *id == LeaseId::NONE {
                    Batching::Freely
                } else {
                    Batching::Touching(Touch::Lease(*id))
                }
            }
            // Its keys take the entry's revision like a put's; one touch per request, so a grant
            // with a key joins a batch only with a server-chosen id and a single key.
            Command::GrantBound { id, keys, .. } => match keys.as_slice() {
                [] if *id == LeaseId::NONE => Batching::Freely,
                [] => Batching::Touching(Touch::Lease(*id)),
                [only] if *id == LeaseId::NONE => Batching::Touching(Touch::Key(&only.key)),
                _ => Batching::Alone,
            },
            Command::LockAcquire { name, .. }
            | Command::LockRelease { name, .. }
            | Command::LockCancel { name, .. } => Batching::Touching(Touch::Lock(name)),
            Command::Renew { .. }
            | Command::Revoke { .. }
            | Command::Expire { .. }
            | Command::Delete { .. }
            | Command::Txn(_)
            | Command::SetLimits(_)
            | Command::Auth(_)
            | Command::Batch(_) => Batching::Alone,
        }
    }
}

/// Checks a batch's shape: not empty, at most [`MAX_BATCH_REQUESTS`], only batchable commands,
/// no two touching the same thing, no request id on the batch itself. Each request's own checks
/// are its own: a request that fails them is answered with the rejection, and the others apply.
fn check_batch(request_id: Option<RequestId>, requests: &[Request]) -> Result<(), Rejection> {
    let invalid = |why: &str| Err(Rejection::InvalidArgument(format!("batch: {why}")));
    if request_id.is_some() {
        return invalid("a batch carries no request id (its requests do)");
    }
    if requests.is_empty() || requests.len() > MAX_BATCH_REQUESTS {
        return invalid(&format!(
            "{} requests, not 1 to {MAX_BATCH_REQUESTS}",
            requests.len()
        ));
    }
    let mut touched = std::collections::BTreeSet::new();
    for request in requests {
        match request.command.batching() {
            Batching::Alone => {
                return invalid(&format!("a {} cannot join a batch", request.command.name()));
            }
            Batching::Freely => {}
            Batching::Touching(touch) => {
                if !touched.insert(touch) {
                    return invalid("two requests touch the same key, lease or lock");
                }
            }
        }
    }
    Ok(())
}

impl Request {
    /// Stateless validation: sizes, ranges, counts. Run before proposing; the state machine runs it
    /// again on apply.
    pub fn validate(&self, limits: &Limits) -> Result<(), Rejection> {
        match &self.command {
            Command::Grant { id, ttl_ms } | Command::GrantOwned { id, ttl_ms, .. } => {
                check_chosen_lease_id(*id)?;
                check_ttl(*ttl_ms, limits)
            }
            Command::GrantBound {
                id, ttl_ms, keys, ..
            } => {
                check_chosen_lease_id(*id)?;
                check_ttl(*ttl_ms, limits)?;
                check_count(LimitKind::TxnOps, keys.len(), limits)?;
                check_count(LimitKind::KeysPerLease, keys.len(), limits)?;
                let mut seen = std::collections::BTreeSet::new();
                for bound in keys {
                    check_key(&bound.key, limits)?;
                    check_value(&bound.value, limits)?;
                    if !seen.insert(bound.key.as_slice()) {
                        return Err(Rejection::InvalidArgument(
                            "a key is listed twice among the grant's keys".into(),
                        ));
                    }
                }
                Ok(())
            }
            Command::Renew { ids } => check_renew_ids(ids, limits),
            Command::Revoke { id } => check_ids(1, std::iter::once(*id), limits),
            Command::Expire { leases } => {
                check_ids(leases.len(), leases.iter().map(|l| l.id), limits)
            }
            Command::Put {
                key, value, guard, ..
            } => {
                check_key(key, limits)?;
                check_value(value, limits)?;
                check_guard(guard.as_ref(), limits)
            }
            Command::Delete {
                selector, guard, ..
            } => {
                check_selector(selector, limits)?;
                check_guard(guard.as_ref(), limits)
            }
            Command::Txn(txn) => {
                let ops = txn.compares.len() + txn.success.len() + txn.failure.len();
                check_count(LimitKind::TxnOps, ops, limits)?;
                for compare in &txn.compares {
                    check_key(&compare.key, limits)?;
                    if let CompareTarget::Value(v) = &compare.target {
                        check_value(v, limits)?;
                    }
                }
                for op in txn.success.iter().chain(&txn.failure) {
                    match op {
                        TxnOp::Put { key, value, .. } => {
                            check_key(key, limits)?;
                            check_value(value, limits)?;
                        }
                        TxnOp::Delete { selector } | TxnOp::Get { selector, .. } => {
                            check_selector(selector, limits)?
                        }
                    }
                }
                check_guard(txn.guard.as_ref(), limits)
            }
            Command::LockAcquire { name, lease, .. } | Command::LockCancel { name, lease } => {
                check_lock_name(name, limits)?;
                check_lease_id(*lease)
            }
            Command::LockRelease { name, lease, .. } => {
                check_lock_name(name, limits)?;
                check_lease_id(*lease)
            }
            Command::SetLimits(new_limits) => new_limits
                .check()
                .map_err(|why| Rejection::InvalidArgument(format!("limits: {why}"))),
            Command::Auth(change) => change.validate().map_err(Rejection::InvalidArgument),
            Command::Batch(requests) => check_batch(self.request_id, requests),
        }
    }
}

fn check_ttl(ttl_ms: DurationMs, limits: &Limits) -> Result<(), Rejection> {
    if ttl_ms < limits.min_ttl_ms || ttl_ms > limits.max_ttl_ms {
        return Err(Rejection::TtlOutOfRange {
            ttl_ms,
            min_ttl_ms: limits.min_ttl_ms,
            max_ttl_ms: limits.max_ttl_ms,
        });
    }
    Ok(())
}

fn check_chosen_lease_id(id: LeaseId) -> Result<(), Rejection> {
    if id > LeaseId::MAX_CHOSEN {
        return Err(Rejection::InvalidArgument(format!(
            "lease id {id} is above {}, the largest a client may choose",
            LeaseId::MAX_CHOSEN
        )));
    }
    Ok(())
}

fn check_lease_id(id: LeaseId) -> Result<(), Rejection> {
    if id == LeaseId::NONE {
        return Err(Rejection::InvalidArgument(
            "lease id 0 is reserved for \"no lease\"".into(),
        ));
    }
    Ok(())
}

/// What [`Request::validate`] checks of a `Renew`'s ids, for a caller that has the ids but no
/// command yet (a keepalive request, checked before it joins a batch).
pub fn check_renew_ids(ids: &[LeaseId], limits: &Limits) -> Result<(), Rejection> {
    check_ids(ids.len(), ids.iter().copied(), limits)
}

fn check_ids(
    len: usize,
    mut ids: impl Iterator<Item = LeaseId>,
    limits: &Limits,
) -> Result<(), Rejection> {
    if len == 0 {
        return Err(Rejection::InvalidArgument("no lease ids given".into()));
    }
    check_count(LimitKind::BatchIds, len, limits)?;
    ids.try_for_each(check_lease_id)
}

fn check_count(kind: LimitKind, len: usize, limits: &Limits) -> Result<(), Rejection> {
    let limit = limits.get(kind);
    if len as u64 > limit {
        return Err(Rejection::LimitExceeded {
            limit: kind,
            max: limit,
            actual: len as u64,
        });
    }
    Ok(())
}

fn check_key(key: &[u8], limits: &Limits) -> Result<(), Rejection> {
    if key.is_empty() {
        return Err(Rejection::InvalidArgument("key must not be empty".into()));
    }
    check_count(LimitKind::KeyBytes, key.len(), limits)
}

fn check_value(value: &[u8], limits: &Limits) -> Result<(), Rejection> {
    check_count(LimitKind::ValueBytes, value.len(), limits)
}

fn check_selector(selector: &KeySelector, limits: &Limits) -> Result<(), Rejection> {
    let (start, end) = selector.key_bytes();
    match selector {
        KeySelector::Key(_) => check_key(start, limits),
        // The empty prefix selects everything: allowed, like etcd's `--prefix ""`.
        KeySelector::Prefix(_) => check_count(LimitKind::KeyBytes, start.len(), limits),
        KeySelector::Range { .. } => {
            check_count(LimitKind::KeyBytes, start.len(), limits)?;
            check_count(LimitKind::KeyBytes, end.len(), limits)?;
            if !end.is_empty() && end <= start {
                return Err(Rejection::InvalidArgument(
                    "range end must be greater than range start (or empty for \"to the end\")"
                        .into(),
                ));
            }
            Ok(())
        }
    }
}

fn check_lock_name(name: &str, limits: &Limits) -> Result<(), Rejection> {
    if name.is_empty() {
        return Err(Rejection::InvalidArgument(
            "lock name must not be empty".into(),
        ));
    }
    check_count(LimitKind::LockNameBytes, name.len(), limits)
}

fn check_guard(guard: Option<&Guard>, limits: &Limits) -> Result<(), Rejection> {
    match guard {
        Some(guard) => check_lock_name(&guard.lock, limits),
        None => Ok(()),
    }
}
