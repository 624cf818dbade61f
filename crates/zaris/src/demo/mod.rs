//! `zaris demo`: the story Zaris exists for, acted out on a real local cluster.
//!
//! Three `zaris serve` processes start in a temporary directory. Worker A takes the job-queue
//! lock with a lease, announces itself in a presence group and processes jobs with fenced writes.
//! A is killed with SIGKILL: its presence key vanishes when its lease expires, and the lock
//! passes to the waiting worker B with a higher fencing token. A late write carrying A's old
//! token is refused by the store. Then the Raft leader is killed, and B's ownership survives the
//! failover. Every step is checked; any broken promise ends the demo with an error. Everything
//! started is stopped and the directory removed, also on failure or Ctrl-C.

pub mod worker;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use clap::Args;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;
use zaris_client::{
    Client, ClientOptions, EventKind, Fence, FencingToken, LeaseId, LockHolder, Presence,
    PresenceEvent, PutOptions,
};
use zaris_testkit::{Serve, ServeProcess, grow_cluster, try_eventually};

/// The presence group workers join.
pub const WORKERS_GROUP: &str = "workers";
/// The lock guarding the job queue.
pub const JOB_LOCK: &str = "jobs/queue";
/// The key each processed job is recorded in (a fenced write).
pub const LAST_JOB_KEY: &str = "jobs/last";
/// The workers' lease TTL.
const WORKER_TTL_MS: u64 = 3_000;
/// Longest wait for any single step.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// Fast enough for a demo, and a TTL floor above the election timeout as the server requires.
const ELECTION_TIMEOUT_MS: u64 = 500;
const HEARTBEAT_MS: u64 = 50;
const MIN_TTL_MS: u64 = 1_000;
/// The end-to-end bound of the demo's and the workers' client calls.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(15);

/// Arguments of `zaris demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the cluster's data directory (its path is printed) instead of removing it.
    #[arg(long)]
    pub keep: bool,
}

/// Resolves on SIGINT or SIGTERM, or when stdin closes (how the demo stops its workers).
pub async fn terminated() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Prints timestamped steps.
#[derive(Clone, Copy)]
struct Timeline {
    started: Instant,
}

impl Timeline {
    fn say(&self, who: &str, what: impl AsRef<str>) {
        let elapsed = self.started.elapsed().as_secs_f64();
        println!("[{elapsed:>7.3}s] {who:<9} {}", what.as_ref());
    }
}

pub async fn run(args: DemoArgs) -> Result<()> {
    let timeline = Timeline {
        started: Instant::now(),
    };
    let dir = tempfile::Builder::new()
        .prefix("zaris-demo-")
        .tempdir()
        .context("creating a temporary directory")?;
    timeline.say("demo", format!("cluster data in {}", dir.path().display()));
    let mut cast = Cast::default();
    let outcome = tokio::select! {
        outcome = story(&timeline, dir.path(), &mut cast) => outcome,
        () = terminated() => Err(anyhow!("interrupted")),
    };
    if outcome.is_err() {
        for node in &cast.nodes {
            print_log_tail(node);
        }
    }
    cast.stop().await;
    if args.keep {
        let kept = dir.keep();
        timeline.say("demo", format!("kept {}", kept.display()));
    } else {
        timeline.say(
            "demo",
            "stopped every process and removed the data directory",
        );
    }
    outcome
}

/// Everything the demo started, stopped on the way out whatever happened.
#[derive(Default)]
struct Cast {
    nodes: Vec<ServeProcess>,
    workers: Vec<WorkerProc>,
}

impl Cast {
    async fn stop(&mut self) {
        for worker in &mut self.workers {
            worker.kill().await;
        }
        for node in &mut self.nodes {
            node.kill().await;
        }
    }
}

fn print_log_tail(node: &ServeProcess) {
    eprintln!(
        "--- last lines of node {}'s log ({}) ---",
        node.id(),
        node.log_path().display()
    );
    eprintln!("{}", node.log_tail(15));
}

/// A client for the demo's own calls and the workers'.
async fn client(endpoints: &[String]) -> Result<Client> {
    let options = ClientOptions::default().with_timeout(CLIENT_TIMEOUT);
    Ok(Client::connect_with(endpoints.iter().cloned(), options).await?)
}

/// Three `zaris serve` processes of this binary in `root`, grown the way an operator would.
async fn start_nodes(root: &Path) -> Result<Vec<ServeProcess>> {
    let exe = std::env::current_exe().context("locating the zaris binary")?;
    grow_cluster(3, |id| {
        Serve::new(&exe, id, root)
            .election_timeout_ms(ELECTION_TIMEOUT_MS)
            .heartbeat_ms(HEARTBEAT_MS)
            .min_ttl_ms(MIN_TTL_MS)
    })
    .await
}

async fn story(t: &Timeline, root: &Path, cast: &mut Cast) -> Result<()> {
    cast.nodes = start_nodes(root).await?;
    let endpoints: Vec<String> = cast.nodes.iter().map(|n| n.endpoint().to_owned()).collect();
    let client = client(&endpoints).await?;
    let leader = leader_of(&client, 0).await?;
    let listing: Vec<String> = cast
        .nodes
        .iter()
        .map(|n| format!("{}={}", n.id(), n.endpoint()))
        .collect();
    t.say(
        "cluster",
        format!("3 nodes up ({}); node {leader} leads", listing.join(", ")),
    );

    let (departures, mut departed) = mpsc::unbounded_channel();
    let mut presence = Presence::new(&client, WORKERS_GROUP).watch().await?;
    let narrator = *t;
    let watch_task = tokio::spawn(async move {
        while let Some(Ok(event)) = presence.next().await {
            match &event {
                PresenceEvent::Joined(member) => narrator.say(
                    "presence",
                    format!(
                        "{} is present (key bound to lease {})",
                        member.name, member.lease
                    ),
                ),
                PresenceEvent::Left { .. } => {
                    let _ = departures.send(event);
                }
                PresenceEvent::Updated(_) => {}
            }
        }
    });
    let _watch_guard = AbortOnDrop(watch_task);

    // Worker A takes the lock and works.
    cast.workers
        .push(WorkerProc::spawn(t, "A", &endpoints).await?);
    let a_token: u64 = parse(&cast.workers[0].expect(t, "locked").await?)?;
    let a_lease: u64 = cast.workers[0].lease;
    // Worker B queues behind it.
    cast.workers
        .push(WorkerProc::spawn(t, "B", &endpoints).await?);
    cast.workers[1].expect(t, "joined").await?;
    try_eventually("B to queue for the lock", STEP_TIMEOUT, || async {
        let status = client.lock_status(JOB_LOCK).await.ok()?;
        (status.waiters == 1).then_some(())
    })
    .await?;
    t.say("worker B", format!("waiting in line for {JOB_LOCK}"));
    cast.workers[0].expect(t, "job 3").await?;

    // A dies without a word.
    cast.workers[0].kill().await;
    let killed = Instant::now();
    t.say(
        "demo",
        "SIGKILL worker A: no unlock, no revoke; its lease stops being renewed",
    );
    let left = tokio::time::timeout(STEP_TIMEOUT, async {
        while let Some(event) = departed.recv().await {
            if let PresenceEvent::Left {
                name, how, lease, ..
            } = event
                && name == "A"
            {
                return Some((how, lease));
            }
        }
        None
    })
    .await
    .context("A's presence key did not vanish")?
    .ok_or_else(|| anyhow!("the presence watch ended"))?;
    ensure!(
        left == (EventKind::Expire, LeaseId::new(a_lease)),
        "A left with {left:?}, expected its lease {a_lease} to expire"
    );
    t.say(
        "presence",
        format!(
            "A left: lease {a_lease} EXPIRED {} ms after the kill; its key is gone",
            killed.elapsed().as_millis()
        ),
    );
    let b_token: u64 = parse(&cast.workers[1].expect(t, "locked").await?)?;
    ensure!(
        b_token > a_token,
        "B's token {b_token} is not above A's {a_token}"
    );
    t.say(
        "demo",
        format!("the lock passed from A (token {a_token}) to B (token {b_token})"),
    );

    // A write from A that was delayed in the network arrives now, with A's old token.
    let late = client
        .put(
            LAST_JOB_KEY,
            "late write from A",
            PutOptions {
                guard: Some(Fence {
                    lock: JOB_LOCK.into(),
                    token: FencingToken::new(a_token),
                }),
                ..PutOptions::default()
            },
        )
        .await;
    ensure!(
        matches!(late, Err(zaris_client::Error::NotHeld { .. })),
        "the store did not refuse a write with A's stale token ({late:?})"
    );
    t.say(
        "store",
        format!("REJECTED a late write from A with stale token {a_token} (guard failed)"),
    );
    cast.workers[1].expect(t, "job 2").await?;

    // The Raft leader dies.
    let leader = leader_of(&client, 0).await?;
    let index = cast
        .nodes
        .iter()
        .position(|n| n.id() == leader)
        .ok_or_else(|| anyhow!("leader {leader} is not one of the demo's nodes"))?;
    cast.nodes[index].kill().await;
    let failed_at = Instant::now();
    t.say("demo", format!("SIGKILL node {leader}, the Raft leader"));
    let new_leader = leader_of(&client, leader).await?;
    t.say(
        "cluster",
        format!(
            "node {new_leader} elected leader {} ms after the kill",
            failed_at.elapsed().as_millis()
        ),
    );
    let after = cast.workers[1].expect(t, "job").await?;
    let job: u64 = parse(after.split_whitespace().next().unwrap_or(""))?;
    cast.workers[1]
        .expect(t, &format!("job {}", job + 2))
        .await?;
    let status = client.lock_status(JOB_LOCK).await?;
    let b_lease = cast.workers[1].lease;
    ensure!(
        status.holder
            == Some(LockHolder {
                lease: LeaseId::new(b_lease),
                token: FencingToken::new(b_token)
            }),
        "after the failover the lock is {status:?}, not B's (lease {b_lease}, token {b_token})"
    );
    let (members, _) = Presence::new(&client, WORKERS_GROUP).members().await?;
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    ensure!(names == ["B"], "presence lists {names:?}, expected only B");
    t.say(
        "demo",
        format!(
            "ownership survived the failover: B still holds {JOB_LOCK} with token {b_token} \
             and keeps writing"
        ),
    );

    cast.workers[1].stop(t).await?;
    t.say(
        "demo",
        "done: takeover after a crash, fencing, and failover all held",
    );
    Ok(())
}

/// The Raft leader as the cluster reports it, waiting for one other than `not`.
async fn leader_of(client: &Client, not: u64) -> Result<u64> {
    try_eventually("a Raft leader", STEP_TIMEOUT, || async {
        let leader = client.leader().await.ok()?.id;
        (leader != not).then_some(leader)
    })
    .await
}

fn parse(text: &str) -> Result<u64> {
    text.trim()
        .parse()
        .map_err(|_| anyhow!("expected a number, got {text:?}"))
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A worker process (`zaris demo-worker`) and its report lines.
struct WorkerProc {
    name: String,
    lease: u64,
    child: Option<Child>,
    lines: mpsc::UnboundedReceiver<String>,
}

impl WorkerProc {
    async fn spawn(t: &Timeline, name: &str, endpoints: &[String]) -> Result<WorkerProc> {
        let exe = std::env::current_exe().context("locating the zaris binary")?;
        let mut child = Command::new(exe)
            .args([
                "demo-worker",
                "--name",
                name,
                "--cluster",
                &endpoints.join(","),
            ])
            .args(["--ttl-ms", &WORKER_TTL_MS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting a worker")?;
        let (sender, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = child.stdout.take() {
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let _ = sender.send(line);
                }
            });
        }
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let _ = sender.send(format!("stderr {line}"));
                }
            });
        }
        let mut worker = WorkerProc {
            name: name.to_owned(),
            lease: 0,
            child: Some(child),
            lines,
        };
        let first = worker.next_line().await?;
        worker.lease = parse(first.strip_prefix("lease ").unwrap_or(&first))?;
        t.say(
            &format!("worker {name}"),
            format!(
                "started; lease {} granted (TTL {} s), renewed in the background",
                worker.lease,
                WORKER_TTL_MS / 1_000
            ),
        );
        Ok(worker)
    }

    async fn next_line(&mut self) -> Result<String> {
        let line = tokio::time::timeout(STEP_TIMEOUT, self.lines.recv())
            .await
            .with_context(|| format!("worker {} went quiet", self.name))?
            .ok_or_else(|| anyhow!("worker {} exited", self.name))?;
        if let Some(error) = line.strip_prefix("stderr ") {
            bail!("worker {}: {error}", self.name);
        }
        Ok(line)
    }

    /// Narrates the worker's lines until one starts with `prefix`; returns the rest of it.
    async fn expect(&mut self, t: &Timeline, prefix: &str) -> Result<String> {
        loop {
            let line = self.next_line().await?;
            let who = format!("worker {}", self.name);
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("joined"), ..) => {
                    t.say(&who, format!("joined presence group {WORKERS_GROUP:?}"))
                }
                (Some("locked"), Some(token), _) => t.say(
                    &who,
                    format!("acquired lock {JOB_LOCK} with fencing token {token}"),
                ),
                (Some("job"), Some(job), Some(revision)) => t.say(
                    &who,
                    format!("processed job {job} (fenced write at revision {revision})"),
                ),
                (Some("released"), ..) => {}
                _ => t.say(&who, &line),
            }
            if line == prefix {
                return Ok(String::new());
            }
            if let Some(rest) = line.strip_prefix(prefix)
                && rest.starts_with(' ')
            {
                return Ok(rest.trim().to_owned());
            }
        }
    }

    /// Asks the worker to stop (closing its stdin) and waits for its clean release.
    async fn stop(&mut self, t: &Timeline) -> Result<()> {
        if let Some(child) = self.child.as_mut() {
            child.stdin.take();
        }
        self.expect(t, "released").await?;
        if let Some(mut child) = self.child.take() {
            let status = tokio::time::timeout(STEP_TIMEOUT, child.wait()).await??;
            ensure!(
                status.success(),
                "worker {} exited with {status}",
                self.name
            );
        }
        t.say(
            &format!("worker {}", self.name),
            "released the lock and revoked its lease",
        );
        Ok(())
    }

    /// SIGKILL.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
}
