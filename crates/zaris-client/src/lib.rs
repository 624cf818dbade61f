//! Zaris client: talks to a Zaris cluster over gRPC, following Raft leader redirects and
//! retrying safely.
//!
//! ```no_run
//! # async fn demo() -> Result<(), zaris_client::Error> {
//! use std::time::Duration;
//! use zaris_client::{Client, PutOptions};
//!
//! // Dials: fails with Error::Unreachable if no member answers.
//! let client = Client::connect(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]).await?;
//! // Granted, and kept alive in the background until dropped or revoked.
//! let lease = client.lease(Duration::from_secs(10)).await?;
//! let put = PutOptions { lease: Some(lease.id()), ..PutOptions::default() };
//! // A lease that no longer exists is Error::LeaseNotFound: nothing was written.
//! let written = client.put("service/a", "10.0.0.1:80", put).await?;
//! println!("written at revision {}; the leader is {:?}", written.revision, client.leader().await?);
//! # Ok(())
//! # }
//! ```
//!
//! - Routing: every call goes to the cached Raft leader, else to the endpoint under a rotation
//!   cursor. NOT_LEADER answers name the leader's id and address: the client resends at once to
//!   an endpoint where that member has answered before, else to the address (added to its
//!   endpoints if new). A redirect address this client cannot reach (a name only the cluster's
//!   own network resolves, as in a compose cluster seen from the host) sends it straight back to
//!   its configured endpoints. NO_LEADER and connection failures rotate to the
//!   next endpoint with exponential backoff, until [`ClientOptions::timeout`] (one bound per
//!   call, end to end).
//! - Safety of retries: reads and idempotent calls are always retried. Put, DeleteRange, Txn,
//!   Grant, Revoke and Unlock carry a [`RequestId`](zaris_proto::v1::RequestId) (random client
//!   id, increasing sequence) that the cluster de-duplicates, so they are retried too. Other
//!   writes (MemberAdd, MemberRemove) are never resent after an indeterminate failure.
//! - Results: every call answers with a domain type. A write the cluster refused (a fencing
//!   guard that no longer holds, a lease that does not exist) is an [`Error`]
//!   ([`Error::NotHeld`], [`Error::LeaseNotFound`]); outcomes that are normal answers to what
//!   was asked are enums the compiler makes the caller match ([`LockOutcome::Busy`],
//!   [`Revocation::NotFound`], [`UnlockOutcome`]). An [`Error`] always says whether the call
//!   certainly did not take effect ([`Error::is_definite`]) or may have.
//!
//! Code map: `client` (options, connect, the retry loop every unary call goes through),
//! `endpoint` (endpoint parsing, leader cache), `backoff`, `error`; one module per service
//! (`kv`, `lease`, `lock`, `cluster`) with its result types; `keepalive` (the background
//! renewals behind [`Lease`] handles) and `keepalive_stream` (a stream the caller drives);
//! `lease_handle`, `lock_guard`, `queue_place` (a lock wait given back when abandoned),
//! `election`, `presence`, `watch`.

mod auth;
mod backoff;
mod client;
mod cluster;
mod election;
mod endpoint;
mod error;
mod keepalive;
mod keepalive_stream;
mod kv;
mod lease;
mod lease_handle;
mod lock;
mod lock_guard;
mod presence;
mod queue_place;
mod routing;
mod snapshot;
#[cfg(test)]
mod test_support;
mod tls;
mod watch;

pub use auth::{AuthStatus, BearerToken, MAX_TOKEN_BYTES, WhoAmI};
pub use client::{
    Client, ClientOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_PERMILLE,
    DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_TIMEOUT,
};
pub use cluster::{Leader, Member as ClusterMember, MemberKind, NodeStatus, Role};
pub use election::{Election, Incumbent, LeaderObserver, Leadership};
pub use error::{Error, RpcError, TlsFailure};
pub use keepalive::{ExpiredReason, LeaseState, MAX_IDS_PER_RENEWAL};
pub use keepalive_stream::KeepAliveStream;
pub use kv::{
    DeleteOptions, Deleted, Fence, KeyValue, PutOptions, Range, RangeOptions, TxnOpResult,
    TxnOutcome, Written,
};
pub use lease::{LeaseGrant, LeaseInfo, LeasePage, LeaseSummary, Renewal, Renewed, Revocation};
pub use lease_handle::Lease;
pub use lock::{LockEntry, LockHolder, LockOutcome, LockPage, LockStatus, UnlockOutcome};
pub use lock_guard::LockGuard;
pub use presence::{Member, Presence, PresenceEvent, PresenceWatch};
pub use routing::MAX_ELECTION_BACKOFF;
pub use snapshot::SnapshotSaved;
pub use tls::ClientTls;
pub use watch::{EventKind, WatchEvent, WatchOptions, Watcher};
/// The wire types, re-exported so callers need not depend on `zaris-proto` directly.
pub use zaris_proto::v1 as proto;
/// The identifiers every call takes and returns.
pub use zaris_types::{FencingToken, LeaseId, Revision};
