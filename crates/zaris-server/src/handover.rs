//! Handing Raft leadership to another voter: before a planned stop (SIGTERM), so the cluster
//! goes on without waiting an election timeout for the stopped leader, and before a leader
//! removes itself from the membership.
//!
//! The lease contract is untouched: the new leader, like any, extends every lease by one
//! election timeout before it may expire one, and the old leader's lessor stops when it steps
//! down (`lessor_task.rs`).

use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use zaris_raft::{Raft, TypeConfig};

use crate::metrics as m;

pub type Metrics = openraft::RaftMetrics<TypeConfig>;

#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("this node is the only voter")]
    NoOtherVoter,
    #[error("cannot transfer leadership: {0}")]
    Transfer(String),
    #[error("no other node took over within {0:?}")]
    NotTakenOver(Duration),
}

/// The voter other than `leader` that has replicated the most of the log: it can win the
/// election the transfer starts without waiting to catch up.
fn successor(metrics: &Metrics, leader: u64) -> Option<u64> {
    let matched = |id: u64| {
        metrics
            .replication
            .as_ref()
            .and_then(|r| r.get(&id))
            .and_then(|log_id| log_id.as_ref().map(|l| l.index))
    };
    metrics
        .membership_config
        .membership()
        .voter_ids()
        .filter(|voter| *voter != leader)
        .max_by_key(|voter| (matched(*voter), std::cmp::Reverse(*voter)))
}

/// Transfers leadership from this node (`node_id`, the leader) to its best successor and waits,
/// at most `within`, until another node leads. Returns the metrics that show it.
pub async fn hand_over(
    raft: &Raft,
    node_id: u64,
    within: Duration,
) -> Result<Metrics, HandoverError> {
    let metrics = raft.metrics().borrow_watched().clone();
    // A sole voter has nobody to hand over to: nothing to count.
    let to = successor(&metrics, node_id).ok_or(HandoverError::NoOtherVoter)?;
    let result = async {
        raft.trigger()
            .transfer_leader(to)
            .await
            .map_err(|e| HandoverError::Transfer(e.to_string()))?;
        raft.wait(Some(within))
            .metrics(
                |m| m.current_leader.is_some() && m.current_leader != Some(m.id),
                "leadership handed over",
            )
            .await
            .map_err(|_| HandoverError::NotTakenOver(within))
    }
    .await;
    let outcome = if result.is_ok() { "ok" } else { "failed" };
    metrics::counter!(m::LEADERSHIP_HANDOVERS, "result" => outcome).increment(1);
    result
}
