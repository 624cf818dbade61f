//! The deliberate state-machine bugs of fault-injection builds: each does what the harness expects
//! it to catch, keeps every invariant, and stays out of snapshots and digests.

use zaris_core::{
    Command, Faults, FencingToken, Guard, LeaseId, Limits, LockEffect, LockOutcome, Outcome,
    Rejection, State,
};

use super::{Log, acquire, grant};

const BUGGY: Faults = Faults {
    lock_ignores_holder: true,
    lease_id_reuse: false,
};

fn buggy_log() -> Log {
    let mut log = Log::new(Limits::default());
    log.state.set_faults(BUGGY);
    log
}

#[test]
fn lock_ignores_holder_grants_a_held_lock() {
    let mut log = Log::new(Limits::default());
    let (a, b, c) = (grant(&mut log), grant(&mut log), grant(&mut log));
    let first = match log.apply(acquire("job", a, true)) {
        Ok(Outcome::Lock(LockOutcome::Held { token })) => token,
        other => panic!("a should hold the lock: {other:?}"),
    };
    assert_eq!(
        log.apply(acquire("job", c, true)),
        Ok(Outcome::Lock(LockOutcome::Queued { position: 1 }))
    );
    log.state.set_faults(BUGGY);

    // b asks without waiting while a's lease is alive: the bug grants it at once.
    let token = FencingToken::acquired_at(log.rev());
    let applied = log.apply_full(acquire("job", b, false));
    assert_eq!(
        applied.response,
        Ok(Outcome::Lock(LockOutcome::Held { token }))
    );
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
                token
            },
        ]
    );
    let lock = log.state.lock("job").expect("lock");
    assert_eq!((lock.holder, lock.token, lock.waiters), (b, token, vec![c]));
    // a's lease lives on without the lock; fencing still refuses its old token.
    let a_info = log.state.lease(a, false).expect("a is alive");
    assert!(a_info.locks_held.is_empty());
    assert_eq!(
        log.apply(Command::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            lease: LeaseId::NONE,
            guard: Some(Guard {
                lock: "job".into(),
                token: first,
            }),
            prev_kv: false,
        }),
        Err(Rejection::GuardFailed {
            lock: "job".into(),
            token: first,
            current: Some(token),
        })
    );
    // A queued lease asking again jumps the queue the same way.
    let token = FencingToken::acquired_at(log.rev());
    assert_eq!(
        log.apply(acquire("job", c, true)),
        Ok(Outcome::Lock(LockOutcome::Held { token }))
    );
    let lock = log.state.lock("job").expect("lock");
    assert_eq!((lock.holder, lock.waiters), (c, vec![]));
}

#[test]
fn without_the_bug_a_held_lock_is_busy() {
    let mut log = Log::new(Limits::default());
    assert_eq!(log.state.faults(), Faults::default());
    let (a, b) = (grant(&mut log), grant(&mut log));
    log.apply(acquire("job", a, false)).expect("a holds");
    assert!(matches!(
        log.apply(acquire("job", b, false)),
        Ok(Outcome::Lock(LockOutcome::Busy { holder, .. })) if holder == a
    ));
}

#[test]
fn faults_stay_out_of_snapshots_and_digests() {
    let mut log = buggy_log();
    let a = grant(&mut log);
    log.apply(acquire("job", a, false)).expect("a holds");
    let mut plain = log.state.clone();
    plain.set_faults(Faults::default());
    assert_eq!(
        log.state.digest().expect("digest"),
        plain.digest().expect("digest")
    );
    let restored = State::restore(&log.state.snapshot().expect("snapshot")).expect("restore");
    assert_eq!(restored.faults(), Faults::default());
    assert_eq!(restored, plain);
}
