//! `zaris serve`: configuration from flags, `ZARIS_*` environment variables and an optional TOML
//! file (flags and environment win over the file, the file over the defaults).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use tracing_subscriber::EnvFilter;
use zaris_core::DurationMs;
use zaris_server::{Node, NodeConfig};

use crate::fault_args::FaultArgs;

/// Default data directory: relative to where the node is started.
const DEFAULT_DATA_DIR: &str = "./zaris-data";

#[derive(clap::Args, Debug, Default)]
#[command(
    after_help = "Examples:\n  zaris serve\n  zaris serve --node-id 1 --listen 127.0.0.1:7001 --data-dir /var/lib/zaris/1 \\\n      --initial-cluster 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003 --http 127.0.0.1:9001"
)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (snake_case keys, e.g. `node_id = 1`).
    #[arg(long, env = "ZARIS_CONFIG")]
    config: Option<PathBuf>,
    /// This node's id (≥ 1, never reused). Default 1.
    #[arg(long, env = "ZARIS_NODE_ID")]
    node_id: Option<u64>,
    /// Where the node keeps its log, vote and snapshots. Default ./zaris-data.
    #[arg(long, env = "ZARIS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address for the client API and Raft peers (port 0: any free port). Default 127.0.0.1:7001.
    #[arg(long, env = "ZARIS_LISTEN")]
    listen: Option<SocketAddr>,
    /// Address others use to reach this node (`host:port`), if not the listen address. Default:
    /// the listen address, or this host's name and the listen port when listening on 0.0.0.0.
    #[arg(long, env = "ZARIS_ADVERTISE")]
    advertise: Option<String>,
    /// First members, `id=host:port,...` (host: a name such as zaris-1, or an IP address); the
    /// lowest id bootstraps the cluster on first start, once every name resolves.
    #[arg(long, env = "ZARIS_INITIAL_CLUSTER")]
    initial_cluster: Option<String>,
    /// Start empty and wait to be added with `zaris member add` (never bootstrap).
    #[arg(long, env = "ZARIS_JOIN")]
    join: bool,
    /// Serve GET /metrics (Prometheus), /health and /ready on this address.
    #[arg(long, env = "ZARIS_HTTP")]
    http: Option<SocketAddr>,
    /// Upper bound of the Raft election timeout, ms. Default 1000.
    #[arg(long, env = "ZARIS_ELECTION_TIMEOUT_MS")]
    election_timeout_ms: Option<u64>,
    /// Raft heartbeat interval, ms. Default 100.
    #[arg(long, env = "ZARIS_HEARTBEAT_MS")]
    heartbeat_ms: Option<u64>,
    /// Most leases expired per second. Default 10000.
    #[arg(long, env = "ZARIS_REVOKE_RATE")]
    revoke_rate: Option<u32>,
    /// Shortest TTL a lease may have, ms (must exceed the election timeout). Default 2000.
    #[arg(long, env = "ZARIS_MIN_TTL_MS")]
    min_ttl_ms: Option<u64>,
    /// Cluster name; nodes of different clusters refuse each other. Default "zaris".
    #[arg(long, env = "ZARIS_CLUSTER_NAME")]
    cluster_name: Option<String>,
    /// Take a snapshot and compact the log every this many entries. Default 50000.
    #[arg(long, env = "ZARIS_SNAPSHOT_ENTRIES")]
    snapshot_entries: Option<u64>,
    /// On a new cluster's first start, wait this long for the initial members' names to
    /// resolve before giving up, ms. Default 60000.
    #[arg(long, env = "ZARIS_RESOLVE_TIMEOUT_MS")]
    resolve_timeout_ms: Option<u64>,
    /// Once serving, write the bound address to this file (for scripts that use port 0).
    #[arg(long, env = "ZARIS_READY_FILE")]
    ready_file: Option<PathBuf>,
    #[command(flatten)]
    faults: FaultArgs,
}

/// The same settings, from a file.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    node_id: Option<u64>,
    data_dir: Option<PathBuf>,
    listen: Option<SocketAddr>,
    advertise: Option<String>,
    initial_cluster: Option<String>,
    join: Option<bool>,
    http: Option<SocketAddr>,
    election_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    revoke_rate: Option<u32>,
    min_ttl_ms: Option<u64>,
    cluster_name: Option<String>,
    snapshot_entries: Option<u64>,
    resolve_timeout_ms: Option<u64>,
    ready_file: Option<PathBuf>,
}

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// Parses `1=127.0.0.1:7001,2=127.0.0.1:7002`.
/// An empty list is refused: set but empty (`ZARIS_INITIAL_CLUSTER=` in an env file) would
/// otherwise read as unset, and a fresh node would bootstrap a one-node cluster of its own.
pub fn parse_initial_cluster(text: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let members = parse_members("initial cluster", text)?;
    if members.is_empty() {
        bail!(
            "the initial cluster is empty: give id=host:port,... (or leave it unset for a \
             single-node cluster)"
        );
    }
    Ok(members)
}

/// Parses an `id=host:port,...` list; `what` names it in errors.
pub(crate) fn parse_members(what: &str, text: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut members = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((id, addr)) = part.split_once('=') else {
            bail!("{what} entry {part:?} is not id=host:port");
        };
        let id: u64 = id
            .trim()
            .parse()
            .with_context(|| format!("{what} entry {part:?}: bad node id"))?;
        let addr = addr.trim();
        if let Err(why) = zaris_server::check_address(addr) {
            bail!("{what} entry {part:?}: {why}");
        }
        if members.insert(id, addr.to_string()).is_some() {
            bail!("{what} names node {id} twice");
        }
    }
    Ok(members)
}

pub(crate) fn build_config(args: &ServeArgs) -> anyhow::Result<(NodeConfig, Option<PathBuf>)> {
    let file = match &args.config {
        Some(path) => read_file(path)?,
        None => FileConfig::default(),
    };
    let node_id = args.node_id.or(file.node_id).unwrap_or(1);
    let data_dir = args
        .data_dir
        .clone()
        .or(file.data_dir)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    let mut config = NodeConfig::new(node_id, data_dir);
    if let Some(listen) = args.listen.or(file.listen) {
        config.listen = listen;
    }
    config.advertise = args.advertise.clone().or(file.advertise);
    if let Some(text) = args
        .initial_cluster
        .as_ref()
        .or(file.initial_cluster.as_ref())
    {
        config.initial_cluster = parse_initial_cluster(text)?;
    }
    config.join = args.join || file.join.unwrap_or(false);
    config.http_listen = args.http.or(file.http);
    if let Some(ms) = args.election_timeout_ms.or(file.election_timeout_ms) {
        config.election_timeout_ms = ms;
    }
    if let Some(ms) = args.heartbeat_ms.or(file.heartbeat_ms) {
        config.heartbeat_ms = ms;
    }
    if let Some(rate) = args.revoke_rate.or(file.revoke_rate) {
        config.lessor.revoke_rate_per_s = rate;
        config.lessor.revoke_burst = rate;
    }
    if let Some(ms) = args.min_ttl_ms.or(file.min_ttl_ms) {
        config.limits.min_ttl_ms = DurationMs::new(ms);
    }
    if let Some(name) = args.cluster_name.clone().or(file.cluster_name) {
        config.cluster_name = name;
    }
    if let Some(entries) = args.snapshot_entries.or(file.snapshot_entries) {
        config.snapshot_entries = entries;
    }
    if let Some(ms) = args.resolve_timeout_ms.or(file.resolve_timeout_ms) {
        config.resolve_timeout_ms = ms;
    }
    config.faults = args.faults.to_config()?;
    config.validate()?;
    Ok((config, args.ready_file.clone().or(file.ready_file)))
}

/// The log filter unless `RUST_LOG` says otherwise. openraft's heartbeat worker and replication
/// module warn on every failed RPC to a peer (a dead peer: a line per heartbeat, about ten a
/// second); Zaris reports peer reachability itself, rate-limited (`network.rs`), so those two are
/// kept to errors. The replication submodules that warn about real trouble (a storage contract
/// violation, a snapshot that cannot be read) keep their warnings. openraft's membership API logs
/// every membership call that reaches a follower (a routine redirect) at ERROR; the client gets
/// that answer as NOT_LEADER, so that module is silenced.
const DEFAULT_LOG_FILTER: &str = "info,openraft=warn,openraft::core::heartbeat=error,\
    openraft::replication=error,openraft::replication::stream_state=warn,\
    openraft::replication::snapshot_transmitter=warn,openraft::replication::replication_handle=warn,\
    openraft::raft::api::management=off";

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let (config, ready_file) = build_config(&args)?;
    let node_id = config.node_id;
    if let Some(what) = config.faults.unsafe_settings() {
        eprintln!(
            "WARNING: FAULT INJECTION ACTIVE on zaris node {node_id}: {what}. This node is \
             deliberately unsafe; never run it outside tests."
        );
    }
    let node = Node::start(config).await?;
    println!("zaris node {node_id} serving on {}", node.addr);
    if let Some(http) = node.http_addr {
        println!("zaris node {node_id} metrics on http://{http}/metrics");
    }
    if let Some(path) = ready_file {
        // Write then rename, so a reader never sees a partial address.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, node.addr.to_string())
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("cannot write ready file {}", path.display()))?;
    }
    let failure = tokio::select! {
        () = wait_for_signal() => None,
        reason = node.failed() => Some(reason),
    };
    tracing::info!(node_id, "stopping");
    node.shutdown().await;
    match failure {
        None => Ok(()),
        // Exit non-zero so a supervisor (systemd, Docker's restart policy) restarts the node:
        // it recovers from its data dir, or keeps failing loudly.
        Some(reason) => Err(anyhow::anyhow!(
            "zaris node {node_id} stopped because its Raft failed: {reason}"
        )),
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_log_filter_parses() {
        let filter = EnvFilter::try_new(DEFAULT_LOG_FILTER).expect("valid directives");
        let text = filter.to_string();
        assert!(text.contains("openraft::replication=error"), "{text}");
    }

    #[test]
    fn initial_cluster_parses_and_rejects_nonsense() {
        let members = parse_initial_cluster("1=127.0.0.1:7001, 2=127.0.0.1:7002").expect("parse");
        assert_eq!(members.get(&2).map(String::as_str), Some("127.0.0.1:7002"));
        assert!(parse_initial_cluster("1=127.0.0.1:7001,1=127.0.0.1:7002").is_err());
        assert!(parse_initial_cluster("x=127.0.0.1:7001").is_err());
        assert!(parse_initial_cluster("1=nowhere").is_err());
        assert!(parse_initial_cluster("127.0.0.1:7001").is_err());
        assert!(parse_initial_cluster("").is_err());
        assert!(parse_initial_cluster(" , ").is_err());
    }

    #[test]
    fn flags_override_the_file_and_defaults_apply() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("zaris.toml");
        std::fs::write(
            &file,
            "node_id = 3\nelection_timeout_ms = 600\nheartbeat_ms = 50\nmin_ttl_ms = 1000\nsnapshot_entries = 70\n",
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(file),
            heartbeat_ms: Some(40),
            ..ServeArgs::default()
        };
        let (config, _) = build_config(&args).expect("config");
        assert_eq!(config.snapshot_entries, 70);
        assert_eq!(config.node_id, 3);
        assert_eq!(config.election_timeout_ms, 600);
        assert_eq!(config.heartbeat_ms, 40);
        assert_eq!(config.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
    }

    #[test]
    fn bad_settings_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("zaris.toml");
        std::fs::write(&file, "no_such_setting = 1\n").expect("write");
        let args = ServeArgs {
            config: Some(file),
            ..ServeArgs::default()
        };
        assert!(build_config(&args).is_err());
        let args = ServeArgs {
            min_ttl_ms: Some(500),
            ..ServeArgs::default()
        };
        let error = build_config(&args).expect_err("TTL below election timeout");
        assert!(
            error
                .to_string()
                .contains("must exceed the election timeout")
        );
        let args = ServeArgs {
            snapshot_entries: Some(0),
            ..ServeArgs::default()
        };
        let error = build_config(&args).expect_err("no snapshot interval");
        assert!(error.to_string().contains("snapshot entries"));
    }
}
