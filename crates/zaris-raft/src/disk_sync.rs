//! What sled's flush leaves out, made durable after it.
//!
//! sled 0.34's `flush` writes its log buffers with `sync_file_range` on Linux, not `fsync`: the
//! data is written to the disk, but neither the file's metadata (its size, as the file grows) nor
//! the disk's volatile write cache is flushed. Values over a quarter of a segment (128 KiB) go to
//! files under `blobs/` that sled never syncs at all. A process crash (kill -9) loses none of
//! that, because the kernel still holds it; a power failure or a kernel crash could lose an
//! acknowledged entry, or a vote, and a node could then vote twice in a term. So every flush
//! that Raft relies on is followed by fsyncs of our own: each blob file written since the last
//! one (sled tells us which: `sled::take_written_blobs`, a patch in `third_party/sled`, so no
//! directory is listed per flush), the blob directory (for the new names), then the data file.
//! Blobs a crash left unsynced are synced once when the store opens. `fdatasync` on our own
//! handle flushes the file whichever handle wrote it.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::io_err;

/// sled's data file in its directory.
const DATA_FILE: &str = "db";
/// sled's directory of large values, one file per value.
const BLOBS_DIR: &str = "blobs";

#[derive(Debug)]
pub(crate) struct DiskSync {
    data_file: File,
    blobs_dir: PathBuf,
}

impl DiskSync {
    /// For the sled database in `dir` (the path it was opened with), which must be open already
    /// (it creates the data file).
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        let data_file = File::open(dir.join(DATA_FILE))?;
        let blobs_dir = dir.join(BLOBS_DIR);
        // Whatever blobs an earlier run wrote may not have been synced before it stopped.
        sync_new_blobs(&blobs_dir, &mut HashSet::new())?;
        Ok(DiskSync {
            data_file,
            blobs_dir,
        })
    }

    /// Makes durable what sled's last flush wrote. Blocking: call it off the async threads.
    pub(crate) fn sync(&self) -> io::Result<()> {
        // Taken, so an error here fails this sync (and Raft stops on it): nothing is retried.
        let written = sled::take_written_blobs(&self.blobs_dir);
        if !written.is_empty() {
            for blob in &written {
                match File::open(blob) {
                    Ok(file) => file.sync_data()?,
                    // Deleted by sled since: nothing left to make durable.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            File::open(&self.blobs_dir)?.sync_all()?;
        }
        self.data_file.sync_data()
    }
}

/// Syncs each file in `dir` not in `synced`, then the directory itself if there was any; forgets
/// names no longer there (sled deletes blobs it no longer needs). Returns how many were synced.
fn sync_new_blobs(dir: &Path, synced: &mut HashSet<std::ffi::OsString>) -> io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut present = HashSet::with_capacity(synced.len());
    let mut newly = 0;
    for entry in entries {
        let name = entry?.file_name();
        if !synced.contains(&name) {
            match File::open(dir.join(&name)) {
                Ok(file) => file.sync_data()?,
                // Deleted by sled since the listing: nothing left to make durable.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
            newly += 1;
        }
        present.insert(name);
    }
    if newly > 0 {
        File::open(dir)?.sync_all()?;
    }
    *synced = present;
    Ok(newly)
}

/// sled's flush, then ours ([`DiskSync::sync`], on a blocking thread): when this returns Ok,
/// everything written to `db` before the call is on stable storage.
pub(crate) async fn flush_durably(db: &sled::Db, disk: &Arc<DiskSync>) -> io::Result<()> {
    db.flush_async().await.map_err(|e| io_err("fsync", e))?;
    let disk = disk.clone();
    tokio::task::spawn_blocking(move || disk.sync())
        .await
        .map_err(|e| io_err("fsync", e))?
        .map_err(|e| io_err("fsync", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_blob_is_synced_once_and_deleted_ones_are_forgotten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blobs = dir.path().join(BLOBS_DIR);
        let mut synced = HashSet::new();
        // No blob directory yet: nothing to do.
        assert_eq!(sync_new_blobs(&blobs, &mut synced).expect("sync"), 0);

        std::fs::create_dir(&blobs).expect("mkdir");
        for name in ["120", "7"] {
            std::fs::write(blobs.join(name), b"blob").expect("write");
        }
        assert_eq!(sync_new_blobs(&blobs, &mut synced).expect("sync"), 2);
        assert_eq!(sync_new_blobs(&blobs, &mut synced).expect("sync"), 0);

        // A blob written later with a lower name is still synced: names are not an order.
        std::fs::write(blobs.join("99"), b"blob").expect("write");
        std::fs::remove_file(blobs.join("120")).expect("remove");
        assert_eq!(sync_new_blobs(&blobs, &mut synced).expect("sync"), 1);
        assert_eq!(synced.len(), 2, "120 is forgotten: {synced:?}");
    }

    #[test]
    fn sled_names_the_blobs_it_wrote_under_the_path_it_was_opened_with() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new()
            .path(dir.path())
            .open()
            .expect("open sled");
        let blobs = dir.path().join(BLOBS_DIR);
        assert!(sled::take_written_blobs(&blobs).is_empty());
        // Over a quarter of a segment: a blob file of its own.
        db.insert(b"big", vec![7u8; 200 * 1024]).expect("insert");
        db.insert(b"small", vec![7u8; 16]).expect("insert");
        db.flush().expect("flush");
        let written = sled::take_written_blobs(&blobs);
        assert_eq!(written.len(), 1, "{written:?}");
        assert!(written[0].starts_with(&blobs) && written[0].exists());
        assert!(sled::take_written_blobs(&blobs).is_empty(), "taken once");

        let sync = DiskSync::open(dir.path()).expect("open");
        db.insert(b"bigger", vec![8u8; 300 * 1024]).expect("insert");
        db.flush().expect("flush");
        sync.sync().expect("sync");
        assert!(
            sled::take_written_blobs(&blobs).is_empty(),
            "the sync took it"
        );
    }

    #[test]
    fn the_data_file_must_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(DiskSync::open(dir.path()).is_err());
        std::fs::write(dir.path().join(DATA_FILE), b"").expect("write");
        let sync = DiskSync::open(dir.path()).expect("open");
        sync.sync().expect("sync");
    }
}
