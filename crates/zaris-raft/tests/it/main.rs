//! zaris-raft's storage tests: openraft's conformance suite, and durability across reopen, and the offline dump.

mod conformance;
mod crash;
mod dump;
mod durability;
