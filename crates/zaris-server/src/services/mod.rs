//! The gRPC services: the client API (Kv, Lease, Lock, Watch, Cluster, Auth) and the Raft peer RPCs.
//! Each handler validates before proposing (`convert`), proposes through the [`Proposer`], and
//! converts the result; failures are [`ApiError`]s until the service fn returns them as statuses.

mod auth;
pub(crate) mod cluster;
pub(crate) mod kv;
pub(crate) mod lease;
pub(crate) mod lock;
pub mod raft;
mod watch;

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zaris_core::{Lessor, Limits};
use zaris_raft::StateHandle;

use crate::clock::Clock;
use crate::error::ApiError;
use crate::health::QuorumAck;
use crate::locks::LockWaiters;
use crate::propose::Proposer;
use crate::renew::RenewBatcher;
use crate::watch::WatchHub;

pub use auth::AuthService;
pub use cluster::ClusterService;
pub use kv::KvService;
pub use lease::LeaseService;
pub use lock::LockService;
pub use watch::WatchService;

/// What every service needs of the node.
#[derive(Clone, Debug)]
pub struct NodeContext {
    pub node_id: u64,
    pub proposer: Proposer,
    pub state: StateHandle,
    pub lessor: Arc<Mutex<Lessor>>,
    pub clock: Arc<dyn Clock>,
    pub waiters: Arc<LockWaiters>,
    pub renewals: RenewBatcher,
    /// Recent events, which Watch streams read from.
    pub watch_hub: Arc<WatchHub>,
    /// Tasks a handler starts (stream pumps) are tracked and stop with the node.
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
    /// Deliberate bugs some handlers act out (`stale-reads`, `ack-before-commit`).
    pub faults: Arc<crate::faults::FaultConfig>,
    /// This node's election timeout (the upper bound): a new leader extends every lease by it.
    pub election_timeout: zaris_core::DurationMs,
    /// When a leader last reached this node (stamped by the Raft service).
    pub leader_contact: Arc<crate::prompt_election::LeaderContact>,
}

impl NodeContext {
    /// How long this member has been cut off from the cluster, if it is: a leader, since a
    /// quorum last acknowledged it; any other member, since it last heard from a leader. `None`
    /// while in touch, for a sole voter (its own quorum), and before any leader was heard (a
    /// member starting up).
    pub fn cut_off_for(&self) -> Option<std::time::Duration> {
        let quorum = {
            let metrics = self.proposer.raft().metrics();
            QuorumAck::of(&openraft::async_runtime::WatchReceiver::borrow_watched(
                &metrics,
            ))
        };
        match quorum {
            QuorumAck::SoleVoter => None,
            QuorumAck::Since(since_quorum_ack) => since_quorum_ack,
            QuorumAck::NotLeader => self
                .leader_contact
                .silence(tokio::time::Instant::now())
                .map(|(_, silence)| silence),
        }
    }

    /// The cluster's limits, as replicated in the state: every request is checked against them
    /// before it is proposed (and again when applied).
    ///
    /// Until the first leader has set them, requests are refused as retryable (NO_LEADER).
    pub fn limits(&self) -> Result<Limits, ApiError> {
        let (set, limits) = self
            .state
            .read(|d| (d.state.limits_set(), d.state.limits().clone()));
        if set {
            Ok(limits)
        } else {
            Err(ApiError::Initializing)
        }
    }

    /// The limits a Grant proposed by this node is checked against: the cluster's, with the
    /// minimum TTL raised above this node's election timeout when the cluster's is not (contract:
    /// min TTL > one election timeout). The cluster's minimum was fixed by its first leader; a
    /// node started later with a longer election timeout must not grant leases that a failover
    /// to it could not carry.
    pub fn grant_limits(&self) -> Result<Limits, ApiError> {
        let mut limits = self.limits()?;
        let above_election_timeout = zaris_core::DurationMs::new(self.election_timeout.get() + 1);
        limits.min_ttl_ms = limits.min_ttl_ms.max(above_election_timeout);
        Ok(limits)
    }

    /// Time until this node's lessor considers the lease overdue.
    pub fn remaining(&self, id: zaris_core::LeaseId) -> zaris_core::DurationMs {
        let now = self.clock.now();
        self.lessor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remaining(now, id)
            .unwrap_or_default()
    }
}
