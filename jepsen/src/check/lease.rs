//! The lease contract of `docs/semantics.md`, checked from client observations alone.
//!
//! **Incarnations.** A lease is known from its grant: a `Grant ok` (the server chose the id) or a
//! `GrantId ok` (the client asked for that id). Zaris never grants an id twice, but the checker
//! does not take that on trust: it keys everything by *incarnation* (the op that granted it), so
//! a second grant of an id is one rule's violation ([`granted_once`]) and not a muddle in the
//! others. Every other op on an id belongs to the incarnation its *thread* holds (Jepsen's
//! process-to-thread map: process mod `concurrency`; a worker keeps its thread when its process
//! is replaced after an `info`): the latest incarnation of the id that thread granted before the
//! op was invoked; if it granted none, the latest one granted before the op was invoked (or the
//! first). So an old owner's late renewal is judged against the lease it held, and the new
//! owner's activity against the new lease.
//!
//! What the history shows about an incarnation:
//! - **renewals**: its grant and every `Renew ok` with `found = true`. Each guarantees the lease
//!   until its *invoke* time (the client's `t_send`) plus the TTL, from when it applied.
//! - **gone**: a `Renew ok` or `TimeToLive ok` with `found = false`; a `GetLeased ok` missing a
//!   key that a `PutLeased ok` of the lease, or its `Grant ok` with keys, wrote before the read
//!   was invoked; a `Revoke ok`.
//! - **alive**: a `Renew ok` or `TimeToLive ok` with `found = true`; a `GetLeased ok` showing any
//!   of the lease's keys; a `PutLeased ok` or `Acquire ok` with the lease (both are refused for a
//!   missing lease).
//!
//! Reading key presence as lease liveness assumes the workload never deletes a leased key and
//! never puts one key under two leases. Keys put (with any outcome) under more than one
//! incarnation are ignored: their absence or presence says nothing about either.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckReport, Verdict, describe, fmt_ns, ms_to_ns};
use crate::history::{Call, History, Kind, Pair};

/// One fault of the run, as the nemesis log tells it (see [`crate::nemesis::disruptions`]): what
/// bounded-late must allow for. Times are on the history's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disruption {
    pub start_ns: u64,
    /// When it was healed; `u64::MAX` if never.
    pub heal_ns: u64,
    /// A majority of the nodes stayed up and connected: they can elect a leader and commit.
    /// Without one, nothing can be expired until the heal.
    pub majority: bool,
    /// A node was restarted at the heal: it lost its deadlines and counts a full TTL from its
    /// restart for every lease it loads.
    pub restarts: bool,
    /// Some node stopped hearing the leader (cut off, paused or killed): it applies what
    /// committed meanwhile only when it catches up after the heal, and counts from then.
    pub cuts_off: bool,
}

/// Timing parameters of the cluster under test, and the faults of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseParams<'a> {
    /// The maximum of the election-timeout range: each leader change may delay expiry this much.
    pub election_timeout_ms: u64,
    /// Never-early reports an observation that saw the lease gone and *completed* before
    /// `t_send + ttl - early_margin`. It needs no slack for scheduling or apply lag: what the
    /// observation saw had happened by its completion, and nothing applies before `t_send`. Only
    /// lessor clock-rate drift belongs here: a lessor clock at rate `r > 1` expires after
    /// `ttl / r` of real time, i.e. `ttl * (1 - 1/r)` early; at `r <= 1` nothing is early (0).
    pub early_margin_ms: u64,
    /// Bounded-late allows this much on top of each bound it computes: the revoke lag (expiry
    /// tick, commit, apply), the harness's scheduling noise, and for a slow lessor clock
    /// (`r < 1`) its drift over a TTL and a promotion's extension, `(ttl + election_timeout) *
    /// (1/r - 1)`.
    pub late_margin_ms: u64,
    /// The faults of the run (every one healed by the end of a normal run). Bounded-late is
    /// judged during faults too, with the bound each allows for.
    pub faults: &'a [Disruption],
    /// Jepsen's thread count: op `process` ran on thread `process % concurrency` (0: every
    /// process is its own thread).
    pub concurrency: u64,
}

/// All five lease rules as one report named `lease` (see [`super::combine`]).
pub fn check(history: &History, params: &LeaseParams<'_>) -> CheckReport {
    super::combine("lease", check_leases(history, params))
}

/// All five lease rules, one report each.
pub fn check_leases(history: &History, params: &LeaseParams<'_>) -> Vec<CheckReport> {
    let index = Index::new(history, params.concurrency);
    vec![
        never_early_in(&index, params),
        granted_once_in(&index),
        no_resurrection_in(&index),
        together_in(&index),
        bounded_late_in(&index, params),
    ]
}

/// No observation that saw a lease gone *completed* before `t_send + ttl - early_margin`, where
/// `t_send` is the invoke of a renewal (the grant or a `Renew ok` that found the lease)
/// acknowledged before the observation was invoked, unless a revoke that may have applied (`ok`,
/// `info`, never completed) was invoked before the observation completed. A renewal that found
/// the lease and was merely concurrent with the observation bounds it as well (see
/// `never_early_in`).
pub fn never_early(history: &History, params: &LeaseParams<'_>) -> CheckReport {
    never_early_in(&Index::new(history, params.concurrency), params)
}

/// Once an operation saw a lease gone, no operation invoked afterwards sees it alive. With
/// incarnations, this is also "no resurrection for its old owner": a renewal by the thread that
/// held an ended lease must not find it, whoever was granted its id since.
pub fn no_resurrection(history: &History, concurrency: u64) -> CheckReport {
    no_resurrection_in(&Index::new(history, concurrency))
}

/// A `GetLeased` shows all of a lease's put keys or none: keys and lease end in one apply step.
pub fn together(history: &History, concurrency: u64) -> CheckReport {
    together_in(&Index::new(history, concurrency))
}

/// Nothing sees a lease alive after the bound its last renewal and the faults since allow (see
/// [`late_bound`]).
pub fn bounded_late(history: &History, params: &LeaseParams<'_>) -> CheckReport {
    bounded_late_in(&Index::new(history, params.concurrency), params)
}

/// No two `ok` grants (`Grant`, `GrantId`) name the same lease id: ids are never reused.
pub fn granted_once(history: &History, concurrency: u64) -> CheckReport {
    granted_once_in(&Index::new(history, concurrency))
}

/// What the history says about one incarnation of a lease.
#[derive(Debug)]
struct Lease<'a> {
    id: u64,
    ttl_ns: u64,
    grant: Pair<'a>,
    /// The thread that granted it.
    thread: u64,
    /// `(invoke, completion)` of the grant and every `Renew ok` with `found = true`.
    renewals: Vec<(u64, u64, Pair<'a>)>,
    /// The grant and every renew that may have renewed it (`ok` with `found = true`, `info`,
    /// never completed): bounded-late counts from the latest time one of them may have applied.
    renew_attempts: Vec<Pair<'a>>,
    /// Revokes that may have applied (`ok`, `info`, never completed).
    revokes: Vec<Pair<'a>>,
    /// `PutLeased ok`: `(completion, keys)`.
    puts: Vec<(u64, Vec<&'a str>)>,
    /// Keys put under this incarnation only, with any outcome.
    keys: BTreeSet<&'a str>,
    gets: Vec<Pair<'a>>,
    gone: Vec<Pair<'a>>,
    alive: Vec<Pair<'a>>,
}

impl<'a> Lease<'a> {
    /// The renewal with the latest invoke among those invoked before `t`, with that invoke.
    fn latest_renewal_invoked_before(&self, t: u64) -> Option<(u64, u64, Pair<'a>)> {
        self.renewals
            .iter()
            .filter(|(invoked, _, _)| *invoked < t)
            .max_by_key(|(invoked, _, _)| *invoked)
            .copied()
    }

    /// A revoke invoked before `t` that may have applied.
    fn revoked_before(&self, t: u64) -> Option<&Pair<'a>> {
        self.revokes.iter().find(|r| r.invoke_ns() < t)
    }

    /// For a `GetLeased ok`: (keys put by an ok put completed before the read was invoked and
    /// read by it but missing, lease keys it shows present).
    fn read_result(&self, get: &Pair<'a>) -> (Vec<&'a str>, Vec<&'a str>) {
        let Call::GetLeased {
            keys,
            present: Some(present),
            ..
        } = get.call()
        else {
            return (Vec::new(), Vec::new());
        };
        let read: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
        let present: BTreeSet<&str> = present.iter().map(String::as_str).collect();
        let put_before: BTreeSet<&str> = self
            .puts
            .iter()
            .filter(|(completed, _)| *completed < get.invoke_ns())
            .flat_map(|(_, keys)| keys.iter().copied())
            .filter(|k| self.keys.contains(k) && read.contains(k))
            .collect();
        let missing = put_before.difference(&present).copied().collect();
        let shown = present
            .iter()
            .copied()
            .filter(|k| self.keys.contains(k) && read.contains(k))
            .collect();
        (missing, shown)
    }

    /// `lease 5` for the first incarnation of an id, `lease 5 (granted by #12)` otherwise.
    fn name(&self, index: &Index<'_>) -> String {
        if index.by_id.get(&self.id).is_some_and(|all| all.len() > 1) {
            format!(
                "lease {} (granted by #{})",
                self.id, self.grant.invoke.index
            )
        } else {
            format!("lease {}", self.id)
        }
    }
}

/// The lease incarnations of a history.
#[derive(Debug)]
struct Index<'a> {
    leases: Vec<Lease<'a>>,
    /// Per id, its incarnations (positions in `leases`) in grant-invoke order.
    by_id: BTreeMap<u64, Vec<usize>>,
}

impl<'a> Index<'a> {
    fn new(history: &'a History, concurrency: u64) -> Index<'a> {
        let thread = |process: u64| {
            if concurrency == 0 {
                process
            } else {
                process % concurrency
            }
        };
        let pairs = history.pairs();
        let mut leases: Vec<Lease<'a>> = Vec::new();
        for pair in &pairs {
            let (id, ttl_ms, keys) = match (pair.outcome(), pair.call()) {
                (
                    Kind::Ok,
                    Call::Grant {
                        lease: Some(id),
                        ttl_ms,
                        keys,
                    },
                ) => (*id, *ttl_ms, keys.as_slice()),
                (Kind::Ok, Call::GrantId { lease: id, ttl_ms }) => (*id, *ttl_ms, &[][..]),
                _ => continue,
            };
            let completed = pair.completion_ns().unwrap_or(u64::MAX);
            // A grant with keys is also their put: they exist from the grant on.
            let puts = if keys.is_empty() {
                Vec::new()
            } else {
                vec![(completed, keys.iter().map(String::as_str).collect())]
            };
            leases.push(Lease {
                id,
                ttl_ns: ms_to_ns(ttl_ms),
                grant: *pair,
                thread: thread(pair.invoke.process),
                renewals: vec![(pair.invoke_ns(), completed, *pair)],
                renew_attempts: vec![*pair],
                revokes: Vec::new(),
                puts,
                keys: BTreeSet::new(),
                gets: Vec::new(),
                gone: Vec::new(),
                alive: Vec::new(),
            });
        }
        leases.sort_by_key(|l| (l.grant.invoke_ns(), l.grant.invoke.index));
        let mut by_id: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (at, lease) in leases.iter().enumerate() {
            by_id.entry(lease.id).or_default().push(at);
        }

        // The incarnation an op on `id` belongs to (see the module doc).
        let owner = |id: u64, pair: &Pair<'_>| -> Option<usize> {
            let all = by_id.get(&id)?;
            if let [only] = all.as_slice() {
                return Some(*only);
            }
            let before: Vec<usize> = all
                .iter()
                .copied()
                .filter(|at| leases[*at].grant.invoke_ns() < pair.invoke_ns())
                .collect();
            let mine = thread(pair.invoke.process);
            before
                .iter()
                .rev()
                .find(|at| leases[**at].thread == mine)
                .or(before.last())
                .or(all.first())
                .copied()
        };

        let mut attributed: Vec<(usize, Pair<'a>)> = Vec::new();
        for pair in &pairs {
            let lease_id = match pair.call() {
                Call::Renew { lease, .. }
                | Call::TimeToLive { lease, .. }
                | Call::Revoke { lease }
                | Call::PutLeased { lease, .. }
                | Call::GetLeased { lease, .. }
                | Call::Acquire { lease, .. } => *lease,
                _ => continue,
            };
            if let Some(at) = owner(lease_id, pair) {
                attributed.push((at, *pair));
            }
        }

        // Which incarnations each key was put under, with any outcome (a grant's own keys
        // under the lease it granted).
        let mut owners: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
        for (at, lease) in leases.iter().enumerate() {
            if let Call::Grant { keys, .. } = lease.grant.call() {
                for key in keys {
                    owners.entry(key.as_str()).or_default().insert(at);
                }
            }
        }
        for (at, pair) in &attributed {
            if let Call::PutLeased { keys, .. } = pair.call() {
                for key in keys {
                    owners.entry(key.as_str()).or_default().insert(*at);
                }
            }
        }
        for (key, ats) in &owners {
            if let (1, Some(at)) = (ats.len(), ats.first()) {
                leases[*at].keys.insert(*key);
            }
        }

        for (at, pair) in attributed {
            let lease = &mut leases[at];
            let outcome = pair.outcome();
            let ok = outcome == Kind::Ok;
            match pair.call() {
                Call::Renew { found, .. } => match (outcome, found) {
                    (Kind::Ok, Some(true)) => {
                        let completed = pair.completion_ns().unwrap_or(u64::MAX);
                        lease.renewals.push((pair.invoke_ns(), completed, pair));
                        lease.renew_attempts.push(pair);
                        lease.alive.push(pair);
                    }
                    (Kind::Ok, Some(false)) => lease.gone.push(pair),
                    (Kind::Ok | Kind::Fail, _) => {}
                    (Kind::Info | Kind::Invoke, _) => lease.renew_attempts.push(pair),
                },
                // Asking about a lease is an observation, not a renewal.
                Call::TimeToLive { found, .. } => match (ok, found) {
                    (true, Some(true)) => lease.alive.push(pair),
                    (true, Some(false)) => lease.gone.push(pair),
                    _ => {}
                },
                Call::Revoke { .. } => {
                    if outcome != Kind::Fail {
                        lease.revokes.push(pair);
                    }
                    if ok {
                        lease.gone.push(pair);
                    }
                }
                Call::PutLeased { keys, .. } if ok => {
                    let completed = pair.completion_ns().unwrap_or(u64::MAX);
                    lease
                        .puts
                        .push((completed, keys.iter().map(String::as_str).collect()));
                    lease.alive.push(pair);
                }
                Call::GetLeased { .. } if ok => lease.gets.push(pair),
                Call::Acquire { .. } if ok => lease.alive.push(pair),
                _ => {}
            }
        }

        // Reads become gone / alive observations once every put is known.
        for lease in &mut leases {
            for get in lease.gets.clone() {
                let (missing, shown) = lease.read_result(&get);
                if !missing.is_empty() {
                    lease.gone.push(get);
                }
                if !shown.is_empty() {
                    lease.alive.push(get);
                }
            }
        }
        Index { leases, by_id }
    }
}

fn report(name: &'static str, violations: Vec<String>) -> CheckReport {
    CheckReport {
        name,
        verdict: Verdict::from_violations(violations),
    }
}

fn never_early_in(index: &Index<'_>, params: &LeaseParams<'_>) -> CheckReport {
    let margin = ms_to_ns(params.early_margin_ms);
    let mut violations = Vec::new();
    for lease in &index.leases {
        for seen in &lease.gone {
            if matches!(seen.call(), Call::Revoke { .. }) {
                continue; // A revoke ends the lease by design.
            }
            let Some(seen_at) = seen.completion_ns() else {
                continue;
            };
            // A renewal acknowledged before the observation was invoked applied before it. One
            // merely invoked before the observation completed applied either before it (then the
            // same bound holds) or after it (a renew that found a gone lease: a resurrection), so
            // it bounds the observation too. Renewals invoked later are no-resurrection's.
            let Some((from, acked, renewal)) = lease.latest_renewal_invoked_before(seen_at) else {
                continue;
            };
            // The observation's completion, not its invoke: it may have read just before
            // completing. Its invoke would excuse a read that took long to come back.
            let until = from.saturating_add(lease.ttl_ns);
            if seen_at.saturating_add(margin) >= until || lease.revoked_before(seen_at).is_some() {
                continue;
            }
            let order = if acked < seen.invoke_ns() {
                "acknowledged before it"
            } else {
                "concurrent with it: either the lease ended early or it came back"
            };
            violations.push(format!(
                "{}: {} saw it gone by {}, before {} = renewal #{} invoked at {} + ttl {} \
                 (less the early margin {}; {order})",
                lease.name(index),
                describe(seen),
                fmt_ns(seen_at),
                fmt_ns(until),
                renewal.invoke.index,
                fmt_ns(from),
                fmt_ns(lease.ttl_ns),
                fmt_ns(margin),
            ));
        }
    }
    report("lease-never-early", violations)
}

fn no_resurrection_in(index: &Index<'_>) -> CheckReport {
    let mut violations = Vec::new();
    for lease in &index.leases {
        // The earliest-completed sighting of the lease gone rules out the most.
        let Some((gone_at, gone)) = lease
            .gone
            .iter()
            .filter_map(|p| p.completion_ns().map(|t| (t, p)))
            .min_by_key(|(t, _)| *t)
        else {
            continue;
        };
        for alive in &lease.alive {
            if alive.invoke_ns() > gone_at {
                violations.push(format!(
                    "{}: {} saw it alive, invoked after {} had seen it gone at {}",
                    lease.name(index),
                    describe(alive),
                    describe(gone),
                    fmt_ns(gone_at),
                ));
            }
        }
    }
    report("lease-no-resurrection", violations)
}

fn together_in(index: &Index<'_>) -> CheckReport {
    let mut violations = Vec::new();
    for lease in &index.leases {
        for get in &lease.gets {
            let (missing, shown) = lease.read_result(get);
            if !missing.is_empty() && !shown.is_empty() {
                violations.push(format!(
                    "{}: {} shows {:?} but not {:?}, all put before it was invoked",
                    lease.name(index),
                    describe(get),
                    shown,
                    missing,
                ));
            }
        }
    }
    report("lease-together", violations)
}

fn granted_once_in(index: &Index<'_>) -> CheckReport {
    let mut violations = Vec::new();
    for (id, all) in &index.by_id {
        if all.len() > 1 {
            let grants: Vec<String> = all
                .iter()
                .map(|at| describe(&index.leases[*at].grant))
                .collect();
            violations.push(format!(
                "lease id {id} was granted {} times: {}",
                all.len(),
                grants.join(" and ")
            ));
        }
    }
    report("lease-granted-once", violations)
}

/// How long after a leader is lost a new one may take to be elected and promoted: a follower
/// notices within an election timeout, a split vote costs one more, and promotion waits for the
/// new term's first entry to apply.
pub const ELECTION_ALLOWANCE_TIMEOUTS: u64 = 2;

/// The latest time a renewal attempt may have applied: an `ok` one by its completion; an `info`
/// one, stuck in a deposed leader's log, when the next leader commits it: within an election
/// allowance of its completion, or of the heal of a fault that left no majority (nothing
/// commits before). Never completed: any time.
fn applied_by(pair: &Pair<'_>, params: &LeaseParams<'_>) -> u64 {
    let Some(completed) = pair.completion_ns() else {
        return u64::MAX;
    };
    if pair.is_ok() {
        return completed;
    }
    let mut t = completed;
    for d in params.faults {
        if !d.majority && d.start_ns <= t && t <= d.heal_ns {
            t = d.heal_ns;
        }
    }
    t.saturating_add(ms_to_ns(
        params.election_timeout_ms * ELECTION_ALLOWANCE_TIMEOUTS,
    ))
}

/// Bounded-late's bound for a lease whose last renewal applied by `anchor` (on the history's
/// clock), with the faults that moved it, from docs/semantics.md "Timing bounds":
///
/// - A stable leader applied the renewal by `anchor` and expires the lease by
///   `anchor + ttl + revoke_lag`; the bound starts at `anchor + ttl + election_timeout +
///   late_margin`.
/// - Every fault start and every heal up to the bound may change the leader. A leader change at
///   `t` gives a leader promoted by `p = t + E` (the election allowance) that revokes by
///   `max(d, p) + election_timeout + revoke_lag`, where `d` is its own deadline: `a + ttl`, `a`
///   being when *it* applied the renewal, which is
///   - `anchor`, or up to `p` if the change came within an election timeout of the anchor (it
///     may learn of the commit only when promoted);
///   - up to `heal + election_timeout` (catching up) for a node *restarted* at a heal no
///     later than `t` and no earlier than `anchor - election_timeout` (a restarted node gives
///     every lease a full TTL from its restart: the restart case), or *cut off* by a fault that
///     began by `anchor + election_timeout` and healed by `t` (it applied the renewal when it
///     caught up). The heal itself counts: a killed leader that nobody replaced while it was
///     down resumes its term as soon as it restarts, with the deadlines it just loaded.
/// - A fault that leaves no majority, begun before the bound, stops expiry until its heal: the
///   bound is at least `heal + E + election_timeout + late_margin`.
///
/// Returns `u64::MAX` (no bound) if a fault that matters was never healed, and the leader
/// changes that moved the bound.
pub fn late_bound(anchor: u64, ttl_ns: u64, params: &LeaseParams<'_>) -> (u64, Vec<String>) {
    let et = ms_to_ns(params.election_timeout_ms);
    let election = et.saturating_mul(ELECTION_ALLOWANCE_TIMEOUTS);
    let margin = ms_to_ns(params.late_margin_ms);
    let after_promotion = |promoted: u64| promoted.saturating_add(et).saturating_add(margin);
    let mut bound = after_promotion(anchor.saturating_add(ttl_ns));
    let mut moved = Vec::new();
    // Leader-change points: every fault's start and heal, in time order.
    let mut points: Vec<(u64, bool, &Disruption)> = params
        .faults
        .iter()
        .flat_map(|d| [(d.start_ns, true, d), (d.heal_ns, false, d)])
        .collect();
    points.sort_by_key(|(t, start, _)| (*t, !*start));
    for (t, start, fault) in points {
        if t > bound {
            break;
        }
        if t == u64::MAX {
            return (u64::MAX, moved);
        }
        if start && !fault.majority {
            let after_heal = after_promotion(fault.heal_ns.saturating_add(election));
            if after_heal > bound {
                bound = after_heal;
                moved.push(format!(
                    "no majority from {} to {}",
                    fmt_ns(fault.start_ns),
                    if fault.heal_ns == u64::MAX {
                        "the end".to_string()
                    } else {
                        fmt_ns(fault.heal_ns)
                    }
                ));
            }
            if fault.heal_ns == u64::MAX {
                return (u64::MAX, moved);
            }
        }
        let promoted = t.saturating_add(election);
        let mut applied = anchor;
        if t <= anchor.saturating_add(et) {
            applied = applied.max(promoted);
        }
        for earlier in params.faults {
            let caught_up = earlier.heal_ns.saturating_add(et);
            let late = earlier.heal_ns <= t
                && caught_up >= anchor
                && (earlier.restarts
                    || (earlier.cuts_off && earlier.start_ns <= anchor.saturating_add(et)));
            if late {
                applied = applied.max(caught_up);
            }
        }
        let candidate = after_promotion(applied.saturating_add(ttl_ns).max(promoted));
        if candidate > bound {
            bound = candidate;
            moved.push(format!(
                "{} at {}",
                if start { "fault" } else { "heal" },
                fmt_ns(t)
            ));
        }
    }
    (bound, moved)
}

/// Every sighting of a lease alive with its bounded-late bound: `(sighting's invoke, bound)`,
/// `bound = u64::MAX` where no bound applies. A sighting passes while `invoke <= bound`; how
/// far below the bounds real runs stay shows how much room the rule leaves.
pub fn late_sightings(history: &History, params: &LeaseParams<'_>) -> Vec<(u64, u64)> {
    let index = Index::new(history, params.concurrency);
    let mut found = Vec::new();
    for lease in &index.leases {
        for alive in &lease.alive {
            if let Some((bound, _, _)) = sighting_bound(lease, alive, params) {
                found.push((alive.invoke_ns(), bound));
            }
        }
    }
    found
}

/// The bound for one sighting: from the renewals invoked before it (a later one says nothing
/// about whether the lease should have been gone by then). `(bound, anchor, moved by)`.
fn sighting_bound<'a>(
    lease: &Lease<'a>,
    alive: &Pair<'a>,
    params: &LeaseParams<'_>,
) -> Option<(u64, (u64, Pair<'a>), Vec<String>)> {
    let seen = alive.invoke_ns();
    let (anchor, by) = lease
        .renew_attempts
        .iter()
        .filter(|r| r.invoke_ns() < seen)
        .map(|r| (applied_by(r, params), *r))
        .max_by_key(|(t, _)| *t)?;
    let (bound, moved) = late_bound(anchor, lease.ttl_ns, params);
    Some((bound, (anchor, by), moved))
}

fn bounded_late_in(index: &Index<'_>, params: &LeaseParams<'_>) -> CheckReport {
    let mut violations = Vec::new();
    for lease in &index.leases {
        for alive in &lease.alive {
            let Some((bound, (anchor, by), moved)) = sighting_bound(lease, alive, params) else {
                continue;
            };
            if alive.invoke_ns() > bound {
                let faults = if moved.is_empty() {
                    String::new()
                } else {
                    format!(", moved by {}", moved.join(", "))
                };
                violations.push(format!(
                    "{}: {} saw it alive after {} = the bound from its last renewal #{} \
                     (applied by {}; ttl {}, election timeout, late margin{faults})",
                    lease.name(index),
                    describe(alive),
                    fmt_ns(bound),
                    by.invoke.index,
                    fmt_ns(anchor),
                    fmt_ns(lease.ttl_ns),
                ));
            }
        }
    }
    report("lease-bounded-late", violations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::*;

    const MS: u64 = 1_000_000;
    const TTL_MS: u64 = 2000;

    /// No clock drift: never-early is exact; bounded-late allows 200ms of revoke lag. No faults;
    /// every process is its own thread.
    const PARAMS: LeaseParams<'static> = LeaseParams {
        election_timeout_ms: 300,
        early_margin_ms: 0,
        late_margin_ms: 200,
        faults: &[],
        concurrency: 0,
    };

    /// Lease 5 granted by process 1 over [0, 1ms], with keys a and b put over [2ms, 3ms].
    fn base() -> Vec<Spec> {
        vec![
            ok(
                1,
                0,
                MS,
                Call::Grant {
                    lease: None,
                    ttl_ms: TTL_MS,
                    keys: Vec::new(),
                },
                Call::Grant {
                    lease: Some(5),
                    ttl_ms: TTL_MS,
                    keys: Vec::new(),
                },
            ),
            ok_same(1, 2 * MS, 3 * MS, put(&["a", "b"])),
        ]
    }

    fn put(keys: &[&str]) -> Call {
        Call::PutLeased {
            lease: 5,
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    fn get(p: u64, start: u64, end: u64, present: &[&str]) -> Spec {
        let keys: Vec<String> = vec!["a".into(), "b".into()];
        ok(
            p,
            start,
            end,
            Call::GetLeased {
                lease: 5,
                keys: keys.clone(),
                present: None,
            },
            Call::GetLeased {
                lease: 5,
                keys,
                present: Some(present.iter().map(|k| k.to_string()).collect()),
            },
        )
    }

    fn renew(p: u64, start: u64, end: u64, found: bool) -> Spec {
        ok(
            p,
            start,
            end,
            Call::Renew {
                lease: 5,
                found: None,
            },
            Call::Renew {
                lease: 5,
                found: Some(found),
            },
        )
    }

    fn run(extra: Vec<Spec>) -> BTreeMap<&'static str, Verdict> {
        let mut specs = base();
        specs.extend(extra);
        check_leases(&history(&specs), &PARAMS)
            .into_iter()
            .map(|r| (r.name, r.verdict))
            .collect()
    }

    fn assert_only_fails(verdicts: &BTreeMap<&'static str, Verdict>, rule: &str, needle: &str) {
        for (name, verdict) in verdicts {
            if *name == rule {
                match verdict {
                    Verdict::Fail(why) => {
                        let all = why.join("\n");
                        assert!(
                            all.contains(needle),
                            "{rule}: expected {needle:?} in:\n{all}"
                        );
                    }
                    other => panic!("{rule}: expected Fail, got {other:?}"),
                }
            } else {
                assert_eq!(*verdict, Verdict::Pass, "{name} should pass");
            }
        }
    }

    fn assert_all_pass(verdicts: &BTreeMap<&'static str, Verdict>) {
        for (name, verdict) in verdicts {
            assert_eq!(*verdict, Verdict::Pass, "{name}");
        }
    }

    #[test]
    fn a_lease_that_lives_renews_and_expires_on_time_passes() {
        assert_all_pass(&run(vec![
            get(2, 4 * MS, 5 * MS, &["a", "b"]),
            renew(1, 1000 * MS, 1001 * MS, true),
            // Gone only after the renewal's t_send + ttl.
            get(2, 3001 * MS, 3002 * MS, &[]),
            renew(1, 3100 * MS, 3101 * MS, false),
        ]));
    }

    #[test]
    fn keys_missing_before_t_send_plus_ttl_is_early() {
        assert_only_fails(
            &run(vec![get(2, 1000 * MS, 1500 * MS, &[])]),
            "lease-never-early",
            "lease 5",
        );
        // 150ms before the deadline (2000ms) is early too, unless a fast lessor clock allows
        // that much drift (an early margin of 200ms).
        assert_only_fails(
            &run(vec![get(2, 1000 * MS, 1850 * MS, &[])]),
            "lease-never-early",
            "lease 5",
        );
        let mut specs = base();
        specs.push(get(2, 1000 * MS, 1850 * MS, &[]));
        let drift = LeaseParams {
            early_margin_ms: 200,
            ..PARAMS
        };
        assert!(never_early(&history(&specs), &drift).verdict.is_pass());
    }

    /// Issue 9, item 8: never-early gets the early margin and bounded-late the late one, not the
    /// larger of the two (which, for a slow lessor clock, exceeded the TTL and made never-early
    /// vacuous).
    #[test]
    fn the_early_and_late_margins_each_bound_their_own_rule() {
        let params = LeaseParams {
            early_margin_ms: 100,
            late_margin_ms: 2500,
            ..PARAMS
        };
        let verdicts = |extra: Vec<Spec>| -> BTreeMap<&'static str, Verdict> {
            let mut specs = base();
            specs.extend(extra);
            check_leases(&history(&specs), &params)
                .into_iter()
                .map(|r| (r.name, r.verdict))
                .collect()
        };
        // Never-early: 2000 - 100 = 1900ms.
        assert_all_pass(&verdicts(vec![get(2, 1000 * MS, 1900 * MS, &[])]));
        assert_only_fails(
            &verdicts(vec![get(2, 1000 * MS, 1900 * MS - 1, &[])]),
            "lease-never-early",
            "before 2000.000000ms",
        );
        // Bounded-late: the grant applied by 1ms; 1 + 2000 + 300 + 2500 = 4801ms.
        assert_all_pass(&verdicts(vec![get(2, 4801 * MS, 4802 * MS, &["a", "b"])]));
        assert_only_fails(
            &verdicts(vec![get(2, 4802 * MS, 4803 * MS, &["a", "b"])]),
            "lease-bounded-late",
            "after 4801.000000ms",
        );
    }

    /// Issue 9, item 8: never-early compares the *completion* of the observation with the
    /// invoke of the renewal: the observation saw the lease gone after it ended, so no
    /// scheduling slack is needed. Without clock drift the bound is exact.
    #[test]
    fn never_early_compares_the_observations_completion_with_t_send_plus_ttl() {
        // Invoked long before the deadline (2000ms), completed at it: it may have read late.
        assert_all_pass(&run(vec![get(2, 1000 * MS, 2000 * MS, &[])]));
        // Completed a nanosecond before it: the lease was gone before t_send + ttl.
        assert_only_fails(
            &run(vec![get(2, 1999 * MS, 2000 * MS - 1, &[])]),
            "lease-never-early",
            "before 2000.000000ms",
        );
        // The same for a renewal sent at 1000ms and acknowledged only at 1900ms.
        assert_only_fails(
            &run(vec![
                renew(1, 1000 * MS, 1900 * MS, true),
                renew(1, 2990 * MS, 2999 * MS, false),
            ]),
            "lease-never-early",
            "before 3000.000000ms",
        );
        assert_all_pass(&run(vec![
            renew(1, 1000 * MS, 1900 * MS, true),
            renew(1, 2990 * MS, 3000 * MS, false),
        ]));
    }

    #[test]
    fn the_combined_report_is_named_lease_and_names_the_rule() {
        let mut specs = base();
        specs.push(get(2, 1000 * MS, 1500 * MS, &[]));
        let report = check(&history(&specs), &PARAMS);
        assert_eq!(report.name, "lease");
        match report.verdict {
            Verdict::Fail(why) => assert!(why[0].starts_with("[lease-never-early] "), "{why:?}"),
            other => panic!("expected Fail, got {other:?}"),
        }
        assert!(check(&history(&base()), &PARAMS).verdict.is_pass());
    }

    #[test]
    fn renew_not_found_before_the_renewed_deadline_is_early() {
        // Renewed at 1000ms (acked at 1001ms): the lease must last until 3000ms.
        assert_only_fails(
            &run(vec![
                renew(1, 1000 * MS, 1001 * MS, true),
                renew(1, 2500 * MS, 2501 * MS, false),
            ]),
            "lease-never-early",
            "before 3000.000000ms",
        );
    }

    fn time_to_live(p: u64, start: u64, end: u64, found: bool) -> Spec {
        ok(
            p,
            start,
            end,
            Call::TimeToLive {
                lease: 5,
                found: None,
            },
            Call::TimeToLive {
                lease: 5,
                found: Some(found),
            },
        )
    }

    #[test]
    fn time_to_live_not_found_before_the_deadline_is_early_and_does_not_renew() {
        // A TimeToLive query at 1000 ms does not extend the lease: not found at 2500 ms is fine
        // (granted at 0, TTL 2000 ms), but not found at 1500 ms is early.
        assert_all_pass(&run(vec![
            time_to_live(1, 1000 * MS, 1001 * MS, true),
            time_to_live(1, 2500 * MS, 2501 * MS, false),
        ]));
        assert_only_fails(
            &run(vec![time_to_live(1, 1500 * MS, 1501 * MS, false)]),
            "lease-never-early",
            "before 2000",
        );
    }

    #[test]
    fn a_renewal_concurrent_with_a_gone_observation_bounds_it_too() {
        // The renewal (sent at 1000ms) found the lease, so it applied while the lease lived:
        // before the not-found renew (lease ended before 3000ms: early) or after it (it came back).
        assert_only_fails(
            &run(vec![
                renew(1, 1000 * MS, 2200 * MS, true),
                renew(3, 2100 * MS, 2150 * MS, false),
            ]),
            "lease-never-early",
            "concurrent with it",
        );
        // Without it, only the grant (sent at 0) bounds the observation: 2150ms is late enough.
        assert_all_pass(&run(vec![renew(3, 2100 * MS, 2150 * MS, false)]));
    }

    #[test]
    fn a_revoke_excuses_an_early_disappearance() {
        for revoke in [
            ok_same(3, 900 * MS, 950 * MS, Call::Revoke { lease: 5 }),
            info(3, 900 * MS, 950 * MS, Call::Revoke { lease: 5 }),
        ] {
            let verdicts = run(vec![revoke, get(2, 1000 * MS, 1500 * MS, &[])]);
            assert_all_pass(&verdicts);
        }
        // A failed revoke did not happen: still early.
        assert_only_fails(
            &run(vec![
                fail(3, 900 * MS, 950 * MS, Call::Revoke { lease: 5 }),
                get(2, 1000 * MS, 1500 * MS, &[]),
            ]),
            "lease-never-early",
            "lease 5",
        );
    }

    #[test]
    fn a_lease_seen_alive_after_it_was_seen_gone_is_resurrected() {
        assert_only_fails(
            &run(vec![
                get(2, 2000 * MS, 2001 * MS, &[]),
                get(2, 2100 * MS, 2101 * MS, &["a", "b"]),
            ]),
            "lease-no-resurrection",
            "saw it alive",
        );
        assert_only_fails(
            &run(vec![
                renew(1, 2000 * MS, 2001 * MS, false),
                renew(1, 2100 * MS, 2101 * MS, true),
            ]),
            "lease-no-resurrection",
            "saw it alive",
        );
        // After a completed revoke, even a put is a resurrection.
        assert_only_fails(
            &run(vec![
                ok_same(3, 100 * MS, 101 * MS, Call::Revoke { lease: 5 }),
                ok_same(3, 200 * MS, 201 * MS, put(&["c"])),
            ]),
            "lease-no-resurrection",
            "saw it alive",
        );
    }

    #[test]
    fn concurrent_gone_and_alive_observations_are_not_a_resurrection() {
        // The alive read was invoked before the gone read completed: either order is possible.
        assert_all_pass(&run(vec![
            get(2, 2000 * MS, 2300 * MS, &[]),
            get(3, 2050 * MS, 2400 * MS, &["a", "b"]),
        ]));
    }

    #[test]
    fn a_read_showing_part_of_a_leases_keys_breaks_together() {
        let verdicts = run(vec![get(2, 100 * MS, 101 * MS, &["a"])]);
        match &verdicts["lease-together"] {
            Verdict::Fail(why) => assert!(why[0].contains("[\"b\"]"), "{why:?}"),
            other => panic!("expected Fail, got {other:?}"),
        }
        // A key whose put has not completed yet may be missing; the read is whole.
        let mut specs = vec![
            ok_same(2, 4 * MS, 200 * MS, put(&["c"])),
            ok(
                3,
                100 * MS,
                101 * MS,
                Call::GetLeased {
                    lease: 5,
                    keys: vec!["a".into(), "b".into(), "c".into()],
                    present: None,
                },
                Call::GetLeased {
                    lease: 5,
                    keys: vec!["a".into(), "b".into(), "c".into()],
                    present: Some(vec!["a".into(), "b".into()]),
                },
            ),
        ];
        let mut all = base();
        all.append(&mut specs);
        let reports = check_leases(&history(&all), &PARAMS);
        for r in reports {
            assert_eq!(r.verdict, Verdict::Pass, "{r}");
        }
    }

    /// Lease 5 granted by process 1 over [0, 1ms] with keys a and b in the same call.
    fn granted_with_keys() -> Vec<Spec> {
        vec![ok(
            1,
            0,
            MS,
            Call::Grant {
                lease: None,
                ttl_ms: TTL_MS,
                keys: vec!["a".into(), "b".into()],
            },
            Call::Grant {
                lease: Some(5),
                ttl_ms: TTL_MS,
                keys: vec!["a".into(), "b".into()],
            },
        )]
    }

    fn run_granted_with_keys(extra: Vec<Spec>) -> BTreeMap<&'static str, Verdict> {
        let mut specs = granted_with_keys();
        specs.extend(extra);
        check_leases(&history(&specs), &PARAMS)
            .into_iter()
            .map(|r| (r.name, r.verdict))
            .collect()
    }

    #[test]
    fn a_grant_with_keys_is_their_put() {
        assert_all_pass(&run_granted_with_keys(vec![
            get(2, 4 * MS, 5 * MS, &["a", "b"]),
            get(2, 2100 * MS, 2101 * MS, &[]),
        ]));
        // Half of them: not together (and, early, gone too).
        match &run_granted_with_keys(vec![get(2, 4 * MS, 5 * MS, &["a"])])["lease-together"] {
            Verdict::Fail(why) => assert!(why[0].contains("[\"b\"]"), "{why:?}"),
            other => panic!("expected Fail, got {other:?}"),
        }
        // Neither, long before the TTL: the lease was seen gone early.
        assert_only_fails(
            &run_granted_with_keys(vec![get(2, 4 * MS, 5 * MS, &[])]),
            "lease-never-early",
            "lease 5",
        );
    }

    #[test]
    fn keys_shared_between_leases_are_not_evidence() {
        let mut specs = base();
        specs.push(ok(
            3,
            0,
            MS,
            Call::Grant {
                lease: None,
                ttl_ms: TTL_MS,
                keys: Vec::new(),
            },
            Call::Grant {
                lease: Some(6),
                ttl_ms: TTL_MS,
                keys: Vec::new(),
            },
        ));
        specs.push(ok_same(
            3,
            4 * MS,
            5 * MS,
            Call::PutLeased {
                lease: 6,
                keys: vec!["b".into()],
            },
        ));
        specs.push(get(2, 100 * MS, 101 * MS, &["a"]));
        for r in check_leases(&history(&specs), &PARAMS) {
            assert_eq!(r.verdict, Verdict::Pass, "{r}");
        }
    }

    #[test]
    fn a_lease_alive_long_after_its_deadline_on_a_healthy_cluster_is_late() {
        // The grant applied by 1ms; bound = 1 + 2000 + 300 + 200 = 2501ms.
        assert_all_pass(&run(vec![get(2, 2400 * MS, 2401 * MS, &["a", "b"])]));
        assert_only_fails(
            &run(vec![get(2, 2600 * MS, 2601 * MS, &["a", "b"])]),
            "lease-bounded-late",
            "after 2501.000000ms",
        );
        // A renewal that finds the lease long after its bound is late too.
        assert_only_fails(
            &run(vec![renew(1, 2600 * MS, 2601 * MS, true)]),
            "lease-bounded-late",
            "after 2501.000000ms",
        );
    }

    #[test]
    fn bounded_late_counts_renewals_that_may_have_applied() {
        // An info renew completed at 1001ms may apply up to an election allowance (2 x 300ms)
        // later: bound = 1601 + 2000 + 300 + 200 = 4101ms.
        let info_renew = info(
            1,
            1000 * MS,
            1001 * MS,
            Call::Renew {
                lease: 5,
                found: None,
            },
        );
        assert_all_pass(&run(vec![
            info_renew.clone(),
            get(2, 4100 * MS, 4101 * MS, &["a", "b"]),
        ]));
        assert_only_fails(
            &run(vec![info_renew, get(2, 4102 * MS, 4103 * MS, &["a", "b"])]),
            "lease-bounded-late",
            "after 4101.000000ms",
        );
        // A failed renew did not happen; a renew that did not find the lease renewed nothing.
        for nothing in [
            fail(
                1,
                1000 * MS,
                1001 * MS,
                Call::Renew {
                    lease: 5,
                    found: None,
                },
            ),
            renew(3, 1000 * MS, 1001 * MS, false),
        ] {
            let verdicts = run(vec![nothing, get(2, 2600 * MS, 2601 * MS, &["a", "b"])]);
            assert!(
                matches!(&verdicts["lease-bounded-late"], Verdict::Fail(_)),
                "{verdicts:?}"
            );
        }
    }

    fn fault(start_ms: u64, heal_ms: u64) -> Disruption {
        Disruption {
            start_ns: start_ms * MS,
            heal_ns: heal_ms.saturating_mul(MS),
            majority: true,
            restarts: false,
            cuts_off: true,
        }
    }

    fn bounded_late_with(faults: &[Disruption], alive_at_ms: u64) -> Verdict {
        let mut specs = base();
        specs.push(get(2, alive_at_ms * MS, alive_at_ms * MS + 1, &["a", "b"]));
        let params = LeaseParams { faults, ..PARAMS };
        bounded_late(&history(&specs), &params).verdict
    }

    /// The rule before issue 9 item 9: bounded-late only once the cluster was healthy again,
    /// from `max(last renew invoke, healthy) + ttl + election timeout + margin`.
    fn old_rule_flags(healthy_after_ms: u64, alive_at_ms: u64) -> bool {
        let last_renew_invoke_ms = 0;
        alive_at_ms > healthy_after_ms.max(last_renew_invoke_ms) + 2000 + 300 + 200
    }

    /// Issue 9, item 9: bounded-late is judged during faults, with the bound each fault allows.
    /// Lease 5 is granted at [0, 1ms] and never renewed; the faults end (healthy) at 20s.
    #[test]
    fn bounded_late_is_judged_during_faults_with_each_faults_bound() {
        let healthy_at = 20_000;
        // A follower paused from 3000 to 4000ms, after the lease was due (2501ms): nothing moves
        // the bound. Seen alive at 5000ms: late. The old rule waited for 20s.
        let pause = [fault(3000, 4000)];
        assert!(!old_rule_flags(healthy_at, 5000));
        assert!(matches!(bounded_late_with(&pause, 5000), Verdict::Fail(_)));
        assert!(matches!(bounded_late_with(&pause, 2502), Verdict::Fail(_)));
        assert_eq!(bounded_late_with(&pause, 2501), Verdict::Pass);

        // A leader change at 2000ms (before the lease was due): the new leader is promoted by
        // 2600ms and counts its own deadline 2001ms, extended: by 2600 + 300 + 200 = 3100ms.
        let change = [fault(2000, 2500)];
        assert_eq!(bounded_late_with(&change, 3100), Verdict::Pass);
        // The heal at 2500ms may change the leader too: by 2500 + 600 + 300 + 200 = 3600ms.
        assert_eq!(bounded_late_with(&change, 3600), Verdict::Pass);
        assert!(matches!(bounded_late_with(&change, 3601), Verdict::Fail(_)));

        // The restart case: a node killed at 500ms and restarted at 1500ms counts a full TTL
        // from its restart (caught up by 1800ms). It may lead at once (a killed leader nobody
        // replaced resumes its term when it restarts) or after a later leader change: by
        // max(1800 + 2000, 1500 + 600) + 300 + 200 = 4300ms.
        let kill = Disruption {
            restarts: true,
            ..fault(500, 1500)
        };
        assert_eq!(bounded_late_with(&[kill], 4300), Verdict::Pass);
        assert!(matches!(bounded_late_with(&[kill], 4301), Verdict::Fail(_)));
        // A node cut off (not restarted) from 500 to 1500ms had applied the renewal (the grant,
        // at 1ms) before: it keeps the exact deadline. The heal may change the leader: by
        // max(2001, 1500 + 600) + 300 + 200 = 2600ms.
        let cut = [fault(500, 1500)];
        assert_eq!(bounded_late_with(&cut, 2600), Verdict::Pass);
        assert!(matches!(bounded_late_with(&cut, 2601), Verdict::Fail(_)));
        // Cut off when the grant applied: it applies it when it catches up, by 1800ms.
        let missed = [fault(0, 1500)];
        assert_eq!(bounded_late_with(&missed, 4300), Verdict::Pass);
        assert!(matches!(bounded_late_with(&missed, 4301), Verdict::Fail(_)));

        // No majority from 1000 to 6000ms: nothing can expire; a leader is promoted by 6600ms.
        let split = [Disruption {
            majority: false,
            ..fault(1000, 6000)
        }];
        assert!(!old_rule_flags(healthy_at, 7101));
        assert_eq!(bounded_late_with(&split, 7100), Verdict::Pass);
        assert!(matches!(bounded_late_with(&split, 7101), Verdict::Fail(_)));
        // Never healed: no bound.
        let forever = [Disruption {
            majority: false,
            ..fault(1000, u64::MAX)
        }];
        assert_eq!(bounded_late_with(&forever, 100_000), Verdict::Pass);
    }

    fn grant_id(p: u64, start: u64, end: u64, granted: bool) -> Spec {
        let call = Call::GrantId {
            lease: 5,
            ttl_ms: TTL_MS,
        };
        if granted {
            ok_same(p, start, end, call)
        } else {
            fail(p, start, end, call)
        }
    }

    /// Issue 9, item 11 (`lease-id-reuse`): lease 5, granted by process 1 (thread 1 of 10),
    /// revoked at 100ms, re-granted by thread 2 at 200ms; then the old owner (thread 1, now as
    /// process 11 after an `info`) renews its old lease at 300ms.
    fn reuse(granted_again: bool, old_owner_found: bool) -> BTreeMap<&'static str, Verdict> {
        let mut specs = base();
        specs.extend([
            ok_same(1, 100 * MS, 101 * MS, Call::Revoke { lease: 5 }),
            grant_id(2, 200 * MS, 201 * MS, granted_again),
            renew(11, 300 * MS, 301 * MS, old_owner_found),
        ]);
        if granted_again {
            // The new owner's own activity: keys of its own, renewals, reads. Not the old
            // lease's: it would look resurrected.
            specs.extend([
                ok_same(
                    2,
                    210 * MS,
                    211 * MS,
                    Call::PutLeased {
                        lease: 5,
                        keys: vec!["c".into()],
                    },
                ),
                renew(2, 400 * MS, 401 * MS, true),
                ok(
                    2,
                    500 * MS,
                    501 * MS,
                    Call::GetLeased {
                        lease: 5,
                        keys: vec!["c".into()],
                        present: None,
                    },
                    Call::GetLeased {
                        lease: 5,
                        keys: vec!["c".into()],
                        present: Some(vec!["c".into()]),
                    },
                ),
            ]);
        }
        let params = LeaseParams {
            concurrency: 10,
            ..PARAMS
        };
        check_leases(&history(&specs), &params)
            .into_iter()
            .map(|r| (r.name, r.verdict))
            .collect()
    }

    #[test]
    fn a_refused_re_grant_and_a_renewal_that_finds_nothing_pass() {
        assert_all_pass(&reuse(false, false));
    }

    #[test]
    fn an_id_granted_twice_is_caught_and_the_new_owner_is_not_misread() {
        // Granted again, but the old owner's renewal finds nothing: only the second grant.
        assert_only_fails(
            &reuse(true, false),
            "lease-granted-once",
            "lease id 5 was granted 2 times",
        );
        // The old owner's renewal finds the new lease: it renewed a lease it never held.
        let verdicts = reuse(true, true);
        match &verdicts["lease-no-resurrection"] {
            Verdict::Fail(why) => {
                assert_eq!(why.len(), 1, "{why:?}");
                assert!(
                    why[0].contains("lease 5 (granted by #0)") && why[0].contains("process 11"),
                    "{why:?}"
                );
            }
            other => panic!("the old owner's renewal passed: {other:?}"),
        }
        assert!(matches!(&verdicts["lease-granted-once"], Verdict::Fail(_)));
        for rule in ["lease-never-early", "lease-together"] {
            assert_eq!(verdicts[rule], Verdict::Pass, "{rule}");
        }
    }
}
