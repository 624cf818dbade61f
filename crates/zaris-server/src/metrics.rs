//! Metric names (all prefixed `zaris_`) and the Prometheus recorder.

use std::sync::OnceLock;

use metrics::Counter;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Entries applied to the state machine.
pub const APPLIED_ENTRIES: &str = "zaris_applied_entries_total";
/// Leases granted.
pub const LEASES_GRANTED: &str = "zaris_leases_granted_total";
/// Leases that ended, by `cause` = `expired` | `revoked`.
pub const LEASES_ENDED: &str = "zaris_leases_ended_total";
/// Lease renewals applied (one per lease id per renew entry).
pub const LEASE_RENEWALS: &str = "zaris_lease_renewals_total";
/// Renew entries proposed (each carries many renewals: group commit).
pub const RENEW_BATCHES: &str = "zaris_renew_batches_total";
/// Raft entries that carried more than one client write (group commit, `batch.rs`).
pub const WRITE_BATCHES: &str = "zaris_write_batches_total";
/// Client writes that shared an entry with others.
pub const BATCHED_REQUESTS: &str = "zaris_batched_requests_total";
/// Batches whose linger ran out before they were whole (`group_commit`), by `batcher` (`write`,
/// `renew`): they went short, or their last request came only after the 1 ms it waits for.
pub const LINGERS_EXPIRED: &str = "zaris_batch_lingers_expired_total";
/// Expire entries proposed by this node as leader.
pub const EXPIRE_BATCHES: &str = "zaris_expire_batches_total";
/// 1 once this node's Raft has failed for good (the node then stops).
pub const RAFT_FAILED: &str = "zaris_raft_failed";
/// Overdue leases in Expire entries the state machine rejected (they are proposed again after
/// `retry_after_ms`; a non-zero rate means overdue leases are being kept alive).
pub const EXPIRIES_REJECTED: &str = "zaris_expiries_rejected_total";
/// Lock acquisitions applied (immediate, or handed over from a released holder).
pub const LOCKS_ACQUIRED: &str = "zaris_locks_acquired_total";
/// Request ids the de-duplication table remembers, and the bytes it charges for them (bounded
/// by the cluster's `dedup_capacity` and `dedup_max_bytes`).
pub const DEDUP_ENTRIES: &str = "zaris_dedup_entries";
pub const DEDUP_BYTES: &str = "zaris_dedup_bytes";
/// The state's size as the quota charges it, and the quota (`max_state_bytes`): writes that
/// would grow the state past the quota are refused.
pub const STATE_BYTES: &str = "zaris_state_bytes";
pub const STATE_QUOTA_BYTES: &str = "zaris_state_quota_bytes";
/// Live leases and keys in this node's state.
pub const LIVE_LEASES: &str = "zaris_leases";
pub const LIVE_KEYS: &str = "zaris_keys";
/// 1 if this node is the Raft leader.
pub const IS_RAFT_LEADER: &str = "zaris_is_raft_leader";
/// The Raft term and the applied index as this node sees them.
pub const RAFT_TERM: &str = "zaris_raft_term";
pub const RAFT_APPLIED_INDEX: &str = "zaris_raft_applied_index";
/// Leadership handovers this node started as the leader (before a planned stop, or removing
/// itself), by `result` (`ok`: another node leads; `failed`).
pub const LEADERSHIP_HANDOVERS: &str = "zaris_leadership_handovers_total";
/// Elections this node called as the designated follower of a leader silent past its lease
/// (`prompt_election.rs`).
pub const ELECTIONS_CALLED: &str = "zaris_elections_called_total";
/// Silent leaders this node found dead (their peer address refused connections) and dropped its
/// leader lease on (`dead_leader.rs`).
pub const LEADERS_FOUND_DEAD: &str = "zaris_leaders_found_dead_total";
/// Leadership changes seen by this node.
pub const LEADER_CHANGES: &str = "zaris_raft_leader_changes_total";
/// Applied requests the state machine rejected (a typed rejection, nothing changed), by `reason`.
pub const REQUESTS_REJECTED: &str = "zaris_requests_rejected_total";
/// Proposals from this node by `command` and `outcome` (`applied`, `redirected`, `timeout`,
/// `failed`).
pub const PROPOSALS: &str = "zaris_proposals_total";
/// Raft messages from peers this node refused, by `reason` (`cluster`: another cluster's;
/// `malformed`: not a message of this version; `too_large`: a message or snapshot over its
/// limit; `identity`: speaking for a member the certificate does not name).
pub const PEER_MESSAGES_REFUSED: &str = "zaris_peer_messages_refused_total";
/// Connections closed because they earned such a refusal, by `listener` (`cutoff.rs`).
pub const CONNECTIONS_CUT: &str = "zaris_connections_cut_total";
/// TLS handshakes that failed on a listener, by `listener` (`client`, `peer`): plaintext, a
/// certificate from another CA, none where one is required.
pub const TLS_HANDSHAKE_FAILURES: &str = "zaris_tls_handshake_failures_total";
/// Calls refused with UNAUTHENTICATED where the client listener requires a client certificate,
/// by `reason`: `missing` (none), `invalid` (not signed by the client CA, expired, ...).
pub const CALLS_WITHOUT_CLIENT_CERT: &str = "zaris_client_certificates_refused_total";
/// Calls refused by access control: `reason` = `bad_token` (malformed authorization metadata),
/// `unauthenticated` (no credential naming a user while auth is enabled, or an unknown token),
/// `denied` (PERMISSION_DENIED).
pub const AUTH_FAILURES: &str = "zaris_auth_failures_total";
/// Reloads of a listener's certificate files, by `listener` and `result` (`ok`, `error`: the
/// previous files stay in use).
pub const TLS_RELOADS: &str = "zaris_tls_reloads_total";
/// Open watches on this node's Watch streams.
pub const OPEN_WATCHES: &str = "zaris_watches";
/// Watches this node canceled, by `reason` (`client_requested`, `compacted`,
/// `capacity_exceeded`, `slow_consumer`, `shutting_down`).
pub const WATCHES_CANCELED: &str = "zaris_watches_canceled_total";

/// The counters bumped for every request, registered once. `counter!` looks its name and labels
/// up in the recorder's registry on every call, hashing them: callgrind counted 1.3k instructions
/// per proposal in `propose::record` alone, more than the state machine's apply of a grant.
#[derive(Debug)]
pub struct RequestCounters {
    /// `PROPOSALS` by command (in [`PROPOSED_COMMANDS`]' order) and outcome (in
    /// [`ProposalOutcome::ALL`]'s order).
    proposals: Vec<[Counter; ProposalOutcome::ALL.len()]>,
    pub leases_granted: Counter,
    pub lease_renewals: Counter,
    pub applied_entries: Counter,
}

/// The `command` labels of `PROPOSALS`: every name `Command::name` gives.
const PROPOSED_COMMANDS: [&str; 13] = [
    "grant",
    "renew",
    "revoke",
    "expire",
    "put",
    "delete",
    "txn",
    "lock",
    "unlock",
    "lock_cancel",
    "set_limits",
    "auth",
    "batch",
];

/// The `outcome` label of `PROPOSALS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposalOutcome {
    /// Committed and applied (even if the state machine rejected it).
    Applied,
    Timeout,
    /// Not the leader (NOT_LEADER or NO_LEADER).
    Redirected,
    Failed,
}

impl ProposalOutcome {
    const ALL: [ProposalOutcome; 4] = [
        ProposalOutcome::Applied,
        ProposalOutcome::Timeout,
        ProposalOutcome::Redirected,
        ProposalOutcome::Failed,
    ];

    fn label(self) -> &'static str {
        match self {
            ProposalOutcome::Applied => "applied",
            ProposalOutcome::Timeout => "timeout",
            ProposalOutcome::Redirected => "redirected",
            ProposalOutcome::Failed => "failed",
        }
    }
}

impl RequestCounters {
    /// The process's handles, registered with the Prometheus recorder (installed first if it is
    /// not yet: a handle registered before a recorder would count nowhere, for good).
    pub fn get() -> &'static RequestCounters {
        static COUNTERS: OnceLock<RequestCounters> = OnceLock::new();
        COUNTERS.get_or_init(|| {
            let _ = prometheus();
            RequestCounters {
                proposals: PROPOSED_COMMANDS
                    .iter()
                    .map(|&command| {
                        ProposalOutcome::ALL.map(|outcome| {
                            metrics::counter!(
                                PROPOSALS,
                                "command" => command,
                                "outcome" => outcome.label()
                            )
                        })
                    })
                    .collect(),
                leases_granted: metrics::counter!(LEASES_GRANTED),
                lease_renewals: metrics::counter!(LEASE_RENEWALS),
                applied_entries: metrics::counter!(APPLIED_ENTRIES),
            }
        })
    }

    /// Counts one proposal of `command` (a `Command::name`).
    pub fn proposed(&self, command: &'static str, outcome: ProposalOutcome) {
        let by_outcome = PROPOSED_COMMANDS
            .iter()
            .position(|&known| known == command)
            .and_then(|at| self.proposals.get(at));
        match by_outcome {
            // `ALL` lists every variant in declaration order.
            Some(by_outcome) => by_outcome[outcome as usize].increment(1),
            // A command added without its name here is still counted, through the registry.
            None => metrics::counter!(
                PROPOSALS,
                "command" => command,
                "outcome" => outcome.label()
            )
            .increment(1),
        }
    }
}

/// The process-wide Prometheus recorder (metrics has one global recorder per process, so nodes
/// in one test process share it).
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| PrometheusBuilder::new().install_recorder().ok())
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::ProposalOutcome;

    /// `RequestCounters::proposed` indexes its counters by the outcome's discriminant.
    #[test]
    fn every_outcome_sits_at_its_own_index() {
        for (at, outcome) in ProposalOutcome::ALL.iter().enumerate() {
            assert_eq!(*outcome as usize, at, "{outcome:?}");
        }
    }
}
