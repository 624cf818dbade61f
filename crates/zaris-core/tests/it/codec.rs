//! The codec: version byte, bounds, garbage, and snapshot round trips.

use proptest::prelude::*;
use zaris_core::codec::{self, CodecError, FORMAT_VERSION, MAX_MESSAGE_BYTES};
use zaris_core::{Command, DurationMs, LeaseId, Limits, Request, RequestId, Revision, State};

use super::Log;

fn sample() -> Request {
    Request::with_id(
        RequestId {
            client_id: 3,
            seq: 4,
            seen_revision: Revision::ZERO,
        },
        Command::Put {
            key: b"k".to_vec(),
            value: vec![0, 1, 2],
            lease: LeaseId::new(9),
            guard: None,
            prev_kv: true,
        },
    )
}

#[test]
fn records_round_trip_with_a_version_byte() {
    let bytes = codec::encode(&sample()).expect("encode");
    assert_eq!(bytes[0], FORMAT_VERSION);
    let decoded: Request = codec::decode(&bytes, MAX_MESSAGE_BYTES).expect("decode");
    assert_eq!(decoded, sample());
}

#[test]
fn malformed_records_are_errors() {
    let bytes = codec::encode(&sample()).expect("encode");
    assert!(matches!(
        codec::decode::<Request>(&[], MAX_MESSAGE_BYTES),
        Err(CodecError::Empty)
    ));
    let mut future = bytes.clone();
    future[0] = FORMAT_VERSION + 1;
    assert!(matches!(
        codec::decode::<Request>(&future, MAX_MESSAGE_BYTES),
        Err(CodecError::UnknownVersion { found }) if found == FORMAT_VERSION + 1
    ));
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(matches!(
        codec::decode::<Request>(&trailing, MAX_MESSAGE_BYTES),
        Err(CodecError::Trailing { trailing: 1 })
    ));
    assert!(matches!(
        codec::decode::<Request>(&bytes, 4),
        Err(CodecError::TooLarge { max: 4, .. })
    ));
    assert!(matches!(
        codec::decode::<Request>(&bytes[..bytes.len() - 1], MAX_MESSAGE_BYTES),
        Err(CodecError::Decode(_))
    ));
}

#[test]
fn snapshot_restores_an_equal_state_with_an_equal_digest() {
    let mut log = Log::new(Limits::default());
    let lease = match log.apply(Command::Grant {
        id: LeaseId::NONE,
        ttl_ms: DurationMs::new(5_000),
    }) {
        Ok(zaris_core::Outcome::Granted { id, .. }) => id,
        other => panic!("{other:?}"),
    };
    log.apply(Command::Put {
        key: b"a".to_vec(),
        value: b"1".to_vec(),
        lease,
        guard: None,
        prev_kv: false,
    })
    .expect("put");
    log.apply(Command::LockAcquire {
        name: "m".into(),
        lease,
        wait: true,
        sent_after: None,
    })
    .expect("lock");
    // Lock epochs (an Unlock of a lock by the lease) are part of the state too.
    log.apply(Command::LockCancel {
        name: "other".into(),
        lease,
    })
    .expect("withdraw");
    let bytes = log.state.snapshot().expect("snapshot");
    let restored = State::restore(&bytes).expect("restore");
    assert_eq!(restored, log.state);
    assert_eq!(
        restored.digest().expect("digest"),
        log.state.digest().expect("digest")
    );
    assert_ne!(
        State::default().digest().expect("digest"),
        log.state.digest().expect("digest")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Arbitrary bytes never panic the decoder, whether read as a request or as a snapshot, and
    /// a request that decodes re-encodes to exactly the bytes it came from (one value, one
    /// encoding).
    #[test]
    fn garbage_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = State::restore(&bytes);
        if let Some(first) = bytes.first_mut() {
            *first = FORMAT_VERSION;
        }
        let _ = State::restore(&bytes);
        if let Ok(request) = codec::decode::<Request>(&bytes, MAX_MESSAGE_BYTES) {
            prop_assert_eq!(codec::encode(&request).expect("encode"), bytes);
        }
    }

    /// Bytes near a valid request (one byte changed) exercise the decoder past the first field;
    /// whatever still decodes re-encodes identically.
    #[test]
    fn a_mutated_request_decodes_only_as_itself(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = codec::encode(&sample()).expect("encode");
        let at = at.index(bytes.len());
        bytes[at] = byte;
        if let Ok(request) = codec::decode::<Request>(&bytes, MAX_MESSAGE_BYTES) {
            prop_assert_eq!(codec::encode(&request).expect("encode"), bytes);
        }
    }
}

/// bincode's decoder takes 5 written as a 3-byte varint (251, then a u16); the codec refuses it.
#[test]
fn a_non_canonical_record_is_refused() {
    let canonical = codec::encode(&5u64).expect("encode");
    assert_eq!(canonical, [FORMAT_VERSION, 5]);
    assert_eq!(codec::decode::<u64>(&canonical, 16).expect("decode"), 5);
    let wide = [FORMAT_VERSION, 251, 5, 0];
    assert!(matches!(
        codec::decode::<u64>(&wide, 16),
        Err(codec::CodecError::NonCanonical)
    ));
}

#[test]
fn record_digest_is_the_sha256_of_the_encoding() {
    use sha2::{Digest as _, Sha256};
    let bytes = codec::encode(&sample()).expect("encode");
    let expected: [u8; 32] = Sha256::digest(&bytes).into();
    assert_eq!(codec::record_digest(&sample()).expect("digest"), expected);
}

/// The identifier and duration newtypes are stored and replicated exactly as the bare `u64` they
/// wrap, so logs and snapshots written before they existed still decode.
#[test]
fn newtypes_encode_as_the_integer_they_wrap() {
    let n = 300_000u64;
    let bare = codec::encode(&n).expect("encode");
    assert_eq!(codec::encode(&LeaseId::new(n)).expect("encode"), bare);
    assert_eq!(codec::encode(&Revision::new(n)).expect("encode"), bare);
    assert_eq!(
        codec::encode(&zaris_core::FencingToken::new(n)).expect("encode"),
        bare
    );
    assert_eq!(codec::encode(&DurationMs::new(n)).expect("encode"), bare);
}

/// Format 6 keys the de-duplication table's age index by (revision, id) instead of revision
/// alone (a batch applies many requests at one revision). A version 5 state must still restore:
/// the set encodes exactly like the map it replaced.
#[test]
fn the_dedup_age_index_encodes_as_it_did_when_it_was_a_map() {
    use std::collections::{BTreeMap, BTreeSet};
    let entries = [
        (Revision::new(3), (7u64, 1u64)),
        (Revision::new(300_000), (1, 9)),
    ];
    let map: BTreeMap<Revision, (u64, u64)> = entries.into_iter().collect();
    let set: BTreeSet<(Revision, (u64, u64))> = entries.into_iter().collect();
    assert_eq!(
        codec::encode(&map).expect("map"),
        codec::encode(&set).expect("set")
    );
}

/// A batch entry round-trips through the codec.
#[test]
fn a_batch_entry_round_trips() {
    let batch = Request::new(Command::Batch(vec![sample(), sample()]));
    let bytes = codec::encode(&batch).expect("encode");
    let decoded: Request = codec::decode(&bytes, MAX_MESSAGE_BYTES).expect("decode");
    assert_eq!(decoded, batch);
}

/// `KeyValue` as it was derived before its byte strings went through `serde_bytes`.
#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct KeyValueAsSequences {
    key: Vec<u8>,
    value: Vec<u8>,
    create_revision: Revision,
    mod_revision: Revision,
    version: u64,
    lease: LeaseId,
}

#[test]
fn byte_strings_encode_as_they_did_as_sequences_of_bytes() {
    // Keys and values go through serde as byte slices (one copy each way) since 2026-12-06;
    // entries, snapshots and messages written before must read the same, and vice versa.
    // The request of `sample()` as the build before wrote it.
    let before = [
        0x08, 0x01, 0x03, 0x04, 0x00, 0x04, 0x01, b'k', 0x03, 0x00, 0x01, 0x02, 0x09, 0x00, 0x01,
    ];
    assert_eq!(before[0], FORMAT_VERSION);
    assert_eq!(codec::encode(&sample()).expect("encode"), before);
    assert_eq!(
        codec::decode::<Request>(&before, MAX_MESSAGE_BYTES).expect("decode"),
        sample()
    );
    // Lengths of one byte, of three (from 251 on) and of five (from 65,536 on).
    for len in [0, 1, 250, 251, 300, 65_535, 65_536, 70_000] {
        let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let kv = zaris_core::KeyValue {
            key: b"key".to_vec(),
            value: value.clone(),
            create_revision: Revision::new(5),
            mod_revision: Revision::new(6),
            version: 2,
            lease: LeaseId::new(300),
        };
        let plain = KeyValueAsSequences {
            key: b"key".to_vec(),
            value,
            create_revision: Revision::new(5),
            mod_revision: Revision::new(6),
            version: 2,
            lease: LeaseId::new(300),
        };
        let bytes = codec::encode(&kv).expect("encode");
        assert_eq!(bytes, codec::encode(&plain).expect("encode"), "{len} bytes");
        let read: zaris_core::KeyValue = codec::decode(&bytes, MAX_MESSAGE_BYTES).expect("decode");
        assert_eq!(read, kv);
        let read_plain: KeyValueAsSequences =
            codec::decode(&bytes, MAX_MESSAGE_BYTES).expect("decode");
        assert_eq!(read_plain, plain);
    }
}

/// `request` encoded, with the length prefix of its one-byte string or byte string `only_byte`
/// replaced by claims of more and more bytes (a u64 varint: 253, then the u64); each must be a
/// decode error.
fn assert_forged_lengths_refused(request: &Request, only_byte: u8) {
    let record = codec::encode(request).expect("encode");
    let at = record
        .windows(2)
        .position(|w| w == [1, only_byte])
        .expect("the length before the byte");
    for claimed in [2, 1 << 20, 1 << 40, u64::MAX / 2, u64::MAX] {
        let mut forged = record[..at].to_vec();
        forged.push(253);
        forged.extend_from_slice(&claimed.to_le_bytes());
        forged.extend_from_slice(&record[at + 1..]);
        assert!(
            matches!(
                codec::decode::<Request>(&forged, MAX_MESSAGE_BYTES),
                Err(CodecError::Decode(_))
            ),
            "{request:?} with {claimed} bytes claimed"
        );
    }
}

/// A length prefix that claims more than the record holds is a decode error, not an allocation
/// of that size: of a byte string (read from the input itself) or of a string (bincode
/// allocates a string's buffer before reading it; the decode limit refuses first). Before
/// 2026-12-06 a string's claim of a tebibyte aborted the process.
#[test]
fn a_length_claiming_more_than_the_record_holds_is_an_error() {
    // `sample()`'s key is b"k".
    assert_forged_lengths_refused(&sample(), b'k');
    let lock = Request::new(Command::LockAcquire {
        name: "n".to_owned(),
        lease: LeaseId::new(9),
        wait: false,
        sent_after: None,
    });
    assert_forged_lengths_refused(&lock, b'n');
}
