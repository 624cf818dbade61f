//! Starting and stopping a node: stores, Raft, the gRPC server, and the tracked background tasks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt as _;
use openraft::SnapshotPolicy;
use openraft::async_runtime::WatchReceiver as _;
use openraft::errors::{InitializeError, RaftError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::interceptor::InterceptedService;
use tracing::{info, warn};
use zaris_core::{DurationMs, Lessor};
use zaris_proto::v1::auth_server::AuthServer;
use zaris_proto::v1::cluster_server::ClusterServer;
use zaris_proto::v1::kv_server::KvServer;
use zaris_proto::v1::lease_server::LeaseServer;
use zaris_proto::v1::lock_server::LockServer;
use zaris_proto::v1::raft_service_server::RaftServiceServer;
use zaris_proto::v1::watch_server::WatchServer;
use zaris_raft::{Member, Raft, StateHandle};

use crate::auth::Authenticate;
use crate::clock::{Clock, MonotonicClock};
use crate::config::NodeConfig;
use crate::cutoff::{Connections, PeerGuard};
use crate::dead_leader::DeadLeaderCheck;
use crate::health::{self, Health};
use crate::lessor_task::{ExpiryLoop, LessorProgress};
use crate::locks::LockWaiters;
use crate::network::{MAX_APPEND_BYTES, MAX_RAFT_MESSAGE_BYTES, NetworkFactory};
use crate::observer::NodeObserver;
use crate::prompt_election::LeaderContact;
use crate::propose::Proposer;
use crate::renew::RenewBatcher;
use crate::services::raft::RaftPeerService;
use crate::services::{
    AuthService, ClusterService, KvService, LeaseService, LockService, NodeContext, WatchService,
};
use crate::tls::TlsSource;
use crate::watch::WatchHub;
use crate::{http, metrics as m};

/// Largest client request accepted, in bytes (`max_request_bytes`): a put of a max-size value
/// fits with room to spare; a transaction's operations together must fit too. Bounding requests
/// bounds log entries, and so Raft messages: one entry alone always fits an AppendEntries
/// (`MAX_APPEND_BYTES`; larger batches go in parts).
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
const _: () = assert!(
    MAX_CLIENT_MESSAGE_BYTES * 3 / 2 <= MAX_APPEND_BYTES,
    "one max-size request, with its entry's framing, must fit one AppendEntries"
);
/// Largest client response sent, in bytes: a Range page or a watch response of one revision
/// (a prefix delete, a large expiry) may be large.
const MAX_CLIENT_RESPONSE_BYTES: usize = 512 * 1024 * 1024;
/// Entries per AppendEntries message (a batch over `MAX_APPEND_BYTES` is cut by size too).
const MAX_PAYLOAD_ENTRIES: u64 = 64;

/// How long a stopping node waits for its connections to close before dropping them.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// A running node. Dropping it does not stop it: call [`NodeHandle::shutdown`].
#[derive(Debug)]
pub struct NodeHandle {
    pub node_id: u64,
    /// Where the client API is served.
    pub addr: SocketAddr,
    /// Where the Raft peer service is served.
    pub peer_addr: SocketAddr,
    pub http_addr: Option<SocketAddr>,
    raft: Raft,
    state: StateHandle,
    health: Health,
    lessor_progress: tokio::sync::watch::Receiver<LessorProgress>,
    /// Wakes the certificate watcher to re-read every TLS file now.
    tls_reload: Arc<tokio::sync::Notify>,
    election_timeout: Duration,
    leader_contact: Arc<LeaderContact>,
    dead_leader: Arc<DeadLeaderCheck>,
    /// The Lock calls waiting here for their turn.
    lock_waits: Arc<LockWaiters>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

/// A node's two bound listeners: clients on one, Raft peers on the other.
#[derive(Debug)]
pub struct Listeners {
    pub client: TcpListener,
    pub peer: TcpListener,
}

impl Listeners {
    /// Binds both (port 0: a port the OS picks).
    pub async fn bind(client: SocketAddr, peer: SocketAddr) -> anyhow::Result<Listeners> {
        let client_listener = TcpListener::bind(client)
            .await
            .with_context(|| format!("cannot listen on {client} for clients"))?;
        let peer_listener = TcpListener::bind(peer)
            .await
            .with_context(|| format!("cannot listen on {peer} for peers"))?;
        Ok(Listeners {
            client: client_listener,
            peer: peer_listener,
        })
    }
}

/// Namespace for [`Node::start`].
#[derive(Debug)]
pub struct Node;

impl Node {
    /// Binds `config.listen` and `config.peer_listen` and starts the node.
    pub async fn start(config: NodeConfig) -> anyhow::Result<NodeHandle> {
        let listeners = Listeners::bind(config.listen, config.peer_listen).await?;
        Self::start_with_listeners(config, listeners, Arc::new(MonotonicClock::default())).await
    }

    /// Starts the node on already bound listeners (tests bind port 0 first to learn the ports).
    pub async fn start_with_listeners(
        config: NodeConfig,
        listeners: Listeners,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<NodeHandle> {
        config.validate()?;
        // Install the process-wide recorder before anything counts.
        let _ = crate::metrics::prometheus();
        let node_id = config.node_id;
        let faults = Arc::new(config.faults.clone());
        let clock = faults.lessor_clock(node_id, clock);
        let addr = listeners.client.local_addr()?;
        let peer_addr = listeners.peer.local_addr()?;
        let known = config.initial_cluster.get(&node_id);
        let advertise = Member {
            addr: config
                .advertise
                .clone()
                .or_else(|| known.map(|m| m.addr.clone()))
                .unwrap_or_else(|| crate::address::default_advertise(addr)),
            peer_addr: config
                .peer_advertise
                .clone()
                .or_else(|| known.map(|m| m.peer_addr.clone()))
                .unwrap_or_else(|| crate::address::default_advertise(peer_addr)),
        };
        // Read the certificates before anything starts: a bad file is an error at start.
        let client_tls = config
            .client_tls
            .clone()
            .map(|files| TlsSource::client(files).context("client TLS"))
            .transpose()?
            .map(Arc::new);
        let peer_tls = config
            .peer_tls
            .clone()
            .map(|files| TlsSource::peer(files).context("peer TLS"))
            .transpose()?
            .map(Arc::new);
        // Bind everything first: a failure here leaves nothing running.
        let http_listener = match config.http_listen {
            Some(http_listen) => Some(
                TcpListener::bind(http_listen)
                    .await
                    .with_context(|| format!("cannot listen on {http_listen} for HTTP"))?,
            ),
            None => None,
        };
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;

        let lessor = Arc::new(Mutex::new(Lessor::new(config.lessor.clone())));
        let waiters = Arc::new(LockWaiters::default());
        let watch_hub = Arc::new(WatchHub::new(
            config.watch_history_max_events,
            config.watch_history_max_bytes,
        ));
        let apply_counts = Arc::new(crate::stats::ApplyCounts::default());
        let snapshot_point = Arc::new(crate::snapshot_schedule::PointSignal::default());
        let observer = Arc::new(NodeObserver {
            snapshot_point: snapshot_point.clone(),
            clock: clock.clone(),
            lessor: lessor.clone(),
            waiters: waiters.clone(),
            watch_hub: watch_hub.clone(),
            faults: faults.clone(),
            counts: apply_counts.clone(),
        });
        let (log_store, sm_store) =
            zaris_raft::open(&config.data_dir, observer, config.limits.clone())
                .await
                .with_context(|| format!("cannot open data dir {}", config.data_dir.display()))?;
        let sm_store = sm_store.with_faults(faults.store_faults(&config.data_dir));
        let state = sm_store.handle();

        let raft_config = openraft::Config {
            cluster_name: config.cluster_name.clone(),
            heartbeat_interval: config.heartbeat_ms,
            election_timeout_min: config.election_timeout_ms / 2,
            election_timeout_max: config.election_timeout_ms,
            install_snapshot_timeout: 60_000,
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            // Every `snapshot_entries` entries, at points staggered across the members
            // (`snapshot_schedule.rs`), not all at once.
            snapshot_policy: SnapshotPolicy::Never,
            replication_lag_threshold: config.snapshot_entries.saturating_mul(2),
            max_in_snapshot_log_to_keep: config
                .snapshot_entries
                .min(crate::config::MAX_LOG_KEPT_AFTER_SNAPSHOT),
            // openraft purges only once this many entries can go: with frequent snapshots,
            // purge at their pace, or a lagging follower still finds its entries in the log.
            purge_batch_size: config.snapshot_entries.min(256),
            enable_pre_vote: Some(true),
            // Replicate entries as soon as they are written locally, so the leader's fsync and
            // the followers' run in parallel instead of one after the other.
            broadcast_submitted_on_append: Some(true),
            ..Default::default()
        }
        .validate()
        .context("raft configuration")?;
        let cluster_id = config.cluster_id();
        let network = NetworkFactory::new(cluster_id)
            .with_append_timeout_floor(Duration::from_millis(config.election_timeout_ms));
        let network = network
            .with_faults(faults.clone())
            .with_tls(peer_tls.clone());
        let api_peers = network.clone();
        let raft = Raft::new(node_id, Arc::new(raft_config), network, log_store, sm_store)
            .await
            .context("cannot start raft")?;

        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let proposer = Proposer::new(
            raft.clone(),
            node_id,
            cluster_id,
            Duration::from_millis(config.request_timeout_ms),
        )
        .with_write_batching(config.write_inflight, &tracker, shutdown.clone());
        let renewals = RenewBatcher::start(
            proposer.clone(),
            state.clone(),
            config.renew_inflight,
            &tracker,
            shutdown.clone(),
        );
        let renewals = if faults.has(crate::faults::Bug::RenewAckBeforeCommit) {
            renewals.with_early_ack(proposer.clone(), state.clone(), tracker.clone())
        } else {
            renewals
        };
        let leader_contact = LeaderContact::new();
        let context = NodeContext {
            node_id,
            proposer: proposer.clone(),
            state: state.clone(),
            lessor: lessor.clone(),
            clock: clock.clone(),
            waiters: waiters.clone(),
            renewals,
            watch_hub,
            tasks: tracker.clone(),
            shutdown: shutdown.clone(),
            faults: faults.clone(),
            election_timeout: DurationMs::new(config.election_timeout_ms),
            leader_contact: leader_contact.clone(),
        };

        let stats = Arc::new(crate::stats::Stats::new(
            apply_counts,
            proposer.commit_latency(),
        ));
        tracker.spawn(crate::stats::run(stats.clone(), shutdown.clone()));
        #[cfg(feature = "raft-stats")]
        tracker.spawn(crate::raft_stats::run(
            raft.clone(),
            node_id,
            crate::raft_stats::dir(&config.data_dir),
            shutdown.clone(),
        ));
        let api = crate::api::Api::new(
            context.clone(),
            api_peers,
            cluster_id,
            Duration::from_millis(config.request_timeout_ms),
            stats,
        );

        tracker.spawn(crate::snapshot_schedule::run(
            raft.clone(),
            node_id,
            config.snapshot_entries,
            snapshot_point,
            shutdown.clone(),
        ));
        // The Raft service stamps each leader contact; a follower calls the election promptly
        // when the leader falls silent (`prompt_election.rs`).
        let dead_leader = DeadLeaderCheck::new(
            raft.clone(),
            node_id,
            leader_contact.clone(),
            Duration::from_millis(config.heartbeat_ms),
        );
        tracker.spawn(crate::prompt_election::run(
            raft.clone(),
            node_id,
            leader_contact.clone(),
            dead_leader.clone(),
            Duration::from_millis(config.election_timeout_ms),
            Duration::from_millis((config.heartbeat_ms / 5).max(5)),
            shutdown.clone(),
        ));
        // The Raft service has a listener of its own: clients never reach it, and it can sit on
        // a private network.
        // A peer whose message is refused is cut off (`cutoff.rs`).
        let peer_connections = Connections::new("peer");
        let peer_server = tonic::transport::Server::builder().add_service(PeerGuard::new(
            RaftServiceServer::new(RaftPeerService::new(
                raft.clone(),
                cluster_id,
                peer_tls.is_some(),
                state.clone(),
                config.limits.clone(),
                leader_contact.clone(),
                dead_leader.clone(),
                api.clone(),
                shutdown.clone(),
            ))
            .max_decoding_message_size(MAX_RAFT_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_RAFT_MESSAGE_BYTES),
            peer_connections.clone(),
        ));
        // Every client service, and only through this check: with a client CA, a connection
        // without a certificate gets UNAUTHENTICATED on every call; with auth enabled, so does a
        // call that names no user.
        let authenticate = Authenticate::new(client_tls.clone(), state.clone(), proposer.clone());
        let client_server = tonic::transport::Server::builder()
            .add_service(InterceptedService::new(
                KvServer::new(KvService(context.clone()))
                    .max_decoding_message_size(MAX_CLIENT_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_CLIENT_RESPONSE_BYTES),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                LeaseServer::new(LeaseService(context.clone()))
                    .max_decoding_message_size(MAX_CLIENT_MESSAGE_BYTES),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                LockServer::new(LockService(context.clone()))
                    .max_decoding_message_size(MAX_CLIENT_MESSAGE_BYTES),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                ClusterServer::new(ClusterService::new(context.clone()))
                    .max_decoding_message_size(MAX_CLIENT_MESSAGE_BYTES),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                // Responses hold whole revisions, and one revision (a prefix delete, a large
                // expiry) may exceed the usual response size: allow what a Range may send.
                WatchServer::new(WatchService(context.clone()))
                    .max_decoding_message_size(MAX_CLIENT_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_CLIENT_RESPONSE_BYTES),
                authenticate.clone(),
            ))
            .add_service(InterceptedService::new(
                AuthServer::new(AuthService(context.clone()))
                    .max_decoding_message_size(MAX_CLIENT_MESSAGE_BYTES),
                authenticate.clone(),
            ));
        // Only peer connections can be cut off. Client connections are corked, so that the
        // answers an applied entry releases together leave in one write (`zaris_proto::cork`).
        spawn_listener(
            node_id,
            "peer",
            peer_server,
            listeners.peer,
            peer_tls.as_ref(),
            move |socket, remote| peer_connections.wrap(socket, remote),
            &tracker,
            shutdown.clone(),
        );
        spawn_listener(
            node_id,
            "client",
            client_server,
            listeners.client,
            client_tls.as_ref(),
            |socket, _| zaris_proto::cork::Corked::new(socket),
            &tracker,
            shutdown.clone(),
        );
        let tls_reload = Arc::new(tokio::sync::Notify::new());
        let tls_sources: Vec<Arc<TlsSource>> =
            client_tls.iter().chain(peer_tls.iter()).cloned().collect();
        if !tls_sources.is_empty() {
            tracker.spawn(crate::tls::watch_files(
                tls_sources,
                tls_reload.clone(),
                shutdown.clone(),
            ));
        }

        let (progress, lessor_progress) = tokio::sync::watch::channel(LessorProgress::default());
        tracker.spawn(
            ExpiryLoop {
                node_id,
                proposer: proposer.clone(),
                lessor: lessor.clone(),
                clock: clock.clone(),
                election_timeout: DurationMs::new(config.election_timeout_ms),
                expire_batch: config.expire_batch,
                state: state.clone(),
                limits: config.limits.clone(),
                progress,
                faults,
            }
            .run(shutdown.clone()),
        );
        tracker.spawn(report_gauges(state.clone(), shutdown.clone()));
        let (health, watch_health) = health::watch_raft(raft.clone(), node_id, shutdown.clone());
        tracker.spawn(watch_health);

        let http_addr = match http_listener {
            Some(listener) => {
                let http_addr = listener.local_addr().ok();
                // The names this node is known by: its advertised client and peer hosts.
                let advertised = [&advertise.addr, &advertise.peer_addr]
                    .into_iter()
                    .map(|address| crate::address::host(address).to_owned());
                tracker.spawn(http::serve(
                    listener,
                    api,
                    raft.clone(),
                    health.clone(),
                    Duration::from_millis(config.election_timeout_ms),
                    http::AllowedHosts::new(
                        advertised.chain(config.http_allowed_hosts.iter().cloned()),
                    ),
                    shutdown.clone(),
                ));
                http_addr
            }
            None => None,
        };

        let handle = NodeHandle {
            node_id,
            addr,
            peer_addr,
            http_addr,
            raft,
            state,
            health,
            lessor_progress,
            tls_reload,
            election_timeout: Duration::from_millis(config.election_timeout_ms),
            leader_contact,
            dead_leader,
            lock_waits: waiters,
            shutdown,
            tracker,
        };
        if let Err(e) = bootstrap(&config, &handle.raft, &advertise, &handle.tracker).await {
            handle.shutdown().await;
            return Err(e);
        }
        info!(
            node_id,
            %addr,
            %peer_addr,
            advertise = advertise.addr,
            peer_advertise = advertise.peer_addr,
            cluster = config.cluster_name,
            "node started"
        );
        Ok(handle)
    }
}

/// Initializes the cluster on exactly one pristine node: the lowest id of the initial members
/// (or this node alone when no members are given). Everyone else waits to hear from a leader.
///
/// A pristine node first waits (up to `resolve_timeout_ms`) until every initial member's name
/// resolves, so a mistyped name fails the first start. A restarted node does not: a peer that
/// is down (and gone from its network's DNS) is a minority a cluster must run without, so its
/// name is only reported.
async fn bootstrap(
    config: &NodeConfig,
    raft: &Raft,
    advertise: &Member,
    tracker: &TaskTracker,
) -> anyhow::Result<()> {
    if config.join {
        return Ok(());
    }
    if raft.is_initialized().await? {
        tracker.spawn(crate::address::warn_unresolved(
            config.node_id,
            crate::address::member_addresses(&config.initial_cluster),
        ));
        return Ok(());
    }
    if !config.initial_cluster.is_empty() {
        crate::address::wait_resolvable(
            config.node_id,
            &crate::address::member_addresses(&config.initial_cluster),
            Duration::from_millis(config.resolve_timeout_ms),
        )
        .await?;
    }
    let members: BTreeMap<u64, Member> = if config.initial_cluster.is_empty() {
        BTreeMap::from([(config.node_id, advertise.clone())])
    } else {
        config.initial_cluster.clone()
    };
    if members.keys().next() != Some(&config.node_id) {
        return Ok(());
    }
    match raft.initialize(members).await {
        Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot initialize the cluster: {e}")),
    }
}

/// Serves `server` on `listener` (`what`: which listener, for logs), over TLS with `tls`, each
/// accepted socket turned by `wrap` into what the connection runs over, until `stop`.
#[allow(clippy::too_many_arguments)]
fn spawn_listener<IO>(
    node_id: u64,
    what: &'static str,
    server: tonic::transport::server::Router,
    listener: TcpListener,
    tls: Option<&Arc<TlsSource>>,
    wrap: impl Fn(tokio::net::TcpStream, SocketAddr) -> IO + Clone + Send + Sync + 'static,
    tracker: &TaskTracker,
    stop: CancellationToken,
) where
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    IO::ConnectInfo: Clone + Send + Sync + 'static,
{
    match tls {
        Some(tls) => {
            let incoming = crate::tls::incoming(listener, tls.clone(), wrap, tracker, stop.clone());
            tracker.spawn(serve_grpc(node_id, what, server, incoming, stop));
        }
        // Small request/response messages: Nagle's algorithm would hold them back (tens of ms
        // per Raft round trip on an accepted socket).
        None => {
            let incoming = tonic::transport::server::TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .map(move |accepted| {
                    let socket = accepted?;
                    let remote = socket.peer_addr()?;
                    Ok::<_, std::io::Error>(wrap(socket, remote))
                });
            tracker.spawn(serve_grpc(node_id, what, server, incoming, stop));
        }
    }
}

/// Serves `server` on the connections of `incoming` (`what`: which listener, for logs) until
/// `stop`.
async fn serve_grpc<I, IO, IE>(
    node_id: u64,
    what: &'static str,
    server: tonic::transport::server::Router,
    incoming: I,
    stop: CancellationToken,
) where
    I: futures::Stream<Item = Result<IO, IE>>,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    IO::ConnectInfo: Clone + Send + Sync + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let serve = server.serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
    // A peer that stopped reading (paused, partitioned) never closes its connection.
    match within_grace(serve, &stop).await {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            warn!(node_id, listener = what, error = %e, "gRPC server stopped with an error")
        }
        None => warn!(
            node_id,
            listener = what,
            grace = ?SHUTDOWN_GRACE,
            "connections still open after the shutdown grace period; dropping them"
        ),
    }
}

/// Runs `serve`, a server's graceful shutdown (it stops accepting on `stop`, then waits for every
/// open connection to close), but gives those connections at most [`SHUTDOWN_GRACE`] after `stop`:
/// one whose other end stopped reading never closes, and the node's stop waits for its servers.
/// `None`: the grace ran out and the connections still open were dropped.
pub(crate) async fn within_grace<F: std::future::Future>(
    serve: F,
    stop: &CancellationToken,
) -> Option<F::Output> {
    tokio::pin!(serve);
    tokio::select! {
        result = &mut serve => Some(result),
        () = stop.cancelled() => tokio::time::timeout(SHUTDOWN_GRACE, &mut serve).await.ok(),
    }
}

async fn report_gauges(state: StateHandle, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let (leases, keys, applied, (dedup_entries, dedup_bytes, _), (size, quota)) =
            state.read(|d| {
                (
                    d.state.lease_count(),
                    d.state.key_count(),
                    d.state.last_applied(),
                    d.state.dedup_usage(),
                    (d.state.footprint_bytes(), d.state.limits().max_state_bytes),
                )
            });
        metrics::gauge!(m::STATE_BYTES).set(size as f64);
        metrics::gauge!(m::STATE_QUOTA_BYTES).set(quota as f64);
        metrics::gauge!(m::DEDUP_ENTRIES).set(dedup_entries as f64);
        metrics::gauge!(m::DEDUP_BYTES).set(dedup_bytes as f64);
        metrics::gauge!(m::LIVE_LEASES).set(leases as f64);
        metrics::gauge!(m::LIVE_KEYS).set(keys as f64);
        metrics::gauge!(m::RAFT_APPLIED_INDEX).set(applied.get() as f64);
    }
}

impl NodeHandle {
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// How many Lock calls wait on this node for their turn (each ends answered, timed out or
    /// cancelled by its client, and is then forgotten).
    pub fn lock_waits(&self) -> usize {
        self.lock_waits.len()
    }

    /// Before a planned stop: if this node leads, hands leadership to the voter that has
    /// replicated the most and waits (at most two election timeouts) until another node leads,
    /// so the cluster goes on without an election timeout's pause. Returns the new leader; None
    /// if this node did not lead or the handover did not finish (the stop goes on anyway).
    pub async fn hand_over_leadership(&self) -> Option<u64> {
        let leads = self.raft.metrics().borrow_watched().current_leader == Some(self.node_id);
        if !leads {
            return None;
        }
        match crate::handover::hand_over(&self.raft, self.node_id, 2 * self.election_timeout).await
        {
            Ok(m) => {
                let leader = m.current_leader;
                info!(node_id = self.node_id, new_leader = ?leader, term = m.current_term, "handed leadership over before stopping");
                leader
            }
            // A single-node cluster: nobody to hand over to, nothing to report.
            Err(crate::handover::HandoverError::NoOtherVoter) => None,
            Err(e) => {
                warn!(node_id = self.node_id, error = %e, "stopping without handing leadership over");
                None
            }
        }
    }

    /// Elections this node called because the leader fell silent past its lease
    /// (`prompt_election.rs`).
    pub fn elections_called(&self) -> u64 {
        self.leader_contact.called()
    }

    /// Silent leaders this node found dead and dropped its lease on (`dead_leader.rs`).
    pub fn leaders_found_dead(&self) -> u64 {
        self.dead_leader.found()
    }

    pub fn state(&self) -> &StateHandle {
        &self.state
    }

    /// Re-reads every TLS certificate, key and CA file now (SIGHUP); they are also checked for
    /// changes every few seconds. A file that cannot be used is logged and the previous ones
    /// stay in use.
    pub fn reload_tls(&self) {
        self.tls_reload.notify_one();
    }

    /// How far this node's expiry loop has got in lessor time (see [`LessorProgress`]).
    pub fn lessor_progress(&self) -> tokio::sync::watch::Receiver<LessorProgress> {
        self.lessor_progress.clone()
    }

    /// Resolves with the reason once this node's Raft has failed for good (a storage or
    /// consensus error). The node then answers every call with NODE_FAILED and `/health` fails;
    /// its owner should shut it down and exit non-zero (`zaris serve` does).
    pub async fn failed(&self) -> String {
        self.health.failed().await
    }

    /// Stops serving, stops every task, and stops Raft.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        if let Err(e) = self.raft.shutdown().await {
            warn!(node_id = self.node_id, error = %e, "raft did not shut down cleanly");
        }
        info!(node_id = self.node_id, "node stopped");
    }
}
