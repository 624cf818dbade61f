//! Whether this node's Raft still runs. openraft reports a failure it cannot recover from (a
//! storage I/O error, a panic in its core) as a `Fatal` in its metrics; from then on every call
//! fails. Such a node must not look healthy, or load balancers and clients that cached it as the
//! leader keep sending it work: `/health` fails at once, and the node stops itself
//! ([`NodeHandle::failed`](crate::NodeHandle::failed)), which `zaris serve` turns into a non-zero
//! exit.

use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::{RaftMetrics, ServerState};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zaris_raft::{Raft, TypeConfig};

/// What this node knows of a quorum backing it, by openraft's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuorumAck {
    /// Not the leader.
    NotLeader,
    /// The leader and sole voter: its own quorum, which commits whenever its disk does.
    SoleVoter,
    /// The leader, last acknowledged by a quorum this long ago (`None`: not yet).
    Since(Option<Duration>),
}

impl QuorumAck {
    pub fn of(metrics: &RaftMetrics<TypeConfig>) -> QuorumAck {
        if metrics.state != ServerState::Leader {
            return QuorumAck::NotLeader;
        }
        if metrics
            .membership_config
            .membership()
            .voter_ids()
            .eq([metrics.id])
        {
            return QuorumAck::SoleVoter;
        }
        QuorumAck::Since(
            metrics
                .last_quorum_acked
                .map(|acked| openraft::Instant::elapsed(&*acked)),
        )
    }
}

/// The node's verdict on its own Raft: `None` while it runs, else why it failed.
#[derive(Clone, Debug)]
pub struct Health(watch::Receiver<Option<String>>);

impl Health {
    /// Why Raft failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Resolves with the reason once Raft has failed.
    pub async fn failed(&self) -> String {
        let mut receiver = self.0.clone();
        match receiver.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            // The watcher ended without a failure: the node is stopping; never resolve.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Starts watching `raft`; the returned [`Health`] turns failed on the first `Fatal` that is not
/// the node's own shutdown.
pub fn watch_raft(
    raft: Raft,
    node_id: u64,
    shutdown: CancellationToken,
) -> (Health, impl Future<Output = ()>) {
    let (verdict, health) = watch::channel(None);
    let task = async move {
        // The server metrics, not the whole: openraft sends the whole on every turn of its loop
        // (several times per client write), and each send would wake this task for nothing.
        // The server metrics change only with the role, leader or membership, and their sender
        // is dropped when the core ends, which it does on every `Fatal` (after it records the
        // reason in the whole metrics).
        let mut server = raft.server_metrics();
        let reason = loop {
            if let Some(reason) = recorded_failure(&raft) {
                break reason;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = server.changed() => if changed.is_err() {
                    // The core has ended: its reason, if it recorded one, is in the whole
                    // metrics, whose last value outlives the sender.
                    break recorded_failure(&raft).unwrap_or_else(|| "raft stopped".to_owned());
                },
            }
        };
        if shutdown.is_cancelled() {
            return;
        }
        tracing::error!(node_id, %reason, "Raft has failed; this node stops serving");
        metrics::gauge!(crate::metrics::RAFT_FAILED).set(1.0);
        let _ = verdict.send(Some(reason));
    };
    (Health(health), task)
}

/// The `Fatal` openraft recorded in its metrics, if it stopped on one.
fn recorded_failure(raft: &Raft) -> Option<String> {
    match &raft.metrics().borrow_watched().running_state {
        Ok(()) => None,
        Err(fatal) => Some(fatal.to_string()),
    }
}
