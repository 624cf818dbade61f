//! The lessor: deadlines, promotion, expiry order, the renew race, and the revoke rate.

use proptest::prelude::*;
use zaris_core::{Command, ExpiredLease, LeaseEffect, Lessor, LessorConfig, Limits, Outcome};

use super::{Log, at, lease, ms, rev};

fn unlimited() -> LessorConfig {
    LessorConfig {
        revoke_rate_per_s: 1_000_000,
        revoke_burst: 1_000_000,
        retry_after: ms(500),
    }
}

fn deadline(lessor: &Lessor, id: u64) -> Option<u64> {
    lessor.deadline(lease(id)).map(|d| d.get())
}

fn ids(expired: &[ExpiredLease]) -> Vec<u64> {
    expired.iter().map(|e| e.id.get()).collect()
}

#[test]
fn followers_never_expire() {
    let mut lessor = Lessor::new(unlimited());
    lessor.refresh(at(0), lease(1), ms(100), rev(1));
    assert!(lessor.expired(at(1_000), 10).is_empty());
    lessor.promote(1, at(1_000), ms(50));
    assert!(lessor.is_primary());
    assert_eq!(ids(&lessor.expired(at(1_050), 10)), vec![1]);
    lessor.refresh(at(1_050), lease(2), ms(10), rev(2));
    lessor.demote();
    assert!(lessor.expired(at(10_000), 10).is_empty());
}

#[test]
fn expiry_is_earliest_deadline_first_and_batched() {
    let mut lessor = Lessor::new(unlimited());
    lessor.promote(1, at(0), ms(0));
    lessor.refresh(at(0), lease(10), ms(300), rev(1));
    lessor.refresh(at(0), lease(20), ms(100), rev(2));
    lessor.refresh(at(0), lease(30), ms(200), rev(3));
    lessor.refresh(at(0), lease(40), ms(900), rev(4));
    assert!(lessor.expired(at(99), 10).is_empty());
    assert_eq!(lessor.next_deadline().map(|d| d.get()), Some(100));
    assert_eq!(ids(&lessor.expired(at(300), 2)), vec![20, 30]);
    assert_eq!(ids(&lessor.expired(at(300), 2)), vec![10]);
    assert_eq!(
        lessor.remaining(at(300), lease(40)).map(|d| d.get()),
        Some(600)
    );
}

#[test]
fn an_expiry_in_flight_is_not_proposed_twice_but_comes_back_if_lost() {
    let mut lessor = Lessor::new(unlimited());
    lessor.promote(1, at(0), ms(0));
    lessor.refresh(at(0), lease(1), ms(100), rev(7));
    let first = lessor.expired(at(100), 10);
    assert_eq!(
        first,
        vec![ExpiredLease {
            id: lease(1),
            observed_renewed_revision: rev(7)
        }]
    );
    assert!(lessor.expired(at(599), 10).is_empty());
    assert_eq!(lessor.expired(at(600), 10), first);
    lessor.observe(
        at(600),
        &LeaseEffect::Revoked {
            id: lease(1),
            expired: true,
        },
    );
    assert!(lessor.is_empty());
    assert!(lessor.expired(at(10_000), 10).is_empty());
}

#[test]
fn revoke_rate_is_honoured() {
    let mut lessor = Lessor::new(LessorConfig {
        revoke_rate_per_s: 10,
        revoke_burst: 10,
        retry_after: ms(1_000_000),
    });
    for id in 1..=100 {
        lessor.refresh(at(0), lease(id), ms(10), rev(id));
    }
    lessor.promote(1, at(0), ms(0));
    assert_eq!(lessor.expired(at(10), 1_000).len(), 10);
    assert_eq!(lessor.expired(at(10), 1_000).len(), 0);
    // 10 per second: half a second later, five more.
    assert_eq!(lessor.expired(at(510), 1_000).len(), 5);
    // The bucket never holds more than the burst.
    assert_eq!(lessor.expired(at(100_000), 1_000).len(), 10);
}

#[test]
fn a_renew_that_wins_the_race_keeps_the_lease() {
    let mut log = Log::new(Limits::default());
    let mut lessor = Lessor::new(unlimited());
    lessor.promote(1, at(0), ms(0));
    let applied = log.apply_full(Command::Grant {
        id: lease(0),
        ttl_ms: ms(5_000),
    });
    let Ok(Outcome::Granted { id, .. }) = applied.response else {
        panic!("{:?}", applied.response);
    };
    applied
        .effects
        .leases
        .iter()
        .for_each(|e| lessor.observe(at(0), e));
    let decided = lessor.expired(at(5_000), 10);
    assert_eq!(ids(&decided), vec![id.get()]);
    // The renew commits before the expiry entry.
    let renewed = log.apply_full(Command::Renew { ids: vec![id] });
    renewed
        .effects
        .leases
        .iter()
        .for_each(|e| lessor.observe(at(5_001), e));
    let expired = log.apply_full(Command::Expire { leases: decided });
    assert_eq!(
        expired.response,
        Ok(Outcome::Expired {
            revoked: vec![],
            skipped: vec![id]
        })
    );
    assert!(expired.effects.leases.is_empty());
    assert_eq!(deadline(&lessor, id.get()), Some(10_001));
    assert!(log.state.lease(id, false).is_some());
}

/// Issue 9, item 6: a snapshot install must not stretch leases whose deadline this node still
/// knows exactly (they were not renewed since): an abandoned lease would otherwise live up to a
/// full TTL longer than the contract's bound.
#[test]
fn reset_keeps_the_deadlines_it_still_knows() {
    let mut lessor = Lessor::new(unlimited());
    lessor.refresh(at(0), lease(1), ms(1_000), rev(7)); // not renewed since revision 7
    lessor.refresh(at(0), lease(2), ms(1_000), rev(8)); // renewed at 9 somewhere this node never applied
    lessor.reset(
        at(600),
        [
            (lease(1), ms(1_000), rev(7)),
            (lease(2), ms(1_000), rev(9)),
            (lease(3), ms(1_000), rev(9)),
        ],
    );
    assert_eq!(
        deadline(&lessor, 1),
        Some(1_000),
        "unchanged lease keeps its deadline"
    );
    assert_eq!(
        deadline(&lessor, 2),
        Some(1_600),
        "renewal time unknown: a full TTL"
    );
    assert_eq!(deadline(&lessor, 3), Some(1_600), "new lease: a full TTL");
    lessor.promote(1, at(600), ms(0));
    assert_eq!(ids(&lessor.expired(at(1_000), 10)), vec![1]);
}

#[test]
fn reset_gives_every_lease_a_full_ttl() {
    let mut lessor = Lessor::new(unlimited());
    lessor.refresh(at(0), lease(1), ms(100), rev(1));
    lessor.reset(
        at(1_000),
        [(lease(2), ms(500), rev(4)), (lease(3), ms(200), rev(5))],
    );
    assert_eq!(deadline(&lessor, 1), None);
    assert_eq!(deadline(&lessor, 2), Some(1_500));
    lessor.promote(1, at(1_000), ms(0));
    assert_eq!(
        lessor.expired(at(1_200), 10),
        vec![ExpiredLease {
            id: lease(3),
            observed_renewed_revision: rev(5)
        }]
    );
}

#[test]
fn a_million_leases_expire_in_deadline_order() {
    const N: u64 = 1_000_000;
    let mut lessor = Lessor::new(LessorConfig {
        revoke_rate_per_s: u32::MAX,
        revoke_burst: u32::MAX,
        retry_after: ms(u64::MAX / 4),
    });
    // Deadlines interleave with ids so order comes from the index, not from insertion.
    for id in 1..=N {
        lessor.refresh(at(0), lease(id), ms((id * 7_919) % N + 1_000), rev(id));
    }
    lessor.promote(1, at(0), ms(0));
    let mut last_deadline = 0;
    let mut seen = 0;
    loop {
        let batch = lessor.expired(at(N + 1_000), 10_000);
        if batch.is_empty() {
            break;
        }
        for lease in batch {
            let deadline = (lease.id.get() * 7_919) % N + 1_000;
            assert!(deadline >= last_deadline, "expired out of order");
            last_deadline = deadline;
            seen += 1;
        }
    }
    assert_eq!(seen, N);
}

proptest! {
    /// Promotion extends every deadline by at least the election timeout beyond `now`, and never
    /// shortens one.
    #[test]
    fn promotion_extends_never_shortens(
        leases in proptest::collection::vec((1u64..1_000, 1u64..100_000), 1..50),
        now_ms in 0u64..200_000,
        extend_ms in 0u64..10_000,
    ) {
        let mut lessor = Lessor::new(unlimited());
        for (id, ttl) in &leases {
            lessor.refresh(at(0), lease(*id), ms(*ttl), rev(1));
        }
        let before: Vec<_> = leases.iter().map(|(id, _)| (*id, deadline(&lessor, *id))).collect();
        lessor.promote(1, at(now_ms), ms(extend_ms));
        for (id, old) in before {
            let old = old.expect("tracked");
            let new = deadline(&lessor, id).expect("tracked");
            prop_assert!(new >= old + extend_ms);
            prop_assert!(new >= now_ms + extend_ms);
            prop_assert_eq!(new, old.max(now_ms) + extend_ms);
        }
        if extend_ms > 0 {
            // Nothing may expire within one election timeout of the promotion.
            prop_assert!(lessor.expired(at(now_ms + extend_ms - 1), 1_000).is_empty());
        }
    }
}
