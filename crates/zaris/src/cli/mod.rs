//! The client subcommands of `zaris` (everything but `serve`): thin wrappers over
//! [`zaris_client::Client`] that print either aligned text or, with `-o json`, exactly one JSON
//! object per line.
//!
//! Exit status: `run` returns an error (one line, for `main` to print) when the call failed or
//! when the cluster answered with a domain failure (lease not found, guard failed, ...); in JSON
//! mode the answer's JSON object is printed first. The one exception is `lock NAME -- CMD`,
//! which exits with CMD's own exit code (see `lock.rs`).
//!
//! The long-running subcommands (`watch`, `lock`, `elect`, `presence join|watch`,
//! `lease keepalive`) stop on SIGINT or SIGTERM, releasing what they hold first.
//!
//! Code map: this file (the clap definitions and the one-shot calls), `output` (everything
//! printed), `duration`, `signals`, `txn` (the `--if`/`--then` grammar), `lock` (`zaris lock`
//! and its child process), `coord` (elections and presence), `watch` (the event streams).

mod auth;
mod coord;
mod duration;
mod lock;
mod output;
pub(crate) mod signals;
mod txn;
mod watch;

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use tokio::time::Instant;
use zaris_client::proto::{Compare, Guard, TxnOp};
use zaris_client::{
    Client, ClientOptions, DeleteOptions, LeaseId, PutOptions, RangeOptions, Revocation,
};

use self::duration::{format_ms, millis, parse_duration};
use self::output as out;
use self::signals::Signals;

/// Options shared by every client subcommand.
#[derive(Args, Debug)]
pub struct GlobalOpts {
    /// Cluster members to contact (host:port), comma separated; the client finds the Raft leader
    /// among them.
    #[arg(
        long,
        global = true,
        env = "ZARIS_ENDPOINTS",
        value_delimiter = ',',
        default_value = "127.0.0.1:7001",
        value_name = "HOST:PORT,..."
    )]
    pub endpoints: Vec<String>,
    /// Output format: aligned text, or one JSON object per line.
    #[arg(
        short = 'o',
        long,
        global = true,
        value_enum,
        default_value_t = OutputFormat::Table
    )]
    pub output: OutputFormat,
    /// Give up on a request after this long, retries and redirects included (e.g. 500ms, 5s, 2m).
    #[arg(
        long,
        global = true,
        value_parser = parse_duration,
        default_value = "10s",
        value_name = "DURATION"
    )]
    pub timeout: Duration,
    /// Speak TLS to the cluster, trusting servers whose certificates this CA (PEM) signed.
    #[arg(long, global = true, env = "ZARIS_CACERT", value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for clusters that require one (mutual TLS); needs --key and
    /// --cacert.
    // Ids of their own: subcommands have a `key` argument (put KEY).
    #[arg(
        id = "client_cert",
        long = "cert",
        global = true,
        env = "ZARIS_CERT",
        value_name = "FILE"
    )]
    pub cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(
        id = "client_key",
        long = "key",
        global = true,
        env = "ZARIS_KEY",
        value_name = "FILE"
    )]
    pub key: Option<std::path::PathBuf>,
    /// Bearer token naming your user, where the cluster has auth enabled (`zaris auth user
    /// add` prints one). Sent with every call: use it over TLS (--cacert), or on loopback only.
    #[arg(
        long,
        global = true,
        env = "ZARIS_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
}

/// How client subcommands print their results.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Human-readable text and tables.
    Table,
    /// Exactly one JSON object per line.
    Json,
}

/// The client subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the answering member's view: role, Raft leader, term, indexes, members.
    #[command(after_help = "Example: zaris status --endpoints 127.0.0.1:7001 -o json")]
    Status,
    /// List, add, promote or remove cluster members.
    #[command(subcommand, after_help = "Example: zaris member list")]
    Member(MemberCmd),
    /// Users, roles and access control: whoami, status, enable, user ..., role ...
    #[command(subcommand, after_help = "Example: zaris auth whoami")]
    Auth(self::auth::AuthCmd),
    /// Grant, renew, inspect, list or revoke leases.
    #[command(subcommand, after_help = "Example: zaris lease grant --ttl 10s")]
    Lease(LeaseCmd),
    /// Write a key, optionally bound to a lease.
    #[command(
        after_help = "Example: zaris put service/api 10.0.0.5:8080 --lease 7\n\
                      The value from a file, or from standard input:\n  \
                      zaris put config/app --value-file app.json\n  \
                      tar c dir | zaris put blobs/dir --value-file -"
    )]
    Put {
        /// The key.
        key: String,
        /// The value (or use --value-file).
        #[arg(required_unless_present = "value_file", conflicts_with = "value_file")]
        value: Option<String>,
        /// Read the value from this file, as bytes; `-` reads standard input. For values that
        /// are binary or too long for an argument (the cluster's limit is max_value_bytes,
        /// 1 MiB by default).
        #[arg(long, value_name = "PATH")]
        value_file: Option<std::path::PathBuf>,
        /// Bind the key to this lease: it is deleted when the lease ends.
        #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u64).range(1..))]
        lease: Option<u64>,
        /// Also print the value the key had before.
        #[arg(long)]
        prev_kv: bool,
    },
    /// Read a key, or every key under a prefix (exits 1 if a single key does not exist).
    #[command(after_help = "Example: zaris get service/ --prefix --limit 100")]
    Get {
        /// The key, or the prefix with --prefix ("" --prefix reads every key).
        key: String,
        /// Read every key starting with KEY.
        #[arg(long)]
        prefix: bool,
        /// Return at most N keys (default: the server's page size).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
    },
    /// Delete a key, or every key under a prefix.
    #[command(after_help = "Example: zaris del service/ --prefix")]
    Del {
        /// The key, or the prefix with --prefix.
        key: String,
        /// Delete every key starting with KEY.
        #[arg(long)]
        prefix: bool,
    },
    /// Print every change to a key or prefix (put, delete, expire, revoke) until Ctrl-C or
    /// SIGTERM, or until --count events.
    #[command(after_help = "Example: zaris watch service/ --prefix --count 10 -o json")]
    Watch(WatchArgs),
    /// Take a lock with a fresh lease and print its fencing token; hold it until Ctrl-C or
    /// SIGTERM, or run CMD while holding it.
    #[command(after_help = LOCK_HELP)]
    Lock(LockArgs),
    /// Campaign in an election and hold leadership until Ctrl-C or SIGTERM, or follow who leads
    /// with --listen.
    #[command(after_help = "Example: zaris elect scheduler node-a --ttl 5s\n\
                            Example: zaris elect scheduler --listen -o json")]
    Elect(ElectArgs),
    /// Join, list or watch a presence group (members kept alive by their leases).
    #[command(subcommand, after_help = "Example: zaris presence list workers")]
    Presence(PresenceCmd),
    /// Run a transaction: if every --if holds, the --then operations, else the --else ones.
    #[command(after_help = TXN_HELP)]
    Txn(TxnArgs),
}

const LOCK_HELP: &str = "Example: zaris lock backup --ttl 10s -- ./backup.sh --full

With CMD, zaris runs it with ZARIS_LOCK_NAME, ZARIS_LOCK_TOKEN, ZARIS_LEASE_ID and
ZARIS_ENDPOINTS in its environment, forwards SIGINT and SIGTERM to it, and when it exits
releases the lock, revokes the lease and exits with CMD's exit code. If the lease is lost
while CMD runs, CMD gets SIGTERM (SIGKILL 5s later) and zaris exits 1. If zaris itself is
killed with SIGKILL, CMD and its children keep running without the lock: fence CMD's writes
with $ZARIS_LOCK_TOKEN (zaris txn --guard NAME:TOKEN).";

const TXN_HELP: &str = "Example: zaris txn --if \"svc/leader version = 0\" \\
    --then \"put svc/leader node-a --lease 7\" --else \"get svc/leader\"

Each value is one shell word, split at whitespace (keys and values cannot contain spaces):
  --if    \"KEY TARGET OP OPERAND\"   TARGET: value, version, mod, create, lease
                                   OP: =, !=, >, <   (quote it: > and < are shell syntax)
  --then  \"put KEY VALUE [--lease N]\" | \"del KEY [--prefix]\" | \"get KEY [--prefix]\"
  --else  the same forms as --then
  --guard LOCK:TOKEN              apply nothing unless LOCK is held with TOKEN
A missing key has version, mod, create and lease 0 (\"KEY version = 0\" tests absence).
Exit status: 0 whichever branch ran; 1 if the guard failed or a put names a missing lease.";

/// `zaris watch ...`
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The key, or the prefix with --prefix ("" --prefix watches every key).
    pub key: String,
    /// Watch every key starting with KEY.
    #[arg(long)]
    pub prefix: bool,
    /// Start at this revision (inclusive) instead of the next one. Fails if the cluster no
    /// longer has the events since then.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rev: Option<u64>,
    /// Also print the value each key had before the change.
    #[arg(long)]
    pub prev_kv: bool,
    /// Exit (status 0) after N events.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
}

/// `zaris lock ...`
#[derive(Args, Debug)]
pub struct LockArgs {
    /// The lock name.
    pub name: String,
    /// TTL of the lease that holds the lock; it is kept alive while zaris runs.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    pub ttl: Duration,
    /// Give up (exit 1) if the lock is not acquired within this long (default: wait as long as
    /// it takes).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub timeout_lock: Option<Duration>,
    /// Command to run while holding the lock (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `zaris elect ...`
#[derive(Args, Debug)]
pub struct ElectArgs {
    /// The election name (its value lives in key election/NAME).
    pub name: String,
    /// The value to proclaim once elected (for example this candidate's address).
    #[arg(required_unless_present = "listen")]
    pub value: Option<String>,
    /// Do not campaign: print the current leader, then every change.
    #[arg(long, conflicts_with_all = ["value", "ttl"])]
    pub listen: bool,
    /// With --listen: exit (status 0) after N lines, the current leader included (a campaign
    /// takes no --count).
    #[arg(
        long,
        conflicts_with = "value",
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub count: Option<u64>,
    /// TTL of the candidate's lease; it is kept alive while zaris runs.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    pub ttl: Duration,
}

/// `zaris presence ...`
#[derive(Subcommand, Debug)]
pub enum PresenceCmd {
    /// Join GROUP as MEMBER with a fresh lease; stay until Ctrl-C or SIGTERM, then revoke it.
    #[command(after_help = "Example: zaris presence join workers worker-a 10.0.0.7:8080 --ttl 5s")]
    Join {
        /// The group (non-empty, without '/'); members live in keys presence/GROUP/MEMBER.
        group: String,
        /// This member's name within the group.
        member: String,
        /// What to publish about the member (for example its address).
        #[arg(default_value = "")]
        metadata: String,
        /// TTL of the member's lease; it is kept alive while zaris runs.
        #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
        ttl: Duration,
    },
    /// List the live members of GROUP.
    #[command(after_help = "Example: zaris presence list workers -o json")]
    List {
        /// The group.
        group: String,
    },
    /// Print the members of GROUP, then every join, update and departure (with how: expire,
    /// revoke or delete) until Ctrl-C or SIGTERM, or until --count changes.
    #[command(after_help = "Example: zaris presence watch workers --count 5")]
    Watch {
        /// The group.
        group: String,
        /// Exit (status 0) after N changes (the members present at the start are not counted).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
    },
}

/// `zaris txn ...` (the grammar is in `txn.rs` and in `--help`).
#[derive(Args, Debug)]
pub struct TxnArgs {
    /// A condition, "KEY TARGET OP OPERAND"; all must hold for the --then branch (repeatable).
    #[arg(long = "if", value_name = "COMPARE", value_parser = txn::parse_compare)]
    pub compares: Vec<Compare>,
    /// An operation run if every --if holds (repeatable, run in order).
    #[arg(long = "then", value_name = "OP", value_parser = txn::parse_op)]
    pub success: Vec<TxnOp>,
    /// An operation run if some --if does not hold (repeatable, run in order).
    #[arg(long = "else", value_name = "OP", value_parser = txn::parse_op)]
    pub failure: Vec<TxnOp>,
    /// Apply nothing unless lock LOCK is held with fencing token TOKEN.
    #[arg(long, value_name = "LOCK:TOKEN", value_parser = txn::parse_guard)]
    pub guard: Option<Guard>,
}

/// `zaris member ...`
#[derive(Subcommand, Debug)]
pub enum MemberCmd {
    /// List the members of the committed membership.
    #[command(after_help = "Example: zaris member list")]
    List,
    /// Add a node; unless --learner, wait for it to catch up and promote it to voter.
    #[command(
        after_help = "Example: zaris member add 4 127.0.0.1:7004 127.0.0.1:7104 --timeout 2m"
    )]
    Add {
        /// Node id of the new member (non-zero, never used before).
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
        /// The new member's client address (host:port: a name or an IP address).
        address: String,
        /// The new member's peer (Raft) address, its `zaris serve --peer-listen`.
        peer_address: String,
        /// Leave it a learner (non-voting); promote later with `zaris member promote`.
        #[arg(long)]
        learner: bool,
    },
    /// Promote a learner to voter.
    #[command(after_help = "Example: zaris member promote 4")]
    Promote {
        /// Node id of the learner.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
    },
    /// Remove a member (learner or voter).
    #[command(after_help = "Example: zaris member remove 4")]
    Remove {
        /// Node id of the member.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
    },
}

/// `KEY=VALUE` (the value may contain `=`; the key may not be empty).
fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!(
            "expected KEY=VALUE with a non-empty key, got {text:?}"
        )),
    }
}

/// `zaris lease ...`
#[derive(Subcommand, Debug)]
pub enum LeaseCmd {
    /// Grant a lease and print its id.
    #[command(after_help = "Example: zaris lease grant --ttl 10s --put workers/a=10.0.0.7:8080")]
    Grant {
        /// Time to live (e.g. 5s, 1500ms, 2m); must lie within the cluster's TTL bounds.
        #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
        ttl: Duration,
        /// Ask for this lease id instead of letting the server choose. Ids are never reused: it
        /// must be above every id the cluster has granted (else the grant answers id_in_use).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        id: Option<u64>,
        /// Write KEY=VALUE bound to the new lease, in the same step as the grant (repeatable):
        /// the lease and its keys exist together, or nothing is created.
        #[arg(long = "put", value_name = "KEY=VALUE", value_parser = parse_key_value, conflicts_with = "id")]
        puts: Vec<(String, String)>,
    },
    /// Keep a lease alive: renew it every TTL/3 until Ctrl-C (or once, with --once).
    #[command(after_help = "Example: zaris lease keepalive 7 --once")]
    Keepalive {
        /// The lease id.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
        /// Renew once and exit.
        #[arg(long)]
        once: bool,
    },
    /// Revoke a lease now: its keys are deleted and its locks released.
    #[command(after_help = "Example: zaris lease revoke 7")]
    Revoke {
        /// The lease id.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
    },
    /// Describe a lease: TTL, time remaining, locks, and (with --keys) its keys.
    #[command(after_help = "Example: zaris lease ttl 7 --keys")]
    Ttl {
        /// The lease id.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
        /// Also list the keys bound to the lease.
        #[arg(long)]
        keys: bool,
    },
    /// List every lease.
    #[command(after_help = "Example: zaris lease list -o json")]
    List,
}

impl Command {
    /// True for the commands that only read: a failure of theirs changes nothing, so it is
    /// never reported as "may or may not have taken effect".
    fn is_read_only(&self) -> bool {
        match self {
            Command::Status
            | Command::Get { .. }
            | Command::Watch(_)
            | Command::Member(MemberCmd::List)
            | Command::Auth(self::auth::AuthCmd::Whoami | self::auth::AuthCmd::Status)
            | Command::Lease(LeaseCmd::Ttl { .. } | LeaseCmd::List)
            | Command::Presence(PresenceCmd::List { .. } | PresenceCmd::Watch { .. }) => true,
            Command::Elect(args) => args.listen,
            _ => false,
        }
    }
}

/// Most bytes `--value-file` reads: far above any sensible `max_value_bytes` (1 MiB by default),
/// low enough that a wrong file (or an endless pipe) cannot exhaust memory.
const MAX_VALUE_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The value of `put --value-file PATH` (`-`: standard input), as bytes.
fn read_value(path: &std::path::Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut value = Vec::new();
    let limit = MAX_VALUE_FILE_BYTES + 1;
    let read = if path == std::path::Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut value)
    } else {
        std::fs::File::open(path).and_then(|file| file.take(limit).read_to_end(&mut value))
    };
    read.map_err(|err| anyhow!("cannot read the value from {}: {err}", path.display()))?;
    if value.len() as u64 > MAX_VALUE_FILE_BYTES {
        bail!(
            "the value in {} is larger than {MAX_VALUE_FILE_BYTES} bytes",
            path.display()
        );
    }
    Ok(value)
}

/// Runs one client subcommand. The error, if any, is one line meant to be printed after
/// "error: ".
/// The client of `--endpoints` with `--timeout`. Lazy: a command run while the cluster starts
/// waits for it (up to --timeout), as every call retries; a cluster that never answers is
/// reported by the call itself.
pub(crate) fn client(global: &GlobalOpts) -> Result<Client> {
    let mut options = ClientOptions::default().with_timeout(global.timeout);
    if let Some(tls) = client_tls(global)? {
        options = options.with_tls(tls);
    }
    if let Some(token) = &global.token {
        options = options.with_token(
            zaris_client::BearerToken::new(token.as_str())
                .map_err(|err| anyhow!("--token: {err}"))?,
        );
    }
    Client::lazy(global.endpoints.iter().map(String::as_str), options)
        .map_err(|err| anyhow!("{err}"))
}

/// The TLS settings of --cacert, --cert and --key (or their ZARIS_* variables).
fn client_tls(global: &GlobalOpts) -> Result<Option<zaris_client::ClientTls>> {
    let tls = match (&global.cacert, &global.cert, &global.key) {
        (None, None, None) => return Ok(None),
        (None, _, _) => bail!(
            "--cert and --key need --cacert (ZARIS_CACERT): the CA that signed the servers' \
             certificates"
        ),
        (Some(ca), None, None) => zaris_client::ClientTls::from_ca_file(ca)?,
        (Some(ca), Some(cert), Some(key)) => {
            zaris_client::ClientTls::from_ca_file(ca)?.with_identity_files(cert, key)?
        }
        (Some(_), _, _) => bail!("--cert and --key go together"),
    };
    Ok(Some(tls))
}

pub async fn run(global: GlobalOpts, command: Command) -> Result<()> {
    let client = client(&global)?;
    let cli = Cli {
        client,
        format: global.output,
        read_only: command.is_read_only(),
    };
    match command {
        Command::Status => cli.status().await,
        Command::Member(cmd) => cli.member(cmd).await,
        Command::Auth(cmd) => cli.auth(cmd).await,
        Command::Lease(cmd) => cli.lease(cmd).await,
        Command::Put {
            key,
            value,
            value_file,
            lease,
            prev_kv,
        } => {
            let value = match (value, value_file) {
                (Some(value), _) => value.into_bytes(),
                (None, Some(path)) => read_value(&path)?,
                // clap requires one of the two.
                (None, None) => bail!("a value or --value-file is required"),
            };
            cli.put(key, value, lease, prev_kv).await
        }
        Command::Get { key, prefix, limit } => cli.get(key, prefix, limit).await,
        Command::Del { key, prefix } => cli.del(key, prefix).await,
        Command::Watch(args) => cli.watch(args).await,
        Command::Lock(args) => cli.lock(args).await,
        Command::Elect(args) if args.listen => cli.elect_listen(args.name, args.count).await,
        Command::Elect(args) => {
            let value = args.value.unwrap_or_default();
            cli.elect(args.name, value, args.ttl).await
        }
        Command::Presence(PresenceCmd::Join {
            group,
            member,
            metadata,
            ttl,
        }) => cli.presence_join(group, member, metadata, ttl).await,
        Command::Presence(PresenceCmd::List { group }) => cli.presence_list(group).await,
        Command::Presence(PresenceCmd::Watch { group, count }) => {
            cli.presence_watch(group, count).await
        }
        Command::Txn(args) => cli.txn(args).await,
    }
}

/// A connected client and the output format.
struct Cli {
    client: Client,
    format: OutputFormat,
    /// The command changes nothing, so a failure never leaves its outcome in doubt.
    read_only: bool,
}

impl Cli {
    /// Prints `json` (JSON mode) or the text `human` builds (table mode).
    fn emit(&self, json: &Value, human: impl FnOnce() -> String) {
        match self.format {
            OutputFormat::Json => print_line(json),
            OutputFormat::Table => print_line(human()),
        }
    }

    /// Turns a client error into the one-line message `main` prints.
    fn fail(&self, err: &zaris_client::Error) -> anyhow::Error {
        anyhow!("{}", self.describe(err))
    }

    fn describe(&self, err: &zaris_client::Error) -> String {
        out::describe_error(err, &self.client.endpoints(), self.read_only)
    }

    async fn status(&self) -> Result<()> {
        let status = self.client.status().await.map_err(|e| self.fail(&e))?;
        self.emit(&out::status_json(&status), || out::status_text(&status));
        Ok(())
    }

    async fn member(&self, cmd: MemberCmd) -> Result<()> {
        match cmd {
            MemberCmd::List => {
                let list = self.client.member_list().await.map_err(|e| self.fail(&e))?;
                self.emit(&out::members_json(&list), || {
                    out::members_table(&list, None)
                });
            }
            MemberCmd::Add {
                id,
                address,
                peer_address,
                learner,
            } => {
                let added = self
                    .client
                    .member_add(id, address.clone(), peer_address.clone(), !learner)
                    .await
                    .map_err(|e| self.fail(&e))?;
                let role = if learner { "learner" } else { "voter" };
                self.emit(&out::members_json(&added), || {
                    format!(
                        "added member {id} at {address} as {role}\n\n{}",
                        out::members_table(&added, None)
                    )
                });
            }
            MemberCmd::Promote { id } => {
                let promoted = self
                    .client
                    .member_promote(id)
                    .await
                    .map_err(|e| self.fail(&e))?;
                self.emit(&out::members_json(&promoted), || {
                    format!(
                        "member {id} is a voter\n\n{}",
                        out::members_table(&promoted, None)
                    )
                });
            }
            MemberCmd::Remove { id } => {
                let removed = self
                    .client
                    .member_remove(id)
                    .await
                    .map_err(|e| self.fail(&e))?;
                self.emit(&out::members_json(&removed), || {
                    format!(
                        "removed member {id}\n\n{}",
                        out::members_table(&removed, None)
                    )
                });
            }
        }
        Ok(())
    }

    async fn lease(&self, cmd: LeaseCmd) -> Result<()> {
        match cmd {
            LeaseCmd::Grant { ttl, id, puts } => self.lease_grant(ttl, id, puts).await,
            LeaseCmd::Keepalive { id, once: true } => self.lease_keepalive_once(id).await,
            LeaseCmd::Keepalive { id, once: false } => self.lease_keepalive_loop(id).await,
            LeaseCmd::Revoke { id } => self.lease_revoke(id).await,
            LeaseCmd::Ttl { id, keys } => self.lease_ttl(id, keys).await,
            LeaseCmd::List => self.lease_list().await,
        }
    }

    async fn lease_grant(
        &self,
        ttl: Duration,
        id: Option<u64>,
        puts: Vec<(String, String)>,
    ) -> Result<()> {
        let grant = match id {
            None if !puts.is_empty() => self
                .client
                .grant_with_keys(ttl, puts)
                .await
                .map_err(|e| self.fail(&e))?,
            None => self.client.grant(ttl).await.map_err(|e| self.fail(&e))?,
            Some(id) => match self
                .client
                .grant_with_id(LeaseId::new(id), ttl)
                .await
                .map_err(|e| self.fail(&e))?
            {
                Some(grant) => grant,
                None => {
                    self.emit_json_only(&json!({ "id": id, "result": "id_in_use" }));
                    bail!(
                        "lease id {id} is in use or was used before (lease ids are never reused); \
                         choose a higher id, or let the server choose"
                    );
                }
            },
        };
        let ttl_ms = millis(grant.ttl);
        self.emit(&out::grant_json(grant.id.get(), ttl_ms), || {
            format!("lease {} granted with TTL {}", grant.id, format_ms(ttl_ms))
        });
        Ok(())
    }

    /// Renews lease `id` once; `Ok(None)` if it no longer exists.
    async fn renew(&self, id: u64) -> Result<Option<u64>, zaris_client::Error> {
        let id = LeaseId::new(id);
        let ack = self.client.keep_alive_once([id]).await?;
        Ok(ack
            .renewed
            .iter()
            .find(|renewed| renewed.id == id)
            .map(|renewed| millis(renewed.ttl)))
    }

    fn print_renewal(&self, id: u64, ttl_ms: Option<u64>) -> Result<()> {
        match ttl_ms {
            Some(ttl_ms) => {
                self.emit(
                    &json!({ "id": id, "found": true, "ttl_ms": ttl_ms }),
                    || format!("lease {id} renewed, TTL {}", format_ms(ttl_ms)),
                );
                Ok(())
            }
            None => {
                if self.format == OutputFormat::Json {
                    print_line(json!({ "id": id, "found": false }));
                }
                bail!("lease {id} not found (it expired or was revoked)")
            }
        }
    }

    async fn lease_keepalive_once(&self, id: u64) -> Result<()> {
        let ttl_ms = self.renew(id).await.map_err(|e| self.fail(&e))?;
        self.print_renewal(id, ttl_ms)
    }

    /// Renews every TTL/3, counted from each renewal's send time, until Ctrl-C (or SIGTERM) or
    /// the lease is gone. A failed renewal is reported and retried sooner; it is not fatal while
    /// the lease may still be alive.
    async fn lease_keepalive_loop(&self, id: u64) -> Result<()> {
        const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);
        let mut signals = Signals::install()?;
        loop {
            let sent = Instant::now();
            let renewal = tokio::select! {
                _ = signals.recv() => return Ok(()),
                renewal = self.renew(id) => renewal,
            };
            let next = match renewal {
                Ok(ttl_ms) => {
                    self.print_renewal(id, ttl_ms)?;
                    let ttl = Duration::from_millis(ttl_ms.unwrap_or(0));
                    sent + (ttl / 3).max(Duration::from_millis(10))
                }
                Err(err) => {
                    eprintln!(
                        "warning: renewing lease {id} failed: {}",
                        self.describe(&err)
                    );
                    Instant::now() + RETRY_AFTER_FAILURE
                }
            };
            tokio::select! {
                _ = signals.recv() => return Ok(()),
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }

    async fn lease_revoke(&self, id: u64) -> Result<()> {
        match self
            .client
            .revoke(LeaseId::new(id))
            .await
            .map_err(|e| self.fail(&e))?
        {
            Revocation::Revoked { revision } => {
                let json = json!({ "id": id, "result": "revoked", "revision": revision });
                self.emit(&json, || format!("lease {id} revoked"));
                Ok(())
            }
            Revocation::NotFound => {
                self.emit_json_only(&json!({ "id": id, "result": "not_found" }));
                bail!("lease {id} not found")
            }
        }
    }

    async fn lease_ttl(&self, id: u64, keys: bool) -> Result<()> {
        let ttl = self
            .client
            .time_to_live(LeaseId::new(id), keys)
            .await
            .map_err(|e| self.fail(&e))?;
        let Some(ttl) = ttl else {
            self.emit_json_only(&out::time_to_live_json(None, id));
            bail!("lease {id} not found");
        };
        self.emit(&out::time_to_live_json(Some(&ttl), id), || {
            out::time_to_live_text(&ttl, keys)
        });
        Ok(())
    }

    async fn lease_list(&self) -> Result<()> {
        let mut leases = Vec::new();
        let mut after_id = LeaseId::NONE;
        loop {
            let page = self
                .client
                .leases(after_id, 0)
                .await
                .map_err(|e| self.fail(&e))?;
            let last = page.leases.last().map(|lease| lease.id);
            leases.extend(page.leases);
            match last {
                // Stop on a page that does not advance, even if it claims more.
                Some(last) if page.more && last > after_id => after_id = last,
                _ => break,
            }
        }
        self.emit(&out::leases_json(&leases), || out::leases_text(&leases));
        Ok(())
    }

    async fn put(
        &self,
        key: String,
        value: Vec<u8>,
        lease: Option<u64>,
        prev_kv: bool,
    ) -> Result<()> {
        let options = PutOptions {
            lease: lease.map(LeaseId::new),
            prev_kv,
            guard: None,
        };
        match self.client.put(key, value, options).await {
            Ok(put) => {
                self.emit(&out::put_json(&put, prev_kv), || {
                    out::put_text(&put, prev_kv)
                });
                Ok(())
            }
            Err(err @ zaris_client::Error::LeaseNotFound { .. }) => {
                self.emit_json_only(&json!({ "result": "lease_not_found" }));
                Err(self.fail(&err))
            }
            Err(err) => Err(self.fail(&err)),
        }
    }

    async fn get(&self, key: String, prefix: bool, limit: Option<u64>) -> Result<()> {
        let options = RangeOptions {
            prefix,
            limit,
            ..RangeOptions::default()
        };
        let range = self
            .client
            .range(key.clone(), options)
            .await
            .map_err(|e| self.fail(&e))?;
        if !prefix && range.kvs.is_empty() {
            self.emit_json_only(&out::range_json(&range));
            bail!("key {key:?} not found");
        }
        self.emit(&out::range_json(&range), || out::range_text(&range));
        Ok(())
    }

    async fn del(&self, key: String, prefix: bool) -> Result<()> {
        let options = DeleteOptions {
            prefix,
            ..DeleteOptions::default()
        };
        let deleted = self
            .client
            .delete(key, options)
            .await
            .map_err(|e| self.fail(&e))?;
        self.emit(&out::delete_json(&deleted), || out::delete_text(&deleted));
        Ok(())
    }

    /// In JSON mode, prints `json` (a domain failure still gets its one object); in table mode
    /// prints nothing: the error message says it all.
    fn emit_json_only(&self, json: &Value) {
        if self.format == OutputFormat::Json {
            print_line(json);
        }
    }
}

/// Prints one line of output. Into a closed pipe (`zaris status | head -1`, `zaris watch | head`)
/// the command ends quietly, as `cat` does, instead of panicking on the broken pipe.
pub(crate) fn print_line(line: impl std::fmt::Display) {
    use std::io::Write;

    let mut stdout = std::io::stdout().lock();
    if let Err(err) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write the output: {err}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand};

    use super::*;

    /// The shape `main` gives the CLI: global options flattened, these commands beside `serve`.
    #[derive(Parser, Debug)]
    #[command(name = "zaris")]
    struct TestCli {
        #[command(flatten)]
        global: GlobalOpts,
        #[command(subcommand)]
        command: Top,
    }

    #[derive(Subcommand, Debug)]
    enum Top {
        Serve,
        #[command(flatten)]
        Client(Command),
    }

    fn parse(args: &[&str]) -> Result<TestCli, clap::Error> {
        TestCli::try_parse_from(std::iter::once("zaris").chain(args.iter().copied()))
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        TestCli::command().debug_assert();
    }

    #[test]
    fn global_options_work_after_the_subcommand() {
        let cli = parse(&[
            "lease",
            "grant",
            "--ttl",
            "1.5s",
            "-o",
            "json",
            "--endpoints",
            "a:1,b:2",
            "--timeout",
            "3s",
        ])
        .expect("parses");
        assert_eq!(cli.global.endpoints, ["a:1", "b:2"]);
        assert_eq!(cli.global.output, OutputFormat::Json);
        assert_eq!(cli.global.timeout, Duration::from_secs(3));
        match cli.command {
            Top::Client(Command::Lease(LeaseCmd::Grant { ttl, id: None, .. })) => {
                assert_eq!(ttl, Duration::from_millis(1500));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        // Unless the environment overrides it (ZARIS_ENDPOINTS), one local member.
        let cli = parse(&["status"]).expect("parses");
        if std::env::var_os("ZARIS_ENDPOINTS").is_none() {
            assert_eq!(cli.global.endpoints, ["127.0.0.1:7001"]);
        }
        assert_eq!(cli.global.output, OutputFormat::Table);
        assert_eq!(cli.global.timeout, Duration::from_secs(10));
    }

    #[test]
    fn tls_files_are_global_and_do_not_clash_with_a_key_argument() {
        let cli = parse(&[
            "put",
            "k",
            "v",
            "--cacert",
            "ca.pem",
            "--cert",
            "c.pem",
            "--key",
            "c-key.pem",
        ])
        .expect("parses");
        assert!(matches!(&cli.command, Top::Client(Command::Put { key, .. }) if key == "k"));
        assert_eq!(
            cli.global.key.as_deref(),
            Some(std::path::Path::new("c-key.pem"))
        );
        assert_eq!(
            cli.global.cert.as_deref(),
            Some(std::path::Path::new("c.pem"))
        );
        let tls = client_tls(&GlobalOpts {
            cacert: None,
            ..cli.global
        });
        assert!(format!("{:#}", tls.expect_err("no CA")).contains("need --cacert"));
    }

    #[test]
    fn subcommands_parse_their_arguments() {
        match parse(&["put", "k", "v", "--lease", "7", "--prev-kv"]).map(|c| c.command) {
            Ok(Top::Client(Command::Put {
                key,
                value: Some(value),
                value_file: None,
                lease: Some(7),
                prev_kv: true,
            })) => assert_eq!((key.as_str(), value.as_str()), ("k", "v")),
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["put", "k", "--value-file", "-"]).map(|c| c.command) {
            Ok(Top::Client(Command::Put {
                value: None,
                value_file: Some(path),
                ..
            })) => assert_eq!(path, std::path::Path::new("-")),
            other => panic!("parsed as {other:?}"),
        }
        assert!(parse(&["put", "k"]).is_err(), "a value is required");
        assert!(
            parse(&["put", "k", "v", "--value-file", "f"]).is_err(),
            "a value and a value file conflict"
        );
        match parse(&[
            "member",
            "add",
            "4",
            "127.0.0.1:7004",
            "127.0.0.1:7104",
            "--learner",
        ])
        .map(|c| c.command)
        {
            Ok(Top::Client(Command::Member(MemberCmd::Add {
                id: 4,
                learner: true,
                ..
            }))) => {}
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["lease", "keepalive", "9", "--once"]).map(|c| c.command) {
            Ok(Top::Client(Command::Lease(LeaseCmd::Keepalive { id: 9, once: true }))) => {}
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["get", "svc/", "--prefix", "--limit", "5"]).map(|c| c.command) {
            Ok(Top::Client(Command::Get {
                prefix: true,
                limit: Some(5),
                ..
            })) => {}
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn bad_arguments_are_rejected() {
        assert!(
            parse(&["lease", "grant", "--ttl", "10"]).is_err(),
            "unit required"
        );
        assert!(parse(&["lease", "grant"]).is_err(), "--ttl required");
        assert!(
            parse(&["lease", "revoke", "0"]).is_err(),
            "lease 0 is never valid"
        );
        assert!(parse(&["status", "-o", "yaml"]).is_err());
        assert!(parse(&["status", "--timeout", "0s"]).is_err());
    }

    #[test]
    fn watch_lock_elect_and_presence_parse_their_arguments() {
        match parse(&[
            "watch",
            "svc/",
            "--prefix",
            "--rev",
            "5",
            "--prev-kv",
            "--count",
            "2",
        ])
        .map(|c| c.command)
        {
            Ok(Top::Client(Command::Watch(WatchArgs {
                key,
                prefix: true,
                rev: Some(5),
                prev_kv: true,
                count: Some(2),
            }))) => assert_eq!(key, "svc/"),
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["lock", "jobs"]).map(|c| c.command) {
            Ok(Top::Client(Command::Lock(args))) => {
                assert_eq!(args.ttl, Duration::from_secs(10), "default TTL");
                assert_eq!(args.timeout_lock, None);
                assert!(args.command.is_empty());
            }
            other => panic!("parsed as {other:?}"),
        }
        // Everything after `--` is CMD, global options and dashes included.
        let cli = parse(&[
            "lock",
            "jobs",
            "--ttl",
            "2s",
            "--timeout-lock",
            "1s",
            "-o",
            "json",
            "--",
            "sh",
            "-c",
            "echo hi",
            "-o",
            "table",
        ])
        .expect("parses");
        assert_eq!(cli.global.output, OutputFormat::Json);
        match cli.command {
            Top::Client(Command::Lock(args)) => {
                assert_eq!(args.name, "jobs");
                assert_eq!(args.ttl, Duration::from_secs(2));
                assert_eq!(args.timeout_lock, Some(Duration::from_secs(1)));
                assert_eq!(args.command, ["sh", "-c", "echo hi", "-o", "table"]);
            }
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["elect", "scheduler", "node-a", "--ttl", "5s"]).map(|c| c.command) {
            Ok(Top::Client(Command::Elect(args))) => {
                assert_eq!(args.value.as_deref(), Some("node-a"));
                assert!(!args.listen);
                assert_eq!(args.ttl, Duration::from_secs(5));
            }
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["elect", "scheduler", "--listen", "--count", "1"]).map(|c| c.command) {
            Ok(Top::Client(Command::Elect(ElectArgs {
                value: None,
                listen: true,
                count: Some(1),
                ..
            }))) => {}
            other => panic!("parsed as {other:?}"),
        }
        match parse(&[
            "presence",
            "join",
            "workers",
            "w-1",
            "10.0.0.7:80",
            "--ttl",
            "3s",
        ])
        .map(|c| c.command)
        {
            Ok(Top::Client(Command::Presence(PresenceCmd::Join {
                group,
                member,
                metadata,
                ttl,
            }))) => {
                assert_eq!((group.as_str(), member.as_str()), ("workers", "w-1"));
                assert_eq!(metadata, "10.0.0.7:80");
                assert_eq!(ttl, Duration::from_secs(3));
            }
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["presence", "join", "workers", "w-1"]).map(|c| c.command) {
            Ok(Top::Client(Command::Presence(PresenceCmd::Join { metadata, ttl, .. }))) => {
                assert_eq!(metadata, "", "metadata is optional");
                assert_eq!(ttl, Duration::from_secs(10));
            }
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["presence", "watch", "workers", "--count", "3"]).map(|c| c.command) {
            Ok(Top::Client(Command::Presence(PresenceCmd::Watch { count: Some(3), .. }))) => {}
            other => panic!("parsed as {other:?}"),
        }
        match parse(&["presence", "list", "workers"]).map(|c| c.command) {
            Ok(Top::Client(Command::Presence(PresenceCmd::List { group }))) => {
                assert_eq!(group, "workers");
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn bad_watch_lock_elect_and_presence_arguments_are_rejected() {
        assert!(parse(&["watch"]).is_err(), "KEY required");
        assert!(parse(&["watch", "k", "--count", "0"]).is_err());
        assert!(parse(&["watch", "k", "--rev", "0"]).is_err());
        assert!(parse(&["lock"]).is_err(), "NAME required");
        assert!(
            parse(&["lock", "jobs", "--ttl", "10"]).is_err(),
            "unit required"
        );
        assert!(parse(&["lock", "jobs", "--timeout-lock", "0s"]).is_err());
        assert!(parse(&["lock", "jobs", "sh"]).is_err(), "CMD only after --");
        assert!(parse(&["elect", "s"]).is_err(), "VALUE or --listen");
        assert!(parse(&["elect", "s", "v", "--listen"]).is_err());
        assert!(parse(&["elect", "s", "--listen", "--ttl", "5s"]).is_err());
        assert!(
            parse(&["elect", "s", "v", "--count", "1"]).is_err(),
            "--count needs --listen"
        );
        assert!(
            parse(&["presence", "join", "workers"]).is_err(),
            "MEMBER required"
        );
        assert!(parse(&["presence", "list"]).is_err());
        assert!(parse(&["presence", "watch", "g", "--count", "0"]).is_err());
    }

    #[test]
    fn txn_parses_compares_operations_and_guard_in_order() {
        let cli = parse(&[
            "txn",
            "--if",
            "svc/leader version = 0",
            "--if",
            "svc/epoch value != 3",
            "--then",
            "put svc/leader node-a --lease 7",
            "--then",
            "get svc/ --prefix",
            "--else",
            "get svc/leader",
            "--guard",
            "jobs:42",
        ])
        .expect("parses");
        let Top::Client(Command::Txn(args)) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(args.compares.len(), 2);
        assert_eq!(args.compares[0].key, b"svc/leader");
        assert_eq!(args.compares[1].key, b"svc/epoch");
        let kinds: Vec<&str> = args
            .success
            .iter()
            .chain(&args.failure)
            .map(|op| match &op.op {
                Some(zaris_client::proto::txn_op::Op::Put(_)) => "put",
                Some(zaris_client::proto::txn_op::Op::Range(_)) => "get",
                Some(zaris_client::proto::txn_op::Op::DeleteRange(_)) => "del",
                None => "none",
            })
            .collect();
        assert_eq!(kinds, ["put", "get", "get"]);
        let guard = args.guard.expect("guard");
        assert_eq!((guard.lock_name.as_str(), guard.token), ("jobs", 42));

        // No compares and no operations is a valid (empty) Txn.
        assert!(parse(&["txn"]).is_ok());
    }

    #[test]
    fn bad_txn_arguments_are_usage_errors_naming_the_problem() {
        let err = |args: &[&str]| {
            let err = parse(args).expect_err("rejected");
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{err}");
            err.to_string()
        };
        let message = err(&["txn", "--if", "k version ="]);
        assert!(message.contains("--if <COMPARE>"), "{message}");
        assert!(message.contains("KEY TARGET OP OPERAND"), "{message}");
        assert!(err(&["txn", "--if", "k size = 1"]).contains("unknown TARGET"));
        assert!(err(&["txn", "--if", "k version = x"]).contains("must be a number"));
        assert!(err(&["txn", "--then", "set k v"]).contains("unknown operation"));
        assert!(err(&["txn", "--else", "put k"]).contains("put KEY VALUE"));
        assert!(err(&["txn", "--guard", "jobs"]).contains("LOCK:TOKEN"));
        assert!(err(&["txn", "--guard", "jobs:0"]).contains("positive"));
    }

    #[test]
    fn every_subcommand_has_an_example() {
        fn check(command: &clap::Command, path: &str) {
            for sub in command.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                if path != "zaris serve" {
                    let after = sub
                        .get_after_help()
                        .map(|h| h.to_string())
                        .unwrap_or_default();
                    assert!(after.starts_with("Example: zaris"), "{path}: {after:?}");
                }
                check(sub, &path);
            }
        }
        check(&TestCli::command(), "zaris");
    }
}
