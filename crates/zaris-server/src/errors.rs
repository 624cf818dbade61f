//! The one place that turns a failure into a gRPC [`Status`].
//!
//! Every status a Zaris server returns carries a [`zaris_proto::v1::ErrorDetail`] built here: an
//! [`ErrorCode`] (which fixes the gRPC code, see [`ErrorCode::grpc_code`]), a one-line message
//! naming the offending field or limit, and the [`Outcome`] — whether the call may have taken
//! effect. Handlers never build statuses themselves; they call these functions, so the mapping
//! documented in `proto/zaris/v1/common.proto` lives in one file.
//!
//! Two families:
//! - [`rejection_status`]: a [`Rejection`] from validation or apply. A rejection changes nothing,
//!   so every such status is definite.
//! - Raft-level and server failures for the proposer: [`not_leader`], [`no_leader`],
//!   [`indeterminate`], [`timeout`], [`shutting_down`], [`internal`], and the read-path errors
//!   [`compacted`] and [`future_revision`].

use tonic::Status;
use zaris_core::{LimitKind, Rejection};
use zaris_proto::v1::{ErrorCode, ErrorDetail, Outcome};

/// Suggested minimum delay before retrying a request that hit a capacity (`retry_after_ms` of a
/// CAPACITY_EXCEEDED error): capacity frees up as leases end, waiters leave or keys are deleted,
/// so an immediate retry is pointless.
pub const CAPACITY_RETRY_AFTER_MS: u64 = 1_000;

/// The status for a request the state machine (or pre-proposal validation) rejected.
///
/// - `InvalidArgument` → INVALID_ARGUMENT / INVALID_ARGUMENT.
/// - `TtlOutOfRange` → INVALID_ARGUMENT / TTL_OUT_OF_RANGE, `limit` naming the bound crossed
///   (`min_ttl_ms` or `max_ttl_ms`) with the requested TTL as `actual`.
/// - `LimitExceeded` → RESOURCE_EXHAUSTED / LIMIT_EXCEEDED for per-request limits, or
///   CAPACITY_EXCEEDED for state capacities (see [`is_capacity`]), `limit` naming it.
/// - `LeaseNotFound`, `LeaseIdUsed`, `GuardFailed`, `NotHolder`: these are result values in every
///   response that can carry them (see `convert`), so reaching here means the call got a rejection
///   it has no result value for — a server bug, or a `request_id` reused for a different request
///   (the state machine then replays the other request's answer). No ErrorCode fits a domain answer
///   (the FAILED_PRECONDITION ones are all about membership), so this is INTERNAL, but
///   **definite**: a rejection changed nothing and a retry with the same id gets the same answer.
///
/// - `RequestIdForgotten` → FAILED_PRECONDITION / REQUEST_ID_FORGOTTEN with `compact_revision`
///   (and `applied_revision` when the table knows the request was applied: indeterminate then).
///
/// All others are definite: a rejected request did not take effect.
pub fn rejection_status(rejection: &Rejection) -> Status {
    match rejection {
        Rejection::InvalidArgument(message) => invalid_argument(message.as_str()),
        Rejection::TtlOutOfRange {
            ttl_ms,
            min_ttl_ms,
            max_ttl_ms,
        } => {
            let (name, bound) = if ttl_ms < min_ttl_ms {
                ("min_ttl_ms", *min_ttl_ms)
            } else {
                ("max_ttl_ms", *max_ttl_ms)
            };
            detail(
                ErrorCode::TtlOutOfRange,
                Outcome::Definite,
                rejection.to_string(),
            )
            .with_limit(name, bound, *ttl_ms)
            .into_status()
        }
        Rejection::LimitExceeded { limit, max, actual } => {
            if is_capacity(*limit) {
                capacity_exceeded(limit.name(), *max, *actual)
            } else {
                limit_exceeded(limit.name(), *max, *actual)
            }
        }
        Rejection::RequestIdForgotten {
            forgotten_through,
            applied_at,
        } => {
            // Definite for this attempt, unless the table knows the request was applied.
            let outcome = if applied_at.is_some() {
                Outcome::Indeterminate
            } else {
                Outcome::Definite
            };
            let mut detail = detail(
                ErrorCode::RequestIdForgotten,
                outcome,
                rejection.to_string(),
            );
            detail.compact_revision = *forgotten_through;
            detail.applied_revision = applied_at.unwrap_or(0);
            detail.into_status()
        }
        Rejection::LeaseNotFound(_)
        | Rejection::LeaseIdUsed { .. }
        | Rejection::GuardFailed { .. }
        | Rejection::NotHolder { .. } => detail(
            ErrorCode::Internal,
            Outcome::Definite,
            format!(
                "{rejection}, which this call has no result value for (was its request_id already \
                 used for a different request?); nothing was changed"
            ),
        )
        .into_status(),
    }
}

/// Whether hitting `kind` means the cluster is full (CAPACITY_EXCEEDED: the same request may
/// succeed later) rather than that the request itself is too big (LIMIT_EXCEEDED: resending it can
/// never succeed).
pub fn is_capacity(kind: LimitKind) -> bool {
    // Exhaustive on purpose: a new limit must be classified here.
    match kind {
        LimitKind::WaitersPerLock | LimitKind::KeysPerLease | LimitKind::Leases => true,
        LimitKind::KeyBytes
        | LimitKind::ValueBytes
        | LimitKind::LockNameBytes
        | LimitKind::TxnOps
        | LimitKind::BatchIds => false,
    }
}

/// INVALID_ARGUMENT / INVALID_ARGUMENT, definite: the request is malformed; `message` names the
/// field.
pub fn invalid_argument(message: impl Into<String>) -> Status {
    detail(ErrorCode::InvalidArgument, Outcome::Definite, message).into_status()
}

/// RESOURCE_EXHAUSTED / LIMIT_EXCEEDED, definite: the request itself exceeds per-request limit
/// `name` (configured `max`; the request had `actual`). Also for server-side page sizes such as
/// `max_range_keys`.
pub fn limit_exceeded(name: &str, max: u64, actual: u64) -> Status {
    detail(
        ErrorCode::LimitExceeded,
        Outcome::Definite,
        format!("limit {name} exceeded: {actual} > {max}"),
    )
    .with_limit(name, max, actual)
    .into_status()
}

/// RESOURCE_EXHAUSTED / CAPACITY_EXCEEDED, definite: the request would take the cluster or this
/// server past capacity `name` (`max`; it would reach `actual`). Retry later, with backoff.
pub fn capacity_exceeded(name: &str, max: u64, actual: u64) -> Status {
    let mut detail = detail(
        ErrorCode::CapacityExceeded,
        Outcome::Definite,
        format!("capacity {name} exceeded: {actual} > {max}; retry later"),
    )
    .with_limit(name, max, actual);
    detail.retry_after_ms = CAPACITY_RETRY_AFTER_MS;
    detail.into_status()
}

/// UNAVAILABLE / NOT_LEADER, definite: this member is not the Raft leader; node `leader_id` is,
/// in `term`, serving the client API at `leader_addr`. Nothing was proposed.
pub fn not_leader(leader_id: u64, leader_addr: &str, term: u64) -> Status {
    let message = if leader_addr.is_empty() {
        format!(
            "not the Raft leader; the leader is node {leader_id} (term {term}), address unknown"
        )
    } else {
        format!("not the Raft leader; retry at node {leader_id} at {leader_addr} (term {term})")
    };
    let mut detail = detail(ErrorCode::NotLeader, Outcome::Definite, message);
    detail.raft_leader_id = leader_id;
    detail.raft_leader_address = one_line(leader_addr);
    detail.raft_term = term;
    detail.into_status()
}

/// UNAVAILABLE / NO_LEADER, definite: a new cluster whose first leader has not yet fixed the
/// cluster's limits. Nothing was proposed; retry shortly.
pub fn initializing() -> Status {
    detail(
        ErrorCode::NoLeader,
        Outcome::Definite,
        "the cluster is still initializing (its limits are not set yet); retry shortly",
    )
    .into_status()
}

/// UNAVAILABLE / NO_LEADER, definite: no Raft leader is known (election in progress, or this
/// member is partitioned). Nothing was proposed.
pub fn no_leader() -> Status {
    detail(
        ErrorCode::NoLeader,
        Outcome::Definite,
        "no Raft leader is known; retry later, preferably on another member",
    )
    .into_status()
}

/// UNAVAILABLE / LEADERSHIP_LOST, indeterminate: the request was proposed, then this member lost
/// leadership before it learned whether the entry committed. `message` says what happened.
pub fn indeterminate(message: impl Into<String>) -> Status {
    let message = message.into();
    detail(
        ErrorCode::LeadershipLost,
        Outcome::Indeterminate,
        format!(
            "{}; the request may or may not have been applied: retry with the same request_id, \
             or read to find out",
            one_line(&message)
        ),
    )
    .into_status()
}

/// DEADLINE_EXCEEDED / TIMEOUT: the server-side wait elapsed. Indeterminate if the request had
/// been proposed, definite otherwise.
pub fn timeout(proposed: bool) -> Status {
    let (outcome, message) = if proposed {
        (
            Outcome::Indeterminate,
            "timed out after the request was proposed; it may or may not have been applied",
        )
    } else {
        (
            Outcome::Definite,
            "timed out before the request was proposed; it was not applied",
        )
    };
    detail(ErrorCode::Timeout, outcome, message).into_status()
}

/// UNAVAILABLE / SHUTTING_DOWN: the member is shutting down. Indeterminate if the request had been
/// proposed before the shutdown began, definite otherwise.
pub fn shutting_down(proposed: bool) -> Status {
    let (outcome, message) = if proposed {
        (
            Outcome::Indeterminate,
            "the member is shutting down after the request was proposed; it may or may not have \
             been applied",
        )
    } else {
        (
            Outcome::Definite,
            "the member is shutting down; the request was not proposed, retry on another member",
        )
    };
    detail(ErrorCode::ShuttingDown, outcome, message).into_status()
}

/// INTERNAL / INTERNAL, indeterminate: a storage or invariant failure on the server. Nothing
/// acknowledged is lost, but this request may or may not have been applied.
/// UNAVAILABLE / NODE_FAILED: this node's Raft stopped for good (a storage or consensus error,
/// see `health`), and the node is stopping. Indeterminate if the request may have been proposed
/// before the failure.
pub fn raft_failed(fatal: impl std::fmt::Display, proposed: bool) -> Status {
    let outcome = if proposed {
        Outcome::Indeterminate
    } else {
        Outcome::Definite
    };
    detail(
        ErrorCode::NodeFailed,
        outcome,
        format!("this member's Raft has failed ({fatal}) and it is stopping; use another member"),
    )
    .into_status()
}

pub fn internal(message: impl Into<String>) -> Status {
    detail(ErrorCode::Internal, Outcome::Indeterminate, message).into_status()
}

/// UNIMPLEMENTED / UNSUPPORTED, definite: the server does not support the requested feature.
pub fn unsupported(message: impl Into<String>) -> Status {
    detail(ErrorCode::Unsupported, Outcome::Definite, message).into_status()
}

/// OUT_OF_RANGE / COMPACTED, definite: `requested` is older than the oldest revision the server
/// can serve, `compact_revision`.
pub fn compacted(requested: u64, compact_revision: u64) -> Status {
    let mut detail = detail(
        ErrorCode::Compacted,
        Outcome::Definite,
        format!(
            "revision {requested} is compacted; the oldest revision available is \
             {compact_revision}"
        ),
    );
    detail.compact_revision = compact_revision;
    detail.into_status()
}

/// OUT_OF_RANGE / FUTURE_REVISION, definite: `requested` is newer than the store's `current`
/// revision.
pub fn future_revision(requested: u64, current: u64) -> Status {
    detail(
        ErrorCode::FutureRevision,
        Outcome::Definite,
        format!("revision {requested} is in the future; the current revision is {current}"),
    )
    .into_status()
}

/// A detail with a one-line message.
fn detail(code: ErrorCode, outcome: Outcome, message: impl Into<String>) -> ErrorDetail {
    ErrorDetail::new(code, outcome, one_line(&message.into()))
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
    use zaris_core::Limits;

    use super::*;

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
            ttl_ms: 5,
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
            ("min_ttl_ms".into(), limits.min_ttl_ms, 5)
        );
        assert!(detail.message.contains(&limits.min_ttl_ms.to_string()));
        assert!(detail.message.contains(&limits.max_ttl_ms.to_string()));
    }

    #[test]
    fn ttl_above_maximum_names_max_ttl() {
        let status = rejection_status(&Rejection::TtlOutOfRange {
            ttl_ms: 10_000,
            min_ttl_ms: 100,
            max_ttl_ms: 1_000,
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
            Rejection::LeaseNotFound(7),
            Rejection::LeaseIdUsed {
                id: 7,
                next_free: 8,
            },
            Rejection::GuardFailed {
                lock: "l".into(),
                token: 3,
                current: None,
            },
            Rejection::NotHolder {
                lock: "l".into(),
                lease: 7,
                token: 3,
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
}
