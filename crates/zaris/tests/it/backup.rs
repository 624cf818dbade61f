//! Issue 11, item 5: backups. `zaris snapshot save` takes a consistent snapshot of a running
//! three-node cluster while a client writes, and three `zaris snapshot restore`s seed a new
//! cluster from the file: it serves every key, lease and lock the snapshot holds (with the same
//! ids, revisions and fencing token), every acknowledged write at or below the snapshot's
//! revision and none after it, and continues revisions above `--bump-revision`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use zaris_client::{LockHolder, LockOutcome, PutOptions, RangeOptions};
use zaris_testkit::eventually;

use crate::procs::{client, serve, start, three_nodes, zaris};

const BUMP: u64 = 1_000;

/// Runs `zaris ARGS -o json`; its one JSON line, or its stderr as the error.
async fn zaris_json(args: &[&str]) -> Result<Value, String> {
    let output = Command::new(zaris())
        .args(args)
        .args(["-o", "json"])
        .env_remove("ZARIS_ENDPOINTS")
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run zaris: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn prefix() -> RangeOptions {
    RangeOptions {
        prefix: true,
        ..RangeOptions::default()
    }
}

fn bound(lease: zaris_client::LeaseId) -> PutOptions {
    PutOptions {
        lease: Some(lease),
        ..PutOptions::default()
    }
}

/// The client and peer addresses of three members, on 127.0.0.1 with ports the OS chose (bound,
/// then released for the nodes: the restored membership must name them before the nodes start).
async fn three_members() -> Vec<(String, String)> {
    let mut listeners = Vec::new();
    for _ in 0..6 {
        listeners.push(
            tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind"),
        );
    }
    let addresses: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().expect("addr").to_string())
        .collect();
    addresses
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_saved_under_writes_restores_a_new_cluster_with_exactly_what_it_held() {
    let root = tempfile::tempdir().expect("tempdir");
    let backup = root.path().join("backup.zsnap");
    let old_root = root.path().join("old");
    let new_root = root.path().join("new");
    for dir in [&old_root, &new_root] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let nodes = three_nodes(&old_root).await;
    let endpoints: Vec<&str> = nodes.iter().map(|n| n.endpoint()).collect();
    let old = client(&endpoints).await;

    // Ownership state: a lease with a bound key holding a lock, a plain key, and a revoked
    // lease whose key went with it.
    let lease = old.grant(Duration::from_secs(60)).await.expect("grant").id;
    old.put("owner/job-1", "worker-a", bound(lease))
        .await
        .expect("put bound");
    let LockOutcome::Held { token } = old
        .lock("job-queue", lease, false, Duration::ZERO)
        .await
        .expect("lock")
    else {
        panic!("the free lock was not granted");
    };
    old.put("config/x", "1", PutOptions::default())
        .await
        .expect("put plain");
    let gone = old.grant(Duration::from_secs(60)).await.expect("grant").id;
    old.put("presence/gone", "up", bound(gone))
        .await
        .expect("put");
    let _ = old.revoke(gone).await.expect("revoke");
    let before = old.range("", prefix()).await.expect("range");

    // A writer keeps writing while the snapshot is taken (through a follower: redirected).
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let writer_client = client(&endpoints).await;
        tokio::spawn(async move {
            let mut acknowledged = BTreeMap::new();
            let mut i = 0u32;
            while !stop.load(Ordering::Acquire) {
                let key = format!("w/{i:05}");
                if let Ok(written) = writer_client
                    .put(key.clone(), "v", PutOptions::default())
                    .await
                {
                    acknowledged.insert(key, written.revision.get());
                }
                i += 1;
            }
            acknowledged
        })
    };
    eventually(
        "the writer to get going",
        Duration::from_secs(10),
        || async {
            let range = old.range("w/", prefix()).await.ok()?;
            (range.count >= 20).then_some(())
        },
    )
    .await;
    let leader = old.leader().await.expect("leader").id;
    let follower = nodes
        .iter()
        .find(|n| n.id() != leader)
        .expect("a follower")
        .endpoint()
        .to_owned();
    let backup_path = backup.to_str().expect("utf-8 path");
    let saved = zaris_json(&["snapshot", "save", backup_path, "--endpoints", &follower])
        .await
        .expect("snapshot save");
    assert_eq!(saved["header"]["member_id"], leader, "{saved}");
    let revision = saved["header"]["revision"].as_u64().expect("revision");
    eventually(
        "writes after the snapshot",
        Duration::from_secs(10),
        || async {
            let range = old.range("w/", prefix()).await.ok()?;
            (range.revision.get() > revision + 20).then_some(())
        },
    )
    .await;
    stop.store(true, Ordering::Release);
    let acknowledged = writer.await.expect("writer");
    let (in_snapshot, after): (Vec<_>, Vec<_>) =
        acknowledged.iter().partition(|(_, rev)| **rev <= revision);
    assert!(
        !in_snapshot.is_empty() && !after.is_empty(),
        "the writer straddles the snapshot"
    );
    drop(nodes);

    let status = zaris_json(&["snapshot", "status", backup_path])
        .await
        .expect("snapshot status");
    assert_eq!(status["verified"], true);
    assert_eq!(status["header"]["revision"], revision);
    assert_eq!(status["locks"], 1);

    // The new cluster: three members seeded from the file, on new addresses.
    let members = three_members().await;
    let initial_cluster = members
        .iter()
        .enumerate()
        .map(|(i, (address, peer))| format!("{}={address}/{peer}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let bump = BUMP.to_string();
    let mut seeds = Vec::new();
    for id in 1..=3u64 {
        let data_dir = serve(id, &new_root).data_dir();
        let restored = zaris_json(&[
            "snapshot",
            "restore",
            backup_path,
            "--node-id",
            &id.to_string(),
            "--data-dir",
            data_dir.to_str().expect("utf-8 path"),
            "--initial-cluster",
            &initial_cluster,
            "--bump-revision",
            &bump,
        ])
        .await
        .expect("snapshot restore");
        assert_eq!(restored["start_revision"], revision + BUMP, "{restored}");
        seeds.push(restored["seed"].as_str().expect("seed").to_owned());
    }
    assert!(seeds.iter().all(|seed| *seed == seeds[0]), "{seeds:?}");
    refuses_what_it_must(
        backup_path,
        &serve(1, &new_root).data_dir(),
        &initial_cluster,
        root.path(),
    )
    .await;
    let mut restored_nodes = Vec::new();
    for (id, (address, peer)) in (1..=3u64).zip(&members) {
        restored_nodes.push(
            start(
                serve(id, &new_root)
                    .listen(address.parse().expect("address"))
                    .peer_listen(peer.parse().expect("address"))
                    .args(["--initial-cluster", &initial_cluster]),
            )
            .await,
        );
    }
    let endpoints: Vec<&str> = members.iter().map(|(a, _)| a.as_str()).collect();
    let new = client(&endpoints).await;

    // Exactly the snapshot: the ownership state as it was, with its ids, revisions and token...
    let after_restore = new.range("", prefix()).await.expect("range");
    let restored: BTreeMap<Vec<u8>, _> = after_restore
        .kvs
        .iter()
        .map(|kv| (kv.key.clone(), kv.clone()))
        .collect();
    for kv in &before.kvs {
        assert_eq!(
            restored.get(&kv.key),
            Some(kv),
            "{:?}",
            String::from_utf8_lossy(&kv.key)
        );
    }
    assert!(!restored.contains_key(b"presence/gone".as_slice()));
    let info = new
        .time_to_live(lease, true)
        .await
        .expect("ttl")
        .expect("the lease was restored");
    assert_eq!(info.bound_keys, vec![b"owner/job-1".to_vec()]);
    assert_eq!(info.locks_held, vec!["job-queue".to_owned()]);
    assert_eq!(
        new.lock_status("job-queue")
            .await
            .expect("lock status")
            .holder,
        Some(LockHolder { lease, token })
    );
    assert!(new.time_to_live(gone, false).await.expect("ttl").is_none());
    // ...every acknowledged write at or below its revision, none above it.
    for (key, rev) in &in_snapshot {
        assert!(
            restored.contains_key(key.as_bytes()),
            "{key} (revision {rev}) was lost"
        );
    }
    for (key, rev) in &after {
        assert!(
            !restored.contains_key(key.as_bytes()),
            "{key} (revision {rev}) is after the snapshot"
        );
    }
    // Every member holds it, not only the one that answered.
    for endpoint in &endpoints {
        let member = client(&[endpoint]).await;
        let kv = member
            .range(
                "owner/job-1",
                RangeOptions {
                    serializable: true,
                    ..RangeOptions::default()
                },
            )
            .await
            .expect("serializable read");
        assert_eq!(kv.kvs.len(), 1, "member at {endpoint}");
    }

    // The holder carries on, and new revisions (fencing tokens) start above the bump.
    new.keep_alive_once([lease])
        .await
        .expect("renew the restored lease");
    let written = new
        .put("config/y", "2", PutOptions::default())
        .await
        .expect("put on the new cluster");
    assert!(written.revision.get() > revision + BUMP, "{written:?}");
    let fresh = new.grant(Duration::from_secs(60)).await.expect("grant").id;
    assert!(
        fresh.get() > gone.get() + BUMP,
        "lease id {fresh} after a bump of {BUMP}"
    );
}

/// A restore never touches a dir that holds data, needs its member in the membership, and never
/// accepts a damaged file.
async fn refuses_what_it_must(
    backup: &str,
    used_dir: &Path,
    initial_cluster: &str,
    scratch: &Path,
) {
    let fresh_dir = scratch.join("fresh");
    let fresh_dir = fresh_dir.to_str().expect("utf-8 path");
    let used_dir = used_dir.to_str().expect("utf-8 path");
    let restore = |file: String, id: &'static str, dir: String| {
        let initial_cluster = initial_cluster.to_owned();
        async move {
            zaris_json(&[
                "snapshot",
                "restore",
                &file,
                "--node-id",
                id,
                "--data-dir",
                &dir,
                "--initial-cluster",
                &initial_cluster,
                "--bump-revision",
                "0",
            ])
            .await
        }
    };
    let err = restore(backup.into(), "1", used_dir.into())
        .await
        .expect_err("a used dir");
    assert!(err.contains("not empty"), "{err}");
    let err = restore(backup.into(), "9", fresh_dir.into())
        .await
        .expect_err("a stranger");
    assert!(
        err.contains("member 9 is not in the initial cluster"),
        "{err}"
    );
    let mut bytes = std::fs::read(backup).expect("read backup");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let damaged = scratch.join("damaged.zsnap");
    std::fs::write(&damaged, bytes).expect("write");
    let damaged = damaged.to_str().expect("utf-8 path").to_owned();
    let err = restore(damaged.clone(), "1", fresh_dir.into())
        .await
        .expect_err("a damaged file");
    assert!(err.contains("SHA-256"), "{err}");
    let err = zaris_json(&["snapshot", "status", &damaged])
        .await
        .expect_err("status of a damaged file");
    assert!(err.contains("SHA-256"), "{err}");
    assert!(
        !Path::new(fresh_dir).exists(),
        "a refused restore left a dir behind"
    );
}
