//! The floor's leader behind gRPC (`--floor-node leader-api`): the bare pipeline served through
//! tonic, on a single-threaded async runtime that also runs the replication, so a write wakes no
//! other thread of the leader.
//!
//! `Write` replicates inside its handler (`floorapi1`: one client, one round per write). `Commit`
//! and `Renew` group-commit: a committer task takes every entry that arrived while its previous
//! round ran, frames each by its length, and replicates them as one entry, as concurrent requests
//! share a Raft entry in Zaris (`floorgrant16`, `floorlock4`, `floorka64`). Replication blocks
//! the runtime's one thread; requests that arrive meanwhile wait in the socket and join the next
//! round, so a round's group is whatever came while the previous one ran (Zaris's one batch in
//! flight, without its linger).

use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use tokio::sync::{Notify, oneshot};
use tonic::{Request, Response, Status, Streaming};

use super::{ENTRY_BYTES, FRAME_HEADER_BYTES, MAX_FRAME_BYTES, Pipeline, push_frame};
use crate::load::Sample;
use crate::proto::floor as proto;
use proto::floor_client::FloorClient;
use proto::floor_server::{Floor, FloorServer};

/// Entries one `Renew` stream may have waiting for their round: more than any workload keeps in
/// flight (64), few enough that a client cannot queue without bound.
const STREAM_IN_FLIGHT: usize = 1_024;

/// Serves `Floor` until killed (its followers then see their streams end), on one thread, or on
/// a multi-threaded runtime of `workers` (a measurement of what its hand-offs add: a
/// group-committed round then runs on a thread of its own, a unary `Write` blocks its worker,
/// and the other workers go on reading requests meanwhile).
pub fn serve(listener: TcpListener, pipeline: Pipeline, workers: usize) -> anyhow::Result<()> {
    let runtime = if workers > 1 {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let pipeline: SharedPipeline = Arc::new(Mutex::new(Some(pipeline)));
        let group = Arc::new(GroupCommit::default());
        tokio::spawn(commit_loop(group.clone(), pipeline.clone()));
        tonic::transport::Server::builder()
            .add_service(FloorServer::new(FloorApi { pipeline, group }))
            // Nagle's algorithm would hold back an answer written in more than one piece (a
            // delayed acknowledgement, 40 ms, later), as a Zaris node's listener does not.
            .serve_with_incoming(
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            )
            .await?;
        Ok(())
    })
}

/// The pipeline, shared by the inline writes and the committer. A write that fails halfway (a
/// follower gone) may have reached some followers and not others, so the pipeline is dropped
/// then (`None`) and every later write refused.
type SharedPipeline = Arc<Mutex<Option<Pipeline>>>;

/// Replicates `entry`; the number of entries the pipeline has appended, this one included.
/// Blocks the calling thread for the round: the point, on this one-thread runtime.
fn replicate(pipeline: &SharedPipeline, entry: &[u8]) -> Result<u64, Status> {
    let mut slot = pipeline
        .lock()
        .map_err(|_| Status::internal("an earlier write panicked"))?;
    let replicating = slot
        .as_mut()
        .ok_or_else(|| Status::failed_precondition("an earlier write failed halfway"))?;
    match replicating.replicate(entry) {
        Ok(()) => Ok(replicating.appended),
        Err(e) => {
            *slot = None;
            Err(Status::unavailable(format!("replication failed: {e:#}")))
        }
    }
}

/// A client's entry: 1 to [`ENTRY_BYTES`] bytes.
fn checked(entry: proto::Entry) -> Result<Vec<u8>, Status> {
    if entry.data.is_empty() || entry.data.len() > ENTRY_BYTES {
        return Err(Status::invalid_argument(format!(
            "a floor entry is 1 to {ENTRY_BYTES} bytes, not {}",
            entry.data.len()
        )));
    }
    Ok(entry.data)
}

/// Entries waiting for the committer's next round.
#[derive(Default)]
struct GroupCommit {
    waiting: Mutex<Vec<Waiting>>,
    arrived: Notify,
}

struct Waiting {
    entry: Vec<u8>,
    answer: oneshot::Sender<Result<u64, Status>>,
}

impl GroupCommit {
    /// Queues `entry` for the next round; answered with its number among the committed entries.
    fn enqueue(&self, entry: Vec<u8>) -> oneshot::Receiver<Result<u64, Status>> {
        let (answer, answered) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Waiting { entry, answer });
        self.arrived.notify_one();
        answered
    }

    /// Waits for `entry`'s round.
    async fn commit(&self, entry: Vec<u8>) -> Result<proto::Ack, Status> {
        answered(self.enqueue(entry)).await
    }
}

async fn answered(answer: oneshot::Receiver<Result<u64, Status>>) -> Result<proto::Ack, Status> {
    let id = answer
        .await
        .map_err(|_| Status::internal("the floor's committer stopped"))??;
    Ok(proto::Ack { id })
}

/// One round for everything that waits: the entries framed one after the other, replicated as
/// one, each answered with the round's outcome.
async fn commit_loop(group: Arc<GroupCommit>, pipeline: SharedPipeline) {
    let mut committed = 0u64;
    loop {
        let round = next_round(&group.waiting);
        if round.is_empty() {
            group.arrived.notified().await;
            continue;
        }
        let mut entry = Vec::with_capacity(
            round
                .iter()
                .map(|w| FRAME_HEADER_BYTES + w.entry.len())
                .sum(),
        );
        for waiting in &round {
            push_frame(&mut entry, &waiting.entry);
        }
        let replicated = round_off_the_workers(&pipeline, entry).await;
        for waiting in round {
            let outcome = replicated.clone().map(|_| {
                committed += 1;
                committed
            });
            // A caller that went away needs no answer.
            let _ = waiting.answer.send(outcome);
        }
    }
}

/// Replicates a group-committed round. On the one-thread runtime it blocks that thread (nothing
/// else could run meanwhile anyway); on a multi-threaded one it runs on a thread of its own while
/// the committer waits, as a Zaris node's log appends run on its flusher thread, so the workers
/// go on reading requests and no worker's queue has to move.
async fn round_off_the_workers(pipeline: &SharedPipeline, entry: Vec<u8>) -> Result<u64, Status> {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => {
            let pipeline = pipeline.clone();
            tokio::task::spawn_blocking(move || replicate(&pipeline, &entry))
                .await
                .unwrap_or_else(|_| Err(Status::internal("a round panicked")))
        }
        _ => replicate(pipeline, &entry),
    }
}

/// Runs `round` on this thread. On a multi-threaded runtime the worker's other tasks move to the
/// other workers first; on the one-thread runtime nothing else could run meanwhile anyway.
fn blocking<T>(round: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(round),
        _ => round(),
    }
}

/// The oldest waiting entries that fit one framed round (a follower refuses a larger frame); the
/// rest wait for the next.
fn next_round(waiting: &Mutex<Vec<Waiting>>) -> Vec<Waiting> {
    let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
    let mut bytes = 0;
    let fit = waiting
        .iter()
        .take_while(|w| {
            bytes += FRAME_HEADER_BYTES + w.entry.len();
            bytes <= MAX_FRAME_BYTES
        })
        .count();
    waiting.drain(..fit).collect()
}

/// The entries of one group-committed round, as [`commit_loop`] framed them.
#[cfg(test)]
fn ungrouped(mut round: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut entries = Vec::new();
    let mut frame = Vec::new();
    while !round.is_empty() {
        super::read_frame(&mut round, &mut frame)?;
        entries.push(frame[FRAME_HEADER_BYTES..].to_vec());
    }
    Ok(entries)
}

struct FloorApi {
    pipeline: SharedPipeline,
    group: Arc<GroupCommit>,
}

type Answers = Pin<Box<dyn Stream<Item = Result<proto::Ack, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Floor for FloorApi {
    async fn write(&self, request: Request<proto::Entry>) -> Result<Response<proto::Ack>, Status> {
        let entry = request.into_inner().data;
        if entry.len() != ENTRY_BYTES {
            return Err(Status::invalid_argument(format!(
                "a floor entry is {ENTRY_BYTES} bytes, not {}",
                entry.len()
            )));
        }
        let id = blocking(|| replicate(&self.pipeline, &entry))?;
        Ok(Response::new(proto::Ack { id }))
    }

    async fn commit(&self, request: Request<proto::Entry>) -> Result<Response<proto::Ack>, Status> {
        let entry = checked(request.into_inner())?;
        Ok(Response::new(self.group.commit(entry).await?))
    }

    async fn read(&self, request: Request<proto::Entry>) -> Result<Response<proto::Ack>, Status> {
        checked(request.into_inner())?;
        Ok(Response::new(proto::Ack { id: 0 }))
    }

    type RenewStream = Answers;

    async fn renew(
        &self,
        request: Request<Streaming<proto::Entry>>,
    ) -> Result<Response<Answers>, Status> {
        let group = self.group.clone();
        // Each entry is queued as it arrives (`buffered` reads ahead), so a stream's entries in
        // flight join rounds together; answers leave in the order the entries came.
        let answers = request
            .into_inner()
            .map(move |entry| {
                let queued = entry.and_then(checked).map(|entry| group.enqueue(entry));
                async move { answered(queued?).await }
            })
            .buffered(STREAM_IN_FLIGHT);
        Ok(Response::new(Box::pin(answers)))
    }
}

/// The closed loop of one gRPC client (`floorapi1`) on `channel` until `until`.
pub async fn write_api_until(
    channel: tonic::transport::Channel,
    until: Instant,
) -> anyhow::Result<Sample> {
    let mut client = FloorClient::new(channel);
    let mut sample = Sample::default();
    let started = Instant::now();
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let mut data = vec![b'x'; ENTRY_BYTES];
        data[..8].copy_from_slice(&n.to_be_bytes());
        let sent = Instant::now();
        client.write(proto::Entry { data }).await?;
        sample.latencies.push(sent.elapsed());
        sample.ok += 1;
    }
    sample.elapsed = started.elapsed();
    Ok(sample)
}

/// A channel to the floor's gRPC leader.
pub async fn channel(leader: SocketAddr) -> anyhow::Result<tonic::transport::Channel> {
    Ok(
        tonic::transport::Channel::from_shared(format!("http://{leader}"))?
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use std::net::TcpStream;
    use std::path::Path;

    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::super::RingLog;
    use super::super::testing::*;
    use super::*;

    /// Each answered write is in all three logs, in order, and an entry of the wrong size is
    /// refused with a clear status, not written.
    #[test]
    fn every_write_answered_through_grpc_is_in_all_three_logs() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        // The followers serve until the leader ends: with the test process.
        let (followers, _) = start_followers(dir.path())?;
        let leader = start_leader(followers, dir.path(), 1)?;
        current_thread()?.block_on(async {
            let mut client = FloorClient::new(channel(leader).await?);
            let refused = client
                .write(proto::Entry { data: vec![1; 7] })
                .await
                .expect_err("a 7-byte entry");
            assert_eq!(refused.code(), tonic::Code::InvalidArgument);
            assert!(refused.message().contains("not 7"), "{}", refused.message());
            for n in 1..=50u64 {
                let ack = client.write(proto::Entry { data: numbered(n) }).await?;
                assert_eq!(ack.into_inner().id, n);
            }
            anyhow::Ok(())
        })?;
        assert_entries_in_every_log(dir.path(), 50)
    }

    /// 16 clients committing at once, and a stream with 8 entries in flight: every entry
    /// answered is in all three logs (the same rounds in each), the stream's answers come in
    /// the order sent, entries share rounds, and bad entries are refused before any round.
    #[test]
    fn every_committed_entry_is_in_all_three_logs() -> anyhow::Result<()> {
        committed_entries_are_in_all_three_logs(1)
    }

    /// The same with the leader on a runtime of two workers, its rounds blocking one of them.
    #[test]
    fn every_committed_entry_is_in_all_three_logs_with_two_workers() -> anyhow::Result<()> {
        committed_entries_are_in_all_three_logs(2)
    }

    fn committed_entries_are_in_all_three_logs(workers: usize) -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (followers, _) = start_followers(dir.path())?;
        let leader = start_leader(followers, dir.path(), workers)?;
        let answered = current_thread()?.block_on(async {
            let channel = channel(leader).await?;
            let mut client = FloorClient::new(channel.clone());
            for bad in [vec![], vec![1; ENTRY_BYTES + 1]] {
                let refused = client
                    .commit(proto::Entry { data: bad })
                    .await
                    .expect_err("a bad entry");
                assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
            }
            let mut answered = Vec::new();
            let writers: Vec<_> = (0..16u64)
                .map(|writer| {
                    let mut client = FloorClient::new(channel.clone());
                    tokio::spawn(async move {
                        let mut ids = Vec::new();
                        for n in 0..20u64 {
                            let entry = numbered(writer * 1_000 + n);
                            let ack = client
                                .commit(proto::Entry {
                                    data: entry.clone(),
                                })
                                .await?;
                            ids.push((ack.into_inner().id, entry));
                        }
                        anyhow::Ok(ids)
                    })
                })
                .collect();

            let (send, entries) = mpsc::channel(8);
            let mut answers = client
                .renew(ReceiverStream::new(entries))
                .await?
                .into_inner();
            let mut sent = std::collections::VecDeque::new();
            for n in 0..200u64 {
                let entry = numbered(100_000 + n);
                send.send(proto::Entry {
                    data: entry.clone(),
                })
                .await?;
                sent.push_back(entry);
                if sent.len() == 8 || n == 199 {
                    while let Some(entry) = sent.pop_front() {
                        let ack = answers.message().await?.expect("an answer per entry");
                        answered.push((ack.id, entry));
                    }
                }
            }
            drop(send);
            assert!(
                answers.message().await?.is_none(),
                "the stream ends with its entries"
            );
            for writer in writers {
                answered.extend(writer.await??);
            }
            anyhow::Ok(answered)
        })?;
        assert_eq!(answered.len(), 16 * 20 + 200);

        let logs = settled_logs(dir.path())?;
        assert!(
            logs.iter().all(|log| *log == logs[0]),
            "the same rounds in every log"
        );
        let logged: Vec<Vec<u8>> = logs[0]
            .iter()
            .map(|round| ungrouped(round))
            .collect::<anyhow::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(
            logged.len(),
            answered.len(),
            "nothing logged that was not answered"
        );
        assert!(
            logs[0].len() < logged.len(),
            "entries shared rounds: {}",
            logs[0].len()
        );
        for (id, entry) in &answered {
            let at = usize::try_from(*id)? - 1;
            assert_eq!(logged.get(at), Some(entry), "entry {id}");
        }
        Ok(())
    }

    /// Followers that went away at once: the write that finds out fails with a clear status,
    /// and every later one is refused rather than run on a pipeline it left half-written, in
    /// the group-committed rounds too.
    #[test]
    fn a_write_that_fails_halfway_is_refused_and_so_is_every_later_one() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let leader = start_leader(vanished_followers()?, dir.path(), 1)?;
        current_thread()?.block_on(async {
            let mut client = FloorClient::new(channel(leader).await?);
            let entry = || proto::Entry {
                data: vec![b'x'; ENTRY_BYTES],
            };
            let failed = client.commit(entry()).await.expect_err("no follower left");
            assert_eq!(failed.code(), tonic::Code::Unavailable, "{failed:?}");
            assert!(
                failed.message().contains("replication failed"),
                "{failed:?}"
            );
            let refused = client
                .write(entry())
                .await
                .expect_err("the pipeline is gone");
            assert_eq!(
                refused.code(),
                tonic::Code::FailedPrecondition,
                "{refused:?}"
            );
            let (send, entries) = mpsc::channel(1);
            send.send(entry()).await?;
            let mut answers = client
                .renew(ReceiverStream::new(entries))
                .await?
                .into_inner();
            let refused = answers.message().await.expect_err("the pipeline is gone");
            assert_eq!(
                refused.code(),
                tonic::Code::FailedPrecondition,
                "{refused:?}"
            );
            anyhow::Ok(())
        })
    }

    /// However many entries wait, a round is never larger than a follower accepts: the rest
    /// wait, in order, for the next.
    #[test]
    fn a_round_fits_one_frame() {
        let per_round = MAX_FRAME_BYTES / (FRAME_HEADER_BYTES + ENTRY_BYTES);
        let waiting = Mutex::new(Vec::new());
        let mut answers = Vec::new();
        for n in 0..per_round as u64 + 10 {
            let (answer, answered) = oneshot::channel();
            answers.push(answered);
            waiting.lock().expect("lock").push(Waiting {
                entry: numbered(n),
                answer,
            });
        }
        let first = next_round(&waiting);
        assert_eq!(first.len(), per_round);
        assert_eq!(first[0].entry, numbered(0));
        let second = next_round(&waiting);
        assert_eq!(second.len(), 10);
        assert_eq!(second[0].entry, numbered(per_round as u64));
        assert!(next_round(&waiting).is_empty());
    }

    #[test]
    fn a_round_is_its_entries_framed() -> anyhow::Result<()> {
        let mut round = Vec::new();
        for entry in [&b"a"[..], b"bcd"] {
            push_frame(&mut round, entry);
        }
        assert_eq!(ungrouped(&round)?, vec![b"a".to_vec(), b"bcd".to_vec()]);
        assert!(ungrouped(&round[..round.len() - 1]).is_err());
        Ok(())
    }

    /// A gRPC floor leader for `followers`, its log in `dir`; it serves until the test process
    /// ends, as the real node does until it is killed.
    fn start_leader(
        followers: Vec<TcpStream>,
        dir: &Path,
        workers: usize,
    ) -> anyhow::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let leader = listener.local_addr()?;
        let log = RingLog::create(&dir.join("leader"))?;
        std::thread::spawn(move || serve(listener, Pipeline::new(followers, log), workers));
        Ok(leader)
    }
}
