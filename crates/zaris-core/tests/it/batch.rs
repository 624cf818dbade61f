//! `Command::Batch`: many clients' requests in one entry (group commit). Each request is applied
//! and answered on its own at the entry's revision; a malformed batch changes nothing.

use zaris_core::{
    Command, EventKind, LeaseEffect, LeaseId, Limits, LockEffect, LockOutcome, MAX_BATCH_REQUESTS,
    Outcome, Rejection, Request, RequestId, Response,
};

use super::{Log, TTL, acquire, grant, lease, put_v as put, rev, token};

fn fresh_grant() -> Command {
    Command::Grant {
        id: LeaseId::NONE,
        ttl_ms: TTL,
    }
}

fn batch(commands: Vec<Command>) -> Command {
    Command::Batch(commands.into_iter().map(Request::new).collect())
}

fn responses(response: Response) -> Vec<Response> {
    match response {
        Ok(Outcome::Batch(responses)) => responses,
        other => panic!("expected a batch outcome, got {other:?}"),
    }
}

fn refused(response: Response) -> String {
    match response {
        Err(Rejection::InvalidArgument(why)) => why,
        other => panic!("expected the batch refused, got {other:?}"),
    }
}

#[test]
fn every_request_of_a_batch_is_applied_and_answered_at_the_entry_revision() {
    let mut log = Log::new(Limits::default());
    let holder = grant(&mut log);
    let at = log.rev();
    let applied = log.apply_full(batch(vec![
        fresh_grant(),
        put("a", holder),
        put("b", LeaseId::NONE),
        acquire("l", holder, false),
        fresh_grant(),
    ]));
    assert_eq!(applied.revision, at);
    let answers = responses(applied.response);
    assert_eq!(
        answers,
        vec![
            Ok(Outcome::Granted {
                id: lease(2),
                ttl_ms: TTL
            }),
            Ok(Outcome::Put { prev: None }),
            Ok(Outcome::Put { prev: None }),
            Ok(Outcome::Lock(LockOutcome::Held {
                token: token(at.get())
            })),
            Ok(Outcome::Granted {
                id: lease(3),
                ttl_ms: TTL
            }),
        ]
    );
    // Effects in request order, every one at the entry's revision.
    let granted: Vec<_> = applied
        .effects
        .leases
        .iter()
        .map(|effect| match effect {
            LeaseEffect::Refreshed {
                id,
                renewed_revision,
                ..
            } => (*id, *renewed_revision),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(granted, vec![(lease(2), at), (lease(3), at)]);
    let keys: Vec<_> = applied.effects.events.iter().map(|e| &e.kv.key).collect();
    assert_eq!(keys, [b"a", b"b"]);
    assert!(
        applied
            .effects
            .events
            .iter()
            .all(|e| e.kind == EventKind::Put && e.kv.mod_revision == at)
    );
    assert!(matches!(
        applied.effects.locks.as_slice(),
        [LockEffect::Acquired { lease: l, .. }] if *l == holder
    ));
    assert_eq!(log.state.last_applied(), at);
    assert_eq!(log.state.get(b"a").map(|kv| kv.lease), Some(holder));
}

#[test]
fn a_rejected_request_leaves_the_others_of_its_batch_applied() {
    let mut log = Log::new(Limits::default());
    let answers = responses(log.apply(batch(vec![
        put("a", LeaseId::NONE),
        put("b", lease(99)),
        Command::Grant {
            id: LeaseId::NONE,
            ttl_ms: super::ms(1),
        },
        put("c", LeaseId::NONE),
    ])));
    assert!(answers[0].is_ok() && answers[3].is_ok(), "{answers:?}");
    assert_eq!(answers[1], Err(Rejection::LeaseNotFound(lease(99))));
    assert!(matches!(answers[2], Err(Rejection::TtlOutOfRange { .. })));
    assert!(log.state.get(b"a").is_some() && log.state.get(b"c").is_some());
    assert!(log.state.get(b"b").is_none());
}

/// A batch the leader should never have formed is refused whole, changing nothing: the state
/// machine does not trust the proposer.
#[test]
fn a_malformed_batch_is_refused_whole_and_changes_nothing() {
    let mut log = Log::new(Limits::default());
    let holder = grant(&mut log);
    let malformed = vec![
        (batch(Vec::new()), "requests"),
        (
            batch(vec![fresh_grant(); MAX_BATCH_REQUESTS + 1]),
            "requests",
        ),
        // Two changes at one revision to one key, lease or lock could not be told apart.
        (
            batch(vec![put("a", LeaseId::NONE), put("a", holder)]),
            "same",
        ),
        (
            batch(vec![
                acquire("l", holder, true),
                Command::LockCancel {
                    name: "l".into(),
                    lease: holder,
                },
            ]),
            "same",
        ),
        (
            batch(vec![
                Command::Grant {
                    id: lease(50),
                    ttl_ms: TTL,
                },
                Command::Grant {
                    id: lease(50),
                    ttl_ms: TTL,
                },
            ]),
            "same",
        ),
        // A revoke hands locks over; nested batches and the rest never join one either.
        (
            batch(vec![fresh_grant(), Command::Revoke { id: holder }]),
            "revoke",
        ),
        (
            batch(vec![fresh_grant(), batch(vec![fresh_grant()])]),
            "batch",
        ),
        (
            batch(vec![Command::Delete {
                selector: zaris_core::KeySelector::Prefix(Vec::new()),
                guard: None,
                prev_kv: false,
            }]),
            "delete",
        ),
    ];
    for (command, why) in malformed {
        let mut unchanged = log.state.clone();
        unchanged.apply_noop(log.rev());
        let message = refused(log.apply(command));
        assert!(message.contains(why), "{message:?} should say {why:?}");
        assert_eq!(log.state, unchanged, "a refused batch changed the state");
    }
    // A request id belongs to each request, not to the batch.
    let with_id = Request::with_id(
        RequestId {
            client_id: 1,
            seq: 1,
            seen_revision: rev(0),
        },
        batch(vec![fresh_grant()]),
    );
    assert!(refused(log.apply_request(&with_id).response).contains("request id"));
}

#[test]
fn a_request_retried_in_a_later_batch_is_answered_from_its_first_application() {
    let mut log = Log::new(Limits::default());
    let id = RequestId {
        client_id: 7,
        seq: 1,
        seen_revision: rev(0),
    };
    let first = Command::Batch(vec![
        Request::with_id(id, fresh_grant()),
        Request::new(put("a", LeaseId::NONE)),
    ]);
    let first = responses(log.apply(first));
    // The retry shares its batch with the same request again and a new one: both copies get
    // the first answer, and only one lease exists.
    let retry = Command::Batch(vec![
        Request::with_id(id, fresh_grant()),
        Request::new(put("b", LeaseId::NONE)),
        Request::with_id(id, fresh_grant()),
    ]);
    let retry = responses(log.apply(retry));
    assert_eq!(retry[0], first[0]);
    assert_eq!(retry[2], first[0]);
    assert_eq!(log.state.lease_count(), 1);
}

#[test]
fn a_replayed_batch_entry_is_ignored() {
    let mut log = Log::new(Limits::default());
    let entry = Request::new(batch(vec![fresh_grant(), put("a", LeaseId::NONE)]));
    let at = log.rev();
    log.apply_request(&entry);
    let before = log.state.clone();
    let replay = log.state.apply(at, &entry);
    assert_eq!(replay.response, Ok(Outcome::Ignored));
    assert!(replay.effects.is_empty());
    assert_eq!(log.state, before);
}

/// Every request of a batch takes the entry's revision, so a lock handed over in a batch gets
/// a token above every earlier token of that lock, and a second lock acquired in the same entry
/// shares that number without any lock having two holders with one token.
#[test]
fn locks_acquired_in_one_batch_get_tokens_above_their_earlier_ones() {
    let mut log = Log::new(Limits::default());
    let a = grant(&mut log);
    let b = grant(&mut log);
    let earlier = match log.apply(acquire("l", a, false)) {
        Ok(Outcome::Lock(LockOutcome::Held { token })) => token,
        other => panic!("{other:?}"),
    };
    log.apply(acquire("l", b, true)).expect("queue b");
    let at = log.rev();
    let answers = responses(log.apply(batch(vec![
        Command::LockRelease {
            name: "l".into(),
            lease: a,
            token: earlier,
        },
        acquire("m", a, false),
    ])));
    assert_eq!(
        answers[0],
        Ok(Outcome::Unlocked {
            next: Some((b, token(at.get())))
        })
    );
    assert!(token(at.get()) > earlier);
    assert_eq!(log.state.lock("l").map(|l| l.holder), Some(b));
    assert_eq!(log.state.lock("m").map(|l| l.holder), Some(a));
}
