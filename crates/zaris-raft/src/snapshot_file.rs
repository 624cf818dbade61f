//! Where a node's current snapshot is persisted: one file beside the sled database, replaced
//! atomically (written to a temporary file, fsync'd, renamed, the directory fsync'd).
//!
//! Not in sled: a snapshot is as large as the state (hundreds of MB at a million leases), and
//! written into the log's database it went through sled's log and page cache and held up every
//! log append behind its fsync, so client writes stalled for seconds while snapshots were saved.
//! A data dir from before this module kept its snapshot in sled's `snapshot` tree: that one is
//! read until the first snapshot is saved here, which then empties the tree.
//!
//! File layout: [`MAGIC`], a layout version byte, the meta's length (u32 big-endian), the meta
//! (codec-encoded), the data's length (u64 big-endian), the data (the state as
//! `State::snapshot` encodes it). The lengths catch a file cut short.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zaris_core::codec;

use crate::io_err;
use crate::types::{Snapshot, SnapshotMeta};

/// The sled tree snapshots were kept in before they moved to their own file.
pub(crate) const LEGACY_SNAPSHOT_TREE: &str = "snapshot";
const LEGACY_META: &str = "meta";
const LEGACY_DATA: &str = "data";

/// The snapshot's file name in the data dir. sled owns the dir's other files; it removes only
/// files of its own naming (`snap.*`, `blobs/`), so this name is safe beside them.
const SNAPSHOT_FILE: &str = "zaris.snapshot";
const MAGIC: &[u8; 4] = b"ZSNP";
const LAYOUT_VERSION: u8 = 1;

/// The current snapshot of one data dir.
#[derive(Clone)]
pub(crate) struct SnapshotFiles {
    dir: PathBuf,
    legacy: sled::Tree,
    /// Serializes saves: a build (which copied the state at some index A) runs beside an install
    /// (of a snapshot at B), and the check-then-write in `save` must see the other's result.
    saving: Arc<tokio::sync::Mutex<()>>,
}

impl SnapshotFiles {
    pub(crate) fn open(dir: &Path, db: &sled::Db) -> io::Result<Self> {
        let legacy = db
            .open_tree(LEGACY_SNAPSHOT_TREE)
            .map_err(|e| io_err("open snapshot tree", e))?;
        Ok(SnapshotFiles {
            dir: dir.to_path_buf(),
            legacy,
            saving: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_FILE)
    }

    /// Whether any snapshot is persisted (in the file, or in the legacy tree).
    pub(crate) fn exists(&self) -> bool {
        self.path().exists() || !self.legacy.is_empty()
    }

    /// Persists a snapshot unless the one on disk is at least as new. A build that copied the
    /// state at A may finish after a snapshot at B > A was installed and the log purged up to B:
    /// saving A then would leave a node that can never restart (it would need logs from A + 1).
    /// Returns whether it saved, and the data back (it is written off the async threads).
    pub(crate) async fn save(
        &self,
        meta: &SnapshotMeta,
        data: Vec<u8>,
    ) -> io::Result<(bool, Vec<u8>)> {
        let _saving = self.saving.lock().await;
        if let Some(current) = self.read_meta()?
            && current.last_log_id >= meta.last_log_id
        {
            tracing::info!(
                kept = ?current.last_log_id,
                dropped = ?meta.last_log_id,
                "a snapshot at least as new is already saved; keeping it"
            );
            return Ok((false, data));
        }
        let meta_bytes = codec::encode(meta).map_err(|e| io_err("encode snapshot meta", e))?;
        let dir = self.dir.clone();
        let data = tokio::task::spawn_blocking(move || {
            write_atomically(&dir, &meta_bytes, &data).map(|()| data)
        })
        .await
        .map_err(|e| io_err("snapshot writer", e))??;
        if !self.legacy.is_empty() {
            // The file is durable now; the copy in sled is stale from here on.
            self.legacy
                .clear()
                .map_err(|e| io_err("drop the snapshot kept in sled", e))?;
        }
        Ok((true, data))
    }

    /// The persisted snapshot's meta, without its data.
    pub(crate) fn read_meta(&self) -> io::Result<Option<SnapshotMeta>> {
        match File::open(self.path()) {
            Ok(file) => read_header(&mut io::BufReader::new(file)).map(|(meta, _)| Some(meta)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => read_legacy_meta(&self.legacy),
            Err(e) => Err(io_err("open snapshot", e)),
        }
    }

    /// The persisted snapshot, read whole.
    pub(crate) fn load(&self) -> io::Result<Option<Snapshot>> {
        let file = match File::open(self.path()) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.load_legacy(),
            Err(e) => return Err(io_err("open snapshot", e)),
        };
        let mut reader = io::BufReader::new(file);
        let (meta, data_len) = read_header(&mut reader)?;
        let data_len = usize::try_from(data_len)
            .map_err(|_| io_err("read snapshot", "data length exceeds memory"))?;
        let mut snapshot = Vec::new();
        snapshot
            .try_reserve_exact(data_len)
            .map_err(|e| io_err("read snapshot", e))?;
        reader
            .take(data_len as u64)
            .read_to_end(&mut snapshot)
            .map_err(|e| io_err("read snapshot", e))?;
        if snapshot.len() != data_len {
            return Err(io_err(
                "read snapshot",
                format!(
                    "{} is cut short: {} of {data_len} data bytes",
                    self.path().display(),
                    snapshot.len()
                ),
            ));
        }
        Ok(Some(Snapshot { meta, snapshot }))
    }

    fn load_legacy(&self) -> io::Result<Option<Snapshot>> {
        let Some(meta) = read_legacy_meta(&self.legacy)? else {
            return Ok(None);
        };
        let Some(data) = self
            .legacy
            .get(LEGACY_DATA)
            .map_err(|e| io_err("read snapshot", e))?
        else {
            return Ok(None);
        };
        Ok(Some(Snapshot {
            meta,
            snapshot: data.to_vec(),
        }))
    }
}

fn read_legacy_meta(tree: &sled::Tree) -> io::Result<Option<SnapshotMeta>> {
    let Some(meta) = tree
        .get(LEGACY_META)
        .map_err(|e| io_err("read snapshot", e))?
    else {
        return Ok(None);
    };
    codec::decode(&meta, codec::MAX_MESSAGE_BYTES)
        .map(Some)
        .map_err(|e| io_err("decode snapshot meta", e))
}

/// Reads the header: the meta and the data's length, leaving `reader` at the data.
fn read_header(reader: &mut impl Read) -> io::Result<(SnapshotMeta, u64)> {
    let mut magic = [0u8; 5];
    reader
        .read_exact(&mut magic)
        .map_err(|e| io_err("read snapshot header", e))?;
    if &magic[..4] != MAGIC || magic[4] != LAYOUT_VERSION {
        return Err(io_err(
            "read snapshot header",
            format!(
                "not a Zaris snapshot file of layout {LAYOUT_VERSION} (starts {:?})",
                &magic
            ),
        ));
    }
    let mut len = [0u8; 4];
    reader
        .read_exact(&mut len)
        .map_err(|e| io_err("read snapshot header", e))?;
    let meta_len = u32::from_be_bytes(len) as usize;
    if meta_len > codec::MAX_MESSAGE_BYTES {
        return Err(io_err(
            "read snapshot header",
            format!("meta of {meta_len} bytes"),
        ));
    }
    let mut meta = vec![0u8; meta_len];
    reader
        .read_exact(&mut meta)
        .map_err(|e| io_err("read snapshot meta", e))?;
    let meta = codec::decode(&meta, codec::MAX_MESSAGE_BYTES)
        .map_err(|e| io_err("decode snapshot meta", e))?;
    let mut len = [0u8; 8];
    reader
        .read_exact(&mut len)
        .map_err(|e| io_err("read snapshot header", e))?;
    Ok((meta, u64::from_be_bytes(len)))
}

/// Writes the file under a temporary name, fsyncs it, renames it over the current one and
/// fsyncs the directory: a crash leaves the old snapshot or the new one, never a mix.
fn write_atomically(dir: &Path, meta: &[u8], data: &[u8]) -> io::Result<()> {
    let path = dir.join(SNAPSHOT_FILE);
    let temporary = dir.join(format!("{SNAPSHOT_FILE}.tmp"));
    let meta_len =
        u32::try_from(meta.len()).map_err(|_| io_err("write snapshot", "meta too large"))?;
    {
        let file = File::create(&temporary).map_err(|e| io_err("create snapshot", e))?;
        let mut writer = io::BufWriter::new(file);
        writer.write_all(MAGIC)?;
        writer.write_all(&[LAYOUT_VERSION])?;
        writer.write_all(&meta_len.to_be_bytes())?;
        writer.write_all(meta)?;
        writer.write_all(&(data.len() as u64).to_be_bytes())?;
        writer.write_all(data)?;
        let file = writer
            .into_inner()
            .map_err(|e| io_err("write snapshot", e.into_error()))?;
        file.sync_all().map_err(|e| io_err("fsync snapshot", e))?;
    }
    fs::rename(&temporary, &path).map_err(|e| io_err("rename snapshot", e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err("fsync data dir", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StoredMembership;

    fn meta(index: u64) -> SnapshotMeta {
        SnapshotMeta {
            last_log_id: Some(openraft::LogId::new(
                openraft::impls::leader_id_adv::LeaderId {
                    term: 1,
                    node_id: 1,
                },
                index,
            )),
            last_membership: StoredMembership::default(),
        }
    }

    fn open(dir: &Path) -> (sled::Db, SnapshotFiles) {
        let db = sled::Config::new().path(dir).open().expect("open sled");
        let files = SnapshotFiles::open(dir, &db).expect("files");
        (db, files)
    }

    /// Issue 9, hole 2: a build that copied the state at A finishing after a snapshot at B > A was
    /// installed must not replace B on disk.
    #[tokio::test]
    async fn an_older_snapshot_never_replaces_a_newer_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_db, files) = open(dir.path());
        assert!(!files.exists());
        assert!(
            files
                .save(&meta(20), b"at twenty".to_vec())
                .await
                .expect("save B")
                .0
        );
        assert!(
            !files
                .save(&meta(10), b"at ten".to_vec())
                .await
                .expect("save A")
                .0
        );
        let kept = files.load().expect("load").expect("a snapshot");
        assert_eq!(kept.meta, meta(20));
        assert_eq!(kept.snapshot, b"at twenty");
        assert!(
            files
                .save(&meta(30), b"at thirty".to_vec())
                .await
                .expect("save C")
                .0
        );
        assert_eq!(files.read_meta().expect("meta"), Some(meta(30)));
        assert!(!dir.path().join(format!("{SNAPSHOT_FILE}.tmp")).exists());
    }

    /// A data dir from before the file kept its snapshot in sled: it is read from there until
    /// the first save, which leaves it in the file alone.
    #[tokio::test]
    async fn a_snapshot_kept_in_sled_is_read_until_the_first_save_moves_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, files) = open(dir.path());
        let tree = db.open_tree(LEGACY_SNAPSHOT_TREE).expect("tree");
        tree.insert(LEGACY_META, codec::encode(&meta(7)).expect("encode"))
            .expect("insert");
        tree.insert(LEGACY_DATA, b"old".to_vec()).expect("insert");
        assert!(files.exists());
        assert_eq!(files.read_meta().expect("meta"), Some(meta(7)));
        assert_eq!(files.load().expect("load").expect("some").snapshot, b"old");
        assert!(
            !files
                .save(&meta(7), b"same".to_vec())
                .await
                .expect("save")
                .0
        );
        assert!(files.save(&meta(8), b"new".to_vec()).await.expect("save").0);
        assert!(
            tree.is_empty(),
            "the sled copy is dropped once the file holds a newer one"
        );
        let loaded = files.load().expect("load").expect("some");
        assert_eq!((loaded.meta, loaded.snapshot), (meta(8), b"new".to_vec()));
    }

    /// A file cut short or overwritten with garbage is an error naming the problem, not a panic
    /// or a truncated state.
    #[tokio::test]
    async fn a_damaged_file_is_refused_with_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_db, files) = open(dir.path());
        files.save(&meta(5), vec![9u8; 1000]).await.expect("save");
        let path = dir.path().join(SNAPSHOT_FILE);
        let whole = fs::read(&path).expect("read");
        fs::write(&path, &whole[..whole.len() - 10]).expect("cut");
        let error = files.load().expect_err("cut short");
        assert!(error.to_string().contains("cut short"), "{error}");
        fs::write(&path, b"garbage, not a snapshot").expect("garbage");
        let error = files.load().expect_err("garbage");
        assert!(
            error.to_string().contains("not a Zaris snapshot"),
            "{error}"
        );
        assert!(files.read_meta().is_err());
    }
}
