//! A node's configuration: one plain struct, built once (from flags, env or a file, by the binary)
//! and validated before anything starts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, bail, ensure};
use zaris_core::{DurationMs, LessorConfig, Limits};
use zaris_raft::Member;

use crate::tls::TlsFiles;

/// Default upper bound of the election timeout range, in ms. A new leader extends every lease by
/// this much before it may expire any.
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 1_000;
/// Default Raft heartbeat interval, in ms.
pub const DEFAULT_HEARTBEAT_MS: u64 = 100;
/// Default client address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7001";
/// Default peer (Raft) port, on the client listener's IP unless `peer_listen` says otherwise.
pub const DEFAULT_PEER_PORT: u16 = 7101;
/// Most leases one expiry entry revokes.
pub const DEFAULT_EXPIRE_BATCH: usize = 1_000;
/// Most renew batches proposed at once (group commit pipelining). One: renewals are many, small
/// and independent, so the entries they share matter more than the round they wait for. With
/// four slots, 64 streams with one renewal each put 9 renewals in an entry; with one, each
/// renewal cost a third less CPU and the 99th-percentile wait fell from 12–13 to 7–8 ms
/// (`zaris-bench --compare etcd`, README "Measure it").
pub const DEFAULT_RENEW_INFLIGHT: usize = 1;
/// Most batches of client writes proposed at once (group commit pipelining, `batch.rs`). One,
/// as for renewals, with its linger (`group_commit.rs`): against four, in two alternating pairs
/// of `zaris-bench --compare etcd` runs, grants with 16 clients took 90 µs of CPU each instead
/// of about 200, four lock clients 520 to 620 µs per cycle instead of about 900, and a lone
/// client's put as much as before.
pub const DEFAULT_WRITE_INFLIGHT: usize = 1;
/// Most batches of either kind a node may be configured to have in flight.
pub const MAX_INFLIGHT: usize = 64;
/// How long a proposal may take before the client is told the outcome is unknown, in ms.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Longest a Lock call waits for a queued lock, in ms.
pub const MAX_LOCK_WAIT_MS: u64 = 10 * 60 * 1_000;
/// Most keys listed by TimeToLive.
pub const MAX_LEASE_KEYS_LISTED: usize = 1_000;
/// Most leases listed per page.
pub const MAX_LEASE_LIST: usize = 10_000;
/// Most locks in one LockList page.
pub const MAX_LOCK_LIST: usize = 1_000;
/// Most waiters listed per lock in a LockList page (`waiter_count` has them all).
pub const MAX_LOCK_WAITERS_LISTED: usize = 100;
/// Most keys one Range returns (a page; `more` says when there are more).
pub const MAX_RANGE_KEYS: u64 = 10_000;
/// Entries between snapshots.
pub const DEFAULT_SNAPSHOT_ENTRIES: u64 = 50_000;
/// Most log entries kept behind a snapshot when the log is compacted (fewer if snapshots are
/// taken more often), so a follower slightly behind catches up from the log, not a snapshot.
pub const MAX_LOG_KEPT_AFTER_SNAPSHOT: u64 = 1_000;
/// Default for [`NodeConfig::resolve_timeout_ms`].
pub const DEFAULT_RESOLVE_TIMEOUT_MS: u64 = 60_000;
/// Default for [`NodeConfig::watch_history_max_events`]: most events a node keeps for watchers.
/// A watch cannot start further back (COMPACTED), and one that falls this far behind is canceled
/// (SLOW_CONSUMER).
pub const WATCH_HISTORY_MAX_EVENTS: usize = 100_000;
/// Default for [`NodeConfig::watch_history_max_bytes`]: most bytes of watch history, estimated
/// from keys, values and previous values. All watchers on a node share this one history, so slow
/// watchers cost the node no more than it (plus each stream's small response buffer).
pub const WATCH_HISTORY_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Most open watches on one Watch stream; a create beyond it is canceled with CAPACITY_EXCEEDED.
pub const MAX_WATCHES_PER_STREAM: usize = 1_000;
/// Most events in one WatchResponse. A revision is never split over responses (a client resumes
/// from the last delivered revision + 1), so a revision with more matching events goes alone.
pub const MAX_WATCH_EVENTS_PER_RESPONSE: usize = 1_000;
/// Soft bound on one WatchResponse, in bytes (estimated like the history), with the same
/// exception for a single large revision.
pub const WATCH_RESPONSE_TARGET_BYTES: usize = 1024 * 1024;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id, ≥ 1, never reused for another node.
    pub node_id: u64,
    /// Where this node keeps its log, vote and snapshots.
    pub data_dir: PathBuf,
    /// Address to bind for the client API; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Address to bind for the Raft peers (only peers need to reach it); port 0 picks a free port.
    pub peer_listen: SocketAddr,
    /// Address clients use to reach this node; defaults to the bound address.
    pub advertise: Option<String>,
    /// Address other nodes use to reach this node's peer service; defaults to the bound address.
    pub peer_advertise: Option<String>,
    /// The first members and their addresses. Empty: a single-node cluster of this node.
    pub initial_cluster: BTreeMap<u64, Member>,
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
    pub write_inflight: usize,
    pub request_timeout_ms: u64,
    /// How long a new cluster's first start waits for the initial members' names to resolve
    /// before it gives up with an error (containers started together appear in DNS one by one).
    pub resolve_timeout_ms: u64,
    /// TLS on the client listener; with a CA, clients must present a certificate it signed.
    /// None: plaintext.
    pub client_tls: Option<TlsFiles>,
    /// Mutual TLS on the peer listener and when dialing peers (the CA is required). None:
    /// plaintext, which every member must then use.
    pub peer_tls: Option<TlsFiles>,
    /// Where to serve /metrics, /health and /ready over HTTP.
    pub http_listen: Option<SocketAddr>,
    /// Host names the console and its JSON API answer for on `http_listen`, besides IP
    /// addresses, `localhost` and this node's advertised name (`http::AllowedHosts`).
    pub http_allowed_hosts: Vec<String>,
    /// Must be the same on every node of a cluster (they bound what apply accepts).
    pub limits: Limits,
    pub snapshot_entries: u64,
    /// Most events kept in the watch history (default [`WATCH_HISTORY_MAX_EVENTS`]).
    pub watch_history_max_events: usize,
    /// Most bytes kept in the watch history (default [`WATCH_HISTORY_MAX_BYTES`]).
    pub watch_history_max_bytes: usize,
    /// Test-only faults: peer overrides, lessor clock rate, deliberate bugs. The default injects
    /// nothing.
    pub faults: crate::faults::FaultConfig,
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
            peer_listen: ([127, 0, 0, 1], DEFAULT_PEER_PORT).into(),
            advertise: None,
            peer_advertise: None,
            initial_cluster: BTreeMap::new(),
            join: false,
            cluster_name: "zaris".into(),
            election_timeout_ms: DEFAULT_ELECTION_TIMEOUT_MS,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            lessor: LessorConfig::default(),
            expire_batch: DEFAULT_EXPIRE_BATCH,
            renew_inflight: DEFAULT_RENEW_INFLIGHT,
            write_inflight: DEFAULT_WRITE_INFLIGHT,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            resolve_timeout_ms: DEFAULT_RESOLVE_TIMEOUT_MS,
            client_tls: None,
            peer_tls: None,
            http_listen: None,
            http_allowed_hosts: Vec::new(),
            limits: Limits::default(),
            snapshot_entries: DEFAULT_SNAPSHOT_ENTRIES,
            watch_history_max_events: WATCH_HISTORY_MAX_EVENTS,
            watch_history_max_bytes: WATCH_HISTORY_MAX_BYTES,
            faults: crate::faults::FaultConfig::default(),
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
            self.limits.min_ttl_ms > DurationMs::new(self.election_timeout_ms),
            "minimum TTL ({} ms) must exceed the election timeout ({} ms)",
            self.limits.min_ttl_ms,
            self.election_timeout_ms
        );
        if let Err(why) = self.limits.check() {
            bail!("limits: {why}");
        }
        for (id, member) in &self.initial_cluster {
            for addr in [&member.addr, &member.peer_addr] {
                check_dialable(addr).map_err(|why| anyhow!("initial cluster, node {id}: {why}"))?;
            }
            ensure!(
                member.addr != member.peer_addr,
                "initial cluster, node {id}: the client and the peer address are both {}; the \
                 Raft service needs a port of its own",
                member.addr
            );
        }
        for (what, addr) in [
            ("advertise address", &self.advertise),
            ("peer advertise address", &self.peer_advertise),
        ] {
            if let Some(addr) = addr {
                check_dialable(addr).map_err(|why| anyhow!("{what}: {why}"))?;
            }
        }
        ensure!(
            self.listen != self.peer_listen || self.listen.port() == 0,
            "the client and the peer listener are both {}; give the peer service a port of its \
             own (--peer-listen)",
            self.listen
        );
        if !self.initial_cluster.is_empty() && !self.initial_cluster.contains_key(&self.node_id) {
            bail!(
                "node {} is not in the initial cluster {:?}",
                self.node_id,
                self.initial_cluster
            );
        }
        // Set but empty (an env file's `ZARIS_CLUSTER_NAME=`) is a mistake, not a name.
        ensure!(
            !self.cluster_name.trim().is_empty(),
            "the cluster name is empty"
        );
        if self.join && !self.initial_cluster.is_empty() {
            bail!("--join and --initial-cluster exclude each other");
        }
        ensure!(self.expire_batch >= 1, "expire batch must be at least 1");
        ensure!(
            self.snapshot_entries >= 1,
            "snapshot entries must be at least 1"
        );
        ensure!(
            (1..=MAX_INFLIGHT).contains(&self.renew_inflight),
            "renew pipelining (--renew-inflight) must be 1 to {MAX_INFLIGHT}, not {}",
            self.renew_inflight
        );
        ensure!(
            (1..=MAX_INFLIGHT).contains(&self.write_inflight),
            "write pipelining (--write-inflight) must be 1 to {MAX_INFLIGHT}, not {}",
            self.write_inflight
        );
        ensure!(
            self.lessor.revoke_rate_per_s >= 1,
            "revoke rate must be at least 1/s"
        );
        ensure!(
            self.watch_history_max_events >= 1 && self.watch_history_max_bytes >= 1,
            "the watch history must hold at least one event and one byte"
        );
        if let Some(peer_tls) = &self.peer_tls {
            ensure!(
                peer_tls.ca.is_some(),
                "peer TLS needs the cluster's peer CA (--peer-cacert): peers must check each \
                 other's certificates"
            );
        }
        self.faults.validate()?;
        Ok(())
    }

    /// The peer listener's default for a client listener on `listen`: the same IP, on
    /// [`DEFAULT_PEER_PORT`], or on a port the OS picks when the client's is picked so too.
    pub fn default_peer_listen(listen: SocketAddr) -> SocketAddr {
        let port = if listen.port() == 0 {
            0
        } else {
            DEFAULT_PEER_PORT
        };
        SocketAddr::new(listen.ip(), port)
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

/// A `host:port` others can dial: well-formed and not the unspecified address.
fn check_dialable(addr: &str) -> Result<(), String> {
    crate::address::check(addr)?;
    if crate::address::is_unspecified(addr) {
        return Err(format!("{addr} is not an address others can dial"));
    }
    Ok(())
}
