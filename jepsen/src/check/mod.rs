//! Checkers: pure functions from a recorded [`History`] (plus parameters) to a [`CheckReport`].
//! They read no clock and do no I/O; all time is the ops' `time_ns`.
//!
//! - [`well_formed`] and [`min_rate`]: the history itself is usable and the run did real work.
//! - [`linear`]: the register calls are linearizable, per key.
//! - [`lease`]: leases end neither early nor (with a healthy cluster) late, never come back, and
//!   take their keys with them all at once.
//! - [`lock`]: fencing tokens are unique and increase, locks are exclusive while a holder's lease
//!   is valid, and stale tokens are refused.

pub mod lease;
pub mod linear;
pub mod lock;
pub mod promotion;

use std::collections::BTreeMap;
use std::fmt;

use crate::history::{Call, History, Kind, Op, Pair};

/// At most this many explanations are kept in a [`Verdict::Fail`]; one more line says how many
/// were left out. A broken run can violate a rule thousands of times; the first few tell the story.
pub const MAX_EXPLANATIONS: usize = 50;

/// What a checker concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Each entry explains one violation, naming the ops (by `index`) involved.
    Fail(Vec<String>),
    /// The checker could not decide (e.g. a search budget ran out). Never to be read as a pass.
    Unknown(String),
}

impl Verdict {
    /// `Pass` for no violations, else `Fail` with at most [`MAX_EXPLANATIONS`] of them.
    pub fn from_violations(mut violations: Vec<String>) -> Verdict {
        if violations.is_empty() {
            return Verdict::Pass;
        }
        if violations.len() > MAX_EXPLANATIONS {
            let more = violations.len() - MAX_EXPLANATIONS;
            violations.truncate(MAX_EXPLANATIONS);
            violations.push(format!("... and {more} more"));
        }
        Verdict::Fail(violations)
    }

    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass)
    }
}

/// One checker's verdict, under a stable name for logs and summaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    pub name: &'static str,
    pub verdict: Verdict,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.verdict {
            Verdict::Pass => write!(f, "{}: pass", self.name),
            Verdict::Unknown(why) => write!(f, "{}: unknown: {why}", self.name),
            Verdict::Fail(why) => {
                write!(f, "{}: FAIL", self.name)?;
                for line in why {
                    write!(f, "\n  - {line}")?;
                }
                Ok(())
            }
        }
    }
}

/// Folds several rules' reports into one named `name`: `Fail` if any failed (each explanation
/// prefixed with its rule), else `Unknown` if any was undecided, else `Pass`.
pub fn combine(name: &'static str, reports: Vec<CheckReport>) -> CheckReport {
    let mut failed = Vec::new();
    let mut unknown = Vec::new();
    for report in reports {
        match report.verdict {
            Verdict::Pass => {}
            Verdict::Fail(why) => {
                failed.extend(why.into_iter().map(|w| format!("[{}] {w}", report.name)))
            }
            Verdict::Unknown(why) => unknown.push(format!("[{}] {why}", report.name)),
        }
    }
    let verdict = if !failed.is_empty() {
        failed.extend(unknown.into_iter().map(|u| format!("also undecided: {u}")));
        Verdict::from_violations(failed)
    } else if !unknown.is_empty() {
        Verdict::Unknown(unknown.join("; "))
    } else {
        Verdict::Pass
    };
    CheckReport { name, verdict }
}

/// Fails when fewer than `min_ok_per_s` operations per second completed `ok` over a run of
/// `duration_ns`: a run where nothing succeeded (a dead cluster, a broken client) would otherwise
/// pass every safety check. A run of zero duration fails too.
pub fn min_rate(history: &History, duration_ns: u64, min_ok_per_s: f64) -> CheckReport {
    let name = "min-rate";
    let ok = history.ops.iter().filter(|op| op.kind == Kind::Ok).count();
    if duration_ns == 0 {
        return CheckReport {
            name,
            verdict: Verdict::Fail(vec![format!(
                "run duration is zero ({ok} ok ops): no rate can be shown"
            )]),
        };
    }
    let rate = ok as f64 / (duration_ns as f64 / 1e9);
    let verdict = if ok > 0 && rate >= min_ok_per_s {
        Verdict::Pass
    } else {
        Verdict::Fail(vec![format!(
            "{ok} ok ops in {} = {rate:.2}/s, below the minimum {min_ok_per_s}/s",
            fmt_ns(duration_ns)
        )])
    };
    CheckReport { name, verdict }
}

/// Checks the shape every other checker relies on: indexes strictly increase; each process
/// alternates one invoke and one completion, and none is left pending at the end; a completion is
/// no earlier than its invoke, describes the same request (same call kind and inputs) and, when
/// `ok`, carries the call's outputs.
///
/// Times need not increase across processes: concurrent recorders may append slightly out of
/// order, and the checkers order ops by `time_ns`, not by position.
pub fn well_formed(history: &History) -> CheckReport {
    let mut violations = Vec::new();
    let mut pending: BTreeMap<u64, &Op> = BTreeMap::new();
    let mut last_index: Option<u64> = None;
    for op in &history.ops {
        if let Some(last) = last_index
            && op.index <= last
        {
            violations.push(format!(
                "op #{} follows op #{last}: indexes must strictly increase",
                op.index
            ));
        }
        last_index = Some(op.index);

        if op.kind == Kind::Invoke {
            if let Some(prev) = pending.insert(op.process, op) {
                violations.push(format!(
                    "process {} invoked op #{} while op #{} was still pending",
                    op.process, op.index, prev.index
                ));
            }
            continue;
        }
        let Some(invoke) = pending.remove(&op.process) else {
            violations.push(format!(
                "op #{} ({:?} {}) completes nothing: process {} has no pending invoke",
                op.index,
                op.kind,
                op.call.name(),
                op.process
            ));
            continue;
        };
        if op.time_ns < invoke.time_ns {
            violations.push(format!(
                "op #{} completes at {}, before its invoke #{} at {}",
                op.index,
                fmt_ns(op.time_ns),
                invoke.index,
                fmt_ns(invoke.time_ns)
            ));
        }
        if op.call.name() != invoke.call.name() {
            violations.push(format!(
                "op #{} completes a {} but its invoke #{} was a {}",
                op.index,
                op.call.name(),
                invoke.index,
                invoke.call.name()
            ));
        } else if op.call.inputs() != invoke.call.inputs() {
            violations.push(format!(
                "op #{} ({:?}) does not match its invoke #{} ({:?})",
                op.index, op.call, invoke.index, invoke.call
            ));
        }
        if op.kind == Kind::Ok && !has_outputs(&op.call) {
            violations.push(format!(
                "op #{} is ok but lacks its outputs: {:?}",
                op.index, op.call
            ));
        }
    }
    for invoke in pending.values() {
        violations.push(format!(
            "op #{} (process {}, {}) was never completed",
            invoke.index,
            invoke.process,
            invoke.call.name()
        ));
    }
    CheckReport {
        name: "well-formed",
        verdict: Verdict::from_violations(violations),
    }
}

/// Whether an `ok` completion carries what its call returns (a read's `None` means absent).
fn has_outputs(call: &Call) -> bool {
    match call {
        Call::Grant { lease, .. } => lease.is_some(),
        Call::Renew { found, .. } | Call::TimeToLive { found, .. } => found.is_some(),
        Call::GetLeased { present, .. } => present.is_some(),
        Call::Acquire { token, .. } => token.is_some(),
        Call::FencedWrite { accepted, .. } => accepted.is_some(),
        Call::Read { .. }
        | Call::Write { .. }
        | Call::Cas { .. }
        | Call::GrantId { .. }
        | Call::Revoke { .. }
        | Call::PutLeased { .. }
        | Call::Release { .. }
        | Call::GuardedPut { .. } => true,
    }
}

/// Nanoseconds as milliseconds, for explanations.
pub(crate) fn fmt_ns(ns: u64) -> String {
    if ns == u64::MAX {
        return "never".to_string();
    }
    format!("{}.{:06}ms", ns / 1_000_000, ns % 1_000_000)
}

/// `ms` in nanoseconds, saturating (TTLs of days are fine; nothing overflows into the past).
pub(crate) fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

/// One operation for an explanation: `#7 (process 3) write "k" 5 [ok, 1.0ms..2.0ms]`.
pub(crate) fn describe(pair: &Pair<'_>) -> String {
    let outcome = match pair.outcome() {
        Kind::Ok => "ok",
        Kind::Fail => "fail",
        Kind::Info | Kind::Invoke => "info",
    };
    let end = match pair.completion_ns() {
        Some(ns) => fmt_ns(ns),
        None => "-".to_string(),
    };
    format!(
        "#{} (process {}) {:?} [{outcome}, {}..{end}]",
        pair.invoke.index,
        pair.invoke.process,
        pair.call(),
        fmt_ns(pair.invoke_ns()),
    )
}

#[cfg(test)]
pub(crate) mod testkit {
    //! Builders for hand-made histories: ops are given as (process, call, invoke time, outcome,
    //! completion time) and laid out in time order the way the runner would record them.

    use crate::history::{Call, History, Kind, Op};

    /// One operation to record.
    #[derive(Clone, Debug)]
    pub struct Spec {
        pub process: u64,
        pub invoke: Call,
        pub start: u64,
        /// `None` = never completed.
        pub end: Option<(Kind, u64, Call)>,
    }

    /// An `ok` op whose completion carries `done` (outputs filled in).
    pub fn ok(process: u64, start: u64, end: u64, invoke: Call, done: Call) -> Spec {
        Spec {
            process,
            invoke,
            start,
            end: Some((Kind::Ok, end, done)),
        }
    }

    /// An `ok` op whose call has no outputs.
    pub fn ok_same(process: u64, start: u64, end: u64, call: Call) -> Spec {
        ok(process, start, end, call.clone(), call)
    }

    pub fn fail(process: u64, start: u64, end: u64, call: Call) -> Spec {
        Spec {
            process,
            invoke: call.clone(),
            start,
            end: Some((Kind::Fail, end, call)),
        }
    }

    pub fn info(process: u64, start: u64, end: u64, call: Call) -> Spec {
        Spec {
            process,
            invoke: call.clone(),
            start,
            end: Some((Kind::Info, end, call)),
        }
    }

    pub fn pending(process: u64, start: u64, call: Call) -> Spec {
        Spec {
            process,
            invoke: call,
            start,
            end: None,
        }
    }

    /// Records the specs' invokes and completions in time order (invokes first on ties) and
    /// numbers them. Returns the history and, per spec, the index of its invoke.
    pub fn build(specs: &[Spec]) -> (History, Vec<u64>) {
        // (time, completion?, spec, op)
        let mut events: Vec<(u64, bool, usize, Op)> = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            events.push((
                spec.start,
                false,
                i,
                Op {
                    index: 0,
                    kind: Kind::Invoke,
                    process: spec.process,
                    node: 1,
                    time_ns: spec.start,
                    call: spec.invoke.clone(),
                    error: None,
                },
            ));
            if let Some((kind, end, call)) = &spec.end {
                events.push((
                    *end,
                    true,
                    i,
                    Op {
                        index: 0,
                        kind: *kind,
                        process: spec.process,
                        node: 1,
                        time_ns: *end,
                        call: call.clone(),
                        error: (*kind != Kind::Ok).then(|| "test".to_string()),
                    },
                ));
            }
        }
        events.sort_by_key(|(t, completion, i, _)| (*t, *completion, *i));
        let mut invoke_index = vec![0; specs.len()];
        let mut ops = Vec::new();
        for (n, (_, completion, i, mut op)) in events.into_iter().enumerate() {
            op.index = n as u64;
            if !completion {
                invoke_index[i] = n as u64;
            }
            ops.push(op);
        }
        (History { ops }, invoke_index)
    }

    pub fn history(specs: &[Spec]) -> History {
        build(specs).0
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    fn write(key: &str, value: u64) -> Call {
        Call::Write {
            key: key.into(),
            value,
        }
    }

    fn read(value: Option<u64>) -> Call {
        Call::Read {
            key: "k".into(),
            value,
        }
    }

    #[test]
    fn min_rate_fails_an_idle_run() {
        let idle = History::default();
        assert!(!min_rate(&idle, 10_000_000_000, 0.0).verdict.is_pass());
        assert!(!min_rate(&idle, 0, 0.0).verdict.is_pass());
    }

    #[test]
    fn min_rate_compares_ok_per_second() {
        let specs: Vec<Spec> = (0..10)
            .map(|i| ok_same(i, i * 10, i * 10 + 5, write("k", i)))
            .collect();
        let h = history(&specs);
        // 10 ok in 2 s = 5/s.
        assert_eq!(min_rate(&h, 2_000_000_000, 5.0).verdict, Verdict::Pass);
        let report = min_rate(&h, 2_000_000_000, 6.0);
        assert!(matches!(report.verdict, Verdict::Fail(_)), "{report}");
    }

    #[test]
    fn well_formed_accepts_a_recorded_history() {
        let h = history(&[
            ok(1, 0, 10, read(None), read(Some(3))),
            ok_same(2, 5, 15, write("k", 3)),
            info(1, 20, 30, write("k", 4)),
            fail(2, 20, 25, write("k", 5)),
        ]);
        assert_eq!(well_formed(&h).verdict, Verdict::Pass);
    }

    #[test]
    fn well_formed_reports_each_defect() {
        let mut h = history(&[ok_same(1, 0, 10, write("k", 1)), pending(2, 5, read(None))]);
        // A stray completion, a mismatched completion and an ok without outputs.
        let stray = Op {
            index: 100,
            kind: Kind::Ok,
            process: 9,
            node: 1,
            time_ns: 50,
            call: read(Some(1)),
            error: None,
        };
        h.ops.push(stray);
        h.ops.push(Op {
            index: 101,
            kind: Kind::Invoke,
            process: 3,
            node: 1,
            time_ns: 60,
            call: Call::Grant {
                lease: None,
                ttl_ms: 2000,
                keys: Vec::new(),
            },
            error: None,
        });
        h.ops.push(Op {
            index: 102,
            kind: Kind::Ok,
            process: 3,
            node: 1,
            time_ns: 70,
            call: Call::Grant {
                lease: None,
                ttl_ms: 2000,
                keys: Vec::new(),
            },
            error: None,
        });
        h.ops.push(Op {
            index: 103,
            kind: Kind::Invoke,
            process: 4,
            node: 1,
            time_ns: 80,
            call: write("k", 1),
            error: None,
        });
        h.ops.push(Op {
            index: 104,
            kind: Kind::Ok,
            process: 4,
            node: 1,
            time_ns: 90,
            call: write("other", 1),
            error: None,
        });
        let Verdict::Fail(why) = well_formed(&h).verdict else {
            panic!("malformed history passed");
        };
        let all = why.join("\n");
        assert!(
            all.contains("#100") && all.contains("completes nothing"),
            "{all}"
        );
        assert!(all.contains("#102 is ok but lacks its outputs"), "{all}");
        assert!(
            all.contains("#104") && all.contains("does not match"),
            "{all}"
        );
        assert!(all.contains("never completed"), "{all}");
        assert_eq!(why.len(), 4, "{all}");
    }

    #[test]
    fn pairs_treat_a_missing_completion_as_info() {
        let h = history(&[ok_same(1, 0, 10, write("k", 1)), pending(2, 5, read(None))]);
        let pairs = h.pairs();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0].outcome(), Kind::Ok);
        assert_eq!(pairs[0].effect_deadline_ns(), 10);
        assert_eq!(pairs[1].outcome(), Kind::Info);
        assert_eq!(pairs[1].effect_deadline_ns(), u64::MAX);
    }

    #[test]
    fn fail_verdicts_are_capped() {
        let many: Vec<String> = (0..MAX_EXPLANATIONS + 5).map(|i| i.to_string()).collect();
        let Verdict::Fail(kept) = Verdict::from_violations(many) else {
            panic!("violations must fail");
        };
        assert_eq!(kept.len(), MAX_EXPLANATIONS + 1);
        assert_eq!(kept[MAX_EXPLANATIONS], "... and 5 more");
    }
}
