//! The tests' `zaris serve` settings; the launcher is zaris-testkit's.

use std::path::Path;
use std::time::Duration;

use zaris_client::{Client, ClientOptions};
use zaris_testkit::{Serve, ServeProcess, grow_cluster};

pub const ELECTION_TIMEOUT_MS: u64 = 600;
pub const HEARTBEAT_MS: u64 = 60;
pub const MIN_TTL_MS: u64 = 1_000;
const READY_TIMEOUT: Duration = Duration::from_secs(20);

pub fn zaris() -> &'static str {
    env!("CARGO_BIN_EXE_zaris")
}

/// Node `id` in `root`, with the tests' fast timings. The nodes of one `root` form a cluster
/// with a name of its own: tests run side by side on 127.0.0.1, and a node that binds a port
/// another test's stopped node let go must refuse that cluster's Raft messages.
pub fn serve(id: u64, root: &Path) -> Serve {
    Serve::new(zaris(), id, root)
        .arg("--cluster-name")
        .arg(cluster_name(root))
        .election_timeout_ms(ELECTION_TIMEOUT_MS)
        .heartbeat_ms(HEARTBEAT_MS)
        .min_ttl_ms(MIN_TTL_MS)
        .ready_timeout(READY_TIMEOUT)
}

/// The cluster name of the nodes in `root`: its directory name, which the temporary directory
/// makes unique.
pub fn cluster_name(root: &Path) -> String {
    let name = root.file_name().map_or_else(
        || root.to_string_lossy().into_owned(),
        |name| name.to_string_lossy().into_owned(),
    );
    format!("test-{name}")
}

/// Starts the node and waits until it serves; the test fails if it does not.
pub async fn start(serve: Serve) -> ServeProcess {
    serve.start().await.expect("zaris serve starts")
}

/// A runtime for the tests that are synchronous (they run client processes and wait on them).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

pub async fn client(endpoints: &[&str]) -> Client {
    let options = ClientOptions::default().with_timeout(Duration::from_secs(20));
    Client::connect_with(endpoints.iter().map(|e| e.to_string()), options)
        .await
        .expect("client")
}

/// A three-node cluster grown the way an operator would: node 1 bootstraps alone, nodes 2 and 3
/// start with `--join` and are added (and promoted) by `member add`.
pub async fn three_nodes(root: &Path) -> Vec<ServeProcess> {
    grow_cluster(3, |id| serve(id, root))
        .await
        .expect("three nodes")
}
