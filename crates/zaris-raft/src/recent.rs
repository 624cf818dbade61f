//! The newest log entries, kept decoded beside the log.
//!
//! Each entry is read back moments after its append: on the leader by the replication to each
//! follower and by the state machine, on a follower by the state machine. From sled, a read
//! walks the tree and decodes the record: about 9,000 to 14,000 instructions per read, a tenth
//! of a node's instructions per 1-client put (callgrind, docs/performance.md). From here it is a
//! clone. Only what is certain is answered: a range that is not wholly here is read from sled.
//!
//! Invariant: the entries held have consecutive indexes, and the last of them is the log's last
//! entry (every append, truncation and purge of the log goes through here as well). So a range
//! open at its end ("from `start` on") can be answered too.

use std::collections::VecDeque;

/// Entries kept at most, and their encoded bytes at most (a few large entries, or many small).
pub(crate) const MAX_RECENT_ENTRIES: usize = 1_024;
pub(crate) const MAX_RECENT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug)]
struct Held<T> {
    index: u64,
    entry: T,
    encoded_bytes: usize,
}

#[derive(Debug)]
pub(crate) struct RecentEntries<T> {
    held: VecDeque<Held<T>>,
    bytes: usize,
}

impl<T> Default for RecentEntries<T> {
    fn default() -> Self {
        RecentEntries {
            held: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<T: Clone> RecentEntries<T> {
    /// `entry`, at `index`, was appended to the log (and is now its last entry).
    pub(crate) fn appended(&mut self, index: u64, entry: T, encoded_bytes: usize) {
        if self.held.back().is_some_and(|last| last.index + 1 != index) {
            // Not the next entry: the log was cut back or started elsewhere, so what is held
            // no longer ends at the log's end.
            self.clear();
        }
        self.held.push_back(Held {
            index,
            entry,
            encoded_bytes,
        });
        self.bytes += encoded_bytes;
        while self.held.len() > MAX_RECENT_ENTRIES || self.bytes > MAX_RECENT_BYTES {
            self.pop_oldest();
        }
    }

    /// The log is about to lose every entry from index `from` on.
    pub(crate) fn truncating_from(&mut self, from: u64) {
        while self.held.back().is_some_and(|last| last.index >= from) {
            self.pop_newest();
        }
    }

    /// The log is about to lose every entry up to index `through`.
    pub(crate) fn purging_through(&mut self, through: u64) {
        while self
            .held
            .front()
            .is_some_and(|first| first.index <= through)
        {
            self.pop_oldest();
        }
    }

    /// Forgets everything (an append failed half way: the log's end is no longer known here).
    pub(crate) fn clear(&mut self) {
        self.held.clear();
        self.bytes = 0;
    }

    /// The entries from index `start` up to `end` (exclusive; `None`: to the log's end), if
    /// every one of them is held; `None` if any is not.
    pub(crate) fn get(&self, start: u64, end: Option<u64>) -> Option<Vec<T>> {
        let first = self.held.front()?.index;
        let after_last = self.held.back()?.index + 1;
        if start < first {
            return None;
        }
        let end = match end {
            Some(end) if end > after_last => return None,
            Some(end) => end,
            None => after_last,
        };
        if start >= end {
            return Some(Vec::new());
        }
        let from = usize::try_from(start - first).ok()?;
        let count = usize::try_from(end - start).ok()?;
        Some(
            self.held
                .range(from..from + count)
                .map(|held| held.entry.clone())
                .collect(),
        )
    }

    fn pop_oldest(&mut self) {
        if let Some(first) = self.held.pop_front() {
            self.bytes -= first.encoded_bytes;
        }
    }

    fn pop_newest(&mut self) {
        if let Some(last) = self.held.pop_back() {
            self.bytes -= last.encoded_bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn filled(indexes: std::ops::Range<u64>) -> RecentEntries<u64> {
        let mut recent = RecentEntries::default();
        for index in indexes {
            recent.appended(index, index * 10, 1);
        }
        recent
    }

    #[test]
    fn answers_only_ranges_wholly_held() {
        let recent = filled(5..10);
        assert_eq!(recent.get(5, Some(7)), Some(vec![50, 60]));
        assert_eq!(recent.get(7, None), Some(vec![70, 80, 90]));
        assert_eq!(recent.get(9, Some(10)), Some(vec![90]));
        assert_eq!(recent.get(10, None), Some(vec![]), "past the log's end");
        assert_eq!(recent.get(4, Some(6)), None, "4 is not held");
        assert_eq!(recent.get(8, Some(11)), None, "10 is not in the log");
        assert_eq!(RecentEntries::<u64>::default().get(0, None), None);
    }

    #[test]
    fn an_entry_that_does_not_follow_starts_afresh() {
        let mut recent = filled(5..10);
        recent.appended(20, 200, 1);
        assert_eq!(recent.get(9, None), None);
        assert_eq!(recent.get(20, None), Some(vec![200]));
    }

    #[test]
    fn truncation_and_purge_drop_their_ends() {
        let mut recent = filled(5..10);
        recent.truncating_from(8);
        assert_eq!(recent.get(5, None), Some(vec![50, 60, 70]));
        recent.appended(8, 81, 1);
        assert_eq!(recent.get(7, None), Some(vec![70, 81]));
        recent.purging_through(6);
        assert_eq!(recent.get(6, None), None);
        assert_eq!(recent.get(7, None), Some(vec![70, 81]));
        recent.truncating_from(0);
        assert_eq!(recent.get(7, None), None);
    }

    #[test]
    fn holds_at_most_its_bounds() {
        let recent = filled(0..(MAX_RECENT_ENTRIES as u64 + 10));
        assert_eq!(recent.held.len(), MAX_RECENT_ENTRIES);
        assert_eq!(recent.get(9, None), None);
        assert!(recent.get(10, None).is_some());

        let mut recent = RecentEntries::default();
        for index in 0..10 {
            recent.appended(index, index, MAX_RECENT_BYTES / 4);
        }
        assert_eq!(recent.held.len(), 4);
        assert_eq!(recent.bytes, MAX_RECENT_BYTES);
        recent.appended(10, 10, MAX_RECENT_BYTES + 1);
        assert_eq!(recent.held.len(), 0, "an entry over the bound is not kept");
        assert_eq!(recent.bytes, 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Appends entries after the log's last (or after a gap, as a log starting elsewhere).
        Append {
            count: u64,
            gap: bool,
        },
        TruncateFrom(u64),
        PurgeThrough(u64),
        Clear,
        Get {
            start: u64,
            len: Option<u64>,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1..40u64, proptest::bool::weighted(0.1))
                .prop_map(|(count, gap)| Op::Append { count, gap }),
            1 => (0..200u64).prop_map(Op::TruncateFrom),
            1 => (0..200u64).prop_map(Op::PurgeThrough),
            1 => Just(Op::Clear),
            4 => (0..200u64, proptest::option::of(0..50u64))
                .prop_map(|(start, len)| Op::Get { start, len }),
        ]
    }

    proptest! {
        /// Whatever the history of appends, truncations and purges, an answer is exactly what
        /// the log holds for that range.
        #[test]
        fn every_answer_is_what_the_log_holds(ops in proptest::collection::vec(op(), 1..120)) {
            let mut log = BTreeMap::<u64, u64>::new();
            let mut recent = RecentEntries::default();
            let mut version = 0;
            for op in ops {
                match op {
                    Op::Append { count, gap } => {
                        let mut next = log.keys().next_back().map_or(0, |last| last + 1);
                        if gap {
                            // A log that starts after a snapshot: nothing before it is kept.
                            log.clear();
                            next += 7;
                        }
                        for index in next..next + count {
                            version += 1;
                            log.insert(index, version);
                            recent.appended(index, version, 1_000 + (index as usize % 7) * 500);
                        }
                    }
                    Op::TruncateFrom(from) => {
                        recent.truncating_from(from);
                        log.retain(|index, _| *index < from);
                    }
                    Op::PurgeThrough(through) => {
                        recent.purging_through(through);
                        log.retain(|index, _| *index > through);
                    }
                    Op::Clear => recent.clear(),
                    Op::Get { start, len } => {
                        let end = len.map(|len| start + len);
                        if let Some(answer) = recent.get(start, end) {
                            let expected: Vec<u64> = log
                                .range(start..end.unwrap_or(u64::MAX))
                                .map(|(_, v)| *v)
                                .collect();
                            prop_assert_eq!(answer, expected);
                        }
                    }
                }
                prop_assert!(recent.held.len() <= MAX_RECENT_ENTRIES);
                prop_assert!(recent.bytes <= MAX_RECENT_BYTES);
                prop_assert_eq!(recent.bytes, recent.held.iter().map(|h| h.encoded_bytes).sum::<usize>());
            }
        }
    }
}
