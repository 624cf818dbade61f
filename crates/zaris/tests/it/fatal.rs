//! Issue 9, item 5, at the process level: a node whose storage fails for good stops, says why,
//! and exits non-zero, so a supervisor restarts it (and a client moves on) instead of talking to
//! a node that answers INTERNAL forever. The failure is a real I/O error from the real sled: the
//! node runs with a file-size limit (`prlimit --fsize`) and SIGXFSZ ignored, so once its data
//! files reach the limit every write fails with EFBIG.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zaris_client::PutOptions;

use crate::procs::{client, wait_for_file, zaris};

/// The data dir's files may not grow past this (the log file too; it stays far below).
const FILE_SIZE_LIMIT_BYTES: u64 = 4 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_storage_fails_stops_and_exits_non_zero() {
    let root = tempfile::tempdir().expect("tempdir");
    let ready = root.path().join("node-1.ready");
    let log_path = root.path().join("node-1.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    // `trap '' XFSZ` is inherited across exec: a write past the limit fails instead of killing.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; exec prlimit --fsize=\"$0\" \"$@\"")
        .arg(FILE_SIZE_LIMIT_BYTES.to_string())
        .arg(zaris())
        .args(["serve", "--node-id", "1", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(root.path().join("node-1"))
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn zaris serve under prlimit");
    let addr = wait_for_file(&ready, Duration::from_secs(20));
    let writer = client(&[&addr]).await;

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

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the node kept running after its storage failed ({refused}); log:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
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
