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

use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

/// A trigger that did not lead to a snapshot (openraft drops one while a build is under way) is
/// repeated after this long.
const RETRIGGER_AFTER: Duration = Duration::from_secs(1);

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
/// `Never`.
pub async fn run(raft: Raft, node_id: u64, interval: u64, shutdown: CancellationToken) {
    let mut metrics = raft.metrics();
    let mut last_trigger: Option<(u64, Instant)> = None;
    loop {
        let due = {
            let m = metrics.borrow_watched();
            // A membership's nodes are a BTreeMap: ids in increasing order, no allocation here
            // (this runs on every applied entry).
            let members = m.membership_config.membership().nodes().map(|(id, _)| *id);
            let snapshot_index = m.snapshot.map_or(0, |id| id.index);
            let point = next_point(snapshot_index, interval, phase(interval, node_id, members));
            let applied = m.last_applied.map_or(0, |id| id.index);
            (applied >= point).then_some(point)
        };
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
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
            // A dropped trigger is repeated even when nothing else changes.
            _ = tokio::time::sleep(RETRIGGER_AFTER), if due.is_some() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
