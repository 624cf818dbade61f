//! Lock epochs: when each lease last unlocked each lock, so that a Lock request sent before that
//! Unlock (a wait given back before its Lock arrived) changes nothing.
//!
//! Kept per lock name, since a lease may hold and release many locks at once (one session lease
//! for a worker's locks, as etcd's sessions have): a release of one lock must not refuse the
//! Lock of another that is on its way. The names a lease remembers are bounded: past
//! [`MAX_NAMED_EPOCHS`], the oldest is folded into the lease's floor, which counts for every
//! name, so a forgotten name is refused at least as much as it was (never less). A lease's
//! epochs go with the lease.

use serde::{Deserialize, Serialize};

use super::State;
use crate::types::{LeaseId, Revision};

/// Lock names whose epoch a lease keeps apart; older ones count as unlocked at the floor.
pub const MAX_NAMED_EPOCHS: usize = 16;

/// Charged per remembered name beyond its bytes: its revision and lengths.
const NAMED_EPOCH_OVERHEAD_BYTES: u64 = 24;

/// The charge for remembering when lock `name` was last unlocked.
pub(super) fn named_epoch_bytes(name: &str) -> u64 {
    name.len() as u64 + NAMED_EPOCH_OVERHEAD_BYTES
}

/// One lease's lock epochs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LockEpochs {
    /// Every name not in `named` was last unlocked at or before this revision.
    floor: Revision,
    /// The last Unlock of each of these names, at most [`MAX_NAMED_EPOCHS`] of them.
    named: Vec<(String, Revision)>,
}

impl LockEpochs {
    /// The revision at or before which `name` was last unlocked by the lease.
    fn of(&self, name: &str) -> Revision {
        let named = self.named.iter().find(|(n, _)| n == name);
        named.map_or(self.floor, |(_, at)| (*at).max(self.floor))
    }

    /// What the quota charges for the names (the floor is within the lease's own charge).
    pub(super) fn bytes(&self) -> u64 {
        self.named.iter().map(|(n, _)| named_epoch_bytes(n)).sum()
    }

    /// Checks the shape: few enough names, each once, none unlocked after `last_applied` or
    /// before the lease was granted.
    pub(super) fn check(&self, granted: Revision, last_applied: Revision) -> Result<(), String> {
        if self.named.len() > MAX_NAMED_EPOCHS {
            return Err(format!("{} named lock epochs", self.named.len()));
        }
        let mut names: Vec<&str> = self.named.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.len() != self.named.len() {
            return Err("a lock name with two epochs".into());
        }
        let revisions = self.named.iter().map(|(_, at)| *at);
        let outside = |at: Revision| at > last_applied || at < granted;
        if revisions.clone().any(outside) || (self.floor != Revision::ZERO && outside(self.floor)) {
            return Err("a lock epoch outside the lease's life".into());
        }
        Ok(())
    }
}

impl State {
    /// Whether a Lock of `name` by `lease`, sent after revision `sent_after`, was overtaken by
    /// an Unlock of that lock by the lease.
    pub(super) fn lock_overtaken(&self, lease: LeaseId, name: &str, sent_after: Revision) -> bool {
        self.lock_epochs
            .get(&lease)
            .is_some_and(|epochs| epochs.of(name) > sent_after)
    }

    /// `lease` unlocked `name` (released it, or withdrew from its queue, whatever it found) at
    /// `rev`. Remembered for live leases only. A name that would grow the state past its quota
    /// is not remembered apart: the floor moves instead, which refuses every earlier Lock of the
    /// lease (a full state never refuses an Unlock, and costs at worst a Lock asked again).
    pub(super) fn note_unlock(&mut self, lease: LeaseId, name: &str, rev: Revision) {
        if !self.leases.contains_key(&lease) {
            return;
        }
        let remembered = self.lock_epochs.get_mut(&lease);
        if let Some(slot) =
            remembered.and_then(|epochs| epochs.named.iter_mut().find(|(n, _)| n == name))
        {
            slot.1 = rev;
            return;
        }
        let fits = self.check_room(named_epoch_bytes(name)).is_ok();
        let epochs = self.lock_epochs.entry(lease).or_default();
        if !fits {
            epochs.floor = rev;
            return;
        }
        if epochs.named.len() >= MAX_NAMED_EPOCHS {
            // The oldest (the first of them on a tie, so every replica picks the same).
            let oldest = (0..epochs.named.len())
                .min_by_key(|&i| epochs.named[i].1)
                .unwrap_or(0);
            let (forgotten, at) = epochs.named.remove(oldest);
            epochs.floor = epochs.floor.max(at);
            self.footprint.lock_epochs -= named_epoch_bytes(&forgotten);
        }
        epochs.named.push((name.to_owned(), rev));
        self.footprint.lock_epochs += named_epoch_bytes(name);
    }

    /// Forgets the epochs of a lease that ended.
    pub(super) fn forget_lock_epochs(&mut self, lease: LeaseId) {
        if let Some(epochs) = self.lock_epochs.remove(&lease) {
            self.footprint.lock_epochs -= epochs.bytes();
        }
    }
}
