//! When this node builds its snapshots: every `interval` entries, like openraft's
//! `LogsSinceLast`, but at points staggered across the members.
//!
//! With openraft's own policy every member counts from the same snapshot index, so all of them
//! encode the same multi-hundred-MiB state within milliseconds of each other. On a small machine
//! that is three encoders competing with the leader's apply and fsync for the same cores, and a
//! client's write waited for them (issue 13: 106-125 ms worst put at a million leases). Here the
//! points are `k * interval + phase`, where the phase spreads the members evenly over one
//! interval by their rank among the cluster's node ids, so at most one member encodes at a time
//! (while encoding takes less than `interval / members` entries' time). The points are a fixed
//! grid, so they do not drift together: a late snapshot does not move the next one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

/// A trigger that did not lead to a snapshot (openraft drops one while a build is under way) is
/// repeated after this long.
const RETRIGGER_AFTER: Duration = Duration::from_secs(1);

/// How often the schedule looks again without being woken: for points reached by entries the
/// observer does not see (blank and membership entries) and for a snapshot installed from the
/// leader, which moves the next point.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// How often the schedule looks while a snapshot it triggered is being built, so that it arms
/// the next point as soon as the build is done (snapshots are rare; this poll is brief).
const BUILD_POLL: Duration = Duration::from_millis(5);

/// Wakes the schedule when the applied index reaches its next point. Not a watch on openraft's
/// metrics: those are sent on every turn of its loop, several times per client write, and each
/// send woke the schedule for nothing. The observer calls [`PointSignal::applied`] for every
/// applied entry: one atomic load, and a notification only at the point.
#[derive(Debug)]
pub struct PointSignal {
    /// The point the schedule waits for; `u64::MAX` while none.
    at: AtomicU64,
    /// The last index the observer saw applied: ahead of openraft's metrics, which it updates
    /// only on its next turn.
    applied: AtomicU64,
    notify: Notify,
}

impl Default for PointSignal {
    fn default() -> Self {
        PointSignal {
            at: AtomicU64::new(u64::MAX),
            applied: AtomicU64::new(0),
            notify: Notify::new(),
        }
    }
}

impl PointSignal {
    /// Entry `index` was applied.
    pub fn applied(&self, index: u64) {
        self.applied.fetch_max(index, Ordering::AcqRel);
        if index >= self.at.load(Ordering::Acquire) {
            // Once per point: later entries find nothing armed until the schedule arms again.
            self.at.store(u64::MAX, Ordering::Release);
            // A permit is kept if the schedule is not waiting yet, so no point is missed.
            self.notify.notify_one();
        }
    }

    /// Wakes the schedule once an entry at or past `point` is applied; false if one already was
    /// (nothing armed then).
    fn arm(&self, point: u64) -> bool {
        self.at.store(point, Ordering::Release);
        if self.last_applied() >= point {
            self.at.store(u64::MAX, Ordering::Release);
            return false;
        }
        true
    }

    fn last_applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }
}

/// The offset of this member's snapshot points within one interval: its rank among `members`
/// (node ids in increasing order, as a membership lists them), spread evenly. A node missing
/// from `members` (not yet added) takes rank 0.
pub fn phase(interval: u64, node_id: u64, members: impl Iterator<Item = u64>) -> u64 {
    let (mut rank, mut count) = (0u64, 0u64);
    for id in members {
        if id == node_id {
            rank = count;
        }
        count += 1;
    }
    let count = count.max(1);
    // u128: interval * rank may not fit a u64 for absurd intervals.
    (u128::from(interval) * u128::from(rank) / u128::from(count)) as u64
}

/// The first snapshot point after `snapshot_index` (the last one built, 0 if none): the smallest
/// `k * interval + phase` greater than it.
pub fn next_point(snapshot_index: u64, interval: u64, phase: u64) -> u64 {
    let interval = interval.max(1);
    let phase = phase % interval;
    if snapshot_index < phase {
        return phase;
    }
    let periods = (snapshot_index - phase) / interval + 1;
    periods.saturating_mul(interval).saturating_add(phase)
}

/// Triggers this node's snapshots at its points until `shutdown`. openraft's own policy must be
/// `Never`; `signal` must be the one the node's apply observer reports to.
pub async fn run(
    raft: Raft,
    node_id: u64,
    interval: u64,
    signal: Arc<PointSignal>,
    shutdown: CancellationToken,
) {
    let metrics = raft.metrics();
    let mut last_trigger: Option<(u64, Instant)> = None;
    loop {
        let (point, reached) = {
            let m = metrics.borrow_watched();
            // A membership's nodes are a BTreeMap: ids in increasing order, no allocation here.
            let members = m.membership_config.membership().nodes().map(|(id, _)| *id);
            let snapshot_index = m.snapshot.map_or(0, |id| id.index);
            let point = next_point(snapshot_index, interval, phase(interval, node_id, members));
            let applied = m.last_applied.map_or(0, |id| id.index);
            (point, applied.max(signal.last_applied()) >= point)
        };
        // Not reached: wait for it, unless the observer has applied it since the look above.
        if !reached && !signal.arm(point) {
            continue;
        }
        let due = reached.then_some(point);
        if let Some(point) = due {
            let repeated = last_trigger
                .is_some_and(|(at, when)| at == point && when.elapsed() < RETRIGGER_AFTER);
            if !repeated {
                tracing::debug!(node_id, point, "snapshot point reached");
                if raft.trigger().snapshot().await.is_err() {
                    return;
                }
                last_trigger = Some((point, Instant::now()));
            }
        }
        // While due, the trigger's build is under way (or was dropped: it is repeated on a later
        // look, once RETRIGGER_AFTER has passed).
        let look_again = if due.is_some() {
            BUILD_POLL
        } else {
            CHECK_EVERY
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = signal.notify.notified() => {}
            _ = tokio::time::sleep(look_again) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn woken(signal: &PointSignal) -> bool {
        tokio::time::timeout(Duration::from_millis(20), signal.notify.notified())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn the_signal_wakes_once_at_the_armed_point_and_never_before() {
        let signal = PointSignal::default();
        // Nothing armed: applying wakes nobody.
        signal.applied(5);
        assert!(!woken(&signal).await);

        assert!(signal.arm(10));
        signal.applied(9);
        assert!(!woken(&signal).await, "woken before the point");
        signal.applied(10);
        // Past the point, once: the permit is kept even though nobody waited yet.
        signal.applied(11);
        assert!(woken(&signal).await);
        assert!(!woken(&signal).await, "woken twice for one point");

        // A point already applied is not armed: the caller looks again at once.
        assert!(!signal.arm(11));
        signal.applied(12);
        assert!(!woken(&signal).await);
    }

    #[test]
    fn three_members_are_spread_over_a_third_of_the_interval_each() {
        let members = || [1, 2, 3].into_iter();
        assert_eq!(phase(50_000, 1, members()), 0);
        assert_eq!(phase(50_000, 2, members()), 16_666);
        assert_eq!(phase(50_000, 3, members()), 33_333);
        // The rank counts, not the id itself.
        assert_eq!(phase(300, 70, [9, 12, 70].into_iter()), 200);
        assert_eq!(phase(300, 4, [9, 12, 70].into_iter()), 0);
        assert_eq!(phase(10, 1, [].into_iter()), 0);
    }

    #[test]
    fn points_form_a_fixed_grid_that_a_late_snapshot_does_not_move() {
        assert_eq!(next_point(0, 100, 0), 100);
        assert_eq!(next_point(0, 100, 30), 30);
        assert_eq!(next_point(29, 100, 30), 30);
        assert_eq!(next_point(30, 100, 30), 130);
        // A snapshot built late (at 157 instead of 130) keeps the next point at 230.
        assert_eq!(next_point(157, 100, 30), 230);
        // Degenerate inputs stay in range.
        assert_eq!(next_point(5, 0, 0), 6);
        assert_eq!(next_point(5, 1, 7), 6);
        assert_eq!(next_point(u64::MAX - 1, 100, 0), u64::MAX);
    }

    #[test]
    fn every_interval_holds_exactly_one_point() {
        for interval in [1, 2, 3, 7, 100] {
            for phase in 0..interval {
                let mut at = 0;
                for _ in 0..20 {
                    let next = next_point(at, interval, phase);
                    assert!(next > at);
                    assert!(next - at <= interval);
                    assert_eq!(next % interval, phase);
                    at = next;
                }
            }
        }
    }
}
