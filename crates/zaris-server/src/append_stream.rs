//! The leader's side of `RaftService.AppendStream`: one replication session's AppendEntries,
//! pipelined on one gRPC stream.
//!
//! openraft hands the network a stream of AppendEntries for a session and reads a stream of
//! results, one per request and in order. Sent as unary calls, each request was a gRPC call of
//! its own (an HTTP/2 stream: headers both ways, a task on the follower) and the next waited for
//! the answer to the one before; per client write, the leader sent each follower two (the entry,
//! then the commit index that openraft broadcasts as soon as the entry commits). On one stream
//! each request is one message, sent as soon as openraft makes it.
//!
//! An AppendEntries without entries that only carries a new commit index (openraft sends one
//! whenever an entry commits and no other waits to go) is held back for up to [`COMMIT_HOLD`]:
//! under a steady load the next entries come sooner, carry the commit index as well, and replace
//! it, so a follower gets one message per write instead of two ([`hold_commit`]).
//!
//! A follower that stops answering must not stall the session: every request has a deadline
//! from when it was handed to the transport, and the answers fail with a timeout once the oldest
//! unanswered one passes it. A request over [`MAX_APPEND_BYTES`](crate::MAX_APPEND_BYTES) is cut
//! to a prefix (as for a unary call) and ends the session's stream: the follower acknowledges
//! the prefix, and openraft sends the rest in its next session.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use openraft::raft::{AppendEntriesRequest, StreamAppendResult};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;
use zaris_core::codec;
use zaris_proto::v1::RaftMessage;
use zaris_raft::TypeConfig;

/// How long a commit-only AppendEntries waits for entries to carry its commit index instead. A
/// follower learns of a commit, and applies it, up to this much later when no write follows;
/// short beside a heartbeat (100 ms by default), which carries the commit index too. Measured on
/// 2026-12-04 (alternating runs on the 2-core machine), replacing those messages cut the
/// cluster's CPU per request by about a seventh where few clients write (1-client put, grants
/// and puts from 16 clients, renewals from 64 streams, lock cycles from 4 clients).
pub(crate) const COMMIT_HOLD: Duration = Duration::from_millis(2);

/// When each request still unanswered was handed to the transport, oldest first; and whether
/// openraft still reads the answers.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    sent: Mutex<VecDeque<Instant>>,
    /// Signalled on every send, for an answer stream that was waiting with nothing in flight.
    sent_more: Notify,
    /// Cancelled when the answers are dropped (openraft ended the session). The requests are
    /// polled by the HTTP/2 connection's body task, which outlives the session; without this it
    /// would go on pulling requests from openraft's generator, whose state the next session
    /// shares, and take that session's requests.
    closed: CancellationToken,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Instant>> {
        self.sent.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sent(&self, at: Instant) {
        self.lock().push_back(at);
        self.sent_more.notify_one();
    }

    fn answered(&self) {
        self.lock().pop_front();
    }

    /// When the oldest unanswered request times out, if any is unanswered.
    fn deadline(&self, timeout: Duration) -> Option<Instant> {
        self.lock().front().map(|sent| *sent + timeout)
    }
}

/// A request, encoded; `cut` if it was cut to a prefix, which ends the stream.
pub(crate) struct Encoded {
    pub payload: Vec<u8>,
    pub cut: bool,
}

/// The request messages: `first`, then what `rest` yields, each encoded by `encode` and
/// recorded in `in_flight` as it is handed over. Ends after a cut request, or at the first that
/// does not encode (logged: openraft then retries in a new session, as after a failed call).
pub(crate) fn requests<S, E>(
    first: AppendEntriesRequest<TypeConfig>,
    rest: S,
    cluster_id: u64,
    in_flight: Arc<InFlight>,
    commit_hold: Duration,
    encode: E,
) -> impl Stream<Item = RaftMessage> + Send + 'static
where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
    E: Fn(AppendEntriesRequest<TypeConfig>) -> Result<Encoded, String> + Send + 'static,
{
    let state = (Some(first), Some(rest), in_flight, encode);
    futures::stream::unfold(
        state,
        move |(mut first, mut rest, in_flight, encode)| async move {
            let request = match first.take() {
                Some(request) => request,
                None => {
                    let pulling = rest.as_mut()?;
                    let request = tokio::select! {
                        // Checked first: once the session is over, nothing more is pulled.
                        biased;
                        () = in_flight.closed.cancelled() => return None,
                        request = pulling.next() => request?,
                    };
                    if request.entries.is_empty() && !commit_hold.is_zero() {
                        match hold_commit(request, pulling, &in_flight, commit_hold).await {
                            Held::Send(request) => request,
                            Held::SendAndEnd(request) => {
                                rest = None;
                                request
                            }
                            Held::Closed => return None,
                        }
                    } else {
                        request
                    }
                }
            };
            if in_flight.closed.is_cancelled() {
                return None;
            }
            let encoded = match encode(request) {
                Ok(encoded) => encoded,
                Err(error) => {
                    tracing::warn!(%error, "cannot encode an AppendEntries; the session ends");
                    return None;
                }
            };
            if encoded.cut {
                rest = None;
            }
            in_flight.sent(Instant::now());
            let message = RaftMessage {
                cluster_id,
                payload: encoded.payload,
            };
            Some((message, (first, rest, in_flight, encode)))
        },
    )
}

/// What became of an entry-less request held back by [`hold_commit`].
enum Held {
    /// Send this: the request that replaced it, or itself once the hold ran out.
    Send(AppendEntriesRequest<TypeConfig>),
    /// Send this, then nothing more: openraft ended the session's requests.
    SendAndEnd(AppendEntriesRequest<TypeConfig>),
    Closed,
}

/// Holds an entry-less request (openraft sends one to carry a new commit index when no entry
/// is waiting) for up to `hold`, in case a request with entries follows: that one carries the
/// commit index too (as new as any before it), so it replaces the held one, and the follower
/// gets one message instead of two. A later entry-less request replaces it as well, carrying a
/// newer commit index; the hold still ends `hold` after the first was pulled.
///
/// Replacing is sound because every request of a session starts where the one before it ended
/// (`prev_log_id`), so an entry-less request asks the follower nothing that the next request
/// does not ask too. openraft needs no answer of its own for a replaced request: it matches
/// answers to its requests by log id (an acknowledgement drains every request at or below it,
/// a conflict the one at or containing it). The sending time openraft keeps for a held request
/// is when it made it, before the request really goes out, which can only shorten the leader
/// lease it derives from the answer.
async fn hold_commit<S>(
    mut held: AppendEntriesRequest<TypeConfig>,
    rest: &mut S,
    in_flight: &InFlight,
    hold: Duration,
) -> Held
where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Unpin,
{
    let deadline = Instant::now() + hold;
    loop {
        tokio::select! {
            biased;
            () = in_flight.closed.cancelled() => return Held::Closed,
            next = rest.next() => match next {
                Some(next) if next.entries.is_empty() => held = next,
                Some(next) => return Held::Send(next),
                None => return Held::SendAndEnd(held),
            },
            () = tokio::time::sleep_until(deadline) => return Held::Send(held),
        }
    }
}

/// Why the answers failed: openraft sees a timeout or a failed call as a network error.
#[derive(Debug)]
pub(crate) enum AnswerError {
    TimedOut,
    Status(tonic::Status),
    Malformed(String),
}

/// The results, one per answer message, in order; the stream ends after the first refused
/// request's result (as the follower's does) or the first error. `max_bytes` bounds an answer.
pub(crate) fn results(
    answers: Streaming<RaftMessage>,
    in_flight: Arc<InFlight>,
    timeout: Duration,
    max_bytes: usize,
) -> impl Stream<Item = Result<StreamAppendResult<TypeConfig>, AnswerError>> + Send + 'static {
    // Dropped with the stream's state: when the answers end or openraft drops them.
    let closing = in_flight.closed.clone().drop_guard();
    futures::stream::unfold(Some((answers, closing)), move |state| {
        let in_flight = in_flight.clone();
        async move {
            let (mut answers, closing) = state?;
            loop {
                let answer = match in_flight.deadline(timeout) {
                    Some(deadline) => {
                        match tokio::time::timeout_at(deadline, answers.message()).await {
                            Ok(answer) => answer,
                            Err(_) => return Some((Err(AnswerError::TimedOut), None)),
                        }
                    }
                    // Nothing unanswered: wait for an answer (there should be none) or a send,
                    // which starts a deadline. `message` keeps its state in `answers`, so it
                    // loses nothing when a send wins.
                    None => tokio::select! {
                        answer = answers.message() => answer,
                        () = in_flight.sent_more.notified() => continue,
                    },
                };
                return match answer {
                    Ok(Some(message)) => {
                        in_flight.answered();
                        match codec::decode::<StreamAppendResult<TypeConfig>>(
                            &message.payload,
                            max_bytes,
                        ) {
                            Ok(result) => {
                                let more = result.is_ok().then_some((answers, closing));
                                Some((Ok(result), more))
                            }
                            Err(e) => Some((Err(AnswerError::Malformed(e.to_string())), None)),
                        }
                    }
                    Ok(None) => None,
                    Err(status) => Some((Err(AnswerError::Status(status)), None)),
                };
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use openraft::entry::RaftEntry;
    use zaris_raft::{Entry, LogId, Vote};

    fn log_id(index: u64) -> LogId {
        openraft::LogId::new(
            openraft::impls::leader_id_adv::LeaderId {
                term: 1,
                node_id: 1,
            },
            index,
        )
    }

    /// Entries `prev + 1 ..= last` after `prev`, with the commit index at `commit`.
    fn append(prev: u64, last: u64, commit: u64) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: Some(log_id(prev)),
            leader_commit: Some(log_id(commit)),
            entries: (prev + 1..=last)
                .map(|index| Entry::new_blank(log_id(index)))
                .collect(),
        }
    }

    /// What goes out: (prev index, last index, commit index) per message, in order.
    fn summaries(
        first: AppendEntriesRequest<TypeConfig>,
        rest: mpsc::UnboundedReceiver<AppendEntriesRequest<TypeConfig>>,
        in_flight: Arc<InFlight>,
        hold: Duration,
    ) -> impl Stream<Item = (u64, u64, u64)> {
        let index = |id: &Option<LogId>| id.map_or(0, |id| id.index);
        requests(first, rest, 7, in_flight, hold, move |request| {
            let last = request
                .entries
                .last()
                .map_or(index(&request.prev_log_id), |entry| entry.log_id.index);
            let summary = (
                index(&request.prev_log_id),
                last,
                index(&request.leader_commit),
            );
            Ok(Encoded {
                payload: codec::encode(&summary).map_err(|e| e.to_string())?,
                cut: false,
            })
        })
        .map(|message| {
            assert_eq!(message.cluster_id, 7);
            codec::decode::<(u64, u64, u64)>(&message.payload, 1024).expect("a summary")
        })
    }

    /// Everything that goes out, once the requests end. A hang is the failure: no test that
    /// calls this waits on a hold to run out.
    async fn sent(
        first: AppendEntriesRequest<TypeConfig>,
        rest: mpsc::UnboundedReceiver<AppendEntriesRequest<TypeConfig>>,
        hold: Duration,
    ) -> Vec<(u64, u64, u64)> {
        let messages = summaries(first, rest, Arc::default(), hold).collect::<Vec<_>>();
        tokio::time::timeout(Duration::from_secs(30), messages)
            .await
            .expect("the requests end")
    }

    const FOREVER: Duration = Duration::from_secs(3_600);

    #[tokio::test]
    async fn entries_replace_the_commit_only_requests_before_them() {
        let (tx, rx) = mpsc::unbounded();
        for request in [
            append(2, 2, 1),
            append(2, 2, 2),
            append(2, 4, 2),
            append(4, 4, 4),
        ] {
            tx.unbounded_send(request).expect("open");
        }
        drop(tx);
        // The first request goes as it is; the two commit-only ones are replaced by the entries
        // after them, which carry their commit; the last is sent when the session's requests end.
        assert_eq!(
            sent(append(0, 2, 0), rx, FOREVER).await,
            vec![(0, 2, 0), (2, 4, 2), (4, 4, 4)]
        );
    }

    #[tokio::test]
    async fn a_commit_only_request_goes_out_when_its_hold_runs_out() {
        let (tx, rx) = mpsc::unbounded();
        tx.unbounded_send(append(2, 2, 1)).expect("open");
        tx.unbounded_send(append(2, 2, 2)).expect("open");
        let mut messages = Box::pin(summaries(
            append(0, 2, 0),
            rx,
            Arc::default(),
            Duration::from_millis(1),
        ));
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(30), messages.next())
                .await
                .expect("a message or the end")
        };
        assert_eq!(next().await, Some((0, 2, 0)));
        // Nothing follows the two commit-only requests while the hold runs: the newer goes out.
        assert_eq!(next().await, Some((2, 2, 2)));
        tx.unbounded_send(append(2, 3, 2)).expect("open");
        assert_eq!(next().await, Some((2, 3, 2)));
        drop(tx);
        assert_eq!(next().await, None);
    }

    #[tokio::test]
    async fn without_a_hold_every_request_goes_out() {
        let (tx, rx) = mpsc::unbounded();
        for request in [append(2, 2, 1), append(2, 3, 2)] {
            tx.unbounded_send(request).expect("open");
        }
        drop(tx);
        assert_eq!(
            sent(append(0, 2, 0), rx, Duration::ZERO).await,
            vec![(0, 2, 0), (2, 2, 1), (2, 3, 2)]
        );
    }

    #[tokio::test]
    async fn a_session_that_opens_with_a_commit_only_request_sends_it_at_once() {
        let (tx, rx) = mpsc::unbounded();
        let mut messages = Box::pin(summaries(append(2, 2, 2), rx, Arc::default(), FOREVER));
        let first = tokio::time::timeout(Duration::from_secs(30), messages.next()).await;
        assert_eq!(first.expect("sent at once"), Some((2, 2, 2)));
        drop(tx);
    }

    #[tokio::test]
    async fn a_held_request_is_dropped_when_the_session_closes() {
        let (tx, rx) = mpsc::unbounded();
        tx.unbounded_send(append(2, 2, 2)).expect("open");
        let in_flight = Arc::new(InFlight::default());
        let mut messages = Box::pin(summaries(append(0, 2, 0), rx, in_flight.clone(), FOREVER));
        assert_eq!(messages.next().await, Some((0, 2, 0)));
        let closer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            in_flight.closed.cancel();
        });
        let next = tokio::time::timeout(Duration::from_secs(30), messages.next()).await;
        assert_eq!(next.expect("the session closes"), None);
        closer.await.expect("the closer");
        drop(tx);
    }

    #[test]
    fn the_deadline_is_the_oldest_unanswered_request_s() {
        let in_flight = InFlight::default();
        let timeout = Duration::from_secs(1);
        assert_eq!(in_flight.deadline(timeout), None);
        let first = Instant::now();
        let second = first + Duration::from_millis(300);
        in_flight.sent(first);
        in_flight.sent(second);
        assert_eq!(in_flight.deadline(timeout), Some(first + timeout));
        in_flight.answered();
        assert_eq!(in_flight.deadline(timeout), Some(second + timeout));
        in_flight.answered();
        assert_eq!(in_flight.deadline(timeout), None);
    }
}
