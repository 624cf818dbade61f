//! zaris-core's integration tests: one binary, one module per area.

mod auth;
mod batch;
mod codec;
#[cfg(feature = "fault-injection")]
mod faults;
mod lessor;
mod model;
mod state;

use zaris_core::{
    Applied, Command, DurationMs, LeaseId, Limits, Outcome, Request, Response, Revision, State,
};

/// A state plus the next log index, so tests read like a log.
#[derive(Debug)]
pub struct Log {
    pub state: State,
    pub next_index: u64,
}

impl Log {
    pub fn new(limits: Limits) -> Self {
        Log {
            state: State::new(limits),
            next_index: 1,
        }
    }

    pub fn apply_request(&mut self, request: &Request) -> Applied {
        let index = self.next_index;
        self.next_index += 1;
        let applied = self.state.apply(rev(index), request);
        if let Err(broken) = self.state.check_invariants() {
            panic!("invariant broken after {request:?}: {broken}");
        }
        applied
    }

    pub fn apply_full(&mut self, command: Command) -> Applied {
        self.apply_request(&Request::new(command))
    }

    pub fn apply(&mut self, command: Command) -> Response {
        self.apply_full(command).response
    }

    /// The revision the next command will be applied at.
    pub fn rev(&self) -> Revision {
        Revision::new(self.next_index)
    }
}

pub const TTL: DurationMs = DurationMs::new(10_000);

/// Grants a lease with [`TTL`] and a server-chosen id.
pub fn grant(log: &mut Log) -> LeaseId {
    match log.apply(Command::Grant {
        id: LeaseId::NONE,
        ttl_ms: TTL,
    }) {
        Ok(Outcome::Granted { id, .. }) => id,
        other => panic!("grant failed: {other:?}"),
    }
}

/// A put of value `v` to `key`, bound to `lease` (none: [`LeaseId::NONE`]).
pub fn put_v(key: &str, lease: LeaseId) -> Command {
    Command::Put {
        key: key.into(),
        value: b"v".to_vec(),
        lease,
        guard: None,
        prev_kv: false,
    }
}

pub fn acquire(name: &str, lease: LeaseId, wait: bool) -> Command {
    Command::LockAcquire {
        name: name.into(),
        lease,
        wait,
        sent_after: None,
    }
}

/// A waiting Lock whose caller had seen revision `sent_after` applied when it sent it.
pub fn acquire_sent_after(name: &str, lease: LeaseId, sent_after: Revision) -> Command {
    Command::LockAcquire {
        name: name.into(),
        lease,
        wait: true,
        sent_after: Some(sent_after),
    }
}

// Typed values from literals, so the tests read as numbers.
pub fn lease(id: u64) -> zaris_core::LeaseId {
    zaris_core::LeaseId::new(id)
}

pub fn rev(revision: u64) -> zaris_core::Revision {
    zaris_core::Revision::new(revision)
}

pub fn token(token: u64) -> zaris_core::FencingToken {
    zaris_core::FencingToken::new(token)
}

pub fn ms(ms: u64) -> zaris_core::DurationMs {
    zaris_core::DurationMs::new(ms)
}

pub fn at(ms: u64) -> zaris_core::InstantMs {
    zaris_core::InstantMs::new(ms)
}
