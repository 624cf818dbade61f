//! zaris-raft's storage tests: openraft's conformance suite, and durability across reopen.

mod conformance;
mod crash;
mod durability;
