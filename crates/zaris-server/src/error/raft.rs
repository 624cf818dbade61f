//! openraft's errors as a client (or peer) sees them: the only place that matches on openraft's
//! error types. A follower's `ForwardToLeader` becomes a redirect to the leader's client address
//! (the member record's client address, not its peer address); a write whose fate is
//! unknown is indeterminate; a read that could not confirm leadership did nothing.

use std::fmt::Display;

use openraft::errors::{
    ChangeMembershipError, ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError,
};
use zaris_raft::TypeConfig;

use super::ApiError;

type WriteError = RaftError<TypeConfig, ClientWriteError<TypeConfig>>;
type ReadError = RaftError<TypeConfig, LinearizableReadError<TypeConfig>>;

impl ApiError {
    /// NOT_LEADER naming the leader openraft knows of, or NO_LEADER when it knows none — or names
    /// this node (`node_id`), which must not redirect a client to itself. `term` is this node's
    /// current term, sent so a client can order conflicting redirects.
    pub fn redirect(forward: &ForwardToLeader<TypeConfig>, node_id: u64, term: u64) -> Self {
        match (&forward.leader_id, &forward.leader_node) {
            (Some(id), Some(node)) if *id != node_id => ApiError::NotLeader {
                leader_id: *id,
                leader_addr: node.addr.clone(),
                term,
            },
            _ => ApiError::NoLeader,
        }
    }

    /// A failed proposal of a client request (see [`ApiError::redirect`] for the arguments).
    pub fn from_write_error(error: WriteError, node_id: u64, term: u64) -> Self {
        match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
                Self::redirect(&forward, node_id, term)
            }
            // The entry was appended, then dropped by a leader change: it may still commit.
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => {
                ApiError::LeadershipLost("leadership changed before the request committed".into())
            }
            RaftError::APIError(
                e @ (ClientWriteError::ChangeMembershipError(_)
                | ClientWriteError::PreconditionFailed(_)),
            ) => ApiError::Internal(format!("unexpected write error: {e}")),
            RaftError::Fatal(fatal) => ApiError::RaftFailed {
                fatal: fatal.to_string(),
                proposed: true,
            },
        }
    }

    /// A failed membership change (add learner, change membership): here openraft's membership
    /// refusals are the caller's answer, not a server bug.
    pub fn from_membership_error(error: WriteError, node_id: u64, term: u64) -> Self {
        match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
                Self::redirect(&forward, node_id, term)
            }
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => match &e {
                ChangeMembershipError::InProgress(_) => {
                    ApiError::MembershipChangeInProgress(e.to_string())
                }
                ChangeMembershipError::LearnerNotFound(_) => {
                    ApiError::MemberNotFound(e.to_string())
                }
                _ => ApiError::MembershipRejected(e.to_string()),
            },
            RaftError::APIError(ClientWriteError::PreconditionFailed(e)) => {
                ApiError::MembershipRejected(e.to_string())
            }
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => {
                ApiError::LeadershipLost("leadership changed during the membership change".into())
            }
            RaftError::Fatal(fatal) => ApiError::RaftFailed {
                fatal: fatal.to_string(),
                proposed: true,
            },
        }
    }

    /// A failed leadership confirmation for a linearizable read. Nothing was proposed, so every
    /// answer is definite.
    pub fn from_read_error(error: ReadError, node_id: u64, term: u64) -> Self {
        match error {
            RaftError::APIError(LinearizableReadError::ForwardToLeader(forward)) => {
                Self::redirect(&forward, node_id, term)
            }
            // A read that cannot confirm leadership did nothing: retry elsewhere.
            RaftError::APIError(LinearizableReadError::QuorumNotEnough(_)) => ApiError::NoLeader,
            RaftError::Fatal(fatal) => ApiError::RaftFailed {
                fatal: fatal.to_string(),
                proposed: false,
            },
        }
    }

    /// A peer's Raft RPC that this node's Raft could not take because it stopped.
    pub fn raft_stopped(error: impl Display) -> Self {
        ApiError::Internal(format!("raft node stopped: {error}"))
    }
}
