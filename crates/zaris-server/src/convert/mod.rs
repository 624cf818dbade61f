//! Pure conversions between the wire types ([`zaris_proto::v1`]) and the state machine's
//! ([`zaris_core`]). No I/O, no clock, no state.
//!
//! **Requests in.** Every `*_request` function builds the core [`Request`] and runs
//! [`Request::validate`] on it with the cluster's [`Limits`], so a bad request is refused here,
//! before it is proposed, with the same rejection the state machine would give on apply. Wire-only
//! rules (both `prefix` and `range_end`, UNSPECIFIED enums, a guard inside a Txn op, ...) are
//! checked on the way. Errors are [`ApiError`]s.
//!
//! **Results out.** Domain answers — guard failed, lease not found, id in use, not holder — are
//! values of the response's `result` enum and the call succeeds (see `common.proto`). Every other
//! rejection becomes an error ([`ApiError::Rejected`]). An outcome of the wrong kind for the call
//! becomes INTERNAL: it means a server bug, or a `request_id` reused for a different request (the
//! state machine de-duplicates by id alone and replays the first request's answer).
//!
//! One module per service (`kv`, `lease`, `lock`, `watch`); this one holds what they share:
//! request ids, key selectors, page sizes, validation, key-values.
//!
//! **Request ids.** An unset `request_id` means no de-duplication. A set one with `client_id` 0 is
//! INVALID_ARGUMENT rather than silently "none": a client that set an id believes its retries are
//! safe, and quietly dropping the id would let a retry apply twice. (`seq` 0 is allowed.)

pub mod kv;
pub mod lease;
pub mod lock;
pub mod watch;

use zaris_core::{Command, FencingToken, Guard, KeySelector, Limits, Request, RequestId, Revision};
use zaris_proto::v1;

use crate::error::ApiError;

/// The core request id for a wire one: unset → `None`; `client_id` 0 → INVALID_ARGUMENT (see the
/// module docs).
pub fn request_id(id: Option<v1::RequestId>) -> Result<Option<RequestId>, ApiError> {
    match id {
        None => Ok(None),
        Some(v1::RequestId { client_id: 0, .. }) => Err(ApiError::invalid_argument(
            "request_id.client_id must not be 0 (leave request_id unset for no de-duplication)",
        )),
        Some(v1::RequestId {
            client_id,
            seq,
            seen_revision,
        }) => Ok(Some(RequestId {
            client_id,
            seq,
            seen_revision: Revision::new(seen_revision),
        })),
    }
}

/// The key selection of a Range, DeleteRange or Watch (see `kv.proto`):
/// - `prefix` → every key starting with `key` (an empty `key` selects all keys);
/// - `range_end` = `[0x00]` → every key `>= key`;
/// - other non-empty `range_end` → `[key, range_end)`;
/// - neither → exactly `key`.
///
/// Both `prefix` and `range_end` → INVALID_ARGUMENT. Sizes, an empty single key and a range end not
/// after its start are checked by [`Request::validate`] (or [`read_selector`] for reads).
pub fn selector(key: &[u8], range_end: &[u8], prefix: bool) -> Result<KeySelector, ApiError> {
    select(key.to_vec(), range_end.to_vec(), prefix, "")
}

/// [`selector`] plus the size and shape checks the state machine applies to a selector, for reads
/// and watches (which are not proposed, so never go through [`Request::validate`]).
pub fn read_selector(
    key: &[u8],
    range_end: &[u8],
    prefix: bool,
    limits: &Limits,
) -> Result<KeySelector, ApiError> {
    let selector = selector(key, range_end, prefix)?;
    check_selector(&selector, limits)?;
    Ok(selector)
}

/// `at` prefixes field names in messages (`"success[2].range."`).
fn select(
    key: Vec<u8>,
    range_end: Vec<u8>,
    prefix: bool,
    at: &str,
) -> Result<KeySelector, ApiError> {
    if prefix && !range_end.is_empty() {
        return Err(ApiError::invalid_argument(format!(
            "{at}range_end and {at}prefix are mutually exclusive: set one of them"
        )));
    }
    Ok(if prefix {
        KeySelector::Prefix(key)
    } else if range_end == [0x00] {
        KeySelector::Range {
            start: key,
            end: Vec::new(),
        }
    } else if range_end.is_empty() {
        KeySelector::Key(key)
    } else {
        KeySelector::Range {
            start: key,
            end: range_end,
        }
    })
}

/// Runs the state machine's own selector checks (the same code, so reads and writes agree on what
/// a valid selector is) by validating a delete of it.
fn check_selector(selector: &KeySelector, limits: &Limits) -> Result<(), ApiError> {
    Request::new(Command::Delete {
        selector: selector.clone(),
        guard: None,
        prev_kv: false,
    })
    .validate(limits)
    .map_err(ApiError::from)
}

/// A page size: 0 → the server maximum `max`; above `max` → LIMIT_EXCEEDED naming `name` (never
/// silently reduced). `max` 0 means the server sets no maximum (then 0 stays 0, "no limit").
pub fn page_size(requested: u64, max: u64, name: &str) -> Result<u64, ApiError> {
    if max == 0 {
        Ok(requested)
    } else if requested == 0 {
        Ok(max)
    } else if requested > max {
        Err(ApiError::limit_exceeded(name, max, requested))
    } else {
        Ok(requested)
    }
}

fn guard(guard: Option<v1::Guard>, at: &str) -> Result<Option<Guard>, ApiError> {
    match guard {
        None => Ok(None),
        Some(v1::Guard { token: 0, .. }) => Err(ApiError::invalid_argument(format!(
            "{at}guard.token must not be 0: no lock is ever held with token 0"
        ))),
        Some(v1::Guard { lock_name, token }) => Ok(Some(Guard {
            lock: lock_name,
            token: FencingToken::new(token),
        })),
    }
}

/// Validates `request` against `limits`, the check the state machine repeats on apply.
fn validated(
    id: Option<v1::RequestId>,
    command: Command,
    limits: &Limits,
) -> Result<Request, ApiError> {
    let request = Request {
        request_id: request_id(id)?,
        command,
    };
    request.validate(limits).map_err(ApiError::from)?;
    Ok(request)
}

/// A stored key-value on the wire.
pub fn kv(kv: zaris_core::KeyValue) -> v1::KeyValue {
    v1::KeyValue {
        key: kv.key,
        value: kv.value,
        create_revision: kv.create_revision.get(),
        mod_revision: kv.mod_revision.get(),
        version: kv.version,
        lease: kv.lease.get(),
    }
}

fn kv_keys_only(mut kv: zaris_core::KeyValue) -> v1::KeyValue {
    kv.value = Vec::new();
    self::kv(kv)
}

fn kvs(kvs: Vec<zaris_core::KeyValue>, keys_only: bool) -> Vec<v1::KeyValue> {
    if keys_only {
        kvs.into_iter().map(kv_keys_only).collect()
    } else {
        kvs.into_iter().map(kv).collect()
    }
}

/// Helpers the tests of every conversion module share.
#[cfg(test)]
mod test_support {
    use tonic::{Code, Status};
    use zaris_core::{DurationMs, LeaseId, Limits, Revision};
    use zaris_proto::v1::{self, ErrorCode, ErrorDetail, Outcome as WireOutcome, ResponseHeader};

    use crate::error::ApiError;

    pub(super) const MAX_RANGE_KEYS: u64 = 100;

    /// Small limits so that oversize requests are cheap to build.
    pub(super) fn small() -> Limits {
        Limits {
            max_key_bytes: 8,
            max_value_bytes: 16,
            max_lock_name_bytes: 6,
            min_ttl_ms: DurationMs::new(1_000),
            max_ttl_ms: DurationMs::new(60_000),
            max_txn_ops: 4,
            max_batch_ids: 3,
            max_waiters_per_lock: 1,
            max_keys_per_lease: 2,
            max_leases: 3,
            dedup_capacity: 16,
            dedup_max_bytes: zaris_core::limits::MIN_DEDUP_MAX_BYTES,
            max_state_bytes: zaris_core::limits::MIN_STATE_BYTES,
        }
    }

    pub(super) fn header(revision: u64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: 1,
            member_id: 2,
            revision,
            raft_term: 3,
        }
    }

    pub(super) fn ok<T>(result: Result<T, ApiError>) -> T {
        match result {
            Ok(value) => value,
            Err(status) => panic!("unexpected error: {status:?}"),
        }
    }

    pub(super) fn err<T: std::fmt::Debug>(result: Result<T, ApiError>) -> Status {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(error) => error.into(),
        }
    }

    pub(super) fn detail(status: &Status) -> ErrorDetail {
        match zaris_proto::detail(status) {
            Some(detail) => detail,
            None => panic!("status without a Zaris detail: {status:?}"),
        }
    }

    /// Asserts INVALID_ARGUMENT / INVALID_ARGUMENT, definite, with `needle` in the message.
    pub(super) fn assert_invalid<T: std::fmt::Debug>(result: Result<T, ApiError>, needle: &str) {
        let status = err(result);
        let detail = detail(&status);
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert_eq!(detail.code(), ErrorCode::InvalidArgument, "{detail:?}");
        assert_eq!(detail.outcome(), WireOutcome::Definite);
        assert!(
            detail.message.contains(needle),
            "{:?} does not contain {needle:?}",
            detail.message
        );
    }

    /// Asserts RESOURCE_EXHAUSTED with `code`, naming limit `name`.
    pub(super) fn assert_limit<T: std::fmt::Debug>(
        result: Result<T, ApiError>,
        code: ErrorCode,
        name: &str,
    ) {
        let status = err(result);
        let detail = detail(&status);
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert_eq!(detail.code(), code, "{detail:?}");
        assert_eq!(detail.outcome(), WireOutcome::Definite);
        assert_eq!(detail.limit.map(|l| l.name).as_deref(), Some(name));
        assert!(detail.message.contains(name), "{:?}", detail.message);
    }

    pub(super) fn assert_internal<T: std::fmt::Debug>(result: Result<T, ApiError>) {
        let status = err(result);
        assert_eq!(status.code(), Code::Internal, "{status:?}");
        assert_eq!(detail(&status).code(), ErrorCode::Internal);
    }

    pub(super) fn core_kv(key: &[u8], value: &[u8]) -> zaris_core::KeyValue {
        zaris_core::KeyValue {
            key: key.to_vec(),
            value: value.to_vec(),
            create_revision: Revision::new(4),
            mod_revision: Revision::new(5),
            version: 2,
            lease: LeaseId::new(9),
        }
    }

    pub(super) fn wire_id(client_id: u64, seq: u64) -> Option<v1::RequestId> {
        Some(v1::RequestId {
            client_id,
            seq,
            seen_revision: 0,
        })
    }

    pub(super) fn wire_guard(lock: &str, token: u64) -> Option<v1::Guard> {
        Some(v1::Guard {
            lock_name: lock.into(),
            token,
        })
    }

    pub(super) fn wire_compare(
        key: &[u8],
        target: v1::compare::Target,
        result: v1::compare::Result,
        operand: Option<v1::compare::Operand>,
    ) -> v1::Compare {
        v1::Compare {
            key: key.to_vec(),
            target: target.into(),
            result: result.into(),
            operand,
        }
    }

    pub(super) fn op(op: v1::txn_op::Op) -> v1::TxnOp {
        v1::TxnOp { op: Some(op) }
    }

    pub(super) fn range_op(key: &[u8], prefix: bool) -> v1::TxnOp {
        op(v1::txn_op::Op::Range(v1::RangeRequest {
            key: key.to_vec(),
            prefix,
            ..Default::default()
        }))
    }

    pub(super) fn put_op(key: &[u8], value: &[u8]) -> v1::TxnOp {
        op(v1::txn_op::Op::Put(v1::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            ..Default::default()
        }))
    }

    pub(super) fn delete_op(key: &[u8]) -> v1::TxnOp {
        op(v1::txn_op::Op::DeleteRange(v1::DeleteRangeRequest {
            key: key.to_vec(),
            ..Default::default()
        }))
    }

    pub(super) fn txn(compares: Vec<v1::Compare>, success: Vec<v1::TxnOp>) -> v1::TxnRequest {
        v1::TxnRequest {
            compares,
            success,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use zaris_core::{Command, KeySelector, Request, RequestId, State};
    use zaris_proto::v1::{self, ErrorCode};

    use crate::renew::Renewals;

    use super::kv::*;
    use super::lease::*;
    use super::lock::*;
    use super::test_support::*;
    use super::*;

    #[test]
    fn selector_rules() {
        assert_eq!(
            ok(selector(b"a", b"", false)),
            KeySelector::Key(b"a".to_vec())
        );
        assert_eq!(
            ok(selector(b"a/", b"", true)),
            KeySelector::Prefix(b"a/".to_vec())
        );
        assert_eq!(
            ok(selector(b"", b"", true)),
            KeySelector::Prefix(Vec::new())
        );
        assert_eq!(
            ok(selector(b"a", b"c", false)),
            KeySelector::Range {
                start: b"a".to_vec(),
                end: b"c".to_vec()
            }
        );
        assert_eq!(
            ok(selector(b"a", &[0x00], false)),
            KeySelector::Range {
                start: b"a".to_vec(),
                end: Vec::new()
            }
        );
        // A longer range_end starting with 0x00 is an ordinary end.
        assert_eq!(
            ok(selector(b"", &[0x00, 0x01], false)),
            KeySelector::Range {
                start: Vec::new(),
                end: vec![0x00, 0x01]
            }
        );
        assert_invalid(selector(b"a", b"c", true), "mutually exclusive");
        assert_invalid(selector(b"a", &[0x00], true), "mutually exclusive");
    }

    #[test]
    fn read_selector_applies_core_checks() {
        let limits = small();
        assert_invalid(
            read_selector(b"", b"", false, &limits),
            "key must not be empty",
        );
        assert_invalid(read_selector(b"b", b"a", false, &limits), "range end");
        assert_invalid(read_selector(b"b", b"b", false, &limits), "range end");
        assert_limit(
            read_selector(b"123456789", b"", true, &limits),
            ErrorCode::LimitExceeded,
            "max_key_bytes",
        );
        assert_limit(
            read_selector(b"a", b"123456789", false, &limits),
            ErrorCode::LimitExceeded,
            "max_key_bytes",
        );
        assert_eq!(
            ok(read_selector(b"", b"", true, &limits)),
            KeySelector::Prefix(Vec::new())
        );
    }

    #[test]
    fn request_ids() {
        assert_eq!(ok(request_id(None)), None);
        assert_eq!(
            ok(request_id(wire_id(7, 0))),
            Some(RequestId {
                client_id: 7,
                seq: 0,
                seen_revision: Revision::ZERO,
            })
        );
        assert_invalid(request_id(wire_id(0, 5)), "request_id.client_id");
    }

    #[test]
    fn page_sizes() {
        assert_eq!(ok(page_size(0, 100, "max_range_keys")), 100);
        assert_eq!(ok(page_size(100, 100, "max_range_keys")), 100);
        assert_eq!(ok(page_size(7, 100, "max_range_keys")), 7);
        assert_eq!(ok(page_size(0, 0, "max_range_keys")), 0);
        assert_eq!(ok(page_size(u64::MAX, 0, "max_range_keys")), u64::MAX);
        assert_limit(
            page_size(101, 100, "max_lease_list"),
            ErrorCode::LimitExceeded,
            "max_lease_list",
        );
    }

    #[test]
    fn kv_maps_every_field() {
        assert_eq!(
            kv(core_kv(b"k", b"v")),
            v1::KeyValue {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                create_revision: 4,
                mod_revision: 5,
                version: 2,
                lease: 9,
            }
        );
    }

    /// Wire request → core request → `State::apply` → wire response, for the main flows.
    #[test]
    fn round_trip_through_the_state_machine() {
        let limits = small();
        let mut state = State::new(limits.clone());
        let mut rev = 0;
        let mut apply = |state: &mut State, request: Request| {
            rev += 1;
            state.apply(Revision::new(rev), &request).response
        };

        let grant = ok(grant_request(
            v1::LeaseGrantRequest {
                ttl_ms: 5_000,
                ..Default::default()
            },
            &limits,
        ));
        let granted = ok(grant_response(header(1), apply(&mut state, grant.clone())));
        assert_eq!(granted.result(), v1::GrantResult::Granted);
        let lease = granted.id;
        let again = v1::LeaseGrantRequest {
            ttl_ms: 5_000,
            id: lease,
            request_id: None,
            ..Default::default()
        };
        let in_use = ok(grant_response(
            header(2),
            apply(&mut state, ok(grant_request(again, &limits))),
        ));
        assert_eq!(in_use.result(), v1::GrantResult::IdInUse);

        let lock = v1::LockRequest {
            name: "job".into(),
            lease,
            wait: true,
            timeout_ms: 0,
            seen_revision: None,
        };
        let held = ok(lock_response(
            header(3),
            apply(&mut state, ok(lock_request(lock, &limits))),
        ));
        assert_eq!(held.result(), v1::LockResult::Held);
        let token = held.token;

        let put = v1::PutRequest {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            lease,
            guard: wire_guard("job", token),
            ..Default::default()
        };
        let written = ok(put_response(
            header(4),
            apply(&mut state, ok(put_request(put.clone(), &limits))),
        ));
        assert_eq!(written.result(), v1::PutResult::Ok);
        let stale = v1::PutRequest {
            guard: wire_guard("job", token + 100),
            ..put.clone()
        };
        let refused = ok(put_response(
            header(5),
            apply(&mut state, ok(put_request(stale, &limits))),
        ));
        assert_eq!(refused.result(), v1::PutResult::GuardFailed);
        let orphan = v1::PutRequest {
            lease: lease + 1,
            guard: None,
            ..put
        };
        let orphaned = ok(put_response(
            header(6),
            apply(&mut state, ok(put_request(orphan, &limits))),
        ));
        assert_eq!(orphaned.result(), v1::PutResult::LeaseNotFound);

        let (txn, shape) = ok(txn_request(
            v1::TxnRequest {
                compares: vec![wire_compare(
                    b"k",
                    v1::compare::Target::Value,
                    v1::compare::Result::Equal,
                    Some(v1::compare::Operand::Value(b"v".to_vec())),
                )],
                success: vec![range_op(b"", true), put_op(b"k2", b"w")],
                failure: vec![],
                ..Default::default()
            },
            &limits,
            MAX_RANGE_KEYS,
        ));
        let txn_answer = ok(txn_response(header(7), &shape, apply(&mut state, txn)));
        assert_eq!(txn_answer.result(), v1::TxnResult::CompareSucceeded);
        assert_eq!(txn_answer.responses.len(), 2);

        let renew = ok(keepalive_ids(
            &v1::LeaseKeepAliveRequest {
                ids: vec![lease, 99],
                seq: 1,
            },
            &limits,
        ));
        let renewals = ok(Renewals::from_response(&apply(
            &mut state,
            Request::new(Command::Renew { ids: renew.clone() }),
        )));
        let kept = ok(keepalive_response(header(8), 1, &renew, &renewals));
        assert_eq!(
            kept.renewed,
            vec![v1::LeaseRenewed {
                id: lease,
                ttl_ms: 5_000
            }]
        );
        assert_eq!(kept.not_found, vec![99]);

        let withdraw = v1::UnlockRequest {
            name: "job".into(),
            lease,
            token: 0,
            request_id: None,
        };
        let still_held = ok(unlock_response(
            header(9),
            apply(&mut state, ok(unlock_request(withdraw, &limits))),
        ));
        assert_eq!(still_held.result(), v1::UnlockResult::Held);
        assert_eq!(still_held.token, token);
        let release = v1::UnlockRequest {
            name: "job".into(),
            lease,
            token,
            request_id: None,
        };
        let released = ok(unlock_response(
            header(10),
            apply(&mut state, ok(unlock_request(release.clone(), &limits))),
        ));
        assert_eq!(released.result(), v1::UnlockResult::Released);
        let not_holder = ok(unlock_response(
            header(11),
            apply(&mut state, ok(unlock_request(release, &limits))),
        ));
        assert_eq!(not_holder.result(), v1::UnlockResult::NotHolder);

        let revoke = v1::LeaseRevokeRequest {
            id: lease,
            request_id: None,
        };
        let revoked = ok(revoke_response(
            header(12),
            apply(&mut state, ok(revoke_request(revoke, &limits))),
        ));
        assert_eq!(revoked.result(), v1::RevokeResult::Revoked);
        let gone = ok(revoke_response(
            header(13),
            apply(&mut state, ok(revoke_request(revoke, &limits))),
        ));
        assert_eq!(gone.result(), v1::RevokeResult::NotFound);
        assert_eq!(state.get(b"k"), None, "the bound key went with the lease");
        assert!(state.get(b"k2").is_some(), "the unbound key stays");
    }

    /// A request_id reused for a different request replays the first answer: the response
    /// converters must refuse it rather than misreport.
    #[test]
    fn reused_request_id_is_not_misreported() {
        let limits = small();
        let mut state = State::new(limits.clone());
        let grant = ok(grant_request(
            v1::LeaseGrantRequest {
                ttl_ms: 5_000,
                id: 0,
                request_id: wire_id(1, 1),
                ..Default::default()
            },
            &limits,
        ));
        state.apply(Revision::new(1), &grant);
        let put = ok(put_request(
            v1::PutRequest {
                key: b"k".to_vec(),
                request_id: wire_id(1, 1),
                ..Default::default()
            },
            &limits,
        ));
        let replayed = state.apply(Revision::new(2), &put).response;
        assert_internal(put_response(header(2), replayed));
        assert_eq!(state.key_count(), 0);
    }
}
