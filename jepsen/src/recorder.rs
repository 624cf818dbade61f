//! Records the history as the run happens: one invoke, then one completion, per operation.

use std::sync::Mutex;

use tokio::time::Instant;

use crate::history::{Call, History, Kind, Op};

#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    ops: Mutex<Vec<Op>>,
}

impl Recorder {
    pub fn new(start: Instant) -> Recorder {
        Recorder {
            start,
            ops: Mutex::new(Vec::new()),
        }
    }

    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn push(&self, kind: Kind, process: u64, node: u64, call: Call, error: Option<String>) {
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        // Time is read under the lock so that history order and time order agree.
        let time_ns = self.now_ns();
        let index = ops.len() as u64;
        ops.push(Op {
            index,
            kind,
            process,
            node,
            time_ns,
            call,
            error,
        });
    }

    pub fn invoke(&self, process: u64, node: u64, call: Call) {
        self.push(Kind::Invoke, process, node, call, None);
    }

    pub fn ok(&self, process: u64, node: u64, call: Call) {
        self.push(Kind::Ok, process, node, call, None);
    }

    pub fn fail(&self, process: u64, node: u64, call: Call, error: impl Into<String>) {
        self.push(Kind::Fail, process, node, call, Some(error.into()));
    }

    pub fn info(&self, process: u64, node: u64, call: Call, error: impl Into<String>) {
        self.push(Kind::Info, process, node, call, Some(error.into()));
    }

    /// Completes with `fail` if the error is definite, else `info`; returns whether it was
    /// `info` (the process must then be replaced: its operation may still be in flight).
    pub fn failed(&self, process: u64, node: u64, call: Call, err: &zaris_client::Error) -> bool {
        if err.is_definite() {
            self.fail(process, node, call, err.to_string());
            false
        } else {
            self.info(process, node, call, err.to_string());
            true
        }
    }

    pub fn history(&self) -> History {
        History {
            ops: self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

/// A worker's Jepsen process id: replaced by a fresh one after an `info` completion, because the
/// indeterminate operation may still take effect later.
#[derive(Debug, Clone, Copy)]
pub struct Process {
    slot: u64,
    slots: u64,
    generation: u64,
}

impl Process {
    pub fn new(slot: u64, slots: u64) -> Process {
        Process {
            slot,
            slots,
            generation: 0,
        }
    }

    pub fn id(&self) -> u64 {
        self.slot + self.generation * self.slots
    }

    pub fn crashed(&mut self) {
        self.generation += 1;
    }
}
