//! zaris-core's integration tests: one binary, one module per area.

mod codec;
#[cfg(feature = "fault-injection")]
mod faults;
mod lessor;
mod model;
mod state;

use zaris_core::{Applied, Command, Limits, Request, Response, State};

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
        let applied = self.state.apply(index, request);
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
    pub fn rev(&self) -> u64 {
        self.next_index
    }
}
