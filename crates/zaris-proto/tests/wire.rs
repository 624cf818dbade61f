//! The wire contract: the error model survives a gRPC status (and its HTTP/2 trailers), messages
//! survive their encoding, hostile bytes are errors and never panics, and the protos themselves
//! keep the house rules (everything documented, durations named with their unit).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use prost::Message;
use prost::bytes::Bytes;
use tonic::codegen::http::HeaderMap;
use tonic::{Code, Status};
use zaris_proto::error::ERROR_DETAIL_TYPE_URL;
use zaris_proto::v1::{
    Compare, DeleteRangeRequest, ErrorCode, ErrorDetail, Event, EventType, Guard, KeyValue,
    LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseRenewed, LimitViolation, LockRequest,
    Outcome, PutRequest, RangeRequest, RequestId, ResponseHeader, TxnOp, TxnRequest,
    WatchCancelReason, WatchRequest, WatchResponse, compare, txn_op, watch_request,
};
use zaris_proto::{FILE_DESCRIPTOR_SET, detail, outcome, try_detail};

// ---------------------------------------------------------------------------------------------
// Error detail <-> Status

/// Every field set, so a dropped or renumbered field shows up as an inequality.
fn full_detail() -> ErrorDetail {
    ErrorDetail {
        code: ErrorCode::NotLeader.into(),
        message: "not the Raft leader".into(),
        outcome: Outcome::Definite.into(),
        raft_leader_id: 3,
        raft_leader_address: "10.0.0.3:7379".into(),
        raft_term: 42,
        limit: Some(LimitViolation {
            name: "max_key_bytes".into(),
            limit: 4096,
            actual: 5000,
        }),
        compact_revision: 17,
        retry_after_ms: 250,
        member_id: 1,
        applied_revision: 23,
    }
}

// The statuses a server sends (it builds them from its own error type; the encoding is this
// crate's).

fn not_leader(raft_leader_id: u64, raft_leader_address: &str) -> Status {
    let mut detail = ErrorDetail::new(
        ErrorCode::NotLeader,
        Outcome::Definite,
        format!("not the Raft leader; retry at node {raft_leader_id} at {raft_leader_address}"),
    );
    detail.raft_leader_id = raft_leader_id;
    detail.raft_leader_address = raft_leader_address.into();
    detail.into_status()
}

fn no_leader() -> Status {
    ErrorDetail::new(
        ErrorCode::NoLeader,
        Outcome::Definite,
        "no Raft leader is known",
    )
    .into_status()
}

fn limit_exceeded(name: &str, limit: u64, actual: u64) -> Status {
    ErrorDetail::new(
        ErrorCode::LimitExceeded,
        Outcome::Definite,
        format!("limit {name} exceeded: {actual} > {limit}"),
    )
    .with_limit(name, limit, actual)
    .into_status()
}

/// Sends `status` through the HTTP/2 header encoding tonic uses for trailers and reads it back.
fn through_trailers(status: &Status) -> Status {
    let mut headers = HeaderMap::new();
    status
        .add_header(&mut headers)
        .expect("status encodes into headers");
    Status::from_header_map(&headers).expect("headers decode into a status")
}

#[test]
fn error_detail_survives_a_status_and_its_trailers() {
    let sent = full_detail();
    let status = sent.clone().into_status();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "not the Raft leader");
    assert_eq!(detail(&status), Some(sent.clone()));

    let received = through_trailers(&status);
    assert_eq!(received.code(), Code::Unavailable);
    assert_eq!(received.message(), "not the Raft leader");
    assert_eq!(detail(&received), Some(sent));
    assert_eq!(outcome(&received), Outcome::Definite);
}

#[test]
fn not_leader_redirects_to_the_leader_client_address() {
    let status = through_trailers(&not_leader(3, "10.0.0.3:7379"));
    assert_eq!(status.code(), Code::Unavailable);
    let d = detail(&status).expect("a NOT_LEADER status carries a detail");
    assert_eq!(d.code(), ErrorCode::NotLeader);
    assert_eq!(d.outcome(), Outcome::Definite);
    assert_eq!(d.raft_leader_id, 3);
    assert_eq!(d.raft_leader_address, "10.0.0.3:7379");
    assert!(
        status.message().contains("10.0.0.3:7379"),
        "{}",
        status.message()
    );

    let status = through_trailers(&no_leader());
    let d = detail(&status).expect("a NO_LEADER status carries a detail");
    assert_eq!(
        (status.code(), d.code()),
        (Code::Unavailable, ErrorCode::NoLeader)
    );
    assert_eq!(d.raft_leader_id, 0);
    assert!(d.raft_leader_address.is_empty());
}

#[test]
fn limit_errors_name_the_limit_and_its_value() {
    let status = limit_exceeded("max_key_bytes", 4096, 5000);
    assert_eq!(status.code(), Code::ResourceExhausted);
    let d = detail(&status).expect("detail");
    assert_eq!(d.code(), ErrorCode::LimitExceeded);
    assert_eq!(d.outcome(), Outcome::Definite);
    assert_eq!(
        d.limit,
        Some(LimitViolation {
            name: "max_key_bytes".into(),
            limit: 4096,
            actual: 5000
        })
    );
    assert!(
        status.message().contains("max_key_bytes"),
        "{}",
        status.message()
    );
}

/// `google.rpc.Status` and `google.protobuf.Any` exactly as googleapis defines them, so this test
/// checks what a Go or Java client would decode, independently of the crate's own declaration.
#[derive(Clone, PartialEq, Message)]
struct GoogleRpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<GoogleAny>,
}

#[derive(Clone, PartialEq, Message)]
struct GoogleAny {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[test]
fn status_details_are_a_standard_google_rpc_status() {
    let sent = full_detail();
    let status = sent.clone().into_status();
    let wrapper = GoogleRpcStatus::decode(status.details()).expect("google.rpc.Status");
    assert_eq!(wrapper.code, Code::Unavailable as i32);
    assert_eq!(wrapper.message, status.message());
    assert_eq!(wrapper.details.len(), 1);
    assert_eq!(wrapper.details[0].type_url, ERROR_DETAIL_TYPE_URL);
    assert_eq!(
        ErrorDetail::decode(wrapper.details[0].value.as_slice()).expect("ErrorDetail"),
        sent
    );

    // Other details a proxy may have added are skipped, in any position.
    let mixed = GoogleRpcStatus {
        code: Code::Unavailable as i32,
        message: "m".into(),
        details: vec![
            GoogleAny {
                type_url: "type.googleapis.com/google.rpc.RetryInfo".into(),
                value: vec![0x0a, 0x00],
            },
            wrapper.details[0].clone(),
        ],
    };
    let status = Status::with_details(Code::Unavailable, "m", Bytes::from(mixed.encode_to_vec()));
    assert_eq!(detail(&status), Some(sent));
}

/// The table in `common.proto`, written out independently of the implementation.
const DOCUMENTED_GRPC_CODES: &[(ErrorCode, Code)] = &[
    (ErrorCode::Unspecified, Code::Unknown),
    (ErrorCode::NotLeader, Code::Unavailable),
    (ErrorCode::NoLeader, Code::Unavailable),
    (ErrorCode::LeadershipLost, Code::Unavailable),
    (ErrorCode::ShuttingDown, Code::Unavailable),
    (ErrorCode::Timeout, Code::DeadlineExceeded),
    (ErrorCode::InvalidArgument, Code::InvalidArgument),
    (ErrorCode::TtlOutOfRange, Code::InvalidArgument),
    (ErrorCode::LimitExceeded, Code::ResourceExhausted),
    (ErrorCode::CapacityExceeded, Code::ResourceExhausted),
    (ErrorCode::Compacted, Code::OutOfRange),
    (ErrorCode::FutureRevision, Code::OutOfRange),
    (ErrorCode::MemberNotFound, Code::NotFound),
    (ErrorCode::MemberExists, Code::AlreadyExists),
    (ErrorCode::MembershipChangeInProgress, Code::Aborted),
    (ErrorCode::LearnerNotCaughtUp, Code::FailedPrecondition),
    (ErrorCode::MembershipRejected, Code::FailedPrecondition),
    (ErrorCode::ClusterMismatch, Code::FailedPrecondition),
    (ErrorCode::Unsupported, Code::Unimplemented),
    (ErrorCode::Internal, Code::Internal),
    (ErrorCode::NodeFailed, Code::Unavailable),
    (ErrorCode::RequestIdForgotten, Code::FailedPrecondition),
    (ErrorCode::Unauthenticated, Code::Unauthenticated),
    (ErrorCode::PermissionDenied, Code::PermissionDenied),
    (ErrorCode::AuthRefused, Code::FailedPrecondition),
];

#[test]
fn every_error_code_travels_with_its_documented_grpc_code() {
    let documented: BTreeMap<i32, Code> = DOCUMENTED_GRPC_CODES
        .iter()
        .map(|(code, grpc)| (*code as i32, *grpc))
        .collect();
    let defined: Vec<ErrorCode> = (0..1024)
        .filter_map(|raw| ErrorCode::try_from(raw).ok())
        .collect();
    assert_eq!(
        defined.len(),
        documented.len(),
        "an ErrorCode was added or removed: update the table in common.proto and this test"
    );
    for code in defined {
        let expected = documented[&(code as i32)];
        assert_eq!(code.grpc_code(), expected, "{code:?}");
        let status = ErrorDetail::new(code, Outcome::Definite, "x").into_status();
        assert_eq!(status.code(), expected, "{code:?}");
        assert_eq!(detail(&status).map(|d| d.code()), Some(code));
    }
}

#[test]
fn unknown_codes_and_outcomes_from_a_newer_server_degrade_safely() {
    // A newer server may send values this build does not know.
    let sent = ErrorDetail {
        code: 9_999,
        outcome: 77,
        message: "from the future".into(),
        ..ErrorDetail::default()
    };
    let status = through_trailers(&sent.clone().into_status());
    assert_eq!(status.code(), Code::Unknown);
    let received = detail(&status).expect("detail still decodes");
    assert_eq!(received.code, 9_999, "the raw value is kept");
    assert_eq!(received.code(), ErrorCode::Unspecified);
    assert_eq!(outcome(&status), Outcome::Indeterminate);

    // An unstated outcome is never taken as definite.
    let status = ErrorDetail::new(ErrorCode::Timeout, Outcome::Unspecified, "t").into_status();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(outcome(&status), Outcome::Indeterminate);
    let status = ErrorDetail::new(ErrorCode::Timeout, Outcome::Definite, "t").into_status();
    assert_eq!(outcome(&status), Outcome::Definite);
}

#[test]
fn statuses_without_a_zaris_detail_get_a_conservative_outcome() {
    for (status, expected) in [
        (
            Status::unavailable("connection reset"),
            Outcome::Indeterminate,
        ),
        (
            Status::deadline_exceeded("client deadline"),
            Outcome::Indeterminate,
        ),
        (
            Status::cancelled("client went away"),
            Outcome::Indeterminate,
        ),
        (
            Status::resource_exhausted("response too large"),
            Outcome::Indeterminate,
        ),
        (
            Status::internal("h2 protocol error"),
            Outcome::Indeterminate,
        ),
        (
            Status::invalid_argument("cannot decode request"),
            Outcome::Definite,
        ),
        (Status::unimplemented("no such method"), Outcome::Definite),
        (Status::unauthenticated("no certificate"), Outcome::Definite),
        (Status::permission_denied("not allowed"), Outcome::Definite),
    ] {
        assert_eq!(detail(&status), None);
        assert!(matches!(try_detail(&status), Ok(None)));
        assert_eq!(outcome(&status), expected, "{status:?}");
    }

    // A well-formed google.rpc.Status without our detail: no detail, not an error.
    let foreign = GoogleRpcStatus {
        code: Code::Unavailable as i32,
        message: "proxy".into(),
        details: vec![GoogleAny {
            type_url: "type.googleapis.com/google.rpc.DebugInfo".into(),
            value: Vec::new(),
        }],
    };
    let status = Status::with_details(
        Code::Unavailable,
        "proxy",
        Bytes::from(foreign.encode_to_vec()),
    );
    assert!(matches!(try_detail(&status), Ok(None)));
    assert_eq!(outcome(&status), Outcome::Indeterminate);
}

#[test]
fn garbage_status_details_are_an_error_not_a_panic() {
    // Field 1 as wire type 7 (invalid), then a truncated length-delimited field.
    for garbage in [&[0x0f, 0x01][..], &[0x1a, 0x7f, 0x0a][..], &[0xff; 12][..]] {
        let status = Status::with_details(Code::Unavailable, "x", Bytes::copy_from_slice(garbage));
        assert!(try_detail(&status).is_err(), "{garbage:?}");
        assert_eq!(detail(&status), None);
        assert_eq!(outcome(&status), Outcome::Indeterminate);
    }

    // The wrapper decodes but the ErrorDetail inside it does not.
    let wrapper = GoogleRpcStatus {
        code: Code::Unavailable as i32,
        message: "x".into(),
        details: vec![GoogleAny {
            type_url: ERROR_DETAIL_TYPE_URL.into(),
            value: vec![0x12, 0x05, b'a'],
        }],
    };
    let status = Status::with_details(Code::Unavailable, "x", Bytes::from(wrapper.encode_to_vec()));
    assert!(try_detail(&status).is_err());
    assert_eq!(outcome(&status), Outcome::Indeterminate);
}

// ---------------------------------------------------------------------------------------------
// Messages

fn sample_txn() -> TxnRequest {
    TxnRequest {
        compares: vec![
            Compare {
                key: b"/election/leader".to_vec(),
                target: compare::Target::Version.into(),
                result: compare::Result::Equal.into(),
                operand: Some(compare::Operand::Version(0)),
            },
            Compare {
                key: b"/config".to_vec(),
                target: compare::Target::Value.into(),
                result: compare::Result::NotEqual.into(),
                operand: Some(compare::Operand::Value(vec![0, 1, 2, 255])),
            },
        ],
        success: vec![
            TxnOp {
                op: Some(txn_op::Op::Put(PutRequest {
                    key: b"/election/leader".to_vec(),
                    value: b"node-3".to_vec(),
                    lease: 0x7fff_ffff_ffff_ff01,
                    prev_kv: true,
                    ..PutRequest::default()
                })),
            },
            TxnOp {
                op: Some(txn_op::Op::Range(RangeRequest {
                    key: b"/election/".to_vec(),
                    prefix: true,
                    limit: 10,
                    keys_only: true,
                    ..RangeRequest::default()
                })),
            },
        ],
        failure: vec![TxnOp {
            op: Some(txn_op::Op::DeleteRange(DeleteRangeRequest {
                key: b"a".to_vec(),
                range_end: b"b".to_vec(),
                prev_kv: true,
                ..DeleteRangeRequest::default()
            })),
        }],
        guard: Some(Guard {
            lock_name: "election".into(),
            token: u64::MAX,
        }),
        request_id: Some(RequestId {
            client_id: 0xdead_beef,
            seq: 7,
            seen_revision: 41,
        }),
    }
}

fn sample_watch_response() -> WatchResponse {
    let kv = KeyValue {
        key: b"/presence/node-3".to_vec(),
        value: Vec::new(),
        create_revision: 10,
        mod_revision: 99,
        version: 0,
        lease: 0,
    };
    WatchResponse {
        header: Some(ResponseHeader {
            cluster_id: 0x1234,
            member_id: 2,
            revision: 99,
            raft_term: 5,
        }),
        watch_id: 8,
        created: false,
        canceled: false,
        cancel_reason: WatchCancelReason::Unspecified.into(),
        cancel_message: String::new(),
        compact_revision: 0,
        events: vec![Event {
            r#type: EventType::Expire.into(),
            kv: Some(kv.clone()),
            prev_kv: Some(KeyValue {
                value: b"up".to_vec(),
                mod_revision: 10,
                version: 1,
                lease: 77,
                ..kv
            }),
            lease: 77,
            revision: 99,
        }],
    }
}

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(sent: &M) {
    let bytes = sent.encode_to_vec();
    assert_eq!(bytes.len(), sent.encoded_len());
    let received = M::decode(bytes.as_slice()).expect("a message decodes from its own encoding");
    assert_eq!(&received, sent);
}

#[test]
fn messages_round_trip_through_their_encoding() {
    round_trip(&sample_txn());
    round_trip(&sample_watch_response());
    round_trip(&LeaseKeepAliveResponse {
        header: None,
        seq: u64::MAX,
        renewed: (1..=100)
            .map(|id| LeaseRenewed { id, ttl_ms: 10_000 })
            .collect(),
        not_found: vec![101, 102],
    });
    round_trip(&WatchRequest {
        request: Some(watch_request::Request::Progress(Default::default())),
    });
    // Zero values are not encoded at all (proto3), so a default message is zero bytes, and an
    // unset oneof stays unset.
    assert!(TxnRequest::default().encode_to_vec().is_empty());
    assert_eq!(
        WatchRequest::decode(&[][..]).expect("empty input is the default message"),
        WatchRequest { request: None }
    );
}

#[test]
fn unknown_fields_from_a_newer_peer_are_skipped() {
    let sent = sample_txn();
    let mut bytes = sent.encode_to_vec();
    // Field 999, varint 1, then field 1000, 3 length-delimited bytes: fields a newer version of
    // the contract might add.
    bytes.extend_from_slice(&[0xb8, 0x3e, 0x01]);
    bytes.extend_from_slice(&[0xc2, 0x3e, 0x03, b'n', b'e', b'w']);
    let received = TxnRequest::decode(bytes.as_slice()).expect("unknown fields are skipped");
    assert_eq!(received, sent);
}

#[test]
fn malformed_bytes_are_decode_errors() {
    let valid = PutRequest {
        key: b"k".to_vec(),
        value: b"a value".to_vec(),
        ..PutRequest::default()
    }
    .encode_to_vec();
    let truncated = &valid[..valid.len() - 1];
    let cases: &[(&str, &[u8])] = &[
        ("truncated length-delimited field", truncated),
        ("length beyond the buffer", &[0x0a, 0x7f, 0x01]),
        (
            "varint longer than ten bytes",
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
        ),
        ("invalid wire type 7", &[0x0f, 0x00]),
        ("field number 0", &[0x00, 0x01]),
        ("unterminated varint", &[0x08, 0x80]),
        ("end-group without start", &[0x0c]),
    ];
    for (what, bytes) in cases {
        assert!(PutRequest::decode(*bytes).is_err(), "PutRequest: {what}");
        assert!(TxnRequest::decode(*bytes).is_err(), "TxnRequest: {what}");
        assert!(ErrorDetail::decode(*bytes).is_err(), "ErrorDetail: {what}");
    }
    // A string field (LockRequest.name) holding invalid UTF-8.
    assert!(LockRequest::decode(&[0x0a, 0x02, 0xc3, 0x28][..]).is_err());
    // A nested message whose declared length cuts its own field short.
    assert!(TxnRequest::decode(&[0x22, 0x02, 0x0a, 0x05][..]).is_err());
}

/// xorshift64*: deterministic, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Decodes `bytes` as every request type a server accepts from the network (and the detail a
/// client accepts); returns how many decodes failed. A panic fails the test with the seed.
fn decode_all(bytes: &[u8]) -> usize {
    [
        TxnRequest::decode(bytes).is_err(),
        PutRequest::decode(bytes).is_err(),
        RangeRequest::decode(bytes).is_err(),
        LockRequest::decode(bytes).is_err(),
        LeaseKeepAliveRequest::decode(bytes).is_err(),
        WatchRequest::decode(bytes).is_err(),
        ErrorDetail::decode(bytes).is_err(),
    ]
    .into_iter()
    .filter(|failed| *failed)
    .count()
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let seed = std::env::var("ZARIS_PROTO_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f2a4_1000_u64);
    let mut rng = Rng(seed | 1);
    let valid = [
        sample_txn().encode_to_vec(),
        sample_watch_response().encode_to_vec(),
        full_detail().encode_to_vec(),
    ];
    let mut failures = 0;
    for case in 0..3_000 {
        let bytes: Vec<u8> = if case % 2 == 0 {
            let len = rng.below(96);
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let mut bytes = valid[rng.below(valid.len())].clone();
            for _ in 0..=rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next() as u8;
            }
            bytes.truncate(rng.below(bytes.len() + 1));
            bytes
        };
        match catch_unwind(AssertUnwindSafe(|| decode_all(&bytes))) {
            Ok(failed) => failures += failed,
            Err(_) => panic!(
                "decoding panicked: seed {seed:#x} (ZARIS_PROTO_SEED={seed}), case {case}, \
                 bytes {bytes:02x?}"
            ),
        }
    }
    // Sanity: the generator does produce invalid input (otherwise this test proves nothing).
    assert!(
        failures > 1_000,
        "only {failures} decode failures (seed {seed:#x})"
    );
}

// ---------------------------------------------------------------------------------------------
// The protos themselves, via the compiled descriptor set (which keeps comments)

/// The few parts of `google/protobuf/descriptor.proto` these checks read (same field numbers;
/// everything else is skipped as unknown).
mod descriptor {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FileDescriptorSet {
        #[prost(message, repeated, tag = "1")]
        pub file: Vec<FileDescriptorProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FileDescriptorProto {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub package: String,
        #[prost(message, repeated, tag = "4")]
        pub message_type: Vec<DescriptorProto>,
        #[prost(message, repeated, tag = "5")]
        pub enum_type: Vec<EnumDescriptorProto>,
        #[prost(message, repeated, tag = "6")]
        pub service: Vec<NamedWithChildren>,
        #[prost(message, optional, tag = "9")]
        pub source_code_info: Option<SourceCodeInfo>,
        #[prost(string, tag = "12")]
        pub syntax: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DescriptorProto {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub field: Vec<Field>,
        #[prost(message, repeated, tag = "3")]
        pub nested_type: Vec<DescriptorProto>,
        #[prost(message, repeated, tag = "4")]
        pub enum_type: Vec<EnumDescriptorProto>,
        #[prost(message, repeated, tag = "8")]
        pub oneof_decl: Vec<Named>,
    }

    /// EnumDescriptorProto (values at 2) and ServiceDescriptorProto (methods at 2) alike.
    pub type EnumDescriptorProto = NamedWithChildren;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedWithChildren {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub children: Vec<Named>,
    }

    /// Oneof, enum value and method descriptors have their name at 1.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Named {
        #[prost(string, tag = "1")]
        pub name: String,
    }

    /// A field: its name, and whether it is a proto3 `optional`, whose presence protoc keeps in
    /// a oneof of its own (a synthetic one, `_name`, which is no part of the API to document).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Field {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int32, optional, tag = "9")]
        pub oneof_index: Option<i32>,
        #[prost(bool, optional, tag = "17")]
        pub proto3_optional: Option<bool>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SourceCodeInfo {
        #[prost(message, repeated, tag = "1")]
        pub location: Vec<Location>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(int32, repeated, tag = "1")]
        pub path: Vec<i32>,
        #[prost(string, optional, tag = "3")]
        pub leading_comments: Option<String>,
    }
}

fn descriptor_set() -> descriptor::FileDescriptorSet {
    descriptor::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("descriptor set decodes")
}

fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto/zaris/v1")
}

#[test]
fn every_proto_file_is_compiled_into_package_zaris_v1() {
    let mut on_disk: Vec<String> = std::fs::read_dir(proto_dir())
        .expect("proto dir")
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".proto"))
        .map(|name| format!("zaris/v1/{name}"))
        .collect();
    on_disk.sort();
    let set = descriptor_set();
    let mut compiled: Vec<String> = set.file.iter().map(|f| f.name.clone()).collect();
    compiled.sort();
    assert_eq!(compiled, on_disk);
    for expected in ["common", "kv", "lease", "lock", "watch", "cluster", "raft"] {
        assert!(
            compiled.contains(&format!("zaris/v1/{expected}.proto")),
            "{expected}"
        );
    }
    for file in &set.file {
        assert_eq!(file.package, "zaris.v1", "{}", file.name);
        assert_eq!(file.syntax, "proto3", "{}", file.name);
    }
}

/// Descriptor field numbers that make up source-location paths.
const FILE_MESSAGES: i32 = 4;
const FILE_ENUMS: i32 = 5;
const FILE_SERVICES: i32 = 6;
const MESSAGE_FIELDS: i32 = 2;
const MESSAGE_NESTED: i32 = 3;
const MESSAGE_ENUMS: i32 = 4;
const MESSAGE_ONEOFS: i32 = 8;
const CHILDREN: i32 = 2;

/// Lists every element that needs a doc comment as (source path, readable name).
fn documentable(file: &descriptor::FileDescriptorProto) -> Vec<(Vec<i32>, String)> {
    fn index(i: usize) -> i32 {
        i32::try_from(i).expect("small index")
    }
    fn enum_and_values(
        out: &mut Vec<(Vec<i32>, String)>,
        path: Vec<i32>,
        e: &descriptor::EnumDescriptorProto,
        scope: &str,
    ) {
        let name = format!("{scope}{}", e.name);
        for (i, value) in e.children.iter().enumerate() {
            let mut p = path.clone();
            p.extend([CHILDREN, index(i)]);
            out.push((p, format!("{name}.{}", value.name)));
        }
        out.push((path, name));
    }
    fn message(
        out: &mut Vec<(Vec<i32>, String)>,
        path: Vec<i32>,
        m: &descriptor::DescriptorProto,
        scope: &str,
    ) {
        let name = format!("{scope}{}", m.name);
        let synthetic: Vec<i32> = m
            .field
            .iter()
            .filter(|f| f.proto3_optional == Some(true))
            .filter_map(|f| f.oneof_index)
            .collect();
        let fields = m.field.iter().map(|f| f.name.as_str()).enumerate();
        let oneofs = (m.oneof_decl.iter().enumerate())
            .filter(|(i, _)| !synthetic.contains(&index(*i)))
            .map(|(i, o)| (i, o.name.as_str()));
        let children = fields
            .map(|(i, child)| (MESSAGE_FIELDS, i, child))
            .chain(oneofs.map(|(i, child)| (MESSAGE_ONEOFS, i, child)));
        for (kind, i, child) in children {
            let mut p = path.clone();
            p.extend([kind, index(i)]);
            out.push((p, format!("{name}.{child}")));
        }
        for (i, nested) in m.nested_type.iter().enumerate() {
            let mut p = path.clone();
            p.extend([MESSAGE_NESTED, index(i)]);
            message(out, p, nested, &format!("{name}."));
        }
        for (i, e) in m.enum_type.iter().enumerate() {
            let mut p = path.clone();
            p.extend([MESSAGE_ENUMS, index(i)]);
            enum_and_values(out, p, e, &format!("{name}."));
        }
        out.push((path, name));
    }

    let mut out = Vec::new();
    for (i, m) in file.message_type.iter().enumerate() {
        message(&mut out, vec![FILE_MESSAGES, index(i)], m, "");
    }
    for (i, e) in file.enum_type.iter().enumerate() {
        enum_and_values(&mut out, vec![FILE_ENUMS, index(i)], e, "");
    }
    for (i, s) in file.service.iter().enumerate() {
        for (j, method) in s.children.iter().enumerate() {
            out.push((
                vec![FILE_SERVICES, index(i), CHILDREN, index(j)],
                format!("service {}.{}", s.name, method.name),
            ));
        }
        out.push((vec![FILE_SERVICES, index(i)], format!("service {}", s.name)));
    }
    out
}

#[test]
fn every_message_field_enum_value_and_rpc_has_a_doc_comment() {
    let mut undocumented = Vec::new();
    let mut checked = 0;
    for file in descriptor_set().file {
        let documented: BTreeMap<Vec<i32>, String> = file
            .source_code_info
            .as_ref()
            .expect("descriptor set keeps source info")
            .location
            .iter()
            .filter_map(|l| Some((l.path.clone(), l.leading_comments.clone()?)))
            .filter(|(_, comment)| !comment.trim().is_empty())
            .collect();
        for (path, name) in documentable(&file) {
            checked += 1;
            if !documented.contains_key(&path) {
                undocumented.push(format!("{}: {name}", file.name));
            }
        }
    }
    assert!(
        checked > 300,
        "only {checked} elements found: is the walk broken?"
    );
    assert!(
        undocumented.is_empty(),
        "add a leading `//` comment to:\n{}",
        undocumented.join("\n")
    );
}

#[test]
fn durations_are_named_with_their_unit() {
    const DURATION_WORDS: [&str; 6] = ["ttl", "timeout", "deadline", "delay", "interval", "after"];
    fn fields(m: &descriptor::DescriptorProto, out: &mut Vec<String>) {
        out.extend(m.field.iter().map(|f| format!("{}.{}", m.name, f.name)));
        for nested in &m.nested_type {
            fields(nested, out);
        }
    }
    let mut all = Vec::new();
    for file in descriptor_set().file {
        for m in &file.message_type {
            fields(m, &mut all);
        }
    }
    let offenders: Vec<&String> = all
        .iter()
        .filter(|qualified| {
            let field = qualified.rsplit('.').next().unwrap_or_default();
            DURATION_WORDS.iter().any(|w| field.contains(w))
                && !field.ends_with("_ms")
                // Paging cursors, not durations.
                && !["after_id", "after_name"].contains(&field)
        })
        .collect();
    assert!(
        all.iter().any(|f| f == "LeaseGrantRequest.ttl_ms"),
        "walk found the fields"
    );
    assert!(
        offenders.is_empty(),
        "durations must end in _ms: {offenders:?}"
    );
}
