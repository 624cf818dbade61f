//! The bounded table of remembered request ids that makes retried writes safe.
//!
//! It is part of the replicated state: eviction depends only on the log, so every node remembers
//! the same ids. The oldest entry is evicted first.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::outcome::Response;
use crate::types::{RequestId, Revision};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dedup {
    by_id: BTreeMap<RequestId, (Revision, Response)>,
    /// Applied revision → the id remembered at it, oldest first (one request per entry).
    by_revision: BTreeMap<Revision, RequestId>,
}

impl Dedup {
    pub fn get(&self, id: &RequestId) -> Option<&Response> {
        self.by_id.get(id).map(|(_, response)| response)
    }

    pub fn insert(
        &mut self,
        id: RequestId,
        revision: Revision,
        response: Response,
        capacity: usize,
    ) {
        self.shrink_to(capacity.max(1) - 1);
        self.by_id.insert(id, (revision, response));
        self.by_revision.insert(revision, id);
    }

    /// Evicts the oldest entries until at most `len` remain.
    pub fn shrink_to(&mut self, len: usize) {
        while self.by_id.len() > len {
            match self.by_revision.pop_first() {
                Some((_, oldest)) => {
                    self.by_id.remove(&oldest);
                }
                None => break,
            }
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub(super) fn check(&self, capacity: usize, last_applied: Revision) -> Result<(), String> {
        if self.by_id.len() != self.by_revision.len() || self.by_id.len() > capacity.max(1) {
            return Err(format!(
                "dedup table sizes disagree or exceed capacity: {} / {} / {capacity}",
                self.by_id.len(),
                self.by_revision.len()
            ));
        }
        for (revision, id) in &self.by_revision {
            if *revision > last_applied || self.by_id.get(id).map(|(r, _)| r) != Some(revision) {
                return Err(format!("dedup entry {id:?} at {revision} is inconsistent"));
            }
        }
        Ok(())
    }
}
