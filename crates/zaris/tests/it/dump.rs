//! `zaris dump` on a real node's data dir: after a kill -9, JSON lines with the committed index
//! and every entry in order; the node restarts from the dir afterwards; a live node's dir is
//! refused with a one-line error.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use zaris_client::PutOptions;
use zaris_testkit::eventually;

use crate::procs::{client, serve, start, zaris};

/// Runs `zaris dump --data-dir DIR ARGS...`: (success, stdout, stderr).
fn dump(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(zaris())
        .arg("dump")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("run zaris dump");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn parse_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn index_of(position: &Value) -> u64 {
    position["index"].as_u64().expect("index")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_prints_a_killed_nodes_log_and_refuses_a_live_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut node = start(serve(1, root.path())).await;
    let data_dir = node.data_dir().to_owned();
    let writer = client(&[node.endpoint()]).await;
    let mut revisions = Vec::new();
    for i in 0..4 {
        let put = writer
            .put(format!("dump/{i}"), "v", PutOptions::default())
            .await
            .expect("put");
        revisions.push(put.revision);
    }
    drop(writer);
    node.kill().await;

    let (ok, stdout, stderr) = dump(&data_dir, &[]);
    assert!(ok, "dump failed: {stderr}");
    let lines = parse_lines(&stdout);
    let header = &lines[0];
    assert_eq!(
        header["node_dir"].as_str(),
        Some(data_dir.to_str().expect("utf-8 path"))
    );
    let committed = index_of(&header["committed"]);
    let last_log = index_of(&header["last_log"]);
    // The committed index is saved before apply but fsync'd only with the next append: every
    // write acknowledged before the last one is covered.
    assert!(
        committed >= (revisions[revisions.len() - 2]).get(),
        "{header}"
    );
    assert!(committed <= last_log, "{header}");
    assert!(
        header["snapshot"].is_null(),
        "no snapshot this early: {header}"
    );

    // The log starts at index 0: the bootstrap membership, in term 0.
    let entries = &lines[1..];
    assert_eq!(entries[0]["kind"].as_str(), Some("membership"), "{stdout}");
    let indexes: Vec<u64> = entries.iter().map(index_of).collect();
    assert_eq!(indexes.first(), Some(&0), "{stdout}");
    assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "{indexes:?}");
    assert_eq!(indexes.last(), Some(&last_log));
    let terms: Vec<u64> = entries
        .iter()
        .map(|e| e["term"].as_u64().expect("term"))
        .collect();
    assert!(terms.windows(2).all(|w| w[0] <= w[1]), "{terms:?}");
    for entry in entries {
        let kind = entry["kind"].as_str().expect("kind");
        assert!(["normal", "membership", "blank"].contains(&kind), "{entry}");
        assert_eq!(entry["command"].is_string(), kind == "normal", "{entry}");
        let digest = entry["digest"].as_str().expect("digest");
        assert_eq!(digest.len(), 64, "{entry}");
        assert!(digest.bytes().all(|b| b.is_ascii_hexdigit()), "{entry}");
    }
    // A revision is a log index, and the log starts at 0.
    let entry_at = |revision: u64| &entries[revision as usize];
    for revision in &revisions {
        let entry = entry_at((*revision).get());
        assert_eq!(entry["command"].as_str(), Some("put"), "{entry}");
    }
    let digests: std::collections::BTreeSet<&str> = revisions
        .iter()
        .map(|r| entry_at((*r).get())["digest"].as_str().expect("digest"))
        .collect();
    assert_eq!(
        digests.len(),
        revisions.len(),
        "different puts, different digests"
    );

    let from = revisions[1];
    let (ok, tail, stderr) = dump(&data_dir, &["--from", &from.to_string()]);
    assert!(ok, "dump --from failed: {stderr}");
    let tail = parse_lines(&tail);
    assert_eq!(tail[0], lines[0]);
    assert_eq!(&tail[1..], &entries[from.get() as usize..]);

    // Dumping changed nothing the node needs: it restarts with every key.
    let node = start(serve(1, root.path()).listen_as(&node)).await;
    let reader = client(&[node.endpoint()]).await;
    eventually(
        "the keys after restart",
        Duration::from_secs(20),
        || async {
            let kvs = reader.get("dump/3").await.ok()??;
            Some(kvs)
        },
    )
    .await;

    let (ok, stdout, stderr) = dump(&data_dir, &[]);
    assert!(!ok, "dump of a live node succeeded: {stdout}");
    assert!(stdout.is_empty(), "{stdout}");
    let stderr = stderr.trim();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
}

/// A compacted log starts after its purge point: the dump prints every entry still stored, from
/// there (it printed none once more than 256 entries were purged: it read from index 0 in
/// chunks and stopped at the first empty one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_of_a_compacted_log_prints_the_entries_after_the_purge() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut node = start(serve(1, root.path()).args(["--snapshot-entries", "10"])).await;
    let data_dir = node.data_dir().to_owned();
    let writer = client(&[node.endpoint()]).await;
    for i in 0..400 {
        writer
            .put(format!("compact/{i}"), "v", PutOptions::default())
            .await
            .expect("put");
    }
    drop(writer);
    node.kill().await;

    let (ok, stdout, stderr) = dump(&data_dir, &[]);
    assert!(ok, "dump failed: {stderr}");
    let lines = parse_lines(&stdout);
    let header = &lines[0];
    let purged = index_of(&header["last_purged"]);
    let last_log = index_of(&header["last_log"]);
    assert!(
        purged > 256,
        "the log was compacted past a read chunk: {header}"
    );
    let indexes: Vec<u64> = lines[1..].iter().map(index_of).collect();
    assert_eq!(indexes.first(), Some(&(purged + 1)), "{stdout}");
    assert_eq!(indexes.last(), Some(&last_log), "{stdout}");
    assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "{indexes:?}");
}
