//! The Zaris error model on the wire: an [`ErrorDetail`] carried in a [`tonic::Status`].
//!
//! Encoding: the status `details` (sent as the `grpc-status-details-bin` trailer) hold a standard
//! `google.rpc.Status { code, message, details: [Any] }` whose `details` contain one
//! `google.protobuf.Any` with type URL [`ERROR_DETAIL_TYPE_URL`] and the encoded [`ErrorDetail`].
//! That is gRPC's usual rich-error encoding, so non-Rust clients and tools decode it natively.
//!
//! [`ErrorCode::grpc_code`] is the one place that decides which gRPC code an error class travels
//! with; [`ErrorDetail::into_status`] always uses it, so the two can never disagree.

use prost::Message;
use prost::bytes::Bytes;
use tonic::{Code, Status};

use crate::v1::{ErrorCode, ErrorDetail, LimitViolation, Outcome};

/// Type URL of [`ErrorDetail`] inside the `google.protobuf.Any` of a status's details.
pub const ERROR_DETAIL_TYPE_URL: &str = "type.googleapis.com/zaris.v1.ErrorDetail";

/// What a node answers a plaintext client on a TLS port, in the client's own protocol (an
/// HTTP/2 GOAWAY that processed nothing, or an HTTP/1 400): a client that finds it in an error
/// knows its request was never sent.
pub const PLAINTEXT_REFUSED: &str = "this port requires TLS";

/// `google.rpc.Status`, declared by hand (same field numbers) to avoid a dependency for three
/// fields.
#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

/// `google.protobuf.Any`, declared by hand (same field numbers).
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

impl ErrorCode {
    /// The gRPC status code this error class always travels with (documented per value in
    /// `common.proto`).
    pub fn grpc_code(self) -> Code {
        match self {
            ErrorCode::Unspecified => Code::Unknown,
            ErrorCode::NotLeader
            | ErrorCode::NoLeader
            | ErrorCode::LeadershipLost
            | ErrorCode::ShuttingDown
            | ErrorCode::NodeFailed => Code::Unavailable,
            ErrorCode::Timeout => Code::DeadlineExceeded,
            ErrorCode::InvalidArgument | ErrorCode::TtlOutOfRange => Code::InvalidArgument,
            ErrorCode::LimitExceeded | ErrorCode::CapacityExceeded => Code::ResourceExhausted,
            ErrorCode::Compacted | ErrorCode::FutureRevision => Code::OutOfRange,
            ErrorCode::MemberNotFound => Code::NotFound,
            ErrorCode::MemberExists => Code::AlreadyExists,
            ErrorCode::MembershipChangeInProgress => Code::Aborted,
            ErrorCode::LearnerNotCaughtUp
            | ErrorCode::MembershipRejected
            | ErrorCode::ClusterMismatch
            | ErrorCode::RequestIdForgotten
            | ErrorCode::AuthRefused => Code::FailedPrecondition,
            ErrorCode::Unauthenticated => Code::Unauthenticated,
            ErrorCode::PermissionDenied => Code::PermissionDenied,
            ErrorCode::Unsupported => Code::Unimplemented,
            ErrorCode::Internal => Code::Internal,
        }
    }
}

impl ErrorDetail {
    /// A detail with the three fields every error has; set the code-specific ones on the result.
    pub fn new(code: ErrorCode, outcome: Outcome, message: impl Into<String>) -> Self {
        ErrorDetail {
            code: code.into(),
            message: message.into(),
            outcome: outcome.into(),
            ..ErrorDetail::default()
        }
    }

    /// Names the limit or capacity that was hit (TTL_OUT_OF_RANGE, LIMIT_EXCEEDED,
    /// CAPACITY_EXCEEDED).
    pub fn with_limit(mut self, name: impl Into<String>, limit: u64, actual: u64) -> Self {
        self.limit = Some(LimitViolation {
            name: name.into(),
            limit,
            actual,
        });
        self
    }

    /// The status to return: the gRPC code from [`ErrorCode::grpc_code`], this detail's message,
    /// and the detail itself in the status details.
    ///
    /// An unknown `code` (a raw value this build does not know) travels as `UNKNOWN`.
    pub fn into_status(self) -> Status {
        let grpc_code = self.code().grpc_code();
        let message = self.message.clone();
        let wrapper = RpcStatus {
            code: grpc_code as i32,
            message: message.clone(),
            details: vec![Any {
                type_url: ERROR_DETAIL_TYPE_URL.to_owned(),
                value: self.encode_to_vec(),
            }],
        };
        Status::with_details(grpc_code, message, Bytes::from(wrapper.encode_to_vec()))
    }
}

impl From<ErrorDetail> for Status {
    fn from(detail: ErrorDetail) -> Self {
        detail.into_status()
    }
}

/// The [`ErrorDetail`] a Zaris server put in `status`, if any. `None` for statuses produced by
/// the transport or the gRPC framework, and for details that do not decode (see [`try_detail`]).
pub fn detail(status: &Status) -> Option<ErrorDetail> {
    try_detail(status).ok().flatten()
}

/// Like [`detail`], but tells "no Zaris detail" (`Ok(None)`) from "details present but
/// undecodable" (`Err`).
pub fn try_detail(status: &Status) -> Result<Option<ErrorDetail>, prost::DecodeError> {
    if status.details().is_empty() {
        return Ok(None);
    }
    let wrapper = RpcStatus::decode(status.details())?;
    wrapper
        .details
        .iter()
        .find(|any| any.type_url == ERROR_DETAIL_TYPE_URL)
        .map(|any| ErrorDetail::decode(any.value.as_slice()))
        .transpose()
}

/// Whether the call that failed with `status` may have taken effect.
///
/// The server's [`ErrorDetail::outcome`] when present and known. Otherwise (a transport or
/// framework error, or an outcome value this build does not know) it is
/// [`Outcome::Indeterminate`], except for the codes the gRPC framework only produces before any
/// handler runs: INVALID_ARGUMENT, UNIMPLEMENTED, UNAUTHENTICATED and PERMISSION_DENIED.
pub fn outcome(status: &Status) -> Outcome {
    if let Some(detail) = detail(status) {
        return match Outcome::try_from(detail.outcome) {
            Ok(Outcome::Definite) => Outcome::Definite,
            _ => Outcome::Indeterminate,
        };
    }
    match status.code() {
        Code::InvalidArgument
        | Code::Unimplemented
        | Code::Unauthenticated
        | Code::PermissionDenied => Outcome::Definite,
        _ => Outcome::Indeterminate,
    }
}
