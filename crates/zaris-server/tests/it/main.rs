//! zaris-server's integration tests: real nodes (real Raft, sled, gRPC) on 127.0.0.1 with ports
//! chosen by the OS, in this process (`zaris_testkit::cluster::TestCluster`). Tests that need
//! `kill -9` run the binary (crates/zaris).

mod auth;
mod batching;
mod client_lease;
mod client_lock;
mod client_watch;
mod console_api;
mod console_browser;
mod failover;
mod fuzz;
mod http;
mod input;
mod leases;
mod locks;
mod membership;
mod names;
mod peer;
mod proxy;
mod tls;
mod watch;

/// The sum of a counter's series whose labels contain `label`, in this process's Prometheus
/// text (0 if there is none).
pub fn counter(name: &str, label: &str) -> f64 {
    let text = zaris_server::metrics::prometheus()
        .map(|handle| handle.render())
        .unwrap_or_default();
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
