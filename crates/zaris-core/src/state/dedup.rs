//! The bounded table of remembered request ids that makes retried writes safe.
//!
//! It is part of the replicated state: eviction depends only on the log, so every node remembers
//! the same ids. It is bounded by entries (`dedup_capacity`) and by bytes (`dedup_max_bytes`),
//! and the oldest entry is evicted first.
//!
//! **What eviction must not do** is let a retry apply a second time. Every identified request
//! carries `seen_revision`: a revision its client had seen committed before it first sent the
//! request, so the request cannot have been applied at or below it. The table remembers
//! `forgotten_through`, the highest revision it ever evicted; every remembered entry is above it.
//! A request whose id is not remembered and whose `seen_revision` is below `forgotten_through` may
//! have been applied at a revision the table has since forgotten: it is refused
//! ([`Rejection::RequestIdForgotten`]), never applied again. (The Raft thesis, §6.3, bounds its
//! client sessions with the lowest sequence number a client still awaits; a revision does the
//! same job without per-client state.)
//!
//! A response too large to keep (over 1/256 of `dedup_max_bytes`, e.g. a transaction's reads)
//! is remembered as [`Remembered::Applied`]: a retry learns that the request was applied, and at
//! which revision, but not its response.

use imbl::{OrdMap, OrdSet};

use serde::{Deserialize, Serialize};

use crate::outcome::{Rejection, Response};
use crate::types::{RequestId, Revision};

/// What the table keeps per request: the first response, or only that it applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Remembered {
    Response(Response),
    /// The response was too large to keep.
    Applied,
}

/// Bookkeeping bytes charged per entry on top of its response (keys, revisions, map nodes).
pub const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// How a request id is looked up: its client and sequence number (`seen_revision` is not part of
/// its identity).
type Key = (u64, u64);

fn key(id: &RequestId) -> Key {
    (id.client_id, id.seq)
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dedup {
    #[serde(with = "crate::state::persistent::ord_map")]
    by_id: OrdMap<Key, (Revision, Remembered)>,
    /// (Applied revision, id), oldest first. A batch entry applies many requests at one
    /// revision. (Encoded exactly like the `BTreeMap<Revision, Key>` it was while every entry
    /// held one request: a length, then the pairs in order.)
    #[serde(with = "crate::state::persistent::ord_set")]
    by_revision: OrdSet<(Revision, Key)>,
    /// Charged bytes of all entries.
    bytes: u64,
    /// The highest revision of any evicted entry.
    forgotten_through: Revision,
}

impl Dedup {
    /// What a request with this id should answer without being applied: its remembered response,
    /// or a refusal if its first attempt may have been applied and forgotten. `None`: apply it.
    pub fn answer(&self, id: &RequestId) -> Option<Response> {
        match self.by_id.get(&key(id)) {
            Some((_, Remembered::Response(response))) => Some(response.clone()),
            Some((revision, Remembered::Applied)) => Some(Err(Rejection::RequestIdForgotten {
                forgotten_through: self.forgotten_through,
                applied_at: Some(*revision),
            })),
            None if id.seen_revision < self.forgotten_through => {
                Some(Err(Rejection::RequestIdForgotten {
                    forgotten_through: self.forgotten_through,
                    applied_at: None,
                }))
            }
            None => None,
        }
    }

    /// The remembered response for an id, if the table still has it whole.
    pub fn get(&self, id: &RequestId) -> Option<&Response> {
        match self.by_id.get(&key(id)) {
            Some((_, Remembered::Response(response))) => Some(response),
            _ => None,
        }
    }

    /// Remembers the response of the request applied at `revision`, evicting the oldest entries
    /// until both bounds hold.
    pub fn insert(
        &mut self,
        id: RequestId,
        revision: Revision,
        response: Response,
        capacity: usize,
        max_bytes: u64,
    ) {
        let remembered = if response_bytes(&response) > max_bytes / 256 {
            Remembered::Applied
        } else {
            Remembered::Response(response)
        };
        self.bytes += entry_bytes(&remembered);
        let key = key(&id);
        if let Some((old_revision, old)) = self.by_id.insert(key, (revision, remembered)) {
            // Only a client reusing an id for another request gets here: keep the newest.
            self.bytes -= entry_bytes(&old);
            self.by_revision.remove(&(old_revision, key));
        }
        self.by_revision.insert((revision, key));
        self.shrink_to(capacity, max_bytes);
    }

    /// Evicts the oldest entries until at most `capacity` remain and they hold at most
    /// `max_bytes`. The requests of one revision (a batch) go together, so that every entry left
    /// is above `forgotten_through`.
    pub fn shrink_to(&mut self, capacity: usize, max_bytes: u64) {
        while self.by_id.len() > capacity.max(1) || self.bytes > max_bytes {
            let Some(&(revision, _)) = self.by_revision.get_min() else {
                break;
            };
            while let Some(&(at, oldest)) = self.by_revision.get_min()
                && at == revision
            {
                self.by_revision.remove_min();
                if let Some((_, remembered)) = self.by_id.remove(&oldest) {
                    self.bytes -= entry_bytes(&remembered);
                }
            }
            self.forgotten_through = self.forgotten_through.max(revision);
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Charged bytes of all entries.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The highest revision whose request id may have been forgotten.
    pub fn forgotten_through(&self) -> Revision {
        self.forgotten_through
    }

    pub(super) fn check(
        &self,
        capacity: usize,
        max_bytes: u64,
        last_applied: Revision,
    ) -> Result<(), String> {
        if self.by_id.len() != self.by_revision.len() || self.by_id.len() > capacity.max(1) {
            return Err(format!(
                "dedup table sizes disagree or exceed capacity: {} / {} / {capacity}",
                self.by_id.len(),
                self.by_revision.len()
            ));
        }
        let charged: u64 = self.by_id.values().map(|(_, r)| entry_bytes(r)).sum();
        if charged != self.bytes || self.bytes > max_bytes {
            return Err(format!(
                "dedup table bytes: counted {}, charged {charged}, bound {max_bytes}",
                self.bytes
            ));
        }
        for (revision, id) in &self.by_revision {
            if *revision > last_applied
                || *revision <= self.forgotten_through
                || self.by_id.get(id).map(|(r, _)| r) != Some(revision)
            {
                return Err(format!("dedup entry {id:?} at {revision} is inconsistent"));
            }
        }
        Ok(())
    }
}

/// The bytes one remembered entry is charged.
fn entry_bytes(remembered: &Remembered) -> u64 {
    ENTRY_OVERHEAD_BYTES
        + match remembered {
            Remembered::Response(response) => response_bytes(response),
            Remembered::Applied => 0,
        }
}

/// An estimate of a response's size in memory: the bytes of every key and value it carries, plus
/// a fixed cost per item. Deterministic (it depends on the response alone), so every replica
/// evicts the same entries.
pub fn response_bytes(response: &Response) -> u64 {
    use crate::outcome::{OpResult, Outcome};
    use crate::types::KeyValue;
    const ITEM_BYTES: u64 = 48;
    let kv = |kv: &KeyValue| ITEM_BYTES + kv.key.len() as u64 + kv.value.len() as u64;
    let kvs = |kvs: &[KeyValue]| kvs.iter().map(kv).sum::<u64>();
    match response {
        Err(rejection) => ITEM_BYTES + rejection.to_string().len() as u64,
        Ok(outcome) => match outcome {
            Outcome::Put { prev } => ITEM_BYTES + prev.as_ref().map_or(0, kv),
            Outcome::Deleted { prev, .. } => ITEM_BYTES + kvs(prev),
            Outcome::Txn { results, .. } => {
                ITEM_BYTES
                    + results
                        .iter()
                        .map(|result| match result {
                            OpResult::Put { prev } => ITEM_BYTES + prev.as_ref().map_or(0, kv),
                            OpResult::Deleted { .. } => ITEM_BYTES,
                            OpResult::Got { kvs: got, .. } => ITEM_BYTES + kvs(got),
                        })
                        .sum::<u64>()
            }
            Outcome::Renewed { renewed, not_found } => {
                ITEM_BYTES + 16 * renewed.len() as u64 + 8 * not_found.len() as u64
            }
            Outcome::Expired { revoked, skipped } => {
                ITEM_BYTES + 8 * (revoked.len() + skipped.len()) as u64
            }
            Outcome::Lock(_) | Outcome::Cancelled(_) => ITEM_BYTES + 16,
            // A batch carries no request id, so it is never remembered; counted all the same.
            Outcome::Batch(responses) => {
                ITEM_BYTES + responses.iter().map(response_bytes).sum::<u64>()
            }
            Outcome::Granted { .. }
            | Outcome::Revoked { .. }
            | Outcome::Unlocked { .. }
            | Outcome::LimitsSet
            | Outcome::AuthChanged
            | Outcome::Ignored => ITEM_BYTES,
        },
    }
}
