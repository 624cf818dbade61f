//! `dump::read_log`: a stopped node's log, summarized entry by entry; a live one is refused.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage, RaftStateMachine};
use openraft::type_config::TypeConfigExt;
use openraft::{RaftLogReader, RaftSnapshotBuilder};
use zaris_core::{Command, LeaseId, Limits, Request, codec};
use zaris_raft::dump::{self, Dump, EntryKind, Position};
use zaris_raft::{Entry, LogId, NoopObserver, Proposal, TypeConfig};

fn log_id(term: u64, index: u64) -> LogId {
    openraft::LogId::new(
        openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 },
        index,
    )
}

fn put(term: u64, index: u64) -> Entry {
    Entry::new_normal(
        log_id(term, index),
        Proposal(Request::new(Command::Put {
            key: format!("k{index}").into_bytes(),
            value: b"v".to_vec(),
            lease: LeaseId::NONE,
            guard: None,
            prev_kv: false,
        })),
    )
}

/// A handle dropped in this process may hold sled's lock for a moment.
async fn read_when_closed(dir: &std::path::Path, from: u64) -> Dump {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match dump::read_log(dir, from).await {
            Ok(dump) => return dump,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("dump failed: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_lists_entries_with_payload_digests_and_refuses_a_live_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let entries: Vec<Entry> = std::iter::once(Entry::new_blank(log_id(2, 1)))
        .chain((2..=5).map(|i| put(2, i)))
        .collect();
    {
        let (mut log, mut sm) =
            zaris_raft::open(dir.path(), Arc::new(NoopObserver), Limits::default())
                .await
                .expect("open");
        let (tx, rx) = TypeConfig::oneshot();
        log.append(entries.clone(), IOFlushed::signal(tx))
            .await
            .expect("append");
        rx.await.expect("callback fired").expect("flushed");
        log.save_committed(Some(log_id(2, 4)))
            .await
            .expect("committed");
        let applied = log.try_get_log_entries(1..=3).await.expect("read");
        let stream = futures::stream::iter(applied.into_iter().map(|e| Ok((e, None))));
        sm.apply(stream).await.expect("apply");
        sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("snapshot");

        let live = dump::read_log(dir.path(), 0)
            .await
            .expect_err("the store is open");
        assert_eq!(live.kind(), io::ErrorKind::WouldBlock);
        assert!(live.to_string().contains("in use"), "{live}");
    }

    let dump = read_when_closed(dir.path(), 0).await;
    let at = |index| Some(Position { term: 2, index });
    assert_eq!(dump.committed, at(4));
    assert_eq!(dump.last_log, at(5));
    assert_eq!(dump.last_purged, None);
    assert_eq!(dump.snapshot, at(3));
    let positions: Vec<u64> = dump.entries.iter().map(|e| e.position.index).collect();
    assert_eq!(positions, vec![1, 2, 3, 4, 5]);
    assert_eq!(dump.entries[0].kind, EntryKind::Blank);
    assert_eq!(dump.entries[0].command, None);
    for (dumped, entry) in dump.entries.iter().zip(&entries).skip(1) {
        assert_eq!(dumped.kind, EntryKind::Normal);
        assert_eq!(dumped.command, Some("put"));
        assert_eq!(
            dumped.digest,
            codec::record_digest(&entry.payload).expect("digest")
        );
    }
    assert_ne!(dump.entries[1].digest, dump.entries[2].digest);
    assert_eq!(dump.entries[1].digest_hex().len(), 64);

    let tail = read_when_closed(dir.path(), 4).await;
    let positions: Vec<u64> = tail.entries.iter().map(|e| e.position.index).collect();
    assert_eq!(positions, vec![4, 5]);

    let empty = tempfile::tempdir().expect("tempdir");
    let error = dump::read_log(empty.path(), 0)
        .await
        .expect_err("no database");
    assert!(
        error.to_string().contains("not a Zaris data dir"),
        "{error}"
    );
    assert!(!empty.path().join("db").exists(), "nothing was created");
}
