//! The demo's local cluster: `zaris serve` child processes on 127.0.0.1 with OS-chosen ports,
//! grown the way an operator would (node 1 bootstraps, 2 and 3 join and are added).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};
use tokio::time::Instant;
use zaris_client::{Client, ClientOptions};

/// Fast enough for a demo, and a TTL floor above the election timeout as the server requires.
pub const ELECTION_TIMEOUT_MS: u64 = 500;
pub const HEARTBEAT_MS: u64 = 50;
pub const MIN_TTL_MS: u64 = 1_000;

/// One node process. Killed (SIGKILL) on drop, so nothing outlives the demo.
pub struct NodeProc {
    pub id: u64,
    pub addr: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

impl NodeProc {
    async fn start(id: u64, root: &Path, join: bool) -> Result<NodeProc> {
        let exe = std::env::current_exe().context("locating the zaris binary")?;
        let ready = root.join(format!("node-{id}.ready"));
        let log = root.join(format!("node-{id}.log"));
        let log_file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut command = Command::new(exe);
        command
            .args([
                "serve",
                "--node-id",
                &id.to_string(),
                "--listen",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(root.join(format!("node-{id}")))
            .arg("--ready-file")
            .arg(&ready)
            .args(["--election-timeout-ms", &ELECTION_TIMEOUT_MS.to_string()])
            .args(["--heartbeat-ms", &HEARTBEAT_MS.to_string()])
            .args(["--min-ttl-ms", &MIN_TTL_MS.to_string()])
            .env_remove("ZARIS_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true);
        if join {
            command.arg("--join");
        }
        let child = command.spawn().context("starting zaris serve")?;
        let mut node = NodeProc {
            id,
            addr: String::new(),
            log,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready)
                && !text.trim().is_empty()
            {
                node.addr = text.trim().to_owned();
                return Ok(node);
            }
            if let Some(child) = node.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                bail!(
                    "node {id} exited during start ({status}); see {}",
                    node.log.display()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "node {id} did not start within 30 s; see {}",
                    node.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL: no shutdown path runs, exactly like a crash.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
}

/// A client for the demo's own calls.
pub async fn client(endpoints: &[String]) -> Result<Client> {
    let options = ClientOptions::default().with_timeout(Duration::from_secs(15));
    Ok(Client::connect_with(endpoints.iter().cloned(), options).await?)
}

/// Starts three nodes in `root`.
pub async fn start_three(root: &Path) -> Result<Vec<NodeProc>> {
    let first = NodeProc::start(1, root, false).await?;
    let admin = client(std::slice::from_ref(&first.addr)).await?;
    let mut nodes = vec![first];
    for id in [2, 3] {
        let node = NodeProc::start(id, root, true).await?;
        admin
            .member_add(id, node.addr.clone(), true)
            .await
            .with_context(|| format!("adding node {id}"))?;
        nodes.push(node);
    }
    Ok(nodes)
}
