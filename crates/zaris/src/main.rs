//! `zaris`: run a node (`zaris serve`) or drive a cluster (every other subcommand).

mod cli;
mod demo;
mod dump;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "zaris",
    version,
    about = "Zaris: a Raft-replicated lease store (leases, lease-bound keys, fenced locks)",
    after_help = "See the product at work on a local 3-node cluster (started and removed again):\n  zaris demo\nStart a single-node cluster on 127.0.0.1:7001 with data in ./zaris-data:\n  zaris serve\nThen, from another terminal:\n  zaris lease grant --ttl 10s"
)]
struct Cli {
    #[command(flatten)]
    global: cli::GlobalOpts,
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand, Debug)]
enum Top {
    /// Run a Zaris node.
    Serve(Box<serve::ServeArgs>),
    /// Start a local 3-node cluster and act out a worker failover: lease-backed lock, presence,
    /// SIGKILL, takeover with a higher fencing token, a stale write refused, a leader killed.
    #[command(after_help = "Example: zaris demo")]
    Demo(demo::DemoArgs),
    /// Print a stopped node's Raft log as JSON lines: a header (committed index, last entry,
    /// snapshot), then one line per entry with its term, kind, command and payload digest.
    Dump(dump::DumpArgs),
    /// One worker of `zaris demo` (internal).
    #[command(hide = true)]
    DemoWorker(demo::worker::WorkerArgs),
    #[command(flatten)]
    Client(cli::Command),
}

fn main() -> ExitCode {
    let args = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match args.command {
            Top::Serve(serve_args) => serve::run(*serve_args).await,
            Top::Demo(demo_args) => demo::run(demo_args).await,
            Top::DemoWorker(worker_args) => demo::worker::run(worker_args).await,
            Top::Dump(dump_args) => dump::run(dump_args).await,
            Top::Client(command) => cli::run(args.global, command).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
