//! What was acknowledged stays after the store is dropped and reopened.

use std::sync::Arc;

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage, RaftStateMachine};
use openraft::type_config::TypeConfigExt;
use openraft::{RaftLogReader, RaftSnapshotBuilder, Vote};
use zaris_core::{Command, DurationMs, LeaseId, Limits, Request, Revision};
use zaris_raft::{Entry, LogId, NoopObserver, Proposal, TypeConfig};

fn log_id(term: u64, index: u64) -> LogId {
    openraft::LogId::new(
        openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 },
        index,
    )
}

fn grant(term: u64, index: u64) -> Entry {
    Entry::new_normal(
        log_id(term, index),
        Proposal(Request::new(Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: DurationMs::new(5_000),
        })),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_vote_and_snapshot_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut log, mut sm) =
            zaris_raft::open(dir.path(), Arc::new(NoopObserver), Limits::default())
                .await
                .expect("open");
        log.save_vote(&Vote::new(3, 1)).await.expect("vote");
        let (tx, rx) = TypeConfig::oneshot();
        log.append((1..=5).map(|i| grant(3, i)), IOFlushed::signal(tx))
            .await
            .expect("append");
        rx.await.expect("callback fired").expect("flushed");
        let entries = log.try_get_log_entries(1..=3).await.expect("read");
        let stream = futures::stream::iter(entries.into_iter().map(|e| Ok((e, None))));
        sm.apply(stream).await.expect("apply");
        let mut builder = sm.get_snapshot_builder().await;
        builder.build_snapshot().await.expect("snapshot");
        // Dropped without any explicit close: like a process that stops.
    }
    let (mut log, mut sm) = zaris_raft::open(dir.path(), Arc::new(NoopObserver), Limits::default())
        .await
        .expect("reopen");
    assert_eq!(log.read_vote().await.expect("vote"), Some(Vote::new(3, 1)));
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(3, 5)));
    assert_eq!(log.try_get_log_entries(1..=5).await.expect("read").len(), 5);
    let snapshot = sm
        .get_current_snapshot()
        .await
        .expect("read snapshot")
        .expect("snapshot kept");
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(3, 3)));
    sm.install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .expect("install");
    let handle = sm.handle();
    assert_eq!(handle.read(|d| d.state.lease_count()), 3);
    assert_eq!(handle.read(|d| d.state.last_applied()), Revision::new(3));
}

/// A store in `dir` whose log holds grants at indexes 1..=`entries`, flushed.
async fn log_of_grants(dir: &std::path::Path, entries: u64) -> zaris_raft::LogStore {
    let mut log = reopen(dir).await;
    let (tx, rx) = TypeConfig::oneshot();
    log.append((1..=entries).map(|i| grant(1, i)), IOFlushed::signal(tx))
        .await
        .expect("append");
    rx.await.expect("callback fired").expect("flushed");
    log
}

async fn reopen(dir: &std::path::Path) -> zaris_raft::LogStore {
    zaris_raft::open(dir, Arc::new(NoopObserver), Limits::default())
        .await
        .expect("open")
        .0
}

/// A purge moves the log's start at once and deletes the entries in the background (appends do
/// not wait for it); a store dropped before that finished deletes the rest when reopened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_entries_are_deleted_in_the_background_and_after_a_restart() {
    const ENTRIES: u64 = 5_000;
    const PURGED: u64 = 4_000;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut log = log_of_grants(dir.path(), ENTRIES).await;
        log.purge(log_id(1, PURGED)).await.expect("purge");
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_purged_log_id, Some(log_id(1, PURGED)));
        assert_eq!(state.last_log_id, Some(log_id(1, ENTRIES)));
        // Dropped at once: the background deletion is cut short (or not even started).
    }
    let mut log = reopen(dir.path()).await;
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(1, PURGED)));
    assert_eq!(state.last_log_id, Some(log_id(1, ENTRIES)));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = log.try_get_log_entries(1..=PURGED).await.expect("read");
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} purged entries are still stored",
            left.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let kept = log
        .try_get_log_entries(PURGED + 1..=ENTRIES)
        .await
        .expect("read");
    assert_eq!(kept.len() as u64, ENTRIES - PURGED);
    assert_eq!(kept[0].log_id, log_id(1, PURGED + 1));
}

/// A log purged whole (as after a snapshot install) ends at its purge point, also while (or
/// after a restart before) the background deletion has removed the entries: an entry not yet
/// deleted is never reported as the log's last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_purged_whole_ends_at_the_purge_point_before_its_entries_are_deleted() {
    const ENTRIES: u64 = 5_000;
    const INSTALLED: u64 = 6_000;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut log = log_of_grants(dir.path(), ENTRIES).await;
        // A snapshot from the leader, at an index beyond this log's end, was installed: the
        // whole log goes. Whatever the purger has deleted by now, the log ends at the purge point.
        log.purge(log_id(2, INSTALLED)).await.expect("purge");
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_purged_log_id, Some(log_id(2, INSTALLED)));
        assert_eq!(state.last_log_id, Some(log_id(2, INSTALLED)));
    }
    let mut log = reopen(dir.path()).await;
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(2, INSTALLED)));
    assert_eq!(state.last_log_id, Some(log_id(2, INSTALLED)));
}
