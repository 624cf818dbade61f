//! Zaris on openraft: the type config, and the sled-backed log and state-machine stores.
//!
//! This is the only crate that knows sled. sled 0.34 is beta upstream; keeping it behind
//! [`open`] means the crash tests can judge it and a replacement touches one crate.
//!
//! Durability rules kept here: the log's `append` callback fires only after the entries are
//! fsync'd, and `save_vote` returns only after the vote is fsync'd (sled's flush, then our own
//! fsyncs of what it leaves out: `disk_sync`). The state machine lives in
//! memory and is persisted as snapshots in a file beside sled's; on restart openraft re-applies
//! the committed log suffix after the last snapshot (the committed index is saved for that).

mod disk_sync;
pub mod dump;
mod faults;
mod log_store;
mod recent;
pub mod restore;
mod sm_store;
mod snapshot_file;
mod types;

pub use faults::StoreFaults;
pub use log_store::LogStore;
pub use sm_store::{ApplyObserver, NoopObserver, SmData, StateHandle, StateMachineStore};
pub use types::{
    Entry, LogId, Member, Proposal, Raft, Reply, Snapshot, SnapshotMeta, StoredMembership,
    TypeConfig, Vote,
};

use std::io;
use std::path::Path;
use std::sync::Arc;

/// Opens (or creates) a node's stores in `dir`.
pub async fn open(
    dir: &Path,
    observer: Arc<dyn ApplyObserver>,
    limits: zaris_core::Limits,
) -> io::Result<(LogStore, StateMachineStore)> {
    let db = open_db(dir).await?;
    let log = LogStore::new(db.clone(), dir)?;
    let files = snapshot_file::SnapshotFiles::open(dir, &db)?;
    let sm = StateMachineStore::new(files, observer, limits)?;
    Ok((log, sm))
}

/// sled's own page cache. Its default (1 GiB) filled with what is read once and never again: the
/// stored snapshot (as large as the state) and log entries already applied; the state itself is
/// held in memory apart from it. What is read again (the log's recent entries, for replication)
/// is far smaller, and the kernel's page cache keeps the files warm besides.
pub const SLED_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// Opens the sled database. A handle to it that is still being dropped in this process (a node
/// restarted in-process) holds its file lock for a moment: wait for it, briefly.
pub(crate) async fn open_db(dir: &Path) -> io::Result<sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let path = dir.to_path_buf();
        let opened = tokio::task::spawn_blocking(move || {
            sled::Config::new()
                .path(path)
                .cache_capacity(SLED_CACHE_BYTES)
                .open()
        })
        .await
        .map_err(io::Error::other)?;
        match opened {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => return Err(io::Error::other(e)),
        }
    }
}

pub(crate) fn io_err<E: std::fmt::Display>(what: &str, e: E) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}
