//! Zaris on openraft: the type config, and the sled-backed log and state-machine stores.
//!
//! This is the only crate that knows sled. sled 0.34 is beta upstream; keeping it behind
//! [`open`] means the crash tests can judge it and a replacement touches one crate.
//!
//! Durability rules kept here: the log's `append` callback fires only after sled has fsync'd the
//! entries, and `save_vote` returns only after the vote is fsync'd. The state machine lives in
//! memory and is persisted as snapshots in sled; on restart openraft re-applies the committed log
//! suffix after the last snapshot (the committed index is saved for that).

mod log_store;
mod sm_store;
mod types;

pub use log_store::LogStore;
pub use sm_store::{ApplyObserver, NoopObserver, SmData, StateHandle, StateMachineStore};
pub use types::{
    Entry, LogId, Proposal, Raft, Reply, Snapshot, SnapshotMeta, StoredMembership, TypeConfig, Vote,
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
    let db = {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || sled::Config::new().path(dir).open())
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)?
    };
    let log = LogStore::new(db.clone())?;
    let sm = StateMachineStore::new(db, observer, limits)?;
    Ok((log, sm))
}

pub(crate) fn io_err<E: std::fmt::Display>(what: &str, e: E) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}
