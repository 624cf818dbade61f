//! Linearizability of the register calls (`Read`, `Write`, `Cas`), key by key.
//!
//! The search is Wing & Gong's, with Lowe's memoization, as in Porcupine and Knossos' `linear`:
//! walk the ops in time order, tentatively linearize any op whose invoke comes before the first
//! pending completion, backtrack when a completion is reached before its op was linearized. A
//! (set of linearized ops, register value) configuration already explored is never explored again.
//!
//! Jepsen's outcome semantics: an `ok` op took effect between its invoke and its completion; a
//! `fail` op did not take effect (a `Cas` failed because its compare did not hold) and is dropped;
//! an `info` (or never completed) write or cas may have taken effect at any point after its invoke
//! — its completion is at infinity, so the search may linearize it late or not at all. A read that
//! did not complete `ok` tells nothing and is dropped.
//!
//! The model is one register per key whose value starts absent (`None`).
//!
//! Three shortcuts keep faulty runs tractable without changing any answer (a test checks them
//! against brute force): `info` ops whose value nobody could observe are dropped first
//! (`drop_invisible_info`); an `ok` read or cas needing a value nobody wrote fails at once with
//! a plain explanation; and a read of the current value is linearized without branching (it
//! changes nothing, so no linearization gains by placing it later). With unique written values,
//! as the register workload writes, a few thousand ops per key with 10 concurrent processes take
//! tens of milliseconds; what stays exponential is many overlapping ops with repeated values.
//!
//! A *step* of the budget is one move of the search: trying an entry, linearizing an op, or
//! undoing one.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::{CheckReport, Verdict, describe};
use crate::history::{Call, History, Kind, Pair};

/// Checks every key's register history. The search explores at most `max_steps_per_key` steps
/// for one key; a key it cannot decide within that makes the verdict `Unknown` (or `Fail` if
/// another key failed), never `Pass`.
pub fn check_linearizable(history: &History, max_steps_per_key: u64) -> CheckReport {
    let mut per_key: BTreeMap<&str, Vec<RegOp<'_>>> = BTreeMap::new();
    for pair in history.pairs() {
        if let Some((key, op)) = RegOp::from_pair(pair) {
            per_key.entry(key).or_default().push(op);
        }
    }
    let mut violations = Vec::new();
    let mut undecided = Vec::new();
    for (key, ops) in &mut per_key {
        drop_invisible_info(ops);
        if let Some(orphan) = needs_unwritten_value(ops) {
            violations.push(format!(
                "key {key:?}: op {} needs a value no write invoked before its completion wrote",
                describe(&ops[orphan].pair)
            ));
            continue;
        }
        match search(ops, max_steps_per_key) {
            Outcome::Linearizable => {}
            Outcome::Budget(steps) => {
                undecided.push(format!(
                    "budget exhausted on key {key:?} after {steps} steps"
                ));
            }
            Outcome::Violation(blocked) => violations.push(blocked.explain(key, ops)),
        }
    }
    let verdict = if !violations.is_empty() {
        violations.extend(
            undecided
                .into_iter()
                .map(|u| format!("also undecided: {u}")),
        );
        Verdict::from_violations(violations)
    } else if !undecided.is_empty() {
        Verdict::Unknown(undecided.join("; "))
    } else {
        Verdict::Pass
    };
    CheckReport {
        name: "linearizable",
        verdict,
    }
}

/// What a register op does to the register, once linearized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Read(Option<u64>),
    Write(u64),
    Cas { from: u64, to: u64 },
}

impl Effect {
    /// The register after the op, or `None` if the op cannot happen in `state`.
    fn apply(self, state: Option<u64>) -> Option<Option<u64>> {
        match self {
            Effect::Read(value) => (value == state).then_some(state),
            Effect::Write(value) => Some(Some(value)),
            Effect::Cas { from, to } => (state == Some(from)).then_some(Some(to)),
        }
    }
}

/// One op kept for the search.
#[derive(Clone, Copy, Debug)]
struct RegOp<'a> {
    pair: Pair<'a>,
    effect: Effect,
    start: u64,
    /// `None` for `info`: it may take effect any time after `start`, or never.
    end: Option<u64>,
}

impl<'a> RegOp<'a> {
    fn from_pair(pair: Pair<'a>) -> Option<(&'a str, RegOp<'a>)> {
        let outcome = pair.outcome();
        if outcome == Kind::Fail {
            return None;
        }
        let (key, effect) = match pair.call() {
            Call::Read { key, value } if outcome == Kind::Ok => (key, Effect::Read(*value)),
            Call::Write { key, value } => (key, Effect::Write(*value)),
            Call::Cas { key, from, to } => (
                key,
                Effect::Cas {
                    from: *from,
                    to: *to,
                },
            ),
            _ => return None,
        };
        let start = pair.invoke_ns();
        // A completion recorded before its invoke is malformed (`well_formed` says so); clamping
        // keeps the op's call entry before its return entry.
        let end = (outcome == Kind::Ok).then(|| pair.effect_deadline_ns().max(start));
        Some((
            key.as_str(),
            RegOp {
                pair,
                effect,
                start,
                end,
            },
        ))
    }
}

enum Outcome {
    Linearizable,
    Budget(u64),
    Violation(Blocked),
}

/// Where the search got furthest before every path failed: the op whose completion could not be
/// passed, and the register values it was tried in.
#[derive(Debug, Default)]
struct Blocked {
    /// Ok ops linearized at that point.
    depth: usize,
    /// Index into the key's ops.
    op: usize,
    states: BTreeSet<Option<u64>>,
}

impl Blocked {
    fn explain(&self, key: &str, ops: &[RegOp<'_>]) -> String {
        let total = ops.iter().filter(|op| op.end.is_some()).count();
        let states: Vec<String> = self
            .states
            .iter()
            .map(|s| s.map_or_else(|| "absent".to_string(), |v| v.to_string()))
            .collect();
        format!(
            "key {key:?}: op {} cannot be linearized: it must take effect before its completion, \
             but after the {} of {total} ok ops that can precede it the register could only be \
             [{}], and no order of the ops concurrent with it fits",
            describe(&ops[self.op].pair),
            self.depth,
            states.join(", "),
        )
    }
}

const NONE: usize = usize::MAX;

/// The time-ordered entries (a call and, for `ok` ops, a return per op) as a doubly linked list
/// with a head sentinel, so linearizing an op unlinks its entries and backtracking relinks them.
struct Entries {
    next: Vec<usize>,
    prev: Vec<usize>,
    /// Per entry: the op and whether it is the op's call.
    op: Vec<usize>,
    is_call: Vec<bool>,
    /// Per call entry: its return entry, or `NONE` for an `info` op.
    ret: Vec<usize>,
}

impl Entries {
    const HEAD: usize = 0;

    fn new(ops: &[RegOp<'_>]) -> Entries {
        // (time, return?, op): on equal times calls come first, making the ops concurrent — the
        // permissive reading of a tie.
        let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            order.push((op.start, false, i));
            if let Some(end) = op.end {
                order.push((end, true, i));
            }
        }
        order.sort_unstable();
        let n = order.len() + 1;
        let mut entries = Entries {
            next: vec![NONE; n],
            prev: vec![NONE; n],
            op: vec![NONE; n],
            is_call: vec![false; n],
            ret: vec![NONE; n],
        };
        let mut call_of = vec![NONE; ops.len()];
        for (pos, &(_, is_return, op)) in order.iter().enumerate() {
            let id = pos + 1;
            entries.prev[id] = id - 1;
            entries.next[id - 1] = id;
            entries.op[id] = op;
            entries.is_call[id] = !is_return;
            if is_return {
                entries.ret[call_of[op]] = id;
            } else {
                call_of[op] = id;
            }
        }
        entries
    }

    /// The first call entry before the first remaining return whose op satisfies `pred`.
    fn first_callable(&self, pred: impl Fn(usize) -> bool) -> Option<usize> {
        let mut id = self.next[Self::HEAD];
        while id != NONE && self.is_call[id] {
            if pred(self.op[id]) {
                return Some(id);
            }
            id = self.next[id];
        }
        None
    }

    fn unlink(&mut self, id: usize) {
        let (p, n) = (self.prev[id], self.next[id]);
        self.next[p] = n;
        if n != NONE {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, id: usize) {
        let (p, n) = (self.prev[id], self.next[id]);
        self.next[p] = id;
        if n != NONE {
            self.prev[n] = id;
        }
    }

    /// Removes a call entry and its return; undone by `unlift` in reverse (LIFO) order.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        if self.ret[call] != NONE {
            self.unlink(self.ret[call]);
        }
    }

    fn unlift(&mut self, call: usize) {
        if self.ret[call] != NONE {
            self.relink(self.ret[call]);
        }
        self.relink(call);
    }
}

/// Deterministic 128-bit Zobrist keys: the set of linearized ops is the XOR of its members' keys,
/// updated in O(1) per step. Two different sets collide with probability ~2^-128 per pair, and a
/// collision could only prune a path (a spurious `Fail`), never invent a linearization.
fn zobrist(op: usize) -> u128 {
    fn splitmix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
    let a = splitmix(op as u64);
    let b = splitmix(a ^ 0x5851_f42d_4c95_7f2d);
    (u128::from(a) << 64) | u128::from(b)
}

/// Drops `info` ops whose effect no other op can observe, until none is left. Such an op is
/// invisible: if it were linearized, the op right after it would have to be a write (nothing else
/// is legal in a state nobody reads or compares against), so leaving it out changes nothing.
/// This keeps the timeouts of a faulty run, which pile up as never-returning ops, from making the
/// search exponential. A `Cas` from `x` to `x` (`info`) never changes the register and goes too.
fn drop_invisible_info(ops: &mut Vec<RegOp<'_>>) {
    loop {
        // Per value: the latest completion of an op that needs the register to hold it.
        let mut observed: BTreeMap<u64, u64> = BTreeMap::new();
        for op in ops.iter() {
            let needs = match op.effect {
                Effect::Read(Some(v)) => v,
                Effect::Cas { from, .. } => from,
                Effect::Read(None) | Effect::Write(_) => continue,
            };
            let end = op.end.unwrap_or(u64::MAX);
            let latest = observed.entry(needs).or_insert(end);
            *latest = (*latest).max(end);
        }
        let before = ops.len();
        ops.retain(|op| {
            if op.end.is_some() {
                return true;
            }
            let produces = match op.effect {
                Effect::Write(v) => v,
                Effect::Cas { from, to } if from != to => to,
                Effect::Cas { .. } | Effect::Read(_) => return false,
            };
            // An observer must be able to take effect after this op's invoke.
            observed.get(&produces).is_some_and(|end| *end >= op.start)
        });
        if ops.len() == before {
            return;
        }
    }
}

/// An `ok` read or cas that needs a value (other than absent) which no write or cas invoked
/// before its completion produces: a violation found without a search, and explained plainly.
fn needs_unwritten_value(ops: &[RegOp<'_>]) -> Option<usize> {
    // Per value: the earliest invoke of an op producing it.
    let mut first_produced: BTreeMap<u64, u64> = BTreeMap::new();
    for op in ops {
        let produces = match op.effect {
            Effect::Write(v) | Effect::Cas { to: v, .. } => v,
            Effect::Read(_) => continue,
        };
        let first = first_produced.entry(produces).or_insert(op.start);
        *first = (*first).min(op.start);
    }
    ops.iter().position(|op| {
        let needs = match op.effect {
            Effect::Read(Some(v)) | Effect::Cas { from: v, .. } => v,
            Effect::Read(None) | Effect::Write(_) => return false,
        };
        let end = op.end.unwrap_or(u64::MAX);
        op.end.is_some() && first_produced.get(&needs).is_none_or(|start| *start > end)
    })
}

/// A step of the search loop.
enum Step {
    /// Linearize this call entry, giving this register value; `forced` if it is the only
    /// successor worth exploring.
    Descend {
        call: usize,
        after: Option<u64>,
        forced: bool,
    },
    /// No extension of the current configuration can succeed.
    DeadEnd,
}

/// One linearized op on the search path.
struct Frame {
    call: usize,
    before: Option<u64>,
    forced: bool,
}

/// Whether linearizing the op in `state` cannot hurt: it leaves the register as it is wherever
/// it is legal (a read, a cas from `x` to `x`), so a linearization placing it later can place it
/// here instead. A write of the current value does not qualify: later it might restore a value.
fn preserves_anywhere(effect: Effect, state: Option<u64>) -> bool {
    match effect {
        Effect::Read(v) => v == state,
        Effect::Cas { from, to } => from == to && state == Some(from),
        Effect::Write(_) => false,
    }
}

fn search(ops: &[RegOp<'_>], max_steps: u64) -> Outcome {
    let total_ok = ops.iter().filter(|op| op.end.is_some()).count();
    let keys: Vec<u128> = (0..ops.len()).map(zobrist).collect();
    let mut entries = Entries::new(ops);
    let mut cache: HashSet<(u128, Option<u64>)> = HashSet::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut linearized: u128 = 0;
    let mut ok_done = 0;
    let mut state: Option<u64> = None;
    let mut blocked = Blocked::default();
    let mut entry = entries.next[Entries::HEAD];
    // A configuration just reached: first look for an op that can be linearized at no cost.
    let mut fresh = true;
    let mut steps: u64 = 0;
    loop {
        // Success once every `ok` op is placed: the `info` ops left over never took effect.
        if ok_done == total_ok {
            return Outcome::Linearizable;
        }
        if steps >= max_steps {
            return Outcome::Budget(steps);
        }
        steps += 1;

        let look_for_free = std::mem::take(&mut fresh);
        let step = if look_for_free
            && let Some(call) =
                entries.first_callable(|op| preserves_anywhere(ops[op].effect, state))
        {
            // Exploring only this successor loses nothing; if it was explored already and
            // failed, this configuration fails too.
            let with = linearized ^ keys[entries.op[call]];
            if cache.insert((with, state)) {
                Step::Descend {
                    call,
                    after: state,
                    forced: true,
                }
            } else {
                Step::DeadEnd
            }
        } else if entry != NONE && entries.is_call[entry] {
            let op = entries.op[entry];
            match ops[op].effect.apply(state) {
                Some(after) if cache.insert((linearized ^ keys[op], after)) => Step::Descend {
                    call: entry,
                    after,
                    forced: false,
                },
                _ => {
                    entry = entries.next[entry];
                    continue;
                }
            }
        } else {
            // A completion (or, defensively, the end) reached with its op not linearized: this
            // prefix cannot be extended. Remember the deepest such point for the explanation.
            if entry != NONE {
                let op = entries.op[entry];
                if ok_done > blocked.depth || blocked.states.is_empty() {
                    blocked = Blocked {
                        depth: ok_done,
                        op,
                        states: BTreeSet::new(),
                    };
                }
                if ok_done == blocked.depth && op == blocked.op {
                    blocked.states.insert(state);
                }
            }
            Step::DeadEnd
        };

        match step {
            Step::Descend {
                call,
                after,
                forced,
            } => {
                let op = entries.op[call];
                stack.push(Frame {
                    call,
                    before: state,
                    forced,
                });
                linearized ^= keys[op];
                state = after;
                if ops[op].end.is_some() {
                    ok_done += 1;
                }
                entries.lift(call);
                entry = entries.next[Entries::HEAD];
                fresh = true;
            }
            Step::DeadEnd => loop {
                // Undo the last choice and try the next entry after it; a forced choice was the
                // only one, so its failure is its parent's failure too.
                let Some(frame) = stack.pop() else {
                    return Outcome::Violation(blocked);
                };
                let op = entries.op[frame.call];
                linearized ^= keys[op];
                state = frame.before;
                if ops[op].end.is_some() {
                    ok_done -= 1;
                }
                entries.unlift(frame.call);
                if !frame.forced {
                    entry = entries.next[frame.call];
                    break;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::*;

    const BUDGET: u64 = 1_000_000;

    fn read(key: &str, value: Option<u64>) -> (Call, Call) {
        (
            Call::Read {
                key: key.into(),
                value: None,
            },
            Call::Read {
                key: key.into(),
                value,
            },
        )
    }

    fn r(p: u64, start: u64, end: u64, value: Option<u64>) -> Spec {
        let (invoke, done) = read("k", value);
        ok(p, start, end, invoke, done)
    }

    fn write(value: u64) -> Call {
        Call::Write {
            key: "k".into(),
            value,
        }
    }

    fn w(p: u64, start: u64, end: u64, value: u64) -> Spec {
        ok_same(p, start, end, write(value))
    }

    fn cas(from: u64, to: u64) -> Call {
        Call::Cas {
            key: "k".into(),
            from,
            to,
        }
    }

    fn verdict(specs: &[Spec]) -> Verdict {
        check_linearizable(&history(specs), BUDGET).verdict
    }

    fn assert_fails(specs: &[Spec], needle: &str) {
        match verdict(specs) {
            Verdict::Fail(why) => {
                let all = why.join("\n");
                assert!(all.contains(needle), "expected {needle:?} in:\n{all}");
            }
            other => panic!("expected Fail, got {other:?}"),
        }
    }

    #[test]
    fn empty_and_sequential_histories_pass() {
        assert_eq!(verdict(&[]), Verdict::Pass);
        assert_eq!(
            verdict(&[
                r(1, 0, 1, None),
                w(1, 2, 3, 1),
                r(2, 4, 5, Some(1)),
                ok_same(1, 6, 7, cas(1, 2)),
                r(2, 8, 9, Some(2)),
            ]),
            Verdict::Pass
        );
    }

    #[test]
    fn overlapping_writes_and_reads_may_linearize_in_either_order() {
        // w1 and w2 overlap; reads overlapping both see them in opposite orders, which is fine
        // as long as one order explains all reads.
        assert_eq!(
            verdict(&[
                w(1, 0, 10, 1),
                w(2, 2, 12, 2),
                r(3, 1, 11, Some(2)),
                r(4, 11, 20, Some(1)),
                r(5, 21, 30, Some(1)),
            ]),
            Verdict::Pass
        );
    }

    #[test]
    fn info_write_may_or_may_not_have_taken_effect() {
        // Took effect, long after its invoke.
        assert_eq!(
            verdict(&[
                w(1, 0, 1, 1),
                info(2, 2, 3, write(2)),
                r(3, 10, 11, Some(1)),
                r(3, 20, 21, Some(2)),
            ]),
            Verdict::Pass
        );
        // Never took effect.
        assert_eq!(
            verdict(&[
                w(1, 0, 1, 1),
                info(2, 2, 3, write(2)),
                r(3, 20, 21, Some(1))
            ]),
            Verdict::Pass
        );
        // Never completed at all: same as info.
        assert_eq!(
            verdict(&[pending(2, 2, write(7)), r(3, 20, 21, Some(7))]),
            Verdict::Pass
        );
    }

    #[test]
    fn failed_ops_did_not_happen() {
        assert_eq!(
            verdict(&[
                w(1, 0, 1, 1),
                fail(2, 2, 3, cas(5, 6)),
                fail(2, 4, 5, write(9)),
                r(3, 10, 11, Some(1)),
            ]),
            Verdict::Pass
        );
        assert_fails(
            &[
                w(1, 0, 1, 1),
                fail(2, 2, 3, write(9)),
                r(3, 10, 11, Some(9)),
            ],
            "needs a value no write invoked before its completion wrote",
        );
    }

    #[test]
    fn stale_read_after_a_completed_write_fails() {
        assert_fails(
            &[w(1, 0, 1, 1), w(1, 2, 3, 2), r(2, 4, 5, Some(1))],
            "key \"k\"",
        );
    }

    #[test]
    fn read_of_a_value_never_written_fails() {
        assert_fails(&[w(1, 0, 10, 1), r(2, 5, 15, Some(42))], "Some(42)");
    }

    #[test]
    fn lost_acknowledged_write_fails() {
        // The write completed; a later read still sees the register absent.
        assert_fails(
            &[w(1, 0, 1, 5), r(2, 2, 3, None)],
            "value: None } [ok, 0.000002ms..0.000003ms] cannot be linearized",
        );
        assert_fails(&[w(1, 0, 1, 5), r(2, 2, 3, None)], "could only be [5]");
    }

    #[test]
    fn cas_succeeding_on_a_wrong_value_fails() {
        assert_fails(
            &[w(1, 0, 1, 1), ok_same(2, 2, 3, cas(7, 8))],
            "Cas { key: \"k\", from: 7, to: 8 }",
        );
        // An info cas on a wrong value is fine: it simply did not happen.
        assert_eq!(
            verdict(&[w(1, 0, 1, 1), info(2, 2, 3, cas(7, 8)), r(3, 4, 5, Some(1))]),
            Verdict::Pass
        );
    }

    #[test]
    fn keys_are_independent() {
        let (ri, rd) = read("other", None);
        // Key "k" holds 1; "other" was never written, so absent is right for it.
        assert_eq!(
            verdict(&[w(1, 0, 1, 1), ok(2, 2, 3, ri, rd), r(3, 4, 5, Some(1))]),
            Verdict::Pass
        );
    }

    /// A tiny deterministic PRNG, so the randomized histories are reproducible without a seed.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A concurrent history that is linearizable by construction: each op takes effect on a real
    /// register at a random instant between its invoke and completion. `info_percent` of the
    /// writes and cas ops end `info`; half of those took effect.
    fn simulated(
        seed: u64,
        processes: u64,
        ops_per_process: usize,
        info_percent: u64,
    ) -> Vec<Spec> {
        simulated_with(seed, processes, ops_per_process, info_percent, false)
    }

    /// `unique`: every write and cas writes a fresh value and a cas compares against the value
    /// last written (two times in three), like the register workload; else values are 0..5.
    fn simulated_with(
        seed: u64,
        processes: u64,
        ops_per_process: usize,
        info_percent: u64,
        unique: bool,
    ) -> Vec<Spec> {
        let mut rng = XorShift(seed);
        // (effect instant, process, start, end, kind, a, b, info?, applied if info?)
        type Event = (u64, u64, u64, u64, u64, u64, u64, bool, bool);
        let mut events: Vec<Event> = Vec::new();
        for p in 0..processes {
            let mut t = rng.below(10);
            for _ in 0..ops_per_process {
                let start = t + 1 + rng.below(20);
                let at = start + 1 + rng.below(30);
                let end = at + 1 + rng.below(30);
                let kind = rng.below(3);
                let (a, b) = (rng.below(5), rng.below(5));
                let info = kind > 0 && rng.below(100) < info_percent;
                let applied = rng.below(2) == 0;
                // Distinct instants: the process id breaks ties.
                events.push((at * 1000 + p, p, start, end, kind, a, b, info, applied));
                t = end;
            }
        }
        events.sort_unstable();
        let mut register: Option<u64> = None;
        let mut specs = Vec::new();
        let mut fresh_value = 100;
        for (_, p, start, end, kind, mut a, mut b, crashed, applied) in events {
            if unique {
                fresh_value += 1;
                if kind == 1 {
                    a = fresh_value;
                } else {
                    if b % 3 != 0 {
                        a = register.unwrap_or(0);
                    }
                    b = fresh_value;
                }
            }
            if crashed {
                let call = if kind == 1 { write(a) } else { cas(a, b) };
                if applied {
                    register = Effect::apply(
                        if kind == 1 {
                            Effect::Write(a)
                        } else {
                            Effect::Cas { from: a, to: b }
                        },
                        register,
                    )
                    .unwrap_or(register);
                }
                specs.push(info(p, start, end, call));
                continue;
            }
            match kind {
                0 => specs.push(r(p, start, end, register)),
                1 => {
                    register = Some(a);
                    specs.push(w(p, start, end, a));
                }
                _ => {
                    if register == Some(a) {
                        register = Some(b);
                        specs.push(ok_same(p, start, end, cas(a, b)));
                    } else {
                        specs.push(fail(p, start, end, cas(a, b)));
                    }
                }
            }
        }
        specs
    }

    #[test]
    fn simulated_concurrent_histories_pass() {
        for seed in 1..=20 {
            let specs = simulated(seed, 5, 200, 0);
            let report = check_linearizable(&history(&specs), BUDGET);
            assert_eq!(report.verdict, Verdict::Pass, "seed {seed}: {report}");
        }
    }

    #[test]
    fn simulated_histories_with_info_ops_pass() {
        for seed in 1..=10 {
            let specs = simulated(seed, 10, 300, 10);
            let report = check_linearizable(&history(&specs), BUDGET);
            assert_eq!(report.verdict, Verdict::Pass, "seed {seed}: {report}");
        }
    }

    #[test]
    fn a_corrupted_read_in_a_simulated_history_fails() {
        let mut specs = simulated(7, 5, 200, 0);
        // Make the last read return a value nobody wrote.
        let last_read = specs
            .iter()
            .rposition(|s| matches!(s.invoke, Call::Read { .. }))
            .expect("a read");
        let s = &specs[last_read];
        specs[last_read] = r(
            s.process,
            s.start,
            s.end.as_ref().map_or(0, |e| e.1),
            Some(99),
        );
        assert!(matches!(verdict(&specs), Verdict::Fail(_)));
    }

    #[test]
    fn a_large_concurrent_history_with_a_tiny_budget_is_unknown() {
        let specs = simulated(3, 8, 100, 0);
        let report = check_linearizable(&history(&specs), 50);
        match report.verdict {
            Verdict::Unknown(why) => {
                assert!(
                    why.contains("budget exhausted on key \"k\" after 50 steps"),
                    "{why}"
                );
            }
            other => panic!("expected Unknown, got {other:?}"),
        }
    }

    #[test]
    fn workload_like_histories_with_timeouts_pass_and_a_stale_read_fails() {
        // Unique values, 10 processes, a tenth of the writes timing out: like a faulty run.
        let specs = simulated_with(11, 10, 300, 10, true);
        let report = check_linearizable(&history(&specs), BUDGET);
        assert_eq!(report.verdict, Verdict::Pass, "{report}");

        // Make a late read return a value overwritten long before it was invoked.
        let mut specs = specs;
        let (at, read) = specs
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(s.invoke, Call::Read { .. }) && matches!(s.end, Some((Kind::Ok, ..)))
            })
            .nth(700)
            .map(|(i, s)| (i, s.clone()))
            .expect("enough reads");
        let mut old_writes: Vec<(u64, u64)> = specs
            .iter()
            .filter_map(|s| match (&s.invoke, &s.end) {
                (Call::Write { value, .. }, Some((Kind::Ok, end, _))) if end + 100 < read.start => {
                    Some((*end, *value))
                }
                _ => None,
            })
            .collect();
        old_writes.sort_unstable();
        let stale = old_writes[old_writes.len() - 3].1;
        let end = read.end.as_ref().map_or(0, |e| e.1);
        specs[at] = r(read.process, read.start, end, Some(stale));
        match check_linearizable(&history(&specs), BUDGET).verdict {
            Verdict::Fail(why) => assert!(why[0].contains(&format!("Some({stale})")), "{why:?}"),
            other => panic!("expected Fail, got {other:?}"),
        }
    }

    #[test]
    fn info_cas_chains_count_only_when_observable() {
        // Both timed-out cas ops must have applied, in order, for the read to see 3.
        assert_eq!(
            verdict(&[
                w(1, 0, 1, 1),
                info(2, 2, 3, cas(1, 2)),
                info(3, 4, 5, cas(2, 3)),
                r(4, 10, 11, Some(3)),
            ]),
            Verdict::Pass
        );
        // A read that completed before the cas was invoked cannot see its value.
        assert_fails(
            &[w(1, 0, 1, 1), r(4, 2, 3, Some(2)), info(2, 5, 6, cas(1, 2))],
            "needs a value",
        );
    }

    /// Every order of the ops allowed by real time, without memoization or shortcuts.
    fn brute_force(ops: &[RegOp<'_>], done: &mut Vec<bool>, state: Option<u64>) -> bool {
        if ops
            .iter()
            .zip(done.iter())
            .all(|(op, d)| *d || op.end.is_none())
        {
            return true;
        }
        let deadline = ops
            .iter()
            .zip(done.iter())
            .filter(|(op, d)| !**d && op.end.is_some())
            .filter_map(|(op, _)| op.end)
            .min()
            .unwrap_or(u64::MAX);
        for i in 0..ops.len() {
            if done[i] || ops[i].start > deadline {
                continue;
            }
            if let Some(after) = ops[i].effect.apply(state) {
                done[i] = true;
                let found = brute_force(ops, done, after);
                done[i] = false;
                if found {
                    return true;
                }
            }
        }
        false
    }

    #[test]
    fn the_search_agrees_with_brute_force_on_small_random_histories() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let (mut passed, mut failed) = (0, 0);
        for case in 0..4000 {
            let mut specs = Vec::new();
            for p in 0..3 {
                let mut t = rng.below(5);
                for _ in 0..1 + rng.below(3) {
                    let start = t + rng.below(4);
                    let end = start + rng.below(8);
                    t = end + 1;
                    let (a, b) = (rng.below(3), rng.below(3));
                    let call = match rng.below(3) {
                        0 => Call::Read {
                            key: "k".into(),
                            value: None,
                        },
                        1 => write(a),
                        _ => cas(a, b),
                    };
                    let spec = match (rng.below(6), &call) {
                        (0, _) => info(p, start, end, call),
                        (1, _) => fail(p, start, end, call),
                        (_, Call::Read { .. }) => r(p, start, end, (a > 0).then_some(b)),
                        _ => ok_same(p, start, end, call),
                    };
                    specs.push(spec);
                }
            }
            let h = history(&specs);
            let mut ops: Vec<RegOp<'_>> = h
                .pairs()
                .into_iter()
                .filter_map(|p| RegOp::from_pair(p).map(|(_, op)| op))
                .collect();
            let expected = brute_force(&ops, &mut vec![false; ops.len()], None);
            // The shortcuts must not change the answer either.
            drop_invisible_info(&mut ops);
            assert_eq!(
                brute_force(&ops, &mut vec![false; ops.len()], None),
                expected,
                "case {case}: dropping invisible info ops changed the answer: {specs:?}"
            );
            let got = check_linearizable(&h, BUDGET).verdict;
            match (&got, expected) {
                (Verdict::Pass, true) => passed += 1,
                (Verdict::Fail(_), false) => failed += 1,
                _ => panic!("case {case}: got {got:?}, brute force says {expected}: {specs:?}"),
            }
        }
        // Both outcomes were exercised.
        assert!(
            passed > 500 && failed > 500,
            "{passed} passed, {failed} failed"
        );
    }
}
