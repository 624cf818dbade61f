//! The one place that knows the binary format (bincode 2.0.1 through serde).
//!
//! bincode is unmaintained and its 3.0.0 release is a tombstone, so every encode and decode in the
//! project goes through here: replacing it later touches one module. Every encoded record starts with
//! a format-version byte so a future format can be told apart from this one.

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest as _, Sha256};

use crate::state::State;

/// The format-version byte of records written by this release.
/// Version 2: request ids carry `seen_revision`, limits `dedup_max_bytes`, and the de-duplication
/// table is bounded by bytes (issue 9).
/// Version 3: a member has a client and a peer address (the Raft service has its own port,
/// issue 12); the state's encoding did not change.
/// Version 4: users, roles and lease owners (`AuthState`) end the state; commands `GrantOwned`
/// and `Auth` (issue 12).
/// Version 5: the limits end with `max_state_bytes`, the state quota (issue 12).
/// Version 6: command `Batch`, many client requests in one entry (issue 13); the state's
/// encoding did not change.
/// Version 7: command `GrantBound`, a lease granted with its keys (issue 13); the state's
/// encoding did not change.
/// Version 8: `LockAcquire` carries `sent_after`, and the state ends with each lease's last
/// Unlock revision (its lock epoch), so a Lock overtaken by a later Unlock changes nothing.
pub const FORMAT_VERSION: u8 = 8;

/// Format versions whose [`State`] encoding this release reads (see [`State::restore`]).
pub const STATE_FORMAT_VERSIONS: [u8; 7] = [2, 3, 4, 5, 6, 7, FORMAT_VERSION];

/// Versions whose state lacks the trailing `AuthState`.
const STATE_VERSIONS_WITHOUT_AUTH: [u8; 2] = [2, 3];

/// Versions whose limits lack `max_state_bytes`.
const STATE_VERSIONS_WITHOUT_QUOTA: [u8; 3] = [2, 3, 4];

/// An empty map, as the state's last field (the lock epochs, which versions before 8 lack)
/// encodes it: its length, 0.
const NO_LOCK_EPOCHS: [u8; 1] = [0];

/// The limits as versions 2 to 4 encode them: [`crate::limits::Limits`] without its last field.
#[derive(serde::Deserialize)]
struct LimitsWithoutQuota {
    max_key_bytes: u32,
    max_value_bytes: u32,
    max_lock_name_bytes: u32,
    min_ttl_ms: crate::types::DurationMs,
    max_ttl_ms: crate::types::DurationMs,
    max_txn_ops: u32,
    max_batch_ids: u32,
    max_waiters_per_lock: u32,
    max_keys_per_lease: u32,
    max_leases: u64,
    dedup_capacity: u32,
    dedup_max_bytes: u64,
}

/// Rewrites a state record of an older version ([`STATE_FORMAT_VERSIONS`]) as this version's:
/// before version 5 the limits get the default quota, versions 2 and 3 an empty `AuthState`
/// after the rest, and every older version no lock epochs at the very end (bincode writes
/// fields one after another, untagged, so the rest of the encoding is the same).
fn upgrade_state(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    let mut upgraded = if STATE_VERSIONS_WITHOUT_QUOTA.contains(&version) {
        add_quota(body)?
    } else {
        let mut same = Vec::with_capacity(bytes.len() + NO_LOCK_EPOCHS.len());
        same.push(FORMAT_VERSION);
        same.extend_from_slice(body);
        same
    };
    if STATE_VERSIONS_WITHOUT_AUTH.contains(&version) {
        let no_auth = encode(&crate::auth::AuthState::default())?;
        upgraded.extend_from_slice(&no_auth[1..]);
    }
    upgraded.extend_from_slice(&NO_LOCK_EPOCHS);
    Ok(upgraded)
}

/// A version-2 to -4 state `body` as a record of this version whose limits end with the
/// default quota.
fn add_quota(body: &[u8]) -> Result<Vec<u8>, CodecError> {
    let (old, used): (LimitsWithoutQuota, usize) =
        bincode::serde::decode_from_slice(body, config())
            .map_err(|e| CodecError::Decode(e.to_string()))?;
    let limits = crate::limits::Limits {
        max_key_bytes: old.max_key_bytes,
        max_value_bytes: old.max_value_bytes,
        max_lock_name_bytes: old.max_lock_name_bytes,
        min_ttl_ms: old.min_ttl_ms,
        max_ttl_ms: old.max_ttl_ms,
        max_txn_ops: old.max_txn_ops,
        max_batch_ids: old.max_batch_ids,
        max_waiters_per_lock: old.max_waiters_per_lock,
        max_keys_per_lease: old.max_keys_per_lease,
        max_leases: old.max_leases,
        dedup_capacity: old.dedup_capacity,
        dedup_max_bytes: old.dedup_max_bytes,
        max_state_bytes: crate::limits::DEFAULT_MAX_STATE_BYTES,
    };
    let mut upgraded = encode(&limits)?;
    upgraded.extend_from_slice(&body[used..]);
    Ok(upgraded)
}

/// Upper bound for a record that arrives over the network or sits in a log entry.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Upper bound for a snapshot.
pub const MAX_SNAPSHOT_BYTES: usize = 16 * 1024 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("empty record")]
    Empty,
    #[error("unknown format version {found} (this build reads version {FORMAT_VERSION})")]
    UnknownVersion { found: u8 },
    #[error("record of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("{trailing} unexpected bytes after the record")]
    Trailing { trailing: usize },
    #[error("record is not in canonical form (it decodes, but re-encodes differently)")]
    NonCanonical,
    #[error("cannot decode record: {0}")]
    Decode(String),
    #[error("cannot encode record: {0}")]
    Encode(String),
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// bincode counts each value it decodes at its size in memory (a one-byte varint `u64` as 8), so
/// a valid record claims at most 8 bytes per byte of its encoding; a decode limit of that much
/// refuses no valid record, and refuses a string whose length prefix claims more than the record
/// could hold before anything is allocated for it (bincode allocates a string's buffer before
/// it reads the string). The limit is a type parameter, so records go by size into three tiers.
const CLAIMED_PER_ENCODED_BYTE: usize = 8;
const SMALL_RECORD_BYTES: usize = MAX_MESSAGE_BYTES;
const LARGE_RECORD_BYTES: usize = 1024 * 1024 * 1024;

/// Decodes `body` with the smallest decode limit that fits its size.
fn decode_body<'de, T: serde::Deserialize<'de>>(body: &'de [u8]) -> Result<(T, usize), CodecError> {
    const SMALL: usize = CLAIMED_PER_ENCODED_BYTE * SMALL_RECORD_BYTES;
    const LARGE: usize = CLAIMED_PER_ENCODED_BYTE * LARGE_RECORD_BYTES;
    const LARGEST: usize = CLAIMED_PER_ENCODED_BYTE * MAX_SNAPSHOT_BYTES;
    // Borrowing from the input, so that a byte string ([`bytes`]) is read straight out of it: a
    // length prefix that claims more than the input holds fails before any allocation.
    let decoded = if body.len() <= SMALL_RECORD_BYTES {
        bincode::serde::borrow_decode_from_slice(body, config().with_limit::<SMALL>())
    } else if body.len() <= LARGE_RECORD_BYTES {
        bincode::serde::borrow_decode_from_slice(body, config().with_limit::<LARGE>())
    } else {
        bincode::serde::borrow_decode_from_slice(body, config().with_limit::<LARGEST>())
    };
    decoded.map_err(|e| CodecError::Decode(e.to_string()))
}

/// Encodes `value` as one version-tagged record.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![FORMAT_VERSION];
    bincode::serde::encode_into_std_write(value, &mut out, config())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    Ok(out)
}

/// Decodes a record written by [`encode`], refusing records above `max_bytes`, unknown versions,
/// trailing garbage and any encoding but the canonical one (bincode's decoder accepts, say, a
/// small integer in a wider varint; such a record re-encodes differently, so two byte strings
/// would mean one value). Never panics on malformed input.
pub fn decode<T: DeserializeOwned + Serialize>(
    bytes: &[u8],
    max_bytes: usize,
) -> Result<T, CodecError> {
    let value = decode_unchecked(bytes, max_bytes)?;
    if encode(&value)? != bytes {
        return Err(CodecError::NonCanonical);
    }
    Ok(value)
}

/// Decodes a record that this node encoded with [`encode`] itself and kept, in memory (the watch
/// history's packed entries) or in its own store (the Raft log, whose entries it encodes as it
/// appends them, whoever proposed them): the canonical-form check guards against other writers,
/// of which there are none, and would encode every record a second time on each read. Records
/// above `max_bytes` are refused, as by [`decode`].
pub fn decode_own<T: DeserializeOwned>(bytes: &[u8], max_bytes: usize) -> Result<T, CodecError> {
    decode_unchecked(bytes, max_bytes)
}

/// [`decode`] without the canonical-form check: for snapshots, which a node only ever reads from
/// its own store or from a peer's (after the peer's checks), and which are too large to encode a
/// second time just to compare.
fn decode_unchecked<T: DeserializeOwned>(bytes: &[u8], max_bytes: usize) -> Result<T, CodecError> {
    if bytes.len() > max_bytes {
        return Err(CodecError::TooLarge {
            len: bytes.len(),
            max: max_bytes,
        });
    }
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(CodecError::UnknownVersion { found: version });
    }
    let (value, used) = decode_body(body)?;
    if used != body.len() {
        return Err(CodecError::Trailing {
            trailing: body.len() - used,
        });
    }
    Ok(value)
}

/// A SHA-256 digest of a state's canonical encoding: equal digests mean equal replicas.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateDigest(pub [u8; 32]);

impl std::fmt::Display for StateDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::fmt::Debug for StateDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateDigest({self})")
    }
}

impl State {
    /// The snapshot: the whole state as one record.
    pub fn snapshot(&self) -> Result<Vec<u8>, CodecError> {
        encode(self)
    }

    /// Rebuilds a state from [`State::snapshot`] bytes, checking its invariants. A state of an
    /// older version ([`STATE_FORMAT_VERSIONS`]) is upgraded: no users, roles or owners before
    /// version 4, before version 5 the default quota, or the state's own size where that is
    /// larger (so that every write that fitted before still fits), and before version 8 no lock
    /// epochs (no Lock sent earlier is refused as overtaken).
    pub fn restore(bytes: &[u8]) -> Result<State, CodecError> {
        if bytes.len() > MAX_SNAPSHOT_BYTES {
            return Err(CodecError::TooLarge {
                len: bytes.len(),
                max: MAX_SNAPSHOT_BYTES,
            });
        }
        let version = *bytes.first().ok_or(CodecError::Empty)?;
        if !STATE_FORMAT_VERSIONS.contains(&version) {
            return Err(CodecError::UnknownVersion { found: version });
        }
        let legacy = STATE_VERSIONS_WITHOUT_QUOTA.contains(&version);
        let mut state: State = if version == FORMAT_VERSION {
            decode_unchecked(bytes, MAX_SNAPSHOT_BYTES)?
        } else {
            decode_unchecked(&upgrade_state(bytes)?, usize::MAX)?
        };
        state.restored(legacy);
        state
            .check_invariants()
            .map_err(|broken| CodecError::Decode(format!("snapshot is inconsistent: {broken}")))?;
        Ok(state)
    }

    /// The digest of the canonical encoding (iteration order is fixed, so equal states encode to
    /// equal bytes).
    /// Streams the encoding through the hash, so a large state is never encoded whole in memory.
    pub fn digest(&self) -> Result<StateDigest, CodecError> {
        record_digest(self).map(StateDigest)
    }
}

/// The SHA-256 of [`encode`]`(value)`, streamed through the hash so the encoding is never held
/// in memory whole.
pub fn record_digest<T: Serialize + ?Sized>(value: &T) -> Result<[u8; 32], CodecError> {
    let mut hasher = HashingWriter(Sha256::new());
    std::io::Write::write_all(&mut hasher, &[FORMAT_VERSION])
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    bincode::serde::encode_into_std_write(value, &mut hasher, config())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    Ok(hasher.0.finalize().into())
}

/// How many bytes [`encode`]`(value)` takes, without building the encoding.
pub fn encoded_size<T: Serialize + ?Sized>(value: &T) -> Result<usize, CodecError> {
    let mut counter = CountingWriter(1);
    bincode::serde::encode_into_std_write(value, &mut counter, config())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    Ok(counter.0)
}

/// Counts written bytes.
struct CountingWriter(usize);

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The SHA-256 of some bytes already encoded (a snapshot sent or read back as a backup).
pub fn bytes_digest(bytes: &[u8]) -> StateDigest {
    StateDigest(Sha256::digest(bytes).into())
}

/// Feeds written bytes to a hasher.
struct HashingWriter(Sha256);

impl std::io::Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Byte strings (keys, values, prefixes) through serde as one slice (`#[serde(with =
/// "crate::codec::bytes")]` on a `Vec<u8>`), not as a sequence of single bytes, each a call of its
/// own both ways: the same encoding (a length, then the bytes), written and read in one copy.
/// Read with `deserialize_bytes`, which [`decode`] answers from the input itself, so a length
/// that claims more than the input holds is an error, never an allocation of that size (the
/// `serde_bytes` crate reads with `deserialize_byte_buf`, which bincode answers by allocating the
/// claimed length first).
pub mod bytes {
    use std::fmt;

    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        deserializer.deserialize_bytes(BytesVisitor)
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }

        /// Formats that write bytes as a sequence of numbers (JSON) read back through here.
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            // As serde's own `Vec` does: never trust a size hint for more than a little.
            let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(byte) = seq.next_element()? {
                bytes.push(byte);
            }
            Ok(bytes)
        }
    }
}
