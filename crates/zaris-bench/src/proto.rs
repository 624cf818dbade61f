//! The bench's generated gRPC code: the part of etcd's v3 API the comparison calls (`proto/etcd`,
//! clients only), and the replication floor's one-call service (`proto/floor`).
#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    missing_docs,
    missing_debug_implementations,
    unreachable_pub
)]

pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
}

pub mod floor {
    tonic::include_proto!("floor");
}
