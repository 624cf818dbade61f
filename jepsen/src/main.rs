//! `zaris-jepsen`: run one seeded test, the CI matrix, or the self-test.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use zaris_jepsen::nemesis::{Fault, Schedule};
use zaris_jepsen::run::{self, RunConfig, RunOutcome};
use zaris_jepsen::scenarios::{self, Expect};
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
    /// feature (`cargo build --workspace --bins --features zaris/fault-injection`) next to itself.
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
        /// With the `clock` fault: the skewed node's lessor clock rate (default: 0.5 for even
        /// seeds, 1.5 for odd ones).
        #[arg(long)]
        clock_rate: Option<f64>,
        /// How long the nemesis holds each fault, in ms: `MIN..MAX` (default 1000..3000).
        #[arg(long, value_parser = parse_ms_range)]
        hold_ms: Option<std::ops::Range<u64>>,
        /// Aim every fault at the Raft leader, and make every partition isolate it.
        #[arg(long)]
        leader_only: bool,
        /// TLS on every link and access control on.
        #[arg(long)]
        secure: bool,
    },
    /// The CI matrix of short scenarios (3 and 5 nodes); every one must pass.
    #[command(after_help = "Example: zaris-jepsen ci --seed 1")]
    Ci {
        #[arg(long)]
        seed: Option<u64>,
        /// Run every scenario with TLS on every link and access control on (by default three
        /// do, one per workload).
        #[arg(long)]
        secure: bool,
    },
    /// Long run: cycles through every workload and nemesis (3 and 5 nodes), one scenario after
    /// another with a new seed each, until `--time` is used up; every run must pass.
    #[command(after_help = "Example: zaris-jepsen soak --time 1800 --seed 1")]
    Soak {
        /// Total seconds to soak (runs start until this is used up).
        #[arg(long, default_value_t = 1800)]
        time: u64,
        /// Seconds of faults per run (a quiet, healed phase follows each).
        #[arg(long, default_value_t = 60)]
        run_time: u64,
        /// Run `i` uses seed `seed + i`.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Scenarios against a three-node cluster of containers of `--image` on a Docker network of
    /// their own (needs Docker; the image from the top-level Dockerfile).
    #[command(after_help = "Example: zaris-jepsen containers --image zaris:dev")]
    Containers {
        /// The node image.
        #[arg(long, default_value = "zaris:dev")]
        image: String,
        /// Run only these scenarios (default: all).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Seed of the history scenarios' workload and nemesis.
        #[arg(long, default_value_t = 1)]
        seed: u64,
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
    if let Cmd::Containers { image, only, seed } = &cli.command {
        return containers(image, only, *seed, &cli.common.store).await;
    }
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
            clock_rate,
            hold_ms,
            leader_only,
            secure,
        } => {
            let seed = seed.unwrap_or_else(rand::random);
            let faults: Vec<String> = nemesis.iter().map(|f| f.name().to_owned()).collect();
            let mut schedule = Schedule {
                leader_only,
                ..Schedule::default()
            };
            if let Some(hold_ms) = hold_ms {
                schedule.hold_ms = hold_ms;
            }
            let config = RunConfig {
                name: format!("{}-{}", workload.name(), faults.join("-")),
                workload,
                faults: nemesis,
                nodes,
                time: Duration::from_secs(time),
                seed,
                concurrency,
                bugs: bug,
                clock_rate,
                schedule,
                zaris,
                store,
                secure,
            };
            println!("seed {seed}");
            let outcome = run::run(&config).await?;
            print_outcome(&config, &outcome);
            println!("reproduce: {}", reproduce(&config));
            let passed = outcome.passed();
            println!(
                "{} passed, {} failed",
                u32::from(passed),
                u32::from(!passed)
            );
            Ok(passed)
        }
        Cmd::Ci { seed, secure } => {
            let seed = seed.unwrap_or_else(rand::random);
            println!("seed {seed}");
            let (mut passed, mut failed) = (0, 0);
            for config in scenarios::ci(
                seed,
                scenarios::Place {
                    zaris: &zaris,
                    store: &store,
                },
                secure,
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
        Cmd::Soak {
            time,
            run_time,
            seed,
        } => {
            let seed = seed.unwrap_or_else(rand::random);
            println!("seed {seed}");
            let place = scenarios::Place {
                zaris: &zaris,
                store: &store,
            };
            let started = std::time::Instant::now();
            let mut totals = SoakTotals::default();
            let mut round = 0;
            while started.elapsed() < Duration::from_secs(time) {
                let config = scenarios::soak(seed, round, run_time, place);
                let outcome = run::run(&config).await?;
                print_outcome(&config, &outcome);
                if !outcome.passed() {
                    println!("  reproduce: {}", reproduce(&config));
                }
                totals.add(&outcome);
                round += 1;
            }
            totals.print(started.elapsed());
            Ok(totals.failed == 0)
        }
        // Answered before a zaris binary is looked for (it tests an image).
        Cmd::Containers { image, only, seed } => containers(&image, &only, seed, &store).await,
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
                let (good, what) = match case.expect {
                    Expect::Caught { checker, rule } => {
                        let caught = outcome.failed_check(checker, rule);
                        let rule = rule.map(|r| format!(" ({r})")).unwrap_or_default();
                        let verb = if caught { "caught by" } else { "NOT caught by" };
                        (caught, format!("{verb} the {checker:?} checker{rule}"))
                    }
                    Expect::OnlyCaught { checker } => {
                        let caught = outcome.failed_check(checker, None);
                        let others_pass = outcome
                            .reports
                            .iter()
                            .all(|r| r.name == checker || r.verdict.is_pass());
                        let what = match (caught, others_pass) {
                            (true, true) => "caught only by",
                            (true, false) => "caught by, but other checkers failed too:",
                            (false, _) => "NOT caught by",
                        };
                        (
                            caught && others_pass,
                            format!("{what} the {checker:?} checker"),
                        )
                    }
                };
                println!(
                    "{:<5} {:<38} {what} ({} ops, {})",
                    if good { "ok" } else { "MISS" },
                    case.config.name,
                    outcome.ops,
                    outcome.dir.display()
                );
                if good {
                    passed += 1;
                } else {
                    failed += 1;
                    for report in &outcome.reports {
                        println!("  {report}");
                    }
                    println!("  reproduce: {}", reproduce(&case.config));
                }
            }
            println!("{passed} passed, {failed} failed");
            Ok(failed == 0)
        }
    }
}

/// The `test` command line that runs `config` again.
fn reproduce(config: &RunConfig) -> String {
    let faults: Vec<&str> = config.faults.iter().map(|f| f.name()).collect();
    let mut line = format!(
        "cargo run -p zaris-jepsen -- test --workload {} --nemesis {} --time {} --nodes {} \
         --concurrency {} --seed {}",
        config.workload.name(),
        if faults.is_empty() {
            "''".to_owned()
        } else {
            faults.join(",")
        },
        config.time.as_secs(),
        config.nodes,
        config.concurrency,
        config.seed,
    );
    for bug in &config.bugs {
        line.push_str(&format!(" --bug {bug}"));
    }
    if config.secure {
        line.push_str(" --secure");
    }
    if let Some(rate) = config.clock_rate {
        line.push_str(&format!(" --clock-rate {rate}"));
    }
    let default = Schedule::default();
    if config.schedule.hold_ms != default.hold_ms {
        let hold = &config.schedule.hold_ms;
        line.push_str(&format!(" --hold-ms {}..{}", hold.start, hold.end));
    }
    if config.schedule.leader_only {
        line.push_str(" --leader-only");
    }
    line
}

/// `MIN..MAX` in ms, `MIN < MAX`.
fn parse_ms_range(text: &str) -> Result<std::ops::Range<u64>, String> {
    let (min, max) = text
        .split_once("..")
        .ok_or_else(|| format!("expected MIN..MAX, got {text:?}"))?;
    let min: u64 = min.trim().parse().map_err(|e| format!("{min:?}: {e}"))?;
    let max: u64 = max.trim().parse().map_err(|e| format!("{max:?}: {e}"))?;
    if min >= max {
        return Err(format!("{min}..{max} is empty"));
    }
    Ok(min..max)
}

/// What a soak did, over all its runs.
#[derive(Default)]
struct SoakTotals {
    passed: usize,
    failed: usize,
    ops: usize,
    faults: std::collections::BTreeMap<&'static str, usize>,
    /// checker → (pass, fail, unknown)
    verdicts: std::collections::BTreeMap<&'static str, (usize, usize, usize)>,
}

impl SoakTotals {
    fn add(&mut self, outcome: &RunOutcome) {
        if outcome.passed() {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        self.ops += outcome.ops;
        for (kind, count) in &outcome.faults {
            *self.faults.entry(kind).or_insert(0) += count;
        }
        for report in &outcome.reports {
            let counts = self.verdicts.entry(report.name).or_default();
            match report.verdict {
                zaris_jepsen::check::Verdict::Pass => counts.0 += 1,
                zaris_jepsen::check::Verdict::Fail(_) => counts.1 += 1,
                zaris_jepsen::check::Verdict::Unknown(_) => counts.2 += 1,
            }
        }
    }

    fn print(&self, took: Duration) {
        println!(
            "soak: {} runs in {} s ({} passed, {} failed), {} operations",
            self.passed + self.failed,
            took.as_secs(),
            self.passed,
            self.failed,
            self.ops
        );
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!("nemesis: {}", faults.join(", "));
        for (checker, (pass, fail, unknown)) in &self.verdicts {
            println!("  {checker:<16} pass {pass}, fail {fail}, unknown {unknown}");
        }
        println!("{} passed, {} failed", self.passed, self.failed);
    }
}

fn print_outcome(config: &RunConfig, outcome: &RunOutcome) {
    let faults: Vec<String> = outcome
        .faults
        .iter()
        .filter(|(kind, _)| **kind != "heal")
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    println!(
        "{} {} ({} ops; {}; {})",
        if outcome.passed() { "PASS" } else { "FAIL" },
        config.name,
        outcome.ops,
        if faults.is_empty() {
            "no faults".to_owned()
        } else {
            faults.join(", ")
        },
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
    // The whole workspace, as `cargo test --workspace` selects it: a narrower selection
    // resolves the dependencies' features differently and rebuilds half of them for nothing.
    command.args([
        "build",
        "--quiet",
        "--workspace",
        "--bins",
        "--features",
        "zaris/fault-injection",
    ]);
    if release {
        command.arg("--release");
    }
    let status = command.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --workspace --bins --features zaris/fault-injection failed");
    }
    let zaris = dir.join("zaris");
    if !Path::new(&zaris).exists() {
        bail!("{} was not built", zaris.display());
    }
    Ok(zaris)
}

/// `containers`: every scenario (or those named) on its own cluster; all must pass.
async fn containers(image: &str, only: &[String], seed: u64, store: &Path) -> Result<bool> {
    use zaris_jepsen::containers;

    let (mut passed, mut failed) = (0, 0);
    for scenario in containers::SCENARIOS {
        if !only.is_empty() && !only.iter().any(|name| name == scenario) {
            continue;
        }
        let started = std::time::Instant::now();
        match containers::run(image, scenario, seed, store).await {
            Ok(()) => {
                passed += 1;
                println!("PASS {scenario} ({:.1}s)", started.elapsed().as_secs_f64());
            }
            Err(err) => {
                failed += 1;
                println!("FAIL {scenario}: {err:#}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(failed == 0 && passed > 0)
}
