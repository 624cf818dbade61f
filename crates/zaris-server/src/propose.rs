//! Proposing commands and confirming leadership for reads, with a server-side deadline. A failure
//! comes back as an [`ApiError`] (built from openraft's error in `error::raft`).

use std::time::Duration;

use openraft::{ReadPolicy, async_runtime::WatchReceiver};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zaris_core::{Batching, Request, Revision};
use zaris_proto::v1::ResponseHeader;
use zaris_raft::{Proposal, Raft, Reply};

use crate::batch::WriteBatcher;
use crate::error::ApiError;
use crate::metrics as m;

#[derive(Clone, Debug)]
pub struct Proposer {
    raft: Raft,
    node_id: u64,
    cluster_id: u64,
    timeout: Duration,
    /// Where batchable client writes go (`batch.rs`); `None`: every request is its own entry.
    batcher: Option<WriteBatcher>,
    /// Propose-to-applied time of every entry proposed here, for the console's chart.
    commit_latency: std::sync::Arc<crate::stats::CommitLatency>,
}

impl Proposer {
    pub fn new(raft: Raft, node_id: u64, cluster_id: u64, timeout: Duration) -> Self {
        Proposer {
            raft,
            node_id,
            cluster_id,
            timeout,
            batcher: None,
            commit_latency: std::sync::Arc::default(),
        }
    }

    /// Propose-to-applied times of this proposer's entries (shared with its batcher's).
    pub fn commit_latency(&self) -> std::sync::Arc<crate::stats::CommitLatency> {
        self.commit_latency.clone()
    }

    /// This proposer, sending puts, grants and lock calls through a [`WriteBatcher`] with
    /// `inflight` pipeline slots (group commit).
    pub fn with_write_batching(
        mut self,
        inflight: usize,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let direct = Proposer {
            batcher: None,
            ..self.clone()
        };
        self.batcher = Some(WriteBatcher::start(direct, inflight, tracker, shutdown));
        self
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Proposes one request and waits until it is committed and applied on this node. A
    /// batchable request may share its entry (and so its revision) with other clients' requests.
    pub async fn propose(&self, request: Request) -> Result<Reply, ApiError> {
        let command = request.command.name();
        let result = match &self.batcher {
            // Bounded like a direct proposal, queueing included. Once queued, the request may be
            // proposed even if its caller gave up: the outcome is unknown.
            Some(batcher) if request.command.batching() != Batching::Alone => {
                tokio::time::timeout(self.timeout, batcher.propose(request))
                    .await
                    .unwrap_or(Err(ApiError::Timeout { proposed: true }))
            }
            // Boxed: inline, openraft's write future would make every caller's future as large
            // (a future is copied whole each time it moves), batched or not.
            _ => Box::pin(self.propose_entry(request)).await,
        };
        record(command, &result);
        result
    }

    /// Proposes `request` as one entry of its own (no batcher, no metrics: the caller counts).
    pub(crate) async fn propose_entry(&self, request: Request) -> Result<Reply, ApiError> {
        let started = std::time::Instant::now();
        let write = self.raft.client_write(Proposal(request));
        match tokio::time::timeout(self.timeout, write).await {
            Err(_) => Err(ApiError::Timeout { proposed: true }),
            Ok(Ok(response)) => {
                self.commit_latency.record(started.elapsed());
                Ok(response.data)
            }
            Ok(Err(error)) => Err(ApiError::from_write_error(error, self.node_id, self.term())),
        }
    }

    /// Waits until this node may serve a linearizable read: it is the leader, a quorum confirmed
    /// it, and it has applied everything committed before the read.
    pub async fn linearizable(&self) -> Result<(), ApiError> {
        let read = self.raft.ensure_linearizable(ReadPolicy::ReadIndex);
        match tokio::time::timeout(self.timeout, read).await {
            Err(_) => Err(ApiError::Timeout { proposed: false }),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(ApiError::from_read_error(error, self.node_id, self.term())),
        }
    }

    /// Whether this node currently believes it is the Raft leader (unconfirmed: no quorum round).
    pub fn is_raft_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.node_id)
    }

    /// Where a request this node must not decide goes: NOT_LEADER naming the leader, NO_LEADER
    /// if none is known, or `None` on the leader itself.
    pub fn redirect_to_leader(&self) -> Option<ApiError> {
        let (leader, leader_addr, term) = {
            // Cloned out at once: the metrics guard must not be held.
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow_watched();
            let leader = metrics.current_leader;
            let addr = leader
                .and_then(|id| metrics.membership_config.membership().get_node(&id))
                .map(|member| member.addr.clone());
            (leader, addr, metrics.current_term)
        };
        match (leader, leader_addr) {
            (Some(id), _) if id == self.node_id => None,
            (Some(leader_id), Some(leader_addr)) => Some(ApiError::NotLeader {
                leader_id,
                leader_addr,
                term,
            }),
            _ => Some(ApiError::NoLeader),
        }
    }

    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    pub fn header(&self, revision: Revision) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.node_id,
            revision: revision.get(),
            raft_term: self.term(),
        }
    }
}

/// Counts a proposal by command and outcome (`zaris_proposals_total`).
fn record(command: &'static str, result: &Result<Reply, ApiError>) {
    let outcome = match result {
        Ok(_) => m::ProposalOutcome::Applied,
        Err(ApiError::Timeout { .. }) => m::ProposalOutcome::Timeout,
        // Only a ForwardToLeader becomes a redirect (NOT_LEADER or NO_LEADER).
        Err(ApiError::NotLeader { .. } | ApiError::NoLeader) => m::ProposalOutcome::Redirected,
        Err(_) => m::ProposalOutcome::Failed,
    };
    m::RequestCounters::get().proposed(command, outcome);
}
