//! The receiving side of the Raft network: decodes a peer's request, hands it to openraft.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::{Request, Response, Status, Streaming};
use zaris_core::codec;
use zaris_proto::v1::raft_service_server::RaftService;
use zaris_proto::v1::{RaftMessage, RaftSnapshotChunk};
use zaris_raft::{Raft, Snapshot, SnapshotMeta, Vote};

use crate::error::ApiError;
use crate::network::MAX_RAFT_MESSAGE_BYTES;

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
}

impl RaftPeerService {
    pub fn new(raft: Raft, cluster_id: u64) -> Self {
        RaftPeerService { raft, cluster_id }
    }

    fn check_cluster(&self, cluster_id: u64) -> Result<(), ApiError> {
        if cluster_id == self.cluster_id {
            return Ok(());
        }
        refused("cluster");
        Err(ApiError::ClusterMismatch {
            peer: cluster_id,
            local: self.cluster_id,
        })
    }

    fn decode<T: DeserializeOwned + serde::Serialize>(
        &self,
        message: RaftMessage,
    ) -> Result<T, ApiError> {
        self.check_cluster(message.cluster_id)?;
        codec::decode(&message.payload, MAX_RAFT_MESSAGE_BYTES).map_err(|e| {
            refused("malformed");
            ApiError::invalid_argument(format!("bad Raft message: {e}"))
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

#[tonic::async_trait]
impl RaftService for RaftPeerService {
    async fn append_entries(
        &self,
        request: Request<RaftMessage>,
    ) -> Result<Response<RaftMessage>, Status> {
        let rpc = self.decode(request.into_inner())?;
        let response = self
            .raft
            .append_entries(rpc)
            .await
            .map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }

    async fn vote(&self, request: Request<RaftMessage>) -> Result<Response<RaftMessage>, Status> {
        let rpc = self.decode(request.into_inner())?;
        let response = self.raft.vote(rpc).await.map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }

    async fn pre_vote(
        &self,
        request: Request<RaftMessage>,
    ) -> Result<Response<RaftMessage>, Status> {
        let rpc = self.decode(request.into_inner())?;
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
        let rpc = self.decode(request.into_inner())?;
        let response = self
            .raft
            .handle_transfer_leader(rpc)
            .await
            .map_err(ApiError::raft_stopped)?;
        Ok(self.reply(&response)?)
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<RaftSnapshotChunk>>,
    ) -> Result<Response<RaftMessage>, Status> {
        let mut chunks = request.into_inner();
        let head = chunks
            .message()
            .await?
            .ok_or_else(|| ApiError::invalid_argument("empty snapshot stream"))?;
        self.check_cluster(head.cluster_id)?;
        let (vote, meta): (Vote, SnapshotMeta) = codec::decode(&head.meta, MAX_RAFT_MESSAGE_BYTES)
            .map_err(|e| {
                refused("malformed");
                ApiError::invalid_argument(format!("bad snapshot header: {e}"))
            })?;
        let mut data = head.data;
        while let Some(chunk) = chunks.message().await? {
            if data.len() + chunk.data.len() > codec::MAX_SNAPSHOT_BYTES {
                refused("too_large");
                return Err(ApiError::limit_exceeded(
                    "max_snapshot_bytes",
                    codec::MAX_SNAPSHOT_BYTES as u64,
                    (data.len() + chunk.data.len()) as u64,
                )
                .into());
            }
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
