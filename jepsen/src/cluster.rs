//! Real `zaris serve` processes behind the harness's proxies.
//!
//! Node `j` listens on ports the OS picks and advertises its *client proxy* `C_j`: clients, and
//! redirects, only ever see proxy addresses. Node `i` reaches node `j`'s peer port through its
//! own *peer proxy* `P_ij` (the hidden `--peer-override` flag of a `fault-injection` build), so
//! every directed link can be cut, slowed or reset on its own. The peer address in `j`'s member
//! record is one more proxy, `M_j`, to its peer port: the overrides keep members from dialing
//! it, but it stays a working address across restarts. Every address is on 127.0.0.1.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::time::Instant;
use zaris_client::MemberKind;
use zaris_client::{Client, ClientOptions};
use zaris_testkit::{Serve, ServeProcess};

use crate::proxy::{Link, Shape};

/// The file in a node's data dir that arms one snapshot-install pause (the server's
/// `SNAPSHOT_INSTALL_PAUSE_TRIGGER`).
const INSTALL_PAUSE_TRIGGER: &str = "pause-next-snapshot-install";
/// How long a removed node may take to be a voter again.
const REJOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Membership calls: patient enough for a leader change in the middle.
fn admin_options() -> ClientOptions {
    ClientOptions::default().with_timeout(Duration::from_secs(10))
}

/// How to run the cluster.
#[derive(Clone, Debug)]
pub struct Spec {
    pub nodes: u64,
    pub zaris: PathBuf,
    pub root: PathBuf,
    pub election_timeout_ms: u64,
    pub heartbeat_ms: u64,
    pub min_ttl_ms: u64,
    /// Deliberate bugs every node runs with (`--bug`).
    pub bugs: Vec<String>,
    /// Lessor clock rates per node (`--clock-rate`).
    pub clock_rates: BTreeMap<u64, f64>,
    /// `--snapshot-entries`: small values make lagging nodes catch up by snapshot install.
    pub snapshot_entries: Option<u64>,
    /// `--snapshot-install-pause-ms`: the window in which the nemesis kills an installing node.
    pub snapshot_install_pause_ms: Option<u64>,
    /// TLS on every link, and the tokens of an access-controlled run.
    pub secure: Option<crate::secure::Secure>,
}

impl Spec {
    /// This run's cluster name: its process and its directory.
    pub fn cluster_name(&self) -> String {
        let run = self
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("jepsen-{}-{run}", std::process::id())
    }
}

#[derive(Debug)]
struct Node {
    process: Option<ServeProcess>,
    paused: bool,
    /// Removed from the membership, killed and wiped: it comes back with `--join` and
    /// `member add`.
    removed: bool,
}

#[derive(Debug)]
pub struct Cluster {
    pub spec: Spec,
    nodes: BTreeMap<u64, Node>,
    client_links: BTreeMap<u64, Link>,
    peer_links: BTreeMap<(u64, u64), Link>,
    /// `M_j`: the peer address in node `j`'s member record.
    member_peer_links: BTreeMap<u64, Link>,
}

impl Cluster {
    pub async fn start(spec: Spec) -> Result<Cluster> {
        let ids: Vec<u64> = (1..=spec.nodes).collect();
        let mut client_links = BTreeMap::new();
        let mut peer_links = BTreeMap::new();
        let mut member_peer_links = BTreeMap::new();
        for &to in &ids {
            client_links.insert(to, Link::start().await?);
            member_peer_links.insert(to, Link::start().await?);
            for &from in &ids {
                if from != to {
                    peer_links.insert((from, to), Link::start().await?);
                }
            }
        }
        let mut cluster = Cluster {
            spec,
            nodes: BTreeMap::new(),
            client_links,
            peer_links,
            member_peer_links,
        };
        for &id in &ids {
            cluster.launch(id, false).await?;
        }
        Ok(cluster)
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.spec.root.join(format!("node-{id}"))
    }

    pub fn log_path(&self, id: u64) -> PathBuf {
        self.spec.root.join(format!("node-{id}.log"))
    }

    /// The client proxy addresses, by node id.
    pub fn endpoints(&self) -> BTreeMap<u64, String> {
        self.client_links
            .iter()
            .map(|(id, link)| (*id, link.addr.to_string()))
            .collect()
    }

    /// Starts node `id`: a member of the initial cluster, or (`join`) an empty node that waits
    /// for `member add`.
    async fn launch(&mut self, id: u64, join: bool) -> Result<()> {
        let spec = &self.spec;
        let initial: Vec<String> = self
            .client_links
            .iter()
            .map(|(j, link)| format!("{j}={}/{}", link.addr, self.member_peer_links[j].addr))
            .collect();
        let overrides: Vec<String> = self
            .peer_links
            .iter()
            .filter(|((from, _), _)| *from == id)
            .map(|((_, to), link)| format!("{to}={}", link.addr))
            .collect();
        // The log is appended to: the checks read every process a node ran, in order.
        let mut serve = Serve::new(&spec.zaris, id, &spec.root)
            .append_log()
            .election_timeout_ms(spec.election_timeout_ms)
            .heartbeat_ms(spec.heartbeat_ms)
            .min_ttl_ms(spec.min_ttl_ms)
            .args(["--advertise", &self.client_links[&id].addr.to_string()])
            .args([
                "--peer-advertise",
                &self.member_peer_links[&id].addr.to_string(),
            ])
            .args(["--peer-override", &overrides.join(",")])
            // Runs side by side (CI runs two harnesses at once) must refuse each other's Raft
            // messages when one's node binds a port another's stopped node let go.
            .args(["--cluster-name", &spec.cluster_name()])
            .env("RUST_BACKTRACE", "1");
        if join {
            serve = serve.join();
        } else {
            serve = serve.args(["--initial-cluster", &initial.join(",")]);
        }
        if let Some(entries) = spec.snapshot_entries {
            serve = serve.args(["--snapshot-entries", &entries.to_string()]);
        }
        if let Some(pause_ms) = spec.snapshot_install_pause_ms {
            serve = serve.args(["--snapshot-install-pause-ms", &pause_ms.to_string()]);
        }
        for bug in &spec.bugs {
            serve = serve.args(["--bug", bug]);
        }
        if let Some(rate) = spec.clock_rates.get(&id) {
            serve = serve.args(["--clock-rate", &rate.to_string()]);
        }
        if let Some(secure) = &spec.secure {
            serve = serve.args(secure.serve_args());
        }
        let process = serve.start().await?;
        let (addr, peer_addr) = (process.addr(), process.peer_addr());
        self.nodes.insert(
            id,
            Node {
                process: Some(process),
                paused: false,
                removed: false,
            },
        );
        self.client_links[&id].set_target(addr);
        self.member_peer_links[&id].set_target(peer_addr);
        for ((_, to), link) in &self.peer_links {
            if *to == id {
                link.set_target(peer_addr);
            }
        }
        Ok(())
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.process.is_some())
    }

    /// SIGKILL: nothing of the shutdown path runs.
    pub async fn kill(&mut self, id: u64) {
        if let Some(node) = self.nodes.get_mut(&id)
            && let Some(mut process) = node.process.take()
        {
            process.kill().await;
            node.paused = false;
        }
    }

    /// Starts a killed node again on its data dir; a removed one joins again, empty.
    pub async fn restart(&mut self, id: u64) -> Result<()> {
        if self.is_running(id) {
            return Ok(());
        }
        if self.nodes.get(&id).is_some_and(|n| n.removed) {
            return self.rejoin(id).await;
        }
        self.launch(id, false).await
    }

    /// Removes node `id` from the membership (through a client of the whole cluster), then
    /// kills it and wipes its data dir: that node is gone for good. Fails, changing nothing, if
    /// the membership still has the node afterwards.
    pub async fn remove_member(&mut self, id: u64) -> Result<()> {
        let client = self.client(admin_options()).await?;
        if let Err(err) = client.member_remove(id).await {
            // Indeterminate: look.
            let members = client.member_list().await.context("member list")?;
            if members.iter().any(|m| m.id == id) {
                return Err(anyhow::Error::new(err).context(format!("member remove {id}")));
            }
        }
        self.kill(id).await;
        let dir = self.data_dir(id);
        std::fs::remove_dir_all(&dir).with_context(|| format!("wiping {}", dir.display()))?;
        if let Some(node) = self.nodes.get_mut(&id) {
            node.removed = true;
        }
        Ok(())
    }

    /// Brings a removed node back: started empty with `--join`, added as a learner and promoted
    /// once it caught up (retried, as an operator would, until it is a voter).
    async fn rejoin(&mut self, id: u64) -> Result<()> {
        self.launch(id, true).await?;
        let address = self.client_links[&id].addr.to_string();
        let peer_address = self.member_peer_links[&id].addr.to_string();
        let client = self.client(admin_options()).await?;
        let deadline = Instant::now() + REJOIN_TIMEOUT;
        let mut last_error = String::new();
        loop {
            let member = match client.member_list().await {
                Ok(list) => list.into_iter().find(|m| m.id == id),
                Err(err) => {
                    last_error = format!("member list: {err}");
                    None
                }
            };
            let outcome = match member {
                Some(m) if m.kind == MemberKind::Voter => break,
                Some(_) => client.member_promote(id).await.map(|_| ()),
                None => client
                    .member_add(id, address.clone(), peer_address.clone(), true)
                    .await
                    .map(|_| ()),
            };
            match outcome {
                Ok(()) => {}
                Err(err) => last_error = err.to_string(),
            }
            if Instant::now() >= deadline {
                bail!("node {id} is not a voter again after {REJOIN_TIMEOUT:?}: {last_error}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if let Some(node) = self.nodes.get_mut(&id) {
            node.removed = false;
        }
        Ok(())
    }

    /// Makes node `id`'s next snapshot install pause (`--snapshot-install-pause-ms`).
    pub fn arm_install_pause(&self, id: u64) {
        let _ = std::fs::write(self.data_dir(id).join(INSTALL_PAUSE_TRIGGER), b"");
    }

    /// Takes back [`Cluster::arm_install_pause`] if no install used it.
    pub fn disarm_install_pause(&self, id: u64) {
        let _ = std::fs::remove_file(self.data_dir(id).join(INSTALL_PAUSE_TRIGGER));
    }

    /// How many lines of node `id`'s log contain `needle` (0 if it cannot be read).
    pub fn log_count(&self, id: u64, needle: &str) -> usize {
        std::fs::read_to_string(self.log_path(id))
            .map(|text| text.lines().filter(|l| l.contains(needle)).count())
            .unwrap_or(0)
    }

    fn signal(&self, id: u64, signal: rustix::process::Signal) {
        let pid = self
            .nodes
            .get(&id)
            .and_then(|n| n.process.as_ref())
            .and_then(ServeProcess::pid)
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    /// SIGSTOP: the process stays, frozen, with its connections open.
    pub fn pause(&mut self, id: u64) {
        if self.is_running(id) {
            self.signal(id, rustix::process::Signal::STOP);
            if let Some(node) = self.nodes.get_mut(&id) {
                node.paused = true;
            }
        }
    }

    pub fn resume(&mut self, id: u64) {
        self.signal(id, rustix::process::Signal::CONT);
        if let Some(node) = self.nodes.get_mut(&id) {
            node.paused = false;
        }
    }

    /// Shapes the peer link `from → to`.
    pub fn shape_peer(&self, from: u64, to: u64, shape: Shape) {
        if let Some(link) = self.peer_links.get(&(from, to)) {
            link.shape(shape);
        }
    }

    /// Cuts every peer link between different groups (both directions).
    pub fn partition(&self, groups: &[Vec<u64>]) {
        let group_of = |id: u64| groups.iter().position(|g| g.contains(&id));
        for ((from, to), link) in &self.peer_links {
            if group_of(*from) != group_of(*to) {
                link.shape(Shape {
                    cut: true,
                    ..Shape::default()
                });
            }
        }
    }

    /// Shapes every link (peer and client).
    pub fn shape_all(&self, shape: Shape) {
        for link in self.peer_links.values().chain(self.client_links.values()) {
            link.shape(shape);
        }
    }

    /// Drops every open connection on every link.
    pub fn reset_all(&self) {
        for link in self.peer_links.values().chain(self.client_links.values()) {
            link.reset();
        }
    }

    /// Cuts (or restores) clients' access to node `id`.
    pub fn shape_client(&self, id: u64, shape: Shape) {
        if let Some(link) = self.client_links.get(&id) {
            link.shape(shape);
        }
    }

    /// Every link passes traffic again, and no node is paused. Killed nodes stay down.
    pub fn heal_network(&mut self) {
        for link in self.peer_links.values().chain(self.client_links.values()) {
            link.heal();
        }
        let paused: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.paused)
            .map(|(id, _)| *id)
            .collect();
        for id in paused {
            self.resume(id);
        }
    }

    /// Heals the network, resumes paused nodes and restarts killed ones.
    pub async fn heal_all(&mut self) -> Result<()> {
        self.heal_network();
        for id in self.ids() {
            self.restart(id).await?;
        }
        Ok(())
    }

    /// A client of the whole cluster (through the client proxies).
    pub async fn client(&self, options: ClientOptions) -> Result<Client> {
        // Lazy: clients are made while faults are active; every call retries on its own.
        Ok(Client::lazy(
            self.endpoints().into_values(),
            self.secured(options),
        )?)
    }

    /// A client that knows only node `id` (it still follows redirects, to proxy addresses).
    pub async fn client_of(&self, id: u64, options: ClientOptions) -> Result<Client> {
        let endpoint = self.client_links[&id].addr.to_string();
        Ok(Client::lazy([endpoint], self.secured(options))?)
    }

    /// With TLS and a token (the admin's, unless `options` carry one) in a secure run.
    fn secured(&self, options: ClientOptions) -> ClientOptions {
        match &self.spec.secure {
            Some(secure) => secure.client_options(options),
            None => options,
        }
    }

    /// The Raft leader as the nodes report it (the first running node that names one).
    pub async fn leader(&self) -> Option<u64> {
        let options = ClientOptions::default().with_timeout(Duration::from_millis(1_000));
        for id in self.ids() {
            if !self.is_running(id) {
                continue;
            }
            let Ok(client) = self.client_of(id, options.clone()).await else {
                continue;
            };
            if let Ok(status) = client.status().await
                && let Some(leader) = status.raft_leader_id
            {
                return Some(leader);
            }
        }
        None
    }

    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(leader) = self.leader().await {
                return Ok(leader);
            }
            if Instant::now() >= deadline {
                bail!("no Raft leader within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops every node (SIGCONT first, then SIGKILL: the data dirs are what the checks read).
    pub async fn stop(&mut self) {
        self.heal_network();
        for id in self.ids() {
            self.kill(id).await;
        }
    }

    /// Every node's log text (all the processes it ran, in order), by node.
    pub fn logs(&self) -> BTreeMap<u64, String> {
        self.nodes
            .keys()
            .map(|id| {
                (
                    *id,
                    std::fs::read_to_string(self.log_path(*id)).unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// Lines of the nodes' logs (see [`Cluster::logs`]) that report a panic, by node.
pub fn panics(logs: &BTreeMap<u64, String>) -> Vec<String> {
    logs.iter()
        .flat_map(|(id, text)| {
            text.lines()
                .filter(|l| l.contains("panicked"))
                .map(move |line| format!("node {id}: {line}"))
        })
        .collect()
}
