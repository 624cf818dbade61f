//! Group commit for client writes: puts, grants and lock calls from concurrent clients share one
//! Raft entry ([`Command::Batch`]), so a burst of them costs one append, one fsync and one
//! replication round on every node instead of one each.
//!
//! A batch forms only under load: a lone client's request goes out alone at once, proposed by
//! its caller's own task, while a pipeline slot is free and nothing is queued
//! (`group_commit::Slots::for_caller`). While every slot is busy, requests queue, and the next
//! free slot takes all of them that fit into one entry: at most [`MAX_BATCH_REQUESTS`] requests
//! and [`MAX_BATCH_BYTES`] bytes, no two touching the same key, lease or lock (every request of
//! an entry takes its revision, [`Command::batching`]). The first one that does not fit starts
//! the next batch, so queued requests are proposed in arrival order.
//!
//! Each request is answered with its own response, after the entry is committed and applied.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zaris_core::{Batching, Command, MAX_BATCH_REQUESTS, Outcome, Request};
use zaris_raft::Reply;

use crate::error::ApiError;
use crate::group_commit::{Slots, linger_expired, next_queued, next_want, refuse_unproposed};
use crate::metrics as m;
use crate::propose::Proposer;

/// Most bytes of keys, values and names one batch carries (a larger request goes alone): keeps
/// a batch entry within what one client request may be (`MAX_CLIENT_MESSAGE_BYTES`), so it
/// fits every Raft message bound that a single request fits.
pub const MAX_BATCH_BYTES: usize = 1024 * 1024;

/// Requests that may wait for a pipeline slot. Bounded: a full queue pushes back on clients.
const QUEUE_DEPTH: usize = 4_096;

/// What a request is charged against [`MAX_BATCH_BYTES`] beyond its keys, values and names.
const REQUEST_OVERHEAD_BYTES: usize = 64;

struct Pending {
    request: Request,
    /// A hash of what the request touches (`None`: nothing another request could conflict on).
    /// Two different things hashing alike only split a batch early; the state machine checks
    /// the real keys again.
    touch: Option<u64>,
    bytes: usize,
    reply: oneshot::Sender<Result<Reply, ApiError>>,
}

impl Pending {
    fn new(request: Request, reply: oneshot::Sender<Result<Reply, ApiError>>) -> Self {
        let touch = match request.command.batching() {
            Batching::Touching(touch) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                touch.hash(&mut hasher);
                Some(hasher.finish())
            }
            Batching::Freely | Batching::Alone => None,
        };
        let bytes = request_bytes(&request.command);
        Pending {
            request,
            touch,
            bytes,
            reply,
        }
    }

    /// The caller went away (its call was cancelled or timed out) before the request was
    /// proposed: it is dropped unproposed, which its caller cannot tell from a lost request.
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// The bytes a request adds to a batch entry, roughly: its keys, values and names.
fn request_bytes(command: &Command) -> usize {
    let payload = match command {
        Command::Put {
            key, value, guard, ..
        } => key.len() + value.len() + guard.as_ref().map_or(0, |g| g.lock.len()),
        Command::GrantOwned { owner, .. } => owner.len(),
        Command::GrantBound { owner, keys, .. } => {
            owner.as_ref().map_or(0, String::len)
                + keys
                    .iter()
                    .map(|k| k.key.len() + k.value.len())
                    .sum::<usize>()
        }
        Command::LockAcquire { name, .. }
        | Command::LockRelease { name, .. }
        | Command::LockCancel { name, .. } => name.len(),
        _ => 0,
    };
    payload + REQUEST_OVERHEAD_BYTES
}

/// The queue of batchable writes; see the module comment.
#[derive(Clone, Debug)]
pub struct WriteBatcher {
    tx: mpsc::Sender<Pending>,
    /// The pipeline slots, shared with the batcher task.
    slots: Arc<Slots>,
    /// Proposes directly, for a caller that takes a free slot itself.
    direct: Arc<Proposer>,
}

impl WriteBatcher {
    /// Starts the batcher. `proposer` must propose directly (not through a batcher).
    pub fn start(
        proposer: Proposer,
        inflight: usize,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let slots = Slots::new(inflight);
        tracker.spawn(run(
            rx,
            proposer.clone(),
            slots.clone(),
            tracker.clone(),
            shutdown,
        ));
        WriteBatcher {
            tx,
            slots,
            direct: Arc::new(proposer),
        }
    }

    /// Proposes `request` (batchable: [`Command::batching`] is not `Alone`), alone if
    /// [`Slots::for_caller`] gives it a slot, else in the next batch, and waits until its entry
    /// is applied.
    pub async fn propose(&self, request: Request) -> Result<Reply, ApiError> {
        if let Some(_slot) = self.slots.for_caller(&self.tx) {
            // Boxed, so that the batched path's future stays small (see `Proposer::propose`).
            return Box::pin(self.direct.propose_entry(request)).await;
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Pending::new(request, reply))
            .await
            .map_err(|_| ApiError::ShuttingDown { proposed: false })?;
        // The batch may have been proposed before the node stopped.
        rx.await
            .map_err(|_| ApiError::ShuttingDown { proposed: true })?
    }
}

/// The requests of one entry being gathered, and what they touch.
struct Gathering {
    batch: Vec<Pending>,
    touched: HashSet<u64>,
    bytes: usize,
}

impl Gathering {
    fn new(first: Pending) -> Self {
        let mut gathering = Gathering {
            batch: Vec::new(),
            touched: HashSet::new(),
            bytes: 0,
        };
        gathering.push(first);
        gathering
    }

    fn admits(&self, next: &Pending) -> bool {
        self.batch.len() < MAX_BATCH_REQUESTS
            && self.bytes + next.bytes <= MAX_BATCH_BYTES
            && next
                .touch
                .is_none_or(|touch| !self.touched.contains(&touch))
    }

    /// Whether no request could join: a batch that is full waits for no more.
    fn full(&self) -> bool {
        self.batch.len() >= MAX_BATCH_REQUESTS || self.bytes >= MAX_BATCH_BYTES
    }

    /// Whether the batch still lacks requests the linger waits for (`want`), and could take them.
    fn short_of(&self, want: usize) -> bool {
        self.batch.len() < want && !self.full()
    }

    fn push(&mut self, next: Pending) {
        if let Some(touch) = next.touch {
            self.touched.insert(touch);
        }
        self.bytes += next.bytes;
        self.batch.push(next);
    }
}

async fn run(
    mut rx: mpsc::Receiver<Pending>,
    proposer: Proposer,
    slots: Arc<Slots>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut carry: Option<Pending> = None;
    let mut want = 0;
    while let Some((permit, first)) = slots.next_batch_start(&mut carry, &mut rx, &shutdown).await {
        if first.abandoned() {
            continue;
        }
        let mut gathering = Gathering::new(first);
        // With one slot: the requests `group_commit::next_want` expects, if they come soon.
        let deadline = slots.linger_deadline();
        while let Some(next) = next_queued(&mut rx, deadline, gathering.short_of(want)).await {
            if next.abandoned() {
                continue;
            }
            if !gathering.admits(&next) {
                carry = Some(next);
                break;
            }
            gathering.push(next);
        }
        let requests = gathering.batch.len();
        let expired = linger_expired("write", deadline);
        let proposer = proposer.clone();
        let proposal = async move { propose_batch(&proposer, gathering.batch).await };
        slots
            .propose(permit, requests, carry.is_some(), &tracker, proposal)
            .await;
        want = next_want(requests, expired, &rx, &carry);
    }
    refuse_unproposed(carry, &mut rx, |pending| {
        let _ = pending
            .reply
            .send(Err(ApiError::ShuttingDown { proposed: false }));
    });
}

async fn propose_batch(proposer: &Proposer, mut batch: Vec<Pending>) {
    if batch.len() == 1
        && let Some(alone) = batch.pop()
    {
        let result = proposer.propose_entry(alone.request).await;
        let _ = alone.reply.send(result);
        return;
    }
    metrics::counter!(m::WRITE_BATCHES).increment(1);
    metrics::counter!(m::BATCHED_REQUESTS).increment(batch.len() as u64);
    let (requests, replies): (Vec<Request>, Vec<_>) = batch
        .into_iter()
        .map(|pending| (pending.request, pending.reply))
        .unzip();
    let count = requests.len();
    let result = proposer
        .propose_entry(Request::new(Command::Batch(requests)))
        .await;
    let responses = match result {
        Ok(reply) => match reply.response {
            Ok(Outcome::Batch(responses)) if responses.len() == count => responses
                .into_iter()
                .map(|response| {
                    Ok(Reply {
                        revision: reply.revision,
                        response,
                    })
                })
                .collect(),
            // The whole batch refused (a bug in forming it): every request gets the refusal.
            Err(rejection) => vec![
                Ok(Reply {
                    revision: reply.revision,
                    response: Err(rejection),
                });
                count
            ],
            Ok(other) => vec![Err(ApiError::unexpected("a batch", &other)); count],
        },
        Err(error) => vec![Err(error); count],
    };
    for (reply, response) in replies.into_iter().zip(responses) {
        let _ = reply.send(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zaris_core::{DurationMs, LeaseId};

    fn pending(command: Command) -> Pending {
        let (reply, _rx) = oneshot::channel();
        Pending::new(Request::new(command), reply)
    }

    fn put(key: &str, value_bytes: usize) -> Command {
        Command::Put {
            key: key.as_bytes().to_vec(),
            value: vec![0; value_bytes],
            lease: LeaseId::NONE,
            guard: None,
            prev_kv: false,
        }
    }

    fn grant(id: u64) -> Command {
        Command::Grant {
            id: LeaseId::new(id),
            ttl_ms: DurationMs::new(5_000),
        }
    }

    fn lock(name: &str, lease: u64) -> Command {
        Command::LockAcquire {
            name: name.into(),
            lease: LeaseId::new(lease),
            wait: true,
            sent_after: None,
        }
    }

    #[test]
    fn a_batch_takes_requests_that_touch_different_things() {
        let mut gathering = Gathering::new(pending(put("a", 1)));
        for command in [put("b", 1), grant(0), grant(0), grant(7), lock("a", 1)] {
            let next = pending(command);
            assert!(gathering.admits(&next), "{:?}", next.request.command);
            gathering.push(next);
        }
        assert_eq!(gathering.batch.len(), 6);
    }

    #[test]
    fn a_second_change_to_one_key_lease_or_lock_waits_for_the_next_batch() {
        let mut gathering = Gathering::new(pending(put("a", 1)));
        gathering.push(pending(grant(7)));
        gathering.push(pending(lock("l", 1)));
        assert!(!gathering.admits(&pending(put("a", 2))));
        assert!(!gathering.admits(&pending(grant(7))));
        assert!(!gathering.admits(&pending(Command::LockRelease {
            name: "l".into(),
            lease: LeaseId::new(2),
            token: zaris_core::FencingToken::acquired_at(zaris_core::Revision::new(3)),
        })));
        // A key and a lock of the same name are different things.
        assert!(gathering.admits(&pending(put("l", 1))));
    }

    #[test]
    fn a_batch_is_bounded_in_requests_and_bytes() {
        let mut gathering = Gathering::new(pending(grant(0)));
        while gathering.batch.len() < MAX_BATCH_REQUESTS {
            let next = pending(grant(0));
            assert!(gathering.admits(&next));
            gathering.push(next);
        }
        assert!(!gathering.admits(&pending(grant(0))));

        let half = MAX_BATCH_BYTES / 2;
        let gathering = Gathering::new(pending(put("a", half)));
        assert!(!gathering.admits(&pending(put("b", half))));
        assert!(gathering.admits(&pending(put("b", half - 2 * REQUEST_OVERHEAD_BYTES - 2))));
        // A request larger than a batch still goes, alone.
        let large = Gathering::new(pending(put("c", 2 * MAX_BATCH_BYTES)));
        assert!(!large.admits(&pending(grant(0))));
    }

    #[test]
    fn a_full_batch_is_short_of_nothing() {
        let mut gathering = Gathering::new(pending(grant(0)));
        assert!(gathering.short_of(2));
        assert!(!gathering.short_of(1), "all there");
        while !gathering.full() {
            gathering.push(pending(grant(0)));
        }
        assert_eq!(gathering.batch.len(), MAX_BATCH_REQUESTS);
        assert!(
            !gathering.short_of(MAX_BATCH_REQUESTS + 10),
            "full: it waits for no more, whatever the last batches took"
        );
        let large = Gathering::new(pending(put("c", MAX_BATCH_BYTES)));
        assert!(large.full() && !large.short_of(2), "full in bytes");
    }

    #[test]
    fn a_request_whose_caller_left_is_abandoned() {
        let (reply, rx) = oneshot::channel();
        let pending = Pending::new(Request::new(grant(0)), reply);
        assert!(!pending.abandoned());
        drop(rx);
        assert!(pending.abandoned());
    }
}
