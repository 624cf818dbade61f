//! A leader whose process is gone, told apart from one that is only slow or cut off: its peer
//! address refuses connections.
//!
//! openraft's voters refuse every (pre-)vote while their leader lease runs, one election timeout
//! after they last heard from the leader. That lease keeps a follower that is merely cut off from
//! a live leader from disturbing it, and it is what made a crashed leader cost a full election
//! timeout. Here a follower whose leader has missed a heartbeat dials the leader's peer
//! address; if every address it resolves to refuses the connection, nothing listens there (the
//! process crashed, was killed, or is restarting), and the follower drops its own lease on that
//! leader so that it may call or grant an election at once. A slow or paused leader still accepts
//! connections (the kernel answers for it), and a cut-off one times out, so either keeps its
//! lease. The designated caller (`prompt_election.rs`) and every voter check on their own: a
//! voter drops its lease only on its own probe, so one follower with a wrong view cannot unseat a
//! live leader.
//!
//! Safety does not rest on the lease: reads confirm leadership with a ReadIndex round, never
//! with a lease, and lease deadlines are counted on each node's clock from apply time (the
//! contract's §3), so an earlier election moves no deadline earlier. It only shortens the time
//! until a new leader expires anything (the "bounded late" bound).
//!
//! The probe dials the member's own peer address, not a rerouted one (the harness's proxies
//! accept for a dead node and hold bytes for a cut one): it asks whether the process listens.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::ServerState;
use openraft::async_runtime::WatchReceiver;
use openraft::raft::TransferLeaderRequest;
use tokio::net::TcpStream;
use tokio::time::Instant;
use zaris_raft::Raft;

use crate::metrics as m;
use crate::prompt_election::LeaderContact;

/// Whether nothing listens at `addr` (`host:port`): it resolves, and every address it resolves to
/// refuses a TCP connection within `timeout`. Any other outcome (a connection, a timeout, an
/// unreachable host, a failed lookup) is no evidence, so false.
pub async fn refuses_connections(addr: &str, timeout: Duration) -> bool {
    let resolved = match tokio::time::timeout(timeout, tokio::net::lookup_host(addr)).await {
        Ok(Ok(addrs)) => addrs.collect::<Vec<_>>(),
        _ => return false,
    };
    if resolved.is_empty() {
        return false;
    }
    for target in resolved {
        match tokio::time::timeout(timeout, TcpStream::connect(target)).await {
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            _ => return false,
        }
    }
    true
}

/// What a follower knows of its leader when it considers probing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Following {
    pub leader: u64,
    pub leader_peer_addr: String,
    /// The leader's vote, as this node holds it: dropping the lease names it, so a leader that
    /// changed meanwhile keeps its lease.
    pub vote: zaris_raft::Vote,
}

/// The checks one node makes of its leader (shared by the election caller and the vote service).
#[derive(Debug)]
pub struct DeadLeaderCheck {
    raft: Raft,
    me: u64,
    contact: Arc<LeaderContact>,
    heartbeat: Duration,
    /// Leaders this node found dead (for tests and the metric).
    found: AtomicU64,
    /// Serializes probes, and holds when the last probe found the leader alive: a burst of vote
    /// requests makes one probe per heartbeat, not one each (a probe of a vanished host can take
    /// its whole timeout).
    probing: tokio::sync::Mutex<Option<Instant>>,
}

impl DeadLeaderCheck {
    pub fn new(raft: Raft, me: u64, contact: Arc<LeaderContact>, heartbeat: Duration) -> Arc<Self> {
        Arc::new(DeadLeaderCheck {
            raft,
            me,
            contact,
            heartbeat,
            found: AtomicU64::new(0),
            probing: tokio::sync::Mutex::new(None),
        })
    }

    /// Silence after which the election caller probes its leader: a heartbeat and a half, one
    /// heartbeat missed. (Only a refused connection counts as death, so probing a live leader
    /// early costs a connection, nothing more.)
    pub fn probe_after(&self) -> Duration {
        self.heartbeat * 3 / 2
    }

    /// Silence a voter requires before it trusts its own probe: a leader heard within a
    /// heartbeat and a quarter is alive, whatever its address answers. Shorter than
    /// [`Self::probe_after`], so a voter whose last heartbeat came a little after the caller's
    /// still agrees.
    pub fn voter_silence(&self) -> Duration {
        self.heartbeat * 5 / 4
    }

    /// Leaders this node has found dead.
    pub fn found(&self) -> u64 {
        self.found.load(Ordering::Relaxed)
    }

    /// The leader this node follows, if it is a voting follower with a committed leader other
    /// than itself and `except`, and that leader is a member with a peer address.
    fn following(&self, except: Option<u64>) -> Option<Following> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        if metrics.state != ServerState::Follower {
            return None;
        }
        let leader = metrics.current_leader?;
        if leader == self.me || Some(leader) == except || !metrics.vote.is_committed() {
            return None;
        }
        let membership = metrics.membership_config.membership();
        let leader_peer_addr = membership.get_node(&leader)?.peer_addr.clone();
        Some(Following {
            leader,
            leader_peer_addr,
            vote: metrics.vote,
        })
    }

    /// If this node follows a leader (other than `except`, a candidate asking for this node's
    /// vote) that has been silent for longer than `silent_for` and whose peer address refuses
    /// connections, drops this node's leader lease on it and returns true.
    pub async fn release_if_dead(&self, silent_for: Duration, except: Option<u64>) -> bool {
        let silent = |contact: &LeaderContact| {
            contact
                .silence(Instant::now())
                .is_some_and(|(_, silence)| silence > silent_for)
        };
        if !silent(&self.contact) {
            return false;
        }
        let Some(following) = self.following(except) else {
            return false;
        };
        let mut last_alive = self.probing.lock().await;
        // The leader may have spoken while this call waited, or a probe just found it alive.
        if !silent(&self.contact) || last_alive.is_some_and(|at| at.elapsed() < self.heartbeat) {
            return false;
        }
        if !refuses_connections(&following.leader_peer_addr, self.heartbeat).await {
            *last_alive = Some(Instant::now());
            return false;
        }
        // openraft's hand-over message, sent to itself and naming the dead leader as the
        // target: this node drops its lease on that leader's vote (and, not being the target,
        // starts nothing). A vote that changed meanwhile makes it a no-op.
        let release = TransferLeaderRequest::new(following.vote, following.leader, None);
        if self.raft.handle_transfer_leader(release).await.is_err() {
            return false;
        }
        self.found.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::LEADERS_FOUND_DEAD).increment(1);
        tracing::info!(
            node_id = self.me,
            dead_leader = following.leader,
            peer_addr = %following.leader_peer_addr,
            "the silent leader's peer address refuses connections: its lease on this node is \
             dropped"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_refuses_and_a_listening_one_does_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let open = listener.local_addr().expect("addr").to_string();
        assert!(!refuses_connections(&open, Duration::from_secs(1)).await);
        drop(listener);
        assert!(refuses_connections(&open, Duration::from_secs(1)).await);
    }

    #[tokio::test]
    async fn a_listener_that_never_accepts_still_counts_as_alive() {
        // A paused or overloaded process: the kernel completes the handshake from the backlog.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        let listener = socket.listen(1).expect("listen");
        let addr = listener.local_addr().expect("addr").to_string();
        assert!(!refuses_connections(&addr, Duration::from_secs(1)).await);
    }

    #[tokio::test]
    async fn names_that_do_not_resolve_and_garbage_are_no_evidence() {
        let timeout = Duration::from_millis(500);
        assert!(!refuses_connections("no-such-host.invalid:7001", timeout).await);
        assert!(!refuses_connections("not an address", timeout).await);
        assert!(!refuses_connections("", timeout).await);
    }
}
