//! The backup file `zaris snapshot save` writes and `status` / `restore` read:
//!
//! ```text
//! zaris-snapshot v1\n
//! {"cluster_id":...,"revision":...,"size_bytes":...,"sha256":"...",...}\n
//! <size_bytes bytes: the state, in zaris-core's snapshot encoding>
//! ```
//!
//! Two text lines, so `head -2` tells what a file is, then the data exactly as the leader sent
//! it. The data carries its own format-version byte (zaris-core's codec); the first line
//! versions this envelope.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail, ensure};
use serde::{Deserialize, Serialize};
use zaris_core::State;

const MAGIC: &str = "zaris-snapshot v1";
/// The header line is a few hundred bytes; anything much longer is not one of our files.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The file's second line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub cluster_id: u64,
    /// The member that sent the data (the Raft leader then).
    pub member_id: u64,
    /// Every write at or below it is in the snapshot, none above it.
    pub revision: u64,
    pub size_bytes: u64,
    /// SHA-256 of the data, hex.
    pub sha256: String,
    /// The data's encoding version (its first byte).
    pub state_format: u32,
    pub lease_count: u64,
    pub key_count: u64,
    /// When it was saved, ms since the Unix epoch (the saving host's clock).
    pub saved_at_unix_ms: u64,
}

/// Writes the file atomically: into a new temporary file beside it (`PATH.part-<pid>-<n>`,
/// created exclusively, mode 0600: the backup holds every value), fsync'd, renamed over `path`,
/// and the directory fsync'd. A crash or error midway never leaves a partial file under the
/// final name, and two saves to the same path at once never share a temporary file.
pub fn write(path: &Path, header: &Header, data: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static ATTEMPT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut part = path.as_os_str().to_owned();
    part.push(format!(
        ".part-{}-{}",
        std::process::id(),
        ATTEMPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let part = std::path::PathBuf::from(part);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&part)
        .with_context(|| format!("cannot create {}", part.display()))?;
    let written = (|| {
        let header_line = serde_json::to_string(header)?;
        file.write_all(format!("{MAGIC}\n{header_line}\n").as_bytes())?;
        file.write_all(data)?;
        file.sync_all()?;
        std::fs::rename(&part, path)
            .with_context(|| format!("cannot rename {} to {}", part.display(), path.display()))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&part);
        return Err(e.context(format!("cannot write {}", path.display())));
    }
    // The rename is durable once the directory is.
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| {
            format!(
                "{} is written, but its directory could not be synced",
                path.display()
            )
        })
}

/// A backup read back and checked: the header matches the data (length, SHA-256), and the data
/// decodes into a state whose invariants hold.
#[derive(Debug)]
pub struct Backup {
    pub header: Header,
    pub state: State,
}

pub fn read(path: &Path) -> anyhow::Result<Backup> {
    // Checked before reading it all into memory: a state is at most MAX_SNAPSHOT_BYTES.
    let length = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    let longest =
        (zaris_core::codec::MAX_SNAPSHOT_BYTES + MAX_HEADER_BYTES + MAGIC.len() + 1) as u64;
    if length > longest {
        bail!(
            "{} is {length} bytes, more than a Zaris snapshot can be ({longest})",
            path.display()
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&bytes).with_context(|| format!("{} is not a usable Zaris snapshot", path.display()))
}

fn parse(bytes: &[u8]) -> anyhow::Result<Backup> {
    let (magic, rest) = split_line(bytes, MAGIC.len() + 1)
        .context("it does not start with a zaris-snapshot line")?;
    ensure!(
        magic == MAGIC.as_bytes(),
        "its first line is {:?}, expected {MAGIC:?}",
        String::from_utf8_lossy(magic)
    );
    let (header_line, data) =
        split_line(rest, MAX_HEADER_BYTES).context("its header line is missing or too long")?;
    let header: Header =
        serde_json::from_slice(header_line).context("its header line is not valid")?;
    ensure!(
        data.len() as u64 == header.size_bytes,
        "it holds {} bytes of data, its header says {} (truncated or appended to)",
        data.len(),
        header.size_bytes
    );
    let sha256 = zaris_core::codec::bytes_digest(data).to_string();
    ensure!(
        sha256 == header.sha256,
        "its data does not match the SHA-256 in its header (corrupted)"
    );
    let state = State::restore(data).context("its data does not decode")?;
    if state.last_applied().get() != header.revision {
        bail!(
            "its data is at revision {}, its header says {}",
            state.last_applied(),
            header.revision
        );
    }
    Ok(Backup { header, state })
}

/// The bytes before the first newline (at most `max` of them) and those after it.
fn split_line(bytes: &[u8], max: usize) -> Option<(&[u8], &[u8])> {
    let end = bytes.iter().take(max).position(|b| *b == b'\n')?;
    Some((&bytes[..end], &bytes[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backup_bytes() -> (Header, Vec<u8>) {
        let mut state = State::default();
        state.apply_noop(zaris_core::Revision::new(42));
        let data = state.snapshot().expect("encode");
        let header = Header {
            cluster_id: 7,
            member_id: 1,
            revision: 42,
            size_bytes: data.len() as u64,
            sha256: zaris_core::codec::bytes_digest(&data).to_string(),
            state_format: u32::from(zaris_core::codec::FORMAT_VERSION),
            lease_count: 0,
            key_count: 0,
            saved_at_unix_ms: 1,
        };
        (header, data)
    }

    #[test]
    fn a_written_file_reads_back_and_any_damage_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("backup.zsnap");
        let (header, data) = backup_bytes();
        write(&path, &header, &data).expect("write");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains(".part"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read_back = read(&path).expect("read");
        assert_eq!(read_back.header, header);
        assert_eq!(read_back.state.last_applied().get(), 42);

        let good = std::fs::read(&path).expect("bytes");
        let cause = |bytes: &[u8]| match parse(bytes) {
            Ok(_) => panic!("damaged file accepted"),
            Err(e) => format!("{e:#}"),
        };
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert!(cause(&flipped).contains("SHA-256"), "{}", cause(&flipped));
        assert!(cause(&good[..good.len() - 3]).contains("truncated"));
        assert!(cause(b"PK\x03\x04 a zip file").contains("zaris-snapshot"));
        assert!(cause(b"").contains("zaris-snapshot"));
        let mut bad_header = good.clone();
        let brace = bad_header.iter().position(|b| *b == b'{').expect("header");
        bad_header[brace] = b'[';
        assert!(cause(&bad_header).contains("header line is not valid"));
    }
}
