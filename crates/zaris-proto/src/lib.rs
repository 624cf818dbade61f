//! The Zaris wire contract: Rust types and gRPC clients/servers generated from
//! `proto/zaris/v1/*.proto`, plus the hand-written helpers every side needs to speak the error
//! model the same way.
//!
//! - [`v1`]: the generated messages and services (`v1::kv_client::KvClient`,
//!   `v1::lease_server::LeaseServer`, ...). The `RaftService` in it is internal: peer traffic
//!   only, opaque payloads, versioned with the binary.
//! - [`error`]: [`v1::ErrorDetail`] in and out of a [`tonic::Status`], the single table mapping an
//!   [`v1::ErrorCode`] to its gRPC code, and [`error::outcome`] (did the call take effect?).
//! - [`cork`]: the connection adapter client and server put under their HTTP/2 connections, so
//!   that messages that become ready together leave in one write.
//! - [`FILE_DESCRIPTOR_SET`]: the compiled descriptors, for gRPC reflection.

pub mod cork;
pub mod error;

/// Generated from `proto/zaris/v1/*.proto`; the proto comments are the API reference.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    missing_docs,
    missing_debug_implementations,
    unreachable_pub
)]
pub mod v1 {
    tonic::include_proto!("zaris.v1");
}

pub use error::{ERROR_DETAIL_TYPE_URL, detail, outcome, try_detail};

/// The encoded `google.protobuf.FileDescriptorSet` of every zaris.v1 file, with source info
/// (comments). Feed it to a reflection service so tools like grpcurl can browse the API.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/zaris_v1_descriptor.bin"));
