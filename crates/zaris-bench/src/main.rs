//! `zaris-bench`: measures a local 3-node cluster of real `zaris serve` processes on 127.0.0.1.
//!
//! Figures, not assertions: tests never assert timings. Run it in release mode:
//! `cargo run --release -p zaris-bench -- --zaris target/release/zaris`.

mod compare;
mod console;
mod failover;
mod floor;
mod load;
mod memory;
mod proto;
mod scale;
mod tls;
mod workloads;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use zaris_client::{Client, ClientOptions};
use zaris_testkit::{Serve, grow_cluster};

/// How long a node may take to start.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// The workloads' end-to-end bound per call.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Parser, Debug)]
#[command(about = "Load figures for a local 3-node Zaris cluster")]
pub(crate) struct Args {
    /// The `zaris` binary to run (build it with `cargo build --release -p zaris`).
    #[arg(long, default_value = "target/release/zaris")]
    zaris: PathBuf,
    /// Seconds per throughput workload.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent clients for grants and puts.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Leases kept alive in the keepalive workload.
    #[arg(long, default_value_t = 10_000)]
    keepalive_leases: usize,
    /// Leases expiring together in the burst workload.
    #[arg(long, default_value_t = 20_000)]
    burst_leases: usize,
    /// Leases (each with one bound key) in the in-memory state-size measurement.
    #[arg(long, default_value_t = 1_000_000)]
    memory_leases: u64,
    /// Cluster size: 1 or 3.
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Skip the cluster workloads (memory only).
    #[arg(long)]
    memory_only: bool,
    /// Instead of the workloads, measure what TLS costs: grants and puts on a plaintext cluster,
    /// then on one with mutual TLS for clients and peers, in the same run.
    #[arg(long)]
    tls_overhead: bool,
    /// Instead of the workloads, measure failover: stopping the leader (kill -9, then SIGTERM)
    /// to the first acknowledged write, on fresh clusters at the default timings.
    #[arg(long)]
    failover: bool,
    /// The Zaris nodes' election timeout for --failover (default: the server's, 1,000 ms).
    #[arg(long)]
    election_timeout_ms: Option<u64>,
    /// The Zaris nodes' heartbeat interval for --failover (default: the server's, 100 ms).
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Clusters per kind of stop in the failover measurement (and per system with --compare).
    #[arg(long, default_value_t = 5)]
    failover_runs: usize,
    /// Instead of the workloads, run the lease workloads side by side against a 3-member etcd
    /// cluster (Debian's etcd-server, installed with apt-get if missing) and print one table.
    #[arg(long, value_parser = ["etcd"])]
    compare: Option<String>,
    /// The --compare workloads to run, comma-separated (default: all of them). `populate` also
    /// measures memory.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(compare::COMPARE_WORKLOADS), default_values_t = compare::COMPARE_WORKLOADS.iter().map(|w| w.to_string()))]
    workloads: Vec<String>,
    /// Runs of each --compare workload per system, the two systems alternating which goes first;
    /// a row shows the run pair with the median ratio and lists every pair's ratio. Populate,
    /// the RSS it leaves and failover run once (failover has --failover-runs).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=20))]
    rounds: u64,
    /// The etcd binary for --compare (default: Debian's /usr/bin/etcd).
    #[arg(long)]
    etcd: Option<PathBuf>,
    /// Leases (each with a key) loaded into each system by --compare before measuring memory.
    #[arg(long, default_value_t = 100_000)]
    compare_leases: usize,
    /// Instead of the workloads, load a 3-node cluster through the API with this many leases,
    /// each with a key (1,000,000 if no number is given), and report the populate rate, a single
    /// writer's latency meanwhile, each node's resident size, a killed follower's restart, and
    /// the expiry of all those leases at one instant (with the writer's latency meanwhile).
    #[arg(long, num_args = 0..=1, default_missing_value = "1000000")]
    scale: Option<u64>,
    /// Instead of the workloads, load a 3-node cluster (with `--http`) with this many leases,
    /// each with a key (100,000 if no number is given), and time the pages of the console's
    /// JSON API, asked of the leader and of a follower.
    #[arg(long, num_args = 0..=1, default_missing_value = "100000")]
    console: Option<u64>,
    /// Internal (the `floor*` workloads): serve as a node of the bare replication pipeline.
    #[arg(long, hide = true, value_parser = ["leader", "leader-api", "follower"])]
    floor_node: Option<String>,
    /// Internal: the floor node's log directory.
    #[arg(long, hide = true, default_value = ".")]
    floor_dir: PathBuf,
    /// Internal: a floor leader's followers (host:port, comma-separated).
    #[arg(long, hide = true, value_delimiter = ',')]
    floor_followers: Vec<String>,
    /// Async worker threads of a gRPC floor leader: 1 (the default) runs everything, the rounds
    /// included, on one thread; more measures what a multi-threaded runtime's hand-offs add.
    /// The bench passes it to the floor nodes it starts; the `w2` floors always run their leader
    /// on a Zaris node's count (one per core).
    #[arg(long, hide = true, env = "ZARIS_BENCH_FLOOR_WORKERS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    floor_workers: u16,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(role) = &args.floor_node {
        return floor::serve_node(
            role,
            &args.floor_dir,
            &args.floor_followers,
            args.floor_workers.into(),
        );
    }
    // Memory first, in a fresh process state, before the runtime and clients allocate.
    memory::report(args.memory_leases);
    if args.memory_only {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.tls_overhead {
        return runtime.block_on(tls::overhead(&args));
    }
    if args.compare.is_some() {
        // Interrupted, the run is dropped, and with it every node and member it started.
        return runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut terminate = signal(SignalKind::terminate())?;
            let mut hangup = signal(SignalKind::hangup())?;
            tokio::select! {
                result = compare::run(&args) => result,
                _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted"),
                _ = terminate.recv() => anyhow::bail!("terminated"),
                _ = hangup.recv() => anyhow::bail!("hung up"),
            }
        });
    }
    if args.failover {
        return runtime.block_on(failover::compare(&args));
    }
    if let Some(count) = args.scale {
        return runtime.block_on(scale::run(&args, count));
    }
    if let Some(count) = args.console {
        return runtime.block_on(console::run(&args, count));
    }
    runtime.block_on(async {
        let root = tempfile::tempdir()?;
        // Node logs stay in the temporary directory: the figures are what this prints.
        let nodes = grow_cluster(args.nodes, |id| {
            Serve::new(&args.zaris, id, root.path()).ready_timeout(READY_TIMEOUT)
        })
        .await?;
        let addrs: Vec<String> = nodes.iter().map(|n| n.endpoint().to_owned()).collect();
        println!(
            "cluster: {} zaris processes on {}",
            args.nodes,
            addrs.join(", ")
        );
        let options = ClientOptions::default().with_timeout(CLIENT_TIMEOUT);
        let client = Client::connect_with(addrs, options).await?;
        let duration = Duration::from_secs(args.seconds);
        workloads::grants(&client, args.clients, duration).await?;
        workloads::puts_with_lease(&client, args.clients, duration).await?;
        workloads::keepalives(&client, args.keepalive_leases, duration).await?;
        workloads::expiry_lag(&client, 200).await?;
        workloads::revoke_burst(&client, args.burst_leases).await?;
        // Gone before the temporary directory is removed.
        for mut node in nodes {
            node.kill().await;
        }
        Ok(())
    })
}
