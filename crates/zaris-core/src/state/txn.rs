//! Compare-then-else transactions: the compares pick a branch; the branch applies atomically.

use super::State;
use super::kv::puts_by_lease;
use crate::command::{Compare, CompareTarget, Txn, TxnOp};
use crate::outcome::{Effects, OpResult, Outcome, Response};
use crate::types::{LeaseId, Revision};

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
                    let range = self.range(selector, *limit);
                    OpResult::Got {
                        kvs: range.kvs,
                        more: range.more,
                    }
                }
            })
            .collect();
        Ok(Outcome::Txn { succeeded, results })
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
