//! Plain data shared by commands, outcomes and the state: identifiers, key-values, selectors.

use serde::{Deserialize, Serialize};

pub use zaris_types::{FencingToken, LeaseId, Revision};

/// A span of time in whole milliseconds: a TTL, an election timeout, a retry delay. Replicated
/// (a lease's TTL is part of the state), so it is an integer, not a `std::time::Duration`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DurationMs(u64);

impl DurationMs {
    pub const ZERO: DurationMs = DurationMs(0);

    pub const fn new(ms: u64) -> Self {
        DurationMs(ms)
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    pub const fn saturating_mul(self, factor: u64) -> DurationMs {
        DurationMs(self.0.saturating_mul(factor))
    }

    pub fn from_duration(duration: std::time::Duration) -> Self {
        DurationMs(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    pub const fn to_duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }
}

impl std::fmt::Display for DurationMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ms", self.0)
    }
}

/// A reading of one node's monotonic clock, in milliseconds since that clock's origin. Never
/// replicated: deadlines on different nodes are on different clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstantMs(u64);

impl InstantMs {
    pub const fn new(ms: u64) -> Self {
        InstantMs(ms)
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    /// `self + span`, saturating.
    pub const fn after(self, span: DurationMs) -> InstantMs {
        InstantMs(self.0.saturating_add(span.0))
    }

    /// How long from `earlier` to `self` (zero if `earlier` is later).
    pub const fn since(self, earlier: InstantMs) -> DurationMs {
        DurationMs(self.0.saturating_sub(earlier.0))
    }
}

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
    #[serde(with = "crate::codec::bytes")]
    pub key: Vec<u8>,
    #[serde(with = "crate::codec::bytes")]
    pub value: Vec<u8>,
    /// Revision of the put that created this incarnation of the key.
    pub create_revision: Revision,
    /// Revision of the last change to the key (for a delete event: the delete's revision).
    pub mod_revision: Revision,
    /// Number of puts since creation, starting at 1; 0 for a deleted key.
    pub version: u64,
    /// The lease the key is bound to, or [`LeaseId::NONE`].
    pub lease: LeaseId,
}

/// Which keys an operation touches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeySelector {
    /// Exactly this key.
    Key(#[serde(with = "crate::codec::bytes")] Vec<u8>),
    /// Every key starting with these bytes (the empty prefix selects every key).
    Prefix(#[serde(with = "crate::codec::bytes")] Vec<u8>),
    /// Keys in `[start, end)`; an empty `end` means "to the last key".
    Range {
        #[serde(with = "crate::codec::bytes")]
        start: Vec<u8>,
        #[serde(with = "crate::codec::bytes")]
        end: Vec<u8>,
    },
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
    pub token: FencingToken,
}
