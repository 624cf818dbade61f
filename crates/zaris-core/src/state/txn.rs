//! Compare-then-else transactions: the compares pick a branch; the branch applies atomically.

use super::State;
use super::kv::puts_by_lease;
use crate::command::{Compare, CompareTarget, Txn, TxnOp};
use crate::outcome::{Effects, OpResult, Outcome, Response};
use crate::types::{KeySelector, KeyValue, LeaseId, Revision};

/// Most pairs all the reads of one Txn return together: the Range page size. Every member
/// applies the Txn and builds its answer, so unbounded reads would cost every member alike, again
/// on each replay of the entry.
pub const MAX_TXN_READ_KEYS: u64 = 10_000;
/// Most bytes of keys and values all the reads of one Txn return together; a read that reaches
/// it stops there (after the pair that crossed it) with `more` set, and later reads return
/// nothing with `more` set if anything matches.
pub const MAX_TXN_READ_BYTES: u64 = 64 * 1024 * 1024;

/// What is left of a Txn's [`MAX_TXN_READ_KEYS`] and [`MAX_TXN_READ_BYTES`].
struct ReadBudget {
    keys: u64,
    bytes: u64,
}

impl ReadBudget {
    fn new() -> Self {
        ReadBudget {
            keys: MAX_TXN_READ_KEYS,
            bytes: MAX_TXN_READ_BYTES,
        }
    }
}

impl State {
    pub(super) fn txn(&mut self, rev: Revision, txn: &Txn, fx: &mut Effects) -> Response {
        self.check_guard(txn.guard.as_ref())?;
        let succeeded = txn.compares.iter().all(|c| self.compare_holds(c));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };

        // Check the whole branch before applying any of it, so a rejection changes nothing. The
        // per-lease key count is checked conservatively: deletes earlier in the branch do not
        // free room for puts later in it.
        let puts = ops.iter().filter_map(|op| match op {
            TxnOp::Put { key, lease, .. } => Some((key.as_slice(), *lease)),
            _ => None,
        });
        for (lease, keys) in puts_by_lease(puts) {
            self.check_can_bind(lease, keys.into_iter())?;
        }
        // The quota, as conservatively: each put is charged as if nothing before it changed.
        let growth = ops
            .iter()
            .map(|op| match op {
                TxnOp::Put { key, value, .. } => self.put_growth(key, value),
                _ => 0,
            })
            .fold(0u64, u64::saturating_add);
        self.check_room(growth)?;

        let mut reads = ReadBudget::new();
        let results = ops
            .iter()
            .map(|op| match op {
                TxnOp::Put { key, value, lease } => OpResult::Put {
                    prev: self.put(rev, key, value, *lease, fx),
                },
                TxnOp::Delete { selector } => OpResult::Deleted {
                    deleted: self.delete(rev, selector, fx).len() as u64,
                },
                TxnOp::Get { selector, limit } => {
                    let (kvs, more) = self.read_within(selector, *limit, &mut reads);
                    OpResult::Got { kvs, more }
                }
            })
            .collect();
        Ok(Outcome::Txn { succeeded, results })
    }

    /// One read of a Txn: up to `limit` pairs (0: no limit of its own) and what is left of the
    /// Txn's budget, whichever ends first, and whether more matched. It walks one pair past what
    /// it returns, never the whole selection: a Txn reports no count.
    fn read_within(
        &self,
        selector: &KeySelector,
        limit: u32,
        budget: &mut ReadBudget,
    ) -> (Vec<KeyValue>, bool) {
        let mut kvs = Vec::new();
        let mut matching = self.select(selector).peekable();
        while let Some((key, stored)) = matching.next_if(|_| {
            (limit == 0 || kvs.len() < limit as usize) && budget.keys > 0 && budget.bytes > 0
        }) {
            budget.keys -= 1;
            budget.bytes = budget
                .bytes
                .saturating_sub((key.len() + stored.value.len()) as u64);
            kvs.push(stored.to_kv(key));
        }
        let more = matching.peek().is_some();
        (kvs, more)
    }

    fn compare_holds(&self, compare: &Compare) -> bool {
        let stored = self.kv.get(&compare.key);
        let op = compare.op;
        match &compare.target {
            CompareTarget::Value(expected) => {
                stored.is_some_and(|s| op.holds(s.value.as_slice(), expected.as_slice()))
            }
            CompareTarget::Version(v) => op.holds(&stored.map_or(0, |s| s.version), v),
            CompareTarget::CreateRevision(r) => {
                op.holds(&stored.map_or(Revision::ZERO, |s| s.create_revision), r)
            }
            CompareTarget::ModRevision(r) => {
                op.holds(&stored.map_or(Revision::ZERO, |s| s.mod_revision), r)
            }
            CompareTarget::Lease(l) => op.holds(&stored.map_or(LeaseId::NONE, |s| s.lease), l),
        }
    }
}
