//! Cluster status and membership changes (add as learner, catch up, promote; remove).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::{Request, Response, Status};
use zaris_proto::v1::cluster_server::Cluster;
use zaris_proto::v1::{
    Member, MemberAddRequest, MemberAddResponse, MemberKind, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    NodeRole, SnapshotChunk, SnapshotInfo, SnapshotRequest, StatusRequest, StatusResponse,
};
use zaris_raft::TypeConfig;

use super::NodeContext;
use crate::auth::caller_of;
use crate::error::ApiError;
use crate::handover::HandoverError;
use crate::network::SNAPSHOT_CHUNK_BYTES;

/// How long MemberAdd (with promotion) and MemberPromote wait for a learner to catch up before
/// refusing to make it a voter (LEARNER_NOT_CAUGHT_UP). Shorter than a client's request timeout,
/// so the caller hears the answer; promote again once the learner has caught up.
pub const LEARNER_CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The cluster service, and the snapshots it is sending (see [`MAX_CONCURRENT_SNAPSHOTS`]).
#[derive(Clone, Debug)]
pub struct ClusterService(pub NodeContext, Arc<Semaphore>);

/// Snapshots this member sends at once. Each holds a copy of the whole state and its encoding
/// until the client has read it all, so a client calling Snapshot in a loop must not be able to
/// multiply that: one at a time; another call meanwhile is refused (CAPACITY_EXCEEDED).
pub const MAX_CONCURRENT_SNAPSHOTS: u32 = 1;

impl ClusterService {
    pub fn new(context: NodeContext) -> Self {
        ClusterService(
            context,
            Arc::new(Semaphore::new(MAX_CONCURRENT_SNAPSHOTS as usize)),
        )
    }

    fn members(&self) -> Vec<Member> {
        let metrics = self.0.proposer.raft().metrics().borrow_watched().clone();
        let membership = metrics.membership_config.membership();
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let matched: BTreeMap<u64, u64> = metrics
            .replication
            .as_ref()
            .map(|r| {
                r.iter()
                    .map(|(id, log_id)| (*id, log_id.as_ref().map_or(0, |l| l.index)))
                    .collect()
            })
            .unwrap_or_default();
        membership
            .nodes()
            .map(|(id, node)| Member {
                id: *id,
                address: node.addr.clone(),
                peer_address: node.peer_addr.clone(),
                kind: if voters.contains(id) {
                    MemberKind::Voter
                } else {
                    MemberKind::Learner
                } as i32,
                matched_index: matched.get(id).copied().unwrap_or(0),
            })
            .collect()
    }

    fn header(&self) -> zaris_proto::v1::ResponseHeader {
        let applied = self.0.state.read(|d| d.state.last_applied());
        self.0.proposer.header(applied)
    }

    fn membership_error(
        &self,
        error: RaftError<TypeConfig, ClientWriteError<TypeConfig>>,
    ) -> ApiError {
        ApiError::from_membership_error(error, self.0.node_id, self.0.proposer.term())
    }

    /// Removing the Raft leader itself: hand leadership to another voter first, then send the
    /// caller there (a leader removing itself from the membership is a transition openraft does
    /// not handle gracefully). The client follows the redirect and retries at the new leader.
    async fn hand_over_leadership(&self) -> ApiError {
        let raft = self.0.proposer.raft();
        let handed_over =
            crate::handover::hand_over(raft, self.0.node_id, std::time::Duration::from_secs(5))
                .await;
        match handed_over {
            Err(HandoverError::NoOtherVoter) => {
                ApiError::MembershipRejected("cannot remove the only voter".into())
            }
            Err(e @ HandoverError::Transfer(_)) => ApiError::Internal(e.to_string()),
            Err(HandoverError::NotTakenOver(_)) => ApiError::NoLeader,
            Ok(m) => {
                let Some(leader) = m.current_leader else {
                    return ApiError::NoLeader;
                };
                let address = m
                    .membership_config
                    .membership()
                    .get_node(&leader)
                    .map(|n| n.addr.clone())
                    .unwrap_or_default();
                ApiError::NotLeader {
                    leader_id: leader,
                    leader_addr: address,
                    term: m.current_term,
                }
            }
        }
    }

    /// Waits until no membership change is in flight (the latest membership is committed), so a
    /// change starts from a settled configuration and a response means the change is done.
    async fn settle(&self) -> Result<(), ApiError> {
        self.0
            .proposer
            .raft()
            .wait(Some(std::time::Duration::from_secs(10)))
            .metrics(
                |m| m.membership_config.log_id() == m.committed_membership_config.log_id(),
                "membership settled",
            )
            .await
            .map(|_| ())
            .map_err(|_| {
                ApiError::MembershipChangeInProgress(
                    "a membership change is still in progress; retry later".into(),
                )
            })
    }

    /// Waits (up to [`LEARNER_CATCH_UP_WAIT`]) until the leader has replicated to learner `id`
    /// everything it had committed when the wait began: only such a learner may become a voter.
    /// A voter that cannot receive entries (a wrong address, a node that is down) would count
    /// toward every quorum and could leave a small cluster unable to commit, or even to remove it.
    async fn caught_up(&self, id: u64) -> Result<(), ApiError> {
        let raft = self.0.proposer.raft();
        let committed = raft
            .metrics()
            .borrow_watched()
            .local_committed
            .map_or(0, |l| l.index);
        let matched = |m: &openraft::RaftMetrics<TypeConfig>| {
            m.replication
                .as_ref()
                .and_then(|r| r.get(&id).cloned())
                .flatten()
                .map_or(0, |l| l.index)
        };
        let waited = raft
            .wait(Some(LEARNER_CATCH_UP_WAIT))
            .metrics(|m| matched(m) >= committed, "learner caught up")
            .await;
        match waited {
            Ok(_) => Ok(()),
            Err(_) => {
                let (matched, address) = {
                    let m = raft.metrics().borrow_watched().clone();
                    let address = m
                        .membership_config
                        .membership()
                        .get_node(&id)
                        .map(|n| n.addr.clone())
                        .unwrap_or_default();
                    (matched(&m), address)
                };
                Err(ApiError::LearnerNotCaughtUp {
                    id,
                    address,
                    matched,
                    committed,
                    waited_s: LEARNER_CATCH_UP_WAIT.as_secs(),
                })
            }
        }
    }

    fn validate_id(id: u64) -> Result<(), ApiError> {
        if id == 0 {
            return Err(ApiError::invalid_argument("member id must be at least 1"));
        }
        Ok(())
    }
}

/// How long a Snapshot stream waits for its reader to take the next chunk before it gives up.
pub const SNAPSHOT_SEND_STALL: std::time::Duration = std::time::Duration::from_secs(30);

type SnapshotStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<SnapshotChunk, Status>> + Send + 'static>>;

impl ClusterService {
    /// A consistent copy of the state, encoded: copied under the read lock after a linearizable
    /// barrier (so it holds every write acknowledged before the call), encoded and hashed off the
    /// async threads (a large state takes a while, and apply must not wait for it).
    ///
    /// `permit` travels with the copy: into the encoder (which runs to its end even when the
    /// call is dropped meanwhile) and back out with the bytes, so the bound on copies holds.
    async fn encode_snapshot(
        &self,
        permit: OwnedSemaphorePermit,
    ) -> Result<(SnapshotInfo, Vec<u8>, OwnedSemaphorePermit), ApiError> {
        self.0.proposer.linearizable().await?;
        let state = self.0.state.read(|d| d.state.clone());
        let encoded = tokio::task::spawn_blocking(move || {
            let _copy_held = &permit;
            let bytes = state.snapshot()?;
            let info = SnapshotInfo {
                revision: state.last_applied().get(),
                size_bytes: bytes.len() as u64,
                sha256: zaris_core::codec::bytes_digest(&bytes).0.to_vec(),
                format_version: u32::from(zaris_core::codec::FORMAT_VERSION),
                lease_count: state.lease_count() as u64,
                key_count: state.key_count() as u64,
            };
            Ok::<_, zaris_core::codec::CodecError>((info, bytes, permit))
        })
        .await;
        match encoded {
            Ok(Ok(encoded)) => Ok(encoded),
            Ok(Err(e)) => Err(ApiError::Internal(format!(
                "cannot encode the snapshot: {e}"
            ))),
            Err(e) => Err(ApiError::Internal(format!("snapshot encoder failed: {e}"))),
        }
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    type SnapshotStream = SnapshotStream;

    #[tracing::instrument(name = "snapshot", skip_all, fields(node_id = self.0.node_id))]
    async fn snapshot(
        &self,
        request: Request<SnapshotRequest>,
    ) -> Result<Response<SnapshotStream>, Status> {
        let caller = caller_of(&request);
        self.0
            .check_access(|auth| auth.check_admin(&caller, "take a snapshot of the whole state"))?;
        // Held by the copy of the state: while it is encoded, then sent (or given up on).
        let permit =
            self.1
                .clone()
                .try_acquire_owned()
                .map_err(|_| ApiError::CapacityExceeded {
                    name: "concurrent_snapshots".into(),
                    max: u64::from(MAX_CONCURRENT_SNAPSHOTS),
                    actual: u64::from(MAX_CONCURRENT_SNAPSHOTS) + 1,
                })?;
        let (info, bytes, permit) = self.encode_snapshot(permit).await?;
        tracing::info!(
            revision = info.revision,
            bytes = info.size_bytes,
            "sending a snapshot"
        );
        let first = SnapshotChunk {
            header: Some(
                self.0
                    .proposer
                    .header(zaris_core::Revision::new(info.revision)),
            ),
            info: Some(info),
            data: Vec::new(),
        };
        // A sender task copies the chunks out one at a time as the client takes them. A client
        // that stops taking them (paused, cut off) is given up on after SNAPSHOT_SEND_STALL, so
        // it cannot hold the copy, and the one permit, for good.
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        // Dropped with the stream (sent in full, or abandoned by the client).
        let (stream_alive, stream_dropped) = tokio::sync::oneshot::channel::<()>();
        let node_id = self.0.node_id;
        let shutdown = self.0.shutdown.clone();
        let send = async move {
            let _copy_held = permit;
            let chunks =
                std::iter::once(first).chain(bytes.chunks(SNAPSHOT_CHUNK_BYTES).map(|data| {
                    SnapshotChunk {
                        data: data.to_vec(),
                        ..SnapshotChunk::default()
                    }
                }));
            for chunk in chunks {
                match sender.send_timeout(Ok(chunk), SNAPSHOT_SEND_STALL).await {
                    Ok(()) => {}
                    Err(tokio::sync::mpsc::error::SendTimeoutError::Timeout(_)) => {
                        tracing::warn!(
                            node_id,
                            stall = ?SNAPSHOT_SEND_STALL,
                            "a snapshot reader stopped reading; giving up on it"
                        );
                        return;
                    }
                    Err(tokio::sync::mpsc::error::SendTimeoutError::Closed(_)) => return,
                }
            }
            // The end of the stream. The last chunks may still sit in the transport's buffers:
            // the snapshot is being sent until the stream is done with (or the reader stalls).
            drop(sender);
            let _ = tokio::time::timeout(SNAPSHOT_SEND_STALL, stream_dropped).await;
        };
        // A stopping node does not wait for a reader (its stop waits for this task).
        self.0.tasks.spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = send => {}
            }
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(receiver).map(move |chunk| {
            let _alive = &stream_alive;
            chunk
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn status(
        &self,
        _request: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let metrics = self.0.proposer.raft().metrics().borrow_watched().clone();
        let role = match metrics.state {
            ServerState::Leader => NodeRole::Leader,
            ServerState::Follower => NodeRole::Follower,
            ServerState::Candidate => NodeRole::Candidate,
            ServerState::Learner => NodeRole::Learner,
            ServerState::Shutdown => NodeRole::Shutdown,
        };
        Ok(Response::new(StatusResponse {
            header: Some(self.header()),
            member_id: self.0.node_id,
            role: role as i32,
            raft_leader_id: metrics.current_leader.unwrap_or(0),
            raft_term: metrics.current_term,
            commit_index: metrics.local_committed.map_or(0, |l| l.index),
            applied_index: metrics.last_applied.map_or(0, |l| l.index),
            members: self.members(),
            server_version: env!("CARGO_PKG_VERSION").to_string(),
        }))
    }

    async fn member_list(
        &self,
        _request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        // The leader's view, once no change is in flight: the committed membership.
        self.0.proposer.linearizable().await?;
        self.settle().await?;
        Ok(Response::new(MemberListResponse {
            header: Some(self.header()),
            members: self.members(),
        }))
    }

    async fn member_add(
        &self,
        request: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        let caller = caller_of(&request);
        self.0
            .check_access(|auth| auth.check_admin(&caller, "add members"))?;
        let request = request.into_inner();
        Self::validate_id(request.id)?;
        if request.peer_address.is_empty() {
            return Err(ApiError::invalid_argument(
                "member peer address is empty: give the address its Raft service listens on \
                 (zaris serve --peer-listen)",
            )
            .into());
        }
        // Decided by the leader alone (see member_remove); it also resolves the names it dials.
        self.0.proposer.linearizable().await?;
        for (what, address) in [
            ("member address", &request.address),
            ("member peer address", &request.peer_address),
        ] {
            if let Err(why) = crate::address::check(address) {
                return Err(ApiError::invalid_argument(format!("{what} {why}")).into());
            }
            // The leader dials the new member: a name it cannot resolve is refused now, not
            // found out by a learner that never catches up.
            if let Err(why) = crate::address::resolve(address).await {
                return Err(ApiError::invalid_argument(format!(
                    "{what}: {why} (from member {})",
                    self.0.node_id
                ))
                .into());
            }
        }
        if request.address == request.peer_address {
            return Err(ApiError::invalid_argument(format!(
                "member address and peer address are both {}: the Raft service has a port of \
                 its own",
                request.address
            ))
            .into());
        }
        let taken = |m: &Member| {
            m.id == request.id
                || [&m.address, &m.peer_address]
                    .iter()
                    .any(|a| **a == request.address || **a == request.peer_address)
        };
        if let Some(existing) = self.members().iter().find(|m| taken(m)) {
            return Err(ApiError::MemberExists {
                id: existing.id,
                address: existing.address.clone(),
            }
            .into());
        }
        self.settle().await?;
        let raft = self.0.proposer.raft();
        // A learner first: it catches up without counting toward the quorum, and can always be
        // removed again while the voters have a quorum.
        let member = zaris_raft::Member::new(&request.address, &request.peer_address);
        raft.add_learner(request.id, member, false)
            .await
            .map_err(|e| self.membership_error(e))?;
        if request.promote {
            self.settle().await?;
            self.caught_up(request.id).await?;
            raft.change_membership(
                ChangeMembers::AddVoterIds(BTreeSet::from([request.id])),
                false,
            )
            .await
            .map_err(|e| self.membership_error(e))?;
        }
        self.settle().await?;
        Ok(Response::new(MemberAddResponse {
            header: Some(self.header()),
            members: self.members(),
        }))
    }

    async fn member_promote(
        &self,
        request: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        let caller = caller_of(&request);
        self.0
            .check_access(|auth| auth.check_admin(&caller, "promote members"))?;
        let id = request.into_inner().id;
        Self::validate_id(id)?;
        // Decided by the leader alone (see member_remove).
        self.0.proposer.linearizable().await?;
        self.settle().await?;
        let is_voter = self
            .members()
            .iter()
            .any(|m| m.id == id && m.kind == MemberKind::Voter as i32);
        if !is_voter {
            self.caught_up(id).await?;
        }
        self.0
            .proposer
            .raft()
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
            .await
            .map_err(|e| self.membership_error(e))?;
        self.settle().await?;
        Ok(Response::new(MemberPromoteResponse {
            header: Some(self.header()),
            members: self.members(),
        }))
    }

    async fn member_remove(
        &self,
        request: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        let caller = caller_of(&request);
        self.0
            .check_access(|auth| auth.check_admin(&caller, "remove members"))?;
        let id = request.into_inner().id;
        Self::validate_id(id)?;
        // A follower redirects at once: its own view may never settle (a member just removed
        // keeps an uncommitted membership entry forever, as nobody replicates to it any more).
        self.0.proposer.linearizable().await?;
        let member = self
            .members()
            .into_iter()
            .find(|m| m.id == id)
            .ok_or_else(|| ApiError::MemberNotFound(format!("member {id} not found")))?;
        let raft = self.0.proposer.raft();
        if id == self.0.node_id && raft.is_leader() {
            return Err(self.hand_over_leadership().await.into());
        }
        let ids = BTreeSet::from([id]);
        let change = if member.kind == MemberKind::Voter as i32 {
            ChangeMembers::RemoveVoters(ids)
        } else {
            ChangeMembers::RemoveNodes(ids)
        };
        self.settle().await?;
        raft.change_membership(change, false)
            .await
            .map_err(|e| self.membership_error(e))?;
        self.settle().await?;
        Ok(Response::new(MemberRemoveResponse {
            header: Some(self.header()),
            members: self.members(),
        }))
    }
}
