//! The CLI against a real node: one JSON object per command (or per event) with `-o json`, clear
//! one-line errors and non-zero exit codes; the long-running commands (lock, watch, elect,
//! presence) run as background processes that are killed if a test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::procs::{client, runtime, serve, start, zaris};

/// Longest any one `zaris` client command may take in these tests.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A `zaris` client process with stdout and stderr in files (never pipes: a grandchild that
/// outlives it cannot block the test). SIGKILLed on drop, so a failing test leaves nothing
/// running.
struct ClientProc {
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl ClientProc {
    /// Starts `zaris --endpoints addr -o json ARGS...`.
    fn start(addr: &str, args: &[&str]) -> ClientProc {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir();
        let stem = format!("zaris-cli-{}-{n}", std::process::id());
        let stdout = dir.join(format!("{stem}.out"));
        let stderr = dir.join(format!("{stem}.err"));
        let child = Command::new(zaris())
            .args(["--endpoints", addr, "-o", "json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn zaris");
        ClientProc {
            child: Some(child),
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Waits for the process to exit; panics (and kills it) after `timeout`.
    fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("not waited for yet");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "zaris did not exit within {timeout:?}; stdout: {} stderr: {}",
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIG`signal` (TERM, INT, ...).
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args(["-s", signal, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {signal} failed");
    }

    fn stdout(&self) -> String {
        read(&self.stdout)
    }

    fn stderr(&self) -> String {
        read(&self.stderr)
    }

    /// Each stdout line as JSON (asserting every line is one object).
    fn json_lines(&self) -> Vec<Value> {
        self.stdout().lines().map(json).collect()
    }
}

impl Drop for ClientProc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.stdout);
        let _ = std::fs::remove_file(&self.stderr);
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Runs `zaris --endpoints addr -o json ARGS...` to completion: (exit status, stdout, stderr).
fn run_status(addr: &str, args: &[&str]) -> (ExitStatus, String, String) {
    let mut proc = ClientProc::start(addr, args);
    let status = proc.wait(COMMAND_TIMEOUT);
    (status, proc.stdout(), proc.stderr())
}

fn run(addr: &str, args: &[&str]) -> (bool, String, String) {
    let (status, out, err) = run_status(addr, args);
    (status.success(), out, err)
}

/// Polls until `check` returns `Some`, for at most `timeout`.
fn poll<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether lock `name` is held, asked through the client library.
fn lock_held(addr: &str, name: &str) -> bool {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        client(&[addr])
            .await
            .lock_status(name)
            .await
            .expect("lock status")
            .holder
            .is_some()
    })
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
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    let addr = node.endpoint();

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

    // A lease granted with its keys: they are bound from the grant's revision on.
    let (ok, out, err) = run(
        addr,
        &[
            "lease",
            "grant",
            "--ttl",
            "5s",
            "--put",
            "svc/b=x=1",
            "--put",
            "svc/c=",
        ],
    );
    assert!(ok, "{err}");
    let bound = json(&out)["id"].as_u64().expect("lease id");
    let (ok, out, _) = run(addr, &["get", "svc/", "--prefix"]);
    assert!(ok);
    let got = json(&out);
    assert_eq!(got["count"], 2);
    assert_eq!(got["kvs"][0]["value"], "x=1");
    for kv in 0..2 {
        assert_eq!(got["kvs"][kv]["lease"], bound);
    }
    let (ok, _, err) = run(addr, &["lease", "grant", "--ttl", "5s", "--put", "=v"]);
    assert!(!ok);
    assert!(err.contains("KEY=VALUE"), "{err}");
    let (ok, _, _) = run(addr, &["lease", "revoke", &bound.to_string()]);
    assert!(ok);

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

/// Output into a pipe whose reader is gone (`zaris status | head -0`) ends the command quietly
/// with status 0; it used to panic on the broken pipe (exit 101).
#[test]
fn output_into_a_closed_pipe_ends_the_command_quietly() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    for args in [&["status"][..], &["member", "list"][..]] {
        let mut child = Command::new(zaris())
            .args(["--endpoints", node.endpoint()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("zaris starts");
        // The reader goes away before the command has its answer to print.
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("zaris ends");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && !stderr.contains("panicked"),
            "{args:?}: {} {stderr}",
            output.status
        );
    }
}

#[test]
fn lock_runs_a_command_with_its_token_and_releases_the_lock() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    let addr = node.endpoint();
    let token_file = |n: u32| root.path().join(format!("token-{n}"));
    let write_token = |n: u32| format!("echo $ZARIS_LOCK_TOKEN > {}", token_file(n).display());
    let read_token = |n: u32| -> u64 {
        let text = read(&token_file(n));
        text.parse()
            .unwrap_or_else(|_| panic!("token file holds {text:?}"))
    };

    let (status, out, err) = run_status(addr, &["lock", "jobs", "--", "sh", "-c", &write_token(1)]);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(out.is_empty(), "stdout belongs to CMD: {out}");
    let first = read_token(1);
    assert!(first > 0);
    assert!(!lock_held(addr, "jobs"), "released when CMD exited");
    let (ok, out, _) = run(addr, &["lease", "list"]);
    assert!(ok);
    assert_eq!(json(&out)["leases"], serde_json::json!([]), "lease revoked");

    let (status, _, err) = run_status(addr, &["lock", "jobs", "--", "sh", "-c", &write_token(2)]);
    assert_eq!(status.code(), Some(0), "{err}");
    let second = read_token(2);
    assert!(second > first, "tokens grow: {first} then {second}");

    // The command sees the rest of its environment too.
    let env_file = root.path().join("env");
    let script = format!(
        "echo \"$ZARIS_LOCK_NAME $ZARIS_LEASE_ID $ZARIS_ENDPOINTS\" > {}",
        env_file.display()
    );
    let (status, _, err) = run_status(addr, &["lock", "jobs", "--", "sh", "-c", &script]);
    assert_eq!(status.code(), Some(0), "{err}");
    let env = read(&env_file);
    let words: Vec<&str> = env.split(' ').collect();
    assert_eq!(words.len(), 3, "{env}");
    assert_eq!(words[0], "jobs");
    assert!(words[1].parse::<u64>().is_ok_and(|id| id > 0), "{env}");
    assert!(words[2].contains(addr), "{env}");

    // CMD's exit code is zaris's, and the lock is released all the same.
    let (status, _, _) = run_status(addr, &["lock", "jobs", "--", "sh", "-c", "exit 3"]);
    assert_eq!(status.code(), Some(3));
    assert!(!lock_held(addr, "jobs"));

    // Without CMD: prints the token, holds the lock until SIGTERM, then releases it.
    let mut holder = ClientProc::start(addr, &["lock", "jobs", "--ttl", "2s"]);
    let acquired = poll("the lock to be acquired", COMMAND_TIMEOUT, || {
        holder.json_lines().into_iter().next()
    });
    assert_eq!(acquired["event"], "acquired");
    assert_eq!(acquired["lock"], "jobs");
    assert!(
        acquired["token"].as_u64().is_some_and(|t| t > second),
        "{acquired}"
    );
    assert!(lock_held(addr, "jobs"));
    // A second locker gives up after --timeout-lock with a clear error.
    let (ok, _, err) = run(addr, &["lock", "jobs", "--timeout-lock", "500ms"]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not acquired within 500ms"), "{err}");
    holder.signal("TERM");
    let status = holder.wait(COMMAND_TIMEOUT);
    assert!(status.success(), "{}", holder.stderr());
    let lines = holder.json_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["event"], "released");
    assert!(!lock_held(addr, "jobs"));

    let (ok, _, err) = run(addr, &["lock", "jobs", "--", "/nonexistent/command"]);
    assert!(!ok);
    assert!(err.contains("cannot run /nonexistent/command"), "{err}");
    assert!(!lock_held(addr, "jobs"));
}

#[test]
fn a_lost_lock_terminates_the_command() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    let addr = node.endpoint();
    let pid_file = root.path().join("child.pid");
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let mut locker = ClientProc::start(
        addr,
        &["lock", "doomed", "--ttl", "2s", "--", "sh", "-c", &script],
    );
    let child_pid: u32 = poll("the command to start", COMMAND_TIMEOUT, || {
        read(&pid_file).parse().ok()
    });
    let proc_dir = PathBuf::from(format!("/proc/{child_pid}"));
    assert!(proc_dir.exists());

    let (ok, out, _) = run(addr, &["lease", "list"]);
    assert!(ok);
    let leases = json(&out)["leases"].clone();
    assert_eq!(leases.as_array().map(Vec::len), Some(1), "{leases}");
    assert_eq!(leases[0]["lock_count"], 1, "{leases}");
    let lease = leases[0]["id"].as_u64().expect("lease id");
    let (ok, _, err) = run(addr, &["lease", "revoke", &lease.to_string()]);
    assert!(ok, "{err}");
    let revoked = Instant::now();
    // Issue 9, hole 1: an operator granting a lease with the revoked id again let the old
    // holder's keepalive renew the new lease, so it never noticed it had lost the lock.
    let (ok, out, err) = run(
        addr,
        &["lease", "grant", "--ttl", "30s", "--id", &lease.to_string()],
    );
    assert!(
        !ok,
        "an ended lease's id must never be granted again: {out}"
    );
    assert_eq!(json(&out)["result"], "id_in_use");
    assert!(err.contains("never reused"), "{err}");

    let status = locker.wait(Duration::from_secs(10));
    assert!(!status.success());
    assert!(
        revoked.elapsed() < Duration::from_secs(8),
        "took {:?}",
        revoked.elapsed()
    );
    let err = locker.stderr();
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("error: lost lock doomed (lease {lease} ")),
        "{err}"
    );
    assert!(last.contains("terminated sh"), "{err}");
    poll("the command to be gone", Duration::from_secs(5), || {
        (!proc_dir.exists()).then_some(())
    });
    assert!(!lock_held(addr, "doomed"));
}

#[test]
fn watch_and_txn_print_one_object_per_event() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    let addr = node.endpoint();

    // Start the watch at a known revision, so it misses nothing however late it starts.
    let (ok, out, err) = run(addr, &["put", "anchor", "x"]);
    assert!(ok, "{err}");
    let from = json(&out)["revision"].as_u64().expect("revision") + 1;
    let mut watch = ClientProc::start(
        addr,
        &[
            "watch",
            "w/",
            "--prefix",
            "--rev",
            &from.to_string(),
            "--count",
            "4",
        ],
    );
    let grant = |ttl: &str| {
        let (ok, out, err) = run(addr, &["lease", "grant", "--ttl", ttl]);
        assert!(ok, "{err}");
        json(&out)["id"].as_u64().expect("lease id")
    };
    let short = grant("1s");
    let long = grant("30s");
    for (key, lease) in [("w/short", short), ("w/long", long)] {
        let (ok, _, err) = run(addr, &["put", key, "up", "--lease", &lease.to_string()]);
        assert!(ok, "{err}");
    }
    let (ok, _, err) = run(addr, &["lease", "revoke", &long.to_string()]);
    assert!(ok, "{err}");
    // Nobody renews `short`: it expires.
    let status = watch.wait(COMMAND_TIMEOUT);
    assert!(status.success(), "{}", watch.stderr());
    let events = watch.json_lines();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[0]["type"], "put");
    assert_eq!(events[0]["key"], "w/short");
    assert_eq!(events[0]["value"], "up");
    assert_eq!(events[0]["lease"], short);
    assert_eq!(events[1]["key"], "w/long");
    assert_eq!(events[2]["type"], "revoke");
    assert_eq!(events[2]["key"], "w/long");
    assert_eq!(events[2]["lease"], long);
    assert_eq!(events[3]["type"], "expire");
    assert_eq!(events[3]["key"], "w/short");
    assert_eq!(events[3]["lease"], short);
    let revisions: Vec<u64> = events
        .iter()
        .map(|e| e["revision"].as_u64().expect("revision"))
        .collect();
    assert!(
        revisions.is_sorted() && revisions[0] >= from,
        "{revisions:?}"
    );

    // Txn: the --then branch, then (the key now exists) the --else branch; both exit 0.
    let txn = [
        "txn",
        "--if",
        "t/k version = 0",
        "--then",
        "put t/k v1",
        "--then",
        "get t/k",
        "--else",
        "get t/k",
    ];
    let (ok, out, err) = run(addr, &txn);
    assert!(ok, "{err}");
    let done = json(&out);
    assert_eq!(done["result"], "succeeded");
    assert_eq!(
        done["responses"][0],
        serde_json::json!({"op": "put", "result": "ok"})
    );
    assert_eq!(done["responses"][1]["kvs"][0]["value"], "v1");
    let (ok, out, err) = run(addr, &txn);
    assert!(ok, "{err}");
    let done = json(&out);
    assert_eq!(done["result"], "failed");
    assert_eq!(done["responses"].as_array().map(Vec::len), Some(1));
    assert_eq!(done["responses"][0]["op"], "get");
    assert_eq!(done["responses"][0]["kvs"][0]["value"], "v1");

    let (ok, out, err) = run(addr, &["txn", "--guard", "nolock:5", "--then", "del t/k"]);
    assert!(!ok);
    assert_eq!(json(&out)["result"], "guard_failed");
    assert!(err.contains("guard failed"), "{err}");
    let (status, _, err) = run_status(addr, &["txn", "--if", "t/k version ="]);
    assert_eq!(status.code(), Some(2), "a usage error: {err}");
    assert!(err.contains("KEY TARGET OP OPERAND"), "{err}");
}

#[test]
fn presence_and_elections_from_the_command_line() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    let addr = node.endpoint();

    let mut member = ClientProc::start(
        addr,
        &[
            "presence",
            "join",
            "workers",
            "w-1",
            "10.0.0.7:80",
            "--ttl",
            "2s",
        ],
    );
    let listed = poll("w-1 to be listed", COMMAND_TIMEOUT, || {
        let (ok, out, _) = run(addr, &["presence", "list", "workers"]);
        if !ok {
            return None;
        }
        let list = json(&out);
        list["members"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
            .then_some(list)
    });
    let joined = &listed["members"][0];
    assert_eq!(joined["member"], "w-1");
    assert_eq!(joined["metadata"], "10.0.0.7:80");
    let lease = joined["lease"].as_u64().expect("lease");
    assert!(lease > 0);
    member.signal("INT");
    assert!(
        member.wait(COMMAND_TIMEOUT).success(),
        "{}",
        member.stderr()
    );
    let lines = member.json_lines();
    assert_eq!(
        lines.first().map(|l| l["event"].clone()),
        Some("joined".into())
    );
    assert_eq!(
        lines.last().map(|l| l["event"].clone()),
        Some("left".into())
    );
    let (ok, out, _) = run(addr, &["presence", "list", "workers"]);
    assert!(ok);
    assert_eq!(
        json(&out)["members"],
        serde_json::json!([]),
        "left on SIGINT"
    );

    let mut candidate = ClientProc::start(addr, &["elect", "scheduler", "node-a", "--ttl", "2s"]);
    let elected = poll("node-a to be elected", COMMAND_TIMEOUT, || {
        candidate.json_lines().into_iter().next()
    });
    assert_eq!(elected["event"], "elected");
    assert!(elected["token"].as_u64().is_some_and(|t| t > 0));
    let (ok, out, err) = run(addr, &["elect", "scheduler", "--listen", "--count", "1"]);
    assert!(ok, "{err}");
    let leader = json(&out);
    assert_eq!(leader["election"], "scheduler");
    assert_eq!(leader["leader"]["value"], "node-a");
    assert_eq!(leader["leader"]["lease"], elected["lease"]);
    candidate.signal("TERM");
    assert!(
        candidate.wait(COMMAND_TIMEOUT).success(),
        "{}",
        candidate.stderr()
    );
    assert_eq!(
        candidate.json_lines().last().map(|l| l["event"].clone()),
        Some("resigned".into())
    );
    let (ok, out, _) = run(addr, &["elect", "scheduler", "--listen", "--count", "1"]);
    assert!(ok);
    assert_eq!(json(&out)["leader"], Value::Null, "resigned on SIGTERM");
}

/// Issue 9, item 14: `zaris watch`, `presence watch`, `elect --listen` and a waiting `lock` exited
/// 1 ("the outcome is unknown") when the member they were connected to was killed. They resume on
/// another member: watches from the last delivered revision, and a waiting lock keeps its place in
/// the queue.
#[test]
fn streams_and_waiting_locks_survive_the_death_of_their_member() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let mut nodes = runtime.block_on(crate::procs::three_nodes(root.path()));
    let admin = runtime.block_on(client(&[
        nodes[0].endpoint(),
        nodes[1].endpoint(),
        nodes[2].endpoint(),
    ]));
    let leader_id = runtime.block_on(async {
        zaris_testkit::eventually("a leader", COMMAND_TIMEOUT, || async {
            admin.status().await.ok()?.raft_leader_id
        })
        .await
    });
    let leader = nodes
        .iter()
        .position(|n| n.id() == leader_id)
        .expect("the leader is one of ours");
    // Every command lists the leader first, so its streams and lock waits go there.
    let mut order: Vec<&str> = vec![nodes[leader].endpoint()];
    order.extend(
        nodes
            .iter()
            .filter(|n| n.id() != leader_id)
            .map(|n| n.endpoint()),
    );
    let all = order.join(",");
    let survivors = order[1..].join(",");
    let waiters = |count: u64| {
        let admin = &admin;
        runtime.block_on(async {
            zaris_testkit::eventually("the lock queue", COMMAND_TIMEOUT, || async {
                let status = admin.lock_status("m").await.ok()?;
                (status.waiters == count).then_some(())
            })
            .await
        })
    };

    let holder = ClientProc::start(&all, &["lock", "m", "--ttl", "3s"]);
    poll("the holder to hold m", COMMAND_TIMEOUT, || {
        holder.json_lines().into_iter().next()
    });
    let first = ClientProc::start(&all, &["lock", "m", "--ttl", "3s"]);
    waiters(1);
    let second = ClientProc::start(&all, &["lock", "m", "--ttl", "3s"]);
    waiters(2);
    let mut watch = ClientProc::start(&all, &["watch", "w/", "--prefix", "--count", "2"]);
    let presence = ClientProc::start(&all, &["presence", "watch", "grp"]);
    let mut listener = ClientProc::start(&all, &["elect", "e", "--listen", "--count", "2"]);
    poll("the election listener to start", COMMAND_TIMEOUT, || {
        listener.json_lines().into_iter().next()
    });
    // The watches are established once a put made now is seen: then kill their member.
    let (ok, _, err) = run(&all, &["put", "w/0-before", "x"]);
    assert!(ok, "{err}");
    // (`--count 2` on the watch: this put and one after the failover.)
    poll("the watch to see the first put", COMMAND_TIMEOUT, || {
        (!watch.json_lines().is_empty()).then_some(())
    });

    runtime.block_on(nodes[leader].kill());

    let (ok, _, err) = run(&survivors, &["put", "w/1-after", "y"]);
    assert!(ok, "{err}");
    let joiner = ClientProc::start(
        &survivors,
        &["presence", "join", "grp", "m-1", "--ttl", "3s"],
    );
    let candidate = ClientProc::start(&survivors, &["elect", "e", "node-b", "--ttl", "3s"]);

    assert!(watch.wait(COMMAND_TIMEOUT).success(), "{}", watch.stderr());
    let events = watch.json_lines();
    let keys: Vec<&str> = events.iter().filter_map(|e| e["key"].as_str()).collect();
    assert_eq!(keys, ["w/0-before", "w/1-after"], "no gap, no duplicate");
    poll("presence watch to see m-1 join", COMMAND_TIMEOUT, || {
        presence
            .json_lines()
            .into_iter()
            .find(|e| e["event"] == "joined" && e["member"] == "m-1")
    });
    assert!(
        listener.wait(COMMAND_TIMEOUT).success(),
        "{}",
        listener.stderr()
    );
    let seen = listener.json_lines();
    assert_eq!(
        seen.last().map(|l| l["leader"]["value"].clone()),
        Some("node-b".into())
    );

    // The waiting locks kept their places: the holder lets go, the first waiter gets the lock,
    // the second still waits.
    holder.signal("TERM");
    let acquired = poll("the first waiter to get the lock", COMMAND_TIMEOUT, || {
        first
            .json_lines()
            .into_iter()
            .find(|l| l["event"] == "acquired")
    });
    assert!(acquired["token"].as_u64().is_some());
    assert!(
        second.json_lines().is_empty(),
        "the second waiter must still wait"
    );
    first.signal("TERM");
    poll("the second waiter to get the lock", COMMAND_TIMEOUT, || {
        second
            .json_lines()
            .into_iter()
            .find(|l| l["event"] == "acquired")
    });
    for proc in [&first, &second, &presence, &joiner, &candidate] {
        assert!(
            proc.stderr().is_empty() || !proc.stderr().contains("outcome is unknown"),
            "{}",
            proc.stderr()
        );
    }
    drop((holder, first, second, presence, joiner, candidate));
}

/// `zaris auth`: an admin and a tenant made from the command line (tokens printed once), auth
/// switched on, and then: no token is refused with a clear line, the tenant works in its prefix
/// and is denied outside it, naming what was denied, and the tenant's lease is its own.
#[test]
fn auth_from_the_command_line() {
    let root = tempfile::tempdir().expect("tempdir");
    let runtime = runtime();
    let node = runtime.block_on(start(serve(1, root.path())));
    let addr = node.endpoint();
    let token_of = |out: &str| {
        json(out)["token"]
            .as_str()
            .expect("a token is printed")
            .to_string()
    };

    let (ok, out, err) = run(addr, &["auth", "user", "add", "root", "--role", "admin"]);
    assert!(ok, "{err}");
    let admin = token_of(&out);
    assert_eq!(admin.len(), 64);
    for args in [
        &["auth", "role", "add", "web"][..],
        &["auth", "role", "grant", "web", "key", "readwrite", "web/"],
    ] {
        let (ok, _, err) = run(addr, args);
        assert!(ok, "{args:?}: {err}");
    }
    let (ok, out, err) = run(addr, &["auth", "user", "add", "webapp", "--role", "web"]);
    assert!(ok, "{err}");
    let tenant = token_of(&out);
    let (ok, _, err) = run(addr, &["--token", &admin, "auth", "enable"]);
    assert!(ok, "{err}");

    let (ok, _, err) = run(addr, &["put", "web/a", "1"]);
    assert!(!ok, "a call without a token is refused");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("requires authentication"), "{err}");
    let (ok, out, err) = run(addr, &["--token", &tenant, "auth", "whoami"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["user"], "webapp");
    assert_eq!(json(&out)["enabled"], true);
    let (ok, _, err) = run(addr, &["--token", &tenant, "put", "web/a", "1"]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(addr, &["--token", &tenant, "put", "db/a", "1"]);
    assert!(!ok);
    assert!(
        err.contains("permission denied") && err.contains("\"db/a\""),
        "{err}"
    );
    let (ok, _, err) = run(addr, &["--token", &tenant, "auth", "status"]);
    assert!(!ok);
    assert!(err.contains("needs the admin role"), "{err}");

    let (ok, out, err) = run(
        addr,
        &["--token", &tenant, "lease", "grant", "--ttl", "30s"],
    );
    assert!(ok, "{err}");
    let lease = json(&out)["id"].as_u64().expect("id").to_string();
    let (ok, out, err) = run(addr, &["--token", &admin, "lease", "ttl", &lease]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["owner"], "webapp");
    let (ok, out, err) = run(addr, &["--token", &admin, "auth", "status"]);
    assert!(ok, "{err}");
    let status = json(&out);
    assert_eq!(status["enabled"], true);
    assert_eq!(
        status["roles"][0]["permissions"][0],
        "key readwrite \"web/\""
    );
    // A malformed token never leaves the client.
    let (ok, _, err) = run(addr, &["--token", "two words", "status"]);
    assert!(!ok);
    assert!(err.contains("--token"), "{err}");
}

/// TLS from the command line: the files of `zaris cert init` serve a node and let its client in;
/// a client that trusts another CA, or speaks plaintext, is told in one line what to fix.
#[test]
fn tls_from_the_command_line() {
    let root = tempfile::tempdir().expect("tempdir");
    let (pki, other) = (root.path().join("pki"), root.path().join("other"));
    for (dir, client) in [(&pki, "alice"), (&other, "bob")] {
        let status = Command::new(zaris())
            .args(["cert", "init"])
            .arg(dir)
            .args(["--node", "127.0.0.1", "--client", client])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("zaris cert init");
        assert!(status.success(), "cert init {}", dir.display());
    }
    let file = |dir: &Path, name: &str| dir.join(name).to_string_lossy().into_owned();
    let runtime = runtime();
    let node = runtime.block_on(start(
        serve(1, root.path())
            .arg("--tls-cert")
            .arg(file(&pki, "127.0.0.1.pem"))
            .arg("--tls-key")
            .arg(file(&pki, "127.0.0.1-key.pem"))
            .arg("--client-cacert")
            .arg(file(&pki, "client-ca.pem")),
    ));
    let addr = node.endpoint();
    let (alice, alice_key) = (
        file(&pki, "client-alice.pem"),
        file(&pki, "client-alice-key.pem"),
    );
    let with = |ca: &str, args: &[&str]| {
        let mut all = vec!["--cacert", ca, "--cert", &alice, "--key", &alice_key];
        all.extend_from_slice(args);
        run(addr, &all)
    };

    let (ok, _, err) = with(&file(&pki, "ca.pem"), &["put", "tls/k", "v"]);
    assert!(ok, "{err}");
    let (ok, out, err) = with(&file(&pki, "ca.pem"), &["get", "tls/k"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["kvs"][0]["value"], "v", "{out}");

    // The node's certificate is not of the CA this client trusts.
    let (ok, _, err) = with(
        &file(&other, "ca.pem"),
        &["--timeout", "2s", "put", "tls/k", "w"],
    );
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("TLS with {addr} failed: invalid peer certificate"))
            && err.contains("not signed by the CA this client trusts")
            && err.contains("--cacert")
            && err.contains("nothing was sent"),
        "{err}"
    );
    let (ok, _, err) = run(addr, &["put", "tls/k", "w"]);
    assert!(!ok);
    assert!(
        err.contains("requires TLS") && err.contains("--cacert"),
        "{err}"
    );
    let (ok, out, err) = with(&file(&pki, "ca.pem"), &["get", "tls/k"]);
    assert!(ok, "{err}");
    assert_eq!(
        json(&out)["kvs"][0]["value"],
        "v",
        "nothing else was written: {out}"
    );
}
