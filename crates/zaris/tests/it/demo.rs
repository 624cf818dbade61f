//! `zaris demo`, the README's first command, runs to the end, tells the takeover story with the
//! promised facts, and leaves nothing behind.

use std::process::Command;

use crate::procs::zaris;

/// The number after `marker` in `line`.
fn number_after(line: &str, marker: &str) -> u64 {
    let rest = &line[line.find(marker).expect("marker") + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {marker:?} in {line:?}"))
}

fn line_with<'a>(stdout: &'a str, needle: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{stdout}"))
}

/// Processes whose command line mentions `text`.
fn processes_mentioning(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(text) {
                found.push(cmdline);
            }
        }
    }
    found
}

#[test]
fn the_demo_shows_a_fenced_takeover_and_a_surviving_failover() {
    let output = Command::new(zaris())
        .arg("demo")
        .env_remove("ZARIS_ENDPOINTS")
        .output()
        .expect("run zaris demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{stderr}");
    println!("{stdout}");

    let a_token = number_after(
        line_with(&stdout, "worker A  acquired lock"),
        "fencing token ",
    );
    let expired = line_with(&stdout, "A left: lease");
    assert!(expired.contains("EXPIRED"), "{expired}");
    let passed = line_with(&stdout, "the lock passed from A");
    assert_eq!(number_after(passed, "A (token "), a_token);
    let b_token = number_after(passed, "B (token ");
    assert!(b_token > a_token, "{passed}");
    let rejected = line_with(&stdout, "REJECTED a late write from A");
    assert_eq!(number_after(rejected, "stale token "), a_token);
    line_with(&stdout, "the Raft leader");
    let survived = line_with(&stdout, "ownership survived the failover");
    assert_eq!(number_after(survived, "with token "), b_token);

    // The order of the story: kill, expiry, takeover, refused write, leader kill, survival.
    let position = |needle: &str| stdout.find(needle).expect(needle);
    assert!(position("SIGKILL worker A") < position("A left: lease"));
    assert!(position("A left: lease") <= position("the lock passed from A"));
    assert!(position("the lock passed from A") < position("REJECTED"));
    assert!(position("REJECTED") < position("the Raft leader"));
    assert!(position("the Raft leader") < position("ownership survived"));

    // Everything it started is gone: the data directory and every process using it.
    let dir = data_dir_of(line_with(&stdout, "cluster data in "));
    assert!(
        !std::path::Path::new(&dir).exists(),
        "{dir} was left behind"
    );
    assert_eq!(processes_mentioning(&dir), Vec::<String>::new());
}

fn data_dir_of(line: &str) -> String {
    line.split("cluster data in ")
        .nth(1)
        .expect("path")
        .trim()
        .to_owned()
}
