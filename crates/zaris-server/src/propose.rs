//! Proposing commands and confirming leadership for reads: the one place that turns openraft's
//! errors into client-facing statuses (leader redirect, definite vs indeterminate).

use std::time::Duration;

use openraft::errors::{ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError};
use openraft::{ReadPolicy, async_runtime::WatchReceiver};
use tonic::Status;
use zaris_core::{Request, Revision};
use zaris_proto::v1::ResponseHeader;
use zaris_raft::{Proposal, Raft, Reply, TypeConfig};

use crate::errors;
use crate::metrics as m;

#[derive(Clone, Debug)]
pub struct Proposer {
    raft: Raft,
    node_id: u64,
    cluster_id: u64,
    timeout: Duration,
}

impl Proposer {
    pub fn new(raft: Raft, node_id: u64, cluster_id: u64, timeout: Duration) -> Self {
        Proposer {
            raft,
            node_id,
            cluster_id,
            timeout,
        }
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Proposes one request and waits until it is committed and applied on this node.
    pub async fn propose(&self, request: Request) -> Result<Reply, Status> {
        let command = request.command.name();
        let write = self.raft.client_write(Proposal(request));
        let result = match tokio::time::timeout(self.timeout, write).await {
            Ok(result) => result,
            Err(_) => {
                metrics::counter!(m::PROPOSALS, "command" => command, "outcome" => "timeout")
                    .increment(1);
                return Err(errors::timeout(true));
            }
        };
        match result {
            Ok(response) => {
                metrics::counter!(m::PROPOSALS, "command" => command, "outcome" => "applied")
                    .increment(1);
                Ok(response.data)
            }
            Err(error) => {
                let (outcome, status) = self.write_error(error);
                metrics::counter!(m::PROPOSALS, "command" => command, "outcome" => outcome)
                    .increment(1);
                Err(status)
            }
        }
    }

    /// The metric outcome and the client's status for a failed write.
    fn write_error(
        &self,
        error: RaftError<TypeConfig, ClientWriteError<TypeConfig>>,
    ) -> (&'static str, Status) {
        let status = match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
                return ("redirected", self.redirect(&forward));
            }
            // The entry was appended, then dropped by a leader change: it may still commit.
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => {
                errors::indeterminate("leadership changed before the request committed")
            }
            RaftError::APIError(
                e @ (ClientWriteError::ChangeMembershipError(_)
                | ClientWriteError::PreconditionFailed(_)),
            ) => errors::internal(format!("unexpected write error: {e}")),
            RaftError::Fatal(fatal) => errors::raft_failed(fatal, true),
        };
        ("failed", status)
    }

    /// Waits until this node may serve a linearizable read: it is the leader, a quorum confirmed
    /// it, and it has applied everything committed before the read.
    pub async fn linearizable(&self) -> Result<(), Status> {
        let read = self.raft.ensure_linearizable(ReadPolicy::ReadIndex);
        match tokio::time::timeout(self.timeout, read).await {
            Err(_) => Err(errors::timeout(false)),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(forward)))) => {
                Err(self.redirect(&forward))
            }
            // A read that cannot confirm leadership did nothing: definite, retry elsewhere.
            Ok(Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(_)))) => {
                Err(errors::no_leader())
            }
            Ok(Err(RaftError::Fatal(fatal))) => Err(errors::raft_failed(fatal, false)),
        }
    }

    pub fn redirect(&self, forward: &ForwardToLeader<TypeConfig>) -> Status {
        match (&forward.leader_id, &forward.leader_node) {
            (Some(id), Some(node)) if *id != self.node_id => {
                errors::not_leader(*id, &node.addr, self.term())
            }
            _ => errors::no_leader(),
        }
    }

    /// Whether this node currently believes it is the Raft leader (unconfirmed: no quorum round).
    #[cfg(feature = "fault-injection")]
    pub fn is_raft_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.node_id)
    }

    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    pub fn header(&self, revision: Revision) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.node_id,
            revision,
            raft_term: self.term(),
        }
    }
}
