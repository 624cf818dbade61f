//! Tests against a cluster of containers: the real image on a Docker network this run creates,
//! members known to each other by name (`zaris-1:7001`, ...), the client on the host reaching
//! them through ports published on 127.0.0.1. Faults are Docker's own: `docker kill` (SIGKILL)
//! and `docker pause` (the freezer cgroup). Every container, network and volume is labelled with
//! the run and removed when the run ends, whatever the outcome.

mod compose;
mod docker;
pub mod history;

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use zaris_client::{Client, ClientOptions, LockOutcome, PutOptions, Role};
use zaris_testkit::try_eventually;

pub use docker::{LABEL, Run, docker};

/// Election timeout of the container nodes (the server's default).
const ELECTION_TIMEOUT: Duration = Duration::from_millis(1_000);
/// How long a cluster may take to elect a leader, or to recover from a fault.
pub(crate) const SETTLE: Duration = Duration::from_secs(60);

/// The nodes' Raft and lease timings.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    pub election_timeout_ms: u64,
    pub heartbeat_ms: Option<u64>,
    pub min_ttl_ms: Option<u64>,
}

impl Timings {
    /// The server's defaults (election timeout 1 s).
    pub const DEFAULT: Timings = Timings {
        election_timeout_ms: ELECTION_TIMEOUT.as_millis() as u64,
        heartbeat_ms: None,
        min_ttl_ms: None,
    };
    /// The fault harness's (`run.rs`), which its timing checkers assume.
    pub const HARNESS: Timings = Timings {
        election_timeout_ms: crate::run::ELECTION_TIMEOUT_MS,
        heartbeat_ms: Some(crate::run::HEARTBEAT_MS),
        min_ttl_ms: Some(crate::run::MIN_TTL_MS),
    };
}

/// A cluster of `size` containers of `image`.
#[derive(Debug)]
pub struct ContainerCluster {
    run: Run,
    image: String,
    timings: Timings,
    /// The initial members.
    size: u64,
    /// Node id → the host port (on 127.0.0.1) its client API is published on: fixed per node,
    /// so clients keep their endpoints when a container restarts.
    ports: std::sync::Mutex<std::collections::BTreeMap<u64, u16>>,
}

impl ContainerCluster {
    /// Creates the network and a volume per node, and starts every node.
    pub async fn start(image: &str, size: u64) -> Result<ContainerCluster> {
        Self::start_with(image, size, Timings::DEFAULT).await
    }

    /// [`ContainerCluster::start`] with other timings.
    pub async fn start_with(image: &str, size: u64, timings: Timings) -> Result<ContainerCluster> {
        let cluster = ContainerCluster {
            run: Run::new(),
            image: image.to_owned(),
            timings,
            size,
            ports: Default::default(),
        };
        let label = cluster.run.label();
        docker(&["network", "create", "--label", &label, &cluster.network()]).await?;
        for id in 1..=size {
            cluster.create(id, false).await?;
        }
        Ok(cluster)
    }

    fn network(&self) -> String {
        format!("zaris-test-{}", self.run.id)
    }

    fn volume(&self, id: u64) -> String {
        format!("zaris-test-{}-{id}", self.run.id)
    }

    /// The container of node `id`.
    pub fn container(&self, id: u64) -> String {
        format!("zaris-test-{}-{id}", self.run.id)
    }

    /// The name node `id` is known by on the cluster's network.
    pub fn host(id: u64) -> String {
        format!("zaris-{id}")
    }

    /// Node `id`'s `--initial-cluster` entry: its client port 7001 and peer port 7101 (the
    /// image's defaults) by name.
    fn member(id: u64) -> String {
        let host = Self::host(id);
        format!("{id}={host}:7001/{host}:7101")
    }

    /// A cluster of `size` containers of `image`, each restored from `backup` (a
    /// `zaris snapshot save` file on the host) into its new volume with the image's own
    /// `zaris snapshot restore`, then started on it: the backup and restore steps of deploy.md.
    pub async fn restored(
        image: &str,
        size: u64,
        backup: &std::path::Path,
        bump_revision: u64,
    ) -> Result<ContainerCluster> {
        let cluster = ContainerCluster {
            run: Run::new(),
            image: image.to_owned(),
            timings: Timings::DEFAULT,
            size,
            ports: Default::default(),
        };
        let label = cluster.run.label();
        docker(&["network", "create", "--label", &label, &cluster.network()]).await?;
        let members: Vec<String> = (1..=size).map(Self::member).collect();
        let mount = format!("{}:/backup.zsnap:ro", backup.display());
        for id in 1..=size {
            let volume = cluster.volume(id);
            docker(&["volume", "create", "--label", &label, &volume]).await?;
            let data = format!("{volume}:/var/lib/zaris");
            let (node_id, bump) = (id.to_string(), bump_revision.to_string());
            docker(&[
                "run",
                "--rm",
                "--label",
                &label,
                "--volume",
                &data,
                "--volume",
                &mount,
                "--entrypoint",
                "zaris",
                image,
                "snapshot",
                "restore",
                "/backup.zsnap",
                "--node-id",
                &node_id,
                "--data-dir",
                "/var/lib/zaris",
                "--initial-cluster",
                &members.join(","),
                "--bump-revision",
                &bump,
            ])
            .await?;
            cluster.create(id, false).await?;
        }
        Ok(cluster)
    }

    /// Copies `path` out of node `id`'s container to `to` on the host.
    pub async fn copy_out(&self, id: u64, path: &str, to: &std::path::Path) -> Result<()> {
        let from = format!("{}:{path}", self.container(id));
        docker(&["cp", &from, &to.display().to_string()])
            .await
            .map(drop)
    }

    /// Creates node `id`'s volume and container and starts it: an initial member, or (`join`) an
    /// empty node that waits for `member add`.
    async fn create(&self, id: u64, join: bool) -> Result<()> {
        docker(&[
            "volume",
            "create",
            "--label",
            &self.run.label(),
            &self.volume(id),
        ])
        .await?;
        // A port the OS chooses, released for Docker to publish on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, port);
        let members: Vec<String> = (1..=self.size).map(Self::member).collect();
        let mut env = vec![
            format!("ZARIS_NODE_ID={id}"),
            format!(
                "ZARIS_ELECTION_TIMEOUT_MS={}",
                self.timings.election_timeout_ms
            ),
        ];
        if let Some(ms) = self.timings.heartbeat_ms {
            env.push(format!("ZARIS_HEARTBEAT_MS={ms}"));
        }
        if let Some(ms) = self.timings.min_ttl_ms {
            env.push(format!("ZARIS_MIN_TTL_MS={ms}"));
        }
        if join {
            env.push("ZARIS_JOIN=true".to_owned());
            env.push(format!("ZARIS_ADVERTISE={}:7001", Self::host(id)));
            env.push(format!("ZARIS_PEER_ADVERTISE={}:7101", Self::host(id)));
        } else {
            env.push(format!("ZARIS_INITIAL_CLUSTER={}", members.join(",")));
        }
        let publish = format!("127.0.0.1:{port}:7001");
        let (label, name, host, network) = (
            self.run.label(),
            self.container(id),
            Self::host(id),
            self.network(),
        );
        let volume = format!("{}:/var/lib/zaris", self.volume(id));
        let mut args = vec![
            "run",
            "--detach",
            "--label",
            &label,
            "--name",
            &name,
            "--hostname",
            &host,
            "--network",
            &network,
            "--network-alias",
            &host,
            "--volume",
            &volume,
            "--publish",
            &publish,
        ];
        for var in &env {
            args.extend(["--env", var.as_str()]);
        }
        args.push(&self.image);
        docker(&args).await?;
        Ok(())
    }

    /// `127.0.0.1:PORT` of node `id`'s client API on the host.
    pub async fn endpoint(&self, id: u64) -> Result<String> {
        let ports = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        let port = ports.get(&id).with_context(|| format!("no node {id}"))?;
        Ok(format!("127.0.0.1:{port}"))
    }

    /// Runs `zaris ARGS` inside node `id`'s container against the node itself (127.0.0.1:7001),
    /// so a node cut off from every network can still be asked; its standard output, or an
    /// error with what it printed.
    pub async fn exec(&self, id: u64, args: &[&str]) -> Result<String> {
        let container = self.container(id);
        let mut command = vec![
            "exec",
            container.as_str(),
            "zaris",
            "--endpoints",
            "127.0.0.1:7001",
        ];
        command.extend_from_slice(args);
        docker(&command).await
    }

    pub async fn disconnect(&self, id: u64) -> Result<()> {
        docker(&[
            "network",
            "disconnect",
            &self.network(),
            &self.container(id),
        ])
        .await
        .map(drop)
    }

    pub async fn connect(&self, id: u64) -> Result<()> {
        let host = Self::host(id);
        docker(&[
            "network",
            "connect",
            "--alias",
            &host,
            &self.network(),
            &self.container(id),
        ])
        .await
        .map(drop)
    }

    /// `docker restart`: SIGTERM (a clean stop), then start again.
    pub async fn restart_gracefully(&self, id: u64) -> Result<()> {
        docker(&["restart", "--time", "30", &self.container(id)])
            .await
            .map(drop)
    }

    /// A client of the given nodes (by their current published ports).
    pub async fn client(&self, ids: &[u64], timeout: Duration) -> Result<Client> {
        self.client_with(ids, ClientOptions::default().with_timeout(timeout))
            .await
    }

    pub async fn client_with(&self, ids: &[u64], options: ClientOptions) -> Result<Client> {
        let mut endpoints = Vec::new();
        for id in ids {
            endpoints.push(self.endpoint(*id).await?);
        }
        Client::lazy(endpoints, options).context("client of the container cluster")
    }

    /// Every node's log (all the runs of its container, in order), for the log checkers.
    pub async fn logs(&self) -> std::collections::BTreeMap<u64, String> {
        let mut logs = std::collections::BTreeMap::new();
        for id in self.ids() {
            let output = tokio::process::Command::new("docker")
                .args(["logs", &self.container(id)])
                .output()
                .await;
            let text = match output {
                Ok(output) => format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
                Err(_) => String::new(),
            };
            logs.insert(id, text);
        }
        logs
    }

    /// Prints the end of every node's log, for a failure report.
    pub async fn report_logs(&self) {
        for id in self.ids() {
            eprintln!(
                "--- node {id} ({}):\n{}",
                self.container(id),
                self.log_tail(id).await
            );
        }
    }

    /// The ids of the nodes this cluster has created.
    pub fn ids(&self) -> Vec<u64> {
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// Waits until `client` names a leader other than `not`, and returns its id.
    pub async fn leader(&self, client: &Client, not: Option<u64>) -> Result<u64> {
        try_eventually("a Raft leader", SETTLE, || async {
            let leader = client.leader().await.ok()?;
            (Some(leader.id) != not).then_some(leader.id)
        })
        .await
    }

    /// Waits until node `id`, asked directly, has applied `index` and knows leader `leader`.
    pub async fn caught_up(&self, id: u64, index: u64, leader: u64) -> Result<()> {
        try_eventually(&format!("node {id} to catch up"), SETTLE, || async {
            let client = self.client(&[id], Duration::from_secs(2)).await.ok()?;
            let status = client.status().await.ok()?;
            (status.member_id == id
                && status.applied_index >= index
                && status.raft_leader_id == Some(leader))
            .then_some(())
        })
        .await
    }

    pub async fn kill(&self, id: u64) -> Result<()> {
        docker(&["kill", "--signal", "KILL", &self.container(id)])
            .await
            .map(drop)
    }

    pub async fn restart(&self, id: u64) -> Result<()> {
        docker(&["start", &self.container(id)]).await.map(drop)
    }

    pub async fn pause(&self, id: u64) -> Result<()> {
        docker(&["pause", &self.container(id)]).await.map(drop)
    }

    pub async fn unpause(&self, id: u64) -> Result<()> {
        docker(&["unpause", &self.container(id)]).await.map(drop)
    }

    /// The last lines of node `id`'s log (it logs to stderr), for a failure report.
    pub async fn log_tail(&self, id: u64) -> String {
        let output = tokio::process::Command::new("docker")
            .args(["logs", "--tail", "30", &self.container(id)])
            .output()
            .await;
        match output {
            Ok(output) => format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(err) => err.to_string(),
        }
    }
}

/// The scenarios, by name.
pub const SCENARIOS: [&str; 10] = [
    "worker-story",
    "leader-kill",
    "leader-pause",
    "leader-partition",
    "rolling-restart",
    "grow-and-shrink",
    "backup-restore",
    "lock-history",
    "lease-history",
    "compose",
];

/// Runs one scenario on a fresh three-node cluster of `image`. The history scenarios
/// ([`history`]) save what they recorded in `store/containers/SCENARIO`.
pub async fn run(image: &str, scenario: &str, seed: u64, store: &std::path::Path) -> Result<()> {
    if scenario == "compose" {
        return compose::run(image).await;
    }
    if let Some(workload) = history::workload_of(scenario) {
        let dir = store.join("containers").join(scenario);
        return history::run(image, workload, seed, &dir).await;
    }
    let cluster = ContainerCluster::start(image, 3).await?;
    let result = match scenario {
        "worker-story" => worker_story(&cluster).await,
        "leader-kill" => leader_kill(&cluster).await,
        "leader-pause" => leader_pause(&cluster).await,
        "leader-partition" => leader_partition(&cluster).await,
        "rolling-restart" => rolling_restart(&cluster).await,
        "grow-and-shrink" => grow_and_shrink(&cluster).await,
        "backup-restore" => backup_restore(&cluster, image).await,
        other => bail!("unknown container scenario {other:?}; known: {SCENARIOS:?}"),
    };
    if result.is_err() {
        cluster.report_logs().await;
    }
    result
}

/// A lease with the key `workers/a` bound to it, as a worker registers itself.
async fn worker_lease(client: &Client, ttl: Duration) -> Result<zaris_client::LeaseGrant> {
    let lease = client.grant(ttl).await?;
    let put = PutOptions {
        lease: Some(lease.id),
        ..PutOptions::default()
    };
    client.put("workers/a", "up", put).await?;
    Ok(lease)
}

/// `docker kill` of the leader: another node leads, and the lease, its key and the lock it holds
/// are all still there; the killed node comes back and catches up.
async fn leader_kill(cluster: &ContainerCluster) -> Result<()> {
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(20)).await?;
    let leader = cluster.leader(&client, None).await?;
    let lease = worker_lease(&client, Duration::from_secs(30)).await?;
    let token = match client.lock("jobs", lease.id, false, Duration::ZERO).await? {
        LockOutcome::Held { token } => token,
        other => bail!("a free lock was not granted: {other:?}"),
    };

    cluster.kill(leader).await?;
    let killed = std::time::Instant::now();
    let next = cluster.leader(&client, Some(leader)).await?;
    let elected = killed.elapsed();
    let kv = client
        .get("workers/a")
        .await?
        .context("the bound key is gone")?;
    ensure!(kv.lease == Some(lease.id), "the key lost its lease: {kv:?}");
    ensure!(
        client.time_to_live(lease.id, false).await?.is_some(),
        "lease {} is gone after the leader was killed",
        lease.id
    );
    let status = client.lock_status("jobs").await?;
    let holder = status.holder.context("the lock has no holder")?;
    ensure!(
        (holder.lease, holder.token) == (lease.id, token),
        "the lock changed hands: {holder:?}, expected lease {} token {token}",
        lease.id
    );
    let written = client.put("after-kill", "1", PutOptions::default()).await?;

    cluster.restart(leader).await?;
    cluster
        .caught_up(leader, written.revision.get(), next)
        .await?;
    println!(
        "  node {leader} killed: node {next} leads ({} ms later, as seen by the client), lease {} with its key and lock intact; node {leader} back and caught up",
        elected.as_millis(),
        lease.id
    );
    Ok(())
}

/// `docker pause` of the leader for longer than the election timeout: nothing sent to it is
/// acknowledged while it is frozen, the others elect a leader and serve, and once thawed the
/// old leader follows the new one in a later term.
async fn leader_pause(cluster: &ContainerCluster) -> Result<()> {
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(20)).await?;
    let leader = cluster.leader(&client, None).await?;
    let old_term = client.status().await?.raft_term;
    let frozen = cluster.client(&[leader], Duration::from_secs(3)).await?;
    frozen
        .put("before-pause", "1", PutOptions::default())
        .await?;

    cluster.pause(leader).await?;
    let acked = frozen.put("during-pause", "1", PutOptions::default()).await;
    ensure!(
        acked.is_err(),
        "a frozen leader acknowledged a write: {acked:?}"
    );
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let majority = cluster.client(&others, Duration::from_secs(20)).await?;
    let next = cluster.leader(&majority, Some(leader)).await?;
    let written = majority
        .put("while-paused", "1", PutOptions::default())
        .await?;
    tokio::time::sleep(ELECTION_TIMEOUT).await;

    cluster.unpause(leader).await?;
    cluster
        .caught_up(leader, written.revision.get(), next)
        .await?;
    let status = cluster
        .client(&[leader], Duration::from_secs(5))
        .await?
        .status()
        .await?;
    ensure!(
        status.role != Role::Leader && status.raft_term > old_term,
        "the thawed node did not step down: {status:?} (it led in term {old_term})"
    );
    println!(
        "  node {leader} frozen: its write unacknowledged, node {next} led in term {}, node {leader} followed after the thaw",
        status.raft_term
    );
    Ok(())
}

/// `docker network disconnect` of the leader, a real partition: the cut-off node acknowledges
/// nothing (asked from inside its container), the majority elects a leader and serves, and after
/// the reconnect the node catches up and follows.
async fn leader_partition(cluster: &ContainerCluster) -> Result<()> {
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(20)).await?;
    let leader = cluster.leader(&client, None).await?;
    client.put("before", "1", PutOptions::default()).await?;

    cluster.disconnect(leader).await?;
    let minority = cluster
        .exec(leader, &["--timeout", "3s", "put", "minority-write", "1"])
        .await;
    ensure!(
        minority.is_err(),
        "the cut-off leader acknowledged a write: {minority:?}"
    );
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let majority = cluster.client(&others, Duration::from_secs(20)).await?;
    let next = cluster.leader(&majority, Some(leader)).await?;
    let written = majority
        .put("majority-write", "1", PutOptions::default())
        .await?;

    cluster.connect(leader).await?;
    cluster
        .caught_up(leader, written.revision.get(), next)
        .await?;
    // What the minority was asked to write was never acknowledged; whatever became of it, the
    // majority's write is there on the reconnected node too.
    let seen = cluster.exec(leader, &["get", "majority-write"]).await?;
    ensure!(
        seen.contains('1'),
        "the reconnected node lacks the majority's write: {seen:?}"
    );
    println!(
        "  node {leader} cut off: it acknowledged nothing, node {next} led, node {leader} caught up after the reconnect"
    );
    Ok(())
}

/// Every node restarted in turn (`docker restart`: SIGTERM, then start) while a client holds a
/// lock and writes fenced values: the lock is never lost, and every acknowledged write is there
/// at the end.
async fn rolling_restart(cluster: &ContainerCluster) -> Result<()> {
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(20)).await?;
    cluster.leader(&client, None).await?;
    let lease = client.lease(Duration::from_secs(10)).await?;
    let guard = lease.lock("rolling").await?;
    let token = guard.token();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut acked, mut refused) = (0u64, None);
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && guard.is_held() {
                i += 1;
                match guard
                    .put("fenced", i.to_string(), PutOptions::default())
                    .await
                {
                    Ok(_) => acked = i,
                    // A refused fence is a lost lock; anything else (a leader restarting) is
                    // retried by the next write.
                    Err(err @ zaris_client::Error::NotHeld { .. }) => {
                        refused = Some(err);
                        break;
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (guard, acked, refused)
        })
    };
    let mut restarted = Vec::new();
    for id in 1..=3 {
        let before = client.status().await?.applied_index;
        cluster.restart_gracefully(id).await?;
        let leader = cluster.leader(&client, None).await?;
        cluster.caught_up(id, before, leader).await?;
        restarted.push(id);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (guard, acked, refused) = writer.await?;
    ensure!(refused.is_none(), "a fenced write was refused: {refused:?}");
    ensure!(
        guard.is_held() && lease.is_valid(),
        "the lock or its lease was lost during the rolling restart"
    );
    ensure!(acked > 0, "no fenced write was acknowledged");
    guard.unlock().await?;
    let last = client
        .get("fenced")
        .await?
        .context("the fenced key is gone")?;
    let last: u64 = String::from_utf8_lossy(&last.value).parse()?;
    ensure!(
        last >= acked,
        "acknowledged write {acked} lost: the key holds {last}"
    );
    println!(
        "  3 nodes restarted in turn: lock held throughout (token {token}), {acked} fenced writes acknowledged, none lost"
    );
    Ok(())
}

/// 3 → 5 → 3 members: two fresh containers join by name (`member add zaris-4:7001`), then two
/// of the original members are removed and stopped; the data stays, the cluster keeps serving.
async fn grow_and_shrink(cluster: &ContainerCluster) -> Result<()> {
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(30)).await?;
    cluster.leader(&client, None).await?;
    let lease = worker_lease(&client, Duration::from_secs(60)).await?;
    for id in [4, 5] {
        cluster.create(id, true).await?;
        let members = client
            .member_add(
                id,
                format!("{}:7001", ContainerCluster::host(id)),
                format!("{}:7101", ContainerCluster::host(id)),
                true,
            )
            .await?;
        ensure!(
            members.iter().any(|m| m.id == id),
            "node {id} is not a member after member add: {members:?}"
        );
    }
    let written = client.put("grown", "5", PutOptions::default()).await?;
    let five = client.member_list().await?;
    ensure!(five.len() == 5, "expected five members: {five:?}");
    let leader = cluster.leader(&client, None).await?;
    for id in [4, 5] {
        cluster
            .caught_up(id, written.revision.get(), leader)
            .await?;
    }

    // The client knows every member's endpoint: the leader, which a redirect names by a name
    // only the cluster's network resolves, may be any of them.
    let all = cluster
        .client(&[1, 2, 3, 4, 5], Duration::from_secs(30))
        .await?;
    for id in [1, 2] {
        all.member_remove(id)
            .await
            .with_context(|| format!("member remove {id}"))?;
        cluster.kill(id).await?;
    }
    let survivors = cluster.client(&[3, 4, 5], Duration::from_secs(30)).await?;
    let three = survivors.member_list().await?;
    ensure!(
        three.iter().map(|m| m.id).collect::<Vec<_>>() == vec![3, 4, 5],
        "expected members 3, 4, 5: {three:?}"
    );
    cluster.leader(&survivors, None).await?;
    ensure!(
        survivors.get("workers/a").await?.is_some()
            && survivors.time_to_live(lease.id, false).await?.is_some(),
        "the lease or its key was lost while the membership changed"
    );
    survivors.put("shrunk", "3", PutOptions::default()).await?;
    println!(
        "  3 → 5 (zaris-4, zaris-5 added by name) → 3 (nodes 1, 2 removed): data kept, still serving"
    );
    Ok(())
}

/// The story `zaris demo` tells, on containers: worker A holds the job lock and dies (its lease
/// is never renewed again), worker B waits and takes over with a higher fencing token once A's
/// lease expires, A's late write with its old token is refused; then the leader container is
/// killed and B keeps the lock.
async fn worker_story(cluster: &ContainerCluster) -> Result<()> {
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(20)).await?;
    let leader = cluster.leader(&client, None).await?;
    // A: a bare lease nobody renews, as if its process died right after locking.
    let a = client.grant(Duration::from_secs(3)).await?;
    let a_token = match client.lock("jobs", a.id, false, Duration::ZERO).await? {
        LockOutcome::Held { token } => token,
        other => bail!("A did not get the free lock: {other:?}"),
    };
    // B waits in the queue, kept alive by its client.
    let b_lease = client.lease(Duration::from_secs(5)).await?;
    let b = b_lease.lock("jobs").await?;
    ensure!(
        b.token() > a_token,
        "B's token {} is not above A's {a_token}",
        b.token()
    );
    ensure!(
        client.time_to_live(a.id, false).await?.is_none(),
        "B holds the lock while A's lease {} still exists",
        a.id
    );
    let late = client
        .put(
            "jobs/last",
            "late write from A",
            PutOptions {
                guard: Some(zaris_client::Fence {
                    lock: "jobs".into(),
                    token: a_token,
                }),
                ..PutOptions::default()
            },
        )
        .await;
    ensure!(
        matches!(late, Err(zaris_client::Error::NotHeld { .. })),
        "A's late write with its old token was not refused: {late:?}"
    );
    b.put("jobs/last", "written by B", PutOptions::default())
        .await?;

    cluster.kill(leader).await?;
    cluster.leader(&client, Some(leader)).await?;
    b.put(
        "jobs/last",
        "B after the leader died",
        PutOptions::default(),
    )
    .await?;
    ensure!(b.is_held(), "B lost the lock when the leader died");
    println!(
        "  A (token {a_token}) died; B took over with token {} after A's lease expired; A's late write refused; B kept the lock through the leader's death",
        b.token()
    );
    b.unlock().await?;
    Ok(())
}

/// deploy.md's backup and restore, with the image: `zaris snapshot save` inside a member's
/// container (a follower's, so it is redirected to the leader by name), the file copied out, and
/// a new cluster on new volumes restored from it with `zaris snapshot restore`. The new cluster
/// serves the worker's lease, key and lock (same lease id and fencing token) and the plain key,
/// and continues revisions above the bump.
async fn backup_restore(cluster: &ContainerCluster, image: &str) -> Result<()> {
    const BUMP: u64 = 1_000_000;
    let client = cluster.client(&[1, 2, 3], Duration::from_secs(20)).await?;
    let leader = cluster.leader(&client, None).await?;
    let lease = worker_lease(&client, Duration::from_secs(60)).await?;
    let token = match client.lock("jobs", lease.id, false, Duration::ZERO).await? {
        LockOutcome::Held { token } => token,
        other => bail!("a free lock was not granted: {other:?}"),
    };
    let written = client
        .put("config/mode", "active", PutOptions::default())
        .await?;
    let follower = (1..=3).find(|id| *id != leader).context("a follower")?;
    let saved = cluster
        .exec(
            follower,
            &["-o", "json", "snapshot", "save", "/tmp/backup.zsnap"],
        )
        .await?;
    let saved: serde_json::Value =
        serde_json::from_str(&saved).context("snapshot save's answer")?;
    let revision = saved["header"]["revision"]
        .as_u64()
        .with_context(|| format!("no revision in {saved}"))?;
    ensure!(
        revision >= written.revision.get(),
        "the snapshot at revision {revision} misses the write at {}",
        written.revision
    );
    let scratch = tempfile::tempdir()?;
    let backup = scratch.path().join("backup.zsnap");
    cluster
        .copy_out(follower, "/tmp/backup.zsnap", &backup)
        .await?;
    // Saved mode 0600 (it holds every value); the restoring containers run as the image's
    // user, as deploy.md says to allow for.
    std::fs::set_permissions(&backup, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    // The old cluster is gone (as in a disaster); the new one is restored on new volumes.
    for id in 1..=3 {
        cluster.kill(id).await?;
    }
    let restored = ContainerCluster::restored(image, 3, &backup, BUMP).await?;
    let result = async {
        let client = restored.client(&[1, 2, 3], Duration::from_secs(20)).await?;
        restored.leader(&client, None).await?;
        let info = client
            .time_to_live(lease.id, true)
            .await?
            .with_context(|| format!("lease {} was not restored", lease.id))?;
        ensure!(info.bound_keys == vec![b"workers/a".to_vec()], "bound keys {:?}", info.bound_keys);
        let holder = client.lock_status("jobs").await?.holder;
        ensure!(
            holder == Some(zaris_client::LockHolder { lease: lease.id, token }),
            "lock holder {holder:?}, expected lease {} with token {token}",
            lease.id
        );
        let mode = client.get("config/mode").await?.context("config/mode was not restored")?;
        ensure!(mode.value == b"active" && mode.mod_revision == written.revision, "config/mode is {mode:?}");
        client.keep_alive_once([lease.id]).await?;
        let next = client.put("config/mode", "restored", PutOptions::default()).await?;
        ensure!(
            next.revision.get() > revision + BUMP,
            "the restored cluster wrote at revision {}, not above {revision} + {BUMP}",
            next.revision
        );
        println!(
            "  saved revision {revision} through follower {follower}; restored 3 new members: lease {} with its key and the lock (token {token}) back, next write at revision {}",
            lease.id, next.revision
        );
        Ok(())
    }
    .await;
    if result.is_err() {
        restored.report_logs().await;
    }
    result
}
