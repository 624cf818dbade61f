//! The openraft type configuration: what a log entry carries and what applying one returns.

use std::fmt;

use serde::{Deserialize, Serialize};
use zaris_core::{Request, Response, Revision};

/// The application payload of a Raft entry: one Zaris request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal(pub Request);

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Entries are logged by openraft; keep values out of logs.
        f.write_str(self.0.command.name())
    }
}

/// What the proposer of an entry gets back once it is committed and applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The entry's log index: the revision of every change it made.
    pub revision: Revision,
    pub response: Response,
}

openraft::declare_raft_types!(
    /// Zaris's openraft configuration: u64 node ids, nodes addressed by their gRPC address.
    pub TypeConfig:
        D = Proposal,
        R = Reply,
        NodeId = u64,
        Node = openraft::BasicNode,
);

use openraft::type_config::alias as a;

pub type LogId = a::LogIdOf<TypeConfig>;
pub type Vote = a::VoteOf<TypeConfig>;
pub type Entry = a::EntryOf<TypeConfig>;
pub type StoredMembership = a::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = a::SnapshotMetaOf<TypeConfig>;
pub type Snapshot = a::SnapshotOf<TypeConfig, Vec<u8>>;
pub type Raft = openraft::Raft<TypeConfig, crate::StateMachineStore>;
