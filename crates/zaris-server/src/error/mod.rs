//! The server's one error type, [`ApiError`], and the one place it becomes a gRPC [`Status`].
//!
//! Handlers, the proposer and the background loops (renew batcher, expiry loop) return
//! `Result<_, ApiError>`; a service fn converts at the tonic boundary (`?`, through the single
//! `From<ApiError> for Status`). That conversion builds the [`zaris_proto::v1::ErrorDetail`] every
//! status carries: an [`ErrorCode`] (which fixes the gRPC code, see [`ErrorCode::grpc_code`]), the
//! one-line message (the error's `Display`), and the [`Outcome`] — whether the call may have taken
//! effect — so the mapping documented in `proto/zaris/v1/common.proto` lives in this file.
//!
//! openraft's errors are turned into `ApiError`s in [`raft`], the only module that matches on them.

mod raft;

use tonic::Status;
use zaris_core::{LimitKind, Outcome as CoreOutcome, Rejection, Revision};
use zaris_proto::v1::{ErrorCode, ErrorDetail, Outcome};

/// Suggested minimum delay before retrying a request that hit a capacity (`retry_after_ms` of a
/// CAPACITY_EXCEEDED error): capacity frees up as leases end, waiters leave or keys are deleted,
/// so an immediate retry is pointless.
pub const CAPACITY_RETRY_AFTER_MS: u64 = 1_000;

/// Why a client (or peer) call failed. Each variant documents the ErrorCode, and whether the call
/// is definite (did not take effect) or indeterminate (may have); `Display` is the message sent.
///
/// `Clone`: a renew batch hands the same error to every keepalive request it carried.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// INVALID_ARGUMENT, definite: the request is malformed; the message names the field.
    #[error("{0}")]
    InvalidArgument(String),
    /// A request the state machine (or pre-proposal validation) rejected; definite (a rejection
    /// changes nothing) except as noted:
    /// - `InvalidArgument` → INVALID_ARGUMENT.
    /// - `TtlOutOfRange` → TTL_OUT_OF_RANGE, `limit` naming the bound crossed (`min_ttl_ms` or
    ///   `max_ttl_ms`) with the requested TTL as `actual`.
    /// - `LimitExceeded` → LIMIT_EXCEEDED for per-request limits, or CAPACITY_EXCEEDED for state
    ///   capacities (see [`is_capacity`]), `limit` naming it.
    /// - `LeaseNotFound`, `LeaseIdUsed`, `GuardFailed`, `NotHolder`: these are result values in
    ///   every response that can carry them (see `convert`), so reaching here means the call got a
    ///   rejection it has no result value for — a server bug, or a `request_id` reused for a
    ///   different request (the state machine then replays the other request's answer). No
    ///   ErrorCode fits a domain answer (the FAILED_PRECONDITION ones are all about membership), so
    ///   this is INTERNAL, but **definite**: a retry with the same id gets the same answer.
    /// - `RequestIdForgotten` → REQUEST_ID_FORGOTTEN with `compact_revision` (and
    ///   `applied_revision` when the table knows the request was applied: indeterminate then).
    #[error("{}", rejection_message(.0))]
    Rejected(Rejection),
    /// LIMIT_EXCEEDED, definite: the request itself exceeds per-request limit `name` (configured
    /// `max`; the request had `actual`). Also for server-side page sizes such as `max_range_keys`.
    #[error("limit {name} exceeded: {actual} > {max}")]
    LimitExceeded { name: String, max: u64, actual: u64 },
    /// CAPACITY_EXCEEDED, definite: the request would take the cluster or this server past
    /// capacity `name` (`max`; it would reach `actual`). Retry later, with backoff.
    #[error("capacity {name} exceeded: {actual} > {max}; {}", capacity_hint(name))]
    CapacityExceeded { name: String, max: u64, actual: u64 },
    /// NOT_LEADER, definite: this member is not the Raft leader; node `leader_id` is, in `term`,
    /// serving the client API at `leader_addr` (empty: unknown). Nothing was proposed.
    #[error("{}", not_leader_message(*.leader_id, .leader_addr, *.term))]
    NotLeader {
        leader_id: u64,
        leader_addr: String,
        term: u64,
    },
    /// NO_LEADER, definite: no Raft leader is known (election in progress, or this member is
    /// partitioned). Nothing was proposed.
    #[error("no Raft leader is known; retry later, preferably on another member")]
    NoLeader,
    /// NO_LEADER, definite: a new cluster whose first leader has not yet fixed the cluster's
    /// limits. Nothing was proposed; retry shortly.
    #[error("the cluster is still initializing (its limits are not set yet); retry shortly")]
    Initializing,
    /// LEADERSHIP_LOST, indeterminate: the request was proposed, then this member lost leadership
    /// before it learned whether the entry committed. The string says what happened.
    #[error(
        "{}; the request may or may not have been applied: retry with the same request_id, or \
         read to find out",
        one_line(.0)
    )]
    LeadershipLost(String),
    /// TIMEOUT: the server-side wait elapsed. Indeterminate if the request had been `proposed`.
    #[error("{}", timeout_message(*.proposed))]
    Timeout { proposed: bool },
    /// SHUTTING_DOWN: the member is shutting down. Indeterminate if the request had been
    /// `proposed` before the shutdown began.
    #[error("{}", shutting_down_message(*.proposed))]
    ShuttingDown { proposed: bool },
    /// NODE_FAILED: this node's Raft stopped for good (a storage or consensus error, see
    /// `health`), and the node is stopping. Indeterminate if the request may have been `proposed`
    /// before the failure.
    #[error("this member's Raft has failed ({fatal}) and it is stopping; use another member")]
    RaftFailed { fatal: String, proposed: bool },
    /// INTERNAL, indeterminate: a storage or invariant failure on the server. Nothing
    /// acknowledged is lost, but this request may or may not have been applied.
    #[error("{0}")]
    Internal(String),
    /// UNSUPPORTED, definite: the server does not support the requested feature.
    #[error("{0}")]
    Unsupported(String),
    /// COMPACTED, definite: `requested` is older than the oldest revision the server can serve,
    /// `compact_revision`.
    #[error(
        "revision {requested} is compacted; the oldest revision available is {compact_revision}"
    )]
    Compacted {
        requested: u64,
        compact_revision: u64,
    },
    /// FUTURE_REVISION, definite: `requested` is newer than the store's `current` revision.
    #[error("revision {requested} is in the future; the current revision is {current}")]
    FutureRevision { requested: u64, current: u64 },
    /// CLUSTER_MISMATCH, definite: a Raft peer of cluster `peer` called this node, of `local`.
    #[error("peer belongs to cluster {peer:#x}, this node to {local:#x}")]
    ClusterMismatch { peer: u64, local: u64 },
    /// MEMBER_NOT_FOUND, definite.
    #[error("{0}")]
    MemberNotFound(String),
    /// MEMBER_EXISTS, definite: a member with the id or the address is already there.
    #[error("member {id} at {address} already exists")]
    MemberExists { id: u64, address: String },
    /// MEMBERSHIP_CHANGE_IN_PROGRESS, definite: retry once the change in flight is done.
    #[error("{0}")]
    MembershipChangeInProgress(String),
    /// LEARNER_NOT_CAUGHT_UP, definite: learner `id` had replicated up to `matched` of the
    /// `committed` entries after `waited_s` seconds, so it was not made a voter.
    #[error(
        "member {id} at {address} is a learner that has not caught up within {waited_s} s (it has \
         entries up to {matched}, the cluster has committed {committed}), so it was not made a \
         voter: check that it runs and that the address is right, then `member promote {id}`, or \
         `member remove {id}`"
    )]
    LearnerNotCaughtUp {
        id: u64,
        address: String,
        matched: u64,
        committed: u64,
        waited_s: u64,
    },
    /// MEMBERSHIP_REJECTED, definite: Raft refused the membership change.
    #[error("{0}")]
    MembershipRejected(String),
    /// UNAUTHENTICATED, definite: auth is enabled and the caller names no user, or its token
    /// belongs to no user.
    #[error("{0}")]
    Unauthenticated(String),
    /// PERMISSION_DENIED, definite: the message names what was denied.
    #[error("{0}")]
    PermissionDenied(String),
}

impl From<zaris_core::auth::AuthError> for ApiError {
    fn from(error: zaris_core::auth::AuthError) -> Self {
        use zaris_core::auth::AuthError;
        match error {
            AuthError::Unauthenticated(why) => ApiError::Unauthenticated(why),
            denied @ AuthError::Denied(_) => ApiError::PermissionDenied(denied.to_string()),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(rejection: Rejection) -> Self {
        ApiError::Rejected(rejection)
    }
}

impl ApiError {
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        ApiError::InvalidArgument(message.into())
    }

    /// A limit or capacity `kind` was hit outside the state machine: classified like a
    /// [`Rejection::LimitExceeded`].
    pub fn limit(kind: LimitKind, max: u64, actual: u64) -> Self {
        let name = kind.name().to_owned();
        if is_capacity(kind) {
            ApiError::CapacityExceeded { name, max, actual }
        } else {
            ApiError::LimitExceeded { name, max, actual }
        }
    }

    /// A per-request limit `name` outside the state machine's [`LimitKind`]s (page sizes, snapshot
    /// size).
    pub fn limit_exceeded(name: &str, max: u64, actual: u64) -> Self {
        ApiError::LimitExceeded {
            name: name.to_owned(),
            max,
            actual,
        }
    }

    /// INTERNAL for an outcome of the wrong kind for `call`: a server bug, or a `request_id`
    /// reused for a different request (the state machine de-duplicates by id alone).
    pub fn unexpected(call: &str, outcome: &CoreOutcome) -> Self {
        ApiError::Internal(format!(
            "{call} got an unexpected {} outcome from the state machine (a request_id reused for a \
             different request causes this)",
            outcome_name(outcome)
        ))
    }
}

/// The single mapping from an error to what goes on the wire.
impl From<ApiError> for Status {
    fn from(error: ApiError) -> Status {
        use ApiError as E;

        let definite_unless = |proposed: bool| {
            if proposed {
                Outcome::Indeterminate
            } else {
                Outcome::Definite
            }
        };
        let (code, outcome) = match &error {
            E::InvalidArgument(_) => (ErrorCode::InvalidArgument, Outcome::Definite),
            E::Rejected(rejection) => match rejection {
                Rejection::InvalidArgument(_) => (ErrorCode::InvalidArgument, Outcome::Definite),
                Rejection::TtlOutOfRange { .. } => (ErrorCode::TtlOutOfRange, Outcome::Definite),
                Rejection::LimitExceeded { limit, .. } => (limit_code(*limit), Outcome::Definite),
                Rejection::RequestIdForgotten { applied_at, .. } => (
                    ErrorCode::RequestIdForgotten,
                    // Definite for this attempt, unless the table knows the request was applied.
                    definite_unless(applied_at.is_some()),
                ),
                Rejection::AuthRefused(_) => (ErrorCode::AuthRefused, Outcome::Definite),
                Rejection::LeaseNotFound(_)
                | Rejection::LeaseIdUsed { .. }
                | Rejection::GuardFailed { .. }
                | Rejection::NotHolder { .. } => (ErrorCode::Internal, Outcome::Definite),
            },
            E::LimitExceeded { .. } => (ErrorCode::LimitExceeded, Outcome::Definite),
            E::CapacityExceeded { .. } => (ErrorCode::CapacityExceeded, Outcome::Definite),
            E::NotLeader { .. } => (ErrorCode::NotLeader, Outcome::Definite),
            E::NoLeader | E::Initializing => (ErrorCode::NoLeader, Outcome::Definite),
            E::LeadershipLost(_) => (ErrorCode::LeadershipLost, Outcome::Indeterminate),
            E::Timeout { proposed } => (ErrorCode::Timeout, definite_unless(*proposed)),
            E::ShuttingDown { proposed } => (ErrorCode::ShuttingDown, definite_unless(*proposed)),
            E::RaftFailed { proposed, .. } => (ErrorCode::NodeFailed, definite_unless(*proposed)),
            E::Internal(_) => (ErrorCode::Internal, Outcome::Indeterminate),
            E::Unsupported(_) => (ErrorCode::Unsupported, Outcome::Definite),
            E::Compacted { .. } => (ErrorCode::Compacted, Outcome::Definite),
            E::FutureRevision { .. } => (ErrorCode::FutureRevision, Outcome::Definite),
            E::ClusterMismatch { .. } => (ErrorCode::ClusterMismatch, Outcome::Definite),
            E::MemberNotFound(_) => (ErrorCode::MemberNotFound, Outcome::Definite),
            E::MemberExists { .. } => (ErrorCode::MemberExists, Outcome::Definite),
            E::MembershipChangeInProgress(_) => {
                (ErrorCode::MembershipChangeInProgress, Outcome::Definite)
            }
            E::LearnerNotCaughtUp { .. } => (ErrorCode::LearnerNotCaughtUp, Outcome::Definite),
            E::MembershipRejected(_) => (ErrorCode::MembershipRejected, Outcome::Definite),
            E::Unauthenticated(_) => (ErrorCode::Unauthenticated, Outcome::Definite),
            E::PermissionDenied(_) => (ErrorCode::PermissionDenied, Outcome::Definite),
        };
        let mut detail = ErrorDetail::new(code, outcome, one_line(&error.to_string()));
        match error {
            E::LimitExceeded { name, max, actual } => {
                detail = detail.with_limit(name, max, actual);
            }
            E::CapacityExceeded { name, max, actual } => {
                detail = detail.with_limit(name, max, actual);
                detail.retry_after_ms = CAPACITY_RETRY_AFTER_MS;
            }
            E::Rejected(Rejection::TtlOutOfRange {
                ttl_ms,
                min_ttl_ms,
                max_ttl_ms,
            }) => {
                let (name, bound) = if ttl_ms < min_ttl_ms {
                    ("min_ttl_ms", min_ttl_ms)
                } else {
                    ("max_ttl_ms", max_ttl_ms)
                };
                detail = detail.with_limit(name, bound.get(), ttl_ms.get());
            }
            E::Rejected(Rejection::LimitExceeded { limit, max, actual }) => {
                detail = detail.with_limit(limit.name(), max, actual);
                if is_capacity(limit) {
                    detail.retry_after_ms = CAPACITY_RETRY_AFTER_MS;
                }
            }
            E::Rejected(Rejection::RequestIdForgotten {
                forgotten_through,
                applied_at,
            }) => {
                detail.compact_revision = forgotten_through.get();
                detail.applied_revision = applied_at.unwrap_or(Revision::ZERO).get();
            }
            E::NotLeader {
                leader_id,
                leader_addr,
                term,
            } => {
                detail.raft_leader_id = leader_id;
                detail.raft_leader_address = one_line(&leader_addr);
                detail.raft_term = term;
            }
            E::Compacted {
                compact_revision, ..
            } => detail.compact_revision = compact_revision,
            _ => {}
        }
        detail.into_status()
    }
}

/// What to do about a full capacity `name`.
fn capacity_hint(name: &str) -> &'static str {
    if name == LimitKind::StateBytes.name() {
        "the state quota is full: retry once keys are deleted or leases end (deletes, revokes \
         and renewals still work)"
    } else {
        "retry later"
    }
}

/// Whether hitting `kind` means the cluster is full (CAPACITY_EXCEEDED: the same request may
/// succeed later) rather than that the request itself is too big (LIMIT_EXCEEDED: resending it can
/// never succeed).
pub fn is_capacity(kind: LimitKind) -> bool {
    // Exhaustive on purpose: a new limit must be classified here.
    match kind {
        LimitKind::WaitersPerLock
        | LimitKind::KeysPerLease
        | LimitKind::Leases
        | LimitKind::StateBytes => true,
        LimitKind::KeyBytes
        | LimitKind::ValueBytes
        | LimitKind::LockNameBytes
        | LimitKind::TxnOps
        | LimitKind::BatchIds => false,
    }
}

fn limit_code(kind: LimitKind) -> ErrorCode {
    if is_capacity(kind) {
        ErrorCode::CapacityExceeded
    } else {
        ErrorCode::LimitExceeded
    }
}

/// The message of a [`ApiError::Rejected`]: the same as the variant the rejection corresponds to
/// would give, so a limit reads the same whether validation or apply caught it.
fn rejection_message(rejection: &Rejection) -> String {
    match rejection {
        Rejection::InvalidArgument(message) => message.clone(),
        Rejection::LimitExceeded { limit, max, actual } => {
            ApiError::limit(*limit, *max, *actual).to_string()
        }
        Rejection::TtlOutOfRange { .. }
        | Rejection::RequestIdForgotten { .. }
        | Rejection::AuthRefused(_) => rejection.to_string(),
        Rejection::LeaseNotFound(_)
        | Rejection::LeaseIdUsed { .. }
        | Rejection::GuardFailed { .. }
        | Rejection::NotHolder { .. } => format!(
            "{rejection}, which this call has no result value for (was its request_id already \
             used for a different request?); nothing was changed"
        ),
    }
}

fn not_leader_message(leader_id: u64, leader_addr: &str, term: u64) -> String {
    if leader_addr.is_empty() {
        format!(
            "not the Raft leader; the leader is node {leader_id} (term {term}), address unknown"
        )
    } else {
        format!("not the Raft leader; retry at node {leader_id} at {leader_addr} (term {term})")
    }
}

fn timeout_message(proposed: bool) -> &'static str {
    if proposed {
        "timed out after the request was proposed; it may or may not have been applied"
    } else {
        "timed out before the request was proposed; it was not applied"
    }
}

fn shutting_down_message(proposed: bool) -> &'static str {
    if proposed {
        "the member is shutting down after the request was proposed; it may or may not have been \
         applied"
    } else {
        "the member is shutting down; the request was not proposed, retry on another member"
    }
}

/// A short name for messages; never the contents (they may be large or sensitive).
fn outcome_name(outcome: &CoreOutcome) -> &'static str {
    match outcome {
        CoreOutcome::Granted { .. } => "Granted",
        CoreOutcome::Renewed { .. } => "Renewed",
        CoreOutcome::Revoked { .. } => "Revoked",
        CoreOutcome::Expired { .. } => "Expired",
        CoreOutcome::Put { .. } => "Put",
        CoreOutcome::Deleted { .. } => "Deleted",
        CoreOutcome::Txn { .. } => "Txn",
        CoreOutcome::Lock(_) => "Lock",
        CoreOutcome::Unlocked { .. } => "Unlocked",
        CoreOutcome::Cancelled(_) => "Cancelled",
        CoreOutcome::LimitsSet => "LimitsSet",
        CoreOutcome::AuthChanged => "AuthChanged",
        CoreOutcome::Ignored => "Ignored",
        CoreOutcome::Batch(_) => "Batch",
    }
}

/// Messages are one line: folds line breaks (from wrapped storage errors, say) into spaces.
fn one_line(message: &str) -> String {
    if message.contains(['\n', '\r']) {
        message
            .split(['\n', '\r'])
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        message.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;
    use zaris_core::{DurationMs, FencingToken, LeaseId, Limits};

    use super::*;

    // The statuses the tests check, built the way the server builds them: an ApiError through
    // the one From impl.
    fn rejection_status(rejection: &Rejection) -> Status {
        ApiError::from(rejection.clone()).into()
    }
    fn not_leader(leader_id: u64, leader_addr: &str, term: u64) -> Status {
        ApiError::NotLeader {
            leader_id,
            leader_addr: leader_addr.into(),
            term,
        }
        .into()
    }
    fn no_leader() -> Status {
        ApiError::NoLeader.into()
    }
    fn indeterminate(message: &str) -> Status {
        ApiError::LeadershipLost(message.into()).into()
    }
    fn timeout(proposed: bool) -> Status {
        ApiError::Timeout { proposed }.into()
    }
    fn shutting_down(proposed: bool) -> Status {
        ApiError::ShuttingDown { proposed }.into()
    }
    fn internal(message: &str) -> Status {
        ApiError::Internal(message.into()).into()
    }
    fn unsupported(message: &str) -> Status {
        ApiError::Unsupported(message.into()).into()
    }
    fn compacted(requested: u64, compact_revision: u64) -> Status {
        ApiError::Compacted {
            requested,
            compact_revision,
        }
        .into()
    }
    fn future_revision(requested: u64, current: u64) -> Status {
        ApiError::FutureRevision { requested, current }.into()
    }
    fn limit_exceeded(name: &str, max: u64, actual: u64) -> Status {
        ApiError::limit_exceeded(name, max, actual).into()
    }

    /// The detail of `status`, which must be there.
    fn expect_detail(status: &Status) -> ErrorDetail {
        match zaris_proto::detail(status) {
            Some(detail) => detail,
            None => panic!("status without a Zaris detail: {status:?}"),
        }
    }

    fn check(status: &Status, code: Code, error: ErrorCode, outcome: Outcome) -> ErrorDetail {
        let detail = expect_detail(status);
        assert_eq!(status.code(), code, "{status:?}");
        assert_eq!(detail.code(), error, "{detail:?}");
        assert_eq!(detail.outcome(), outcome, "{detail:?}");
        assert_eq!(zaris_proto::outcome(status), outcome);
        assert_eq!(status.message(), detail.message);
        assert!(!status.message().is_empty());
        assert!(!status.message().contains('\n'), "{status:?}");
        detail
    }

    fn limit_of(detail: &ErrorDetail) -> (String, u64, u64) {
        let limit = detail.limit.clone().unwrap_or_default();
        (limit.name, limit.limit, limit.actual)
    }

    #[test]
    fn invalid_argument_rejection() {
        let status = rejection_status(&Rejection::InvalidArgument("key must not be empty".into()));
        let detail = check(
            &status,
            Code::InvalidArgument,
            ErrorCode::InvalidArgument,
            Outcome::Definite,
        );
        assert!(detail.message.contains("key must not be empty"));
        assert!(detail.limit.is_none());
    }

    #[test]
    fn ttl_below_minimum_names_min_ttl() {
        let limits = Limits::default();
        let status = rejection_status(&Rejection::TtlOutOfRange {
            ttl_ms: DurationMs::new(5),
            min_ttl_ms: limits.min_ttl_ms,
            max_ttl_ms: limits.max_ttl_ms,
        });
        let detail = check(
            &status,
            Code::InvalidArgument,
            ErrorCode::TtlOutOfRange,
            Outcome::Definite,
        );
        assert_eq!(
            limit_of(&detail),
            ("min_ttl_ms".into(), limits.min_ttl_ms.get(), 5)
        );
        assert!(
            detail
                .message
                .contains(&limits.min_ttl_ms.get().to_string())
        );
        assert!(
            detail
                .message
                .contains(&limits.max_ttl_ms.get().to_string())
        );
    }

    #[test]
    fn ttl_above_maximum_names_max_ttl() {
        let status = rejection_status(&Rejection::TtlOutOfRange {
            ttl_ms: DurationMs::new(10_000),
            min_ttl_ms: DurationMs::new(100),
            max_ttl_ms: DurationMs::new(1_000),
        });
        let detail = check(
            &status,
            Code::InvalidArgument,
            ErrorCode::TtlOutOfRange,
            Outcome::Definite,
        );
        assert_eq!(limit_of(&detail), ("max_ttl_ms".into(), 1_000, 10_000));
    }

    #[test]
    fn per_request_limits_are_limit_exceeded() {
        for kind in [
            LimitKind::KeyBytes,
            LimitKind::ValueBytes,
            LimitKind::LockNameBytes,
            LimitKind::TxnOps,
            LimitKind::BatchIds,
        ] {
            let status = rejection_status(&Rejection::LimitExceeded {
                limit: kind,
                max: 10,
                actual: 11,
            });
            let detail = check(
                &status,
                Code::ResourceExhausted,
                ErrorCode::LimitExceeded,
                Outcome::Definite,
            );
            assert_eq!(limit_of(&detail), (kind.name().into(), 10, 11));
            assert!(detail.message.contains(kind.name()), "{detail:?}");
            assert_eq!(detail.retry_after_ms, 0);
        }
    }

    #[test]
    fn capacities_are_capacity_exceeded() {
        for kind in [
            LimitKind::WaitersPerLock,
            LimitKind::KeysPerLease,
            LimitKind::Leases,
        ] {
            let status = rejection_status(&Rejection::LimitExceeded {
                limit: kind,
                max: 3,
                actual: 4,
            });
            let detail = check(
                &status,
                Code::ResourceExhausted,
                ErrorCode::CapacityExceeded,
                Outcome::Definite,
            );
            assert_eq!(limit_of(&detail), (kind.name().into(), 3, 4));
            assert!(detail.message.contains(kind.name()), "{detail:?}");
            assert_eq!(detail.retry_after_ms, CAPACITY_RETRY_AFTER_MS);
        }
    }

    #[test]
    fn domain_rejections_without_a_result_value_are_definite() {
        for rejection in [
            Rejection::LeaseNotFound(LeaseId::new(7)),
            Rejection::LeaseIdUsed {
                id: LeaseId::new(7),
                next_free: LeaseId::new(8),
            },
            Rejection::GuardFailed {
                lock: "l".into(),
                token: FencingToken::new(3),
                current: None,
            },
            Rejection::NotHolder {
                lock: "l".into(),
                lease: LeaseId::new(7),
                token: FencingToken::new(3),
            },
        ] {
            let status = rejection_status(&rejection);
            let detail = check(
                &status,
                Code::Internal,
                ErrorCode::Internal,
                Outcome::Definite,
            );
            assert!(detail.message.contains(&rejection.to_string()));
        }
    }

    #[test]
    fn not_leader_carries_leader_and_term() {
        let status = not_leader(3, "10.0.0.3:2379", 9);
        let detail = check(
            &status,
            Code::Unavailable,
            ErrorCode::NotLeader,
            Outcome::Definite,
        );
        assert_eq!(detail.raft_leader_id, 3);
        assert_eq!(detail.raft_leader_address, "10.0.0.3:2379");
        assert_eq!(detail.raft_term, 9);
        assert!(detail.message.contains("10.0.0.3:2379"));

        let unknown_address = expect_detail(&not_leader(3, "", 9));
        assert!(unknown_address.message.contains("address unknown"));
    }

    #[test]
    fn no_leader_is_definite_unavailable() {
        check(
            &no_leader(),
            Code::Unavailable,
            ErrorCode::NoLeader,
            Outcome::Definite,
        );
    }

    #[test]
    fn leadership_lost_is_indeterminate() {
        let detail = check(
            &indeterminate("leadership changed before the entry committed"),
            Code::Unavailable,
            ErrorCode::LeadershipLost,
            Outcome::Indeterminate,
        );
        assert!(detail.message.contains("leadership changed"));
    }

    #[test]
    fn timeout_outcome_follows_proposal() {
        check(
            &timeout(true),
            Code::DeadlineExceeded,
            ErrorCode::Timeout,
            Outcome::Indeterminate,
        );
        check(
            &timeout(false),
            Code::DeadlineExceeded,
            ErrorCode::Timeout,
            Outcome::Definite,
        );
    }

    #[test]
    fn shutting_down_outcome_follows_proposal() {
        check(
            &shutting_down(true),
            Code::Unavailable,
            ErrorCode::ShuttingDown,
            Outcome::Indeterminate,
        );
        check(
            &shutting_down(false),
            Code::Unavailable,
            ErrorCode::ShuttingDown,
            Outcome::Definite,
        );
    }

    #[test]
    fn internal_is_indeterminate_and_one_line() {
        let detail = check(
            &internal("sled failed:\n  io error\r\n  disk full"),
            Code::Internal,
            ErrorCode::Internal,
            Outcome::Indeterminate,
        );
        assert_eq!(detail.message, "sled failed: io error disk full");
    }

    #[test]
    fn read_path_errors() {
        let detail = check(
            &compacted(3, 10),
            Code::OutOfRange,
            ErrorCode::Compacted,
            Outcome::Definite,
        );
        assert_eq!(detail.compact_revision, 10);
        check(
            &future_revision(11, 10),
            Code::OutOfRange,
            ErrorCode::FutureRevision,
            Outcome::Definite,
        );
        check(
            &unsupported("gRPC reflection"),
            Code::Unimplemented,
            ErrorCode::Unsupported,
            Outcome::Definite,
        );
    }

    #[test]
    fn direct_limit_helpers() {
        let detail = check(
            &limit_exceeded("max_range_keys", 100, 500),
            Code::ResourceExhausted,
            ErrorCode::LimitExceeded,
            Outcome::Definite,
        );
        assert_eq!(limit_of(&detail), ("max_range_keys".into(), 100, 500));
        assert_eq!(detail.message, "limit max_range_keys exceeded: 500 > 100");
    }

    #[test]
    fn limits_outside_the_state_machine_read_like_rejections() {
        for (kind, max, actual) in [(LimitKind::KeyBytes, 8, 9), (LimitKind::Leases, 3, 4)] {
            let direct = Status::from(ApiError::limit(kind, max, actual));
            let rejected = rejection_status(&Rejection::LimitExceeded {
                limit: kind,
                max,
                actual,
            });
            assert_eq!(expect_detail(&direct), expect_detail(&rejected));
        }
        let direct = expect_detail(&ApiError::InvalidArgument("bad key".into()).into());
        let rejected = expect_detail(&rejection_status(&Rejection::InvalidArgument(
            "bad key".into(),
        )));
        assert_eq!(direct, rejected);
    }

    #[test]
    fn request_id_forgotten_outcome_follows_the_table() {
        let detail = check(
            &rejection_status(&Rejection::RequestIdForgotten {
                forgotten_through: Revision::new(12),
                applied_at: Some(Revision::new(9)),
            }),
            Code::FailedPrecondition,
            ErrorCode::RequestIdForgotten,
            Outcome::Indeterminate,
        );
        assert_eq!((detail.compact_revision, detail.applied_revision), (12, 9));
        check(
            &rejection_status(&Rejection::RequestIdForgotten {
                forgotten_through: Revision::new(12),
                applied_at: None,
            }),
            Code::FailedPrecondition,
            ErrorCode::RequestIdForgotten,
            Outcome::Definite,
        );
    }

    #[test]
    fn membership_and_peer_errors_are_definite() {
        let cases = [
            (
                ApiError::MemberNotFound("member 4 not found".into()),
                Code::NotFound,
                ErrorCode::MemberNotFound,
            ),
            (
                ApiError::MemberExists {
                    id: 2,
                    address: "10.0.0.2:7379".into(),
                },
                Code::AlreadyExists,
                ErrorCode::MemberExists,
            ),
            (
                ApiError::MembershipChangeInProgress("in progress".into()),
                Code::Aborted,
                ErrorCode::MembershipChangeInProgress,
            ),
            (
                ApiError::LearnerNotCaughtUp {
                    id: 4,
                    address: "10.0.0.4:7379".into(),
                    matched: 3,
                    committed: 10,
                    waited_s: 2,
                },
                Code::FailedPrecondition,
                ErrorCode::LearnerNotCaughtUp,
            ),
            (
                ApiError::MembershipRejected("cannot remove the only voter".into()),
                Code::FailedPrecondition,
                ErrorCode::MembershipRejected,
            ),
            (
                ApiError::ClusterMismatch { peer: 1, local: 2 },
                Code::FailedPrecondition,
                ErrorCode::ClusterMismatch,
            ),
        ];
        for (error, code, error_code) in cases {
            let message = error.to_string();
            let detail = check(&error.into(), code, error_code, Outcome::Definite);
            assert_eq!(detail.message, message);
        }
    }

    #[test]
    fn raft_failed_outcome_follows_proposal() {
        let failed = |proposed| {
            Status::from(ApiError::RaftFailed {
                fatal: "storage error".into(),
                proposed,
            })
        };
        let detail = check(
            &failed(true),
            Code::Unavailable,
            ErrorCode::NodeFailed,
            Outcome::Indeterminate,
        );
        assert!(detail.message.contains("storage error"), "{detail:?}");
        check(
            &failed(false),
            Code::Unavailable,
            ErrorCode::NodeFailed,
            Outcome::Definite,
        );
    }
}
