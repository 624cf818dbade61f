//! Hand-written scenarios: each behaviour and each rejection path, with the exact outcome.

use zaris_core::{
    BoundKey, CancelOutcome, Command, Compare, CompareOp, CompareTarget, DurationMs, EventKind,
    ExpiredLease, FencingToken, Guard, KeySelector, LeaseEffect, LeaseId, LimitKind, Limits,
    LockEffect, LockOutcome, OpResult, Outcome, Rejection, Request, RequestId, Revision, State,
    Txn, TxnOp,
};

use super::{Log, TTL, acquire, acquire_sent_after, grant};

fn put(key: &str, value: &str, lease: LeaseId) -> Command {
    Command::Put {
        key: key.into(),
        value: value.into(),
        lease,
        guard: None,
        prev_kv: false,
    }
}

fn guarded_put(key: &str, lock: &str, token: FencingToken) -> Command {
    Command::Put {
        key: key.into(),
        value: b"v".to_vec(),
        lease: LeaseId::NONE,
        guard: Some(Guard {
            lock: lock.into(),
            token,
        }),
        prev_kv: false,
    }
}

fn held_token(response: zaris_core::Response) -> FencingToken {
    match response {
        Ok(Outcome::Lock(LockOutcome::Held { token })) => token,
        other => panic!("expected the lock to be held, got {other:?}"),
    }
}

/// Each event as (kind, key, mod_revision, lease).
fn event_rows(effects: &zaris_core::Effects) -> Vec<(EventKind, Vec<u8>, Revision, LeaseId)> {
    effects
        .events
        .iter()
        .map(|e| (e.kind, e.kv.key.clone(), e.kv.mod_revision, e.lease))
        .collect()
}

fn keys(state: &State) -> Vec<Vec<u8>> {
    state
        .range(&KeySelector::Prefix(Vec::new()), 0)
        .kvs
        .into_iter()
        .map(|kv| kv.key)
        .collect()
}

/// Applies a command expected to be rejected and checks it changed nothing but the applied index.
fn assert_rejected(log: &mut Log, command: Command, expected: Rejection) {
    let mut unchanged = log.state.clone();
    unchanged.apply_noop(log.rev());
    // Rejections must be caught before proposing, too, when they are stateless.
    let response = log.apply(command);
    assert_eq!(response, Err(expected));
    assert_eq!(log.state, unchanged, "a rejected command changed the state");
}

// ---- leases ----------------------------------------------------------------------------------

fn grant_bound(id: u64, keys: &[(&str, &str)]) -> Command {
    Command::GrantBound {
        id: LeaseId::new(id),
        ttl_ms: TTL,
        owner: None,
        keys: keys
            .iter()
            .map(|(key, value)| BoundKey {
                key: key.as_bytes().to_vec(),
                value: value.as_bytes().to_vec(),
            })
            .collect(),
    }
}

#[test]
fn a_grant_with_keys_creates_the_lease_and_its_keys_at_one_revision_and_revoke_ends_all() {
    let mut log = Log::new(Limits::default());
    let other = grant(&mut log);
    log.apply(put("moved", "old", other)).expect("put");
    let rev = log.rev();
    let applied = log.apply_full(grant_bound(0, &[("a", "1"), ("moved", "2")]));
    let id = match applied.response {
        Ok(Outcome::Granted { id, ttl_ms }) => {
            assert_eq!(ttl_ms, TTL);
            id
        }
        other => panic!("expected a grant, got {other:?}"),
    };
    // Both keys are put at the grant's revision, bound to the new lease; the key that belonged
    // to another lease moved (as a put with a lease moves it).
    let events = event_rows(&applied.effects);
    assert_eq!(
        events,
        vec![
            (EventKind::Put, b"a".to_vec(), rev, id),
            (EventKind::Put, b"moved".to_vec(), rev, id),
        ]
    );
    let info = log.state.lease(id, true).expect("the lease");
    assert_eq!((info.granted_revision, info.key_count), (rev, 2));
    assert_eq!(info.keys, vec![b"a".to_vec(), b"moved".to_vec()]);
    assert_eq!(log.state.lease(other, false).expect("other").key_count, 0);
    assert_eq!(log.state.get(b"moved").expect("moved").value, b"2".to_vec());
    assert!(
        applied
            .effects
            .leases
            .iter()
            .any(|e| matches!(e, LeaseEffect::Refreshed { id: refreshed, .. } if *refreshed == id)),
        "the lessor learns the new lease: {:?}",
        applied.effects.leases
    );

    // No keys: a plain grant.
    match log.apply(grant_bound(0, &[])) {
        Ok(Outcome::Granted { id: bare, .. }) => {
            assert_eq!(log.state.lease(bare, false).expect("bare").key_count, 0)
        }
        other => panic!("expected a grant, got {other:?}"),
    }

    log.apply(Command::Revoke { id }).expect("revoke");
    assert_eq!(keys(&log.state), Vec::<Vec<u8>>::new());
}

#[test]
fn a_refused_grant_with_keys_creates_neither_the_lease_nor_any_key() {
    let limits = Limits {
        max_keys_per_lease: 2,
        max_leases: 3,
        ..Limits::default()
    };
    let mut log = Log::new(limits.clone());
    let taken = grant(&mut log);
    let too_long = "k".repeat(limits.max_key_bytes as usize + 1);
    let cases = [
        (
            grant_bound(taken.get(), &[("a", "1")]),
            Rejection::LeaseIdUsed {
                id: taken,
                next_free: taken.next(),
            },
        ),
        (
            grant_bound(0, &[("a", "1"), ("b", "2"), ("c", "3")]),
            Rejection::LimitExceeded {
                limit: LimitKind::KeysPerLease,
                max: 2,
                actual: 3,
            },
        ),
        (
            grant_bound(0, &[("a", "1"), ("a", "2")]),
            Rejection::InvalidArgument("a key is listed twice among the grant's keys".into()),
        ),
        (
            grant_bound(0, &[("a", "1"), ("", "2")]),
            Rejection::InvalidArgument("key must not be empty".into()),
        ),
        (
            grant_bound(0, &[("a", "1"), (too_long.as_str(), "2")]),
            Rejection::LimitExceeded {
                limit: LimitKind::KeyBytes,
                max: limits.max_key_bytes as u64,
                actual: limits.max_key_bytes as u64 + 1,
            },
        ),
    ];
    for (command, expected) in cases {
        assert!(
            Request::new(command.clone()).validate(&limits).is_err()
                || matches!(expected, Rejection::LeaseIdUsed { .. }),
            "stateless refusals are caught before proposing: {command:?}"
        );
        assert_rejected(&mut log, command, expected);
    }
    // The lease limit, checked when applied.
    grant(&mut log);
    grant(&mut log);
    assert_rejected(
        &mut log,
        grant_bound(0, &[("a", "1")]),
        Rejection::LimitExceeded {
            limit: LimitKind::Leases,
            max: 3,
            actual: 4,
        },
    );
}

#[test]
fn grant_chooses_fresh_ids_and_never_reuses_them() {
    let mut log = Log::new(Limits::default());
    let a = grant(&mut log);
    let b = grant(&mut log);
    assert_eq!((a, b), (LeaseId::new(1), LeaseId::new(2)));
    log.apply(Command::Revoke { id: b }).expect("revoke");
    // A client takes id 3; the server skips it and never hands out 2 again.
    assert_eq!(
        log.apply(Command::Grant {
            id: LeaseId::new(3),
            ttl_ms: TTL
        }),
        Ok(Outcome::Granted {
            id: LeaseId::new(3),
            ttl_ms: TTL
        })
    );
    assert_eq!(grant(&mut log), LeaseId::new(4));
}

/// A restore with `--bump-revision`: the state skips ahead as far as a cluster that went on
/// writing could have got, so revisions (fencing tokens) and server-chosen lease ids continue
/// above anything it handed out; keys and leases stay as they were.
#[test]
fn skipping_ahead_keeps_the_state_and_continues_above_what_a_diverged_cluster_issued() {
    let mut log = Log::new(Limits::default());
    let kept = grant(&mut log);
    log.apply(put("k", "v", kept)).expect("put");
    let before = log.state.clone();
    let mut diverged = Log {
        state: before.clone(),
        next_index: log.next_index,
    };
    let mut diverged_ids = Vec::new();
    for _ in 0..5 {
        diverged_ids.push(grant(&mut diverged));
    }
    let written = diverged.next_index - log.next_index;

    log.state.skip_ahead(written);
    log.state.check_invariants().expect("invariants");
    assert_eq!(log.state.last_applied(), diverged.state.last_applied());
    assert_eq!(log.state.lease(kept, true), before.lease(kept, true));
    assert_eq!(log.state.key_count(), before.key_count());
    log.next_index = log.state.last_applied().get() + 1;
    let fresh = grant(&mut log);
    assert!(
        diverged_ids.iter().all(|old| *old < fresh),
        "{fresh} reuses one of {diverged_ids:?}"
    );
    assert!(log.rev() > diverged.rev());
}

#[test]
fn grant_rejects_a_live_client_chosen_id() {
    let mut log = Log::new(Limits::default());
    let id = grant(&mut log);
    assert_rejected(
        &mut log,
        Command::Grant { id, ttl_ms: TTL },
        Rejection::LeaseIdUsed {
            id,
            next_free: LeaseId::new(2),
        },
    );
}

/// Issue 9, hole 1: an ended lease's id granted again let the old owner's keepalive renew (and
/// its lock calls use) the new lease. Ids are never reused, whoever chose them.
#[test]
fn an_ended_lease_id_is_never_granted_again() {
    let mut log = Log::new(Limits::default());
    let chosen = 40;
    assert_eq!(
        log.apply(Command::Grant {
            id: LeaseId::new(chosen),
            ttl_ms: TTL
        }),
        Ok(Outcome::Granted {
            id: LeaseId::new(chosen),
            ttl_ms: TTL
        })
    );
    log.apply(Command::Revoke {
        id: LeaseId::new(chosen),
    })
    .expect("revoke");
    assert_rejected(
        &mut log,
        Command::Grant {
            id: LeaseId::new(chosen),
            ttl_ms: TTL,
        },
        Rejection::LeaseIdUsed {
            id: LeaseId::new(chosen),
            next_free: LeaseId::new(chosen + 1),
        },
    );
    // Below the highest id ever granted, even ids never used are refused: "used" is a
    // high-water mark, so it needs no memory of ended leases.
    assert_rejected(
        &mut log,
        Command::Grant {
            id: LeaseId::new(7),
            ttl_ms: TTL,
        },
        Rejection::LeaseIdUsed {
            id: LeaseId::new(7),
            next_free: LeaseId::new(chosen + 1),
        },
    );
    // The old owner's renew finds nothing, forever.
    assert_eq!(
        log.apply(Command::Renew {
            ids: vec![LeaseId::new(chosen)]
        }),
        Ok(Outcome::Renewed {
            renewed: vec![],
            not_found: vec![LeaseId::new(chosen)]
        })
    );
    // The server continues above the chosen id.
    assert_eq!(grant(&mut log), LeaseId::new(chosen + 1));
}

#[test]
fn a_client_chosen_id_above_the_chosen_range_is_invalid() {
    let mut log = Log::new(Limits::default());
    let too_big = LeaseId::MAX_CHOSEN.next();
    assert!(matches!(
        log.apply(Command::Grant {
            id: too_big,
            ttl_ms: TTL
        }),
        Err(Rejection::InvalidArgument(_))
    ));
    // The largest chosen id leaves the server room to go on.
    let largest = LeaseId::MAX_CHOSEN;
    assert_eq!(
        log.apply(Command::Grant {
            id: largest,
            ttl_ms: TTL
        }),
        Ok(Outcome::Granted {
            id: largest,
            ttl_ms: TTL
        })
    );
    assert_eq!(grant(&mut log), largest.next());
}

#[test]
fn ttl_outside_bounds_is_rejected_not_clamped() {
    let limits = Limits::default();
    let mut log = Log::new(limits.clone());
    for ttl_ms in [
        DurationMs::ZERO,
        DurationMs::new(limits.min_ttl_ms.get() - 1),
        DurationMs::new(limits.max_ttl_ms.get() + 1),
    ] {
        let expected = Rejection::TtlOutOfRange {
            ttl_ms,
            min_ttl_ms: limits.min_ttl_ms,
            max_ttl_ms: limits.max_ttl_ms,
        };
        let command = Command::Grant {
            id: LeaseId::NONE,
            ttl_ms,
        };
        assert_eq!(
            Request::new(command.clone()).validate(&limits),
            Err(expected.clone())
        );
        assert_rejected(&mut log, command, expected);
    }
    for ttl_ms in [limits.min_ttl_ms, limits.max_ttl_ms] {
        assert!(
            log.apply(Command::Grant {
                id: LeaseId::NONE,
                ttl_ms
            })
            .is_ok()
        );
    }
}

#[test]
fn lease_count_is_bounded() {
    let mut log = Log::new(Limits {
        max_leases: 2,
        ..Limits::default()
    });
    grant(&mut log);
    grant(&mut log);
    assert_rejected(
        &mut log,
        Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: TTL,
        },
        Rejection::LimitExceeded {
            limit: LimitKind::Leases,
            max: 2,
            actual: 3,
        },
    );
}

#[test]
fn renew_reports_missing_leases_per_id() {
    let mut log = Log::new(Limits::default());
    let a = grant(&mut log);
    let rev = log.rev();
    let applied = log.apply_full(Command::Renew {
        ids: vec![a, LeaseId::new(99)],
    });
    assert_eq!(
        applied.response,
        Ok(Outcome::Renewed {
            renewed: vec![(a, TTL)],
            not_found: vec![LeaseId::new(99)],
        })
    );
    assert_eq!(
        applied.effects.leases,
        vec![LeaseEffect::Refreshed {
            id: a,
            ttl_ms: TTL,
            renewed_revision: rev
        }]
    );
    assert_eq!(
        log.state.lease(a, false).map(|l| l.renewed_revision),
        Some(rev)
    );
}

#[test]
fn renew_batch_is_bounded_and_not_empty() {
    let mut log = Log::new(Limits {
        max_batch_ids: 3,
        ..Limits::default()
    });
    assert_rejected(
        &mut log,
        Command::Renew {
            ids: vec![
                LeaseId::new(1),
                LeaseId::new(2),
                LeaseId::new(3),
                LeaseId::new(4),
            ],
        },
        Rejection::LimitExceeded {
            limit: LimitKind::BatchIds,
            max: 3,
            actual: 4,
        },
    );
    assert_rejected(
        &mut log,
        Command::Renew { ids: vec![] },
        Rejection::InvalidArgument("no lease ids given".into()),
    );
    assert_rejected(
        &mut log,
        Command::Renew {
            ids: vec![LeaseId::NONE],
        },
        Rejection::InvalidArgument("lease id 0 is reserved for \"no lease\"".into()),
    );
}

#[test]
fn revoke_deletes_bound_keys_in_one_revision_and_reports_the_lease() {
    let mut log = Log::new(Limits::default());
    let lease = grant(&mut log);
    log.apply(put("a", "1", lease)).expect("put");
    log.apply(put("b", "2", lease)).expect("put");
    log.apply(put("c", "3", LeaseId::NONE)).expect("put");
    let rev = log.rev();
    let applied = log.apply_full(Command::Revoke { id: lease });
    assert_eq!(
        applied.response,
        Ok(Outcome::Revoked {
            id: lease,
            keys_deleted: 2
        })
    );
    let events = event_rows(&applied.effects);
    assert_eq!(
        events,
        vec![
            (EventKind::Revoke, b"a".to_vec(), rev, lease),
            (EventKind::Revoke, b"b".to_vec(), rev, lease),
        ]
    );
    assert_eq!(keys(&log.state), vec![b"c".to_vec()]);
    assert!(log.state.lease(lease, false).is_none());
    // No resurrection: renewing the revoked lease finds nothing.
    assert_eq!(
        log.apply(Command::Renew { ids: vec![lease] }),
        Ok(Outcome::Renewed {
            renewed: vec![],
            not_found: vec![lease]
        })
    );
}

#[test]
fn revoke_of_unknown_lease_is_rejected() {
    let mut log = Log::new(Limits::default());
    assert_rejected(
        &mut log,
        Command::Revoke {
            id: LeaseId::new(7),
        },
        Rejection::LeaseNotFound(LeaseId::new(7)),
    );
}

#[test]
fn expire_is_skipped_for_a_lease_renewed_after_the_leader_looked() {
    let mut log = Log::new(Limits::default());
    let racer = grant(&mut log);
    let idle = grant(&mut log);
    log.apply(put("racer", "x", racer)).expect("put");
    log.apply(put("idle", "x", idle)).expect("put");
    let observed_racer = log
        .state
        .lease(racer, false)
        .expect("lease")
        .renewed_revision;
    let observed_idle = log
        .state
        .lease(idle, false)
        .expect("lease")
        .renewed_revision;
    // The leader decides to expire both; a renew of `racer` commits first.
    log.apply(Command::Renew { ids: vec![racer] })
        .expect("renew");
    let applied = log.apply_full(Command::Expire {
        leases: vec![
            ExpiredLease {
                id: racer,
                observed_renewed_revision: observed_racer,
            },
            ExpiredLease {
                id: idle,
                observed_renewed_revision: observed_idle,
            },
            ExpiredLease {
                id: LeaseId::new(42),
                observed_renewed_revision: Revision::new(1),
            },
        ],
    });
    assert_eq!(
        applied.response,
        Ok(Outcome::Expired {
            revoked: vec![idle],
            skipped: vec![racer, LeaseId::new(42)],
        })
    );
    assert_eq!(
        applied
            .effects
            .events
            .iter()
            .map(|e| e.kind)
            .collect::<Vec<_>>(),
        vec![EventKind::Expire]
    );
    assert_eq!(
        applied.effects.leases,
        vec![LeaseEffect::Revoked {
            id: idle,
            expired: true
        }]
    );
    assert_eq!(keys(&log.state), vec![b"racer".to_vec()]);
}

#[test]
fn introspection_lists_keys_and_locks() {
    let mut log = Log::new(Limits::default());
    let lease = grant(&mut log);
    let other = grant(&mut log);
    log.apply(put("k1", "v", lease)).expect("put");
    log.apply(put("k2", "v", lease)).expect("put");
    held_token(log.apply(acquire("m", lease, false)));
    held_token(log.apply(acquire("n", other, false)));
    log.apply(acquire("n", lease, true)).expect("queue");
    let info = log.state.lease(lease, true).expect("lease");
    assert_eq!(info.key_count, 2);
    assert_eq!(info.keys, vec![b"k1".to_vec(), b"k2".to_vec()]);
    assert_eq!(info.locks_held, vec!["m".to_string()]);
    assert_eq!(info.locks_waiting, vec!["n".to_string()]);
    let listed: Vec<LeaseId> = log
        .state
        .leases(LeaseId::NONE, 10)
        .iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(listed, vec![lease, other]);
    assert_eq!(
        log.state
            .leases(lease, 10)
            .iter()
            .map(|l| l.id)
            .collect::<Vec<_>>(),
        vec![other]
    );
}

#[test]
fn lock_pages_start_after_a_name_stay_under_a_prefix_and_cut_long_queues() {
    let mut log = Log::new(Limits::default());
    let holder = grant(&mut log);
    for name in ["a", "job/1", "job/2", "job/3", "jobz", "k"] {
        held_token(log.apply(acquire(name, holder, false)));
    }
    let waiters: Vec<LeaseId> = (0..3).map(|_| grant(&mut log)).collect();
    for waiter in &waiters {
        log.apply(acquire("job/2", *waiter, true)).expect("queue");
    }
    let page = |after: &str, prefix: &str, limit: usize| -> Vec<String> {
        log.state
            .locks_where(after, prefix, limit, 2, |name| name != "job/3")
            .into_iter()
            .map(|(info, _)| info.name)
            .collect()
    };
    // An `after` before the prefix starts at the prefix; the prefix ends the page; `include`
    // leaves names out without ending it.
    assert_eq!(page("", "job/", 10), ["job/1", "job/2"]);
    assert_eq!(page("a", "job/", 10), ["job/1", "job/2"]);
    assert_eq!(page("job/1", "job/", 10), ["job/2"]);
    assert_eq!(page("job/2", "job/", 10), Vec::<String>::new());
    assert_eq!(page("", "", 3), ["a", "job/1", "job/2"]);
    assert_eq!(page("job/2", "", 10), ["jobz", "k"]);
    let listed = log.state.locks_where("job/1", "job/", 1, 2, |_| true);
    let (info, waiting) = &listed[0];
    assert_eq!(info.holder, holder);
    assert_eq!(
        info.waiters,
        waiters[..2],
        "at most max_waiters, in queue order"
    );
    assert_eq!(*waiting, 3);
}

// ---- keys ------------------------------------------------------------------------------------

#[test]
fn put_tracks_revisions_versions_and_rebinds_keys() {
    let mut log = Log::new(Limits::default());
    let a = grant(&mut log);
    let b = grant(&mut log);
    let first = log.rev();
    log.apply(put("k", "1", a)).expect("put");
    let second = log.rev();
    let response = log.apply(Command::Put {
        key: b"k".to_vec(),
        value: b"2".to_vec(),
        lease: b,
        guard: None,
        prev_kv: true,
    });
    let Ok(Outcome::Put { prev: Some(prev) }) = response else {
        panic!("expected prev kv, got {response:?}");
    };
    assert_eq!((prev.value.as_slice(), prev.lease), (&b"1"[..], a));
    let kv = log.state.get(b"k").expect("key");
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version, kv.lease),
        (first, second, 2, b)
    );
    assert_eq!(log.state.lease(a, false).expect("a").key_count, 0);
    assert_eq!(log.state.lease(b, false).expect("b").key_count, 1);
    // Revoking the old lease leaves the moved key alone.
    log.apply(Command::Revoke { id: a }).expect("revoke");
    assert!(log.state.get(b"k").is_some());
}

#[test]
fn put_with_unknown_lease_is_rejected() {
    let mut log = Log::new(Limits::default());
    assert_rejected(
        &mut log,
        put("k", "v", LeaseId::new(5)),
        Rejection::LeaseNotFound(LeaseId::new(5)),
    );
}

#[test]
fn key_and_value_sizes_are_bounded() {
    let limits = Limits {
        max_key_bytes: 4,
        max_value_bytes: 2,
        ..Limits::default()
    };
    let mut log = Log::new(limits);
    assert_rejected(
        &mut log,
        put("12345", "v", LeaseId::NONE),
        Rejection::LimitExceeded {
            limit: LimitKind::KeyBytes,
            max: 4,
            actual: 5,
        },
    );
    assert_rejected(
        &mut log,
        put("k", "123", LeaseId::NONE),
        Rejection::LimitExceeded {
            limit: LimitKind::ValueBytes,
            max: 2,
            actual: 3,
        },
    );
    assert_rejected(
        &mut log,
        put("", "v", LeaseId::NONE),
        Rejection::InvalidArgument("key must not be empty".into()),
    );
    assert!(log.apply(put("1234", "12", LeaseId::NONE)).is_ok());
}

#[test]
fn keys_per_lease_are_bounded() {
    let mut log = Log::new(Limits {
        max_keys_per_lease: 2,
        ..Limits::default()
    });
    let lease = grant(&mut log);
    log.apply(put("a", "v", lease)).expect("put");
    log.apply(put("b", "v", lease)).expect("put");
    // Overwriting a key already bound to the lease does not count again.
    log.apply(put("b", "w", lease)).expect("overwrite");
    assert_rejected(
        &mut log,
        put("c", "v", lease),
        Rejection::LimitExceeded {
            limit: LimitKind::KeysPerLease,
            max: 2,
            actual: 3,
        },
    );
}

#[test]
fn delete_selects_by_key_prefix_and_range() {
    let mut log = Log::new(Limits::default());
    for key in ["a", "ab", "abc", "b", "ba", "c"] {
        log.apply(put(key, "v", LeaseId::NONE)).expect("put");
    }
    let deleted = |r| match r {
        Ok(Outcome::Deleted { deleted, .. }) => deleted,
        other => panic!("delete failed: {other:?}"),
    };
    let delete = |selector| Command::Delete {
        selector,
        guard: None,
        prev_kv: false,
    };
    assert_eq!(
        deleted(log.apply(delete(KeySelector::Prefix(b"ab".to_vec())))),
        2
    );
    assert_eq!(
        deleted(log.apply(delete(KeySelector::Range {
            start: b"b".to_vec(),
            end: b"c".to_vec()
        }))),
        2
    );
    assert_eq!(
        deleted(log.apply(delete(KeySelector::Key(b"zz".to_vec())))),
        0
    );
    assert_eq!(keys(&log.state), vec![b"a".to_vec(), b"c".to_vec()]);
    assert_rejected(
        &mut log,
        delete(KeySelector::Range {
            start: b"c".to_vec(),
            end: b"a".to_vec(),
        }),
        Rejection::InvalidArgument(
            "range end must be greater than range start (or empty for \"to the end\")".into(),
        ),
    );
    assert_eq!(
        deleted(log.apply(delete(KeySelector::Range {
            start: b"b".to_vec(),
            end: Vec::new()
        }))),
        1
    );
}

#[test]
fn range_honours_limit_and_counts_all_matches() {
    let mut log = Log::new(Limits::default());
    for key in ["p/1", "p/2", "p/3", "q"] {
        log.apply(put(key, "v", LeaseId::NONE)).expect("put");
    }
    let result = log.state.range(&KeySelector::Prefix(b"p/".to_vec()), 2);
    assert_eq!(result.count, 3);
    assert!(result.more);
    assert_eq!(
        result
            .kvs
            .iter()
            .map(|kv| kv.key.clone())
            .collect::<Vec<_>>(),
        vec![b"p/1".to_vec(), b"p/2".to_vec()]
    );
}

/// A Range reads a copy of the key map taken under the state's lock and released at once, so
/// a long read never holds up apply: the copy stays as it was taken while the state moves on.
#[test]
fn keys_taken_for_a_read_stay_as_they_were_while_the_state_applies() {
    let mut log = Log::new(Limits::default());
    log.apply(put("p/1", "one", LeaseId::NONE)).expect("put");
    let keys = log.state.keys();
    log.apply(put("p/2", "two", LeaseId::NONE)).expect("put");
    log.apply(put("p/1", "uno", LeaseId::NONE)).expect("put");
    let then = keys.range(&KeySelector::Prefix(b"p/".to_vec()), 0);
    let pairs: Vec<(Vec<u8>, Vec<u8>)> =
        then.kvs.into_iter().map(|kv| (kv.key, kv.value)).collect();
    assert_eq!(pairs, vec![(b"p/1".to_vec(), b"one".to_vec())]);
    assert_eq!(
        log.state
            .range(&KeySelector::Prefix(b"p/".to_vec()), 0)
            .count,
        2
    );
}

/// A Range page is bounded by bytes as well as by its limit: it ends after the pair that crosses
/// `MAX_RANGE_PAGE_BYTES`, with `more` set and the count of every match.
#[test]
fn a_range_page_ends_at_its_byte_bound_and_says_more() {
    let mut log = Log::new(Limits::default());
    let value = vec![b'v'; 1024 * 1024];
    let within = (zaris_core::MAX_RANGE_PAGE_BYTES / value.len() as u64) as usize;
    for i in 0..within + 6 {
        log.apply(Command::Put {
            key: format!("big/{i:03}").into_bytes(),
            value: value.clone(),
            lease: LeaseId::NONE,
            guard: None,
            prev_kv: false,
        })
        .expect("put");
    }
    let page = log.state.range(&KeySelector::Prefix(b"big/".to_vec()), 0);
    assert_eq!(page.kvs.len(), within);
    assert!(page.more);
    assert_eq!(page.count, within as u64 + 6);
    let small = log.state.range(&KeySelector::Prefix(b"big/".to_vec()), 3);
    assert_eq!((small.kvs.len(), small.more), (3, true));
}

// ---- transactions ----------------------------------------------------------------------------

fn compare(key: &str, target: CompareTarget, op: CompareOp) -> Compare {
    Compare {
        key: key.into(),
        target,
        op,
    }
}

/// Every member applies a Txn and builds its answer: its reads share one budget of pairs
/// (`MAX_TXN_READ_KEYS`) and bytes (`MAX_TXN_READ_BYTES`), however many ranges it holds, and a
/// read that reaches it stops there with `more` set.
#[test]
fn a_txns_reads_together_stay_within_one_budget_of_pairs_and_bytes() {
    use zaris_core::{MAX_TXN_READ_BYTES, MAX_TXN_READ_KEYS};

    let mut log = Log::new(Limits::default());
    // Values of 1 MiB: the byte budget ends the reads after 64 pairs.
    let value = vec![b'v'; 1024 * 1024];
    let big = (MAX_TXN_READ_BYTES / value.len() as u64) as usize + 10;
    for i in 0..big {
        log.apply(Command::Put {
            key: format!("big/{i:04}").into_bytes(),
            value: value.clone(),
            lease: LeaseId::NONE,
            guard: None,
            prev_kv: false,
        })
        .expect("put");
    }
    let small = MAX_TXN_READ_KEYS as usize + 5;
    for i in 0..small {
        log.apply(put(&format!("small/{i:05}"), "x", LeaseId::NONE))
            .expect("put");
    }
    let read = |prefix: &str| TxnOp::Get {
        selector: KeySelector::Prefix(prefix.as_bytes().to_vec()),
        limit: 0,
    };
    let mut got = |command| match log.apply(command) {
        Ok(Outcome::Txn { results, .. }) => results
            .into_iter()
            .map(|result| match result {
                OpResult::Got { kvs, more } => (kvs.len(), more),
                other => panic!("not a read: {other:?}"),
            })
            .collect::<Vec<_>>(),
        other => panic!("not a txn: {other:?}"),
    };
    let txn = |success| {
        Command::Txn(Txn {
            compares: vec![],
            success,
            failure: vec![],
            guard: None,
        })
    };
    // The byte budget: the pair that crosses it is the last returned, by this read and by any.
    let by_bytes = got(txn(vec![read("big/"), read("big/"), read("nothing/")]));
    let within = (MAX_TXN_READ_BYTES / value.len() as u64) as usize;
    assert_eq!(by_bytes, vec![(within, true), (0, true), (0, false)]);
    // The pair budget, shared by two reads of the same keys.
    let by_pairs = got(txn(vec![read("small/"), read("small/")]));
    assert_eq!(
        by_pairs,
        vec![(MAX_TXN_READ_KEYS as usize, true), (0, true)]
    );
    // A read's own limit ends it first, and says whether more matched.
    let limited = got(txn(vec![
        TxnOp::Get {
            selector: KeySelector::Prefix(b"small/".to_vec()),
            limit: 3,
        },
        TxnOp::Get {
            selector: KeySelector::Prefix(b"small/0000".to_vec()),
            limit: 10,
        },
    ]));
    assert_eq!(limited, vec![(3, true), (10, false)]);
}

#[test]
fn txn_picks_a_branch_from_its_compares() {
    let mut log = Log::new(Limits::default());
    log.apply(put("k", "1", LeaseId::NONE)).expect("put");
    let txn = |compares| {
        Command::Txn(Txn {
            compares,
            success: vec![TxnOp::Put {
                key: b"won".to_vec(),
                value: b"y".to_vec(),
                lease: LeaseId::NONE,
            }],
            failure: vec![TxnOp::Get {
                selector: KeySelector::Key(b"k".to_vec()),
                limit: 0,
            }],
            guard: None,
        })
    };
    let response = log.apply(txn(vec![
        compare("k", CompareTarget::Value(b"1".to_vec()), CompareOp::Equal),
        compare("k", CompareTarget::Version(1), CompareOp::Equal),
        compare("missing", CompareTarget::Version(0), CompareOp::Equal),
        compare(
            "missing",
            CompareTarget::CreateRevision(Revision::new(1)),
            CompareOp::Less,
        ),
    ]));
    assert_eq!(
        response,
        Ok(Outcome::Txn {
            succeeded: true,
            results: vec![OpResult::Put { prev: None }]
        })
    );
    // A value compare against a missing key is false whatever the operator.
    let response = log.apply(txn(vec![compare(
        "missing",
        CompareTarget::Value(Vec::new()),
        CompareOp::NotEqual,
    )]));
    let Ok(Outcome::Txn {
        succeeded: false,
        results,
    }) = response
    else {
        panic!("expected failure branch, got {response:?}");
    };
    assert!(matches!(&results[..], [OpResult::Got { kvs, more: false }] if kvs.len() == 1));
    let response = log.apply(txn(vec![
        compare(
            "k",
            CompareTarget::ModRevision(Revision::new(100)),
            CompareOp::Greater,
        ),
        compare("k", CompareTarget::Lease(LeaseId::NONE), CompareOp::Equal),
    ]));
    assert!(matches!(
        response,
        Ok(Outcome::Txn {
            succeeded: false,
            ..
        })
    ));
}

#[test]
fn txn_branch_is_all_or_nothing() {
    let mut log = Log::new(Limits::default());
    let command = Command::Txn(Txn {
        compares: vec![],
        success: vec![
            TxnOp::Put {
                key: b"a".to_vec(),
                value: b"1".to_vec(),
                lease: LeaseId::NONE,
            },
            TxnOp::Put {
                key: b"b".to_vec(),
                value: b"1".to_vec(),
                lease: LeaseId::new(77),
            },
        ],
        failure: vec![],
        guard: None,
    });
    assert_rejected(
        &mut log,
        command,
        Rejection::LeaseNotFound(LeaseId::new(77)),
    );
    assert!(keys(&log.state).is_empty());
}

#[test]
fn txn_size_is_bounded() {
    let mut log = Log::new(Limits {
        max_txn_ops: 2,
        ..Limits::default()
    });
    let op = TxnOp::Delete {
        selector: KeySelector::Key(b"k".to_vec()),
    };
    assert_rejected(
        &mut log,
        Command::Txn(Txn {
            compares: vec![compare("k", CompareTarget::Version(0), CompareOp::Equal)],
            success: vec![op.clone()],
            failure: vec![op],
            guard: None,
        }),
        Rejection::LimitExceeded {
            limit: LimitKind::TxnOps,
            max: 2,
            actual: 3,
        },
    );
}

// ---- locks -----------------------------------------------------------------------------------

#[test]
fn lock_queue_is_fifo_and_passes_with_a_higher_token_on_revoke() {
    let mut log = Log::new(Limits::default());
    let (a, b, c) = (grant(&mut log), grant(&mut log), grant(&mut log));
    let first = held_token(log.apply(acquire("job", a, true)));
    assert_eq!(
        log.apply(acquire("job", b, true)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 1 }))
    );
    assert_eq!(
        log.apply(acquire("job", c, true)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 2 }))
    );
    // Asking again is idempotent.
    assert_eq!(
        log.apply(acquire("job", c, true)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 2 }))
    );
    assert_eq!(held_token(log.apply(acquire("job", a, true))), first);
    assert_eq!(
        log.apply(acquire("job", c, false)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 2 }))
    );

    let rev = log.rev();
    let applied = log.apply_full(Command::Revoke { id: a });
    assert_eq!(
        applied.effects.locks,
        vec![
            LockEffect::Released {
                name: "job".into(),
                lease: a,
                token: first
            },
            LockEffect::Acquired {
                name: "job".into(),
                lease: b,
                token: FencingToken::acquired_at(rev)
            },
        ]
    );
    let lock = log.state.lock("job").expect("lock");
    assert_eq!(
        (lock.holder, lock.token, lock.waiters),
        (b, FencingToken::acquired_at(rev), vec![c])
    );
    assert!(FencingToken::acquired_at(rev) > first);
}

#[test]
fn revoking_holder_and_next_waiter_together_hands_the_lock_over_once() {
    let mut log = Log::new(Limits::default());
    let (a, b, c) = (grant(&mut log), grant(&mut log), grant(&mut log));
    held_token(log.apply(acquire("job", a, true)));
    log.apply(acquire("job", b, true)).expect("queue");
    log.apply(acquire("job", c, true)).expect("queue");
    let rev = log.rev();
    let applied = log.apply_full(Command::Expire {
        leases: vec![
            ExpiredLease {
                id: a,
                observed_renewed_revision: Revision::new(u64::MAX),
            },
            ExpiredLease {
                id: b,
                observed_renewed_revision: Revision::new(u64::MAX),
            },
        ],
    });
    let acquired: Vec<_> = applied
        .effects
        .locks
        .iter()
        .filter(|e| matches!(e, LockEffect::Acquired { .. }))
        .collect();
    assert_eq!(
        acquired,
        vec![&LockEffect::Acquired {
            name: "job".into(),
            lease: c,
            token: FencingToken::acquired_at(rev)
        }]
    );
}

#[test]
fn try_lock_reports_busy_with_the_holder() {
    let mut log = Log::new(Limits::default());
    let (a, b) = (grant(&mut log), grant(&mut log));
    let token = held_token(log.apply(acquire("m", a, false)));
    assert_eq!(
        log.apply(acquire("m", b, false)),
        Ok(Outcome::Lock(LockOutcome::Busy { holder: a, token }))
    );
}

#[test]
fn lock_needs_a_live_lease_and_a_valid_name() {
    let mut log = Log::new(Limits {
        max_lock_name_bytes: 3,
        ..Limits::default()
    });
    assert_rejected(
        &mut log,
        acquire("m", LeaseId::new(9), true),
        Rejection::LeaseNotFound(LeaseId::new(9)),
    );
    assert_rejected(
        &mut log,
        acquire("long", LeaseId::new(9), true),
        Rejection::LimitExceeded {
            limit: LimitKind::LockNameBytes,
            max: 3,
            actual: 4,
        },
    );
    assert_rejected(
        &mut log,
        acquire("", LeaseId::new(9), true),
        Rejection::InvalidArgument("lock name must not be empty".into()),
    );
    assert_rejected(
        &mut log,
        acquire("m", LeaseId::NONE, true),
        Rejection::InvalidArgument("lease id 0 is reserved for \"no lease\"".into()),
    );
}

#[test]
fn waiters_per_lock_are_bounded() {
    let mut log = Log::new(Limits {
        max_waiters_per_lock: 1,
        ..Limits::default()
    });
    let (a, b, c) = (grant(&mut log), grant(&mut log), grant(&mut log));
    held_token(log.apply(acquire("m", a, true)));
    log.apply(acquire("m", b, true)).expect("queue");
    assert_rejected(
        &mut log,
        acquire("m", c, true),
        Rejection::LimitExceeded {
            limit: LimitKind::WaitersPerLock,
            max: 1,
            actual: 2,
        },
    );
}

#[test]
fn release_is_fenced_by_token() {
    let mut log = Log::new(Limits::default());
    let (a, b) = (grant(&mut log), grant(&mut log));
    let token = held_token(log.apply(acquire("m", a, true)));
    log.apply(acquire("m", b, true)).expect("queue");
    let release = |lease, token| Command::LockRelease {
        name: "m".into(),
        lease,
        token,
    };
    for (lease, stale) in [(a, FencingToken::new(token.get() - 1)), (b, token)] {
        assert_rejected(
            &mut log,
            release(lease, stale),
            Rejection::NotHolder {
                lock: "m".into(),
                lease,
                token: stale,
            },
        );
    }
    let rev = log.rev();
    assert_eq!(
        log.apply(release(a, token)),
        Ok(Outcome::Unlocked {
            next: Some((b, FencingToken::acquired_at(rev)))
        })
    );
    // The old holder's token no longer releases anything: the successor keeps the lock.
    assert_rejected(
        &mut log,
        release(a, token),
        Rejection::NotHolder {
            lock: "m".into(),
            lease: a,
            token,
        },
    );
    assert_eq!(
        log.apply(release(b, FencingToken::acquired_at(rev))),
        Ok(Outcome::Unlocked { next: None })
    );
    assert!(log.state.lock("m").is_none());
}

#[test]
fn cancel_withdraws_a_waiter_or_reports_the_lock_held() {
    let mut log = Log::new(Limits::default());
    let (a, b) = (grant(&mut log), grant(&mut log));
    let token = held_token(log.apply(acquire("m", a, true)));
    log.apply(acquire("m", b, true)).expect("queue");
    let cancel = |lease| Command::LockCancel {
        name: "m".into(),
        lease,
    };
    assert_eq!(
        log.apply(cancel(b)),
        Ok(Outcome::Cancelled(CancelOutcome::Withdrawn))
    );
    assert_eq!(
        log.apply(cancel(b)),
        Ok(Outcome::Cancelled(CancelOutcome::NotWaiting))
    );
    assert_eq!(
        log.apply(cancel(a)),
        Ok(Outcome::Cancelled(CancelOutcome::Held { token }))
    );
}

/// A wait given back before its Lock arrived: the withdrawal finds nothing, and the Lock,
/// proposed after it, must not queue the lease (it would hold the lock in turn, with nobody to
/// release it). A Lock sent after the withdrawal, or unchecked, queues as before.
#[test]
fn a_lock_overtaken_by_a_later_unlock_of_its_lease_changes_nothing() {
    let mut log = Log::new(Limits::default());
    let (a, b) = (grant(&mut log), grant(&mut log));
    held_token(log.apply(acquire("m", a, true)));
    let sent_after = log.rev();
    let unrelated = grant(&mut log);
    log.apply(Command::Revoke { id: unrelated })
        .expect("an unrelated entry");
    let withdrawal = log.rev();
    assert_eq!(
        log.apply(Command::LockCancel {
            name: "m".into(),
            lease: b,
        }),
        Ok(Outcome::Cancelled(CancelOutcome::NotWaiting))
    );
    let late = log.apply(acquire_sent_after("m", b, sent_after));
    assert_eq!(late, Ok(Outcome::Lock(LockOutcome::Overtaken)));
    assert_eq!(log.state.lock("m").expect("held").waiters, vec![]);
    // Sent as of the withdrawal's own revision: the caller had seen it, so it is not overtaken.
    assert_eq!(
        log.apply(acquire_sent_after("m", b, withdrawal)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 1 }))
    );
    // Any other lease's Lock is unaffected, checked or not.
    let c = grant(&mut log);
    assert_eq!(
        log.apply(acquire_sent_after("m", c, sent_after)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 2 }))
    );
}

/// A release counts as an Unlock too: a copy of the Lock that got the lock, held up in the
/// network past the release, must not take the lock again; and the lease's epoch goes with it.
#[test]
fn a_release_overtakes_earlier_locks_of_its_lease_until_the_lease_ends() {
    let mut log = Log::new(Limits::default());
    let a = grant(&mut log);
    let sent_after = log.rev();
    let token = held_token(log.apply(acquire_sent_after("m", a, sent_after)));
    log.apply(Command::LockRelease {
        name: "m".into(),
        lease: a,
        token,
    })
    .expect("release");
    assert_eq!(
        log.apply(acquire_sent_after("m", a, sent_after)),
        Ok(Outcome::Lock(LockOutcome::Overtaken))
    );
    assert_eq!(log.state.lock("m"), None, "nobody holds it");
    // Another lock of the same lease is not overtaken by it: a lease may hold many at once.
    assert!(matches!(
        log.apply(acquire_sent_after("other", a, sent_after)),
        Ok(Outcome::Lock(LockOutcome::Held { .. }))
    ));
    // A refused release (a stale token) changes nothing, the epoch included.
    let now = log.rev();
    let again = held_token(log.apply(acquire_sent_after("m", a, now)));
    assert_rejected(
        &mut log,
        Command::LockRelease {
            name: "m".into(),
            lease: a,
            token,
        },
        Rejection::NotHolder {
            lock: "m".into(),
            lease: a,
            token,
        },
    );
    assert!(matches!(
        log.apply(acquire_sent_after("n", a, now)),
        Ok(Outcome::Lock(LockOutcome::Held { .. }))
    ));
    assert!(again > token);
    // A withdrawal for a lease that does not exist records nothing (nothing to grow the state):
    // `Log` checks the invariants after every entry, and an epoch of a dead lease breaks one.
    log.apply(Command::Revoke { id: a }).expect("revoke");
    log.apply(Command::LockCancel {
        name: "m".into(),
        lease: a,
    })
    .expect("withdraw");
    let restored = State::restore(&log.state.snapshot().expect("snapshot")).expect("restore");
    assert_eq!(restored, log.state);
}

/// A lease remembers the last Unlock of at most `MAX_NAMED_EPOCHS` lock names apart; an older
/// name counts as unlocked at the newest revision forgotten (never less overtaken than it
/// was), and so does a name the quota leaves no room for. The footprint follows.
#[test]
fn lock_epochs_are_kept_per_name_within_a_bound_and_the_quota() {
    use zaris_core::MAX_NAMED_EPOCHS;
    let mut log = Log::new(Limits::default());
    let a = grant(&mut log);
    let cancel = |name: String| Command::LockCancel { name, lease: a };
    let mut unlocked_at = Vec::new();
    for i in 0..=MAX_NAMED_EPOCHS {
        unlocked_at.push(log.rev());
        log.apply(cancel(format!("l{i}"))).expect("withdraw");
    }
    assert_eq!(
        log.state.footprint_bytes(),
        log.state.recounted_footprint_bytes()
    );
    // l0 was forgotten: it counts as unlocked where it was (the floor), nothing later.
    let before_l0 = unlocked_at[0].prev();
    assert_eq!(
        log.apply(acquire_sent_after("l0", a, before_l0)),
        Ok(Outcome::Lock(LockOutcome::Overtaken))
    );
    assert!(matches!(
        log.apply(acquire_sent_after("l0", a, unlocked_at[0])),
        Ok(Outcome::Lock(LockOutcome::Held { .. }))
    ));
    // l1 is still remembered apart: a Lock sent after its own Unlock goes through, though
    // later names were unlocked since.
    assert!(matches!(
        log.apply(acquire_sent_after("l1", a, unlocked_at[1])),
        Ok(Outcome::Lock(LockOutcome::Held { .. }))
    ));
    assert_eq!(
        log.apply(acquire_sent_after("l2", a, unlocked_at[1])),
        Ok(Outcome::Lock(LockOutcome::Overtaken))
    );

    // With no room left, a new name moves the floor: every earlier Lock of the lease is
    // overtaken, and the state does not grow.
    let quota = zaris_core::limits::MIN_STATE_BYTES;
    let mut full = Log::new(Limits {
        max_state_bytes: quota,
        ..Limits::default()
    });
    let b = grant(&mut full);
    // A value that fills the quota to the byte (a key costs its bytes twice and 96 more).
    let room = quota - full.state.footprint_bytes() - 2 * 4 - 96;
    full.apply(Command::Put {
        key: b"fill".to_vec(),
        value: vec![0; usize::try_from(room).expect("small")],
        lease: LeaseId::NONE,
        guard: None,
        prev_kv: false,
    })
    .expect("fill");
    assert_eq!(full.state.footprint_bytes(), quota);
    // Sent before the withdrawal below (which applies at `full.rev()`).
    let sent_after = full.rev().prev();
    let before = full.state.footprint_bytes();
    full.apply(Command::LockCancel {
        name: "x".into(),
        lease: b,
    })
    .expect("withdraw");
    assert_eq!(full.state.footprint_bytes(), before);
    assert_eq!(
        full.apply(acquire_sent_after("y", b, sent_after)),
        Ok(Outcome::Lock(LockOutcome::Overtaken))
    );
    assert_eq!(
        full.state.footprint_bytes(),
        full.state.recounted_footprint_bytes()
    );
}

#[test]
fn guarded_writes_apply_only_with_the_current_token() {
    let mut log = Log::new(Limits::default());
    let (a, b) = (grant(&mut log), grant(&mut log));
    let old = held_token(log.apply(acquire("m", a, true)));
    log.apply(acquire("m", b, true)).expect("queue");
    assert!(log.apply(guarded_put("x", "m", old)).is_ok());
    log.apply(Command::Revoke { id: a }).expect("revoke");
    let new = log.state.lock("m").expect("lock").token;
    // A's late write with its old token is refused by the store itself.
    assert_rejected(
        &mut log,
        guarded_put("x", "m", old),
        Rejection::GuardFailed {
            lock: "m".into(),
            token: old,
            current: Some(new),
        },
    );
    assert!(log.apply(guarded_put("x", "m", new)).is_ok());
    assert_rejected(
        &mut log,
        guarded_put("x", "free", FencingToken::new(1)),
        Rejection::GuardFailed {
            lock: "free".into(),
            token: FencingToken::new(1),
            current: None,
        },
    );
    let guarded_delete = Command::Delete {
        selector: KeySelector::Key(b"x".to_vec()),
        guard: Some(Guard {
            lock: "m".into(),
            token: old,
        }),
        prev_kv: false,
    };
    assert_rejected(
        &mut log,
        guarded_delete,
        Rejection::GuardFailed {
            lock: "m".into(),
            token: old,
            current: Some(new),
        },
    );
    let guarded_txn = Command::Txn(Txn {
        compares: vec![],
        success: vec![TxnOp::Delete {
            selector: KeySelector::Key(b"x".to_vec()),
        }],
        failure: vec![],
        guard: Some(Guard {
            lock: "m".into(),
            token: old,
        }),
    });
    assert_rejected(
        &mut log,
        guarded_txn,
        Rejection::GuardFailed {
            lock: "m".into(),
            token: old,
            current: Some(new),
        },
    );
}

// ---- log mechanics ---------------------------------------------------------------------------

#[test]
fn a_retried_request_is_applied_once() {
    let mut log = Log::new(Limits::default());
    let id = RequestId {
        client_id: 7,
        seq: 1,
        seen_revision: Revision::ZERO,
    };
    let request = Request::with_id(
        id,
        Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: TTL,
        },
    );
    let first = log.apply_request(&request);
    let second = log.apply_request(&request);
    assert_eq!(first.response, second.response);
    assert!(second.effects.is_empty());
    assert_eq!(log.state.lease_count(), 1);
}

#[test]
fn dedup_table_evicts_the_oldest_id() {
    let mut log = Log::new(Limits {
        dedup_capacity: 2,
        ..Limits::default()
    });
    let request = |seq| {
        Request::with_id(
            RequestId {
                client_id: 1,
                seq,
                seen_revision: Revision::ZERO,
            },
            Command::Grant {
                id: LeaseId::NONE,
                ttl_ms: TTL,
            },
        )
    };
    for seq in 1..=3 {
        log.apply_request(&request(seq));
    }
    let id = |seq| RequestId {
        client_id: 1,
        seq,
        seen_revision: Revision::ZERO,
    };
    assert!(log.state.remembered(&id(1)).is_none());
    assert!(log.state.remembered(&id(2)).is_some());
    assert!(log.state.remembered(&id(3)).is_some());
}

/// Issue 9, hole 4: at a few thousand identified writes per second, a retry whose id had been
/// evicted was applied a second time. Now a request whose id may have been forgotten is refused.
#[test]
fn a_retry_of_a_forgotten_id_is_refused_not_applied_again() {
    let mut log = Log::new(Limits {
        dedup_capacity: 2,
        ..Limits::default()
    });
    let first = Request::with_id(
        RequestId {
            client_id: 1,
            seq: 1,
            seen_revision: Revision::ZERO,
        },
        Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: TTL,
        },
    );
    let applied_at = log.rev();
    assert!(log.apply_request(&first).response.is_ok());
    // Other clients' writes push the first id out of the table.
    for seq in 1..=2 {
        let other = Request::with_id(
            RequestId {
                client_id: 2,
                seq,
                seen_revision: Revision::new(log.rev().get() - 1),
            },
            put("k", "v", LeaseId::NONE),
        );
        assert!(log.apply_request(&other).response.is_ok());
    }
    assert!(
        log.state
            .remembered(&first.request_id.expect("id"))
            .is_none()
    );
    let (_, _, forgotten_through) = log.state.dedup_usage();
    assert_eq!(forgotten_through, applied_at);
    // The retry is refused, and changes nothing: still one lease.
    let mut unchanged = log.state.clone();
    unchanged.apply_noop(log.rev());
    assert_eq!(
        log.apply_request(&first).response,
        Err(Rejection::RequestIdForgotten {
            forgotten_through: applied_at,
            applied_at: None,
        })
    );
    assert_eq!(log.state.lease_count(), 1);
    assert_eq!(log.state, unchanged);
    // A request issued after what was forgotten is applied (a first attempt, or the same id
    // resent by a client that knows no earlier attempt reached the log).
    let fresh = Request::with_id(
        RequestId {
            client_id: 3,
            seq: 1,
            seen_revision: forgotten_through,
        },
        Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: TTL,
        },
    );
    assert!(matches!(
        log.apply_request(&fresh).response,
        Ok(Outcome::Granted { .. })
    ));
}

/// Issue 9, hole 4: the table kept whole responses and was bounded by count only, so a
/// transaction's reads could pin megabytes per entry on every replica and in every snapshot.
#[test]
fn the_dedup_table_is_bounded_by_bytes_and_keeps_large_responses_only_as_applied() {
    let max_bytes = zaris_core::limits::MIN_DEDUP_MAX_BYTES;
    let mut log = Log::new(Limits {
        dedup_max_bytes: max_bytes,
        ..Limits::default()
    });
    let value = vec![b'x'; 100_000];
    log.apply(Command::Put {
        key: b"big".to_vec(),
        value: value.clone(),
        lease: LeaseId::NONE,
        guard: None,
        prev_kv: false,
    })
    .expect("put");
    let id = RequestId {
        client_id: 9,
        seq: 1,
        seen_revision: Revision::new(log.rev().get() - 1),
    };
    // A transaction that reads the big value: its response is far above 1/256 of the bound.
    let read_big = Request::with_id(
        id,
        Command::Txn(Txn {
            compares: vec![],
            success: vec![TxnOp::Get {
                selector: KeySelector::Key(b"big".to_vec()),
                limit: 0,
            }],
            failure: vec![],
            guard: None,
        }),
    );
    let applied_at = log.rev();
    let first = log.apply_request(&read_big).response;
    assert!(matches!(
        first,
        Ok(Outcome::Txn {
            succeeded: true,
            ..
        })
    ));
    let (entries, bytes, _) = log.state.dedup_usage();
    assert_eq!(entries, 1);
    assert!(
        bytes < 1_000,
        "a large response must not be kept: {bytes} bytes"
    );
    assert_eq!(
        log.apply_request(&read_big).response,
        Err(Rejection::RequestIdForgotten {
            forgotten_through: Revision::ZERO,
            applied_at: Some(applied_at),
        })
    );
    // Many smaller responses (prev_kv of a 100-byte value, kept whole): the byte bound evicts
    // before the count bound would.
    for seq in 2..2_000 {
        let request = Request::with_id(
            RequestId {
                client_id: 9,
                seq,
                seen_revision: Revision::new(log.rev().get() - 1),
            },
            Command::Put {
                key: b"p".to_vec(),
                value: vec![b'y'; 100],
                lease: LeaseId::NONE,
                guard: None,
                prev_kv: true,
            },
        );
        log.apply_request(&request).response.expect("put");
        let (entries, bytes, _) = log.state.dedup_usage();
        assert!(bytes <= max_bytes, "{bytes} > {max_bytes}");
        assert!(entries < 2_000);
    }
    let (entries, _, forgotten_through) = log.state.dedup_usage();
    assert!(
        entries < 300,
        "bounded by bytes, not by the count: {entries}"
    );
    let latest = RequestId {
        client_id: 9,
        seq: 1_999,
        seen_revision: Revision::ZERO,
    };
    assert!(
        matches!(
            log.state.remembered(&latest),
            Some(Ok(Outcome::Put { prev: Some(_) }))
        ),
        "small responses are kept whole"
    );
    assert!(forgotten_through > applied_at);
    log.state.check_invariants().expect("invariants");
}

#[test]
fn replayed_entries_are_ignored() {
    let mut log = Log::new(Limits::default());
    grant(&mut log);
    let before = log.state.clone();
    let applied = log.state.apply(
        Revision::new(1),
        &Request::new(put("k", "v", LeaseId::NONE)),
    );
    assert_eq!(applied.response, Ok(Outcome::Ignored));
    assert_eq!(log.state, before);
}

#[test]
fn rejected_requests_are_remembered_too() {
    let mut log = Log::new(Limits::default());
    let request = Request::with_id(
        RequestId {
            client_id: 2,
            seq: 9,
            seen_revision: Revision::ZERO,
        },
        Command::Revoke {
            id: LeaseId::new(5),
        },
    );
    assert_eq!(
        log.apply_request(&request).response,
        Err(Rejection::LeaseNotFound(LeaseId::new(5)))
    );
    grant(&mut log);
    grant(&mut log);
    grant(&mut log);
    grant(&mut log);
    grant(&mut log);
    // Lease 5 exists now, but the retry returns the answer the original got.
    assert_eq!(
        log.apply_request(&request).response,
        Err(Rejection::LeaseNotFound(LeaseId::new(5)))
    );
    assert!(log.state.lease(LeaseId::new(5), false).is_some());
}

#[test]
fn limits_check_catches_nonsense() {
    assert!(Limits::default().check().is_ok());
    let bad = Limits {
        min_ttl_ms: DurationMs::new(10),
        max_ttl_ms: DurationMs::new(5),
        ..Limits::default()
    };
    assert!(bad.check().is_err());
    let zero = Limits {
        max_txn_ops: 0,
        ..Limits::default()
    };
    assert_eq!(
        zero.check(),
        Err("max_txn_ops must be at least 1".to_string())
    );
}

#[test]
fn rejection_messages_name_the_limit() {
    let message = Rejection::LimitExceeded {
        limit: LimitKind::KeyBytes,
        max: 4096,
        actual: 5000,
    }
    .to_string();
    assert_eq!(message, "limit max_key_bytes exceeded: 5000 > 4096");
}

#[test]
fn limits_are_replicated_state() {
    let mut log = Log::new(Limits::default());
    assert!(!log.state.limits_set());
    let tight = Limits {
        max_key_bytes: 2,
        dedup_capacity: 1,
        ..Limits::default()
    };
    assert_eq!(
        log.apply(Command::SetLimits(tight.clone())),
        Ok(Outcome::LimitsSet)
    );
    assert!(log.state.limits_set());
    assert_eq!(log.state.limits(), &tight);
    assert_rejected(
        &mut log,
        put("abc", "v", LeaseId::NONE),
        Rejection::LimitExceeded {
            limit: LimitKind::KeyBytes,
            max: 2,
            actual: 3,
        },
    );
    let nonsense = Limits {
        min_ttl_ms: DurationMs::new(10),
        max_ttl_ms: DurationMs::new(1),
        ..Limits::default()
    };
    assert_rejected(
        &mut log,
        Command::SetLimits(nonsense),
        Rejection::InvalidArgument(
            "limits: TTL bounds are inconsistent: min_ttl_ms=10 max_ttl_ms=1".into(),
        ),
    );
    // The limits travel in snapshots.
    let restored = State::restore(&log.state.snapshot().expect("snapshot")).expect("restore");
    assert_eq!(restored.limits(), &tight);
}

// ---- the state quota -------------------------------------------------------------------------

fn big_put(key: &str, value_bytes: usize, lease: LeaseId) -> Command {
    Command::Put {
        key: key.into(),
        value: vec![b'v'; value_bytes],
        lease,
        guard: None,
        prev_kv: false,
    }
}

#[test]
fn a_grant_with_keys_is_refused_whole_when_its_keys_would_overrun_the_quota() {
    let limits = Limits {
        max_state_bytes: zaris_core::limits::MIN_STATE_BYTES,
        ..Limits::default()
    };
    let mut log = Log::new(limits);
    let taken = grant(&mut log);
    // Leave room for a lease (256 bytes) but not for a lease and a key.
    let room = zaris_core::limits::MIN_STATE_BYTES - log.state.footprint_bytes();
    let pad = room - 3 - 96 - 300;
    log.apply(big_put("pad", pad as usize, LeaseId::NONE))
        .expect("fill up to 300 bytes below the quota");
    let mut unchanged = log.state.clone();
    unchanged.apply_noop(log.rev());
    let response = log.apply(grant_bound(0, &[("k", &"v".repeat(100))]));
    assert!(response.as_ref().is_err_and(quota_full), "{response:?}");
    assert_eq!(
        log.state, unchanged,
        "a refused grant left something behind"
    );
    // A used id is refused as such, as for a plain grant, even though the quota is full too.
    let response = log.apply(grant_bound(taken.get(), &[("k", &"v".repeat(100))]));
    assert!(
        matches!(response, Err(Rejection::LeaseIdUsed { id, .. }) if id == taken),
        "{response:?}"
    );
    assert!(matches!(
        log.apply(grant_bound(0, &[])),
        Ok(Outcome::Granted { .. })
    ));
}

fn quota_full(rejection: &Rejection) -> bool {
    matches!(
        rejection,
        Rejection::LimitExceeded {
            limit: LimitKind::StateBytes,
            ..
        }
    )
}

#[test]
fn the_quota_refuses_growth_past_it_and_always_lets_a_full_state_shrink() {
    let limits = Limits {
        max_state_bytes: zaris_core::limits::MIN_STATE_BYTES,
        ..Limits::default()
    };
    let mut log = Log::new(limits);
    let lease = grant(&mut log);
    log.apply(Command::Auth(zaris_core::auth::AuthCommand::UserAdd {
        name: "u".into(),
        token_sha256: Some([1; 32]),
    }))
    .expect("a user");
    log.apply(big_put("a", 600_000, lease))
        .expect("the first fits");
    let before = log.state.footprint_bytes();

    // Every way to grow is refused while full, and changes nothing.
    let refused = log
        .apply(big_put("b", 600_000, LeaseId::NONE))
        .expect_err("a second does not");
    assert!(quota_full(&refused), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        format!(
            "limit max_state_bytes exceeded: {} > {}",
            before + 600_000 + 2 + 96,
            zaris_core::limits::MIN_STATE_BYTES
        )
    );
    // Up to 50 bytes below the quota: less than any lease, lock place or key takes.
    let room = zaris_core::limits::MIN_STATE_BYTES - log.state.footprint_bytes();
    let pad = room - 2 * 3 - 96 - 50;
    log.apply(big_put("pad", pad as usize, LeaseId::NONE))
        .expect("fill up to the quota");
    assert_eq!(
        log.state.footprint_bytes(),
        zaris_core::limits::MIN_STATE_BYTES - 50
    );
    for grow in [
        Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: TTL,
        },
        acquire("l", lease, true),
        big_put("c", 1_000, LeaseId::NONE),
        grant_bound(0, &[("c", "v")]),
        Command::Txn(Txn {
            compares: Vec::new(),
            success: vec![TxnOp::Put {
                key: b"c".to_vec(),
                value: vec![b'v'; 1_000],
                lease: LeaseId::NONE,
            }],
            failure: Vec::new(),
            guard: None,
        }),
        Command::Auth(zaris_core::auth::AuthCommand::RoleAdd {
            name: "r".repeat(100),
        }),
    ] {
        let mut unchanged = log.state.clone();
        unchanged.apply_noop(log.rev());
        let response = log.apply(grow.clone());
        assert!(
            response.as_ref().is_err_and(quota_full),
            "{grow:?}: {response:?}"
        );
        assert_eq!(log.state, unchanged, "{grow:?} changed a full state");
    }
    // What does not grow goes through: taking a (leaked) token away, a smaller value, a
    // delete, the lease's end.
    log.apply(Command::Auth(zaris_core::auth::AuthCommand::UserSetToken {
        name: "u".into(),
        token_sha256: None,
    }))
    .expect("a token can always be taken away");
    log.apply(big_put("a", 100, lease))
        .expect("a smaller value replaces a larger one");
    log.apply(Command::Delete {
        selector: KeySelector::Key(b"pad".to_vec()),
        guard: None,
        prev_kv: false,
    })
    .expect("delete");
    log.apply(big_put("b", 600_000, LeaseId::NONE))
        .expect("room again");
    log.apply(Command::Revoke { id: lease }).expect("revoke");
    assert_eq!(
        log.state.footprint_bytes(),
        log.state.recounted_footprint_bytes()
    );
}

#[test]
fn limits_below_the_state_size_are_refused() {
    let mut log = Log::new(Limits::default());
    for key in ["a", "b"] {
        log.apply(big_put(key, 600_000, LeaseId::NONE))
            .expect("put");
    }
    let tight = Limits {
        max_state_bytes: zaris_core::limits::MIN_STATE_BYTES,
        ..Limits::default()
    };
    let response = log.apply(Command::SetLimits(tight));
    assert!(
        matches!(&response, Err(Rejection::InvalidArgument(m)) if m.contains("below the state's current size")),
        "{response:?}"
    );
    assert!(!log.state.limits_set());
}

/// The bound a receiving node holds a snapshot to: at most the footprint plus the
/// de-duplication table's bound and a fixed part. Here with no remembered requests, at the
/// widest integer encodings (revisions near 2^54 and lease ids near 2^62, both past 2^32, where
/// bincode's varints take their widest form), many small records (where the per-record overheads
/// dominate) and every kind of record.
#[test]
fn a_snapshot_is_never_larger_than_the_footprint_and_the_fixed_part() {
    let mut log = Log::new(Limits::default());
    // Lease ids move 256 (`MAX_BATCH_REQUESTS`) per revision skipped.
    log.state.skip_ahead(1 << 54);
    log.next_index = (1 << 54) + 1;
    let mut leases = Vec::new();
    for _ in 0..50 {
        leases.push(grant(&mut log));
    }
    for (i, lease) in leases.iter().enumerate() {
        for k in 0..20 {
            log.apply(big_put(&format!("{i}/{k}"), 0, *lease))
                .expect("put");
        }
        log.apply(big_put(&format!("free/{i}"), 3, LeaseId::NONE))
            .expect("put");
        for name in ["x", "lock-with-a-longer-name"] {
            log.apply(acquire(&format!("{name}{}", i % 5), *lease, true))
                .expect("lock");
        }
    }
    for (user, token) in [("alice", 7), ("bob", 8)] {
        log.apply(Command::Auth(zaris_core::auth::AuthCommand::UserAdd {
            name: user.into(),
            token_sha256: Some([token; 32]),
        }))
        .expect("user");
    }
    let state = &log.state;
    let encoded = state.snapshot().expect("snapshot").len() as u64;
    let limits = state.limits();
    let fixed = limits.max_snapshot_bytes()
        - limits.max_state_bytes
        - 2 * limits.dedup_max_bytes
        - u64::from(limits.dedup_capacity) * 64;
    assert!(
        encoded <= state.footprint_bytes() + fixed,
        "{encoded} bytes encoded, footprint {} + {fixed}",
        state.footprint_bytes()
    );
    // And the charge is not wildly above the encoding either (a quota users can reason about).
    assert!(
        state.footprint_bytes() < 4 * encoded,
        "{}",
        state.footprint_bytes()
    );
    assert_eq!(state.footprint_bytes(), state.recounted_footprint_bytes());
}
