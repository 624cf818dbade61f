//! Zaris client: talks to a Zaris cluster over gRPC, following Raft leader redirects and
//! retrying safely.
//!
//! ```no_run
//! # async fn demo() -> Result<(), zaris_client::Error> {
//! use std::time::Duration;
//! use zaris_client::{Client, PutOptions};
//!
//! let client = Client::connect(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]).await?;
//! let lease = client.grant(Duration::from_secs(10)).await?;
//! let put = PutOptions { lease: Some(lease.id), ..PutOptions::default() };
//! client.put("service/a", "10.0.0.1:80", put).await?;
//! client.keep_alive_once([lease.id]).await?;
//! # Ok(())
//! # }
//! ```
//!
//! - Routing: every call goes to the cached Raft leader, else to the endpoint under a rotation
//!   cursor. NOT_LEADER answers name the leader's address: the client caches it (adding it to
//!   its endpoints if new) and resends at once. NO_LEADER and connection failures rotate to the
//!   next endpoint with exponential backoff, until [`ClientOptions::retry_deadline`].
//! - Safety of retries: reads and idempotent calls are always retried. Put, DeleteRange, Txn,
//!   Grant, Revoke and Unlock carry a [`RequestId`](zaris_proto::v1::RequestId) (random client
//!   id, increasing sequence) that the cluster de-duplicates, so they are retried too. Other
//!   writes (MemberAdd, MemberRemove) are never resent after an indeterminate failure.
//! - Errors: domain answers (guard failed, lease not found, lock busy) are `result` values in
//!   the responses. An [`Error`] always says whether the call certainly did not take effect
//!   ([`Error::is_definite`]) or may have.
//!
//! Code map: `client` (options, the retry loop), `endpoint` (endpoint parsing, leader cache),
//! `backoff`, `error`, and one module per service (`kv`, `lease`, `lock`, `cluster`).

mod backoff;
mod client;
mod cluster;
mod election;
mod endpoint;
mod error;
mod keepalive;
mod kv;
mod lease;
mod lease_handle;
mod lock;
mod lock_guard;
mod presence;
mod queue_place;
mod watch;

pub use client::{
    Client, ClientOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_PERMILLE,
    DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_REQUEST_TIMEOUT, DEFAULT_RETRY_DEADLINE,
};
pub use election::{Election, Incumbent, LeaderObserver, Leadership};
pub use error::{Error, RpcError};
pub use keepalive::{ExpiredReason, LeaseState, MAX_IDS_PER_RENEWAL};
pub use kv::{DeleteOptions, PutOptions, RangeOptions};
pub use lease::LeaseGrant;
pub use lease_handle::Lease;
pub use lock_guard::LockGuard;
pub use presence::{Member, Presence, PresenceEvent, PresenceWatch};
pub use watch::{EventKind, WatchEvent, WatchOptions, Watcher};
/// The wire types, re-exported so callers need not depend on `zaris-proto` directly.
pub use zaris_proto::v1 as proto;
