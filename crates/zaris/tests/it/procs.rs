//! Running `zaris serve` processes for tests.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use zaris_client::{Client, ClientOptions};

pub const ELECTION_TIMEOUT_MS: u64 = 600;
pub const MIN_TTL_MS: u64 = 1_000;

pub fn zaris() -> &'static str {
    env!("CARGO_BIN_EXE_zaris")
}

/// A node process; SIGKILLed on drop, so a failing test leaves nothing running.
pub struct NodeProc {
    pub id: u64,
    pub addr: String,
    child: Option<Child>,
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn wait_for_file(path: &Path, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text.trim().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "node did not become ready: {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl NodeProc {
    /// Starts `zaris serve`. `listen` is `127.0.0.1:0` for a fresh node, or the old address for
    /// a restart. `join` starts it empty, waiting to be added.
    pub fn start(id: u64, root: &Path, listen: &str, join: bool) -> NodeProc {
        NodeProc::start_with(id, root, listen, join, &[])
    }

    /// [`NodeProc::start`] with more `zaris serve` flags.
    pub fn start_with(
        id: u64,
        root: &Path,
        listen: &str,
        join: bool,
        extra_args: &[&str],
    ) -> NodeProc {
        let data_dir = root.join(format!("node-{id}"));
        let ready = root.join(format!("node-{id}.ready"));
        let _ = std::fs::remove_file(&ready);
        let log = std::fs::File::create(root.join(format!("node-{id}.log"))).expect("log file");
        let mut command = Command::new(zaris());
        command
            .args(["serve", "--node-id", &id.to_string(), "--listen", listen])
            .arg("--data-dir")
            .arg(&data_dir)
            .arg("--ready-file")
            .arg(&ready)
            .args([
                "--election-timeout-ms",
                &ELECTION_TIMEOUT_MS.to_string(),
                "--heartbeat-ms",
                "60",
                "--min-ttl-ms",
                &MIN_TTL_MS.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(log);
        if join {
            command.arg("--join");
        }
        command.args(extra_args);
        let child = command.spawn().expect("spawn zaris serve");
        let mut node = NodeProc {
            id,
            addr: String::new(),
            child: Some(child),
        };
        node.addr = wait_for_file(&ready, Duration::from_secs(20));
        node
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

pub async fn client(endpoints: &[&str]) -> Client {
    let options = ClientOptions::default().with_timeout(Duration::from_secs(20));
    Client::connect_with(endpoints.iter().map(|e| e.to_string()), options)
        .await
        .expect("client")
}

/// A three-node cluster grown the way an operator would: node 1 bootstraps alone, nodes 2 and 3
/// start with `--join` and are added (and promoted) by `member add`.
pub async fn three_nodes(root: &Path) -> Vec<NodeProc> {
    let first = NodeProc::start(1, root, "127.0.0.1:0", false);
    let admin = client(&[&first.addr]).await;
    let mut nodes = vec![first];
    for id in [2, 3] {
        let node = NodeProc::start(id, root, "127.0.0.1:0", true);
        admin
            .member_add(id, node.addr.clone(), true)
            .await
            .expect("member add");
        nodes.push(node);
    }
    nodes
}

/// Polls until `check` returns `Some`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
