//! The CLI against a real node: one JSON object per command with `-o json`, clear one-line
//! errors and non-zero exit codes.

use std::process::Command;

use serde_json::Value;

use crate::procs::{NodeProc, zaris};

fn run(addr: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(zaris())
        .args(["--endpoints", addr, "-o", "json"])
        .args(args)
        .output()
        .expect("run zaris");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
        String::from_utf8_lossy(&output.stderr).trim().to_string(),
    )
}

fn json(text: &str) -> Value {
    assert_eq!(
        text.lines().count(),
        1,
        "exactly one JSON object per command: {text}"
    );
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn cli_drives_a_node_with_json_output() {
    let root = tempfile::tempdir().expect("tempdir");
    let node = NodeProc::start(1, root.path(), "127.0.0.1:0", false);
    let addr = node.addr.as_str();

    let (ok, out, err) = run(addr, &["lease", "grant", "--ttl", "5s"]);
    assert!(ok, "{err}");
    let grant = json(&out);
    assert_eq!(grant["ttl_ms"], 5_000);
    let lease = grant["id"].as_u64().expect("lease id");

    let (ok, out, err) = run(
        addr,
        &["put", "svc/a", "hello", "--lease", &lease.to_string()],
    );
    assert!(ok, "{err}");
    assert_eq!(json(&out)["result"], "ok");

    let (ok, out, _) = run(addr, &["get", "svc/", "--prefix"]);
    assert!(ok);
    let got = json(&out);
    assert_eq!(got["kvs"][0]["key"], "svc/a");
    assert_eq!(got["kvs"][0]["value"], "hello");
    assert_eq!(got["kvs"][0]["lease"], lease);
    assert!(got["kvs"][0]["mod_revision"].as_u64().is_some());

    let (ok, out, _) = run(addr, &["status"]);
    assert!(ok);
    let status = json(&out);
    assert_eq!(status["leader"], 1);
    assert!(status["term"].as_u64().is_some());
    assert_eq!(status["members"].as_array().map(Vec::len), Some(1));

    let (ok, out, _) = run(addr, &["lease", "keepalive", &lease.to_string(), "--once"]);
    assert!(ok);
    assert_eq!(json(&out)["ttl_ms"], 5_000);

    let (ok, out, _) = run(addr, &["lease", "ttl", &lease.to_string(), "--keys"]);
    assert!(ok);
    assert_eq!(json(&out)["keys"][0], "svc/a");

    let (ok, out, _) = run(addr, &["lease", "revoke", &lease.to_string()]);
    assert!(ok);
    assert_eq!(json(&out)["result"], "revoked");
    let (_, out, _) = run(addr, &["get", "svc/a"]);
    assert_eq!(json(&out)["count"], 0, "the bound key went with its lease");

    // Errors: one clear line, non-zero exit.
    let (ok, _, err) = run(addr, &["lease", "grant", "--ttl", "10ms"]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("TTL"), "{err}");
    let (ok, out, _) = run(addr, &["lease", "revoke", "999"]);
    assert!(!ok, "revoking a missing lease fails");
    assert_eq!(json(&out)["result"], "not_found");
    let (ok, _, err) = run(addr, &["del", "nothing", "--prefix"]);
    assert!(ok, "{err}");
    let (ok, _, err) = run("127.0.0.1:1", &["status"]);
    assert!(!ok);
    assert!(!err.is_empty());
}
