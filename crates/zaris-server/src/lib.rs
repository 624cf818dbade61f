//! A Zaris node: the gRPC services (client API and Raft peer RPCs on one port), the Raft network,
//! the lessor that only the Raft leader runs, and group-committed lease renewals.
//!
//! [`Node::start`] wires everything; [`NodeHandle::shutdown`] stops every task it started.
//! Every failure a client or peer sees is an [`error::ApiError`], turned into a gRPC status in one
//! place; [`convert`] holds the wire ↔ core conversions, one module per service.

mod address;
mod api;
mod append_stream;
pub mod auth;
mod batch;
pub mod clock;
pub mod config;
pub mod convert;
mod cutoff;
mod dead_leader;
pub mod error;
pub mod faults;
mod group_commit;
mod handover;
mod handshake_slots;
mod health;
mod http;
mod lessor_task;
mod locks;
pub mod metrics;
mod network;
mod node;
mod observer;
mod plaintext;
mod prompt_election;
mod propose;
#[cfg(feature = "raft-stats")]
mod raft_stats;
mod renew;
mod services;
mod snapshot_schedule;
mod stats;
pub mod tls;
mod watch;

pub use address::check as check_address;
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use config::NodeConfig;
pub use lessor_task::LessorProgress;
pub use network::{MAX_APPEND_BYTES, MAX_RAFT_MESSAGE_BYTES};
pub use node::{Listeners, Node, NodeHandle};
pub use tls::TlsFiles;
pub use zaris_raft::Member;
