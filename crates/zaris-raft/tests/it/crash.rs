//! kill -9 while appending: every entry whose append was acknowledged (the IOFlushed callback
//! fired) is there after reopening.
//!
//! The writer runs in a child process: this test binary re-executed with the ignored
//! `crash_writer_child` entry point, which appends until it is killed.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use openraft::RaftLogReader;
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::type_config::TypeConfigExt;
use zaris_core::{Command as ZCommand, Limits, Request};
use zaris_raft::{Entry, NoopObserver, Proposal, TypeConfig};

const DIR_ENV: &str = "ZARIS_CRASH_WRITER_DIR";
const BATCH: u64 = 8;

fn entry(index: u64) -> Entry {
    let log_id = openraft::LogId::new(
        openraft::impls::leader_id_adv::LeaderId {
            term: 1,
            node_id: 1,
        },
        index,
    );
    Entry::new_normal(
        log_id,
        Proposal(Request::new(ZCommand::Put {
            key: format!("k{index}").into_bytes(),
            value: vec![b'v'; 512],
            lease: 0,
            guard: None,
            prev_kv: false,
        })),
    )
}

/// Kills the child on drop, so a failing assertion never leaves it running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Not a test on its own: the writer process of `kill_during_write_loses_no_acknowledged_entry`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "child process of kill_during_write_loses_no_acknowledged_entry"]
async fn crash_writer_child() {
    let dir = std::env::var(DIR_ENV).expect("run by the crash test only");
    let (mut log, _sm) = zaris_raft::open(dir.as_ref(), Arc::new(NoopObserver), Limits::default())
        .await
        .expect("open");
    let state = log.get_log_state().await.expect("log state");
    let mut next = state.last_log_id.map_or(1, |l| l.index + 1);
    loop {
        let (tx, rx) = TypeConfig::oneshot();
        log.append((next..next + BATCH).map(entry), IOFlushed::signal(tx))
            .await
            .expect("append");
        rx.await.expect("callback").expect("flushed");
        next += BATCH;
        println!("acked {}", next - 1);
    }
}

fn spawn_writer(dir: &std::path::Path) -> Killed {
    let child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--ignored",
            "--exact",
            "crash::crash_writer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    Killed(child)
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
