//! The lease contract of `docs/semantics.md`, checked from client observations alone.
//!
//! A lease is known from its `Grant ok`. What the history shows about it:
//! - **renewals**: the `Grant ok` and every `Renew ok` with `found = true`. Each guarantees the
//!   lease until its *invoke* time (the client's `t_send`) plus the TTL, from when it applied.
//! - **gone**: a `Renew ok` with `found = false`; a `GetLeased ok` missing a key that a
//!   `PutLeased ok` of the lease wrote before the read was invoked; a `Revoke ok`.
//! - **alive**: a `Renew ok` with `found = true`; a `GetLeased ok` showing any of the lease's
//!   keys; a `PutLeased ok` or `Acquire ok` with the lease (both are refused for a missing lease).
//!
//! Reading key presence as lease liveness assumes the workload never deletes a leased key and
//! never puts one key under two leases. Keys put (with any outcome) under more than one lease are
//! ignored: their absence or presence says nothing about either lease.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckReport, Verdict, describe, fmt_ns, ms_to_ns};
use crate::history::{Call, History, Kind, Pair};

/// Timing parameters of the cluster under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseParams {
    /// The maximum of the election-timeout range: each leader change may delay expiry this much.
    pub election_timeout_ms: u64,
    /// Never-early reports an observation that saw the lease gone and *completed* before
    /// `t_send + ttl - early_margin`. It needs no slack for scheduling or apply lag: what the
    /// observation saw had happened by its completion, and nothing applies before `t_send`. Only
    /// lessor clock-rate drift belongs here: a lessor clock at rate `r > 1` expires after
    /// `ttl / r` of real time, i.e. `ttl * (1 - 1/r)` early; at `r <= 1` nothing is early (0).
    pub early_margin_ms: u64,
    /// Bounded-late reports sightings more than this after `ttl + election_timeout`: the revoke
    /// lag (token bucket, `retry_after_ms`, apply delay), the harness's scheduling noise, and
    /// for a slow lessor clock (`r < 1`) its drift `ttl * (1/r - 1)`.
    pub late_margin_ms: u64,
    /// From this time on no fault was active (set by the runner after healing); `None` if the
    /// cluster never was healthy, and bounded-late cannot be judged.
    pub healthy_after_ns: Option<u64>,
}

/// All four lease rules as one report named `lease` (see [`super::combine`]).
pub fn check(history: &History, params: &LeaseParams) -> CheckReport {
    super::combine("lease", check_leases(history, params))
}

/// All four lease rules, one report each.
pub fn check_leases(history: &History, params: &LeaseParams) -> Vec<CheckReport> {
    let index = Index::new(history);
    vec![
        never_early_in(&index, params),
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
pub fn never_early(history: &History, params: &LeaseParams) -> CheckReport {
    never_early_in(&Index::new(history), params)
}

/// Once an operation saw a lease gone, no operation invoked afterwards sees it alive.
pub fn no_resurrection(history: &History) -> CheckReport {
    no_resurrection_in(&Index::new(history))
}

/// A `GetLeased` shows all of a lease's put keys or none: keys and lease end in one apply step.
pub fn together(history: &History) -> CheckReport {
    together_in(&Index::new(history))
}

/// With a healthy cluster, a lease not renewed after its last renewal invoke `L` is gone by
/// `max(L, healthy_after) + ttl + election_timeout + late_margin`: nothing invoked later sees it
/// alive.
pub fn bounded_late(history: &History, params: &LeaseParams) -> CheckReport {
    bounded_late_in(&Index::new(history), params)
}

/// What the history says about one lease.
#[derive(Debug)]
struct Lease<'a> {
    id: u64,
    ttl_ns: u64,
    grant: Pair<'a>,
    /// `(invoke, completion)` of the grant and every `Renew ok` with `found = true`.
    renewals: Vec<(u64, u64, Pair<'a>)>,
    /// The grant's and every renew's invoke, whatever the outcome: an `info` renew may have
    /// applied.
    last_renew_invoke_ns: u64,
    /// Revokes that may have applied (`ok`, `info`, never completed).
    revokes: Vec<Pair<'a>>,
    /// `PutLeased ok`: `(completion, keys)`.
    puts: Vec<(u64, Vec<&'a str>)>,
    /// Keys put under this lease only, with any outcome.
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
}

/// The leases of a history, by id.
#[derive(Debug)]
struct Index<'a> {
    leases: BTreeMap<u64, Lease<'a>>,
}

impl<'a> Index<'a> {
    fn new(history: &'a History) -> Index<'a> {
        let pairs = history.pairs();
        let mut leases: BTreeMap<u64, Lease<'a>> = BTreeMap::new();
        for pair in &pairs {
            if let (
                Kind::Ok,
                Call::Grant {
                    lease: Some(id),
                    ttl_ms,
                },
            ) = (pair.outcome(), pair.call())
            {
                let completed = pair.completion_ns().unwrap_or(u64::MAX);
                leases.insert(
                    *id,
                    Lease {
                        id: *id,
                        ttl_ns: ms_to_ns(*ttl_ms),
                        grant: *pair,
                        renewals: vec![(pair.invoke_ns(), completed, *pair)],
                        last_renew_invoke_ns: pair.invoke_ns(),
                        revokes: Vec::new(),
                        puts: Vec::new(),
                        keys: BTreeSet::new(),
                        gets: Vec::new(),
                        gone: Vec::new(),
                        alive: Vec::new(),
                    },
                );
            }
        }

        // Which leases each key was put under, with any outcome.
        let mut owners: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
        for pair in &pairs {
            if let Call::PutLeased { lease, keys } = pair.call() {
                for key in keys {
                    owners.entry(key.as_str()).or_default().insert(*lease);
                }
            }
        }
        for (key, ids) in &owners {
            if let (1, Some(lease)) = (ids.len(), ids.first().and_then(|id| leases.get_mut(id))) {
                lease.keys.insert(*key);
            }
        }

        for pair in &pairs {
            let outcome = pair.outcome();
            let ok = outcome == Kind::Ok;
            let lease_id = match pair.call() {
                Call::Renew { lease, .. }
                | Call::TimeToLive { lease, .. }
                | Call::Revoke { lease }
                | Call::PutLeased { lease, .. }
                | Call::GetLeased { lease, .. }
                | Call::Acquire { lease, .. } => *lease,
                _ => continue,
            };
            let Some(lease) = leases.get_mut(&lease_id) else {
                continue;
            };
            match pair.call() {
                Call::Renew { found, .. } => {
                    lease.last_renew_invoke_ns = lease.last_renew_invoke_ns.max(pair.invoke_ns());
                    match (ok, found) {
                        (true, Some(true)) => {
                            let completed = pair.completion_ns().unwrap_or(u64::MAX);
                            lease.renewals.push((pair.invoke_ns(), completed, *pair));
                            lease.alive.push(*pair);
                        }
                        (true, Some(false)) => lease.gone.push(*pair),
                        _ => {}
                    }
                }
                // Asking about a lease is an observation, not a renewal.
                Call::TimeToLive { found, .. } => match (ok, found) {
                    (true, Some(true)) => lease.alive.push(*pair),
                    (true, Some(false)) => lease.gone.push(*pair),
                    _ => {}
                },
                Call::Revoke { .. } => {
                    if outcome != Kind::Fail {
                        lease.revokes.push(*pair);
                    }
                    if ok {
                        lease.gone.push(*pair);
                    }
                }
                Call::PutLeased { keys, .. } if ok => {
                    let completed = pair.completion_ns().unwrap_or(u64::MAX);
                    lease
                        .puts
                        .push((completed, keys.iter().map(String::as_str).collect()));
                    lease.alive.push(*pair);
                }
                Call::GetLeased { .. } if ok => lease.gets.push(*pair),
                Call::Acquire { .. } if ok => lease.alive.push(*pair),
                _ => {}
            }
        }

        // Reads become gone / alive observations once every put is known.
        for lease in leases.values_mut() {
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
        Index { leases }
    }
}

fn report(name: &'static str, violations: Vec<String>) -> CheckReport {
    CheckReport {
        name,
        verdict: Verdict::from_violations(violations),
    }
}

fn never_early_in(index: &Index<'_>, params: &LeaseParams) -> CheckReport {
    let margin = ms_to_ns(params.early_margin_ms);
    let mut violations = Vec::new();
    for lease in index.leases.values() {
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
                "lease {}: {} saw it gone by {}, before {} = renewal #{} invoked at {} + ttl {} \
                 (less the early margin {}; {order})",
                lease.id,
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
    for lease in index.leases.values() {
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
                    "lease {}: {} saw it alive, invoked after {} had seen it gone at {}",
                    lease.id,
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
    for lease in index.leases.values() {
        for get in &lease.gets {
            let (missing, shown) = lease.read_result(get);
            if !missing.is_empty() && !shown.is_empty() {
                violations.push(format!(
                    "lease {}: {} shows {:?} but not {:?}, all put before it was invoked",
                    lease.id,
                    describe(get),
                    shown,
                    missing,
                ));
            }
        }
    }
    report("lease-together", violations)
}

fn bounded_late_in(index: &Index<'_>, params: &LeaseParams) -> CheckReport {
    let name = "lease-bounded-late";
    let Some(healthy_after) = params.healthy_after_ns else {
        return CheckReport {
            name,
            verdict: Verdict::Unknown("the cluster was never healthy: no bound applies".into()),
        };
    };
    let slack =
        ms_to_ns(params.election_timeout_ms).saturating_add(ms_to_ns(params.late_margin_ms));
    let mut violations = Vec::new();
    for lease in index.leases.values() {
        let bound = lease
            .last_renew_invoke_ns
            .max(healthy_after)
            .saturating_add(lease.ttl_ns)
            .saturating_add(slack);
        for alive in &lease.alive {
            if alive.invoke_ns() > bound {
                violations.push(format!(
                    "lease {} (granted by #{}, last renew invoked at {}): {} saw it alive after \
                     {} = max(last renew, healthy at {}) + ttl {} + election timeout + late margin",
                    lease.id,
                    lease.grant.invoke.index,
                    fmt_ns(lease.last_renew_invoke_ns),
                    describe(alive),
                    fmt_ns(bound),
                    fmt_ns(healthy_after),
                    fmt_ns(lease.ttl_ns),
                ));
            }
        }
    }
    report(name, violations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::*;

    const MS: u64 = 1_000_000;
    const TTL_MS: u64 = 2000;

    /// No clock drift: never-early is exact; bounded-late allows 200ms of revoke lag.
    const PARAMS: LeaseParams = LeaseParams {
        election_timeout_ms: 300,
        early_margin_ms: 0,
        late_margin_ms: 200,
        healthy_after_ns: Some(0),
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
                },
                Call::Grant {
                    lease: Some(5),
                    ttl_ms: TTL_MS,
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
        // Bounded-late: 2000 + 300 + 2500 = 4800ms.
        assert_all_pass(&verdicts(vec![get(2, 4800 * MS, 4801 * MS, &["a", "b"])]));
        assert_only_fails(
            &verdicts(vec![get(2, 4801 * MS, 4802 * MS, &["a", "b"])]),
            "lease-bounded-late",
            "after 4800.000000ms",
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
            },
            Call::Grant {
                lease: Some(6),
                ttl_ms: TTL_MS,
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
        // Last renewal invoked at 0; bound = 0 + 2000 + 300 + 200 = 2500ms.
        assert_all_pass(&run(vec![get(2, 2400 * MS, 2401 * MS, &["a", "b"])]));
        assert_only_fails(
            &run(vec![get(2, 2600 * MS, 2601 * MS, &["a", "b"])]),
            "lease-bounded-late",
            "after 2500.000000ms",
        );
    }

    #[test]
    fn bounded_late_counts_renewals_of_any_outcome_and_healing() {
        // An info renew at 1000ms may have applied: bound = 3500ms.
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
            get(2, 3400 * MS, 3401 * MS, &["a", "b"]),
        ]));
        assert_only_fails(
            &run(vec![info_renew, get(2, 3600 * MS, 3601 * MS, &["a", "b"])]),
            "lease-bounded-late",
            "lease 5",
        );
        // Healed at 5000ms: bound = 7500ms.
        let mut specs = base();
        specs.push(get(2, 7000 * MS, 7001 * MS, &["a", "b"]));
        let late = LeaseParams {
            healthy_after_ns: Some(5000 * MS),
            ..PARAMS
        };
        assert!(bounded_late(&history(&specs), &late).verdict.is_pass());
        // Never healthy: the rule cannot be judged.
        let never = LeaseParams {
            healthy_after_ns: None,
            ..PARAMS
        };
        assert!(matches!(
            bounded_late(&history(&specs), &never).verdict,
            Verdict::Unknown(_)
        ));
    }
}
