//! `zaris-jepsen`: run one seeded test, the CI matrix, or the self-test.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use zaris_jepsen::nemesis::Fault;
use zaris_jepsen::run::{self, RunConfig, RunOutcome};
use zaris_jepsen::scenarios;
use zaris_jepsen::workload::Workload;

#[derive(Parser, Debug)]
#[command(
    name = "zaris-jepsen",
    about = "Jepsen-style fault injection and checking for Zaris",
    after_help = "Example: cargo run -p zaris-jepsen -- test --workload lock --nemesis partition,pause --time 60"
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Args, Debug)]
struct Common {
    /// The zaris binary to test; by default the harness builds one with the `fault-injection`
    /// feature (`cargo build -p zaris --features fault-injection`) next to itself.
    #[arg(long, global = true, env = "ZARIS_BIN")]
    zaris: Option<PathBuf>,
    /// Where runs keep their histories and logs.
    #[arg(long, global = true, default_value = "target/jepsen")]
    store: PathBuf,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// One run.
    #[command(
        after_help = "Example: zaris-jepsen test --workload register --nemesis kill --nodes 5 --seed 7"
    )]
    Test {
        #[arg(long, value_enum, default_value = "register")]
        workload: Workload,
        /// Faults, comma separated.
        #[arg(long, value_enum, value_delimiter = ',')]
        nemesis: Vec<Fault>,
        /// Seconds of faults (a quiet, healed phase follows).
        #[arg(long, default_value_t = 30)]
        time: u64,
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Random seed; printed, so a run can be reproduced.
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long, default_value_t = 5)]
        concurrency: u64,
        /// Run the nodes with a deliberate bug (see `selftest`).
        #[arg(long)]
        bug: Vec<String>,
    },
    /// The CI matrix of short scenarios (3 and 5 nodes); every one must pass.
    #[command(after_help = "Example: zaris-jepsen ci --seed 1")]
    Ci {
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Runs each deliberate server bug in the scenario that must expose it; passes only if every
    /// bug is caught.
    #[command(after_help = "Example: zaris-jepsen selftest")]
    Selftest {
        #[arg(long)]
        seed: Option<u64>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn main_async(cli: Cli) -> Result<bool> {
    let zaris = match &cli.common.zaris {
        Some(path) => path.clone(),
        None => build_zaris()?,
    };
    let store = cli.common.store.clone();
    match cli.command {
        Cmd::Test {
            workload,
            nemesis,
            time,
            nodes,
            seed,
            concurrency,
            bug,
        } => {
            let seed = seed.unwrap_or_else(rand::random);
            let faults: Vec<String> = nemesis.iter().map(|f| f.name().to_owned()).collect();
            let config = RunConfig {
                name: format!("{}-{}", workload.name(), faults.join("-")),
                workload,
                faults: nemesis,
                nodes,
                time: Duration::from_secs(time),
                seed,
                concurrency,
                bugs: bug.clone(),
                zaris,
                store,
            };
            println!("seed {seed}");
            let outcome = run::run(&config).await?;
            print_outcome(&config, &outcome);
            let bugs: String = bug.iter().map(|b| format!(" --bug {b}")).collect();
            println!(
                "reproduce: cargo run -p zaris-jepsen -- test --workload {} --nemesis {} \
                 --time {time} --nodes {nodes} --concurrency {concurrency} --seed {seed}{bugs}",
                workload.name(),
                if faults.is_empty() {
                    "''".to_owned()
                } else {
                    faults.join(",")
                },
            );
            let passed = outcome.passed();
            println!(
                "{} passed, {} failed",
                u32::from(passed),
                u32::from(!passed)
            );
            Ok(passed)
        }
        Cmd::Ci { seed } => {
            let seed = seed.unwrap_or_else(rand::random);
            println!("seed {seed}");
            let (mut passed, mut failed) = (0, 0);
            for config in scenarios::ci(
                seed,
                scenarios::Place {
                    zaris: &zaris,
                    store: &store,
                },
            ) {
                let outcome = run::run(&config).await?;
                print_outcome(&config, &outcome);
                if outcome.passed() {
                    passed += 1;
                } else {
                    failed += 1;
                    println!("  reproduce: cargo run -p zaris-jepsen -- ci --seed {seed}");
                }
            }
            println!("{passed} passed, {failed} failed");
            Ok(failed == 0)
        }
        Cmd::Selftest { seed } => {
            let seed = seed.unwrap_or_else(rand::random);
            println!("seed {seed}");
            let (mut passed, mut failed) = (0, 0);
            for case in scenarios::selftest(
                seed,
                scenarios::Place {
                    zaris: &zaris,
                    store: &store,
                },
            ) {
                let outcome = run::run(&case.config).await?;
                let caught = outcome.failed_check(case.must_fail);
                println!(
                    "{:<5} bug {:<20} {} checker {:?} ({} ops, {})",
                    if caught { "ok" } else { "MISS" },
                    case.bug,
                    if caught {
                        "caught by the"
                    } else {
                        "NOT caught by the"
                    },
                    case.must_fail,
                    outcome.ops,
                    outcome.dir.display()
                );
                if caught {
                    passed += 1;
                } else {
                    failed += 1;
                    for report in &outcome.reports {
                        println!("  {report}");
                    }
                }
            }
            println!("{passed} passed, {failed} failed");
            Ok(failed == 0)
        }
    }
}

fn print_outcome(config: &RunConfig, outcome: &RunOutcome) {
    println!(
        "{} {} ({} ops, {})",
        if outcome.passed() { "PASS" } else { "FAIL" },
        config.name,
        outcome.ops,
        outcome.dir.display()
    );
    for report in &outcome.reports {
        if !report.verdict.is_pass() {
            println!("  {report}");
        }
    }
}

/// Builds `zaris` with the fault-injection feature, in the target dir this harness runs from.
fn build_zaris() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the harness binary")?;
    let dir = exe
        .parent()
        .context("the harness binary has no directory")?
        .to_path_buf();
    let release = dir.file_name().is_some_and(|name| name == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command.args([
        "build",
        "--quiet",
        "-p",
        "zaris",
        "--features",
        "fault-injection",
    ]);
    if release {
        command.arg("--release");
    }
    let status = command.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build -p zaris --features fault-injection failed");
    }
    let zaris = dir.join("zaris");
    if !Path::new(&zaris).exists() {
        bail!("{} was not built", zaris.display());
    }
    Ok(zaris)
}
