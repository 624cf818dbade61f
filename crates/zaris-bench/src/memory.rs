//! What a million leases, each with a bound key, cost in the state machine and the lessor: the
//! in-memory part of a node (sled's page cache and the log come on top).

use std::time::Instant;

use zaris_core::{
    Command, DurationMs, InstantMs, LeaseId, Lessor, LessorConfig, Limits, Outcome, Request,
    Revision, State,
};

fn resident_bytes() -> u64 {
    // /proc/self/statm: size resident shared ... in pages.
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

pub fn report(leases: u64) {
    let before = resident_bytes();
    let mut state = State::new(Limits::default());
    let mut lessor = Lessor::new(LessorConfig::default());
    let mut index = 1;
    let started = std::time::Instant::now();
    for i in 0..leases {
        let grant = state.apply(
            Revision::new(index),
            &Request::new(Command::Grant {
                id: LeaseId::NONE,
                ttl_ms: DurationMs::new(10_000),
            }),
        );
        index += 1;
        let Ok(Outcome::Granted { id, .. }) = grant.response else {
            println!("memory: grant {i} failed: {:?}", grant.response);
            return;
        };
        for effect in &grant.effects.leases {
            lessor.observe(InstantMs::new(i), effect);
        }
        let put = Request::new(Command::Put {
            key: format!("workers/{:016x}", id.get()).into_bytes(),
            value: b"10.0.0.1:8080".to_vec(),
            lease: id,
            guard: None,
            prev_kv: false,
        });
        state.apply(Revision::new(index), &put);
        index += 1;
    }
    let after = resident_bytes();
    let used = after.saturating_sub(before);
    println!(
        "memory: {leases} leases with one bound key each: {:.0} MiB resident for state + lessor \
         ({} bytes per lease), built in {:.1} s",
        used as f64 / (1024.0 * 1024.0),
        used / leases.max(1),
        started.elapsed().as_secs_f64()
    );
    let encoding = Instant::now();
    let snapshot = state.snapshot().unwrap_or_default();
    let encoded = encoding.elapsed();
    let decoding = Instant::now();
    let restored = State::restore(&snapshot);
    let decoded = decoding.elapsed();
    // Restore ends with the invariant checks; timed again alone, they show their share.
    let checking = Instant::now();
    let checked = restored.as_ref().map(State::check_invariants);
    let checked_in = checking.elapsed();
    println!(
        "memory: snapshot of that state: {:.0} MiB, encoded in {:.2} s, decoded in {:.2} s \
         ({} leases; the invariant checks alone take {:.2} s{})",
        snapshot.len() as f64 / (1024.0 * 1024.0),
        encoded.as_secs_f64(),
        decoded.as_secs_f64(),
        restored.as_ref().map_or(0, State::lease_count),
        checked_in.as_secs_f64(),
        match checked {
            Ok(Ok(())) => String::new(),
            Ok(Err(broken)) => format!(", and fail: {broken}"),
            Err(e) => format!(", not run: {e}"),
        }
    );
    drop(lessor);
}
