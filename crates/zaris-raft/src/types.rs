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

/// How a member of the cluster is reached: clients at `addr`, peers (Raft) at `peer_addr`. Both
/// are `host:port` as the operator wrote them (a name is resolved at each connect). The Raft
/// service is served on the peer address only, so it can sit on another network and carry its
/// own TLS settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Client API address: what leader redirects and member lists name.
    pub addr: String,
    /// Raft peer address.
    pub peer_addr: String,
}

impl Member {
    pub fn new(addr: impl Into<String>, peer_addr: impl Into<String>) -> Self {
        Member {
            addr: addr.into(),
            peer_addr: peer_addr.into(),
        }
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (peers: {})", self.addr, self.peer_addr)
    }
}

openraft::declare_raft_types!(
    /// Zaris's openraft configuration: u64 node ids, members reached at a client and a peer
    /// address.
    pub TypeConfig:
        D = Proposal,
        R = Reply,
        NodeId = u64,
        Node = Member,
);

use openraft::type_config::alias as a;

pub type LogId = a::LogIdOf<TypeConfig>;
pub type Vote = a::VoteOf<TypeConfig>;
pub type Entry = a::EntryOf<TypeConfig>;
pub type StoredMembership = a::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = a::SnapshotMetaOf<TypeConfig>;
pub type Snapshot = a::SnapshotOf<TypeConfig, Vec<u8>>;
pub type Raft = openraft::Raft<TypeConfig, crate::StateMachineStore>;
