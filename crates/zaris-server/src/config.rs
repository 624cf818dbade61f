//! A node's configuration: one plain struct, built once (from flags, env or a file, by the binary)
//! and validated before anything starts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, ensure};
use zaris_core::{LessorConfig, Limits};

/// Default upper bound of the election timeout range, in ms. A new leader extends every lease by
/// this much before it may expire any.
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 1_000;
/// Default Raft heartbeat interval, in ms.
pub const DEFAULT_HEARTBEAT_MS: u64 = 100;
/// Default client address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7001";
/// Most leases one expiry entry revokes.
pub const DEFAULT_EXPIRE_BATCH: usize = 1_000;
/// Most renew batches proposed at once (group commit pipelining).
pub const DEFAULT_RENEW_INFLIGHT: usize = 4;
/// How long a proposal may take before the client is told the outcome is unknown, in ms.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Longest a Lock call waits for a queued lock, in ms.
pub const MAX_LOCK_WAIT_MS: u64 = 10 * 60 * 1_000;
/// Most keys listed by TimeToLive.
pub const MAX_LEASE_KEYS_LISTED: usize = 1_000;
/// Most leases listed per page.
pub const MAX_LEASE_LIST: usize = 10_000;
/// Most keys one Range returns (a page; `more` says when there are more).
pub const MAX_RANGE_KEYS: u64 = 10_000;
/// Entries between snapshots.
pub const DEFAULT_SNAPSHOT_ENTRIES: u64 = 50_000;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id, ≥ 1, never reused for another node.
    pub node_id: u64,
    /// Where this node keeps its log, vote and snapshots.
    pub data_dir: PathBuf,
    /// Address to bind (client API and Raft peers share it); port 0 picks a free port.
    pub listen: SocketAddr,
    /// Address other nodes and clients use to reach this node; defaults to the bound address.
    pub advertise: Option<String>,
    /// `id → address` of the first members. Empty: a single-node cluster of this node.
    pub initial_cluster: BTreeMap<u64, String>,
    /// Start uninitialized and wait to be added by `member add` (never bootstrap).
    pub join: bool,
    /// Peers must agree on it; it keeps nodes of different clusters from talking.
    pub cluster_name: String,
    /// Upper bound of the election timeout range; the lower bound is half of it.
    pub election_timeout_ms: u64,
    pub heartbeat_ms: u64,
    pub lessor: LessorConfig,
    pub expire_batch: usize,
    pub renew_inflight: usize,
    pub request_timeout_ms: u64,
    /// Where to serve /metrics, /health and /ready over HTTP.
    pub http_listen: Option<SocketAddr>,
    /// Must be the same on every node of a cluster (they bound what apply accepts).
    pub limits: Limits,
    pub snapshot_entries: u64,
}

impl NodeConfig {
    /// A single-node configuration with defaults, storing data in `data_dir`.
    pub fn new(node_id: u64, data_dir: impl Into<PathBuf>) -> Self {
        NodeConfig {
            node_id,
            data_dir: data_dir.into(),
            listen: DEFAULT_LISTEN
                .parse()
                .unwrap_or_else(|_| ([127, 0, 0, 1], 7001).into()),
            advertise: None,
            initial_cluster: BTreeMap::new(),
            join: false,
            cluster_name: "zaris".into(),
            election_timeout_ms: DEFAULT_ELECTION_TIMEOUT_MS,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            lessor: LessorConfig::default(),
            expire_batch: DEFAULT_EXPIRE_BATCH,
            renew_inflight: DEFAULT_RENEW_INFLIGHT,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            http_listen: None,
            limits: Limits::default(),
            snapshot_entries: DEFAULT_SNAPSHOT_ENTRIES,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.node_id >= 1, "node id must be at least 1");
        ensure!(
            self.heartbeat_ms >= 1 && self.heartbeat_ms * 2 < self.election_timeout_ms / 2,
            "heartbeat ({} ms) must be well below half the election timeout ({} ms)",
            self.heartbeat_ms,
            self.election_timeout_ms
        );
        // A lease must outlive a leader change, or a renewal acknowledged by the old leader could
        // be lost to an expiry by the new one.
        ensure!(
            self.limits.min_ttl_ms > self.election_timeout_ms,
            "minimum TTL ({} ms) must exceed the election timeout ({} ms)",
            self.limits.min_ttl_ms,
            self.election_timeout_ms
        );
        if let Err(why) = self.limits.check() {
            bail!("limits: {why}");
        }
        if !self.initial_cluster.is_empty() && !self.initial_cluster.contains_key(&self.node_id) {
            bail!(
                "node {} is not in the initial cluster {:?}",
                self.node_id,
                self.initial_cluster
            );
        }
        if self.join && !self.initial_cluster.is_empty() {
            bail!("--join and --initial-cluster exclude each other");
        }
        ensure!(self.expire_batch >= 1, "expire batch must be at least 1");
        ensure!(
            self.renew_inflight >= 1,
            "renew pipelining must be at least 1"
        );
        ensure!(
            self.lessor.revoke_rate_per_s >= 1,
            "revoke rate must be at least 1/s"
        );
        Ok(())
    }

    /// The cluster id peers compare: a stable hash (FNV-1a) of the cluster name.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_name
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            })
    }
}
