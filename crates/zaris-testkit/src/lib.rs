//! Running Zaris nodes for tests and tools, one way everywhere.
//!
//! - [`Serve`] / [`ServeProcess`]: `zaris serve` child processes (the demo, the binary's process
//!   tests, the bench and the fault harness), with [`grow_cluster`] for a cluster grown by
//!   `member add`.
//! - [`eventually`] / [`try_eventually`]: wait on a condition, never a fixed sleep.
//! - `cluster::TestCluster` (feature `in-process`): real nodes inside the test process, for
//!   zaris-server's integration tests.
//! - [`pki::Pki`]: a CA and the certificates it signs, for TLS tests.

#[cfg(feature = "in-process")]
pub mod cluster;
pub mod pki;
pub mod serve;
pub mod wait;

pub use serve::{Serve, ServeProcess, grow_cluster, grow_cluster_with};
pub use wait::{eventually, try_eventually};
