//! Test support, not a product tool: appends to a Zaris Raft log in the directory given as its
//! first argument until it is killed, printing `acked N` each time entries up to N were
//! acknowledged as durable (openraft's IOFlushed callback fired). The crash test in
//! `tests/it/crash.rs` kills it with SIGKILL mid-append and checks that every acknowledged entry
//! survived.
//!
//! With a second argument `truncate`, it appends entries 1 to [`TRUNCATE_FROM`] + 29, truncates
//! the log after [`TRUNCATE_FROM`] (as openraft does before installing a snapshot, or on a
//! conflict), prints `truncated`, and waits to be killed. With `purge`, it appends the same
//! entries, purges them through [`TRUNCATE_FROM`] (as openraft does after a snapshot), prints
//! `purged`, and waits to be killed.

use std::process::ExitCode;
use std::sync::Arc;

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::type_config::TypeConfigExt;
use zaris_core::{Command, LeaseId, Limits, Request};
use zaris_raft::{Entry, NoopObserver, Proposal, TypeConfig};

/// Entries per append.
const BATCH: u64 = 8;

/// Where the `truncate` mode cuts the log: the last entry it keeps.
const TRUNCATE_FROM: u64 = 100;

/// A 512-byte put at `index`, term 1, from node 1.
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
        Proposal(Request::new(Command::Put {
            key: format!("k{index}").into_bytes(),
            value: vec![b'v'; 512],
            lease: LeaseId::NONE,
            guard: None,
            prev_kv: false,
        })),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: zaris-crash-writer DATA_DIR");
        return ExitCode::FAILURE;
    };
    let run = match std::env::args().nth(2).as_deref() {
        None => write_until_killed(dir.as_ref()).await,
        Some("truncate") => truncate_then_wait(dir.as_ref(), Cut::Truncate).await,
        Some("purge") => truncate_then_wait(dir.as_ref(), Cut::Purge).await,
        Some(other) => Err(format!("unknown mode {other:?}")),
    };
    match run {
        Ok(never) => match never {},
        Err(err) => {
            eprintln!("zaris-crash-writer: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn write_until_killed(dir: &std::path::Path) -> Result<std::convert::Infallible, String> {
    let (mut log, _sm) = zaris_raft::open(dir, Arc::new(NoopObserver), Limits::default())
        .await
        .map_err(|e| format!("open: {e}"))?;
    let state = log
        .get_log_state()
        .await
        .map_err(|e| format!("log state: {e}"))?;
    let mut next = state.last_log_id.map_or(1, |l| l.index + 1);
    loop {
        let (tx, rx) = TypeConfig::oneshot();
        log.append((next..next + BATCH).map(entry), IOFlushed::signal(tx))
            .await
            .map_err(|e| format!("append: {e}"))?;
        rx.await
            .map_err(|e| format!("callback: {e}"))?
            .map_err(|e| format!("flush: {e}"))?;
        next += BATCH;
        println!("acked {}", next - 1);
    }
}

/// Which end of the log [`truncate_then_wait`] cuts.
#[derive(Clone, Copy)]
enum Cut {
    /// The entries after [`TRUNCATE_FROM`].
    Truncate,
    /// The entries up to it.
    Purge,
}

async fn truncate_then_wait(
    dir: &std::path::Path,
    cut: Cut,
) -> Result<std::convert::Infallible, String> {
    let (mut log, _sm) = zaris_raft::open(dir, Arc::new(NoopObserver), Limits::default())
        .await
        .map_err(|e| format!("open: {e}"))?;
    let (tx, rx) = TypeConfig::oneshot();
    log.append((1..TRUNCATE_FROM + 30).map(entry), IOFlushed::signal(tx))
        .await
        .map_err(|e| format!("append: {e}"))?;
    rx.await
        .map_err(|e| format!("callback: {e}"))?
        .map_err(|e| format!("flush: {e}"))?;
    let at = entry(TRUNCATE_FROM).log_id;
    match cut {
        Cut::Truncate => {
            log.truncate_after(Some(at))
                .await
                .map_err(|e| format!("truncate: {e}"))?;
            println!("truncated");
        }
        Cut::Purge => {
            log.purge(at).await.map_err(|e| format!("purge: {e}"))?;
            println!("purged");
        }
    }
    std::future::pending().await
}
