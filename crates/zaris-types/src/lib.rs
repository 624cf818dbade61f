//! The identifiers a Zaris client and a Zaris node share.
//!
//! Each is a distinct type over a `u64` so that a lease id cannot be passed where a revision or a
//! fencing token is expected (they are all plain integers on the wire and in etcd's API, and mixing
//! them up compiles there). They serialize as the bare integer, so the stored and replicated
//! formats are those of a `u64`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A lease identifier. [`LeaseId::NONE`] (0) means "no lease" wherever a lease is optional.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct LeaseId(u64);

impl LeaseId {
    /// "No lease": keys not bound to a lease, and a grant that lets the server choose the id.
    pub const NONE: LeaseId = LeaseId(0);

    /// The largest id a client may ask for in a grant. Ids above it are left to the server, so a
    /// client that chooses this id cannot exhaust the ids the server hands out.
    pub const MAX_CHOSEN: LeaseId = LeaseId(1 << 62);

    /// The largest lease id of all (it fits a signed 64-bit integer, as etcd's lease ids do).
    pub const MAX: LeaseId = LeaseId(i64::MAX as u64);

    pub const fn new(id: u64) -> Self {
        LeaseId(id)
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// `Some(self)` unless this is [`LeaseId::NONE`].
    pub const fn some(self) -> Option<LeaseId> {
        if self.0 == 0 { None } else { Some(self) }
    }

    /// The id after this one (saturating at `u64::MAX`, far above [`LeaseId::MAX`]).
    pub const fn next(self) -> LeaseId {
        LeaseId(self.0.saturating_add(1))
    }
}

/// The Raft log index of the entry that made a change: unique, ordered, survives failover.
/// Revision 0 is "before anything".
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Revision(u64);

impl Revision {
    pub const ZERO: Revision = Revision(0);

    pub const fn new(revision: u64) -> Self {
        Revision(revision)
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    /// The revision after this one (saturating).
    pub const fn next(self) -> Revision {
        Revision(self.0.saturating_add(1))
    }

    /// The revision before this one (saturating at [`Revision::ZERO`]).
    pub const fn prev(self) -> Revision {
        Revision(self.0.saturating_sub(1))
    }
}

/// A fencing token: the revision at which a lock's current holder acquired it. A later holder
/// always has a larger token, so a resource that remembers the largest token it has seen can
/// refuse a stale holder's writes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct FencingToken(u64);

impl FencingToken {
    /// No token: nothing was ever held with it (an unlock with it withdraws a queued wait).
    pub const NONE: FencingToken = FencingToken(0);

    pub const fn new(token: u64) -> Self {
        FencingToken(token)
    }

    /// The token of a lock acquired at `revision`.
    pub const fn acquired_at(revision: Revision) -> Self {
        FencingToken(revision.0)
    }

    pub const fn get(self) -> u64 {
        self.0
    }
}

macro_rules! integer_conversions {
    ($($name:ident),*) => {$(
        impl From<u64> for $name {
            fn from(value: u64) -> Self {
                $name(value)
            }
        }

        impl From<$name> for u64 {
            fn from(value: $name) -> u64 {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::num::ParseIntError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map($name)
            }
        }
    )*};
}

integer_conversions!(LeaseId, Revision, FencingToken);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_are_the_bare_integer() {
        assert_eq!(LeaseId::new(42).to_string(), "42");
        assert_eq!("42".parse::<Revision>(), Ok(Revision::new(42)));
        assert!("-1".parse::<FencingToken>().is_err());
    }

    #[test]
    fn none_and_next() {
        assert_eq!(LeaseId::NONE.some(), None);
        assert_eq!(LeaseId::new(7).some(), Some(LeaseId::new(7)));
        assert_eq!(LeaseId::new(u64::MAX).next(), LeaseId::new(u64::MAX));
        assert_eq!(Revision::new(1).next(), Revision::new(2));
        assert_eq!(FencingToken::acquired_at(Revision::new(9)).get(), 9);
    }
}
