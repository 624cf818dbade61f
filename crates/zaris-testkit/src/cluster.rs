//! A test cluster in the test's own process: real nodes (real Raft, sled, gRPC) on 127.0.0.1 with
//! OS-chosen ports, fast timings, and helpers that wait on conditions (never fixed sleeps). For
//! tests only: it panics where a test should fail.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use openraft::async_runtime::WatchReceiver;
use zaris_client::{Client, ClientOptions};
use zaris_core::{DurationMs, Revision};
use zaris_server::{Clock, Listeners, Member, MonotonicClock, Node, NodeConfig, NodeHandle};

use crate::eventually;

/// Fast timings so tests run quickly; the invariants do not depend on them.
pub const ELECTION_TIMEOUT_MS: u64 = 600;
pub const HEARTBEAT_MS: u64 = 60;
pub const MIN_TTL_MS: u64 = 1_000;

/// Nodes that bootstrap together from one member list; each can be stopped, and restarted from
/// its data dir on its old address. The data dirs live in a temporary directory removed on drop.
pub struct TestCluster {
    pub nodes: BTreeMap<u64, Option<NodeHandle>>,
    /// Each node's client address.
    pub addrs: BTreeMap<u64, SocketAddr>,
    /// Each node's peer (Raft) address.
    pub peer_addrs: BTreeMap<u64, SocketAddr>,
    dir: tempfile::TempDir,
    /// Applied to every node's configuration, also on restart.
    configure: Configure,
    /// How [`TestCluster::client`] connects (TLS settings, say).
    client_options: ClientOptions,
    /// Every node's lessor clock (one clock, as if the nodes' clocks ran in perfect step).
    clock: Arc<dyn Clock>,
    /// The host part of the members' addresses: `127.0.0.1`, or `localhost` for a cluster whose
    /// members know each other (and clients know them) by a name that must be resolved.
    host: &'static str,
    /// Unique per cluster: tests run side by side in one process, and a port one cluster's
    /// stopped node let go may be bound by another's node; a different name makes the nodes
    /// refuse each other's Raft messages (CLUSTER_MISMATCH) instead of mixing their logs.
    pub cluster_name: String,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("nodes", &self.nodes)
            .field("addrs", &self.addrs)
            .field("peer_addrs", &self.peer_addrs)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// A cluster name no other cluster of this machine uses at the same time.
fn unique_cluster_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("test-{}-{n}", std::process::id())
}

/// What a test changes in every node's configuration.
type Configure = Arc<dyn Fn(&mut NodeConfig) + Send + Sync>;

/// A node's configuration with the test timings.
pub fn config(id: u64, data_dir: std::path::PathBuf) -> NodeConfig {
    let mut config = NodeConfig::new(id, data_dir);
    config.election_timeout_ms = ELECTION_TIMEOUT_MS;
    config.heartbeat_ms = HEARTBEAT_MS;
    config.limits.min_ttl_ms = DurationMs::new(MIN_TTL_MS);
    config.request_timeout_ms = 3_000;
    config.lessor.retry_after = DurationMs::new(300);
    config
}

impl TestCluster {
    /// Starts `size` nodes that bootstrap together from their initial member list.
    pub async fn start(size: u64) -> TestCluster {
        Self::start_configured(size, |_| {}).await
    }

    /// [`TestCluster::start`], with `configure` applied to each node's configuration.
    pub async fn start_configured(
        size: u64,
        configure: impl Fn(&mut NodeConfig) + Send + Sync + 'static,
    ) -> TestCluster {
        Self::start_full(
            size,
            configure,
            Arc::new(MonotonicClock::default()),
            "127.0.0.1",
        )
        .await
    }

    /// [`TestCluster::start`], the members named `localhost:{port}` in the initial cluster, in
    /// `member add` and in the clients' endpoints: every connection resolves a host name.
    pub async fn start_named(size: u64) -> TestCluster {
        Self::start_full(
            size,
            |_| {},
            Arc::new(MonotonicClock::default()),
            "localhost",
        )
        .await
    }

    /// [`TestCluster::start`], every node's lessor reading `clock` (a `ManualClock` lets a test
    /// move lease time by hand).
    pub async fn start_with_clock(size: u64, clock: Arc<dyn Clock>) -> TestCluster {
        Self::start_full(size, |_| {}, clock, "127.0.0.1").await
    }

    async fn start_full(
        size: u64,
        configure: impl Fn(&mut NodeConfig) + Send + Sync + 'static,
        clock: Arc<dyn Clock>,
        host: &'static str,
    ) -> TestCluster {
        let configure: Configure = Arc::new(configure);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut listeners = BTreeMap::new();
        for id in 1..=size {
            listeners.insert(id, bind_any().await);
        }
        let addrs: BTreeMap<u64, SocketAddr> = listeners
            .iter()
            .map(|(id, l)| (*id, l.client.local_addr().expect("addr")))
            .collect();
        let peer_addrs: BTreeMap<u64, SocketAddr> = listeners
            .iter()
            .map(|(id, l)| (*id, l.peer.local_addr().expect("addr")))
            .collect();
        let mut cluster = TestCluster {
            nodes: BTreeMap::new(),
            addrs,
            peer_addrs,
            dir,
            configure,
            client_options: ClientOptions::default().with_timeout(Duration::from_secs(15)),
            clock,
            host,
            cluster_name: unique_cluster_name(),
        };
        for (id, listener) in listeners {
            let node = cluster.start_node(id, listener, false).await;
            cluster.nodes.insert(id, Some(node));
        }
        cluster
    }

    /// The id the nodes put on their Raft messages (from [`TestCluster::cluster_name`]).
    pub fn cluster_id(&self) -> u64 {
        let mut config = config(1, std::path::PathBuf::new());
        config.cluster_name = self.cluster_name.clone();
        config.cluster_id()
    }

    fn initial_cluster(&self) -> BTreeMap<u64, Member> {
        self.addrs
            .keys()
            .map(|id| (*id, self.member(*id)))
            .collect()
    }

    /// The client address node `id` is known by (`127.0.0.1:port`, or `localhost:port` when
    /// named).
    pub fn address(&self, id: u64) -> String {
        format!("{}:{}", self.host, self.addrs[&id].port())
    }

    /// The peer address node `id` is known by (named like [`TestCluster::address`]).
    pub fn peer_address(&self, id: u64) -> String {
        format!("{}:{}", self.host, self.peer_addrs[&id].port())
    }

    /// Node `id`'s member record.
    pub fn member(&self, id: u64) -> Member {
        Member::new(self.address(id), self.peer_address(id))
    }

    pub fn data_dir(&self, id: u64) -> std::path::PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    async fn start_node(&self, id: u64, listeners: Listeners, join: bool) -> NodeHandle {
        let mut config = config(id, self.data_dir(id));
        config.cluster_name = self.cluster_name.clone();
        (self.configure)(&mut config);
        if join {
            config.join = true;
            config.advertise = Some(self.address(id));
            config.peer_advertise = Some(self.peer_address(id));
        } else {
            config.initial_cluster = self.initial_cluster();
        }
        Node::start_with_listeners(config, listeners, self.clock.clone())
            .await
            .expect("node starts")
    }

    /// Starts a new, empty node that waits to be added (`member add`); its member record
    /// (for `member_add`) is [`TestCluster::member`].
    pub async fn start_joiner(&mut self, id: u64) -> SocketAddr {
        let listeners = bind_any().await;
        let addr = listeners.client.local_addr().expect("addr");
        self.addrs.insert(id, addr);
        self.peer_addrs
            .insert(id, listeners.peer.local_addr().expect("addr"));
        let node = self.start_node(id, listeners, true).await;
        self.nodes.insert(id, Some(node));
        addr
    }

    pub fn node(&self, id: u64) -> &NodeHandle {
        self.nodes
            .get(&id)
            .and_then(Option::as_ref)
            .unwrap_or_else(|| panic!("node {id} is not running"))
    }

    pub fn running(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Waits until a running node leads and every running voter agrees on it.
    pub async fn leader(&self) -> u64 {
        eventually("a Raft leader", Duration::from_secs(15), || async {
            let mut leader = None;
            for id in self.running() {
                let metrics = self.node(id).raft().metrics().borrow_watched().clone();
                if metrics.state == ServerState::Leader {
                    leader = Some(id);
                }
            }
            let leader = leader?;
            let agreed = self.running().into_iter().all(|id| {
                self.node(id)
                    .raft()
                    .metrics()
                    .borrow_watched()
                    .current_leader
                    == Some(leader)
            });
            agreed.then_some(leader)
        })
        .await
    }

    pub fn followers(&self, leader: u64) -> Vec<u64> {
        self.running()
            .into_iter()
            .filter(|id| *id != leader)
            .collect()
    }

    /// Stops a node (its tasks and Raft); its data dir stays.
    pub async fn stop(&mut self, id: u64) {
        if let Some(node) = self.nodes.get_mut(&id).and_then(Option::take) {
            node.shutdown().await;
        }
    }

    /// Restarts a stopped node from its data dir, on its old addresses.
    pub async fn restart(&mut self, id: u64) {
        let (addr, peer_addr) = (self.addrs[&id], self.peer_addrs[&id]);
        let listeners = eventually(
            "the old ports to be free",
            Duration::from_secs(10),
            || async { Listeners::bind(addr, peer_addr).await.ok() },
        )
        .await;
        let node = self.start_node(id, listeners, false).await;
        self.nodes.insert(id, Some(node));
    }

    /// A client that knows only the given nodes.
    pub async fn client(&self, ids: &[u64]) -> Client {
        let endpoints: Vec<String> = ids.iter().map(|id| self.address(*id)).collect();
        // Lazy: tests make clients of nodes they are about to stop or start.
        Client::lazy(endpoints, self.client_options.clone()).expect("client")
    }

    /// Makes [`TestCluster::client`] connect with `options` (TLS settings, say).
    pub fn set_client_options(&mut self, options: ClientOptions) {
        self.client_options = options;
    }

    /// Waits until every running node has applied at least `index`.
    pub async fn wait_applied(&self, revision: Revision) {
        eventually("all nodes to apply", Duration::from_secs(15), || async {
            self.running()
                .into_iter()
                .all(|id| self.node(id).state().read(|d| d.state.last_applied()) >= revision)
                .then_some(())
        })
        .await
    }

    pub async fn shutdown(mut self) {
        for id in self.running() {
            self.stop(id).await;
        }
    }
}

/// A client and a peer listener on 127.0.0.1, on ports the OS picks.
async fn bind_any() -> Listeners {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    Listeners::bind(any, any).await.expect("bind")
}
