//! Issue 9, item 5, at the process level: a node whose storage fails for good stops, says why,
//! and exits non-zero, so a supervisor restarts it (and a client moves on) instead of talking to
//! a node that answers INTERNAL forever. The failure is a real I/O error from the real sled: the
//! node runs with a file-size limit (`prlimit --fsize`) and SIGXFSZ ignored, so once its data
//! files reach the limit every write fails with EFBIG.

use std::time::Duration;

use zaris_client::PutOptions;

use crate::procs::{client, zaris};

/// The data dir's files may not grow past this (the log file too; it stays far below).
const FILE_SIZE_LIMIT_BYTES: u64 = 4 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_storage_fails_stops_and_exits_non_zero() {
    let root = tempfile::tempdir().expect("tempdir");
    // `trap '' XFSZ` is inherited across exec: a write past the limit fails instead of killing.
    let mut node = zaris_testkit::Serve::new(zaris(), 1, root.path())
        .via(
            "sh",
            [
                "-c".to_owned(),
                "trap '' XFSZ; exec prlimit --fsize=\"$0\" \"$@\"".to_owned(),
                FILE_SIZE_LIMIT_BYTES.to_string(),
            ],
        )
        .ready_timeout(Duration::from_secs(20))
        .start()
        .await
        .expect("zaris serve starts under prlimit");
    let writer = client(&[node.endpoint()]).await;

    // Fill the store until writes fail: at most twice the limit in 64 KiB values.
    let value = vec![b'x'; 64 * 1024];
    let mut written = 0u64;
    let mut refused = None;
    while written < 2 * FILE_SIZE_LIMIT_BYTES {
        match writer
            .put(
                format!("fill/{written}"),
                value.clone(),
                PutOptions::default(),
            )
            .await
        {
            Ok(_) => written += value.len() as u64,
            Err(err) => {
                refused = Some(err);
                break;
            }
        }
    }
    let refused = refused.expect("writes past the file-size limit fail");

    let waited = tokio::time::timeout(Duration::from_secs(30), node.wait()).await;
    let Ok(status) = waited else {
        node.kill().await;
        panic!(
            "the node kept running after its storage failed ({refused}); log:\n{}",
            std::fs::read_to_string(node.log_path()).unwrap_or_default()
        );
    };
    let status = status.expect("wait");
    let log = std::fs::read_to_string(node.log_path()).unwrap_or_default();
    assert!(!status.success(), "exit status {status}; log:\n{log}");
    assert!(
        status.code().is_some(),
        "killed by a signal: {status}; log:\n{log}"
    );
    assert!(
        log.contains("stopped because its Raft failed"),
        "the node says why it stopped:\n{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
}
