//! Cluster calls: status, the Raft leader, membership.

use zaris_proto::v1::cluster_client::ClusterClient;
use zaris_proto::v1::{
    self as pb, MemberAddRequest, MemberListRequest, MemberPromoteRequest, MemberRemoveRequest,
    StatusRequest,
};
use zaris_types::Revision;

use crate::client::{CallSpec, Client, header_revision};
use crate::error::Error;

/// A member's Raft role, as it sees itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The Raft leader: accepts writes and linearizable reads, expires leases.
    Leader,
    /// A voter following a leader (or waiting for one).
    Follower,
    /// A voter standing for election.
    Candidate,
    /// A non-voting member replicating the log.
    Learner,
    /// The member is shutting down.
    ShuttingDown,
    /// A role this client does not know (a newer server).
    Unknown,
}

impl Role {
    fn from_wire(role: i32) -> Role {
        match pb::NodeRole::try_from(role) {
            Ok(pb::NodeRole::Leader) => Role::Leader,
            Ok(pb::NodeRole::Follower) => Role::Follower,
            Ok(pb::NodeRole::Candidate) => Role::Candidate,
            Ok(pb::NodeRole::Learner) => Role::Learner,
            Ok(pb::NodeRole::Shutdown) => Role::ShuttingDown,
            Ok(pb::NodeRole::Unspecified) | Err(_) => Role::Unknown,
        }
    }

    /// The lower-case name the CLI prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
            Role::Learner => "learner",
            Role::ShuttingDown => "shutdown",
            Role::Unknown => "unknown",
        }
    }
}

/// Whether a member votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberKind {
    /// Votes in elections and counts towards the commit quorum.
    Voter,
    /// Replicates the log without voting.
    Learner,
    /// A kind this client does not know (a newer server).
    Unknown,
}

impl MemberKind {
    /// The lower-case name the CLI prints.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::Voter => "voter",
            MemberKind::Learner => "learner",
            MemberKind::Unknown => "unknown",
        }
    }
}

/// One member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Node id (non-zero).
    pub id: u64,
    /// Address ("host:port") of its client API, as the operator gave it.
    pub address: String,
    /// Address ("host:port") of its Raft peer service.
    pub peer_address: String,
    /// Voter or learner.
    pub kind: MemberKind,
    /// Highest log index known to be replicated to it. Known only to the Raft leader: `None` in
    /// an answer from another member.
    pub matched_index: Option<u64>,
}

impl Member {
    fn from_wire(member: pb::Member, from_leader: bool) -> Member {
        Member {
            id: member.id,
            address: member.address,
            peer_address: member.peer_address,
            kind: match pb::MemberKind::try_from(member.kind) {
                Ok(pb::MemberKind::Voter) => MemberKind::Voter,
                Ok(pb::MemberKind::Learner) => MemberKind::Learner,
                Ok(pb::MemberKind::Unspecified) | Err(_) => MemberKind::Unknown,
            },
            matched_index: from_leader.then_some(member.matched_index),
        }
    }
}

/// One member's view of the cluster (see [`Client::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The answering member.
    pub member_id: u64,
    /// Its Raft role.
    pub role: Role,
    /// The Raft leader it knows of, if any.
    pub raft_leader_id: Option<u64>,
    /// The Raft term it is in.
    pub raft_term: u64,
    /// Highest log index it knows to be committed.
    pub commit_index: u64,
    /// Highest log index it has applied.
    pub applied_index: u64,
    /// The revision it has applied.
    pub revision: Revision,
    /// The members of the latest membership in its log (possibly not yet committed),
    /// ascending by id.
    pub members: Vec<Member>,
    /// Its software version.
    pub server_version: String,
}

impl NodeStatus {
    /// The Raft leader as this member knows it (id and address), if it knows one.
    pub fn raft_leader(&self) -> Option<&Member> {
        let id = self.raft_leader_id?;
        self.members.iter().find(|member| member.id == id)
    }
}

/// The Raft leader, as it answered itself (see [`Client::leader`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Its node id.
    pub id: u64,
    /// The address ("host:port") it serves at.
    pub address: String,
    /// The term it leads in.
    pub raft_term: u64,
}

impl Client {
    /// The answering member's own view of the cluster (role, Raft leader, term, indexes,
    /// members). Any member answers, leader or not; sent to the cached leader if there is one,
    /// else to the first reachable endpoint.
    pub async fn status(&self) -> Result<NodeStatus, Error> {
        let response = self
            .call(
                CallSpec::idempotent("Status"),
                StatusRequest {},
                |channel, req| async move { ClusterClient::new(channel).status(req).await },
            )
            .await?;
        let role = Role::from_wire(response.role);
        Ok(NodeStatus {
            member_id: response.member_id,
            role,
            raft_leader_id: (response.raft_leader_id != 0).then_some(response.raft_leader_id),
            raft_term: response.raft_term,
            commit_index: response.commit_index,
            applied_index: response.applied_index,
            revision: header_revision(response.header.as_ref()),
            members: response
                .members
                .into_iter()
                .map(|m| Member::from_wire(m, role == Role::Leader))
                .collect(),
            server_version: response.server_version,
        })
    }

    /// Who leads: asks the cluster (following redirects, retrying while an election runs) and
    /// answers with what the Raft leader says of itself.
    pub async fn leader(&self) -> Result<Leader, Error> {
        let response = self.member_list_response().await?;
        let header = response.header.unwrap_or_default();
        let address = response
            .members
            .iter()
            .find(|member| member.id == header.member_id)
            .map(|member| member.address.clone())
            .unwrap_or_default();
        Ok(Leader {
            id: header.member_id,
            address,
            raft_term: header.raft_term,
        })
    }

    /// The committed membership, from the Raft leader (with each member's `matched_index`).
    pub async fn member_list(&self) -> Result<Vec<Member>, Error> {
        let response = self.member_list_response().await?;
        Ok(members(response.members))
    }

    async fn member_list_response(&self) -> Result<pb::MemberListResponse, Error> {
        self.call(
            CallSpec::idempotent("MemberList"),
            MemberListRequest {},
            |channel, req| async move { ClusterClient::new(channel).member_list(req).await },
        )
        .await
    }

    /// Adds node `id`, serving clients at `address` and peers at `peer_address` (both
    /// "host:port"), as a learner; with `promote`, also waits for it to catch up and promotes it
    /// to voter. Answers with the membership after the change. Not
    /// resent after an indeterminate failure (a resend would answer MEMBER_EXISTS): check with
    /// [`Client::member_list`].
    pub async fn member_add(
        &self,
        id: u64,
        address: impl Into<String>,
        peer_address: impl Into<String>,
        promote: bool,
    ) -> Result<Vec<Member>, Error> {
        let request = MemberAddRequest {
            id,
            address: address.into(),
            peer_address: peer_address.into(),
            promote,
        };
        let response = self
            .call(
                CallSpec::non_idempotent("MemberAdd"),
                request,
                |channel, req| async move { ClusterClient::new(channel).member_add(req).await },
            )
            .await?;
        Ok(members(response.members))
    }

    /// Promotes learner `id` to voter. Idempotent (promoting a voter changes nothing).
    pub async fn member_promote(&self, id: u64) -> Result<Vec<Member>, Error> {
        let response = self
            .call(
                CallSpec::idempotent("MemberPromote"),
                MemberPromoteRequest { id },
                |channel, req| async move { ClusterClient::new(channel).member_promote(req).await },
            )
            .await?;
        Ok(members(response.members))
    }

    /// Removes member `id`. Not resent after an indeterminate failure (a resend would answer
    /// MEMBER_NOT_FOUND): check with [`Client::member_list`].
    pub async fn member_remove(&self, id: u64) -> Result<Vec<Member>, Error> {
        let response = self
            .call(
                CallSpec::non_idempotent("MemberRemove"),
                MemberRemoveRequest { id },
                |channel, req| async move { ClusterClient::new(channel).member_remove(req).await },
            )
            .await?;
        Ok(members(response.members))
    }
}

/// Membership answers all come from the Raft leader.
fn members(members: Vec<pb::Member>) -> Vec<Member> {
    members
        .into_iter()
        .map(|m| Member::from_wire(m, true))
        .collect()
}
