//! Deliberate safety bugs for the fault-injection harness (`jepsen/`): the crate's one seam for
//! them. The state machine asks [`Faults`] whether a bug is on; with the `fault-injection`
//! feature off, `Faults` is an empty type whose answers are constant `false`, so release builds
//! carry no bug (the compiler removes the branches) and no call site needs a `cfg`.
//!
//! A bug in the state machine must be switched on for every replica of a cluster alike, or the
//! replicas would diverge, which is a different failure than the one the harness looks for.

/// Which state-machine bugs are switched on. All off by default.
#[cfg(feature = "fault-injection")]
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

/// Without the `fault-injection` feature: no bug can be switched on (and, with a private field,
/// nothing outside can build one but the default).
#[cfg(not(feature = "fault-injection"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    _none: (),
}

impl Faults {
    /// Whether `lock-ignores-holder` is on.
    pub const fn lock_ignores_holder(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.lock_ignores_holder;
        #[cfg(not(feature = "fault-injection"))]
        false
    }

    /// Whether `lease-id-reuse` is on.
    pub const fn lease_id_reuse(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.lease_id_reuse;
        #[cfg(not(feature = "fault-injection"))]
        false
    }
}
