//! Statuses as a Zaris server sends them, for the client's unit tests (zaris-proto only encodes
//! them; the server builds its own from its `ApiError`).

use tonic::Status;
use zaris_proto::v1::{ErrorCode, ErrorDetail, Outcome};

use crate::error::RpcError;

pub(crate) fn rpc(status: Status) -> RpcError {
    RpcError::from_status(&status, "127.0.0.1:7001")
}

pub(crate) fn not_leader(raft_leader_id: u64, raft_leader_address: &str) -> Status {
    let mut detail = ErrorDetail::new(
        ErrorCode::NotLeader,
        Outcome::Definite,
        format!(
            "not the Raft leader; the Raft leader is node {raft_leader_id} at \
             {raft_leader_address}"
        ),
    );
    detail.raft_leader_id = raft_leader_id;
    detail.raft_leader_address = raft_leader_address.into();
    detail.into_status()
}

pub(crate) fn no_leader() -> Status {
    ErrorDetail::new(
        ErrorCode::NoLeader,
        Outcome::Definite,
        "no Raft leader is known; retry later, preferably on another member",
    )
    .into_status()
}

pub(crate) fn invalid_argument(message: &str) -> Status {
    ErrorDetail::new(ErrorCode::InvalidArgument, Outcome::Definite, message).into_status()
}

pub(crate) fn limit_exceeded(name: &str, limit: u64, actual: u64) -> Status {
    ErrorDetail::new(
        ErrorCode::LimitExceeded,
        Outcome::Definite,
        format!("limit {name} exceeded: {actual} > {limit}"),
    )
    .with_limit(name, limit, actual)
    .into_status()
}
