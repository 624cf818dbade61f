//! `zaris`: run a node (`zaris serve`) or drive a cluster (every other subcommand).

mod cert;
mod cli;
mod demo;
mod dump;
mod fault_args;
mod serve;
mod snapshot;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Back up a running cluster to a file, check a backup, or seed a new cluster from one.
    #[command(subcommand, after_help = "Example: zaris snapshot save backup.zsnap")]
    Snapshot(snapshot::SnapshotCmd),
    /// Make the certificates of a TLS cluster: CAs, member and client certificates.
    #[command(
        subcommand,
        after_help = "Example: zaris cert init certs --node zaris-1 --node zaris-2 --node zaris-3"
    )]
    Cert(cert::CertCmd),
    /// One worker of `zaris demo` (internal).
    #[command(hide = true)]
    DemoWorker(demo::worker::WorkerArgs),
    #[command(flatten)]
    Client(cli::Command),
}

/// Subcommands that are not clients of a cluster: the client options (`--endpoints`, `--output`,
/// `--timeout`) mean nothing to them.
const NOT_CLIENTS: [&str; 5] = ["serve", "demo", "dump", "demo-worker", "cert"];

/// The command line, with the client options hidden from the help of the subcommands that are
/// not clients. The options are `global` so that a client command takes them before or after its
/// name; clap copies a global option into every subcommand that has no option of that name, so
/// these subcommands get a hidden, non-global copy of their own (accepted, and ignored).
fn command() -> clap::Command {
    let mut command = Cli::command();
    let client_options: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .cloned()
        .collect();
    for name in NOT_CLIENTS {
        command = command.mut_subcommand(name, |mut sub| {
            for arg in &client_options {
                sub = sub.arg(arg.clone().global(false).hide(true));
            }
            sub
        });
    }
    command
}

fn main() -> ExitCode {
    let args = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(args) => args,
        Err(err) => err.exit(),
    };
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
            Top::Cert(command) => cert::run(command),
            Top::Snapshot(command) => snapshot::run(args.global, command).await,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn help_of(name: &str) -> String {
        let mut command = command();
        // Global options reach subcommands when the command is built, as parsing does.
        command.build();
        match command.find_subcommand_mut(name) {
            Some(sub) => sub.render_long_help().to_string(),
            None => panic!("no subcommand {name}"),
        }
    }

    #[test]
    fn only_client_commands_list_the_client_options() {
        for name in ["serve", "demo", "dump"] {
            let help = help_of(name);
            // And --help itself works (it printed a parse error once).
            let parsed = command().try_get_matches_from(["zaris", name, "--help"]);
            assert!(
                parsed
                    .as_ref()
                    .is_err_and(|err| err.kind() == clap::error::ErrorKind::DisplayHelp),
                "{name} --help: {parsed:?}"
            );
            for option in ["--endpoints", "--output", "--timeout"] {
                assert!(
                    !help.contains(option),
                    "{name} --help lists {option}:\n{help}"
                );
            }
        }
        for name in ["status", "put", "lease"] {
            let help = help_of(name);
            assert!(help.contains("--endpoints"), "{name} --help:\n{help}");
        }
    }

    #[test]
    fn client_options_parse_before_or_after_the_subcommand() {
        for args in [
            ["zaris", "--endpoints", "127.0.0.1:7009", "status"],
            ["zaris", "status", "--endpoints", "127.0.0.1:7009"],
        ] {
            let matches = command()
                .try_get_matches_from(args)
                .unwrap_or_else(|err| panic!("{args:?}: {err}"));
            let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(cli.global.endpoints, ["127.0.0.1:7009"]);
        }
    }
}
