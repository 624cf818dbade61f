//! Issue 11, item 1, at the process level: `--initial-cluster` takes host names; a malformed
//! one is refused at start, and a new cluster whose names never resolve fails its first start
//! saying which, instead of waiting forever.

use crate::procs::serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_member_name_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let err = serve(1, root.path())
        .args([
            "--initial-cluster",
            "1=zaris_1:7001/zaris-1:7101,2=zaris-2:7001/zaris-2:7101",
        ])
        .start()
        .await
        .expect_err("an underscore is not allowed in a host name");
    let text = format!("{err:#}");
    assert!(
        text.contains("zaris_1") && text.contains("not an IP address or a host name"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_cluster_whose_peer_name_never_resolves_fails_its_first_start() {
    let root = tempfile::tempdir().expect("tempdir");
    // `.invalid` is reserved never to resolve (RFC 2606); `localhost` always does.
    let err = serve(1, root.path())
        .args([
            "--initial-cluster",
            "1=localhost:7001/localhost:7101,2=zaris-2.invalid:7001/zaris-2.invalid:7101",
            "--resolve-timeout-ms",
            "300",
        ])
        .start()
        .await
        .expect_err("the peer's name never resolves");
    let text = format!("{err:#}");
    assert!(
        text.contains("did not resolve")
            && text.contains("node 2")
            && text.contains("zaris-2.invalid:7001"),
        "{text}"
    );
    assert!(!text.contains("node 1:"), "localhost resolved: {text}");
}
