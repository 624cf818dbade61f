//! The state's footprint: what the `max_state_bytes` quota measures, and why a snapshot's size
//! follows from the limits.
//!
//! Every key, lease, lock place and user or role is charged at least what it takes in the
//! state's encoding (bincode varints: at most 9 bytes per integer or length). With the
//! de-duplication table bounded by its own limits, a snapshot is therefore never larger than
//! [`Limits::max_snapshot_bytes`](crate::limits::Limits::max_snapshot_bytes), a bound a node can
//! hold a peer's snapshot to. The footprint is not encoded: it is counted again on restore, and
//! kept up to date by every change (a property test compares it with a recount).

use super::State;
use crate::limits::LimitKind;
use crate::outcome::Rejection;

/// Charged per key beyond its bytes: three revisions, a version and a lease id, lengths, and the
/// lease's index entry (which also holds the key again, charged separately).
const KEY_OVERHEAD_BYTES: u64 = 96;
/// Charged per lease: its record (about 60 bytes), its owner's entry in the owner table (at
/// most 160 bytes: a 128-byte name, or `deleted user ` and one) and its lock epochs' own record
/// (at most 19 bytes: two integers and the count of its names, which are charged apart).
pub const LEASE_BYTES: u64 = 256;
/// Charged per place in a lock (its holder or a waiter) beyond twice the name: the name sits in
/// the lock table and in the lease's own list.
const LOCK_PLACE_OVERHEAD_BYTES: u64 = 64;

/// The charge for a key and its value.
pub fn key_bytes(key: &[u8], value: &[u8]) -> u64 {
    2 * key.len() as u64 + value.len() as u64 + KEY_OVERHEAD_BYTES
}

/// The charge for one place (holder or waiter) in lock `name`.
pub fn lock_place_bytes(name: &str) -> u64 {
    2 * name.len() as u64 + LOCK_PLACE_OVERHEAD_BYTES
}

/// The running charges; leases are charged by count, so they need no counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Footprint {
    pub(super) keys: u64,
    pub(super) lock_places: u64,
    /// The users and roles, as encoded (measured again after every change to them).
    pub(super) directory: u64,
    /// The lock names whose epochs leases remember (`epoch.rs`).
    pub(super) lock_epochs: u64,
}

impl State {
    /// The state's size as the quota measures it, in bytes.
    pub fn footprint_bytes(&self) -> u64 {
        let f = &self.footprint;
        f.keys
            + f.lock_places
            + f.directory
            + f.lock_epochs
            + self.leases.len() as u64 * LEASE_BYTES
    }

    /// The footprint counted from scratch (what restore does); equal to [`footprint_bytes`]
    /// unless a change forgot to charge. For tests.
    ///
    /// [`footprint_bytes`]: State::footprint_bytes
    #[doc(hidden)]
    pub fn recounted_footprint_bytes(&self) -> u64 {
        let mut copy = self.clone();
        copy.recount_footprint();
        copy.footprint_bytes()
    }

    pub(super) fn recount_footprint(&mut self) {
        let keys = self.kv.iter().map(|(k, s)| key_bytes(k, &s.value)).sum();
        let lock_places = self
            .locks
            .iter()
            .map(|(name, lock)| (1 + lock.waiters.len() as u64) * lock_place_bytes(name))
            .sum();
        self.footprint = Footprint {
            keys,
            lock_places,
            directory: self.auth.directory_bytes(),
            lock_epochs: self.lock_epochs.values().map(|e| e.bytes()).sum(),
        };
    }

    /// Refuses a change that would grow the state by `growth` bytes past `max_state_bytes`.
    /// Changes that shrink it (deletes, revokes, releases) are never checked, so a full state
    /// can always be emptied.
    pub(super) fn check_room(&self, growth: u64) -> Result<(), Rejection> {
        let max = self.limits.max_state_bytes;
        let actual = self.footprint_bytes().saturating_add(growth);
        if growth > 0 && actual > max {
            return Err(Rejection::LimitExceeded {
                limit: LimitKind::StateBytes,
                max,
                actual,
            });
        }
        Ok(())
    }

    /// What writing `value` at `key` adds to the footprint (nothing if it shrinks the key).
    pub(super) fn put_growth(&self, key: &[u8], value: &[u8]) -> u64 {
        let old = self.kv.get(key).map_or(0, |s| key_bytes(key, &s.value));
        key_bytes(key, value).saturating_sub(old)
    }
}
