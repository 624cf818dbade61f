//! The expiry loop. Every node's lessor is fed by apply; only the Raft leader's is promoted, and
//! only a promoted lessor hands out overdue leases, which go out as batched `Expire` entries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::{RaftMetrics, ServerState};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use zaris_core::{Command, DurationMs, InstantMs, Lessor, Limits, Outcome, Request};
use zaris_raft::{StateHandle, TypeConfig};

use crate::clock::Clock;
use crate::metrics as m;
use crate::propose::Proposer;

/// How often the loop looks for overdue leases and leadership changes. Part of `revoke_lag`.
const TICK: Duration = Duration::from_millis(20);

/// How far this node's expiry loop has got, in lessor time: what a test driving a
/// [`ManualClock`](crate::ManualClock) waits for before it asserts that a lease is (not yet)
/// expired, so timing is checked to the millisecond without sleeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LessorProgress {
    /// The Raft term this node's lessor is primary in; `None` while it expires nothing.
    pub primary_term: Option<u64>,
    /// The lessor time at which it was promoted in that term.
    pub promoted_at: InstantMs,
    /// The lessor time of the last expiry pass that handed out no (more) overdue lease: every
    /// lease it handed out was proposed for expiry and the proposal applied here. Leases the
    /// lessor holds back (over the revoke rate, or after a failed proposal) are not covered. 0
    /// before the first pass.
    pub checked: InstantMs,
}

pub struct ExpiryLoop {
    pub node_id: u64,
    pub proposer: Proposer,
    pub lessor: Arc<Mutex<Lessor>>,
    pub clock: Arc<dyn Clock>,
    pub election_timeout: DurationMs,
    pub expire_batch: usize,
    pub state: StateHandle,
    /// This node's configured limits: proposed as the cluster's if none are set yet.
    pub limits: Limits,
    pub progress: watch::Sender<LessorProgress>,
    /// `no-promotion-extension` promotes at once, with no extension.
    pub faults: Arc<crate::faults::FaultConfig>,
}

impl ExpiryLoop {
    fn lessor(&self) -> std::sync::MutexGuard<'_, Lessor> {
        self.lessor.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let raft = self.proposer.raft().clone();
        let mut limits_settled = false;
        let mut last_leader = None;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            // Clone at once: the metrics guard must never be held across an await.
            let (term, leader, led) = {
                let metrics = raft.metrics().borrow_watched().clone();
                let led = term_led(&metrics, self.node_id);
                (metrics.current_term, metrics.current_leader, led)
            };
            if leader != last_leader {
                metrics::counter!(m::LEADER_CHANGES).increment(1);
                last_leader = leader;
            }
            metrics::gauge!(m::RAFT_TERM).set(term as f64);
            let leading = led.is_some();
            metrics::gauge!(m::IS_RAFT_LEADER).set(if leading { 1.0 } else { 0.0 });
            if !leading {
                if self.lessor().is_primary() {
                    self.lessor().demote();
                    self.progress.send_modify(|p| p.primary_term = None);
                    info!(
                        node_id = self.node_id,
                        term, "lessor demoted: no longer Raft leader"
                    );
                }
                continue;
            }
            if self.lessor().primary_term() != Some(term) {
                let careless = self.faults.has(crate::faults::Bug::NoPromotionExtension);
                // Expire nothing until this leader has applied everything committed before its
                // term (its first entry of the term is applied): then promote.
                if !careless && let Err(error) = self.proposer.linearizable().await {
                    debug!(node_id = self.node_id, term, %error, "not yet ready to promote the lessor");
                    continue;
                }
                let now = self.clock.now_rounded_up();
                let extend = if careless {
                    DurationMs::ZERO
                } else {
                    self.election_timeout
                };
                self.lessor().promote(term, now, extend);
                self.progress.send_modify(|p| {
                    p.primary_term = Some(term);
                    p.promoted_at = now;
                });
                // `now_ms` is the lessor's clock: the harness checks from these lines that no
                // expiry is proposed before `now_ms + extend_ms` of the promotion.
                info!(
                    node_id = self.node_id,
                    term,
                    now_ms = now.get(),
                    extend_ms = extend.get(),
                    leases = self.lessor().len(),
                    "lessor promoted: this node now expires leases"
                );
            }
            if !limits_settled {
                limits_settled = self.settle_limits().await;
            }
            if let Some(checked) = self.expire_due().await {
                self.progress
                    .send_modify(|p| p.checked = p.checked.max(checked));
            }
        }
        self.lessor().demote();
        self.progress.send_modify(|p| p.primary_term = None);
    }

    /// The first leader of a cluster fixes its limits (from its own configuration) in the log, so
    /// all nodes apply with the same bounds. Later leaders only warn about a different
    /// configuration: the cluster's limits win.
    async fn settle_limits(&self) -> bool {
        let (set, current) = self
            .state
            .read(|d| (d.state.limits_set(), d.state.limits().clone()));
        if set {
            if current != self.limits {
                warn!(
                    node_id = self.node_id,
                    cluster = ?current,
                    configured = ?self.limits,
                    "configured limits differ from the cluster's; the cluster's apply"
                );
            }
            if current.min_ttl_ms <= self.election_timeout {
                warn!(
                    node_id = self.node_id,
                    min_ttl_ms = current.min_ttl_ms.get(),
                    election_timeout_ms = self.election_timeout.get(),
                    "the cluster's minimum TTL does not exceed this node's election timeout"
                );
            }
            return true;
        }
        let request = Request::new(Command::SetLimits(self.limits.clone()));
        match self.proposer.propose(request).await {
            Ok(reply) => {
                info!(
                    node_id = self.node_id,
                    revision = reply.revision.get(),
                    "cluster limits set"
                );
                true
            }
            Err(error) => {
                warn!(node_id = self.node_id, %error, "cannot set the cluster limits yet");
                false
            }
        }
    }

    /// The term this node leads, by openraft's metrics now; `None` while it is not the leader.
    fn leading_term(&self) -> Option<u64> {
        term_led(
            &self.proposer.raft().metrics().borrow_watched(),
            self.node_id,
        )
    }

    /// Proposes the expiry of every overdue lease, in batches. Returns the lessor time of the
    /// final check that found nothing (more) overdue, or `None` if a batch failed or was refused.
    async fn expire_due(&self) -> Option<InstantMs> {
        // The cluster's `max_batch_ids` bounds an Expire like any batch: a larger one would be
        // rejected on apply and handed out again after `retry_after_ms`, forever.
        let max_batch = self
            .state
            .read(|d| d.state.limits().max_batch_ids as usize)
            .min(self.expire_batch)
            .max(1);
        loop {
            // A batch's reply comes when its entry applies, whatever this node is by then: it
            // may have lost leadership and won it back in a later term meanwhile. The lessor
            // hands out nothing more until the next tick has promoted it in the current term
            // (after the read barrier and the extension), as the promotion rule says.
            if self.leading_term() != self.lessor().primary_term() {
                return None;
            }
            let now = self.clock.now();
            let due = self.lessor().expired(now, max_batch);
            if due.is_empty() {
                return Some(now);
            }
            let count = due.len();
            for lease in &due {
                debug!(
                    node_id = self.node_id,
                    lease_id = lease.id.get(),
                    observed_renewed_revision = lease.observed_renewed_revision.get(),
                    "lease overdue"
                );
            }
            info!(
                node_id = self.node_id,
                now_ms = now.get(),
                count,
                "proposing the expiry of overdue leases"
            );
            metrics::counter!(m::EXPIRE_BATCHES).increment(1);
            match self
                .proposer
                .propose(Request::new(Command::Expire { leases: due }))
                .await
            {
                Ok(reply) => match &reply.response {
                    Ok(Outcome::Expired { revoked, skipped }) => {
                        // One line per lease, so a lease can be followed by its `lease_id`.
                        let outcomes = revoked.iter().map(|id| (id, "lease expired")).chain(
                            skipped
                                .iter()
                                .map(|id| (id, "lease expiry skipped: renewed or ended meanwhile")),
                        );
                        for (id, what) in outcomes {
                            debug!(
                                node_id = self.node_id,
                                lease_id = id.get(),
                                revision = reply.revision.get(),
                                "{what}"
                            );
                        }
                        debug!(
                            node_id = self.node_id,
                            revision = reply.revision.get(),
                            revoked = ?revoked,
                            skipped = skipped.len(),
                            "expired leases"
                        );
                    }
                    Ok(other) => {
                        warn!(node_id = self.node_id, outcome = ?other, "unexpected Expire outcome");
                    }
                    Err(rejection) => {
                        // The lessor hands these out again after retry_after_ms; say so loudly,
                        // since a rejected expiry keeps an overdue lease alive.
                        metrics::counter!(m::EXPIRIES_REJECTED).increment(count as u64);
                        warn!(
                            node_id = self.node_id,
                            count,
                            %rejection,
                            "the state machine rejected an expiry batch"
                        );
                        return None;
                    }
                },
                Err(error) => {
                    // The lessor holds these back and hands them out again after retry_after_ms.
                    warn!(node_id = self.node_id, count, %error, "expiry proposal failed");
                    return None;
                }
            }
        }
    }
}

/// The term `node_id` leads by `metrics`; `None` while it is not the leader.
fn term_led(metrics: &RaftMetrics<TypeConfig>, node_id: u64) -> Option<u64> {
    (metrics.state == ServerState::Leader && metrics.current_leader == Some(node_id))
        .then_some(metrics.current_term)
}
