//! What this node does with every applied entry: feed its lessor (with the local monotonic time
//! of apply), wake lock waiters, record events for watchers, count.

use std::sync::{Arc, Mutex};

use zaris_core::{Applied, LeaseEffect, Lessor, LockEffect, Outcome, Rejection, State};
use zaris_raft::ApplyObserver;

use crate::clock::Clock;
use crate::locks::LockWaiters;
use crate::metrics as m;
use crate::stats::ApplyCounts;
use crate::watch::WatchHub;

#[derive(Debug)]
pub struct NodeObserver {
    pub clock: Arc<dyn Clock>,
    pub lessor: Arc<Mutex<Lessor>>,
    pub waiters: Arc<LockWaiters>,
    pub watch_hub: Arc<WatchHub>,
    /// `early-expiry` shortens the TTLs the lessor counts.
    pub faults: Arc<crate::faults::FaultConfig>,
    /// Grants, renewals and ends applied, for the console's charts.
    pub counts: Arc<crate::stats::ApplyCounts>,
    /// Wakes the snapshot schedule at its points.
    pub snapshot_point: Arc<crate::snapshot_schedule::PointSignal>,
}

impl NodeObserver {
    fn lessor(&self) -> std::sync::MutexGuard<'_, Lessor> {
        self.lessor.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `early-expiry` bugs: the lessor counts 0.7 (or 0.9) × TTL from the grant or renewal.
    fn early_expiry(&self, effect: LeaseEffect) -> LeaseEffect {
        match effect {
            LeaseEffect::Refreshed {
                id,
                ttl_ms,
                renewed_revision,
            } => LeaseEffect::Refreshed {
                id,
                ttl_ms: self.faults.lessor_ttl(ttl_ms),
                renewed_revision,
            },
            revoked @ LeaseEffect::Revoked { .. } => revoked,
        }
    }
}

/// A bounded label for a rejection.
fn rejection_reason(rejection: &Rejection) -> &'static str {
    match rejection {
        Rejection::InvalidArgument(_) => "invalid_argument",
        Rejection::TtlOutOfRange { .. } => "ttl_out_of_range",
        Rejection::LimitExceeded { limit, .. } => limit.name(),
        Rejection::LeaseNotFound(_) => "lease_not_found",
        Rejection::LeaseIdUsed { .. } => "lease_id_used",
        Rejection::GuardFailed { .. } => "guard_failed",
        Rejection::NotHolder { .. } => "not_holder",
        Rejection::RequestIdForgotten { .. } => "request_id_forgotten",
        Rejection::AuthRefused(_) => "auth_refused",
    }
}

fn count_response(response: &zaris_core::Response, fresh: bool, counts: &ApplyCounts) {
    match response {
        Ok(Outcome::Granted { .. }) if fresh => {
            m::RequestCounters::get().leases_granted.increment(1);
            ApplyCounts::add(&counts.grants, 1);
        }
        Ok(Outcome::Renewed { renewed, .. }) if fresh => {
            m::RequestCounters::get()
                .lease_renewals
                .increment(renewed.len() as u64);
            ApplyCounts::add(&counts.renewals, renewed.len() as u64);
        }
        Err(rejection) => {
            metrics::counter!(m::REQUESTS_REJECTED, "reason" => rejection_reason(rejection))
                .increment(1)
        }
        _ => {}
    }
}

impl ApplyObserver for NodeObserver {
    fn applied(&self, applied: &Applied) {
        m::RequestCounters::get().applied_entries.increment(1);
        self.snapshot_point.applied(applied.revision.get());
        // Every entry, with events or not: the head tells watchers how far they are complete.
        self.watch_hub
            .publish(applied.revision, &applied.effects.events);
        if !applied.effects.leases.is_empty() {
            // Rounded up: a deadline must never fall before the true `t_apply + ttl`.
            let now = self.clock.now_rounded_up();
            let mut lessor = self.lessor();
            for effect in &applied.effects.leases {
                lessor.observe(now, &self.early_expiry(*effect));
            }
        }
        for effect in &applied.effects.leases {
            if let LeaseEffect::Revoked { id, expired } = effect {
                self.waiters.lease_ended(*id);
                let cause = if *expired { "expired" } else { "revoked" };
                metrics::counter!(m::LEASES_ENDED, "cause" => cause).increment(1);
                let ended = if *expired {
                    &self.counts.expiries
                } else {
                    &self.counts.revocations
                };
                ApplyCounts::add(ended, 1);
            }
        }
        for effect in &applied.effects.locks {
            if let LockEffect::Acquired { name, lease, token } = effect {
                self.waiters.acquired(name, *lease, *token);
                metrics::counter!(m::LOCKS_ACQUIRED).increment(1);
            }
        }
        // A de-duplicated retry returns the first response again with no effects: not counted.
        // (In a batch, effects are the batch's: a retried grant beside fresh requests counts.)
        let fresh = !applied.effects.is_empty();
        match &applied.response {
            Ok(Outcome::Batch(responses)) => {
                for response in responses {
                    count_response(response, fresh, &self.counts);
                }
            }
            response => count_response(response, fresh, &self.counts),
        }
    }

    fn restored(&self, state: &State) {
        let now = self.clock.now_rounded_up();
        let leases = state
            .lease_ttls()
            .map(|(id, ttl_ms, renewed)| (id, self.faults.lessor_ttl(ttl_ms), renewed));
        self.lessor().reset(now, leases);
        self.watch_hub.reset(state.last_applied());
    }
}
