//! Contract: min TTL > one election timeout. The cluster's minimum TTL is fixed by its first
//! leader; a node restarted later with a longer election timeout must still refuse, when it
//! leads, a lease no longer than that timeout (with a clear error), not grant it.

use std::time::Duration;

use zaris_client::proto::ErrorCode;

use crate::procs::{client, serve, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_refuses_a_ttl_its_election_timeout_does_not_undercut() {
    let root = tempfile::tempdir().expect("tempdir");
    // First start: ET 600 ms, minimum TTL 1 s, which the cluster keeps.
    let mut node = start(serve(1, root.path())).await;
    let first = client(&[node.endpoint()]).await;
    first
        .grant(Duration::from_millis(1_200))
        .await
        .expect("a 1.2 s lease above the 600 ms election timeout");
    node.kill().await;

    // Restarted with ET 1.5 s (and its own minimum TTL 2 s, which the cluster's 1 s overrides).
    let node = start(
        serve(1, root.path())
            .append_log()
            .election_timeout_ms(1_500)
            .min_ttl_ms(2_000),
    )
    .await;
    let after = client(&[node.endpoint()]).await;
    let error = after
        .grant(Duration::from_millis(1_200))
        .await
        .expect_err("a 1.2 s lease under a 1.5 s election timeout");
    assert_eq!(
        error.error_code(),
        Some(ErrorCode::TtlOutOfRange),
        "{error}"
    );
    assert!(error.to_string().contains("1501"), "{error}");
    after
        .grant(Duration::from_millis(1_600))
        .await
        .expect("a lease above the election timeout");
}
