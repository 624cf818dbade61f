//! Where an attempt goes after a failure: the one routing policy of the client, for unary calls
//! ([`Client::call`](crate::Client)), the background keepalive stream and watch streams.
//!
//! A NOT_LEADER answer naming the leader's address is followed at once (the address is cached,
//! and added to the endpoints if new); after a full round of redirects in a row (members with
//! stale views can bounce a call between them) the next one waits a backoff. Failures another
//! member may not have (connection refused or reset, NO_LEADER, a member shutting down or
//! failed, a timeout) move away from the endpoint after a jittered, doubling backoff, and never
//! sooner than the server's `retry_after_ms`. Anything else is final.

use std::time::Duration;

use tonic::Code;
use zaris_proto::v1::ErrorCode;

use crate::backoff::{Backoff, jitter};
use crate::client::ClientOptions;
use crate::endpoint::Endpoints;
use crate::error::RpcError;

/// Longest wait between tries while the leader is moving: an election, a leader that died or
/// stops. A member answers such a try at once (NOT_LEADER, NO_LEADER) or refuses the connection,
/// which costs it next to nothing, and a new leader is in place within a few heartbeats after a
/// crash (within about an election timeout otherwise): a client that had doubled its backoff to a
/// second would find it up to a second late. (etcd's Go client retries every 25 ms.) It caps the
/// backoff before jitter, so tries come 25 to 50 ms apart once the backoff has reached it,
/// whatever maximum `with_backoff` set.
pub const MAX_ELECTION_BACKOFF: Duration = Duration::from_millis(50);

/// Whether `err` says the Raft leader is moving rather than that a member is overloaded, slow or
/// misconfigured: refusals that name no leader, a lost leadership, a member shutting down, and a
/// connection that was refused or broke (a member that died). Not timeouts (they may be load),
/// TLS failures (a handshake each try would cost the member) or a connection the member closed
/// before the call (its connection limits).
fn leader_moving(err: &RpcError) -> bool {
    if let Some(detail) = err.detail() {
        return matches!(
            ErrorCode::try_from(detail.code),
            Ok(ErrorCode::NotLeader
                | ErrorCode::NoLeader
                | ErrorCode::LeadershipLost
                | ErrorCode::ShuttingDown)
        );
    }
    !err.is_tls_failure()
        && matches!(
            err.io_error_kind(),
            Some(
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            )
        )
}

/// What the retry loop does after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Resend at once to the Raft leader: member `leader_id` (0 if unknown), serving clients at
    /// `address` ("host:port").
    Redirect { leader_id: u64, address: String },
    /// Resend to the next endpoint after a backoff.
    Rotate,
    /// Give up: the error is final.
    Fail,
}

/// Classifies a failed attempt (before considering idempotence).
pub(crate) fn disposition(err: &RpcError) -> Disposition {
    if let Some(detail) = err.detail() {
        return match ErrorCode::try_from(detail.code) {
            Ok(ErrorCode::NotLeader) if !detail.raft_leader_address.is_empty() => {
                Disposition::Redirect {
                    leader_id: detail.raft_leader_id,
                    address: detail.raft_leader_address.clone(),
                }
            }
            // INTERNAL and NODE_FAILED say this member is broken, not the request: another
            // member may serve it (a failed leader is replaced within an election timeout).
            Ok(
                ErrorCode::NotLeader
                | ErrorCode::NoLeader
                | ErrorCode::LeadershipLost
                | ErrorCode::ShuttingDown
                | ErrorCode::Timeout
                | ErrorCode::NodeFailed
                | ErrorCode::Internal,
            ) => Disposition::Rotate,
            // A code this client does not know, on a status that says "try elsewhere".
            _ if err.code() == Code::Unavailable => Disposition::Rotate,
            _ => Disposition::Fail,
        };
    }
    // A TLS port told this plaintext client so: every member of that cluster would.
    if err.is_plaintext_refused() {
        return Disposition::Fail;
    }
    // No Zaris detail: the transport (connection refused, reset or broken mid-stream by a member
    // that died, our own timeout) or a proxy. Another member may answer.
    match err.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Internal => {
            Disposition::Rotate
        }
        _ if err.is_connect_failure() || err.is_transport_failure() => Disposition::Rotate,
        _ => Disposition::Fail,
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Try again (the endpoints now point where it should go) after this delay (zero: at once).
    Retry(Duration),
    /// The error is final.
    GiveUp,
}

/// The routing state of one call or one stream: its backoff and its run of redirects.
#[derive(Debug, Clone)]
pub(crate) struct Router {
    backoff: Backoff,
    initial: Duration,
    max: Duration,
    redirects_in_a_row: usize,
}

impl Router {
    pub(crate) fn new(options: &ClientOptions) -> Self {
        Router {
            backoff: Backoff::new(options.initial_backoff, options.max_backoff),
            initial: options.initial_backoff,
            max: options.max_backoff,
            redirects_in_a_row: 0,
        }
    }

    /// The attempt at endpoint `index` succeeded: remember the endpoint, start backoff over.
    pub(crate) fn succeeded(&mut self, endpoints: &Endpoints, index: usize) {
        endpoints.succeeded(index);
        self.backoff = Backoff::new(self.initial, self.max);
        self.redirects_in_a_row = 0;
    }

    /// The attempt at endpoint `index` failed with `err`: where the next one goes, and when.
    pub(crate) fn failed(&mut self, endpoints: &Endpoints, index: usize, err: &RpcError) -> Next {
        match disposition(err) {
            Disposition::Fail => Next::GiveUp,
            Disposition::Redirect { leader_id, address } => {
                match endpoints.redirect(leader_id, &address) {
                    Some(leader) if leader != index => {
                        self.redirects_in_a_row += 1;
                        tracing::debug!(from = index, to = %address, "redirected to the Raft leader");
                        if self.redirects_in_a_row <= endpoints.len() {
                            Next::Retry(Duration::ZERO)
                        } else {
                            Next::Retry(self.backoff_delay(err))
                        }
                    }
                    // Redirected to where it was sent, or to an unusable address: try others.
                    _ => self.rotate(endpoints, index, err),
                }
            }
            // A leader address learned from a redirect that this client cannot reach (a name
            // only the cluster's network resolves, say): go back to the configured endpoints at
            // once, counting it as a redirect so a loop of them still backs off.
            Disposition::Rotate if endpoints.is_learned(index) && err.is_connect_failure() => {
                endpoints.failed(index);
                self.redirects_in_a_row += 1;
                if self.redirects_in_a_row <= endpoints.len() {
                    Next::Retry(Duration::ZERO)
                } else {
                    Next::Retry(self.backoff_delay(err))
                }
            }
            Disposition::Rotate => {
                self.redirects_in_a_row = 0;
                self.rotate(endpoints, index, err)
            }
        }
    }

    /// Moves away from endpoint `index` after a backoff, whatever the error (for a stream that
    /// must go on, such as the background keepalive).
    pub(crate) fn rotate(&mut self, endpoints: &Endpoints, index: usize, err: &RpcError) -> Next {
        endpoints.failed(index);
        Next::Retry(self.backoff_delay(err))
    }

    /// The next backoff delay (jittered, at least the server's `retry_after_ms`), no longer
    /// than [`MAX_ELECTION_BACKOFF`] while the leader is moving.
    pub(crate) fn backoff_delay(&mut self, err: &RpcError) -> Duration {
        let mut delay = self.backoff.next_delay();
        if leader_moving(err) {
            delay = delay.min(MAX_ELECTION_BACKOFF);
        }
        jitter(delay).max(err.retry_after())
    }

    /// The next backoff delay, jittered, when no error says more.
    pub(crate) fn next_backoff(&mut self) -> Duration {
        jitter(self.backoff.next_delay())
    }
}

#[cfg(test)]
mod tests {
    use tonic::Status;
    use zaris_proto::v1::{ErrorDetail, Outcome};

    use super::*;
    use crate::test_support::{invalid_argument, limit_exceeded, no_leader, not_leader, rpc};

    #[test]
    fn not_leader_with_address_redirects() {
        assert_eq!(
            disposition(&rpc(not_leader(2, "127.0.0.1:7002"))),
            Disposition::Redirect {
                leader_id: 2,
                address: "127.0.0.1:7002".into()
            }
        );
    }

    #[test]
    fn leaderless_and_transport_failures_rotate() {
        assert_eq!(disposition(&rpc(no_leader())), Disposition::Rotate);
        assert_eq!(disposition(&rpc(not_leader(2, ""))), Disposition::Rotate);
        assert_eq!(
            disposition(&rpc(Status::unavailable("tcp connect error"))),
            Disposition::Rotate
        );
        assert_eq!(
            disposition(&RpcError::timed_out(Duration::from_secs(1), "h:1")),
            Disposition::Rotate
        );
        let lost = ErrorDetail::new(ErrorCode::LeadershipLost, Outcome::Indeterminate, "lost");
        assert_eq!(disposition(&rpc(lost.into_status())), Disposition::Rotate);
    }

    /// Issue 9, item 5: a member whose Raft failed answered INTERNAL forever, and a client that
    /// cached it as the leader never moved on.
    #[test]
    fn a_broken_member_is_rotated_away_from() {
        for code in [ErrorCode::NodeFailed, ErrorCode::Internal] {
            let broken = ErrorDetail::new(code, Outcome::Indeterminate, "raft stopped");
            assert_eq!(disposition(&rpc(broken.into_status())), Disposition::Rotate);
        }
        assert_eq!(
            disposition(&rpc(Status::internal("boom"))),
            Disposition::Rotate
        );
    }

    #[test]
    fn request_errors_are_final() {
        assert_eq!(
            disposition(&rpc(invalid_argument("empty key"))),
            Disposition::Fail
        );
        assert_eq!(
            disposition(&rpc(limit_exceeded("max_key_bytes", 10, 20))),
            Disposition::Fail
        );
        let missing = ErrorDetail::new(ErrorCode::MemberNotFound, Outcome::Definite, "no 9");
        assert_eq!(disposition(&rpc(missing.into_status())), Disposition::Fail);
    }

    /// A redirect is followed at once, once per endpoint in a row; then it backs off, and a
    /// failure to connect moves on after a backoff.
    #[tokio::test]
    async fn redirects_are_followed_at_once_until_a_round_is_done() {
        let options = ClientOptions::default()
            .with_backoff(Duration::from_millis(40), Duration::from_millis(40));
        let endpoints = match Endpoints::new(
            vec![
                crate::endpoint::parse_endpoint("127.0.0.1:7001").expect("endpoint"),
                crate::endpoint::parse_endpoint("127.0.0.1:7002").expect("endpoint"),
            ],
            crate::endpoint::Connect {
                timeout: Duration::from_secs(1),
                tls: None,
            },
        ) {
            Ok(endpoints) => endpoints,
            Err(err) => panic!("{err}"),
        };
        let mut router = Router::new(&options);
        let to_2 = rpc(not_leader(2, "127.0.0.1:7002"));
        let to_1 = rpc(not_leader(1, "127.0.0.1:7001"));
        assert_eq!(
            router.failed(&endpoints, 0, &to_2),
            Next::Retry(Duration::ZERO)
        );
        assert_eq!(
            router.failed(&endpoints, 1, &to_1),
            Next::Retry(Duration::ZERO)
        );
        // A third redirect in a row on two endpoints: bouncing; wait.
        match router.failed(&endpoints, 0, &to_2) {
            Next::Retry(delay) => assert!(delay >= Duration::from_millis(20), "{delay:?}"),
            Next::GiveUp => panic!("gave up on a redirect"),
        }
        router.succeeded(&endpoints, 1);
        assert_eq!(
            router.failed(&endpoints, 0, &to_2),
            Next::Retry(Duration::ZERO)
        );
        assert_eq!(
            router.failed(&endpoints, 0, &rpc(invalid_argument("empty key"))),
            Next::GiveUp
        );
        match router.failed(&endpoints, 1, &rpc(no_leader())) {
            Next::Retry(delay) => assert!(delay >= Duration::from_millis(20), "{delay:?}"),
            Next::GiveUp => panic!("gave up on NO_LEADER"),
        }
    }

    /// While the leader moves, tries go on every 25 to 50 ms however long it takes; other
    /// failures (a timeout may be load) back off to the configured maximum.
    #[test]
    fn an_election_is_polled_briskly_and_load_is_backed_off_from() {
        let options = ClientOptions::default()
            .with_backoff(Duration::from_millis(50), Duration::from_secs(2));
        let delays = |err: &RpcError| {
            let mut router = Router::new(&options);
            (0..10)
                .map(|_| router.backoff_delay(err))
                .collect::<Vec<_>>()
        };
        let moving = [
            rpc(no_leader()),
            rpc(not_leader(2, "127.0.0.1:7002")),
            // A member that died mid-call: the transport's own error, no Zaris detail.
            rpc(Status::from_error(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionReset,
            )))),
        ];
        for err in &moving {
            let delays = delays(err);
            assert!(
                delays
                    .iter()
                    .all(|d| *d >= MAX_ELECTION_BACKOFF / 4 && *d <= MAX_ELECTION_BACKOFF),
                "{err:?}: {delays:?}"
            );
        }
        let timeout = delays(&RpcError::timed_out(Duration::from_secs(1), "h:1"));
        assert!(
            timeout.last().is_some_and(|d| *d >= Duration::from_secs(1)),
            "{timeout:?}"
        );
    }
}
