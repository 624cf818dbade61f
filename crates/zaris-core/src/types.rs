//! Plain data shared by commands, outcomes and the state: identifiers, key-values, selectors.

use serde::{Deserialize, Serialize};

/// The Raft log index of the entry that made a change. Unique, ordered, survives failover.
pub type Revision = u64;

/// A lease identifier. `0` means "no lease" wherever a lease is optional.
pub type LeaseId = u64;

/// The "no lease" value of a [`LeaseId`] field.
pub const NO_LEASE: LeaseId = 0;

/// The largest id a client may ask for in a Grant. Ids above it are left to the server, so a
/// client that chooses this id cannot exhaust the ids the server hands out.
pub const MAX_CHOSEN_LEASE_ID: LeaseId = 1 << 62;

/// The largest lease id of all (it fits a signed 64-bit integer, as etcd's lease ids do).
pub const MAX_LEASE_ID: LeaseId = i64::MAX as u64;

/// A fencing token: the revision at which a lock's current holder acquired it.
pub type Token = u64;

/// Names a client request so that a retried write is applied at most once.
///
/// `client_id` is chosen by the client (randomly, once per process); `seq` increases per request.
/// Together they are the identity; `seen_revision` is a revision the client had seen committed
/// before it first sent the request (so the request cannot have applied at or below it), the
/// same for every retry: it lets the state machine refuse a retry whose first attempt it may have
/// forgotten (see `state::dedup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId {
    pub client_id: u64,
    pub seq: u64,
    pub seen_revision: Revision,
}

/// A stored key with its metadata, as reads and events return it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// Revision of the put that created this incarnation of the key.
    pub create_revision: Revision,
    /// Revision of the last change to the key (for a delete event: the delete's revision).
    pub mod_revision: Revision,
    /// Number of puts since creation, starting at 1; 0 for a deleted key.
    pub version: u64,
    /// The lease the key is bound to, or [`NO_LEASE`].
    pub lease: LeaseId,
}

/// Which keys an operation touches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeySelector {
    /// Exactly this key.
    Key(Vec<u8>),
    /// Every key starting with these bytes (the empty prefix selects every key).
    Prefix(Vec<u8>),
    /// Keys in `[start, end)`; an empty `end` means "to the last key".
    Range { start: Vec<u8>, end: Vec<u8> },
}

impl KeySelector {
    /// The bytes the selector is built from, for size validation.
    pub(crate) fn key_bytes(&self) -> (&[u8], &[u8]) {
        match self {
            KeySelector::Key(k) | KeySelector::Prefix(k) => (k, &[]),
            KeySelector::Range { start, end } => (start, end),
        }
    }

    /// Whether `key` is selected.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            KeySelector::Key(k) => key == k.as_slice(),
            KeySelector::Prefix(p) => key.starts_with(p),
            KeySelector::Range { start, end } => {
                key >= start.as_slice() && (end.is_empty() || key < end.as_slice())
            }
        }
    }
}

/// A guarded write: applies only while `lock` is held with fencing token `token`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    pub lock: String,
    pub token: Token,
}
