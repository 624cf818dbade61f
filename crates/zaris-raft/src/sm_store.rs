//! The state machine store: zaris-core's [`State`] in memory behind a lock, applied from the Raft
//! log, persisted as snapshots in a file beside the log (`snapshot_file`).

use std::io;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use zaris_core::{Applied, Outcome, Revision, State};

use crate::faults::StoreFaults;
use crate::io_err;
use crate::snapshot_file::SnapshotFiles;
use crate::types::{LogId, Reply, Snapshot, SnapshotMeta, StoredMembership, TypeConfig};

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
        files: SnapshotFiles,
        observer: Arc<dyn ApplyObserver>,
        limits: zaris_core::Limits,
    ) -> io::Result<Self> {
        // Start empty: openraft installs the persisted snapshot and re-applies the committed log
        // after it when the node starts.
        let data = SmData {
            state: State::new(limits),
            last_applied: None,
            membership: StoredMembership::default(),
        };
        Ok(StateMachineStore {
            data: Arc::new(RwLock::new(data)),
            files,
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
        // The state's maps are persistent (structurally shared): this copy costs a few pointer
        // increments, so apply waits for nothing; apply's next writes copy the tree nodes they
        // touch instead. Encoding a large state takes a while: off the async threads.
        let started = std::time::Instant::now();
        let copy = self
            .data
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let meta = SnapshotMeta {
            last_log_id: copy.last_applied,
            last_membership: copy.membership,
        };
        let bytes = encode_at_low_priority(copy.state).await?;
        let encoded = started.elapsed();
        let (saved, bytes) = self.files.save(&meta, bytes).await?;
        if saved {
            tracing::info!(
                last_log_id = ?meta.last_log_id,
                bytes = bytes.len(),
                encode_ms = encoded.as_millis() as u64,
                save_ms = (started.elapsed() - encoded).as_millis() as u64,
                "snapshot built"
            );
        }
        Ok(Snapshot {
            meta,
            snapshot: bytes,
        })
    }
}

/// Nice value of the snapshot encoder's thread: it yields the cores to apply, replication and
/// clients whenever they want them, and takes what is left.
#[cfg(target_os = "linux")]
const ENCODER_NICE: i32 = 10;

/// Encodes `state` on a thread of its own that runs at a lower CPU priority. Encoding a
/// million-lease state takes about half a second of CPU; at normal priority, on a small machine,
/// it competed with the node's apply and fsync and stretched client writes (issue 13).
async fn encode_at_low_priority(state: State) -> Result<Vec<u8>, io::Error> {
    let (encoded, receive) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("zaris-snapshot".to_owned())
        .spawn(move || {
            lower_this_threads_priority();
            let _ = encoded.send(state.snapshot());
        })
        .map_err(|e| io_err("start the snapshot encoder", e))?;
    receive
        .await
        .map_err(|_| io_err("snapshot encoder", "stopped without an answer"))?
        .map_err(|e| io_err("encode snapshot", e))
}

/// On Linux `setpriority` on a thread id applies to that thread alone. Elsewhere it would lower
/// the whole process, so it is left alone there.
fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    if let Err(e) =
        rustix::process::setpriority_process(Some(rustix::thread::gettid()), ENCODER_NICE)
    {
        tracing::debug!(error = %e, "the snapshot encoder runs at normal priority");
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
        let (mut state, snapshot) = tokio::task::spawn_blocking(move || {
            State::restore(&snapshot).map(|state| (state, snapshot))
        })
        .await
        .map_err(|e| io_err("snapshot decoder", e))?
        .map_err(|e| io_err("restore snapshot", e))?;
        // Faults are configuration, not state: a snapshot does not carry them.
        self.faults.configure(&mut state);
        self.files.save(meta, snapshot).await?;
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
        // Read whole (100 MiB for a million leases): off the async threads.
        let files = self.files.clone();
        tokio::task::spawn_blocking(move || files.load())
            .await
            .map_err(|e| io_err("snapshot reader", e))?
    }
}
