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
                    let rest = rest.as_mut()?;
                    tokio::select! {
                        // Checked first: once the session is over, nothing more is pulled.
                        biased;
                        () = in_flight.closed.cancelled() => return None,
                        request = rest.next() => request?,
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
