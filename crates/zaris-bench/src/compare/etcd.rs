//! etcd under the comparison: Debian's `etcd-server` (installed by [`ensure_installed`] when
//! missing), three members on 127.0.0.1 at the same timings as Zaris (heartbeat 100 ms, election
//! timeout 1 s), driven over its v3 gRPC API (`proto/etcd`) on one connection to the leader,
//! as Zaris's client talks to its leader.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;
use zaris_testkit::serve::log_tail;

use super::target::{Renewer, Target};

use crate::proto;

use proto::etcdserverpb::kv_client::KvClient;
use proto::etcdserverpb::lease_client::LeaseClient;
use proto::etcdserverpb::maintenance_client::MaintenanceClient;
use proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse, PutRequest, RangeRequest,
    StatusRequest,
};
use proto::v3lockpb::lock_client::LockClient;
use proto::v3lockpb::{LockRequest, UnlockRequest};

/// Where Debian's package puts the server.
const DEBIAN_ETCD: &str = "/usr/bin/etcd";
/// How long the members may take to elect a first leader.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The same Raft timings as Zaris's defaults.
const HEARTBEAT_MS: u64 = 100;
const ELECTION_TIMEOUT_MS: u64 = 1_000;

/// The etcd binary: `explicit` if given, else Debian's, installed with apt-get first if missing
/// (the bench's setup step; needs root and Debian's archive).
pub async fn ensure_installed(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        anyhow::ensure!(path.exists(), "no etcd at {}", path.display());
        return Ok(path.to_owned());
    }
    let debian = PathBuf::from(DEBIAN_ETCD);
    if debian.exists() {
        return Ok(debian);
    }
    println!("etcd not found: installing Debian's etcd-server with apt-get");
    for args in [
        &["update", "-qq"][..],
        &[
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "etcd-server",
        ][..],
    ] {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .status()
            .await?;
        anyhow::ensure!(
            status.success(),
            "apt-get {} failed: {status}",
            args.join(" ")
        );
    }
    anyhow::ensure!(debian.exists(), "etcd-server installed no {DEBIAN_ETCD}");
    Ok(debian)
}

struct Member {
    client_addr: String,
    child: Child,
}

pub struct EtcdCluster {
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts three members in `root` and waits for a leader.
    pub async fn start(etcd: &Path, root: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root)?;
        // Ports the OS chose, released just before etcd binds them (etcd takes only fixed ones).
        let mut ports = Vec::new();
        for _ in 0..6 {
            ports.push(
                std::net::TcpListener::bind("127.0.0.1:0")?
                    .local_addr()?
                    .port(),
            );
        }
        let peer_url = |i: usize| format!("http://127.0.0.1:{}", ports[3 + i]);
        let initial_cluster: Vec<String> =
            (0..3).map(|i| format!("m{i}={}", peer_url(i))).collect();
        let token = format!("zaris-bench-{}", std::process::id());
        let mut members = Vec::new();
        for (i, client_port) in ports[..3].iter().enumerate() {
            let client_url = format!("http://127.0.0.1:{client_port}");
            let log = std::fs::File::create(root.join(format!("m{i}.log")))?;
            let child = Command::new(etcd)
                .arg("--name")
                .arg(format!("m{i}"))
                .arg("--data-dir")
                .arg(root.join(format!("m{i}")))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url(i)])
                .args(["--initial-advertise-peer-urls", &peer_url(i)])
                .args(["--initial-cluster", &initial_cluster.join(",")])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                .args(["--heartbeat-interval", &HEARTBEAT_MS.to_string()])
                .args(["--election-timeout", &ELECTION_TIMEOUT_MS.to_string()])
                .stdout(log.try_clone()?)
                .stderr(log)
                .kill_on_drop(true)
                .spawn()?;
            members.push(Member {
                client_addr: format!("127.0.0.1:{client_port}"),
                child,
            });
        }
        let mut cluster = EtcdCluster { members };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some((i, status)) = cluster.exited() {
                let tail = log_tail(&root.join(format!("m{i}.log")), 5);
                cluster.stop().await;
                anyhow::bail!(
                    "etcd member {i} exited ({status}) before a leader was elected; its log ends: {}",
                    tail.replace('\n', " | ")
                );
            }
            match cluster.leader_index(&cluster.live()).await {
                Ok(_) => return Ok(cluster),
                Err(e) if Instant::now() > deadline => {
                    cluster.stop().await;
                    anyhow::bail!("etcd did not elect a leader in {READY_TIMEOUT:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// [`Self::start`], tried again (in a fresh directory, on fresh ports) when an attempt fails:
    /// its ports are ones the OS chose and released, not held, so another process may take one
    /// before etcd binds it.
    pub async fn start_retrying(etcd: &Path, root: &Path) -> anyhow::Result<Self> {
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            match Self::start(etcd, &root.join(format!("attempt-{attempt}"))).await {
                Ok(cluster) => return Ok(cluster),
                Err(e) if attempt < ATTEMPTS => {
                    println!("etcd: start attempt {attempt} failed, trying again: {e:#}");
                    attempt += 1;
                }
                Err(e) => return Err(e.context(format!("etcd: {ATTEMPTS} start attempts failed"))),
            }
        }
    }

    /// A member that has exited, and how.
    fn exited(&mut self) -> Option<(usize, std::process::ExitStatus)> {
        self.members
            .iter_mut()
            .enumerate()
            .find_map(|(i, m)| m.child.try_wait().ok().flatten().map(|status| (i, status)))
    }

    fn live(&self) -> Vec<usize> {
        (0..self.members.len()).collect()
    }

    /// The index of the member every one of `among` names as leader.
    async fn leader_index(&self, among: &[usize]) -> anyhow::Result<usize> {
        let mut leader = None;
        let mut ids = Vec::new();
        for &i in among {
            let channel = connect(&self.members[i].client_addr).await?;
            let status = MaintenanceClient::new(channel)
                .status(StatusRequest {})
                .await?
                .into_inner();
            let member_id = status.header.map(|h| h.member_id).unwrap_or_default();
            ids.push((i, member_id));
            anyhow::ensure!(status.leader != 0, "member {i} knows no leader");
            anyhow::ensure!(
                leader.is_none_or(|l| l == status.leader),
                "members disagree on the leader"
            );
            leader = Some(status.leader);
        }
        ids.iter()
            .find(|(_, id)| Some(*id) == leader)
            .map(|(i, _)| *i)
            .ok_or_else(|| anyhow::anyhow!("the leader is not among the members asked"))
    }

    /// A client connected to the leader.
    pub async fn target(&self) -> anyhow::Result<EtcdTarget> {
        let leader = self.leader_index(&self.live()).await?;
        Ok(EtcdTarget(
            connect(&self.members[leader].client_addr).await?,
        ))
    }

    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.child.id()).collect()
    }

    /// Kills the leader (`kill -9`); the two members left, for [`put_somewhere`].
    pub async fn kill_leader(&mut self) -> anyhow::Result<Vec<String>> {
        let leader = self.leader_index(&self.live()).await?;
        self.members[leader].child.kill().await?;
        Ok(self
            .members
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader)
            .map(|(_, m)| m.client_addr.clone())
            .collect())
    }

    pub async fn stop(mut self) {
        for member in &mut self.members {
            let _ = member.child.kill().await;
        }
    }
}

/// One put at any of `members`, retried (alternating, each try bounded) until one is acknowledged:
/// the first write after a leader kill, as a client that knows the survivors would make it.
pub async fn put_somewhere(members: &[String], within: Duration) -> anyhow::Result<()> {
    const ATTEMPT: Duration = Duration::from_millis(250);
    let deadline = Instant::now() + within;
    let mut channels = Vec::new();
    for member in members {
        channels.push(connect(member).await?);
    }
    for channel in channels.iter().cycle() {
        let request = PutRequest {
            key: b"after/stop".to_vec(),
            value: b"ok".to_vec(),
            lease: 0,
        };
        let tried = Instant::now();
        match tokio::time::timeout(ATTEMPT, KvClient::new(channel.clone()).put(request)).await {
            Ok(Ok(_)) => return Ok(()),
            _ if Instant::now() > deadline => anyhow::bail!("no write acknowledged in {within:?}"),
            // A quick refusal (no leader yet): a short pause instead of a busy loop.
            _ if tried.elapsed() < Duration::from_millis(10) => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            _ => {}
        }
    }
    anyhow::bail!("no members to write to")
}

async fn connect(addr: &str) -> anyhow::Result<Channel> {
    Ok(Channel::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await?)
}

#[derive(Clone, Debug)]
pub struct EtcdTarget(Channel);

impl Target for EtcdTarget {
    type Renewer = EtcdRenewer;

    fn grant(&self, ttl: Duration) -> BoxFuture<'static, anyhow::Result<u64>> {
        let mut lease = LeaseClient::new(self.0.clone());
        async move {
            let request = LeaseGrantRequest {
                ttl: ttl.as_secs() as i64,
                id: 0,
            };
            let granted = lease.lease_grant(request).await?.into_inner();
            anyhow::ensure!(granted.error.is_empty(), "grant: {}", granted.error);
            Ok(granted.id as u64)
        }
        .boxed()
    }

    fn read_local(&self, key: String) -> BoxFuture<'static, anyhow::Result<()>> {
        let mut kv = KvClient::new(self.0.clone());
        async move {
            let request = RangeRequest {
                key: key.into_bytes(),
                serializable: true,
            };
            kv.range(request).await?;
            Ok(())
        }
        .boxed()
    }

    fn put(
        &self,
        key: String,
        value: Vec<u8>,
        lease: u64,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let mut kv = KvClient::new(self.0.clone());
        async move {
            let request = PutRequest {
                key: key.into_bytes(),
                value,
                lease: lease as i64,
            };
            kv.put(request).await?;
            Ok(())
        }
        .boxed()
    }

    fn lock_cycle(&self, name: String, lease: u64) -> BoxFuture<'static, anyhow::Result<()>> {
        let mut lock = LockClient::new(self.0.clone());
        async move {
            let request = LockRequest {
                name: name.into_bytes(),
                lease: lease as i64,
            };
            let held = lock.lock(request).await?.into_inner();
            lock.unlock(UnlockRequest { key: held.key }).await?;
            Ok(())
        }
        .boxed()
    }

    fn renewer(&self) -> BoxFuture<'static, anyhow::Result<EtcdRenewer>> {
        let mut lease = LeaseClient::new(self.0.clone());
        let (outbound, receiver) = mpsc::channel(1_024);
        // etcd (Go gRPC) sends the response headers with the first answer, so the call resolves
        // only once a renewal was sent: it is awaited by the first `next`, not here.
        let opening = async move {
            Ok(lease
                .lease_keep_alive(ReceiverStream::new(receiver))
                .await?
                .into_inner())
        }
        .boxed();
        async move {
            Ok(EtcdRenewer {
                outbound,
                opening: Some(opening),
                inbound: None,
            })
        }
        .boxed()
    }
}

pub struct EtcdRenewer {
    outbound: mpsc::Sender<LeaseKeepAliveRequest>,
    opening: Option<BoxFuture<'static, anyhow::Result<Streaming<LeaseKeepAliveResponse>>>>,
    inbound: Option<Streaming<LeaseKeepAliveResponse>>,
}

impl std::fmt::Debug for EtcdRenewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdRenewer")
            .field("open", &self.inbound.is_some())
            .finish_non_exhaustive()
    }
}

impl Renewer for EtcdRenewer {
    fn send(&mut self, lease: u64) -> BoxFuture<'_, anyhow::Result<()>> {
        async move {
            self.outbound
                .send(LeaseKeepAliveRequest { id: lease as i64 })
                .await
                .map_err(|_| anyhow::anyhow!("the keepalive stream closed"))
        }
        .boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, anyhow::Result<()>> {
        async move {
            if let Some(opening) = self.opening.take() {
                self.inbound = Some(opening.await?);
            }
            let inbound = self
                .inbound
                .as_mut()
                .ok_or_else(|| anyhow::anyhow!("the keepalive stream failed to open"))?;
            let answer = inbound
                .message()
                .await?
                .ok_or_else(|| anyhow::anyhow!("the keepalive stream ended"))?;
            // etcd answers a lease that no longer exists with TTL 0.
            anyhow::ensure!(answer.ttl > 0, "lease {} not renewed", answer.id);
            Ok(())
        }
        .boxed()
    }
}
