//! kill -9 while appending: every entry whose append was acknowledged (the IOFlushed callback
//! fired) is there after reopening.
//!
//! The writer is a child process, the `zaris-crash-writer` binary of this crate, which appends
//! until it is killed.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use openraft::RaftLogReader;
use openraft::storage::RaftLogStorage;
use zaris_core::Limits;
use zaris_raft::NoopObserver;

/// Entries per append in the writer.
const BATCH: u64 = 8;

/// Kills the child on drop, so a failing assertion never leaves it running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_writer(dir: &std::path::Path) -> Killed {
    let child = Command::new(env!("CARGO_BIN_EXE_zaris-crash-writer"))
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    Killed(child)
}

/// Runs the writer in `mode` on `dir` and kills it with SIGKILL as soon as it prints `done`.
fn kill_right_after(dir: &std::path::Path, mode: &str, done: &str) {
    let mut writer = Killed(
        Command::new(env!("CARGO_BIN_EXE_zaris-crash-writer"))
            .arg(dir)
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writer"),
    );
    let stdout = writer.0.stdout.take().expect("stdout");
    let finished = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line == done);
    drop(writer); // SIGKILL, at once
    assert!(finished, "the writer in mode {mode} never printed {done:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_write_loses_no_acknowledged_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked_total = 0;
    for round in 0..3 {
        let mut writer = spawn_writer(dir.path());
        let stdout = writer.0.stdout.take().expect("stdout");
        let mut acked = 0;
        // Let it get well into writing, then kill -9 it mid-stream.
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("read");
            if let Some(index) = line.strip_prefix("acked ") {
                acked = index.trim().parse().expect("index");
                if acked >= acked_total + 40 * BATCH {
                    break;
                }
            }
        }
        drop(writer); // SIGKILL, while it is appending the next batch
        assert!(
            acked > acked_total,
            "round {round}: the writer made no progress"
        );
        acked_total = acked;

        let (mut log, _sm) =
            zaris_raft::open(dir.path(), Arc::new(NoopObserver), Limits::default())
                .await
                .expect("reopen after kill -9");
        let state = log.get_log_state().await.expect("log state");
        let last = state.last_log_id.map_or(0, |l| l.index);
        assert!(
            last >= acked,
            "round {round}: acknowledged up to {acked}, only {last} survived"
        );
        let entries = log.try_get_log_entries(1..=acked).await.expect("read");
        assert_eq!(
            entries.len() as u64,
            acked,
            "round {round}: a hole in the log"
        );
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(e.log_id.index, i as u64 + 1);
        }
        println!("crash round {round}: {acked} acknowledged entries, {last} on disk after kill -9");
    }
}

/// openraft truncates a follower's log before it installs a snapshot (or when an entry
/// conflicts), then goes on as if the cut were durable: a log that came back whole after kill -9
/// would end past the snapshot in an older term, and the node would refuse to start ("inverted
/// log order"). So a truncation is durable when it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_survives_kill_9_right_after_it_returns() {
    const TRUNCATE_FROM: u64 = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    kill_right_after(dir.path(), "truncate", "truncated");

    let (mut log, _sm) = zaris_raft::open(dir.path(), Arc::new(NoopObserver), Limits::default())
        .await
        .expect("reopen after kill -9");
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(
        state.last_log_id.map(|l| l.index),
        Some(TRUNCATE_FROM),
        "the truncated entries came back after kill -9"
    );
}

/// openraft purges the log behind a snapshot; the purge point says where the log starts, and
/// the entries behind it are deleted in the background. A purge point durable only after some
/// of those deletions would leave a log that starts at an entry it no longer has. So the purge
/// point is durable when a purge returns, before any deletion starts, whatever order the store
/// writes its own pages in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_point_survives_kill_9_right_after_the_purge_returns() {
    const PURGED_THROUGH: u64 = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    kill_right_after(dir.path(), "purge", "purged");

    let (mut log, _sm) = zaris_raft::open(dir.path(), Arc::new(NoopObserver), Limits::default())
        .await
        .expect("reopen after kill -9");
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(
        state.last_purged_log_id.map(|l| l.index),
        Some(PURGED_THROUGH),
        "the purge point was lost to kill -9"
    );
    let last = state
        .last_log_id
        .map(|l| l.index)
        .expect("entries after the purge point");
    let kept = log
        .try_get_log_entries(PURGED_THROUGH + 1..=last)
        .await
        .expect("read the entries after the purge point");
    assert_eq!(
        kept.len() as u64,
        last - PURGED_THROUGH,
        "a hole after the purge point"
    );
}
