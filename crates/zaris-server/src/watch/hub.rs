//! The node's watch history: the events of recently applied entries, shared by every watcher.
//!
//! There is no MVCC history in the state machine, so a watcher that starts in the past, or reads
//! more slowly than entries apply, reads from here. The ring is bounded by an event count and a
//! byte estimate; a reader that wants an evicted revision gets a [`HistoryGap`] and its watch is
//! canceled, instead of the node buffering on its behalf.
//!
//! Entries older than the newest [`UNPACKED_ENTRIES`] are kept packed (encoded, one allocation
//! each): a decoded event with its own key and value allocations takes several times the bytes
//! of its encoding, and a full history of small puts was a fifth of a node's memory. The watchers
//! that keep up read the newest entries, decoded once and shared; one reading further back
//! decodes what it reads, outside the lock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tracing::error;
use zaris_core::{Event, KeyValue, Revision, codec};

/// Fixed cost counted per event on top of its bytes, so that many tiny events are bounded too.
const EVENT_OVERHEAD_BYTES: usize = std::mem::size_of::<Event>();

/// How many of the newest entries keep their events decoded besides packed.
const UNPACKED_ENTRIES: usize = 1_024;

/// An entry whose events are larger than this ([`event_bytes`]) is kept packed only, from the
/// start: keeping both forms of the newest entries costs at most
/// `UNPACKED_ENTRIES * UNPACKED_ENTRY_MAX_BYTES` (16 MiB) on top of the history's bound.
const UNPACKED_ENTRY_MAX_BYTES: usize = 16 * 1024;

/// The events of one applied entry.
#[derive(Debug)]
struct Entry {
    revision: Revision,
    event_count: usize,
    /// What the bounds count: [`event_bytes`] of each event, not what they take here.
    bytes: usize,
    events: Stored,
}

/// How an entry holds its events.
#[derive(Debug)]
enum Stored {
    /// Among the newest entries: decoded for the readers that keep up, packed for later.
    Both {
        unpacked: Arc<[Event]>,
        packed: Arc<[u8]>,
    },
    /// Encoded (`codec::encode`) only.
    Packed(Arc<[u8]>),
    /// Decoded only, for good: encoding them failed.
    Unpacked(Arc<[Event]>),
}

impl Entry {
    fn new(revision: Revision, events: &[Event]) -> Self {
        let bytes = events.iter().map(event_bytes).sum();
        let events_stored = match codec::encode(events) {
            Ok(packed) if bytes > UNPACKED_ENTRY_MAX_BYTES => Stored::Packed(Arc::from(packed)),
            Ok(packed) => Stored::Both {
                unpacked: Arc::from(events),
                packed: Arc::from(packed),
            },
            Err(e) => {
                error!(revision = revision.get(), "cannot pack watch events: {e}");
                Stored::Unpacked(Arc::from(events))
            }
        };
        Entry {
            revision,
            event_count: events.len(),
            bytes,
            events: events_stored,
        }
    }

    /// Keeps only the packed events; returns the decoded ones, to be dropped outside the lock.
    fn pack(&mut self) -> Option<Arc<[Event]>> {
        let Stored::Both { unpacked, packed } = &self.events else {
            return None;
        };
        let unpacked = unpacked.clone();
        self.events = Stored::Packed(packed.clone());
        Some(unpacked)
    }

    /// The events as read under the lock (shared, not copied).
    fn events(&self) -> Events {
        match &self.events {
            Stored::Both { unpacked, .. } | Stored::Unpacked(unpacked) => {
                Events::Unpacked(unpacked.clone())
            }
            Stored::Packed(packed) => Events::Packed(packed.clone()),
        }
    }
}

/// An entry's events as read under the lock, decoded after it is released.
enum Events {
    Unpacked(Arc<[Event]>),
    Packed(Arc<[u8]>),
}

#[derive(Debug)]
struct History {
    /// Only entries that had events, in revision order.
    entries: VecDeque<Entry>,
    event_count: usize,
    bytes: usize,
    /// The last applied revision seen, events or not.
    head: Revision,
    /// Every event with a revision at or above this one is in `entries`.
    oldest_available: Revision,
    /// `head` at the last [`WatchHub::reset`]: events at or below it never passed through here.
    restored_head: Revision,
}

/// The bounded history plus a wake-up for the stream tasks that read it.
#[derive(Debug)]
pub struct WatchHub {
    history: Mutex<History>,
    max_events: usize,
    max_bytes: usize,
    /// Carries the head as of the last publish with events (or reset). Entries without events do
    /// not wake anyone: renewals alone would otherwise wake every watch stream per entry.
    notify: watch::Sender<Revision>,
}

/// Entries read from the history: at most one response's worth.
#[derive(Debug)]
pub struct HistoryRead {
    /// `(revision, events)` in revision order, whole entries only.
    pub entries: Vec<(Revision, Arc<[Event]>)>,
    /// Where the next read continues: `head + 1` once everything up to the head was read.
    pub next: Revision,
}

/// The requested revision is no longer (or never was) in the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryGap {
    pub oldest_available: Revision,
    /// Some of the missing events were dropped by a snapshot install rather than by the history's
    /// bounds: the reader was not slow, the node skipped ahead.
    pub lost_to_restore: bool,
}

impl std::fmt::Display for HistoryGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "compacted, oldest = {}", self.oldest_available)
    }
}

fn event_bytes(event: &Event) -> usize {
    let kv_bytes = |kv: &KeyValue| kv.key.len() + kv.value.len();
    EVENT_OVERHEAD_BYTES + kv_bytes(&event.kv) + event.prev.as_ref().map_or(0, kv_bytes)
}

impl WatchHub {
    /// An empty history at revision 0. Both bounds must be at least 1.
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        WatchHub {
            history: Mutex::new(History {
                entries: VecDeque::new(),
                event_count: 0,
                bytes: 0,
                head: Revision::ZERO,
                oldest_available: Revision::new(1),
                restored_head: Revision::ZERO,
            }),
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
            notify: watch::Sender::new(Revision::ZERO),
        }
    }

    fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the entry applied at `revision`. Called for every applied entry, in apply order;
    /// replays (at or below the head) are ignored.
    ///
    /// The newest entry is always kept, even alone over the bounds, so one large revision (a
    /// prefix delete, a big expiry) does not make every watcher miss it.
    pub fn publish(&self, revision: Revision, events: &[Event]) {
        // Copy and pack outside the lock: this runs on the apply path.
        let entry = (!events.is_empty()).then(|| Entry::new(revision, events));
        let mut evicted = Vec::new();
        let mut decoded = None;
        {
            let mut history = self.history();
            if revision <= history.head {
                return;
            }
            history.head = revision;
            let Some(entry) = entry else {
                return;
            };
            history.event_count += entry.event_count;
            history.bytes += entry.bytes;
            history.entries.push_back(entry);
            let len = history.entries.len();
            if len > UNPACKED_ENTRIES {
                decoded = history.entries[len - 1 - UNPACKED_ENTRIES].pack();
            }
            while (history.event_count > self.max_events || history.bytes > self.max_bytes)
                && history.entries.len() > 1
            {
                let Some(old) = history.entries.pop_front() else {
                    break;
                };
                history.event_count -= old.event_count;
                history.bytes -= old.bytes;
                history.oldest_available = old.revision.next();
                evicted.push(old);
            }
        }
        // Freeing evicted events may take a while; not under the lock.
        drop(evicted);
        drop(decoded);
        self.notify.send_replace(revision);
    }

    /// Forgets everything after the state was replaced by a snapshot at `head`: the events that
    /// led there never passed through the history.
    pub fn reset(&self, head: Revision) {
        let dropped = {
            let mut history = self.history();
            history.event_count = 0;
            history.bytes = 0;
            history.head = head;
            history.oldest_available = head.next();
            history.restored_head = head;
            std::mem::take(&mut history.entries)
        };
        drop(dropped);
        self.notify.send_replace(head);
    }

    /// The last applied revision seen.
    pub fn head(&self) -> Revision {
        self.history().head
    }

    /// `(head, oldest_available)`, read together.
    pub fn position(&self) -> (Revision, Revision) {
        let history = self.history();
        (history.head, history.oldest_available)
    }

    /// A receiver that sees a change whenever there may be new events to read.
    pub fn subscribe(&self) -> watch::Receiver<Revision> {
        self.notify.subscribe()
    }

    /// The entries with revision in `[from, head]`, whole, stopping before the entry that would
    /// take the read past `max_events` or `max_bytes` (the first entry is always included).
    pub fn read(
        &self,
        from: Revision,
        max_events: usize,
        max_bytes: usize,
    ) -> Result<HistoryRead, HistoryGap> {
        let (read, next) = {
            let history = self.history();
            if from < history.oldest_available {
                return Err(HistoryGap {
                    oldest_available: history.oldest_available,
                    lost_to_restore: from <= history.restored_head,
                });
            }
            let start = history.entries.partition_point(|e| e.revision < from);
            let mut read = Vec::new();
            let (mut events, mut bytes) = (0, 0);
            let mut next = history.head.next().max(from);
            for entry in history.entries.range(start..) {
                if !read.is_empty()
                    && (events + entry.event_count > max_events || bytes + entry.bytes > max_bytes)
                {
                    next = entry.revision;
                    break;
                }
                events += entry.event_count;
                bytes += entry.bytes;
                read.push((entry.revision, entry.events()));
            }
            (read, next)
        };
        let mut entries = Vec::with_capacity(read.len());
        for (revision, events) in read {
            let events = match events {
                Events::Unpacked(events) => events,
                Events::Packed(packed) => {
                    match codec::decode_own::<Vec<Event>>(&packed, usize::MAX) {
                        Ok(events) => Arc::from(events),
                        // Cannot happen (this process packed them); were it to, the reader is told its
                        // events are gone, as if evicted, rather than skipping them silently.
                        Err(e) => {
                            error!(revision = revision.get(), "cannot unpack watch events: {e}");
                            return Err(HistoryGap {
                                oldest_available: revision.next(),
                                lost_to_restore: false,
                            });
                        }
                    }
                }
            };
            entries.push((revision, events));
        }
        Ok(HistoryRead { entries, next })
    }
}

#[cfg(test)]
mod tests {
    use zaris_core::{EventKind, LeaseId};

    use super::*;

    fn put(key: &str, value_bytes: usize, revision: Revision) -> Event {
        Event {
            kind: EventKind::Put,
            kv: KeyValue {
                key: key.as_bytes().to_vec(),
                value: vec![b'v'; value_bytes],
                create_revision: revision,
                mod_revision: revision,
                version: 1,
                lease: LeaseId::NONE,
            },
            prev: None,
            lease: LeaseId::NONE,
        }
    }

    fn puts(revision: Revision, count: usize) -> Vec<Event> {
        (0..count)
            .map(|i| put(&format!("k{i}"), 0, revision))
            .collect()
    }

    fn revisions(read: &HistoryRead) -> Vec<u64> {
        read.entries.iter().map(|(r, _)| r.get()).collect()
    }

    fn read_all(hub: &WatchHub, from: Revision) -> Result<HistoryRead, HistoryGap> {
        hub.read(from, usize::MAX, usize::MAX)
    }

    #[test]
    fn reads_return_entries_with_events_from_the_requested_revision() {
        let hub = WatchHub::new(100, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 1));
        hub.publish(Revision::new(2), &[]);
        hub.publish(Revision::new(3), &puts(Revision::new(3), 2));
        hub.publish(Revision::new(4), &[]);
        assert_eq!(hub.head(), Revision::new(4));
        assert_eq!(hub.position(), (Revision::new(4), Revision::new(1)));

        let all = read_all(&hub, Revision::new(1)).expect("in history");
        assert_eq!(revisions(&all), [1, 3]);
        assert_eq!(all.entries[1].1.len(), 2);
        assert_eq!(all.next, Revision::new(5));

        let tail = read_all(&hub, Revision::new(2)).expect("in history");
        assert_eq!(revisions(&tail), [3]);
        let none = read_all(&hub, Revision::new(4)).expect("in history");
        assert!(none.entries.is_empty());
        assert_eq!(none.next, Revision::new(5));
    }

    #[test]
    fn a_read_past_the_head_is_empty_and_stays_where_it_was() {
        let hub = WatchHub::new(100, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 1));
        let ahead = read_all(&hub, Revision::new(10)).expect("nothing missing");
        assert!(ahead.entries.is_empty());
        assert_eq!(ahead.next, Revision::new(10));
    }

    #[test]
    fn replays_are_ignored() {
        let hub = WatchHub::new(100, usize::MAX);
        hub.publish(Revision::new(5), &puts(Revision::new(5), 1));
        hub.publish(Revision::new(5), &puts(Revision::new(5), 3));
        hub.publish(Revision::new(4), &puts(Revision::new(4), 1));
        let all = read_all(&hub, Revision::new(1)).expect("in history");
        assert_eq!(revisions(&all), [5]);
        assert_eq!(all.entries[0].1.len(), 1);
        assert_eq!(hub.head(), Revision::new(5));
    }

    #[test]
    fn the_event_count_bound_evicts_the_oldest_entries() {
        let hub = WatchHub::new(4, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 2));
        hub.publish(Revision::new(2), &puts(Revision::new(2), 2));
        assert_eq!(hub.position(), (Revision::new(2), Revision::new(1)));
        hub.publish(Revision::new(3), &puts(Revision::new(3), 1));
        // 5 events > 4: revision 1 goes, and with it everything up to it.
        assert_eq!(hub.position(), (Revision::new(3), Revision::new(2)));
        assert_eq!(
            revisions(&read_all(&hub, Revision::new(2)).expect("kept")),
            [2, 3]
        );
        assert_eq!(
            read_all(&hub, Revision::new(1)).map(|r| r.next),
            Err(HistoryGap {
                oldest_available: Revision::new(2),
                lost_to_restore: false
            })
        );
    }

    #[test]
    fn the_byte_bound_evicts_the_oldest_entries() {
        let one = event_bytes(&put("k", 1_000, Revision::new(1)));
        let hub = WatchHub::new(usize::MAX, 3 * one);
        for revision in 1..=3 {
            hub.publish(
                Revision::new(revision),
                &[put("k", 1_000, Revision::new(revision))],
            );
        }
        assert_eq!(hub.position().1, Revision::new(1));
        hub.publish(Revision::new(4), &[]);
        assert_eq!(
            hub.position().1,
            Revision::new(1),
            "an entry without events costs nothing"
        );
        hub.publish(Revision::new(5), &[put("k", 1_000, Revision::new(5))]);
        assert_eq!(hub.position(), (Revision::new(5), Revision::new(2)));
        assert_eq!(
            revisions(&read_all(&hub, Revision::new(2)).expect("kept")),
            [2, 3, 5]
        );
    }

    #[test]
    fn the_newest_entry_is_kept_even_alone_over_the_bounds() {
        let hub = WatchHub::new(3, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 1));
        hub.publish(Revision::new(2), &puts(Revision::new(2), 10));
        assert_eq!(hub.position(), (Revision::new(2), Revision::new(2)));
        assert_eq!(
            read_all(&hub, Revision::new(2)).expect("kept").entries[0]
                .1
                .len(),
            10
        );
        hub.publish(Revision::new(3), &puts(Revision::new(3), 1));
        assert_eq!(hub.position(), (Revision::new(3), Revision::new(3)));
    }

    #[test]
    fn evicting_skips_over_revisions_without_events() {
        let hub = WatchHub::new(1, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 1));
        hub.publish(Revision::new(2), &[]);
        hub.publish(Revision::new(3), &[]);
        hub.publish(Revision::new(4), &puts(Revision::new(4), 1));
        // Revisions 2 and 3 had no events, so nothing before 4 is missing from 2 on.
        assert_eq!(hub.position(), (Revision::new(4), Revision::new(2)));
        assert_eq!(
            revisions(&read_all(&hub, Revision::new(2)).expect("kept")),
            [4]
        );
    }

    #[test]
    fn reads_stop_at_whole_entries_within_the_limits() {
        let hub = WatchHub::new(100, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 2));
        hub.publish(Revision::new(2), &puts(Revision::new(2), 2));
        hub.publish(Revision::new(3), &puts(Revision::new(3), 2));
        hub.publish(Revision::new(4), &[]);

        let first = hub
            .read(Revision::new(1), 3, usize::MAX)
            .expect("in history");
        assert_eq!(revisions(&first), [1]);
        assert_eq!(first.next, Revision::new(2));
        let second = hub.read(first.next, 4, usize::MAX).expect("in history");
        assert_eq!(revisions(&second), [2, 3]);
        assert_eq!(second.next, Revision::new(5));

        // A single entry over the limit is still read, whole.
        let big = hub.read(Revision::new(1), 1, 1).expect("in history");
        assert_eq!(revisions(&big), [1]);
        assert_eq!(big.entries[0].1.len(), 2);
        assert_eq!(big.next, Revision::new(2));

        let one = event_bytes(&put("k0", 0, Revision::new(1)));
        let by_bytes = hub
            .read(Revision::new(1), usize::MAX, 5 * one)
            .expect("in history");
        assert_eq!(revisions(&by_bytes), [1, 2]);
        assert_eq!(by_bytes.next, Revision::new(3));
    }

    #[test]
    fn reset_forgets_the_history_and_starts_after_the_snapshot() {
        let hub = WatchHub::new(100, usize::MAX);
        hub.publish(Revision::new(1), &puts(Revision::new(1), 1));
        hub.publish(Revision::new(2), &puts(Revision::new(2), 1));
        hub.reset(Revision::new(10));
        assert_eq!(hub.position(), (Revision::new(10), Revision::new(11)));
        assert_eq!(
            read_all(&hub, Revision::new(2)).map(|r| r.next),
            Err(HistoryGap {
                oldest_available: Revision::new(11),
                lost_to_restore: true
            })
        );
        let caught_up = read_all(&hub, Revision::new(11)).expect("nothing missing");
        assert!(caught_up.entries.is_empty());
        assert_eq!(caught_up.next, Revision::new(11));

        hub.publish(Revision::new(10), &puts(Revision::new(10), 1));
        hub.publish(Revision::new(11), &puts(Revision::new(11), 1));
        assert_eq!(
            revisions(&read_all(&hub, Revision::new(11)).expect("kept")),
            [11]
        );
    }

    #[test]
    fn a_gap_after_a_restore_caused_by_the_bounds_is_not_blamed_on_it() {
        let hub = WatchHub::new(1, usize::MAX);
        hub.reset(Revision::new(10));
        hub.publish(Revision::new(11), &puts(Revision::new(11), 1));
        hub.publish(Revision::new(12), &puts(Revision::new(12), 1));
        assert_eq!(
            read_all(&hub, Revision::new(11)).map(|r| r.next),
            Err(HistoryGap {
                oldest_available: Revision::new(12),
                lost_to_restore: false
            })
        );
    }

    #[test]
    fn subscribers_wake_for_events_and_resets_only() {
        let hub = WatchHub::new(100, usize::MAX);
        let mut notified = hub.subscribe();
        assert!(!notified.has_changed().expect("hub alive"));
        hub.publish(Revision::new(1), &[]);
        assert!(!notified.has_changed().expect("hub alive"));
        hub.publish(Revision::new(2), &puts(Revision::new(2), 1));
        assert!(notified.has_changed().expect("hub alive"));
        assert_eq!(*notified.borrow_and_update(), Revision::new(2));
        hub.reset(Revision::new(7));
        assert!(notified.has_changed().expect("hub alive"));
        assert_eq!(*notified.borrow_and_update(), Revision::new(7));
    }

    #[test]
    fn entries_past_the_newest_are_packed_and_read_back_as_they_were_published() {
        let hub = WatchHub::new(usize::MAX, usize::MAX);
        let entries = UNPACKED_ENTRIES + 3;
        let published: Vec<Vec<Event>> = (1..=entries as u64)
            .map(|r| {
                let mut events = vec![put(&format!("key-{r}"), r as usize % 7, Revision::new(r))];
                // A delete carrying the key as it was: every field of an event goes through.
                events.push(Event {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        key: format!("gone-{r}").into_bytes(),
                        value: Vec::new(),
                        create_revision: Revision::new(r),
                        mod_revision: Revision::new(r),
                        version: 0,
                        lease: LeaseId::new(u64::MAX - r),
                    },
                    prev: Some(put(&format!("gone-{r}"), 3, Revision::new(1)).kv),
                    lease: LeaseId::new(r),
                });
                hub.publish(Revision::new(r), &events);
                events
            })
            .collect();
        {
            let history = hub.history();
            let packed = history
                .entries
                .iter()
                .filter(|e| matches!(e.events, Stored::Packed(_)))
                .count();
            assert_eq!(
                packed,
                entries - UNPACKED_ENTRIES,
                "only the oldest are packed"
            );
            assert!(matches!(history.entries[0].events, Stored::Packed(_)));
            assert!(matches!(
                history.entries[entries - 1].events,
                Stored::Both { .. }
            ));
        }
        let read = read_all(&hub, Revision::new(1)).expect("nothing evicted");
        assert_eq!(read.entries.len(), entries);
        for ((revision, events), (expected_revision, expected)) in read
            .entries
            .iter()
            .zip((1..).map(Revision::new).zip(&published))
        {
            assert_eq!(*revision, expected_revision);
            assert_eq!(&events[..], &expected[..], "revision {}", revision.get());
        }
    }

    #[test]
    fn a_large_entry_is_packed_at_once_and_read_back_whole() {
        let hub = WatchHub::new(usize::MAX, usize::MAX);
        let large = vec![put("big", UNPACKED_ENTRY_MAX_BYTES, Revision::new(1))];
        let small = vec![put("small", 10, Revision::new(2))];
        hub.publish(Revision::new(1), &large);
        hub.publish(Revision::new(2), &small);
        {
            let history = hub.history();
            assert!(matches!(history.entries[0].events, Stored::Packed(_)));
            assert!(matches!(history.entries[1].events, Stored::Both { .. }));
        }
        let read = read_all(&hub, Revision::new(1)).expect("nothing evicted");
        assert_eq!(&read.entries[0].1[..], &large[..]);
        assert_eq!(&read.entries[1].1[..], &small[..]);
    }
}
