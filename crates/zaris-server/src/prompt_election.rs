//! A prompt election after a leader dies: one follower calls it as soon as it finds the leader
//! dead, or else as soon as the leader's lease on it has run out, instead of every follower
//! waiting out a random extra half to whole election timeout.
//!
//! openraft lets a follower start an election only once it has heard nothing from the leader for
//! longer than the leader's lease (`election_timeout_max`), and then only after a random timeout
//! on top (`election_timeout_min..max`), which keeps two followers from splitting the vote. So a
//! crashed leader cost 1.5 to 2 election timeouts. Here the voter with the lowest id other than the
//! leader calls the election (with pre-vote):
//! - after a missed heartbeat, if the leader's peer address refuses connections (its process
//!   is gone; `dead_leader.rs`): the caller drops its own lease on that leader first, and each
//!   voter grants only once its own probe agrees;
//! - otherwise the moment its own lease view has expired.
//!
//! The other followers keep their random timers as the fallback, so a designated caller that is
//! itself down or cut off costs nothing but the old delay.
//!
//! Safety is openraft's, unchanged: the call goes through pre-vote, and every voter still refuses
//! while it has heard from a leader within its lease, unless it found that leader dead itself.
//! Reads never rest on the leader lease (ReadIndex), and the lease contract's deadlines are
//! counted from apply time on each node's own clock, so an earlier election moves no deadline
//! earlier: the new leader still extends every lease by one election timeout before it may
//! expire one. A wrong call (the leader is alive, this follower is only cut off from it) is
//! refused by the others at the pre-vote and disturbs nobody.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::ServerState;
use openraft::async_runtime::WatchReceiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

use crate::dead_leader::DeadLeaderCheck;
use crate::metrics as m;

/// Calls per silence: a pre-vote refused because another voter's lease had a few milliseconds
/// to run is tried again, this many times at most.
const MAX_CALLS_PER_SILENCE: u32 = 5;
/// Ticks between two calls: time for a pre-vote and vote round to finish, so a call does not
/// restart the election the previous one began.
const TICKS_BETWEEN_CALLS: u32 = 5;

/// When this follower last took entries or a heartbeat from a leader.
#[derive(Debug)]
pub struct LeaderContact {
    base: Instant,
    /// Milliseconds after `base`, plus one (0: never).
    last_ms: AtomicU64,
    /// Elections this node called (for tests and the metric).
    called: AtomicU64,
}

impl LeaderContact {
    pub fn new() -> Arc<Self> {
        Arc::new(LeaderContact {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
            called: AtomicU64::new(0),
        })
    }

    /// A leader's AppendEntries was accepted (or refused only for a log mismatch) just now.
    pub fn heard(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last_ms.store(ms + 1, Ordering::Relaxed);
    }

    /// Elections this node has called.
    pub fn called(&self) -> u64 {
        self.called.load(Ordering::Relaxed)
    }

    /// (contact mark, silence since it), or None if no leader was ever heard.
    pub(crate) fn silence(&self, now: Instant) -> Option<(u64, Duration)> {
        match self.last_ms.load(Ordering::Relaxed) {
            0 => None,
            mark => {
                let at = self.base + Duration::from_millis(mark - 1);
                Some((mark, now.saturating_duration_since(at)))
            }
        }
    }
}

/// What this node knows of the cluster on one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub me: u64,
    pub follower: bool,
    pub leader: Option<u64>,
    pub voters: Vec<u64>,
}

/// Whether a leader silent for `silence` has been so for longer than its lease (`lease`, plus
/// `margin` for the other voters' clocks to pass it too). The first half of the decision to call,
/// checked before the view is taken.
pub fn past_lease(silence: Duration, lease: Duration, margin: Duration) -> bool {
    silence > lease + margin
}

/// Whether this node is the one to call the election: a voting follower of a known leader, and
/// the voter with the lowest id other than that leader.
pub fn is_designated(view: &View) -> bool {
    let Some(leader) = view.leader else {
        return false;
    };
    let designated = view.voters.iter().copied().filter(|v| *v != leader).min();
    view.follower && leader != view.me && designated == Some(view.me)
}

/// Watches for a silent leader every `tick` until `shutdown`, calling an election when the leader
/// is [`past_lease`] and this node [`is_designated`], at most [`MAX_CALLS_PER_SILENCE`] per
/// silence.
pub async fn run(
    raft: Raft,
    me: u64,
    contact: Arc<LeaderContact>,
    dead: Arc<DeadLeaderCheck>,
    lease: Duration,
    tick: Duration,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut calls: (u64, u32) = (0, 0);
    let mut last_call: Option<Instant> = None;
    let mut last_probe: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some((mark, silence)) = contact.silence(Instant::now()) else {
            continue;
        };
        if calls.0 != mark {
            calls = (mark, 0);
        }
        // Cheap checks first: the leader (and every node most of the time) stops here, before
        // the metrics are copied.
        let spacing = tick * TICKS_BETWEEN_CALLS;
        let spaced = last_call.is_none_or(|at| at.elapsed() >= spacing);
        let past = past_lease(silence, lease, tick);
        let worth_a_probe = silence > dead.probe_after();
        if calls.1 >= MAX_CALLS_PER_SILENCE || !spaced || !(past || worth_a_probe) {
            continue;
        }
        let view = {
            let metrics = raft.metrics().borrow_watched().clone();
            View {
                me,
                follower: metrics.state == ServerState::Follower,
                leader: metrics.current_leader,
                voters: metrics.membership_config.membership().voter_ids().collect(),
            }
        };
        if !is_designated(&view) {
            continue;
        }
        if !past {
            // Within the lease, only a leader found dead is cause for a call. A live but slow
            // leader is probed again at the calls' pace, not on every tick.
            if last_probe.is_some_and(|at| at.elapsed() < spacing) {
                continue;
            }
            last_probe = Some(Instant::now());
            if !dead.release_if_dead(dead.probe_after(), None).await {
                continue;
            }
        }
        calls.1 += 1;
        last_call = Some(Instant::now());
        tracing::info!(
            node_id = me,
            silent_leader = view.leader,
            silence_ms = silence.as_millis() as u64,
            past_lease = past,
            "the leader is silent past its lease, or dead: calling an election"
        );
        if raft.trigger().elect(true).await.is_err() {
            return;
        }
        contact.called.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::ELECTIONS_CALLED).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_millis(1_000);
    const MARGIN: Duration = Duration::from_millis(20);

    fn view(me: u64, leader: Option<u64>) -> View {
        View {
            me,
            follower: true,
            leader,
            voters: vec![1, 2, 3],
        }
    }

    #[test]
    fn only_the_lowest_other_voter_calls_and_only_past_the_lease() {
        let silent = LEASE + MARGIN + Duration::from_millis(1);
        assert!(past_lease(silent, LEASE, MARGIN));
        // Leader 1 is silent: 2 calls, 3 waits for its own timer.
        assert!(is_designated(&view(2, Some(1))));
        assert!(!is_designated(&view(3, Some(1))));
        // Leader 2: 1 is the designated caller.
        assert!(is_designated(&view(1, Some(2))));
        assert!(!is_designated(&view(3, Some(2))));
        // Not before the lease (and the margin) has passed.
        assert!(!past_lease(LEASE + MARGIN, LEASE, MARGIN));
        assert!(!past_lease(LEASE, LEASE, MARGIN));
    }

    #[test]
    fn nobody_calls_without_a_known_leader_or_as_a_leader_learner_or_candidate() {
        assert!(!is_designated(&view(2, None)));
        assert!(!is_designated(&view(1, Some(1))));
        let candidate = View {
            follower: false,
            ..view(2, Some(1))
        };
        assert!(!is_designated(&candidate));
        let learner = View {
            me: 4,
            ..view(4, Some(1))
        };
        assert!(!is_designated(&learner));
    }

    #[test]
    fn silence_counts_from_the_last_contact() {
        let contact = LeaderContact::new();
        assert_eq!(contact.silence(Instant::now()), None, "never heard");
        contact.heard();
        let heard_by = Instant::now();
        let (mark, silence) = contact.silence(heard_by).expect("heard");
        assert!(silence < Duration::from_millis(50), "{silence:?}");
        let later = heard_by + Duration::from_millis(1_200);
        let (again, longer) = contact.silence(later).expect("heard");
        assert_eq!(again, mark, "no new contact");
        assert!(longer >= Duration::from_millis(1_200), "{longer:?}");
        std::thread::sleep(Duration::from_millis(5));
        contact.heard();
        assert_ne!(
            contact.silence(later).map(|c| c.0),
            Some(mark),
            "a new contact"
        );
    }
}
