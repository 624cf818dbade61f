//! `zaris serve`: configuration from flags, `ZARIS_*` environment variables and an optional TOML
//! file (flags and environment win over the file, the file over the defaults).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use tracing_subscriber::EnvFilter;
use zaris_core::DurationMs;
use zaris_server::{Member, Node, NodeConfig};

use crate::fault_args::FaultArgs;

/// Default data directory: relative to where the node is started.
const DEFAULT_DATA_DIR: &str = "./zaris-data";

#[derive(clap::Args, Debug, Default)]
#[command(
    after_help = "Examples:\n  zaris serve\n  zaris serve --node-id 1 --listen 127.0.0.1:7001 --peer-listen 127.0.0.1:7101 \\\n      --data-dir /var/lib/zaris/1 --http 127.0.0.1:9001 \\\n      --initial-cluster 1=127.0.0.1:7001/127.0.0.1:7101,2=127.0.0.1:7002/127.0.0.1:7102,3=127.0.0.1:7003/127.0.0.1:7103"
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
    /// Address for the client API (port 0: any free port). Default 127.0.0.1:7001.
    #[arg(long, env = "ZARIS_LISTEN")]
    listen: Option<SocketAddr>,
    /// Address for the Raft peer service, which only other members use (port 0: any free
    /// port). Default: the --listen IP, port 7101 (or 0 when --listen's port is 0).
    #[arg(long, env = "ZARIS_PEER_LISTEN")]
    peer_listen: Option<SocketAddr>,
    /// Address clients use to reach this node (`host:port`), if not the listen address. Default:
    /// the listen address, or this host's name and the listen port when listening on 0.0.0.0.
    #[arg(long, env = "ZARIS_ADVERTISE")]
    advertise: Option<String>,
    /// Address peers use to reach this node's Raft service, if not the peer listen address
    /// (defaults like --advertise).
    #[arg(long, env = "ZARIS_PEER_ADVERTISE")]
    peer_advertise: Option<String>,
    /// First members, `id=CLIENT/PEER,...`: each member's client and peer address, `host:port`
    /// (host: a name such as zaris-1, or an IP address); the lowest id bootstraps the cluster on
    /// first start, once every name resolves.
    #[arg(long, env = "ZARIS_INITIAL_CLUSTER")]
    initial_cluster: Option<String>,
    /// Start empty and wait to be added with `zaris member add` (never bootstrap).
    #[arg(long, env = "ZARIS_JOIN")]
    join: bool,
    /// Serve GET /metrics (Prometheus), /health and /ready on this address.
    #[arg(long, env = "ZARIS_HTTP")]
    http: Option<SocketAddr>,
    /// Host names the console and its JSON API on --http answer for, besides IP addresses,
    /// localhost and this node's advertised names (comma-separated, or the flag repeated); a
    /// request naming any other host is refused, so a page whose own name was made to resolve
    /// here (DNS rebinding) reads nothing.
    #[arg(
        long = "http-allowed-host",
        env = "ZARIS_HTTP_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    http_allowed_hosts: Vec<String>,
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
    /// The state quota, bytes: keys, values, leases, lock places, users and roles; writes that
    /// would grow the state past it are refused (CAPACITY_EXCEEDED). Also bounds the snapshots
    /// this node accepts from peers. Like every limit, fixed when the cluster is bootstrapped:
    /// give every member the same. Default 2147483648 (2 GiB), at most 8 GiB.
    #[arg(long, env = "ZARIS_MAX_STATE_BYTES")]
    max_state_bytes: Option<u64>,
    /// Cluster name; nodes of different clusters refuse each other. Default "zaris".
    #[arg(long, env = "ZARIS_CLUSTER_NAME")]
    cluster_name: Option<String>,
    /// Take a snapshot and compact the log every this many entries. Default 50000.
    #[arg(long, env = "ZARIS_SNAPSHOT_ENTRIES")]
    snapshot_entries: Option<u64>,
    /// Most batches of client writes this node has in Raft at once while it leads (group
    /// commit: while all are in flight, requests queue and the next batch takes them together).
    /// Default 1, at most 64.
    #[arg(long, env = "ZARIS_WRITE_INFLIGHT")]
    write_inflight: Option<usize>,
    /// Most keepalive batches (Renew entries) this node has in Raft at once while it leads.
    /// Default 1, at most 64.
    #[arg(long, env = "ZARIS_RENEW_INFLIGHT")]
    renew_inflight: Option<usize>,
    /// On a new cluster's first start, wait this long for the initial members' names to
    /// resolve before giving up, ms. Default 60000.
    #[arg(long, env = "ZARIS_RESOLVE_TIMEOUT_MS")]
    resolve_timeout_ms: Option<u64>,
    /// Once serving, write the bound address to this file (for scripts that use port 0).
    #[arg(long, env = "ZARIS_READY_FILE")]
    ready_file: Option<PathBuf>,
    /// Serve clients over TLS with this certificate chain (PEM); needs --tls-key. Files are
    /// re-read when they change and on SIGHUP.
    #[arg(long, env = "ZARIS_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "ZARIS_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS for clients. Needs
    /// --tls-cert.
    #[arg(long, env = "ZARIS_CLIENT_CACERT", requires = "tls_cert")]
    client_cacert: Option<PathBuf>,
    /// Mutual TLS between peers: this node's peer certificate (PEM), presented when accepting
    /// and when dialing; it must name the host of this node's peer address. Needs
    /// --peer-tls-key and --peer-cacert.
    #[arg(long, env = "ZARIS_PEER_TLS_CERT", requires_all = ["peer_tls_key", "peer_cacert"])]
    peer_tls_cert: Option<PathBuf>,
    /// The private key of --peer-tls-cert (PEM).
    #[arg(long, env = "ZARIS_PEER_TLS_KEY", requires = "peer_tls_cert")]
    peer_tls_key: Option<PathBuf>,
    /// The cluster's peer CA (PEM): every member's peer certificate must chain to it.
    #[arg(long, env = "ZARIS_PEER_CACERT", requires = "peer_tls_cert")]
    peer_cacert: Option<PathBuf>,
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
    peer_listen: Option<SocketAddr>,
    advertise: Option<String>,
    peer_advertise: Option<String>,
    initial_cluster: Option<String>,
    join: Option<bool>,
    http: Option<SocketAddr>,
    http_allowed_hosts: Option<Vec<String>>,
    election_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    revoke_rate: Option<u32>,
    min_ttl_ms: Option<u64>,
    max_state_bytes: Option<u64>,
    cluster_name: Option<String>,
    snapshot_entries: Option<u64>,
    write_inflight: Option<usize>,
    renew_inflight: Option<usize>,
    resolve_timeout_ms: Option<u64>,
    ready_file: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    client_cacert: Option<PathBuf>,
    peer_tls_cert: Option<PathBuf>,
    peer_tls_key: Option<PathBuf>,
    peer_cacert: Option<PathBuf>,
}

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// Parses `1=127.0.0.1:7001/127.0.0.1:7101,2=...`: each member's client and peer address.
/// An empty list is refused: set but empty (`ZARIS_INITIAL_CLUSTER=` in an env file) would
/// otherwise read as unset, and a fresh node would bootstrap a one-node cluster of its own.
pub fn parse_initial_cluster(text: &str) -> anyhow::Result<BTreeMap<u64, Member>> {
    let members = parse_pairs("initial cluster", "id=CLIENT/PEER", text)?;
    if members.is_empty() {
        bail!(
            "the initial cluster is empty: give id=CLIENT/PEER,... (or leave it unset for a \
             single-node cluster)"
        );
    }
    members
        .into_iter()
        .map(|(id, addresses)| {
            let Some((client, peer)) = addresses.split_once('/') else {
                bail!(
                    "initial cluster entry {id}={addresses}: give the member's client and peer \
                     address, as in {id}={addresses}/HOST:PEER_PORT (the Raft service has a port \
                     of its own, --peer-listen)"
                );
            };
            let (client, peer) = (client.trim(), peer.trim());
            for addr in [client, peer] {
                if let Err(why) = zaris_server::check_address(addr) {
                    bail!("initial cluster entry {id}={addresses}: {why}");
                }
            }
            Ok((id, Member::new(client, peer)))
        })
        .collect()
}

/// Parses an `id=host:port,...` list; `what` names it in errors.
#[cfg(feature = "fault-injection")]
pub(crate) fn parse_members(what: &str, text: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let members = parse_pairs(what, "id=host:port", text)?;
    for (id, addr) in &members {
        if let Err(why) = zaris_server::check_address(addr) {
            bail!("{what} entry {id}={addr}: {why}");
        }
    }
    Ok(members)
}

/// Parses an `id=VALUE,...` list (`form` says what an entry looks like); `what` names it in
/// errors.
fn parse_pairs(what: &str, form: &str, text: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut members = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((id, addr)) = part.split_once('=') else {
            bail!("{what} entry {part:?} is not {form}");
        };
        let id: u64 = id
            .trim()
            .parse()
            .with_context(|| format!("{what} entry {part:?}: bad node id"))?;
        let addr = addr.trim();
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
    config.peer_listen = args
        .peer_listen
        .or(file.peer_listen)
        .unwrap_or_else(|| NodeConfig::default_peer_listen(config.listen));
    config.advertise = args.advertise.clone().or(file.advertise);
    config.peer_advertise = args.peer_advertise.clone().or(file.peer_advertise);
    if let Some(text) = args
        .initial_cluster
        .as_ref()
        .or(file.initial_cluster.as_ref())
    {
        config.initial_cluster = parse_initial_cluster(text)?;
    }
    config.join = args.join || file.join.unwrap_or(false);
    config.http_listen = args.http.or(file.http);
    config.http_allowed_hosts = if args.http_allowed_hosts.is_empty() {
        file.http_allowed_hosts.unwrap_or_default()
    } else {
        args.http_allowed_hosts.clone()
    };
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
    if let Some(bytes) = args.max_state_bytes.or(file.max_state_bytes) {
        config.limits.max_state_bytes = bytes;
    }
    if let Some(name) = args.cluster_name.clone().or(file.cluster_name) {
        config.cluster_name = name;
    }
    if let Some(entries) = args.snapshot_entries.or(file.snapshot_entries) {
        config.snapshot_entries = entries;
    }
    if let Some(batches) = args.write_inflight.or(file.write_inflight) {
        config.write_inflight = batches;
    }
    if let Some(batches) = args.renew_inflight.or(file.renew_inflight) {
        config.renew_inflight = batches;
    }
    if let Some(ms) = args.resolve_timeout_ms.or(file.resolve_timeout_ms) {
        config.resolve_timeout_ms = ms;
    }
    config.client_tls = tls_files(
        "",
        args.tls_cert.clone().or(file.tls_cert),
        args.tls_key.clone().or(file.tls_key),
        args.client_cacert.clone().or(file.client_cacert),
    )?;
    config.peer_tls = tls_files(
        "peer_",
        args.peer_tls_cert.clone().or(file.peer_tls_cert),
        args.peer_tls_key.clone().or(file.peer_tls_key),
        args.peer_cacert.clone().or(file.peer_cacert),
    )?;
    config.faults = args.faults.to_config()?;
    config.validate()?;
    Ok((config, args.ready_file.clone().or(file.ready_file)))
}

/// One listener's TLS files from flags or the config file: a certificate and its key together,
/// or neither (a CA alone is a mistake, not plaintext).
fn tls_files(
    prefix: &str,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
) -> anyhow::Result<Option<zaris_server::TlsFiles>> {
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(zaris_server::TlsFiles { cert, key, ca })),
        (None, None) if ca.is_none() => Ok(None),
        _ => bail!(
            "{prefix}tls_cert and {prefix}tls_key go together{}",
            if prefix.is_empty() {
                " (client_cacert needs them too)"
            } else {
                " (peer_cacert needs them too)"
            }
        ),
    }
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
    warn_plaintext(&config);
    let node = Node::start(config).await?;
    println!(
        "zaris node {node_id} serving clients on {}, peers on {}",
        node.addr, node.peer_addr
    );
    if let Some(http) = node.http_addr {
        println!("zaris node {node_id} metrics on http://{http}/metrics");
    }
    if let Some(path) = ready_file {
        // The client address, then the peer address, a line each. Written then renamed, so a
        // reader never sees a partial file.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\n{}\n", node.addr, node.peer_addr))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("cannot write ready file {}", path.display()))?;
    }
    let mut signals = crate::cli::signals::Signals::install()?;
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot handle SIGHUP")?;
    let failure = loop {
        tokio::select! {
            _ = signals.recv() => break None,
            reason = node.failed() => break Some(reason),
            Some(()) = hangups.recv() => {
                tracing::info!(node_id, "SIGHUP: re-reading the TLS files");
                node.reload_tls();
            }
        }
    };
    tracing::info!(node_id, "stopping");
    // A planned stop of the leader hands leadership over first: the others need not wait an
    // election timeout to notice it is gone. (A failed node stops at once.)
    if failure.is_none() {
        node.hand_over_leadership().await;
    }
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

/// Says loudly when a listener takes plaintext on an address beyond this machine: anyone who
/// reaches it can read and write everything (docs/security.md).
fn warn_plaintext(config: &NodeConfig) {
    for (what, addr, tls) in [
        ("client", config.listen, config.client_tls.is_some()),
        ("peer", config.peer_listen, config.peer_tls.is_some()),
    ] {
        if !tls && !addr.ip().is_loopback() {
            let flags = if what == "client" {
                "--tls-cert/--tls-key"
            } else {
                "--peer-tls-cert/--peer-tls-key/--peer-cacert"
            };
            eprintln!(
                "WARNING: zaris node {} serves its {what} listener on {addr} in PLAINTEXT: \
                 anyone who can reach it can read and change every lease, lock and key{}. Use \
                 {flags}, or listen on a loopback address.",
                config.node_id,
                if what == "peer" {
                    ", and speak Raft to this node"
                } else {
                    ""
                }
            );
            tracing::warn!(node_id = config.node_id, listener = what, %addr, "plaintext listener on a non-loopback address");
        }
    }
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
        let members = parse_initial_cluster(
            "1=127.0.0.1:7001/127.0.0.1:7101, 2 = zaris-2:7001 / zaris-2:7101",
        )
        .expect("parse");
        assert_eq!(
            members.get(&2),
            Some(&Member::new("zaris-2:7001", "zaris-2:7101"))
        );
        let twice = parse_initial_cluster("1=127.0.0.1:7001/127.0.0.1:7101,1=a:1/a:2");
        assert!(format!("{:#}", twice.expect_err("twice")).contains("node 1 twice"));
        assert!(parse_initial_cluster("x=127.0.0.1:7001/127.0.0.1:7101").is_err());
        assert!(parse_initial_cluster("1=nowhere/127.0.0.1:7101").is_err());
        assert!(parse_initial_cluster("1=127.0.0.1:7001/nowhere").is_err());
        assert!(parse_initial_cluster("127.0.0.1:7001").is_err());
        // The form before the peer port: the error says what to add.
        let old = parse_initial_cluster("1=127.0.0.1:7001").expect_err("no peer address");
        let message = format!("{old:#}");
        assert!(
            message.contains("1=127.0.0.1:7001/HOST:PEER_PORT"),
            "{message}"
        );
        assert!(parse_initial_cluster("").is_err());
        assert!(parse_initial_cluster(" , ").is_err());
    }

    #[test]
    fn flags_override_the_file_and_defaults_apply() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("zaris.toml");
        std::fs::write(
            &file,
            "node_id = 3\nelection_timeout_ms = 600\nheartbeat_ms = 50\nmin_ttl_ms = 1000\nsnapshot_entries = 70\nwrite_inflight = 2\n",
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(file),
            heartbeat_ms: Some(40),
            renew_inflight: Some(8),
            ..ServeArgs::default()
        };
        let (config, _) = build_config(&args).expect("config");
        assert_eq!(config.snapshot_entries, 70);
        assert_eq!((config.write_inflight, config.renew_inflight), (2, 8));
        assert_eq!(config.node_id, 3);
        assert_eq!(config.election_timeout_ms, 600);
        assert_eq!(config.heartbeat_ms, 40);
        assert_eq!(config.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert_eq!(config.peer_listen, SocketAddr::from(([127, 0, 0, 1], 7101)));
        // The peer listener follows the client listener's interface unless told otherwise.
        let args = ServeArgs {
            listen: Some(SocketAddr::from(([0, 0, 0, 0], 7001))),
            ..ServeArgs::default()
        };
        let (config, _) = build_config(&args).expect("config");
        assert_eq!(config.peer_listen, SocketAddr::from(([0, 0, 0, 0], 7101)));
        let args = ServeArgs {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 7101))),
            ..ServeArgs::default()
        };
        let error = build_config(&args).expect_err("one port for both");
        assert!(error.to_string().contains("--peer-listen"), "{error}");
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
            max_state_bytes: Some(1024),
            ..ServeArgs::default()
        };
        let error = build_config(&args).expect_err("a quota below its minimum");
        assert!(
            error
                .to_string()
                .contains("max_state_bytes must be between"),
            "{error:#}"
        );
        let args = ServeArgs {
            snapshot_entries: Some(0),
            ..ServeArgs::default()
        };
        let error = build_config(&args).expect_err("no snapshot interval");
        assert!(error.to_string().contains("snapshot entries"));
        for (write, renew) in [(Some(0), None), (None, Some(65))] {
            let args = ServeArgs {
                write_inflight: write,
                renew_inflight: renew,
                ..ServeArgs::default()
            };
            let error = build_config(&args).expect_err("pipelining out of range");
            assert!(
                error.to_string().contains("-inflight) must be 1 to 64"),
                "{error}"
            );
        }
    }
}
