//! The Raft network: openraft's peer RPCs carried over gRPC as opaque, version-tagged payloads
//! (encoded by zaris-core's codec), on each member's peer address. Messages are bounded
//! ([`MAX_RAFT_MESSAGE_BYTES`]); a batch of entries over [`MAX_APPEND_BYTES`] goes in parts.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, stream_append_sequential};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, RaftNetworkV2};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::transport::{Channel, Endpoint};
use zaris_core::codec;
use zaris_proto::v1::raft_service_client::RaftServiceClient;
use zaris_proto::v1::{RaftMessage, RaftSnapshotChunk};
use zaris_raft::{Member, Snapshot, TypeConfig, Vote};

use crate::append_stream;
use crate::faults::FaultConfig;
use crate::tls::TlsSource;

/// Snapshot bytes per gRPC message: peers installing one, and clients taking a backup.
pub(crate) const SNAPSHOT_CHUNK_BYTES: usize = 1024 * 1024;
/// Most bytes of entries one AppendEntries carries. openraft batches by entry count
/// (`max_payload_entries`), not size: a batch over this is sent as its longest prefix that fits
/// (at least one entry), answered to openraft as a partial success, and the rest follows.
pub const MAX_APPEND_BYTES: usize = 8 * 1024 * 1024;
/// Largest Raft message a node accepts from a peer, or from its answer, in bytes: an
/// AppendEntries of [`MAX_APPEND_BYTES`] with room to spare. A single entry is at most a client
/// request (`MAX_CLIENT_MESSAGE_BYTES`, node.rs) plus its framing, so it always fits alone.
pub const MAX_RAFT_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
const _: () = assert!(MAX_APPEND_BYTES * 2 <= MAX_RAFT_MESSAGE_BYTES);

type RpcError = RPCError<TypeConfig>;

/// While a peer stays unreachable, its failures are logged at most this often.
const PEER_LOG_INTERVAL: Duration = Duration::from_secs(30);

/// Which peers are failing, so that a dead peer costs one WARN when it goes, one every
/// [`PEER_LOG_INTERVAL`] while it stays down, and one INFO when it is back, not a line per RPC
/// (heartbeats go out every 50-100 ms). Pure: time is an argument.
#[derive(Debug, Default)]
struct PeerLog {
    down: BTreeMap<u64, Down>,
}

#[derive(Debug, Clone, Copy)]
struct Down {
    since: Instant,
    logged_at: Instant,
    /// Failed RPCs since `logged_at`.
    failures: u64,
}

impl PeerLog {
    /// An RPC to `target` failed at `now`: what to WARN, if anything.
    fn failed(&mut self, target: u64, now: Instant, error: &str) -> Option<String> {
        match self.down.get_mut(&target) {
            None => {
                self.down.insert(
                    target,
                    Down {
                        since: now,
                        logged_at: now,
                        failures: 0,
                    },
                );
                Some(format!(
                    "Raft RPCs to node {target} are failing ({error}); while it stays \
                     unreachable this is repeated at most every {}s",
                    PEER_LOG_INTERVAL.as_secs()
                ))
            }
            Some(down) => {
                down.failures += 1;
                if now.duration_since(down.logged_at) < PEER_LOG_INTERVAL {
                    return None;
                }
                let message = format!(
                    "node {target} still unreachable after {}s ({} failed RPCs since the last \
                     report; last: {error})",
                    now.duration_since(down.since).as_secs(),
                    down.failures
                );
                down.logged_at = now;
                down.failures = 0;
                Some(message)
            }
        }
    }

    /// An RPC to `target` succeeded at `now`: how long it had been failing, if it had.
    fn succeeded(&mut self, target: u64, now: Instant) -> Option<Duration> {
        self.down
            .remove(&target)
            .map(|down| now.duration_since(down.since))
    }
}

/// Channels by (dialed address, certificate name), with the TLS generation each was made with.
type ChannelCache = BTreeMap<(String, String), (u64, Channel)>;

/// Makes one client per peer; channels are cached by address and connect lazily.
#[derive(Clone, Debug)]
pub struct NetworkFactory {
    cluster_id: u64,
    /// Least time an AppendEntries may take (see [`NetworkFactory::with_append_timeout_floor`]).
    append_timeout_floor: Duration,
    /// By dialed address and the name the peer's certificate must have (TLS), with the TLS
    /// generation they were made with.
    channels: Arc<Mutex<ChannelCache>>,
    peer_log: Arc<Mutex<PeerLog>>,
    /// Mutual TLS to peers: this node's peer certificate and the cluster's peer CA.
    tls: Option<Arc<TlsSource>>,
    /// Fault injection: peer links rerouted (through a proxy) by the harness.
    faults: Arc<FaultConfig>,
}

impl NetworkFactory {
    pub fn new(cluster_id: u64) -> Self {
        NetworkFactory {
            cluster_id,
            append_timeout_floor: Duration::ZERO,
            channels: Arc::default(),
            peer_log: Arc::default(),
            tls: None,
            faults: Arc::default(),
        }
    }

    /// Dials peers over mutual TLS with `tls`'s current files (reloaded files apply to the next
    /// connection made).
    pub fn with_tls(mut self, tls: Option<Arc<TlsSource>>) -> Self {
        self.tls = tls;
        self
    }

    /// openraft gives every AppendEntries (heartbeats included) the heartbeat interval as its
    /// deadline. On a link whose round trip (plus the follower's fsync) takes longer, every
    /// append would time out and the cluster could commit nothing, expiries included, for as
    /// long as the link is slow. Waiting up to `floor` (the election timeout) keeps replication
    /// going; a peer that answers nothing for that long is given up on as before.
    pub fn with_append_timeout_floor(mut self, floor: Duration) -> Self {
        self.append_timeout_floor = floor;
        self
    }

    /// Fault injection: Raft RPCs may go to another address than a node's membership address
    /// (a proxy on the link; see [`FaultConfig::peer_addr`]).
    pub fn with_faults(mut self, faults: Arc<FaultConfig>) -> Self {
        self.faults = faults;
        self
    }

    /// The address to dial for node `target`: its member record's peer address.
    fn peer_addr<'a>(&'a self, target: u64, node: &'a Member) -> &'a str {
        self.faults.peer_addr(target, &node.peer_addr)
    }

    /// A client of member `target`'s peer service (the JSON API forwards calls to the leader
    /// with it), over the same connections and TLS as Raft's own calls.
    pub fn api_client(&self, target: u64, node: &Member) -> Option<RaftServiceClient<Channel>> {
        let host = crate::address::host(&node.peer_addr).to_owned();
        let channel = self.channel(&(self.peer_addr(target, node).to_owned(), host))?;
        Some(
            RaftServiceClient::new(channel)
                .max_decoding_message_size(MAX_RAFT_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_RAFT_MESSAGE_BYTES),
        )
    }

    /// A channel to `dial.0`, whose certificate must name `dial.1` (with TLS).
    fn channel(&self, dial: &(String, String)) -> Option<Channel> {
        let generation = self.tls.as_ref().map_or(0, |tls| tls.generation());
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((made_with, channel)) = channels.get(dial)
            && *made_with == generation
        {
            return Some(channel.clone());
        }
        let (addr, host) = dial;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
            .ok()?
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.client_config(host)).ok()?;
        }
        let channel = endpoint.connect_lazy();
        channels.insert(dial.clone(), (generation, channel.clone()));
        Some(channel)
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &Member) -> PeerClient {
        let host = crate::address::host(&node.peer_addr).to_owned();
        PeerClient {
            target,
            dial: (self.peer_addr(target, node).to_owned(), host),
            factory: self.clone(),
        }
    }
}

/// Talks to one peer.
#[derive(Clone, Debug)]
pub struct PeerClient {
    target: u64,
    /// The address dialed, and the name the peer's certificate must carry.
    dial: (String, String),
    /// The cluster id, timeouts and peer log; and the channels, taken at every call so that
    /// reloaded TLS files apply to this peer's next connection (openraft keeps a client per
    /// peer for as long as it likes).
    factory: NetworkFactory,
}

fn unreachable(message: String) -> RpcError {
    RPCError::Unreachable(Unreachable::from_string(message))
}

fn network(message: String) -> RpcError {
    RPCError::Network(NetworkError::from_string(message))
}

/// Connection-level failures make openraft back off harder than transient ones. The message
/// ends with the innermost cause ("dns error: failed to lookup address information", "Connection
/// refused"), which says what an operator has to fix.
fn status_error(target: u64, status: tonic::Status) -> RpcError {
    let mut message = format!("node {target}: {}: {}", status.code(), status.message());
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(&status);
    let mut innermost = None;
    while let Some(err) = cause {
        innermost = Some(err);
        cause = err.source();
    }
    if let Some(err) = innermost {
        let text = err.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
    }
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::Unknown => unreachable(message),
        _ => network(message),
    }
}

#[derive(Clone, Copy, Debug)]
enum Rpc {
    AppendEntries,
    Vote,
    PreVote,
    TransferLeader,
}

impl PeerClient {
    /// Fails as unreachable when the peer's address does not parse.
    fn client(&self) -> Result<RaftServiceClient<Channel>, RpcError> {
        let channel = self.factory.channel(&self.dial).ok_or_else(|| {
            unreachable(format!(
                "node {}: invalid address {}",
                self.target, self.dial.0
            ))
        })?;
        Ok(RaftServiceClient::new(channel)
            .max_decoding_message_size(MAX_RAFT_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_RAFT_MESSAGE_BYTES))
    }

    /// Logs the outcome of an RPC to this peer (rate-limited, see [`PeerLog`]).
    fn note<T>(&self, result: &Result<T, RpcError>) {
        let now = Instant::now();
        let mut log = self
            .factory
            .peer_log
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(_) => {
                if let Some(down) = log.succeeded(self.target, now) {
                    tracing::info!(
                        peer = self.target,
                        down_ms = u64::try_from(down.as_millis()).unwrap_or(u64::MAX),
                        "Raft RPCs to node {} succeed again",
                        self.target
                    );
                }
            }
            Err(error) => {
                if let Some(message) = log.failed(self.target, now, &error.to_string()) {
                    tracing::warn!(peer = self.target, "{message}");
                }
            }
        }
    }

    async fn unary<Req: Serialize, Resp: DeserializeOwned + Serialize>(
        &mut self,
        rpc: Rpc,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, RpcError> {
        let payload = codec::encode(request).map_err(|e| network(e.to_string()))?;
        self.unary_payload(rpc, payload, timeout).await
    }

    /// [`PeerClient::unary`] of a request already encoded.
    async fn unary_payload<Resp: DeserializeOwned + Serialize>(
        &mut self,
        rpc: Rpc,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Resp, RpcError> {
        let result = self.unary_once(rpc, payload, timeout).await;
        self.note(&result);
        result
    }

    async fn unary_once<Resp: DeserializeOwned + Serialize>(
        &mut self,
        rpc: Rpc,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Resp, RpcError> {
        let mut client = self.client()?;
        let message = RaftMessage {
            cluster_id: self.factory.cluster_id,
            payload,
        };
        let call = async {
            match rpc {
                Rpc::AppendEntries => client.append_entries(message).await,
                Rpc::Vote => client.vote(message).await,
                Rpc::PreVote => client.pre_vote(message).await,
                Rpc::TransferLeader => client.transfer_leader(message).await,
            }
        };
        let response = tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| network(format!("node {}: {rpc:?} timed out", self.target)))?
            .map_err(|status| status_error(self.target, status))?;
        codec::decode(&response.into_inner().payload, MAX_RAFT_MESSAGE_BYTES)
            .map_err(|e| network(format!("node {}: bad {rpc:?} response: {e}", self.target)))
    }
}

impl PeerClient {
    /// A replication session on one `RaftService.AppendStream` ([`crate::append_stream`]).
    async fn append_stream<S>(
        &mut self,
        mut input: S,
        option: RPCOption,
    ) -> Result<BoxStream<'static, Result<StreamAppendResult<TypeConfig>, RpcError>>, RpcError>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        // The first request before the call: openraft may be backing off before it makes one,
        // and the call's deadline is for the network, not for that.
        let Some(first) = input.next().await else {
            return Ok(Box::pin(futures::stream::empty()));
        };
        let timeout = option.hard_ttl().max(self.factory.append_timeout_floor);
        let mut client = self.client()?;
        let in_flight = Arc::new(append_stream::InFlight::default());
        let requests = append_stream::requests(
            first,
            input,
            self.factory.cluster_id,
            in_flight.clone(),
            append_stream::COMMIT_HOLD,
            |request| {
                let (payload, cut_after) = encode_append(request).map_err(|e| e.to_string())?;
                Ok(append_stream::Encoded {
                    payload,
                    cut: cut_after.is_some(),
                })
            },
        );
        let opened = tokio::time::timeout(timeout, client.append_stream(requests))
            .await
            .map_err(|_| network(format!("node {}: AppendStream timed out", self.target)))
            .and_then(|opened| opened.map_err(|status| status_error(self.target, status)));
        self.note(&opened);
        let answers = opened?.into_inner();
        let peer = self.clone();
        let results = append_stream::results(answers, in_flight, timeout, MAX_RAFT_MESSAGE_BYTES)
            .map(move |result| {
                let result = result.map_err(|error| match error {
                    append_stream::AnswerError::TimedOut => {
                        network(format!("node {}: AppendStream timed out", peer.target))
                    }
                    append_stream::AnswerError::Status(status) => status_error(peer.target, status),
                    append_stream::AnswerError::Malformed(e) => network(format!(
                        "node {}: bad AppendStream answer: {e}",
                        peer.target
                    )),
                });
                if result.is_err() {
                    peer.note(&result);
                }
                result
            });
        Ok(Box::pin(results))
    }
}

/// Encodes an AppendEntries, cut to its longest prefix of entries within [`MAX_APPEND_BYTES`]
/// (at least one entry) when it is larger; then also returns the log id of the last entry sent.
/// Sizes are measured only for a request that is too large as a whole, so the usual small batch
/// is encoded once.
fn encode_append(
    mut rpc: AppendEntriesRequest<TypeConfig>,
) -> Result<(Vec<u8>, Option<zaris_raft::LogId>), RpcError> {
    let payload = codec::encode(&rpc).map_err(|e| network(e.to_string()))?;
    if payload.len() <= MAX_APPEND_BYTES || rpc.entries.len() <= 1 {
        return Ok((payload, None));
    }
    let mut total = 0usize;
    let mut keep = 0usize;
    for entry in &rpc.entries {
        total =
            total.saturating_add(codec::encoded_size(entry).map_err(|e| network(e.to_string()))?);
        if keep > 0 && total > MAX_APPEND_BYTES {
            break;
        }
        keep += 1;
    }
    rpc.entries.truncate(keep);
    let last_sent = rpc.entries.last().map(|entry| entry.log_id);
    let payload = codec::encode(&rpc).map_err(|e| network(e.to_string()))?;
    Ok((payload, last_sent))
}

impl RaftNetworkV2<TypeConfig> for PeerClient {
    type SnapshotData = Vec<u8>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RpcError> {
        let timeout = option.hard_ttl().max(self.factory.append_timeout_floor);
        let (payload, cut_after) = encode_append(rpc)?;
        let response = self
            .unary_payload(Rpc::AppendEntries, payload, timeout)
            .await?;
        Ok(match (response, cut_after) {
            // Only the prefix was sent: openraft sends the rest next.
            (AppendEntriesResponse::Success, Some(last_sent)) => {
                AppendEntriesResponse::PartialSuccess(Some(last_sent))
            }
            (response, _) => response,
        })
    }

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<
        's,
        Result<BoxStream<'s, Result<StreamAppendResult<TypeConfig>, RpcError>>, RpcError>,
    >
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        // A heartbeat is a single request: a unary call is as cheap, and keeps its semantics.
        if input.size_hint().1 == Some(1) {
            return stream_append_sequential(self, input, option);
        }
        Box::pin(async move {
            let results: BoxStream<'static, _> = self.append_stream(input, option).await?;
            Ok(results)
        })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RpcError> {
        self.unary(Rpc::Vote, &rpc, option.hard_ttl()).await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RpcError> {
        self.unary(Rpc::PreVote, &rpc, option.hard_ttl()).await
    }

    async fn transfer_leader(
        &mut self,
        rpc: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RpcError> {
        self.unary(Rpc::TransferLeader, &rpc, option.hard_ttl())
            .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let mut client = self.client()?;
        let head =
            codec::encode(&(vote, snapshot.meta.clone())).map_err(|e| network(e.to_string()))?;
        let cluster_id = self.factory.cluster_id;
        let mut chunks = vec![RaftSnapshotChunk {
            cluster_id,
            meta: head,
            data: Vec::new(),
        }];
        chunks.extend(snapshot.snapshot.chunks(SNAPSHOT_CHUNK_BYTES).map(|data| {
            RaftSnapshotChunk {
                cluster_id,
                meta: Vec::new(),
                data: data.to_vec(),
            }
        }));
        let target = self.target;
        // openraft does not time this call out: we do.
        let send = tokio::time::timeout(
            option.hard_ttl(),
            client.install_snapshot(futures::stream::iter(chunks)),
        );
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            result = send => {
                let response = result
                    .map_err(|_| network(format!("node {target}: snapshot timed out")))?
                    .map_err(|status| status_error(target, status))?;
                codec::decode(&response.into_inner().payload, MAX_RAFT_MESSAGE_BYTES)
                    .map_err(|e| network(format!("node {target}: bad snapshot response: {e}")).into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_dialed_at_their_peer_address() {
        let factory = NetworkFactory::new(1);
        assert_eq!(
            factory.peer_addr(2, &Member::new("127.0.0.1:7002", "127.0.0.1:7102")),
            "127.0.0.1:7102"
        );
    }

    #[cfg(feature = "fault-injection")]
    #[test]
    fn peer_overrides_reroute_only_the_nodes_they_name() {
        let faults = FaultConfig {
            peer_overrides: BTreeMap::from([
                (2, "127.0.0.1:9102".to_string()),
                (3, "127.0.0.1:9103".to_string()),
            ]),
            ..FaultConfig::default()
        };
        let factory = NetworkFactory::new(1).with_faults(Arc::new(faults));
        let node = |addr: &str| Member::new("127.0.0.1:1", addr);
        assert_eq!(
            factory.peer_addr(2, &node("127.0.0.1:7002")),
            "127.0.0.1:9102"
        );
        assert_eq!(
            factory.peer_addr(3, &node("127.0.0.1:7003")),
            "127.0.0.1:9103"
        );
        // Not named: its membership address.
        assert_eq!(
            factory.peer_addr(4, &node("127.0.0.1:7004")),
            "127.0.0.1:7004"
        );
        // Clones (openraft keeps one factory per replication stream) share the map.
        let clone = factory.clone();
        assert_eq!(
            clone.peer_addr(2, &node("127.0.0.1:7002")),
            "127.0.0.1:9102"
        );
    }

    /// A dead peer is one WARN, then one per interval with a count, then one INFO when back.
    #[test]
    fn a_dead_peer_is_logged_when_it_goes_now_and_then_and_when_it_is_back() {
        let mut log = PeerLog::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let first = log.failed(2, at(0), "connection refused");
        assert!(first.is_some_and(|m| m.contains("node 2") && m.contains("connection refused")));
        // Heartbeats every 50 ms for 29.95 s: silent.
        for ms in (50..30_000).step_by(50) {
            assert_eq!(
                log.failed(2, at(ms), "connection refused"),
                None,
                "at {ms} ms"
            );
        }
        // Another peer failing meanwhile is its own story.
        assert!(log.failed(3, at(1_000), "timeout").is_some());
        let again = log.failed(2, at(30_000), "connection refused");
        assert!(
            again.is_some_and(|m| m.contains("after 30s") && m.contains("600 failed RPCs")),
            "the periodic report counts what it did not log"
        );
        assert_eq!(log.failed(2, at(30_050), "connection refused"), None);
        assert_eq!(log.succeeded(2, at(31_000)), Some(Duration::from_secs(31)));
        assert_eq!(log.succeeded(2, at(31_050)), None, "logged once when back");
        assert!(
            log.failed(2, at(40_000), "reset").is_some(),
            "down again: WARN again"
        );
    }
}
