//! Built only with the `raft-stats` feature, for measuring, never in a release: openraft's
//! runtime statistics written out as tables every two seconds, to `raft-stats-<node id>.txt` in
//! `$ZARIS_RAFT_STATS_DIR` (else the data directory). They give batch sizes (client writes per
//! entry, entries per append and per replication message) and how long a log entry spends in
//! each stage on this node (proposed, received, submitted, persisted, committed, applied; p50 to
//! p99.9 over the last 1,024 entries): where a write's time goes, which CPU profiles on a shared
//! machine cannot tell. docs/performance.md ("Where a 1-client put's time goes") shows what they
//! said about a 1-client put.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

const INTERVAL: Duration = Duration::from_secs(2);

/// Where the tables go: `$ZARIS_RAFT_STATS_DIR` if set (a bench's nodes keep their data in
/// directories removed when it ends), else `data_dir`.
pub(crate) fn dir(data_dir: &Path) -> PathBuf {
    std::env::var_os("ZARIS_RAFT_STATS_DIR").map_or_else(|| data_dir.to_owned(), PathBuf::from)
}

pub(crate) async fn run(raft: Raft, node_id: u64, dir: PathBuf, shutdown: CancellationToken) {
    let path = dir.join(format!("raft-stats-{node_id}.txt"));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
        // Fails only once Raft has stopped.
        let Ok(mut stats) = raft.runtime_stats().await else {
            return;
        };
        stats.build_log_stage_histograms();
        let tables = stats.display().human_readable().to_string();
        let target = path.clone();
        let written = tokio::task::spawn_blocking(move || std::fs::write(target, tables)).await;
        if let Ok(Err(error)) = written {
            tracing::warn!(%error, path = %path.display(), "cannot write the raft stats");
        }
    }
}
