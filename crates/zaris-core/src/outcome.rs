//! What applying a command produces: the response for the client (an [`Outcome`] or a typed
//! [`Rejection`]) and the [`Effects`] that the lessor, lock waiters and watchers consume.
//!
//! Rejections are values, never errors from apply: an apply error would stop the Raft node.

use serde::{Deserialize, Serialize};

use crate::limits::LimitKind;
use crate::types::{DurationMs, FencingToken, KeyValue, LeaseId, Revision};

/// The client-visible result of one applied request.
pub type Response = Result<Outcome, Rejection>;

/// Why a request was not applied. Every variant leaves the state untouched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Rejection {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("TTL {ttl_ms} is outside the allowed range [{min_ttl_ms}, {max_ttl_ms}]")]
    TtlOutOfRange {
        ttl_ms: DurationMs,
        min_ttl_ms: DurationMs,
        max_ttl_ms: DurationMs,
    },
    #[error("limit {limit} exceeded: {actual} > {max}")]
    LimitExceeded {
        limit: LimitKind,
        max: u64,
        actual: u64,
    },
    #[error("lease {0} not found")]
    LeaseNotFound(LeaseId),
    /// Lease ids are never reused: the requested id belongs to a live lease or to one that ended.
    #[error(
        "lease id {id} is in use or was used before (ids are never reused); choose {next_free} or above, or let the server choose"
    )]
    LeaseIdUsed { id: LeaseId, next_free: LeaseId },
    #[error(
        "guard failed: lock {lock:?} is not held with token {token} (current token: {current:?})"
    )]
    GuardFailed {
        lock: String,
        token: FencingToken,
        current: Option<FencingToken>,
    },
    #[error("lease {lease} does not hold lock {lock:?} with token {token}")]
    NotHolder {
        lock: String,
        lease: LeaseId,
        token: FencingToken,
    },
    /// A request whose id the de-duplication table no longer answers for: it was applied at
    /// `applied_at` with a response too large to keep, or (`None`) an earlier attempt may have
    /// been applied at a revision up to `forgotten_through` and evicted since. This attempt
    /// changed nothing; whether the request took effect is unknown to the state machine.
    #[error("{}", forgotten_message(*forgotten_through, *applied_at))]
    RequestIdForgotten {
        forgotten_through: Revision,
        applied_at: Option<Revision>,
    },
    /// A change to users or roles that the current ones do not allow (a user that exists, the
    /// last admin removed while auth is enabled, ...).
    #[error("{0}")]
    AuthRefused(String),
}

fn forgotten_message(forgotten_through: Revision, applied_at: Option<Revision>) -> String {
    match applied_at {
        Some(revision) => format!(
            "this request id was applied at revision {revision}; its response was too large to \
             keep, so this retry changed nothing"
        ),
        None => format!(
            "this request id may have been applied and forgotten (the de-duplication table has \
             forgotten every id applied up to revision {forgotten_through}); this attempt changed \
             nothing: re-read to find out, or resend as a new request issued after revision \
             {forgotten_through}"
        ),
    }
}

impl Rejection {
    /// Whether the rejection is about a resource limit (RESOURCE_EXHAUSTED) rather than a bad or
    /// inapplicable request.
    pub fn is_limit(&self) -> bool {
        matches!(self, Rejection::LimitExceeded { .. })
    }
}

/// The successful result of a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Granted {
        id: LeaseId,
        ttl_ms: DurationMs,
    },
    /// Per-id results of a renew batch: leases that no longer exist are listed, not errors.
    Renewed {
        renewed: Vec<(LeaseId, DurationMs)>,
        not_found: Vec<LeaseId>,
    },
    Revoked {
        id: LeaseId,
        keys_deleted: u64,
    },
    /// `skipped` holds ids that were renewed after the leader observed them, or are already gone.
    Expired {
        revoked: Vec<LeaseId>,
        skipped: Vec<LeaseId>,
    },
    Put {
        prev: Option<KeyValue>,
    },
    Deleted {
        deleted: u64,
        prev: Vec<KeyValue>,
    },
    Txn {
        succeeded: bool,
        results: Vec<OpResult>,
    },
    Lock(LockOutcome),
    /// The lock was released; `next` is the waiter it passed to, with its new token.
    Unlocked {
        next: Option<(LeaseId, FencingToken)>,
    },
    Cancelled(CancelOutcome),
    /// The cluster's limits were set.
    LimitsSet,
    /// A replayed entry (index not above the last applied one): nothing changed.
    Ignored,
    /// Users, roles or the auth switch changed.
    AuthChanged,
    /// One response per request of a `Command::Batch`, in its order.
    Batch(Vec<Response>),
}

/// The result of one operation in a transaction branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpResult {
    Put { prev: Option<KeyValue> },
    Deleted { deleted: u64 },
    Got { kvs: Vec<KeyValue>, more: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockOutcome {
    /// The lease holds the lock. `token` is the fencing token; re-acquiring returns the same one.
    Held { token: FencingToken },
    /// The lease waits; `position` 1 is next in line.
    Queued { position: u32 },
    /// Held by another lease and the caller did not want to wait.
    Busy {
        holder: LeaseId,
        token: FencingToken,
    },
    /// Nothing changed: an Unlock of the lock by the lease applied after the request's
    /// `sent_after`, so the caller had moved on when it arrived (it may ask again, as of a later
    /// revision).
    Overtaken,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelOutcome {
    /// The lease was removed from the queue.
    Withdrawn,
    /// The lock was handed to the lease before the cancel applied: it holds it now.
    Held { token: FencingToken },
    /// The lease neither waits for nor holds the lock.
    NotWaiting,
}

/// The kind of a key change, as watchers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    Put,
    Delete,
    /// The key's lease expired.
    Expire,
    /// The key's lease was revoked by a client.
    Revoke,
}

/// One key change. For deletions, `kv` carries the key, an empty value, version 0 and the revision of
/// the deletion; `prev` is the key as it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev: Option<KeyValue>,
    /// For `Expire` and `Revoke`, the lease that ended.
    pub lease: LeaseId,
}

/// Lease changes the lessor tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaseEffect {
    /// Granted or renewed: the lease lives for `ttl_ms` from now on.
    Refreshed {
        id: LeaseId,
        ttl_ms: DurationMs,
        renewed_revision: Revision,
    },
    Revoked {
        id: LeaseId,
        expired: bool,
    },
}

/// Lock hand-overs, for the server to wake waiting lock calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockEffect {
    Acquired {
        name: String,
        lease: LeaseId,
        token: FencingToken,
    },
    Released {
        name: String,
        lease: LeaseId,
        token: FencingToken,
    },
}

/// Everything a command changed that someone outside the state machine must hear about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effects {
    pub leases: Vec<LeaseEffect>,
    pub locks: Vec<LockEffect>,
    pub events: Vec<Event>,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty() && self.locks.is_empty() && self.events.is_empty()
    }

    /// Adds `later`'s effects after these (the next request of a batch).
    pub fn append(&mut self, mut later: Effects) {
        self.leases.append(&mut later.leases);
        self.locks.append(&mut later.locks);
        self.events.append(&mut later.events);
    }
}

/// The result of applying one request at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub revision: Revision,
    pub response: Response,
    pub effects: Effects,
}
