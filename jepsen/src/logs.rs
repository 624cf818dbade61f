//! After a run: every node's committed Raft log must agree with every other's, read offline with
//! `zaris dump` from the stopped nodes' data dirs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::check::{CheckReport, Verdict};

/// One node's log as `zaris dump` prints it: the committed index, and per index (term, digest).
#[derive(Debug, Default)]
pub struct NodeLog {
    pub committed: u64,
    pub entries: BTreeMap<u64, (u64, String)>,
}

pub fn dump(zaris: &Path, data_dir: &Path) -> Result<NodeLog> {
    let output = std::process::Command::new(zaris)
        .arg("dump")
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .context("running zaris dump")?;
    if !output.status.success() {
        bail!(
            "zaris dump {} failed: {}",
            data_dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    parse(&String::from_utf8_lossy(&output.stdout))
}

fn parse(text: &str) -> Result<NodeLog> {
    let mut log = NodeLog::default();
    for (number, line) in text.lines().enumerate() {
        let value: Value = serde_json::from_str(line)
            .with_context(|| format!("line {} of the dump is not JSON", number + 1))?;
        if number == 0 {
            log.committed = value["committed"]["index"].as_u64().unwrap_or(0);
            continue;
        }
        let (Some(index), Some(term)) = (value["index"].as_u64(), value["term"].as_u64()) else {
            bail!("dump line {} has no index/term: {line}", number + 1);
        };
        let digest = value["digest"].as_str().unwrap_or_default().to_owned();
        log.entries.insert(index, (term, digest));
    }
    Ok(log)
}

/// Committed entries present on two nodes must be identical (same term and payload digest).
pub fn agree(logs: &BTreeMap<u64, NodeLog>) -> CheckReport {
    let mut violations = Vec::new();
    let ids: Vec<u64> = logs.keys().copied().collect();
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            let (la, lb) = (&logs[a], &logs[b]);
            let upto = la.committed.min(lb.committed);
            for (index, entry) in la.entries.range(..=upto) {
                if let Some(other) = lb.entries.get(index)
                    && other != entry
                {
                    violations.push(format!(
                        "committed entry {index} differs: node {a} has term {} digest {}, node \
                         {b} has term {} digest {}",
                        entry.0, entry.1, other.0, other.1
                    ));
                }
            }
        }
    }
    let compared: usize = logs.values().map(|l| l.entries.len()).sum();
    if violations.is_empty() && compared == 0 {
        return CheckReport {
            name: "log-agreement",
            verdict: Verdict::Unknown("no log entries to compare".into()),
        };
    }
    CheckReport {
        name: "log-agreement",
        verdict: Verdict::from_violations(violations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(committed: u64, entries: &[(u64, u64, &str)]) -> NodeLog {
        NodeLog {
            committed,
            entries: entries
                .iter()
                .map(|(i, t, d)| (*i, (*t, (*d).to_owned())))
                .collect(),
        }
    }

    #[test]
    fn identical_committed_prefixes_agree_and_uncommitted_tails_may_differ() {
        let logs = BTreeMap::from([
            (1, log(2, &[(1, 1, "a"), (2, 1, "b"), (3, 2, "x")])),
            (2, log(2, &[(1, 1, "a"), (2, 1, "b"), (3, 3, "y")])),
        ]);
        assert!(agree(&logs).verdict.is_pass());
    }

    #[test]
    fn a_divergent_committed_entry_fails() {
        let logs = BTreeMap::from([
            (1, log(2, &[(1, 1, "a"), (2, 1, "b")])),
            (2, log(3, &[(1, 1, "a"), (2, 2, "c")])),
        ]);
        assert!(matches!(agree(&logs).verdict, Verdict::Fail(_)));
    }

    #[test]
    fn dump_output_parses() {
        let text = "{\"committed\":{\"term\":2,\"index\":2}}\n\
                    {\"index\":1,\"term\":1,\"digest\":\"a\"}\n\
                    {\"index\":2,\"term\":2,\"digest\":\"b\"}\n";
        let parsed = parse(text).expect("parses");
        assert_eq!(parsed.committed, 2);
        assert_eq!(parsed.entries[&2], (2, "b".to_owned()));
    }
}
