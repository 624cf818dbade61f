//! Deliberate safety bugs for the fault-injection harness (`jepsen/`). Compiled only with the
//! `fault-injection` feature: release builds contain none of this.
//!
//! A bug in the state machine must be switched on for every replica of a cluster alike, or the
//! replicas would diverge, which is a different failure than the one the harness looks for.

/// Which state-machine bugs are switched on. All off by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// `lock-ignores-holder`: a Lock request for a lock held by another lease is granted at once,
    /// as if the holder's lease had ended: the requester becomes the holder with the entry's
    /// revision as its token, and the previous holder loses the lock (its lease lives on).
    pub lock_ignores_holder: bool,
    /// `lease-id-reuse`: a Grant may ask for the id of a lease that ended (the id-reuse hole of
    /// issue 9), so an ended lease's old owner renews whoever holds the id now.
    pub lease_id_reuse: bool,
}
