//! The receiving side of the Raft network: decodes a peer's request, hands it to openraft.
//!
//! With peer TLS, the handshake admits only certificates the peer CA signed; each request is
//! then checked against the member it speaks for (the node id in its vote): that member's
//! certificate must name the host of its peer address, as a dialing node checks of the member it
//! dials. A node whose membership does not name the sender (a new node that has not learnt the
//! membership yet) cannot check and accepts; a node whose membership lacks the sender refuses it.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use openraft::async_runtime::WatchReceiver;
use openraft::raft::{AppendEntriesResponse, StreamAppendError};
use openraft::vote::RaftLeaderId;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use zaris_core::Limits;
use zaris_core::codec;
use zaris_proto::v1::raft_service_server::RaftService;
use zaris_proto::v1::{RaftMessage, RaftSnapshotChunk};
use zaris_raft::{Raft, Snapshot, SnapshotMeta, StateHandle, Vote};

use crate::dead_leader::DeadLeaderCheck;
use crate::error::ApiError;
use crate::network::MAX_RAFT_MESSAGE_BYTES;
use crate::prompt_election::LeaderContact;

/// Counts a refused peer message, and logs it: a peer of another cluster, a node of another
/// version, or something that is not a peer at all.
fn refused(reason: &'static str) {
    metrics::counter!(crate::metrics::PEER_MESSAGES_REFUSED, "reason" => reason).increment(1);
    tracing::debug!(reason, "refused a Raft message from a peer");
}

#[derive(Clone, Debug)]
pub struct RaftPeerService {
    raft: Raft,
    cluster_id: u64,
    /// Whether the peer listener speaks TLS: then every request's certificate must belong to
    /// the member the request speaks for.
    check_identity: bool,
    /// For the cluster's limits, which bound a snapshot.
    state: StateHandle,
    /// This node's configured limits: the cluster's, unless it has not applied them yet.
    configured: Limits,
    /// When a leader was last heard from, for a prompt election when it falls silent.
    contact: Arc<LeaderContact>,
    /// Whether a silent leader is dead, asked before this node answers a (pre-)vote.
    dead_leader: Arc<DeadLeaderCheck>,
    /// Answers JSON API calls other members forward to this one (as the leader).
    api: crate::api::Api,
    /// Cancelled when this node stops: its `AppendStream`s end then. A gRPC server's graceful
    /// shutdown waits for open streams, and a replication stream stays open for as long as the
    /// leader leads; meanwhile this node's Raft, hearing no one, would call an election.
    stopping: CancellationToken,
}

impl RaftPeerService {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        raft: Raft,
        cluster_id: u64,
        check_identity: bool,
        state: StateHandle,
        configured: Limits,
        contact: Arc<LeaderContact>,
        dead_leader: Arc<DeadLeaderCheck>,
        api: crate::api::Api,
        stopping: CancellationToken,
    ) -> Self {
        RaftPeerService {
            raft,
            cluster_id,
            check_identity,
            state,
            configured,
            contact,
            dead_leader,
            api,
            stopping,
        }
    }

    /// The largest snapshot this node accepts: what the cluster's limits allow a state to
    /// encode to. A node that has not applied the cluster's limits yet (one that is joining) goes
    /// by its configured ones, where they allow more, so a member started with the cluster's
    /// settings can always catch up.
    fn max_snapshot_bytes(&self) -> usize {
        let applied = self.state.read(|d| d.state.limits().max_snapshot_bytes());
        let bound = applied.max(self.configured.max_snapshot_bytes());
        usize::try_from(bound).map_or(codec::MAX_SNAPSHOT_BYTES, |b| {
            b.min(codec::MAX_SNAPSHOT_BYTES)
        })
    }

    /// Refuses a request that speaks for member `sender` over a connection whose certificate
    /// does not name that member's peer host (and cuts that connection off). A sender this node
    /// does not know as a member is let through with `from_leader` (entries and snapshots: a
    /// member added after what this node has applied may lead, and this node learns of it only
    /// from those; its certificate is the peer CA's, and speaking as an unknown node grants
    /// nothing a member's own id does not), and refused, without a cut, for votes.
    fn check_sender<T>(
        &self,
        request: &Request<T>,
        sender: u64,
        from_leader: bool,
    ) -> Result<(), Status> {
        if !self.check_identity {
            return Ok(());
        }
        let (known, peer_addr) = {
            // Cloned out at once: the metrics guard must not be held (openraft's footgun).
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow_watched();
            let membership = metrics.membership_config.membership();
            let known = membership.nodes().next().is_some();
            (
                known,
                membership.get_node(&sender).map(|m| m.peer_addr.clone()),
            )
        };
        let Some(peer_addr) = peer_addr else {
            if !known || from_leader {
                return Ok(());
            }
            refused("identity");
            return Err(ApiError::PermissionDenied(format!(
                "node {sender} is not a member of this cluster (as far as this node has applied)"
            ))
            .into());
        };
        let host = crate::address::host(&peer_addr).to_owned();
        let certs = request.peer_certs();
        let names_host = certs
            .as_deref()
            .and_then(|chain| chain.first())
            .is_some_and(|cert| certificate_names(cert, &host));
        if names_host {
            return Ok(());
        }
        refused("identity");
        Err(cut_off(ApiError::PermissionDenied(format!(
            "the peer's certificate does not name {host:?}, the peer host of member {sender} it \
             speaks for"
        ))))
    }

    /// Before answering `candidate`'s (pre-)vote: if this node's leader is silent and its peer
    /// address refuses connections, this node drops its lease on it and may grant. Checked by
    /// this node itself, so a candidate's word alone unseats nobody.
    async fn release_if_leader_dead(&self, candidate: u64) {
        let silence = self.dead_leader.voter_silence();
        self.dead_leader
            .release_if_dead(silence, Some(candidate))
            .await;
    }

    fn check_cluster(&self, cluster_id: u64) -> Result<(), Status> {
        if cluster_id == self.cluster_id {
            return Ok(());
        }
        refused("cluster");
        Err(cut_off(ApiError::ClusterMismatch {
            peer: cluster_id,
            local: self.cluster_id,
        }))
    }

    fn decode<T: DeserializeOwned + serde::Serialize>(
        &self,
        message: RaftMessage,
    ) -> Result<T, Status> {
        self.check_cluster(message.cluster_id)?;
        codec::decode(&message.payload, MAX_RAFT_MESSAGE_BYTES).map_err(|e| {
            refused("malformed");
            cut_off(ApiError::invalid_argument(format!("bad Raft message: {e}")))
        })
    }

    fn reply<T: Serialize>(&self, value: &T) -> Result<Response<RaftMessage>, ApiError> {
        let payload = codec::encode(value).map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(Response::new(RaftMessage {
            cluster_id: self.cluster_id,
            payload,
        }))
    }
}

/// The answers of an `AppendStream`.
type AppendAnswers = Pin<Box<dyn Stream<Item = Result<RaftMessage, Status>> + Send + 'static>>;

/// Where the requests of an `AppendStream` after its first stop: a refusal, if one ended them.
type StreamRefusal = Arc<std::sync::Mutex<Option<Status>>>;

impl RaftPeerService {
    /// The requests of an `AppendStream` after its first, decoded and checked like the first
    /// (the sender re-checked only when it changes). A request that is refused ends them and
    /// leaves its refusal in `refusal`, which the answers end with once the requests before it are
    /// answered. An inbound error (the peer went away) just ends them.
    fn later_requests(
        &self,
        messages: Streaming<RaftMessage>,
        sent_with: Request<()>,
        checked_sender: u64,
        refusal: StreamRefusal,
    ) -> impl Stream<Item = AppendRequest> + Send + 'static {
        let state = (self.clone(), messages, sent_with, checked_sender, refusal);
        futures::stream::unfold(Some(state), |state| async move {
            let (service, mut messages, sent_with, mut checked, refusal) = state?;
            let message = messages.message().await.ok()??;
            let checked_request = service
                .decode::<AppendRequest>(message)
                .and_then(|request| {
                    let sender = *request.vote.leader_id().node_id();
                    if sender != checked {
                        service.check_sender(&sent_with, sender, true)?;
                        checked = sender;
                    }
                    Ok(request)
                });
            match checked_request {
                Ok(request) => Some((
                    request,
                    Some((service, messages, sent_with, checked, refusal)),
                )),
                Err(status) => {
                    *refusal.lock().unwrap_or_else(|p| p.into_inner()) = Some(status);
                    None
                }
            }
        })
    }
}

type AppendRequest = openraft::raft::AppendEntriesRequest<zaris_raft::TypeConfig>;

#[tonic::async_trait]
impl RaftService for RaftPeerService {
    type AppendStreamStream = AppendAnswers;

    async fn append_stream(
        &self,
        request: Request<Streaming<RaftMessage>>,
    ) -> Result<Response<AppendAnswers>, Status> {
        let (sent_with, mut messages) = split(request);
        // The first request is checked before the stream is answered, so that a refusal that
        // cuts the connection off is a trailers-only answer, which `PeerGuard` sees. The leader
        // sends it at once (it opens a stream only with a request in hand).
        let head = tokio::select! {
            head = messages.message() => head?,
            () = self.stopping.cancelled() => {
                return Err(Status::unavailable("this node is stopping"));
            }
        };
        let head =
            head.ok_or_else(|| ApiError::invalid_argument("an AppendStream without a request"))?;
        let first: AppendRequest = self.decode(head)?;
        let sender = *first.vote.leader_id().node_id();
        self.check_sender(&sent_with, sender, true)?;

        let refusal = StreamRefusal::default();
        let requests = futures::stream::once(std::future::ready(first)).chain(self.later_requests(
            messages,
            sent_with,
            sender,
            refusal.clone(),
        ));
        let (contact, cluster_id) = (self.contact.clone(), self.cluster_id);
        let answers = self.raft.stream_append(requests).map(move |answer| {
            let result = answer.map_err(ApiError::raft_stopped)?;
            // As for AppendEntries: only a leader of a term this node has not left behind
            // counts as heard from.
            if !matches!(result, Err(StreamAppendError::HigherVote(_))) {
                contact.heard();
            }
            let payload = codec::encode(&result).map_err(|e| ApiError::Internal(e.to_string()))?;
            Ok(RaftMessage {
                cluster_id,
                payload,
            })
        });
        let refused = futures::stream::once(async move {
            refusal.lock().unwrap_or_else(|p| p.into_inner()).take()
        })
        .filter_map(|refusal| std::future::ready(refusal.map(Err)));
        let answers = answers
            .chain(refused)
            .take_until(self.stopping.clone().cancelled_owned());
        Ok(Response::new(Box::pin(answers)))
    }

    async fn append_entries(
        &self,
        request: Request<RaftMessage>,
    ) -> Result<Response<RaftMessage>, Status> {
        let (sent_with, message) = split(request);
        let rpc: openraft::raft::AppendEntriesRequest<zaris_raft::TypeConfig> =
            self.decode(message)?;
        self.check_sender(&sent_with, *rpc.vote.leader_id().node_id(), true)?;
        let response = self
            .raft
            .append_entries(rpc)
            .await
            .map_err(ApiError::raft_stopped)?;
        // Only a leader of a term this node has not left behind counts as heard from.
        if !matches!(response, AppendEntriesResponse::HigherVote(_)) {
            self.contact.heard();
        }
        Ok(self.reply(&response)?)
    }

    async fn vote(&self, request: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
        let (sent_with, message) = split(request);
        let rpc: openraft::raft::VoteRequest<zaris_raft::TypeConfig> = self.decode(message)?;
        let candidate = *rpc.vote.leader_id().node_id();
        self.check_sender(&sent_with, candidate, false)?;
        self.release_if_leader_dead(candidate).await;
        let response = self.raft.vote(rpc).await.map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }

    async fn pre_vote(
        &self,
        request: Request<RaftMessage>,
    ) -> Result<Response<RaftMessage>, Status> {
        let (sent_with, message) = split(request);
        let rpc: openraft::raft::VoteRequest<zaris_raft::TypeConfig> = self.decode(message)?;
        let candidate = *rpc.vote.leader_id().node_id();
        self.check_sender(&sent_with, candidate, false)?;
        self.release_if_leader_dead(candidate).await;
        let response = self
            .raft
            .pre_vote(rpc)
            .await
            .map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }

    async fn transfer_leader(
        &self,
        request: Request<RaftMessage>,
    ) -> Result<Response<RaftMessage>, Status> {
        let (sent_with, message) = split(request);
        let rpc: openraft::raft::TransferLeaderRequest<zaris_raft::TypeConfig> =
            self.decode(message)?;
        self.check_sender(&sent_with, *rpc.from_leader().leader_id().node_id(), false)?;
        let response = self
            .raft
            .handle_transfer_leader(rpc)
            .await
            .map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }

    async fn api(&self, request: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
        let (sent_with, message) = split(request);
        let call: crate::api::ApiCall = self.decode(message)?;
        self.check_sender(&sent_with, call.from, false)?;
        let reply = self.api.answer(call, true).await;
        Ok(self.reply(&reply)?)
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<RaftSnapshotChunk>>,
    ) -> Result<Response<RaftMessage>, Status> {
        let (sent_with, mut chunks) = split(request);
        let head = chunks
            .message()
            .await?
            .ok_or_else(|| ApiError::invalid_argument("empty snapshot stream"))?;
        self.check_cluster(head.cluster_id)?;
        let (vote, meta): (Vote, SnapshotMeta) = codec::decode(&head.meta, MAX_RAFT_MESSAGE_BYTES)
            .map_err(|e| {
                refused("malformed");
                cut_off(ApiError::invalid_argument(format!(
                    "bad snapshot header: {e}"
                )))
            })?;
        self.check_sender(&sent_with, *vote.leader_id().node_id(), true)?;
        let max_bytes = self.max_snapshot_bytes();
        let mut data = head.data;
        loop {
            if data.len() > max_bytes {
                refused("too_large");
                return Err(ApiError::limit_exceeded(
                    "max_snapshot_bytes",
                    max_bytes as u64,
                    data.len() as u64,
                )
                .into());
            }
            let Some(chunk) = chunks.message().await? else {
                break;
            };
            data.extend_from_slice(&chunk.data);
        }
        let snapshot = Snapshot {
            meta,
            snapshot: data,
        };
        let response = self
            .raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }
}

/// A refusal that cuts the connection off (`cutoff.rs`): only a caller that is not a member of
/// this cluster and version, or lies about which member it is, earns one.
fn cut_off(error: ApiError) -> Status {
    let mut status = Status::from(error);
    status.metadata_mut().insert(
        crate::cutoff::CUT_OFF_METADATA,
        tonic::metadata::MetadataValue::from_static("1"),
    );
    status
}

/// The request's metadata and connection (to check the sender) apart from its message.
fn split<T>(request: Request<T>) -> (Request<()>, T) {
    let (metadata, extensions, message) = request.into_parts();
    (Request::from_parts(metadata, extensions, ()), message)
}

/// Whether `cert` is valid for `host` (a DNS name or an IP address), by the rules a TLS client
/// checks a server's name with.
fn certificate_names(cert: &CertificateDer<'_>, host: &str) -> bool {
    let Ok(name) = ServerName::try_from(host) else {
        return false;
    };
    webpki::EndEntityCert::try_from(cert)
        .is_ok_and(|cert| cert.verify_is_valid_for_subject_name(&name).is_ok())
}
