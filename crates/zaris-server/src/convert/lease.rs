//! Grant, Revoke, KeepAlive, TimeToLive and Leases: requests in, answers out. A KeepAlive is
//! answered from the applied Renew that carried its ids ([`Renewals`], from the renew batcher).

use std::collections::HashSet;

use zaris_core::command::check_renew_ids;
use zaris_core::{
    BoundKey, Command, DurationMs, LeaseId, LeaseInfo, LimitKind, Limits, Outcome, Rejection,
    Request, Response,
};
use zaris_proto::v1::{self, ResponseHeader};

use super::validated;
use crate::error::ApiError;
use crate::renew::Renewals;

/// A lease Grant, validated (TTL bounds; the keys it binds, if any).
pub fn grant_request(request: v1::LeaseGrantRequest, limits: &Limits) -> Result<Request, ApiError> {
    let (id, ttl_ms) = (LeaseId::new(request.id), DurationMs::new(request.ttl_ms));
    let command = if request.keys.is_empty() {
        Command::Grant { id, ttl_ms }
    } else {
        Command::GrantBound {
            id,
            ttl_ms,
            owner: None,
            keys: request
                .keys
                .into_iter()
                .map(|k| BoundKey {
                    key: k.key,
                    value: k.value,
                })
                .collect(),
        }
    };
    validated(request.request_id, command, limits).map_err(|error| match error {
        ApiError::Rejected(rejection) => grant_rejection(rejection),
        other => other,
    })
}

/// A refused grant's error. Its keys all go to a lease that holds none yet, so more of them than
/// `max_keys_per_lease` can never fit: for a grant that limit is per request (LIMIT_EXCEEDED),
/// not a capacity that may free up (CAPACITY_EXCEEDED, as for a put onto a lease that holds keys).
fn grant_rejection(rejection: Rejection) -> ApiError {
    match rejection {
        Rejection::LimitExceeded {
            limit: LimitKind::KeysPerLease,
            max,
            actual,
        } => ApiError::limit_exceeded(LimitKind::KeysPerLease.name(), max, actual),
        other => other.into(),
    }
}

/// A lease Revoke, validated (id 0 is refused).
pub fn revoke_request(
    request: v1::LeaseRevokeRequest,
    limits: &Limits,
) -> Result<Request, ApiError> {
    validated(
        request.request_id,
        Command::Revoke {
            id: LeaseId::new(request.id),
        },
        limits,
    )
}

/// The lease ids of one KeepAlive request, validated, duplicates dropped (first occurrence kept:
/// "an id listed twice is renewed and reported once"). At most `max_batch_ids` ids may be listed
/// (counted before dropping duplicates); none may be 0. An empty list is valid and yields no ids:
/// the server answers it at once, without a Raft entry.
///
/// The ids of many requests are merged into one Renew by the group committer; answer each request
/// with [`keepalive_response`].
pub fn keepalive_ids(
    request: &v1::LeaseKeepAliveRequest,
    limits: &Limits,
) -> Result<Vec<LeaseId>, ApiError> {
    let listed = request.ids.len() as u64;
    let max = limits.get(LimitKind::BatchIds);
    if listed > max {
        return Err(ApiError::from(Rejection::LimitExceeded {
            limit: LimitKind::BatchIds,
            max,
            actual: listed,
        }));
    }
    // One id, the common case, has nothing to repeat: its set stays empty, never allocated.
    let single = request.ids.len() <= 1;
    let mut seen = HashSet::with_capacity(if single { 0 } else { request.ids.len() });
    let ids: Vec<LeaseId> = request
        .ids
        .iter()
        .copied()
        .filter(|id| single || seen.insert(*id))
        .map(LeaseId::new)
        .collect();
    if !ids.is_empty() {
        check_renew_ids(&ids, limits).map_err(ApiError::from)?;
    }
    Ok(ids)
}

/// A Grant answer: created → GRANTED with id and TTL; requested id used before → ID_IN_USE with the
/// next free id.
pub fn grant_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::LeaseGrantResponse, ApiError> {
    let (result, id, ttl_ms, next_free_id) = match response {
        Ok(Outcome::Granted { id, ttl_ms }) => {
            (v1::GrantResult::Granted, id.get(), ttl_ms.get(), 0)
        }
        Err(Rejection::LeaseIdUsed { next_free, .. }) => {
            (v1::GrantResult::IdInUse, 0, 0, next_free.get())
        }
        Err(rejection) => return Err(grant_rejection(rejection)),
        Ok(other) => return Err(ApiError::unexpected("Grant", &other)),
    };
    Ok(v1::LeaseGrantResponse {
        header: Some(header),
        result: result.into(),
        id,
        ttl_ms,
        next_free_id,
    })
}

/// A Revoke answer: ended → REVOKED; no such lease → NOT_FOUND.
pub fn revoke_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::LeaseRevokeResponse, ApiError> {
    let result = match response {
        Ok(Outcome::Revoked { .. }) => v1::RevokeResult::Revoked,
        Err(Rejection::LeaseNotFound(_)) => v1::RevokeResult::NotFound,
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Revoke", &other)),
    };
    Ok(v1::LeaseRevokeResponse {
        header: Some(header),
        result: result.into(),
    })
}

/// The answer to one KeepAlive request whose (de-duplicated, see [`keepalive_ids`]) `ids` were
/// part of the Renew behind `renewals`: `renewed` in the request's order, then `not_found`. An id
/// the Renew did not cover is INTERNAL, never reported as not found: "not found" tells the client
/// its lease is gone for good.
pub fn keepalive_response(
    header: ResponseHeader,
    seq: u64,
    ids: &[LeaseId],
    renewals: &Renewals,
) -> Result<v1::LeaseKeepAliveResponse, ApiError> {
    let mut renewed = Vec::new();
    let mut not_found = Vec::new();
    for &id in ids {
        if let Some(ttl_ms) = renewals.renewed(id) {
            renewed.push(v1::LeaseRenewed {
                id: id.get(),
                ttl_ms: ttl_ms.get(),
            });
        } else if renewals.not_found(id) {
            not_found.push(id.get());
        } else {
            return Err(ApiError::Internal(format!(
                "lease {id} is missing from the outcome of the renew batch that carried it"
            )));
        }
    }
    Ok(v1::LeaseKeepAliveResponse {
        header: Some(header),
        seq,
        renewed,
        not_found,
    })
}

/// A TimeToLive answer. `info` is the lease (with its keys if the request asked for them), or
/// `None` → `found: false` and nothing else set. `remaining_ttl_ms` comes from the lessor. At most
/// `max_keys` bound keys are listed; `keys_truncated` says when there were more.
pub fn lease_ttl_response(
    header: ResponseHeader,
    info: Option<LeaseInfo>,
    remaining_ttl_ms: u64,
    max_keys: usize,
) -> v1::LeaseTimeToLiveResponse {
    let Some(info) = info else {
        return v1::LeaseTimeToLiveResponse {
            header: Some(header),
            ..v1::LeaseTimeToLiveResponse::default()
        };
    };
    let mut bound_keys = info.keys;
    let keys_truncated = bound_keys.len() > max_keys;
    bound_keys.truncate(max_keys);
    v1::LeaseTimeToLiveResponse {
        header: Some(header),
        found: true,
        id: info.id.get(),
        ttl_ms: info.ttl_ms.get(),
        remaining_ttl_ms,
        granted_revision: info.granted_revision.get(),
        renewed_revision: info.renewed_revision.get(),
        bound_keys,
        keys_truncated,
        locks_held: info.locks_held,
        locks_waiting: info.locks_waiting,
        owner: info.owner.unwrap_or_default(),
    }
}

/// One lease of a Leases listing.
pub fn lease_summary(info: &LeaseInfo, remaining_ttl_ms: u64) -> v1::LeaseSummary {
    v1::LeaseSummary {
        id: info.id.get(),
        ttl_ms: info.ttl_ms.get(),
        remaining_ttl_ms,
        key_count: info.key_count.into(),
        lock_count: info.locks_held.len() as u64,
        owner: info.owner.clone().unwrap_or_default(),
        granted_revision: info.granted_revision.get(),
        renewed_revision: info.renewed_revision.get(),
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;
    use zaris_core::{
        BoundKey, Command, LeaseInfo, LimitKind, Limits, Outcome, Rejection, Request, RequestId,
        Revision,
    };
    use zaris_proto::v1::{self, ErrorCode, Outcome as WireOutcome};

    use crate::renew::Renewals;

    use super::*;
    use crate::convert::test_support::*;

    #[test]
    fn grant_requests() {
        let request = ok(grant_request(
            v1::LeaseGrantRequest {
                ttl_ms: 5_000,
                id: 42,
                request_id: wire_id(3, 4),
                ..Default::default()
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::with_id(
                RequestId {
                    client_id: 3,
                    seq: 4,
                    seen_revision: Revision::ZERO,
                },
                Command::Grant {
                    id: LeaseId::new(42),
                    ttl_ms: DurationMs::new(5_000)
                }
            )
        );
        for (ttl_ms, name, bound) in [(999, "min_ttl_ms", 1_000), (60_001, "max_ttl_ms", 60_000)] {
            let status = err(grant_request(
                v1::LeaseGrantRequest {
                    ttl_ms,
                    ..Default::default()
                },
                &small(),
            ));
            let detail = detail(&status);
            assert_eq!(status.code(), Code::InvalidArgument);
            assert_eq!(detail.code(), ErrorCode::TtlOutOfRange);
            assert_eq!(detail.outcome(), WireOutcome::Definite);
            let limit = detail.limit.unwrap_or_default();
            assert_eq!(
                (limit.name.as_str(), limit.limit, limit.actual),
                (name, bound, ttl_ms)
            );
        }

        // Keys make it a grant with keys; a bad key refuses the whole grant, typed.
        let key = |key: &str, value: &str| v1::LeaseGrantKey {
            key: key.into(),
            value: value.into(),
        };
        let request = ok(grant_request(
            v1::LeaseGrantRequest {
                ttl_ms: 5_000,
                keys: vec![key("a", "1"), key("b", "")],
                ..Default::default()
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::new(Command::GrantBound {
                id: LeaseId::NONE,
                ttl_ms: DurationMs::new(5_000),
                owner: None,
                keys: vec![
                    BoundKey {
                        key: b"a".to_vec(),
                        value: b"1".to_vec()
                    },
                    BoundKey {
                        key: b"b".to_vec(),
                        value: Vec::new()
                    },
                ],
            })
        );
        for (keys, status_code, code, message) in [
            (
                vec![key("a", "1"), key("", "2")],
                Code::InvalidArgument,
                ErrorCode::InvalidArgument,
                "key must not be empty",
            ),
            (
                vec![key("a", "1"), key("a", "2")],
                Code::InvalidArgument,
                ErrorCode::InvalidArgument,
                "a key is listed twice among the grant's keys",
            ),
            (
                vec![key("a", "1"), key("b", "2"), key("c", "3")],
                Code::ResourceExhausted,
                ErrorCode::LimitExceeded,
                "max_keys_per_lease",
            ),
        ] {
            let status = err(grant_request(
                v1::LeaseGrantRequest {
                    ttl_ms: 5_000,
                    keys,
                    ..Default::default()
                },
                &small(),
            ));
            assert_eq!(status.code(), status_code);
            assert_eq!(detail(&status).code(), code);
            assert!(status.message().contains(message), "{}", status.message());
        }
    }

    #[test]
    fn grant_responses() {
        let answer = ok(grant_response(
            header(3),
            Ok(Outcome::Granted {
                id: LeaseId::new(9),
                ttl_ms: DurationMs::new(5_000),
            }),
        ));
        assert_eq!(answer.header, Some(header(3)));
        assert_eq!(answer.result(), v1::GrantResult::Granted);
        assert_eq!((answer.id, answer.ttl_ms), (9, 5_000));

        let answer = ok(grant_response(
            header(3),
            Err(Rejection::LeaseIdUsed {
                id: LeaseId::new(9),
                next_free: LeaseId::new(12),
            }),
        ));
        assert_eq!(answer.result(), v1::GrantResult::IdInUse);
        assert_eq!((answer.id, answer.ttl_ms), (0, 0));
        assert_eq!(answer.next_free_id, 12);

        assert_limit(
            grant_response(
                header(3),
                Err(Rejection::LimitExceeded {
                    limit: LimitKind::Leases,
                    max: 3,
                    actual: 4,
                }),
            ),
            ErrorCode::CapacityExceeded,
            "max_leases",
        );
        // Only a grant with more keys than any lease may hold gets this one: resending it can
        // never succeed.
        assert_limit(
            grant_response(
                header(3),
                Err(Rejection::LimitExceeded {
                    limit: LimitKind::KeysPerLease,
                    max: 2,
                    actual: 3,
                }),
            ),
            ErrorCode::LimitExceeded,
            "max_keys_per_lease",
        );
        assert_internal(grant_response(
            header(3),
            Ok(Outcome::Revoked {
                id: LeaseId::new(1),
                keys_deleted: 0,
            }),
        ));
    }

    #[test]
    fn revokes() {
        let request = ok(revoke_request(
            v1::LeaseRevokeRequest {
                id: 5,
                request_id: None,
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::new(Command::Revoke {
                id: LeaseId::new(5)
            })
        );
        assert_invalid(
            revoke_request(v1::LeaseRevokeRequest::default(), &small()),
            "lease id 0",
        );

        let answer = ok(revoke_response(
            header(4),
            Ok(Outcome::Revoked {
                id: LeaseId::new(5),
                keys_deleted: 2,
            }),
        ));
        assert_eq!(answer.header, Some(header(4)));
        assert_eq!(answer.result(), v1::RevokeResult::Revoked);
        let answer = ok(revoke_response(
            header(4),
            Err(Rejection::LeaseNotFound(LeaseId::new(5))),
        ));
        assert_eq!(answer.result(), v1::RevokeResult::NotFound);
        assert_internal(revoke_response(
            header(4),
            Ok(Outcome::Expired {
                revoked: vec![LeaseId::new(5)],
                skipped: vec![],
            }),
        ));
    }

    #[test]
    fn keepalive_ids_validation() {
        let ids = |ids: Vec<u64>| v1::LeaseKeepAliveRequest { ids, seq: 1 };
        let roomy = Limits {
            max_batch_ids: 5,
            ..small()
        };
        assert_eq!(
            ok(keepalive_ids(&ids(vec![3, 1, 3, 2, 1]), &roomy)),
            [3, 1, 2].map(LeaseId::new)
        );
        // The listed ids count against the limit, duplicates included.
        assert_limit(
            keepalive_ids(&ids(vec![1, 1, 1, 1]), &small()),
            ErrorCode::LimitExceeded,
            "max_batch_ids",
        );
        assert_eq!(ok(keepalive_ids(&ids(vec![]), &small())), []);
        assert_invalid(keepalive_ids(&ids(vec![1, 0]), &small()), "lease id 0");
        assert_limit(
            keepalive_ids(&ids(vec![1, 2, 3, 4]), &small()),
            ErrorCode::LimitExceeded,
            "max_batch_ids",
        );
    }

    #[test]
    fn keepalive_responses_follow_request_order() {
        // A group-committed batch: this request's ids are 3 and 1, another client's is 2.
        let renewals = ok(Renewals::from_response(&Ok(Outcome::Renewed {
            renewed: vec![
                (LeaseId::new(1), DurationMs::new(1_000)),
                (LeaseId::new(2), DurationMs::new(2_000)),
            ],
            not_found: vec![LeaseId::new(3)],
        })));
        let answer = ok(keepalive_response(
            header(6),
            17,
            &[LeaseId::new(3), LeaseId::new(1)],
            &renewals,
        ));
        assert_eq!(answer.header, Some(header(6)));
        assert_eq!(answer.seq, 17);
        assert_eq!(
            answer.renewed,
            vec![v1::LeaseRenewed {
                id: 1,
                ttl_ms: 1_000
            }]
        );
        assert_eq!(answer.not_found, vec![3]);

        let answer = ok(keepalive_response(
            header(6),
            18,
            &[LeaseId::new(2), LeaseId::new(1)],
            &renewals,
        ));
        assert_eq!(
            answer.renewed.iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![2, 1]
        );
        assert!(answer.not_found.is_empty());

        // An id the batch did not carry is a server bug, never "not found".
        assert_internal(keepalive_response(
            header(6),
            19,
            &[LeaseId::new(1), LeaseId::new(4)],
            &renewals,
        ));

        assert_limit(
            Renewals::from_response(&Err(Rejection::LimitExceeded {
                limit: LimitKind::BatchIds,
                max: 3,
                actual: 4,
            })),
            ErrorCode::LimitExceeded,
            "max_batch_ids",
        );
        assert_internal(Renewals::from_response(&Ok(Outcome::Ignored)));
    }

    fn lease_info() -> LeaseInfo {
        LeaseInfo {
            id: LeaseId::new(5),
            ttl_ms: DurationMs::new(10_000),
            granted_revision: Revision::new(3),
            renewed_revision: Revision::new(8),
            key_count: 3,
            keys: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            locks_held: vec!["l1".into(), "l2".into()],
            locks_waiting: vec!["l3".into()],
            owner: Some("tenant".into()),
        }
    }

    #[test]
    fn lease_ttl_responses() {
        let answer = lease_ttl_response(header(9), Some(lease_info()), 4_000, 10);
        assert_eq!(
            answer,
            v1::LeaseTimeToLiveResponse {
                header: Some(header(9)),
                found: true,
                id: 5,
                ttl_ms: 10_000,
                remaining_ttl_ms: 4_000,
                granted_revision: 3,
                renewed_revision: 8,
                bound_keys: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
                keys_truncated: false,
                locks_held: vec!["l1".into(), "l2".into()],
                locks_waiting: vec!["l3".into()],
                owner: "tenant".into(),
            }
        );
        let exact = lease_ttl_response(header(9), Some(lease_info()), 0, 3);
        assert_eq!(exact.bound_keys.len(), 3);
        assert!(!exact.keys_truncated);
        let truncated = lease_ttl_response(header(9), Some(lease_info()), 0, 2);
        assert_eq!(truncated.bound_keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(truncated.keys_truncated);
        let without_keys = lease_ttl_response(
            header(9),
            Some(LeaseInfo {
                keys: vec![],
                ..lease_info()
            }),
            0,
            0,
        );
        assert!(!without_keys.keys_truncated);

        let missing = lease_ttl_response(header(9), None, 123, 10);
        assert_eq!(
            missing,
            v1::LeaseTimeToLiveResponse {
                header: Some(header(9)),
                ..Default::default()
            }
        );
    }

    #[test]
    fn lease_summaries() {
        assert_eq!(
            lease_summary(&lease_info(), 2_500),
            v1::LeaseSummary {
                id: 5,
                ttl_ms: 10_000,
                remaining_ttl_ms: 2_500,
                key_count: 3,
                lock_count: 2,
                owner: "tenant".into(),
                granted_revision: 3,
                renewed_revision: 8,
            }
        );
    }
}
