//! The promotion rule of the lease contract (§3), checked white-box from the nodes' own log
//! lines: a new leader extends every lease by one election timeout before it may expire any, so
//! no expiry is proposed earlier than `promotion + election_timeout` on the leader's lessor clock.
//!
//! The client-side checkers cannot see this rule broken in Zaris (see jepsen/README.md, "The
//! harness must be able to fail"): every renewal is a replicated entry and each lessor counts
//! from its own apply, so a new leader's deadlines are never early even without the extension,
//! and an expiry decided before it applied a committed renewal is skipped on apply. The rule is
//! the contract's all the same, and etcd-style designs depend on it; this check keeps it from
//! eroding unseen. Both times are the lessor's (`now_ms` fields, one process's monotonic clock,
//! at its own rate under the clock fault), so the comparison is exact.

use std::collections::BTreeMap;

use super::{CheckReport, Verdict};

/// The lessor's log line after a promotion (`now_ms`, `extend_ms`).
pub const PROMOTED: &str = "lessor promoted";
/// The lessor's log line when it loses leadership.
pub const DEMOTED: &str = "lessor demoted";
/// The lessor's log line before it proposes an Expire (`now_ms`, `count`).
pub const EXPIRING: &str = "proposing the expiry of overdue leases";

/// The `key=value` field of a tracing line, as a number.
fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|token| token.strip_prefix(key)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
}

/// `logs`: each node's log text (every process it ran, in order). No expiry may be proposed
/// before `extend_ms` of lessor time passed since the node's latest promotion, nor by a node
/// whose lessor is not promoted.
pub fn check(logs: &BTreeMap<u64, String>, extend_ms: u64) -> CheckReport {
    let name = "promotion-extension";
    let mut violations = Vec::new();
    let mut promotions = 0;
    for (node, text) in logs {
        let mut promoted_at_ms: Option<u64> = None;
        for line in text.lines() {
            if line.contains(PROMOTED) {
                let Some(now_ms) = field(line, "now_ms") else {
                    return CheckReport {
                        name,
                        verdict: Verdict::Unknown(format!(
                            "node {node}: a promotion line without now_ms: {line}"
                        )),
                    };
                };
                promotions += 1;
                promoted_at_ms = Some(now_ms);
            } else if line.contains(DEMOTED) {
                promoted_at_ms = None;
            } else if line.contains(EXPIRING) {
                let now_ms = field(line, "now_ms");
                match (promoted_at_ms, now_ms) {
                    (Some(promoted), Some(now)) if now < promoted.saturating_add(extend_ms) => {
                        violations.push(format!(
                            "node {node}: proposed an expiry at lessor time {now} ms, {} ms after \
                             its promotion at {promoted} ms (every lease must be extended by the \
                             election timeout, {extend_ms} ms): {line}",
                            now - promoted.min(now)
                        ));
                    }
                    (Some(_), Some(_)) => {}
                    (None, _) => violations.push(format!(
                        "node {node}: proposed an expiry without being promoted: {line}"
                    )),
                    (_, None) => violations.push(format!(
                        "node {node}: an expiry line without now_ms: {line}"
                    )),
                }
            }
        }
    }
    if violations.is_empty() && promotions == 0 {
        return CheckReport {
            name,
            verdict: Verdict::Unknown("no node logged a promotion".into()),
        };
    }
    CheckReport {
        name,
        verdict: Verdict::from_violations(violations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMOTION: &str = "2026-11-30T23:21:13.212638Z  INFO zaris_server::lessor_task: \
        lessor promoted: this node now expires leases node_id=1 term=2 now_ms=5000 \
        extend_ms=500 leases=3";

    fn expiry(now_ms: u64) -> String {
        format!(
            "2026-11-30T23:21:14.000000Z  INFO zaris_server::lessor_task: proposing the expiry \
             of overdue leases node_id=1 now_ms={now_ms} count=2"
        )
    }

    fn verdict(lines: &[&str]) -> Verdict {
        let logs = BTreeMap::from([(1, lines.join("\n"))]);
        check(&logs, 500).verdict
    }

    #[test]
    fn an_expiry_an_election_timeout_after_promotion_passes() {
        assert_eq!(verdict(&[PROMOTION, &expiry(5_500)]), Verdict::Pass);
        assert_eq!(verdict(&[PROMOTION, &expiry(9_000)]), Verdict::Pass);
    }

    #[test]
    fn an_expiry_before_the_extension_ran_out_fails() {
        match verdict(&[PROMOTION, &expiry(5_499)]) {
            Verdict::Fail(why) => assert!(why[0].contains("499 ms after"), "{why:?}"),
            other => panic!("an expiry 1 ms early passed: {other:?}"),
        }
        assert!(matches!(
            verdict(&[PROMOTION, &expiry(5_000)]),
            Verdict::Fail(_)
        ));
    }

    #[test]
    fn an_expiry_after_demotion_or_without_promotion_fails() {
        let demoted = "2026-11-30T23:21:15Z  INFO zaris_server::lessor_task: lessor demoted: \
                       no longer Raft leader node_id=1 term=3";
        assert!(matches!(
            verdict(&[PROMOTION, demoted, &expiry(9_000)]),
            Verdict::Fail(_)
        ));
        // A restarted process's clock starts again; its promotion line comes first.
        let restarted = PROMOTION.replace("now_ms=5000", "now_ms=40");
        assert_eq!(
            verdict(&[PROMOTION, &restarted, &expiry(540)]),
            Verdict::Pass
        );
    }

    #[test]
    fn logs_without_promotions_are_unknown() {
        assert!(matches!(verdict(&["nothing"]), Verdict::Unknown(_)));
        let old = PROMOTION.replace(" now_ms=5000", "");
        assert!(matches!(verdict(&[&old]), Verdict::Unknown(_)));
    }
}
