//! The history of a run, recorded the way Jepsen records it: every client operation appears as an
//! `invoke` and then exactly one completion — `ok` (it happened), `fail` (it certainly did not)
//! or `info` (unknown: it may or may not have happened) — with the process that ran it, the node
//! it was sent to, and the monotonic time since the start of the run.
//!
//! The checkers read this and nothing else. `to_edn` writes it for Knossos / elle-cli; `to_jsonl`
//! writes one JSON object per line.

use serde::{Deserialize, Serialize};

/// Jepsen's `:type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Invoke,
    Ok,
    Fail,
    Info,
}

/// One operation, with its inputs (set on the invoke) and outputs (set on an `ok` completion;
/// `None` while unknown). Jepsen's `:f` is the variant name, `:value` the fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "kebab-case")]
pub enum Call {
    /// Register workload: read one key; `value` = what was read (`None` = absent, or unknown on
    /// the invoke).
    Read { key: String, value: Option<u64> },
    /// Register workload: write `value` to `key`.
    Write { key: String, value: u64 },
    /// Register workload: compare-and-set `key` from `from` to `to`; `ok` = swapped, `fail` = the
    /// compare did not hold.
    Cas { key: String, from: u64, to: u64 },

    /// Lease workload: grant; `lease` = the id granted (on `ok`); `keys` = keys written bound to
    /// it in the grant's own apply step (a Grant with keys), none for a plain grant.
    Grant {
        lease: Option<u64>,
        ttl_ms: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
    },
    /// Lease workload: grant a lease with a chosen id, `lease`; `ok` = granted with that id,
    /// `fail` = refused (`ID_IN_USE`: the id was used before). The workload asks only for ids of
    /// leases that ended, so on a correct Zaris every one fails.
    GrantId { lease: u64, ttl_ms: u64 },
    /// Lease workload: renew once; `found` = whether the cluster still had it (on `ok`).
    Renew { lease: u64, found: Option<bool> },
    /// Lease workload: revoke.
    Revoke { lease: u64 },
    /// Lease workload: ask the cluster about a lease (TimeToLive, without renewing it); `found`
    /// on `ok`.
    TimeToLive { lease: u64, found: Option<bool> },
    /// Lease workload: put every key of `keys` bound to `lease` in one transaction.
    PutLeased { lease: u64, keys: Vec<String> },
    /// Lease workload: read `keys` in one linearizable read; `present` = the keys found (on `ok`).
    GetLeased {
        lease: u64,
        keys: Vec<String>,
        present: Option<Vec<String>>,
    },

    /// Lock workload: acquire `lock` with `lease`; `token` = the fencing token (on `ok`).
    Acquire {
        lock: String,
        lease: u64,
        token: Option<u64>,
    },
    /// Lock workload: release.
    Release {
        lock: String,
        lease: u64,
        token: u64,
    },
    /// Lock workload: a write to the harness's fenced resource; `accepted` on `ok`.
    FencedWrite {
        resource: String,
        token: u64,
        accepted: Option<bool>,
    },
    /// Lock workload: a guarded put in the store; `ok` = applied, `fail` = guard failed.
    GuardedPut {
        lock: String,
        token: u64,
        key: String,
    },
}

/// One history entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history.
    pub index: u64,
    #[serde(rename = "type")]
    pub kind: Kind,
    /// The logical client that ran the operation; one operation at a time per process.
    pub process: u64,
    /// The node the request was sent to first (0 = not applicable).
    pub node: u64,
    /// Nanoseconds since the run started, on the harness's monotonic clock.
    pub time_ns: u64,
    #[serde(flatten)]
    pub call: Call,
    /// For `fail` and `info`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A whole run's operations, in the order they were recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub ops: Vec<Op>,
}

impl Call {
    /// Jepsen's `:f`: the variant name in kebab-case (as serde writes it).
    pub fn name(&self) -> &'static str {
        match self {
            Call::Read { .. } => "read",
            Call::Write { .. } => "write",
            Call::Cas { .. } => "cas",
            Call::Grant { .. } => "grant",
            Call::GrantId { .. } => "grant-id",
            Call::Renew { .. } => "renew",
            Call::Revoke { .. } => "revoke",
            Call::TimeToLive { .. } => "time-to-live",
            Call::PutLeased { .. } => "put-leased",
            Call::GetLeased { .. } => "get-leased",
            Call::Acquire { .. } => "acquire",
            Call::Release { .. } => "release",
            Call::FencedWrite { .. } => "fenced-write",
            Call::GuardedPut { .. } => "guarded-put",
        }
    }

    /// The same call with every output cleared, so an invoke and its completion compare equal
    /// exactly when they describe the same request.
    pub fn inputs(&self) -> Call {
        let mut call = self.clone();
        match &mut call {
            Call::Read { value, .. } => *value = None,
            Call::Grant { lease, .. } => *lease = None,
            Call::Renew { found, .. } | Call::TimeToLive { found, .. } => *found = None,
            Call::GetLeased { present, .. } => *present = None,
            Call::Acquire { token, .. } => *token = None,
            Call::FencedWrite { accepted, .. } => *accepted = None,
            Call::Write { .. }
            | Call::Cas { .. }
            | Call::GrantId { .. }
            | Call::Revoke { .. }
            | Call::PutLeased { .. }
            | Call::Release { .. }
            | Call::GuardedPut { .. } => {}
        }
        call
    }
}

/// One operation as the checkers see it: an invoke and the completion recorded for it, if any.
/// A missing completion (the run ended first) counts as `info`, as in Jepsen.
#[derive(Clone, Copy, Debug)]
pub struct Pair<'a> {
    pub invoke: &'a Op,
    pub completion: Option<&'a Op>,
}

impl<'a> Pair<'a> {
    /// `Ok`, `Fail` or `Info` (also for a missing completion).
    pub fn outcome(&self) -> Kind {
        match self.completion.map(|op| op.kind) {
            Some(Kind::Ok) => Kind::Ok,
            Some(Kind::Fail) => Kind::Fail,
            _ => Kind::Info,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.outcome() == Kind::Ok
    }

    /// The call with its outputs when `ok`; otherwise the invoke's (outputs unknown).
    pub fn call(&self) -> &'a Call {
        match self.completion {
            Some(op) if op.kind == Kind::Ok => &op.call,
            _ => &self.invoke.call,
        }
    }

    pub fn invoke_ns(&self) -> u64 {
        self.invoke.time_ns
    }

    /// When the completion was recorded, whatever its kind.
    pub fn completion_ns(&self) -> Option<u64> {
        self.completion.map(|op| op.time_ns)
    }

    /// The latest time the operation can have taken effect: its completion for `ok` and `fail`,
    /// `u64::MAX` for `info` (it may still apply later).
    pub fn effect_deadline_ns(&self) -> u64 {
        match self.outcome() {
            Kind::Ok | Kind::Fail => self.completion_ns().unwrap_or(u64::MAX),
            Kind::Info | Kind::Invoke => u64::MAX,
        }
    }
}

impl History {
    /// Every invoke with its completion (the next op of the same process), in invoke order.
    /// Stray completions are skipped here; `check::well_formed` reports them.
    pub fn pairs(&self) -> Vec<Pair<'_>> {
        let mut pairs: Vec<Pair<'_>> = Vec::new();
        let mut pending: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
        for op in &self.ops {
            if op.kind == Kind::Invoke {
                // A second invoke while one is pending leaves the first without a completion.
                pending.insert(op.process, pairs.len());
                pairs.push(Pair {
                    invoke: op,
                    completion: None,
                });
            } else if let Some(at) = pending.remove(&op.process) {
                pairs[at].completion = Some(op);
            }
        }
        pairs
    }
}
