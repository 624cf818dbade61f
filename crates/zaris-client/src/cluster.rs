//! Cluster calls: status and membership.

use zaris_proto::v1::cluster_client::ClusterClient;
use zaris_proto::v1::{
    MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    StatusRequest, StatusResponse,
};

use crate::client::{CallSpec, Client};
use crate::error::Error;

impl Client {
    /// The answering member's own view of the cluster (role, Raft leader, term, indexes,
    /// members). Any member answers, leader or not; sent to the cached leader if there is one,
    /// else to the first reachable endpoint.
    pub async fn status(&self) -> Result<StatusResponse, Error> {
        self.call(
            CallSpec::idempotent("Status"),
            StatusRequest {},
            |channel, req| async move { ClusterClient::new(channel).status(req).await },
        )
        .await
    }

    /// The committed membership, from the Raft leader.
    pub async fn member_list(&self) -> Result<MemberListResponse, Error> {
        self.call(
            CallSpec::idempotent("MemberList"),
            MemberListRequest {},
            |channel, req| async move { ClusterClient::new(channel).member_list(req).await },
        )
        .await
    }

    /// Adds node `id` at `address` ("host:port") as a learner; with `promote`, also waits for it
    /// to catch up and promotes it to voter. Not resent after an indeterminate failure (a resend
    /// would answer MEMBER_EXISTS): check with [`Client::member_list`].
    pub async fn member_add(
        &self,
        id: u64,
        address: impl Into<String>,
        promote: bool,
    ) -> Result<MemberAddResponse, Error> {
        let request = MemberAddRequest {
            id,
            address: address.into(),
            promote,
        };
        self.call(
            CallSpec::non_idempotent("MemberAdd"),
            request,
            |channel, req| async move { ClusterClient::new(channel).member_add(req).await },
        )
        .await
    }

    /// Promotes learner `id` to voter. Idempotent (promoting a voter changes nothing).
    pub async fn member_promote(&self, id: u64) -> Result<MemberPromoteResponse, Error> {
        self.call(
            CallSpec::idempotent("MemberPromote"),
            MemberPromoteRequest { id },
            |channel, req| async move { ClusterClient::new(channel).member_promote(req).await },
        )
        .await
    }

    /// Removes member `id`. Not resent after an indeterminate failure (a resend would answer
    /// MEMBER_NOT_FOUND): check with [`Client::member_list`].
    pub async fn member_remove(&self, id: u64) -> Result<MemberRemoveResponse, Error> {
        self.call(
            CallSpec::non_idempotent("MemberRemove"),
            MemberRemoveRequest { id },
            |channel, req| async move { ClusterClient::new(channel).member_remove(req).await },
        )
        .await
    }
}
