//! The Raft log in sled: entries keyed by big-endian index (so key order is index order), plus the
//! vote, the purge point and the committed index.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use zaris_core::codec;

use crate::disk_sync::{DiskSync, flush_durably};
use crate::io_err;
use crate::recent::RecentEntries;
use crate::types::{Entry, LogId, TypeConfig, Vote};

/// The sled trees of the log: entries, and the vote, purge point and committed index.
pub(crate) const LOG_TREE: &str = "raft_log";
pub(crate) const META_TREE: &str = "raft_meta";

const VOTE: &str = "vote";
const LAST_PURGED: &str = "last_purged";
const COMMITTED: &str = "committed";

/// Handle to the log; clones share the same trees, so a reader created earlier sees later appends.
#[derive(Clone, Debug)]
pub struct LogStore {
    /// Shared with the flusher only weakly, so dropping the last log handle closes the database.
    db: Arc<sled::Db>,
    log: sled::Tree,
    meta: sled::Tree,
    flusher: mpsc::Sender<IOFlushed<TypeConfig>>,
    /// Our fsyncs after sled's flush.
    disk: Arc<DiskSync>,
    /// The index through which entries may be deleted, for the [`purge_loop`].
    purge_through: Arc<watch::Sender<Option<u64>>>,
    /// The newest entries, decoded, for the reads that follow each append (`recent`).
    recent: Arc<Mutex<RecentEntries<Entry>>>,
}

/// Entries deleted per sled batch by the [`purge_loop`].
const PURGE_CHUNK: usize = 1_024;

/// Deletes purged entries in the background. A purge after a snapshot covers tens of thousands
/// of entries; deleted inside `purge` it held up every append (and so every client write) for
/// up to 0.7 s. `purge` records the new start of the log first, so entries not yet deleted are
/// already outside it: openraft never reads below the purge point, and a crash meanwhile only
/// leaves entries for the next start to delete. The task ends when the last log handle does.
async fn purge_loop(log: sled::Tree, mut through: watch::Receiver<Option<u64>>) {
    loop {
        // None: nothing purged yet (index 0 is an entry too).
        let target = *through.borrow_and_update();
        // Stops between chunks once the last log handle is gone (the database closes with it).
        while let Some(target) = target
            && through.has_changed().is_ok()
        {
            let tree = log.clone();
            let deleted = tokio::task::spawn_blocking(move || -> Result<usize, sled::Error> {
                let mut batch = sled::Batch::default();
                let mut count = 0;
                for key in tree.range(..=index_key(target)).keys().take(PURGE_CHUNK) {
                    batch.remove(key?);
                    count += 1;
                }
                tree.apply_batch(batch)?;
                Ok(count)
            })
            .await;
            match deleted {
                Ok(Ok(0)) => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    // Left for the next purge (or start) to delete: the log is correct meanwhile.
                    tracing::warn!(through = target, error = %e, "cannot delete purged log entries");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the log purger failed");
                    break;
                }
            }
        }
        if through.changed().await.is_err() {
            return;
        }
    }
}

/// Appends waiting for their fsync; bounds the entries openraft can have in flight here.
const PENDING_FLUSHES: usize = 1_024;

/// Group commit at the disk, in two stages that overlap, each on a thread of its own. The first
/// has sled write out every append that arrived while its previous flush ran; the second then
/// fsyncs what the flushes wrote (`disk_sync`), once for every flushed batch that waited for it.
/// So sled's flush of the next batch runs while the previous batch's fsync does, instead of
/// after it. Each append's callback fires only after an fsync that started after its flush
/// ended. The threads end when the last handle to the log is dropped.
///
/// Plain threads, not tasks: with sled's `flush_async` (a hop to sled's thread pool and back)
/// and a blocking task for the fsync, one append woke six threads or tasks on its way to the
/// disk and back, and on this path most of a node's CPU went to waking and switching threads
/// (perf: a third of the samples in `finish_task_switch`). Now an append wakes the flusher, which
/// writes it (sled's flush writes on the calling thread: `third_party/sled`) and, when no other
/// append waits and no earlier batch is still being synced, fsyncs it too before it wakes
/// openraft; only under load does the syncer take the fsync, so the next flush overlaps it.
fn start_flusher(
    db: Weak<sled::Db>,
    disk: Arc<DiskSync>,
    pending: mpsc::Receiver<IOFlushed<TypeConfig>>,
) -> io::Result<()> {
    let (flushed, to_sync) = std::sync::mpsc::channel();
    let syncer = SyncStage {
        disk,
        syncing: Arc::default(),
    };
    let inline = syncer.clone();
    std::thread::Builder::new()
        .name("zaris-log-sync".into())
        .spawn(move || sync_loop(&syncer, &to_sync))?;
    std::thread::Builder::new()
        .name("zaris-log-flush".into())
        .spawn(move || flush_loop(&db, pending, &inline, &flushed))?;
    Ok(())
}

/// The fsync stage's state, shared by the flusher and the syncer.
#[derive(Clone)]
struct SyncStage {
    disk: Arc<DiskSync>,
    /// Batches handed to the syncer and not completed yet. The flusher fsyncs a batch itself only
    /// when this is 0, so callbacks still complete in append order.
    syncing: Arc<AtomicUsize>,
}

/// The first stage of [`start_flusher`]: sled's flush (its write and `sync_file_range`), and the
/// fsync too when nothing else waits.
fn flush_loop(
    db: &Weak<sled::Db>,
    mut pending: mpsc::Receiver<IOFlushed<TypeConfig>>,
    stage: &SyncStage,
    flushed: &std::sync::mpsc::Sender<Vec<IOFlushed<TypeConfig>>>,
) {
    while let Some(first) = pending.blocking_recv() {
        let mut callbacks = vec![first];
        while let Ok(next) = pending.try_recv() {
            callbacks.push(next);
        }
        let written = match db.upgrade() {
            Some(db) => db.flush().map_err(|e| io_err("fsync", e)),
            None => Err(io_err("fsync", "log closed before fsync")),
        };
        match written {
            // Only this thread adds to `syncing`, so 0 stays 0 until it hands a batch over.
            Ok(_) if pending.is_empty() && stage.syncing.load(Ordering::Acquire) == 0 => {
                complete(callbacks, &stage.disk.sync());
            }
            Ok(_) => {
                stage.syncing.fetch_add(1, Ordering::AcqRel);
                if let Err(unsent) = flushed.send(callbacks) {
                    stage.syncing.fetch_sub(1, Ordering::AcqRel);
                    complete(unsent.0, &Err(io_err("fsync", "log closed before fsync")));
                }
            }
            Err(e) => complete(callbacks, &Err(e)),
        }
    }
}

/// The second stage of [`start_flusher`]: one fsync for all the batches sled has flushed
/// meanwhile.
fn sync_loop(stage: &SyncStage, flushed: &std::sync::mpsc::Receiver<Vec<IOFlushed<TypeConfig>>>) {
    while let Ok(mut callbacks) = flushed.recv() {
        let mut batches = 1;
        while let Ok(more) = flushed.try_recv() {
            callbacks.extend(more);
            batches += 1;
        }
        complete(callbacks, &stage.disk.sync());
        // After the callbacks: the flusher may complete the next batch itself only after these.
        stage.syncing.fetch_sub(batches, Ordering::AcqRel);
    }
}

fn complete(callbacks: Vec<IOFlushed<TypeConfig>>, result: &io::Result<()>) {
    for callback in callbacks {
        callback.io_completed(match result {
            Ok(()) => Ok(()),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        });
    }
}

fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

impl LogStore {
    /// The log in `db`, the sled database opened in `dir`.
    pub(crate) fn new(db: sled::Db, dir: &Path) -> io::Result<Self> {
        let disk = Arc::new(DiskSync::open(dir).map_err(|e| io_err("open the data file", e))?);
        let log = db
            .open_tree(LOG_TREE)
            .map_err(|e| io_err("open log tree", e))?;
        let meta = db
            .open_tree(META_TREE)
            .map_err(|e| io_err("open meta tree", e))?;
        let db = Arc::new(db);
        let (flusher, pending) = mpsc::channel(PENDING_FLUSHES);
        start_flusher(Arc::downgrade(&db), disk.clone(), pending)?;
        let (purge_through, through) = watch::channel(None);
        tokio::spawn(purge_loop(log.clone(), through));
        let store = LogStore {
            db,
            log,
            meta,
            flusher,
            disk,
            purge_through: Arc::new(purge_through),
            recent: Arc::default(),
        };
        // Entries a purge had not deleted yet when the node stopped.
        if let Some(purged) = store.get_meta::<LogId>(LAST_PURGED)? {
            store.purge_through.send_replace(Some(purged.index));
        }
        Ok(store)
    }

    fn get_meta<T: DeserializeOwned + Serialize>(&self, key: &str) -> io::Result<Option<T>> {
        match self
            .meta
            .get(key)
            .map_err(|e| io_err("read raft meta", e))?
        {
            Some(bytes) => codec::decode(&bytes, codec::MAX_MESSAGE_BYTES)
                .map(Some)
                .map_err(|e| io_err(key, e)),
            None => Ok(None),
        }
    }

    fn put_meta<T: Serialize>(&self, key: &str, value: &T) -> io::Result<()> {
        let bytes = codec::encode(value).map_err(|e| io_err(key, e))?;
        self.meta
            .insert(key, bytes)
            .map_err(|e| io_err("write raft meta", e))?;
        Ok(())
    }

    /// Makes everything written so far durable (sled's background flush runs only every 500 ms,
    /// and does not fsync: `disk_sync`).
    pub(crate) async fn fsync(&self) -> io::Result<()> {
        flush_durably(&self.db, &self.disk).await
    }

    /// Makes an empty log start after `log_id`, committed up to it: for a node seeded with a
    /// snapshot at `log_id` (restore), the way a purge after that snapshot would leave it.
    /// Not fsync'd; the caller flushes the database.
    pub(crate) fn start_after(&self, log_id: LogId) -> io::Result<()> {
        self.recent().clear();
        self.put_meta(LAST_PURGED, &log_id)?;
        self.put_meta(COMMITTED, &Some(log_id))
    }

    fn recent(&self) -> MutexGuard<'_, RecentEntries<Entry>> {
        // Entries are only ever added whole: a panic elsewhere leaves nothing half-updated.
        self.recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Without the canonical-form check: this node encoded every entry of its log itself, as it
    /// appended it, and each is read back several times (by the replication to each follower and
    /// by the state machine); the check encoded each of them again per read, 4% of the leader's
    /// instructions per 1-client put (callgrind, docs/performance.md).
    fn decode_entry(bytes: &[u8]) -> io::Result<Entry> {
        codec::decode_own(bytes, codec::MAX_MESSAGE_BYTES)
            .map_err(|e| io_err("decode log entry", e))
    }
}

fn index_from_key(key: &[u8]) -> io::Result<u64> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| io_err("log key", format!("{} bytes, expected 8", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => Some(i.saturating_add(1)),
            Bound::Excluded(i) => Some(*i),
            Bound::Unbounded => None,
        };
        if let Some(entries) = self.recent().get(start, end) {
            return Ok(entries);
        }
        let mut entries = Vec::new();
        for item in self.log.range(index_key(start)..) {
            let (key, value) = item.map_err(|e| io_err("read log", e))?;
            let index = index_from_key(&key)?;
            if !range.contains(&index) {
                break;
            }
            entries.push(Self::decode_entry(&value)?);
        }
        Ok(entries)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.get_meta(VOTE)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let last_purged: Option<LogId> = self.get_meta(LAST_PURGED)?;
        let last = match self.log.last().map_err(|e| io_err("read log", e))? {
            Some((_, value)) => Some(Self::decode_entry(&value)?.log_id),
            None => None,
        };
        // An entry at or below the purge point is one the background purge has not deleted
        // yet: logically gone, so it is never the log's last.
        let last = last.filter(|l| last_purged.is_none_or(|p| l.index > p.index));
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.put_meta(VOTE, vote)?;
        // A vote must survive a crash before it is acted on, or a node could vote twice in a term.
        self.fsync().await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        // Not fsync'd: losing it only means re-applying less of the log at restart until the
        // leader tells this node the commit index again.
        self.put_meta(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.get_meta::<Option<LogId>>(COMMITTED)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // One insert per entry, in index order, not a sled batch: a batch writes a manifest of
        // its own, which sled writes and syncs separately, so every append cost two
        // `sync_file_range` calls instead of one (strace; about 0.2 ms each here). Atomicity is
        // not needed: sled recovers a prefix of its log, so a crash mid-append leaves a prefix of
        // these entries, never a hole (as `truncate_after` relies on too), and none of them was
        // acknowledged.
        for entry in entries {
            let bytes = codec::encode(&entry).map_err(|e| io_err("encode log entry", e))?;
            let index = entry.log_id.index;
            let encoded_bytes = bytes.len();
            if let Err(e) = self.log.insert(&index_key(index)[..], bytes) {
                // Whether the log now ends here is not known: read from sled alone.
                self.recent().clear();
                return Err(io_err("append", e));
            }
            // After the insert: a reader that misses it here finds it in sled.
            self.recent().appended(index, entry, encoded_bytes);
        }
        // The entries are readable now; they count as persisted (and may be acknowledged) only
        // once the flusher has had them fsync'd. Returning before that lets openraft hand over
        // the next append while this one's fsync runs.
        self.flusher
            .send(callback)
            .await
            .map_err(|_| io_err("append", "the log flusher stopped"))
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |l| l.index + 1);
        // Before sled: a reader never finds here an entry that sled has lost.
        self.recent().truncating_from(from);
        let keys: Vec<sled::IVec> = self
            .log
            .range(index_key(from)..)
            .keys()
            .collect::<Result<_, _>>()
            .map_err(|e| io_err("read log", e))?;
        // Tail first, so a crash in the middle never leaves a hole.
        for key in keys.into_iter().rev() {
            self.log.remove(key).map_err(|e| io_err("truncate", e))?;
        }
        // Durable before returning: openraft goes on as if it were (it installs a snapshot past
        // the cut, or appends over it), and a log that came back whole after a crash could end
        // in an older term past the snapshot, which openraft refuses to start from. Rare, so
        // the fsync costs nothing that matters.
        self.fsync().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        // The purge point first: get_log_state derives the log's start from it, and from here
        // on no entry up to it is read. The entries themselves go in the background, only once
        // the purge point is durable: a crash must never find entries deleted behind an older
        // purge point (a log starting at an entry it no longer has), whatever order the store
        // writes its pages in. One fsync per snapshot.
        self.recent().purging_through(log_id.index);
        self.put_meta(LAST_PURGED, &log_id)?;
        self.fsync().await?;
        self.purge_through.send_replace(Some(log_id.index));
        Ok(())
    }
}
