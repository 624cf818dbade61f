//! The state machine store: zaris-core's [`State`] in memory behind a lock, applied from the Raft
//! log, persisted as snapshots in sled.

use std::io;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use zaris_core::{Applied, Outcome, Revision, State, codec};

use crate::faults::StoreFaults;
use crate::io_err;
use crate::types::{LogId, Reply, Snapshot, SnapshotMeta, StoredMembership, TypeConfig};

pub(crate) const SNAPSHOT_TREE: &str = "snapshot";
const SNAPSHOT_META: &str = "meta";
const SNAPSHOT_DATA: &str = "data";

/// Hears about every applied command on this node (feeds the lessor, lock waiters, watchers).
///
/// Called synchronously from apply, without the state lock held; it must not block.
pub trait ApplyObserver: Send + Sync + 'static {
    fn applied(&self, applied: &Applied);
    /// The state was replaced wholesale (snapshot installed).
    fn restored(&self, state: &State);
}

/// An observer that ignores everything (storage tests).
#[derive(Debug, Default)]
pub struct NoopObserver;

impl ApplyObserver for NoopObserver {
    fn applied(&self, _: &Applied) {}
    fn restored(&self, _: &State) {}
}

/// The state plus what Raft needs to know about it.
#[derive(Clone, Debug)]
pub struct SmData {
    pub state: State,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
}

/// Shared read access to the applied state, for serving reads.
#[derive(Clone, Debug)]
pub struct StateHandle(Arc<RwLock<SmData>>);

impl StateHandle {
    /// Reads under the lock. Keep `f` short: apply waits for it.
    pub fn read<T>(&self, f: impl FnOnce(&SmData) -> T) -> T {
        f(&self.guard())
    }

    fn guard(&self) -> RwLockReadGuard<'_, SmData> {
        // A panic while holding the lock cannot leave the state half-applied in a way a reader
        // would misinterpret more than a crash would; keep serving.
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub struct StateMachineStore {
    data: Arc<RwLock<SmData>>,
    files: SnapshotFiles,
    observer: Arc<dyn ApplyObserver>,
    /// Deliberate faults (none unless built with `fault-injection`), set again on every state
    /// this store installs.
    faults: StoreFaults,
}

impl std::fmt::Debug for StateMachineStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachineStore").finish_non_exhaustive()
    }
}

impl StateMachineStore {
    pub(crate) fn new(
        db: sled::Db,
        observer: Arc<dyn ApplyObserver>,
        limits: zaris_core::Limits,
    ) -> io::Result<Self> {
        let tree = db
            .open_tree(SNAPSHOT_TREE)
            .map_err(|e| io_err("open snapshot tree", e))?;
        // Start empty: openraft installs the persisted snapshot and re-applies the committed log
        // after it when the node starts.
        let data = SmData {
            state: State::new(limits),
            last_applied: None,
            membership: StoredMembership::default(),
        };
        Ok(StateMachineStore {
            data: Arc::new(RwLock::new(data)),
            files: SnapshotFiles::new(tree, db),
            observer,
            faults: StoreFaults::default(),
        })
    }

    /// Deliberate faults for the current state and every state installed later (only
    /// `fault-injection` builds can make any). Call before handing the store to Raft, with the
    /// same faults on every node of the cluster.
    pub fn with_faults(mut self, faults: StoreFaults) -> Self {
        faults.configure(&mut self.write().state);
        self.faults = faults;
        self
    }

    pub fn handle(&self) -> StateHandle {
        StateHandle(self.data.clone())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, SmData> {
        self.data
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Where the current snapshot is persisted: its meta and data in one sled tree, written in one
/// batch and fsync'd.
#[derive(Clone)]
pub(crate) struct SnapshotFiles {
    tree: sled::Tree,
    db: sled::Db,
    /// Serializes saves: a build (which copied the state at some index A) runs beside an install
    /// (of a snapshot at B), and the check-then-write in `save` must see the other's result.
    saving: Arc<tokio::sync::Mutex<()>>,
}

impl SnapshotFiles {
    pub(crate) fn new(tree: sled::Tree, db: sled::Db) -> Self {
        SnapshotFiles {
            tree,
            db,
            saving: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Persists a snapshot unless the one on disk is at least as new. A build that copied the
    /// state at A may finish after a snapshot at B > A was installed and the log purged up to B:
    /// saving A then would leave a node that can never restart (it would need logs from A + 1).
    /// Returns whether it saved.
    pub(crate) async fn save(&self, meta: &SnapshotMeta, data: &[u8]) -> io::Result<bool> {
        let _saving = self.saving.lock().await;
        if let Some(current) = read_snapshot_meta(&self.tree)?
            && current.last_log_id >= meta.last_log_id
        {
            tracing::info!(
                kept = ?current.last_log_id,
                dropped = ?meta.last_log_id,
                "a snapshot at least as new is already saved; keeping it"
            );
            return Ok(false);
        }
        let meta_bytes = codec::encode(meta).map_err(|e| io_err("encode snapshot meta", e))?;
        let mut batch = sled::Batch::default();
        batch.insert(SNAPSHOT_DATA, data);
        batch.insert(SNAPSHOT_META, meta_bytes);
        self.tree
            .apply_batch(batch)
            .map_err(|e| io_err("save snapshot", e))?;
        self.db
            .flush_async()
            .await
            .map_err(|e| io_err("fsync snapshot", e))?;
        Ok(true)
    }

    fn load(&self) -> io::Result<Option<Snapshot>> {
        let Some(meta) = read_snapshot_meta(&self.tree)? else {
            return Ok(None);
        };
        let Some(data) = self
            .tree
            .get(SNAPSHOT_DATA)
            .map_err(|e| io_err("read snapshot", e))?
        else {
            return Ok(None);
        };
        Ok(Some(Snapshot {
            meta,
            snapshot: data.to_vec(),
        }))
    }
}

/// The persisted snapshot's meta, without its data.
pub(crate) fn read_snapshot_meta(tree: &sled::Tree) -> io::Result<Option<SnapshotMeta>> {
    let Some(meta) = tree
        .get(SNAPSHOT_META)
        .map_err(|e| io_err("read snapshot", e))?
    else {
        return Ok(None);
    };
    codec::decode(&meta, codec::MAX_MESSAGE_BYTES)
        .map(Some)
        .map_err(|e| io_err("decode snapshot meta", e))
}

/// Builds a snapshot from a consistent copy of the state, taken under the lock.
pub struct SnapshotBuilder {
    data: Arc<RwLock<SmData>>,
    files: SnapshotFiles,
}

impl std::fmt::Debug for SnapshotBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotBuilder").finish_non_exhaustive()
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = Vec<u8>;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        // Copy under the read lock (apply runs concurrently), encode outside it.
        let copy = self
            .data
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let bytes = copy
            .state
            .snapshot()
            .map_err(|e| io_err("encode snapshot", e))?;
        let meta = SnapshotMeta {
            last_log_id: copy.last_applied,
            last_membership: copy.membership,
        };
        if self.files.save(&meta, &bytes).await? {
            tracing::info!(last_log_id = ?meta.last_log_id, bytes = bytes.len(), "snapshot built");
        }
        Ok(Snapshot {
            meta,
            snapshot: bytes,
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotData = Vec<u8>;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let data = self.handle();
        Ok(data.read(|d| (d.last_applied, d.membership.clone())))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), io::Error>
    where
        S: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + OptionalSend,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            // The entry's log index is the revision of everything it changed.
            let index = Revision::new(entry.log_id.index);
            let applied = {
                let mut data = self.write();
                data.last_applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Normal(proposal) => Some(data.state.apply(index, &proposal.0)),
                    EntryPayload::Membership(membership) => {
                        data.membership = StoredMembership::new(Some(entry.log_id), membership);
                        data.state.apply_noop(index);
                        None
                    }
                    EntryPayload::Blank => {
                        data.state.apply_noop(index);
                        None
                    }
                }
            };
            let reply = match applied {
                Some(applied) => {
                    self.observer.applied(&applied);
                    Reply {
                        revision: index,
                        response: applied.response,
                    }
                }
                None => Reply {
                    revision: index,
                    response: Ok(Outcome::Ignored),
                },
            };
            // Every responder must be answered, or its client_write never returns.
            if let Some(responder) = responder {
                responder.send(reply);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            data: self.data.clone(),
            files: self.files.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Self::SnapshotData,
    ) -> Result<(), io::Error> {
        tracing::info!(last_log_id = ?meta.last_log_id, "installing snapshot");
        let mut state = State::restore(&snapshot).map_err(|e| io_err("restore snapshot", e))?;
        // Faults are configuration, not state: a snapshot does not carry them.
        self.faults.configure(&mut state);
        self.files.save(meta, &snapshot).await?;
        self.faults.pause_install().await;
        // Outside the state lock, like every observer call (apply waits for install anyway).
        self.observer.restored(&state);
        let mut data = self.write();
        data.state = state;
        data.last_applied = meta.last_log_id;
        data.membership = meta.last_membership.clone();
        drop(data);
        tracing::info!(last_log_id = ?meta.last_log_id, "snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        self.files.load()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(index: u64) -> SnapshotMeta {
        SnapshotMeta {
            last_log_id: Some(openraft::LogId::new(
                openraft::impls::leader_id_adv::LeaderId {
                    term: 1,
                    node_id: 1,
                },
                index,
            )),
            last_membership: StoredMembership::default(),
        }
    }

    /// Issue 9, hole 2: a build that copied the state at A finishing after a snapshot at B > A was
    /// installed must not replace B on disk.
    #[tokio::test]
    async fn an_older_snapshot_never_replaces_a_newer_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .path(dir.path())
            .open()
            .expect("open sled");
        let files = SnapshotFiles::new(db.open_tree(SNAPSHOT_TREE).expect("tree"), db);
        assert!(files.save(&meta(20), b"at twenty").await.expect("save B"));
        assert!(!files.save(&meta(10), b"at ten").await.expect("save A"));
        let kept = files.load().expect("load").expect("a snapshot");
        assert_eq!(kept.meta, meta(20));
        assert_eq!(kept.snapshot, b"at twenty");
        assert!(files.save(&meta(30), b"at thirty").await.expect("save C"));
        assert_eq!(
            files.load().expect("load").expect("a snapshot").meta,
            meta(30)
        );
    }
}
