//! Offline inspection of a stopped node's data dir (`zaris dump`): the log's bounds, the committed
//! index, the snapshot, and one record per log entry with a digest of its payload, so the logs of
//! several nodes can be compared entry by entry (the fault harness does, up to the lowest
//! committed index).
//!
//! Entries are read and decoded by the [`LogStore`] itself. sled 0.34 has no read-only mode, so
//! the database is opened normally; its file lock makes the open fail at once on a dir that a
//! running node holds, and nothing is written to the Raft trees.

use std::io;
use std::path::Path;

use openraft::storage::RaftLogStorage;
use openraft::{EntryPayload, RaftLogReader};
use zaris_core::codec;

use crate::io_err;
use crate::log_store::LogStore;
use crate::snapshot_file::SnapshotFiles;
use crate::types::LogId;

/// Entries read from sled at a time: bounds the memory a dump of large entries needs.
const READ_CHUNK: u64 = 256;

/// A log position: `(term, index)` of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub term: u64,
    pub index: u64,
}

impl From<&LogId> for Position {
    fn from(log_id: &LogId) -> Self {
        Position {
            term: log_id.committed_leader_id().term,
            index: log_id.index(),
        }
    }
}

/// What a log entry carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A client or internal request ([`zaris_core::Request`]).
    Normal,
    /// A membership change.
    Membership,
    /// A leader's blank entry at the start of its term.
    Blank,
}

impl EntryKind {
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Normal => "normal",
            EntryKind::Membership => "membership",
            EntryKind::Blank => "blank",
        }
    }
}

/// One log entry, summarized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpedEntry {
    pub position: Position,
    pub kind: EntryKind,
    /// [`zaris_core::Command::name`] of a normal entry's request.
    pub command: Option<&'static str>,
    /// SHA-256 of the payload's encoding ([`codec::encode`] of the entry's payload): equal on
    /// every node that holds the same entry.
    pub digest: [u8; 32],
}

impl DumpedEntry {
    /// The digest in lowercase hex.
    pub fn digest_hex(&self) -> String {
        self.digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A node's log as stored in its data dir.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dump {
    /// The committed index this node last saved (not fsync'd: it may lag behind the truth).
    pub committed: Option<Position>,
    /// The last entry purged from the log (entries up to it are gone, covered by the snapshot).
    pub last_purged: Option<Position>,
    /// The last entry in the log (or the purge point when the log is empty).
    pub last_log: Option<Position>,
    /// The last entry the persisted snapshot covers.
    pub snapshot: Option<Position>,
    /// Entries from the requested index on, in index order.
    pub entries: Vec<DumpedEntry>,
}

/// Reads the log of the stopped node whose data dir is `dir`, with entries from index `from` on.
///
/// Fails with a one-line error if `dir` holds no Zaris data, or if another process (a running
/// node) holds the database's lock.
pub async fn read_log(dir: &Path, from: u64) -> io::Result<Dump> {
    // sled would create an empty database in a dir that has none: refuse first.
    if !dir.join("db").is_file() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} is not a Zaris data dir (no sled database in it)",
                dir.display()
            ),
        ));
    }
    let path = dir.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || sled::Config::new().path(path).open())
        .await
        .map_err(io::Error::other)?;
    let db = match opened {
        Ok(db) => db,
        Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{} is in use by another process (a running zaris node?): stop it first",
                    dir.display()
                ),
            ));
        }
        Err(e) => return Err(io_err(&format!("cannot open {}", dir.display()), e)),
    };
    let snapshot = SnapshotFiles::open(dir, &db)?
        .read_meta()?
        .and_then(|meta| meta.last_log_id)
        .as_ref()
        .map(Position::from);

    let mut log = LogStore::new(db, dir)?;
    let state = log.get_log_state().await?;
    let committed = log.read_committed().await?;
    let mut entries = Vec::new();
    // The log starts after the last purge: reading from below it would find nothing.
    let first_kept = state
        .last_purged_log_id
        .as_ref()
        .map_or(0, |purged| purged.index() + 1);
    let mut next = from.max(first_kept);
    loop {
        let chunk = log
            .try_get_log_entries(next..next.saturating_add(READ_CHUNK))
            .await?;
        let Some(last) = chunk.last() else { break };
        next = last.log_id.index() + 1;
        for entry in chunk {
            let (kind, command) = match &entry.payload {
                EntryPayload::Normal(proposal) => {
                    (EntryKind::Normal, Some(proposal.0.command.name()))
                }
                EntryPayload::Membership(_) => (EntryKind::Membership, None),
                EntryPayload::Blank => (EntryKind::Blank, None),
            };
            let digest =
                codec::record_digest(&entry.payload).map_err(|e| io_err("encode payload", e))?;
            entries.push(DumpedEntry {
                position: Position::from(&entry.log_id),
                kind,
                command,
                digest,
            });
        }
    }
    Ok(Dump {
        committed: committed.as_ref().map(Position::from),
        last_purged: state.last_purged_log_id.as_ref().map(Position::from),
        last_log: state.last_log_id.as_ref().map(Position::from),
        snapshot,
        entries,
    })
}
