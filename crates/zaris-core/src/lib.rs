//! The pure, deterministic core of Zaris.
//!
//! [`State`] is the replicated state machine: it applies [`Request`]s taken from the Raft log,
//! stamps every change with the entry's index (the revision), and returns what happened — a
//! [`Response`] for the client and [`Effects`] for the lessor, lock waiters and watchers. It reads
//! no clock, does no I/O and iterates only ordered maps, so the same log gives byte-identical state
//! (and [`State::digest`]) on every node.
//!
//! The [`Lessor`] is the per-node table of lease deadlines; time is passed in.

pub mod auth;
pub mod codec;
pub mod command;
pub mod faults;
pub mod lessor;
pub mod limits;
pub mod outcome;
pub mod state;
pub mod types;

pub use command::{
    Batching, BoundKey, Command, Compare, CompareOp, CompareTarget, ExpiredLease,
    MAX_BATCH_REQUESTS, Request, Touch, Txn, TxnOp,
};
pub use faults::Faults;
pub use lessor::{Lessor, LessorConfig};
pub use limits::{LimitKind, Limits};
pub use outcome::{
    Applied, CancelOutcome, Effects, Event, EventKind, LeaseEffect, LockEffect, LockOutcome,
    OpResult, Outcome, Rejection, Response,
};
pub use state::{
    LeaseInfo, LockInfo, MAX_NAMED_EPOCHS, MAX_RANGE_PAGE_BYTES, MAX_TXN_READ_BYTES,
    MAX_TXN_READ_KEYS, RangeResult, State,
};
pub use types::{
    DurationMs, FencingToken, Guard, InstantMs, KeySelector, KeyValue, LeaseId, RequestId, Revision,
};
