//! Seeding a new node's stores from a backup (`zaris snapshot restore`): the backed-up state
//! becomes the node's persisted snapshot, at a log position every member of the new cluster
//! agrees on, with the new cluster's membership. Started on each member's seeded data dir,
//! openraft installs the snapshot and elects a leader as after any restart; no member needs to
//! `initialize` the cluster.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use openraft::Membership;
use zaris_core::State;

use crate::io_err;
use crate::log_store::{LOG_TREE, LogStore, META_TREE};
use crate::snapshot_file::SnapshotFiles;
use crate::types::{LogId, Member, SnapshotMeta, StoredMembership};

/// Writes `state` into a new node's data dir as its snapshot, with `members` as
/// the cluster's voters. The snapshot sits at log index `state.last_applied()` (so revisions,
/// and with them fencing tokens, continue from the state's), in term 0 like the entry
/// `initialize` writes, attributed to the lowest member id: every member seeded from the same
/// state and members gets the same log position and the same membership.
///
/// Refuses a dir that already holds a node's log, vote or snapshot. Returns the log position.
pub async fn seed(dir: &Path, state: &State, members: &BTreeMap<u64, Member>) -> io::Result<LogId> {
    let Some(&first) = members.keys().next() else {
        return Err(io_err("restore", "no members given"));
    };
    let bytes = state.snapshot().map_err(|e| io_err("encode snapshot", e))?;
    let db = crate::open_db(dir).await?;
    let files = SnapshotFiles::open(dir, &db)?;
    let mut holds_data = files.exists();
    for tree in [LOG_TREE, META_TREE] {
        let tree = db.open_tree(tree).map_err(|e| io_err("open tree", e))?;
        holds_data |= !tree.is_empty();
    }
    if holds_data {
        return Err(io_err(
            "restore",
            format!("{} already holds a node's data", dir.display()),
        ));
    }
    let log_id = LogId::new(
        openraft::impls::leader_id_adv::LeaderId {
            term: 0,
            node_id: first,
        },
        state.last_applied().get(),
    );
    let nodes = members.clone();
    let meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(Some(log_id), Membership::from(nodes)),
    };
    // The snapshot first: a seed cut short leaves a snapshot without a log start, which the
    // next attempt refuses (start over with an empty dir), never a log that points at nothing.
    files.save(&meta, bytes).await?;
    let log = LogStore::new(db.clone(), dir)?;
    log.start_after(log_id)?;
    log.fsync()
        .await
        .map_err(|e| io_err("fsync restored data", e))?;
    Ok(log_id)
}
