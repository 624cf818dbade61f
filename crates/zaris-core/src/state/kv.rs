//! Keys: put, delete, range selection, and binding keys to leases.

use std::collections::BTreeMap;
use std::ops::Bound;

use imbl::OrdMap;

use super::size::key_bytes;
use super::{RangeResult, State, Stored};
use crate::limits::LimitKind;
use crate::outcome::{Effects, Event, EventKind, Rejection};
use crate::types::{KeySelector, KeyValue, LeaseId, Revision};

/// The keys of a state as of one revision, apart from it: a copy that shares the state's key map
/// (a persistent B-tree, so taking it is O(1)), to read without holding the state's lock while
/// the state goes on applying.
#[derive(Clone, Debug)]
pub struct Keys {
    kv: OrdMap<Vec<u8>, Stored>,
}

/// Most bytes of keys and values one Range page returns: the page ends after the pair that
/// crosses it, with `more` set, however many its `limit` allowed (10,000 values of 1 MiB would
/// otherwise be gathered, then refused as too large to send).
pub const MAX_RANGE_PAGE_BYTES: u64 = 64 * 1024 * 1024;

impl Keys {
    /// Keys matching `selector` in key order, at most `limit` (0: no limit) and about
    /// [`MAX_RANGE_PAGE_BYTES`], with the count of all matches.
    pub fn range(&self, selector: &KeySelector, limit: u32) -> RangeResult {
        let mut kvs = Vec::new();
        let mut count = 0u64;
        let mut bytes = 0u64;
        for (key, stored) in select_in(&self.kv, selector) {
            count += 1;
            if (limit == 0 || kvs.len() < limit as usize) && bytes < MAX_RANGE_PAGE_BYTES {
                bytes = bytes.saturating_add((key.len() + stored.value.len()) as u64);
                kvs.push(stored.to_kv(key));
            }
        }
        RangeResult {
            more: (kvs.len() as u64) < count,
            kvs,
            count,
        }
    }
}

/// The stored keys of `kv` a selector matches, in key order.
fn select_in<'a>(
    kv: &'a OrdMap<Vec<u8>, Stored>,
    selector: &'a KeySelector,
) -> Box<dyn Iterator<Item = (&'a [u8], &'a Stored)> + 'a> {
    match selector {
        KeySelector::Key(key) => Box::new(
            kv.get_key_value(key.as_slice())
                .map(|(k, s)| (k.as_slice(), s))
                .into_iter(),
        ),
        KeySelector::Prefix(prefix) => Box::new(
            kv.range::<_, [u8]>((Bound::Included(prefix.as_slice()), Bound::Unbounded))
                .take_while(move |(k, _)| k.starts_with(prefix))
                .map(|(k, s)| (k.as_slice(), s)),
        ),
        KeySelector::Range { start, end } => {
            let upper = if end.is_empty() {
                Bound::Unbounded
            } else {
                Bound::Excluded(end.as_slice())
            };
            Box::new(
                kv.range::<_, [u8]>((Bound::Included(start.as_slice()), upper))
                    .map(|(k, s)| (k.as_slice(), s)),
            )
        }
    }
}

impl State {
    /// The keys as of now, to read apart from the state ([`Keys`]).
    pub fn keys(&self) -> Keys {
        Keys {
            kv: self.kv.clone(),
        }
    }

    /// The stored keys a selector matches, in key order.
    pub(super) fn select<'a>(
        &'a self,
        selector: &'a KeySelector,
    ) -> Box<dyn Iterator<Item = (&'a [u8], &'a Stored)> + 'a> {
        select_in(&self.kv, selector)
    }

    /// The keys bound to a lease, in key order.
    pub(super) fn keys_of(&self, lease: LeaseId) -> impl Iterator<Item = &[u8]> + '_ {
        self.lease_keys
            .range((lease, Vec::new())..)
            .take_while(move |(l, _)| *l == lease)
            .map(|(_, k)| k.as_slice())
    }

    /// Checks that `keys` may be bound to `lease`: it exists and stays within its key limit.
    /// Keys already bound to it do not count again.
    pub(super) fn check_can_bind<'k>(
        &self,
        lease: LeaseId,
        keys: impl Iterator<Item = &'k [u8]>,
    ) -> Result<(), Rejection> {
        if lease == LeaseId::NONE {
            return Ok(());
        }
        let Some(stored_lease) = self.leases.get(&lease) else {
            return Err(Rejection::LeaseNotFound(lease));
        };
        let mut new_keys: Vec<&[u8]> = keys
            .filter(|k| self.kv.get(*k).is_none_or(|s| s.lease != lease))
            .collect();
        new_keys.sort_unstable();
        new_keys.dedup();
        let total = stored_lease.key_count as u64 + new_keys.len() as u64;
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

    /// Writes a key (the caller has checked the lease); returns the previous key-value.
    pub(super) fn put(
        &mut self,
        rev: Revision,
        key: &[u8],
        value: &[u8],
        lease: LeaseId,
        fx: &mut Effects,
    ) -> Option<KeyValue> {
        let prev = self.kv.get(key).map(|s| s.to_kv(key));
        self.footprint.keys += key_bytes(key, value);
        if let Some(p) = &prev {
            self.footprint.keys -= key_bytes(key, &p.value);
        }
        let (create_revision, version) = match &prev {
            Some(p) => (p.create_revision, p.version + 1),
            None => (rev, 1),
        };
        let prev_lease = prev.as_ref().map_or(LeaseId::NONE, |p| p.lease);
        if prev_lease != lease {
            self.unbind(prev_lease, key);
            self.bind(lease, key);
        }
        let stored = Stored {
            value: value.to_vec(),
            create_revision,
            mod_revision: rev,
            version,
            lease,
        };
        fx.events.push(Event {
            kind: EventKind::Put,
            kv: stored.to_kv(key),
            prev: prev.clone(),
            lease,
        });
        self.kv.insert(key.to_vec(), stored);
        prev
    }

    /// Deletes the selected keys; returns them as they were.
    pub(super) fn delete(
        &mut self,
        rev: Revision,
        selector: &KeySelector,
        fx: &mut Effects,
    ) -> Vec<KeyValue> {
        let keys: Vec<Vec<u8>> = self.select(selector).map(|(k, _)| k.to_vec()).collect();
        keys.into_iter()
            .filter_map(|key| self.remove_key(rev, &key, EventKind::Delete, LeaseId::NONE, fx))
            .collect()
    }

    /// Removes one key, unbinding it, and records the event.
    pub(super) fn remove_key(
        &mut self,
        rev: Revision,
        key: &[u8],
        kind: EventKind,
        cause_lease: LeaseId,
        fx: &mut Effects,
    ) -> Option<KeyValue> {
        let stored = self.kv.remove(key)?;
        self.footprint.keys -= key_bytes(key, &stored.value);
        self.unbind(stored.lease, key);
        let prev = stored.to_kv(key);
        fx.events.push(Event {
            kind,
            kv: KeyValue {
                key: key.to_vec(),
                value: Vec::new(),
                create_revision: Revision::ZERO,
                mod_revision: rev,
                version: 0,
                lease: LeaseId::NONE,
            },
            prev: Some(prev.clone()),
            lease: cause_lease,
        });
        Some(prev)
    }

    fn bind(&mut self, lease: LeaseId, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&lease) {
            l.key_count += 1;
            self.lease_keys.insert((lease, key.to_vec()));
        }
    }

    fn unbind(&mut self, lease: LeaseId, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&lease) {
            l.key_count = l.key_count.saturating_sub(1);
            self.lease_keys.remove(&(lease, key.to_vec()));
        }
    }
}

/// Counts, per lease, the keys a list of puts would newly bind. Used to check a transaction's
/// branch as a whole before any of it applies.
pub(super) fn puts_by_lease<'a>(
    puts: impl Iterator<Item = (&'a [u8], LeaseId)>,
) -> BTreeMap<LeaseId, Vec<&'a [u8]>> {
    let mut by_lease: BTreeMap<LeaseId, Vec<&'a [u8]>> = BTreeMap::new();
    for (key, lease) in puts {
        if lease != LeaseId::NONE {
            by_lease.entry(lease).or_default().push(key);
        }
    }
    by_lease
}
