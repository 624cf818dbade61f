//! Range, Put, DeleteRange and Txn: requests in (validated against the cluster's limits, with
//! the wire-only rules of a Txn's compares and ops), answers out (GUARD_FAILED and LEASE_NOT_FOUND
//! as result values; a Txn answer shaped by its request's [`TxnShape`]).

use zaris_core::{
    Command, Compare, CompareOp, CompareTarget, KeySelector, LeaseId, LimitKind, Limits, OpResult,
    Outcome, RangeResult, Rejection, Request, Response, Revision, Txn, TxnOp,
};
use zaris_proto::v1::{self, ResponseHeader};

use super::{check_selector, guard, kv, kvs, page_size, select, validated};
use crate::error::ApiError;

/// A core range limit (`u32`, 0 = no limit) from a wire page size.
fn range_limit(requested: u64, max_range_keys: u64) -> Result<u32, ApiError> {
    let limit = page_size(requested, max_range_keys, "max_range_keys")?;
    u32::try_from(limit)
        .map_err(|_| ApiError::limit_exceeded("max_range_keys", u32::MAX.into(), limit))
}

/// A validated Range read: what to ask [`zaris_core::State::range`], and how to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeQuery {
    pub selector: KeySelector,
    /// Page size for the core read; 0 only when the server sets no maximum.
    pub limit: u32,
    /// 0 = the current revision; check any other with [`check_read_revision`].
    pub revision: u64,
    pub serializable: bool,
    pub keys_only: bool,
    pub count_only: bool,
}

/// Validates a Range request. `max_range_keys` is the server's page size (0 = none): a request
/// `limit` of 0 means it, a larger one is LIMIT_EXCEEDED.
pub fn range_query(
    request: v1::RangeRequest,
    limits: &Limits,
    max_range_keys: u64,
) -> Result<RangeQuery, ApiError> {
    let selector = select(request.key, request.range_end, request.prefix, "")?;
    check_selector(&selector, limits)?;
    Ok(RangeQuery {
        selector,
        limit: range_limit(request.limit, max_range_keys)?,
        revision: request.revision,
        serializable: request.serializable,
        keys_only: request.keys_only,
        count_only: request.count_only,
    })
}

/// The store keeps only its current state, no history: a read at revision `requested` is served
/// only if it is 0 or the `current` revision. Older → COMPACTED (the oldest available revision is
/// the current one); newer → FUTURE_REVISION.
pub fn check_read_revision(requested: u64, current: u64) -> Result<(), ApiError> {
    if requested == 0 || requested == current {
        Ok(())
    } else if requested < current {
        Err(ApiError::Compacted {
            requested,
            compact_revision: current,
        })
    } else {
        Err(ApiError::FutureRevision { requested, current })
    }
}

/// A Put, validated.
pub fn put_request(request: v1::PutRequest, limits: &Limits) -> Result<Request, ApiError> {
    let command = Command::Put {
        key: request.key,
        value: request.value,
        lease: LeaseId::new(request.lease),
        guard: guard(request.guard, "")?,
        prev_kv: request.prev_kv,
    };
    validated(request.request_id, command, limits)
}

/// A DeleteRange, validated.
pub fn delete_request(
    request: v1::DeleteRangeRequest,
    limits: &Limits,
) -> Result<Request, ApiError> {
    let command = Command::Delete {
        selector: select(request.key, request.range_end, request.prefix, "")?,
        guard: guard(request.guard, "")?,
        prev_kv: request.prev_kv,
    };
    validated(request.request_id, command, limits)
}

/// What a Txn's response must look like, recorded by [`txn_request`] for [`txn_response`]: the
/// kind of each operation (to check the outcome matches the request) and the per-operation
/// options the core operations do not carry (`keys_only`, a nested put's `prev_kv`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnShape {
    pub success: Vec<OpShape>,
    pub failure: Vec<OpShape>,
}

/// One operation of a [`TxnShape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpShape {
    Range { keys_only: bool },
    Put { prev_kv: bool },
    DeleteRange,
}

/// The keys of a Txn's puts that ask for the value they replace (`prev_kv`), in either branch.
pub fn txn_prev_kv_keys<'a>(
    command: &'a Command,
    shape: &'a TxnShape,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let ops = match command {
        Command::Txn(txn) => Some(
            txn.success
                .iter()
                .zip(&shape.success)
                .chain(txn.failure.iter().zip(&shape.failure)),
        ),
        _ => None,
    };
    ops.into_iter()
        .flatten()
        .filter_map(|(op, shape)| match (op, shape) {
            (TxnOp::Put { key, .. }, OpShape::Put { prev_kv: true }) => Some(key.as_slice()),
            _ => None,
        })
}

/// A Txn, validated, with the shape its response must have.
///
/// Nested operations: `guard` and `request_id` must be unset (the Txn's own cover them all); a
/// nested Range reads the Txn's own state, so its `revision` must be 0 (historical reads are not
/// supported) and `serializable` false. Not supported inside a Txn (INVALID_ARGUMENT, because the
/// core operation results cannot express them): a Range's `count_only` (the core reports no total
/// count for a Txn read) and a DeleteRange's `prev_kv` (nor the deleted pairs). A nested Range's
/// `limit` is a page size like a Range's (`max_range_keys`).
pub fn txn_request(
    request: v1::TxnRequest,
    limits: &Limits,
    max_range_keys: u64,
) -> Result<(Request, TxnShape), ApiError> {
    // Refuse an oversized Txn before converting all of it (validate checks the same bound).
    let ops = request.compares.len() + request.success.len() + request.failure.len();
    if ops as u64 > limits.get(LimitKind::TxnOps) {
        return Err(ApiError::from(Rejection::LimitExceeded {
            limit: LimitKind::TxnOps,
            max: limits.get(LimitKind::TxnOps),
            actual: ops as u64,
        }));
    }
    let request_id = request.request_id;
    let compares = request
        .compares
        .into_iter()
        .enumerate()
        .map(|(i, c)| compare(c, &format!("compares[{i}].")))
        .collect::<Result<Vec<_>, _>>()?;
    let (success, success_shape) = txn_ops(request.success, "success", max_range_keys)?;
    let (failure, failure_shape) = txn_ops(request.failure, "failure", max_range_keys)?;
    let txn = Txn {
        compares,
        success,
        failure,
        guard: guard(request.guard, "")?,
    };
    let request = validated(request_id, Command::Txn(txn), limits)?;
    Ok((
        request,
        TxnShape {
            success: success_shape,
            failure: failure_shape,
        },
    ))
}

fn compare(compare: v1::Compare, at: &str) -> Result<Compare, ApiError> {
    use v1::compare::{Operand, Result as Relation, Target};

    let op = match Relation::try_from(compare.result) {
        Ok(Relation::Equal) => CompareOp::Equal,
        Ok(Relation::NotEqual) => CompareOp::NotEqual,
        Ok(Relation::Greater) => CompareOp::Greater,
        Ok(Relation::Less) => CompareOp::Less,
        Ok(Relation::Unspecified) => {
            return Err(ApiError::invalid_argument(format!(
                "{at}result must be set"
            )));
        }
        Err(_) => {
            return Err(ApiError::invalid_argument(format!(
                "{at}result has unknown value {}",
                compare.result
            )));
        }
    };
    let target = match Target::try_from(compare.target) {
        Ok(Target::Unspecified) => {
            return Err(ApiError::invalid_argument(format!(
                "{at}target must be set"
            )));
        }
        Ok(target) => target,
        Err(_) => {
            return Err(ApiError::invalid_argument(format!(
                "{at}target has unknown value {}",
                compare.target
            )));
        }
    };
    let Some(operand) = compare.operand else {
        return Err(ApiError::invalid_argument(format!(
            "{at}operand must be set (the one matching target {})",
            target.as_str_name()
        )));
    };
    let target = match (target, operand) {
        (Target::Value, Operand::Value(v)) => CompareTarget::Value(v),
        (Target::Version, Operand::Version(v)) => CompareTarget::Version(v),
        (Target::ModRevision, Operand::ModRevision(r)) => {
            CompareTarget::ModRevision(Revision::new(r))
        }
        (Target::CreateRevision, Operand::CreateRevision(r)) => {
            CompareTarget::CreateRevision(Revision::new(r))
        }
        (Target::Lease, Operand::Lease(l)) => CompareTarget::Lease(LeaseId::new(l)),
        (target, operand) => {
            return Err(ApiError::invalid_argument(format!(
                "{at}target {} does not match the operand that is set ({})",
                target.as_str_name(),
                operand_name(&operand)
            )));
        }
    };
    Ok(Compare {
        key: compare.key,
        target,
        op,
    })
}

fn operand_name(operand: &v1::compare::Operand) -> &'static str {
    use v1::compare::Operand;
    match operand {
        Operand::Value(_) => "value",
        Operand::Version(_) => "version",
        Operand::ModRevision(_) => "mod_revision",
        Operand::CreateRevision(_) => "create_revision",
        Operand::Lease(_) => "lease",
    }
}

fn txn_ops(
    ops: Vec<v1::TxnOp>,
    branch: &str,
    max_range_keys: u64,
) -> Result<(Vec<TxnOp>, Vec<OpShape>), ApiError> {
    ops.into_iter()
        .enumerate()
        .map(|(i, op)| txn_op(op, &format!("{branch}[{i}]"), max_range_keys))
        .collect()
}

fn txn_op(op: v1::TxnOp, at: &str, max_range_keys: u64) -> Result<(TxnOp, OpShape), ApiError> {
    use v1::txn_op::Op;

    match op.op {
        None => Err(ApiError::invalid_argument(format!(
            "{at}: no operation set (range, put or delete_range)"
        ))),
        Some(Op::Range(range)) => {
            let at = format!("{at}.range.");
            if range.revision != 0 {
                return Err(ApiError::invalid_argument(format!(
                    "{at}revision must be 0: a range inside a Txn reads the Txn's own state \
                     (historical reads are not supported)"
                )));
            }
            if range.serializable {
                return Err(ApiError::invalid_argument(format!(
                    "{at}serializable must be false: a range inside a Txn reads the Txn's own state"
                )));
            }
            if range.count_only {
                return Err(ApiError::invalid_argument(format!(
                    "{at}count_only is not supported inside a Txn; use a Range call"
                )));
            }
            let limit = range_limit(range.limit, max_range_keys)?;
            let selector = select(range.key, range.range_end, range.prefix, &at)?;
            Ok((
                TxnOp::Get { selector, limit },
                OpShape::Range {
                    keys_only: range.keys_only,
                },
            ))
        }
        Some(Op::Put(put)) => {
            let at = format!("{at}.put.");
            no_guard_or_id(put.guard.is_some(), put.request_id.is_some(), &at)?;
            Ok((
                TxnOp::Put {
                    key: put.key,
                    value: put.value,
                    lease: LeaseId::new(put.lease),
                },
                OpShape::Put {
                    prev_kv: put.prev_kv,
                },
            ))
        }
        Some(Op::DeleteRange(delete)) => {
            let at = format!("{at}.delete_range.");
            no_guard_or_id(delete.guard.is_some(), delete.request_id.is_some(), &at)?;
            if delete.prev_kv {
                return Err(ApiError::invalid_argument(format!(
                    "{at}prev_kv is not supported inside a Txn; read the keys with a range first"
                )));
            }
            let selector = select(delete.key, delete.range_end, delete.prefix, &at)?;
            Ok((TxnOp::Delete { selector }, OpShape::DeleteRange))
        }
    }
}

fn no_guard_or_id(guard: bool, request_id: bool, at: &str) -> Result<(), ApiError> {
    if guard {
        return Err(ApiError::invalid_argument(format!(
            "{at}guard must be unset: the Txn's guard covers all its operations"
        )));
    }
    if request_id {
        return Err(ApiError::invalid_argument(format!(
            "{at}request_id must be unset: the Txn's request_id covers all its operations"
        )));
    }
    Ok(())
}

/// A Range answer. `keys_only` empties every value; `count_only` drops the key-values and keeps
/// `count`. `more` is the core's (more keys matched than the page limit let through) either way.
pub fn range_response(
    header: ResponseHeader,
    result: RangeResult,
    keys_only: bool,
    count_only: bool,
) -> v1::RangeResponse {
    v1::RangeResponse {
        header: Some(header),
        kvs: if count_only {
            Vec::new()
        } else {
            kvs(result.kvs, keys_only)
        },
        more: result.more,
        count: result.count,
    }
}

/// A Put answer: written → OK (with the previous pair if the request asked for it: the core only
/// returns it then); guard failed → GUARD_FAILED; lease not found → LEASE_NOT_FOUND.
pub fn put_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::PutResponse, ApiError> {
    let (result, prev_kv) = match response {
        Ok(Outcome::Put { prev }) => (v1::PutResult::Ok, prev.map(kv)),
        Err(Rejection::GuardFailed { .. }) => (v1::PutResult::GuardFailed, None),
        Err(Rejection::LeaseNotFound(_)) => (v1::PutResult::LeaseNotFound, None),
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Put", &other)),
    };
    Ok(v1::PutResponse {
        header: Some(header),
        result: result.into(),
        prev_kv,
    })
}

/// A DeleteRange answer: applied → OK (with the deleted pairs if the request asked for them);
/// guard failed → GUARD_FAILED.
pub fn delete_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::DeleteRangeResponse, ApiError> {
    let (result, deleted, prev) = match response {
        Ok(Outcome::Deleted { deleted, prev }) => (v1::DeleteResult::Ok, deleted, prev),
        Err(Rejection::GuardFailed { .. }) => (v1::DeleteResult::GuardFailed, 0, Vec::new()),
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("DeleteRange", &other)),
    };
    Ok(v1::DeleteRangeResponse {
        header: Some(header),
        result: result.into(),
        deleted,
        prev_kvs: kvs(prev, false),
    })
}

/// A Txn answer, shaped by the request's [`TxnShape`]: compares held → COMPARE_SUCCEEDED with one
/// response per success op; else COMPARE_FAILED with the failure ops'; guard failed →
/// GUARD_FAILED; a put's lease missing → LEASE_NOT_FOUND (both with no responses).
///
/// A nested Range's `count` is exact when `more` is false; when `more` is true the core reports no
/// total for Txn reads, so `count` is the number returned (a lower bound).
pub fn txn_response(
    header: ResponseHeader,
    shape: &TxnShape,
    response: Response,
) -> Result<v1::TxnResponse, ApiError> {
    let (result, responses) = match response {
        Ok(Outcome::Txn { succeeded, results }) => {
            let (result, shapes) = if succeeded {
                (v1::TxnResult::CompareSucceeded, &shape.success)
            } else {
                (v1::TxnResult::CompareFailed, &shape.failure)
            };
            if shapes.len() != results.len() {
                return Err(ApiError::Internal(format!(
                    "Txn got {} operation results for a branch of {} operations (a request_id \
                     reused for a different request causes this)",
                    results.len(),
                    shapes.len()
                )));
            }
            let responses = shapes
                .iter()
                .zip(results)
                .map(|(shape, result)| op_response(*shape, result))
                .collect::<Result<Vec<_>, _>>()?;
            (result, responses)
        }
        Err(Rejection::GuardFailed { .. }) => (v1::TxnResult::GuardFailed, Vec::new()),
        Err(Rejection::LeaseNotFound(_)) => (v1::TxnResult::LeaseNotFound, Vec::new()),
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Txn", &other)),
    };
    Ok(v1::TxnResponse {
        header: Some(header),
        result: result.into(),
        responses,
    })
}

/// One Txn operation's result; nested responses carry no header.
fn op_response(shape: OpShape, result: OpResult) -> Result<v1::TxnOpResponse, ApiError> {
    use v1::txn_op_response::Response as Op;

    let response = match (shape, result) {
        (OpShape::Range { keys_only }, OpResult::Got { kvs: got, more }) => {
            Op::Range(v1::RangeResponse {
                header: None,
                count: got.len() as u64,
                kvs: kvs(got, keys_only),
                more,
            })
        }
        (OpShape::Put { prev_kv }, OpResult::Put { prev }) => Op::Put(v1::PutResponse {
            header: None,
            result: v1::PutResult::Ok.into(),
            // Inside a Txn the core always returns the previous pair; keep it only if asked.
            prev_kv: prev.filter(|_| prev_kv).map(kv),
        }),
        (OpShape::DeleteRange, OpResult::Deleted { deleted }) => {
            Op::DeleteRange(v1::DeleteRangeResponse {
                header: None,
                result: v1::DeleteResult::Ok.into(),
                deleted,
                prev_kvs: Vec::new(),
            })
        }
        (shape, _) => {
            return Err(ApiError::Internal(format!(
                "Txn got an operation result that does not match its {shape:?} operation (a \
                 request_id reused for a different request causes this)"
            )));
        }
    };
    Ok(v1::TxnOpResponse {
        response: Some(response),
    })
}

#[cfg(test)]
mod tests {
    use tonic::Code;
    use zaris_core::{
        Command, Compare, CompareOp, CompareTarget, DurationMs, FencingToken, Guard, KeySelector,
        LimitKind, Limits, OpResult, Outcome, RangeResult, Rejection, Request, RequestId, Txn,
        TxnOp,
    };
    use zaris_proto::v1::{self, ErrorCode, Outcome as WireOutcome};

    use crate::error::ApiError;

    use super::*;
    use crate::convert::test_support::*;

    #[test]
    fn range_query_defaults_and_limits() {
        let query = ok(range_query(
            v1::RangeRequest {
                key: b"a".to_vec(),
                prefix: true,
                revision: 12,
                serializable: true,
                keys_only: true,
                ..Default::default()
            },
            &small(),
            MAX_RANGE_KEYS,
        ));
        assert_eq!(
            query,
            RangeQuery {
                selector: KeySelector::Prefix(b"a".to_vec()),
                limit: MAX_RANGE_KEYS as u32,
                revision: 12,
                serializable: true,
                keys_only: true,
                count_only: false,
            }
        );
        let request = |limit| v1::RangeRequest {
            key: b"a".to_vec(),
            limit,
            ..Default::default()
        };
        assert_eq!(
            ok(range_query(request(5), &small(), MAX_RANGE_KEYS)).limit,
            5
        );
        assert_limit(
            range_query(request(MAX_RANGE_KEYS + 1), &small(), MAX_RANGE_KEYS),
            ErrorCode::LimitExceeded,
            "max_range_keys",
        );
        // No server maximum: a limit that does not fit the core's u32 is still refused.
        assert_limit(
            range_query(request(u64::from(u32::MAX) + 1), &small(), 0),
            ErrorCode::LimitExceeded,
            "max_range_keys",
        );
        assert_invalid(
            range_query(
                v1::RangeRequest {
                    key: b"a".to_vec(),
                    range_end: b"b".to_vec(),
                    prefix: true,
                    ..Default::default()
                },
                &small(),
                MAX_RANGE_KEYS,
            ),
            "mutually exclusive",
        );
        assert_invalid(
            range_query(v1::RangeRequest::default(), &small(), MAX_RANGE_KEYS),
            "key must not be empty",
        );
    }

    #[test]
    fn read_revisions() {
        ok(check_read_revision(0, 10));
        ok(check_read_revision(10, 10));
        let status = err(check_read_revision(9, 10));
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(detail(&status).code(), ErrorCode::Compacted);
        assert_eq!(detail(&status).compact_revision, 10);
        let status = err(check_read_revision(11, 10));
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(detail(&status).code(), ErrorCode::FutureRevision);
    }

    #[test]
    fn range_responses() {
        let result = || RangeResult {
            kvs: vec![core_kv(b"a", b"1"), core_kv(b"b", b"2")],
            more: true,
            count: 5,
        };
        let full = range_response(header(8), result(), false, false);
        assert_eq!(full.header, Some(header(8)));
        assert_eq!(full.kvs.len(), 2);
        assert_eq!(full.kvs[1].value, b"2");
        assert!(full.more);
        assert_eq!(full.count, 5);

        let keys = range_response(header(8), result(), true, false);
        assert_eq!(keys.kvs[0].key, b"a");
        assert!(keys.kvs.iter().all(|kv| kv.value.is_empty()));
        assert_eq!(keys.kvs[0].version, 2);

        let counted = range_response(header(8), result(), false, true);
        assert!(counted.kvs.is_empty());
        assert_eq!(counted.count, 5);
    }

    #[test]
    fn put_requests() {
        let request = ok(put_request(
            v1::PutRequest {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                lease: 4,
                prev_kv: true,
                guard: wire_guard("lk", 12),
                request_id: wire_id(1, 2),
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::with_id(
                RequestId {
                    client_id: 1,
                    seq: 2,
                    seen_revision: Revision::ZERO,
                },
                Command::Put {
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                    lease: LeaseId::new(4),
                    guard: Some(Guard {
                        lock: "lk".into(),
                        token: FencingToken::new(12)
                    }),
                    prev_kv: true,
                }
            )
        );
        let put = |key: &[u8], value: &[u8]| v1::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            ..Default::default()
        };
        assert_eq!(ok(put_request(put(b"k", b""), &small())).request_id, None);
        assert_invalid(
            put_request(put(b"", b"v"), &small()),
            "key must not be empty",
        );
        assert_limit(
            put_request(put(b"123456789", b"v"), &small()),
            ErrorCode::LimitExceeded,
            "max_key_bytes",
        );
        assert_limit(
            put_request(put(b"k", &[7; 17]), &small()),
            ErrorCode::LimitExceeded,
            "max_value_bytes",
        );
        let mut guarded = put(b"k", b"v");
        guarded.guard = wire_guard("lk", 0);
        assert_invalid(put_request(guarded.clone(), &small()), "guard.token");
        guarded.guard = wire_guard("", 3);
        assert_invalid(put_request(guarded.clone(), &small()), "lock name");
        guarded.guard = wire_guard("toolong", 3);
        assert_limit(
            put_request(guarded, &small()),
            ErrorCode::LimitExceeded,
            "max_lock_name_bytes",
        );
        let mut with_zero_client = put(b"k", b"v");
        with_zero_client.request_id = wire_id(0, 1);
        assert_invalid(put_request(with_zero_client, &small()), "client_id");
    }

    #[test]
    fn delete_requests() {
        let request = ok(delete_request(
            v1::DeleteRangeRequest {
                key: b"a".to_vec(),
                range_end: vec![0x00],
                prev_kv: true,
                guard: wire_guard("lk", 3),
                request_id: wire_id(5, 6),
                ..Default::default()
            },
            &small(),
        ));
        assert_eq!(
            request.command,
            Command::Delete {
                selector: KeySelector::Range {
                    start: b"a".to_vec(),
                    end: Vec::new()
                },
                guard: Some(Guard {
                    lock: "lk".into(),
                    token: FencingToken::new(3)
                }),
                prev_kv: true,
            }
        );
        assert_eq!(
            request.request_id,
            Some(RequestId {
                client_id: 5,
                seq: 6,
                seen_revision: Revision::ZERO,
            })
        );
        let delete = |key: &[u8], range_end: &[u8], prefix| v1::DeleteRangeRequest {
            key: key.to_vec(),
            range_end: range_end.to_vec(),
            prefix,
            ..Default::default()
        };
        assert_eq!(
            ok(delete_request(delete(b"", b"", true), &small())).command,
            Command::Delete {
                selector: KeySelector::Prefix(Vec::new()),
                guard: None,
                prev_kv: false
            }
        );
        assert_invalid(
            delete_request(delete(b"a", b"z", true), &small()),
            "mutually exclusive",
        );
        assert_invalid(
            delete_request(delete(b"", b"", false), &small()),
            "key must not be empty",
        );
        assert_invalid(
            delete_request(delete(b"z", b"a", false), &small()),
            "range end",
        );
        assert_limit(
            delete_request(delete(b"123456789", b"", true), &small()),
            ErrorCode::LimitExceeded,
            "max_key_bytes",
        );
    }

    #[test]
    fn put_responses() {
        let answer = ok(put_response(
            header(7),
            Ok(Outcome::Put {
                prev: Some(core_kv(b"k", b"old")),
            }),
        ));
        assert_eq!(answer.header, Some(header(7)));
        assert_eq!(answer.result(), v1::PutResult::Ok);
        assert_eq!(answer.prev_kv.map(|kv| kv.value), Some(b"old".to_vec()));

        let answer = ok(put_response(header(7), Ok(Outcome::Put { prev: None })));
        assert_eq!(answer.result(), v1::PutResult::Ok);
        assert_eq!(answer.prev_kv, None);

        let answer = ok(put_response(
            header(7),
            Err(Rejection::GuardFailed {
                lock: "l".into(),
                token: FencingToken::new(2),
                current: Some(FencingToken::new(3)),
            }),
        ));
        assert_eq!(answer.result(), v1::PutResult::GuardFailed);
        let answer = ok(put_response(
            header(7),
            Err(Rejection::LeaseNotFound(LeaseId::new(4))),
        ));
        assert_eq!(answer.result(), v1::PutResult::LeaseNotFound);

        assert_limit(
            put_response(
                header(7),
                Err(Rejection::LimitExceeded {
                    limit: LimitKind::KeysPerLease,
                    max: 2,
                    actual: 3,
                }),
            ),
            ErrorCode::CapacityExceeded,
            "max_keys_per_lease",
        );
        assert_invalid(
            put_response(header(7), Err(Rejection::InvalidArgument("bad".into()))),
            "bad",
        );
        assert_internal(put_response(header(7), Ok(Outcome::Ignored)));
        assert_internal(put_response(
            header(7),
            Ok(Outcome::Granted {
                id: LeaseId::new(1),
                ttl_ms: DurationMs::new(5),
            }),
        ));
    }

    #[test]
    fn delete_responses() {
        let answer = ok(delete_response(
            header(9),
            Ok(Outcome::Deleted {
                deleted: 2,
                prev: vec![core_kv(b"a", b"1"), core_kv(b"b", b"2")],
            }),
        ));
        assert_eq!(answer.header, Some(header(9)));
        assert_eq!(answer.result(), v1::DeleteResult::Ok);
        assert_eq!(answer.deleted, 2);
        assert_eq!(answer.prev_kvs.len(), 2);
        assert_eq!(answer.prev_kvs[1].value, b"2");

        let answer = ok(delete_response(
            header(9),
            Err(Rejection::GuardFailed {
                lock: "l".into(),
                token: FencingToken::new(2),
                current: None,
            }),
        ));
        assert_eq!(answer.result(), v1::DeleteResult::GuardFailed);
        assert_eq!(answer.deleted, 0);

        let status = err(delete_response(
            header(9),
            Err(Rejection::LeaseNotFound(LeaseId::new(3))),
        ));
        assert_eq!(status.code(), Code::Internal);
        assert_eq!(detail(&status).outcome(), WireOutcome::Definite);
        assert_internal(delete_response(header(9), Ok(Outcome::Put { prev: None })));
    }

    fn txn_ok(request: v1::TxnRequest) -> (Request, TxnShape) {
        ok(txn_request(request, &small(), MAX_RANGE_KEYS))
    }

    fn txn_err(request: v1::TxnRequest) -> Result<(Request, TxnShape), ApiError> {
        txn_request(request, &small(), MAX_RANGE_KEYS)
    }

    #[test]
    fn txn_request_converts_everything() {
        use v1::compare::{Operand, Result as R, Target as T};
        let request = v1::TxnRequest {
            compares: vec![
                wire_compare(
                    b"a",
                    T::Value,
                    R::Equal,
                    Some(Operand::Value(b"x".to_vec())),
                ),
                wire_compare(b"b", T::Version, R::NotEqual, Some(Operand::Version(0))),
            ],
            success: vec![
                range_op(b"p/", true),
                op(v1::txn_op::Op::Put(v1::PutRequest {
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                    lease: 3,
                    prev_kv: true,
                    ..Default::default()
                })),
            ],
            failure: vec![delete_op(b"k")],
            guard: wire_guard("lk", 8),
            request_id: wire_id(4, 5),
        };
        let roomy = Limits {
            max_txn_ops: 5,
            ..small()
        };
        let (request, shape) = ok(txn_request(request, &roomy, MAX_RANGE_KEYS));
        assert_eq!(
            request,
            Request::with_id(
                RequestId {
                    client_id: 4,
                    seq: 5,
                    seen_revision: Revision::ZERO,
                },
                Command::Txn(Txn {
                    compares: vec![
                        Compare {
                            key: b"a".to_vec(),
                            target: CompareTarget::Value(b"x".to_vec()),
                            op: CompareOp::Equal,
                        },
                        Compare {
                            key: b"b".to_vec(),
                            target: CompareTarget::Version(0),
                            op: CompareOp::NotEqual,
                        },
                    ],
                    success: vec![
                        TxnOp::Get {
                            selector: KeySelector::Prefix(b"p/".to_vec()),
                            limit: MAX_RANGE_KEYS as u32,
                        },
                        TxnOp::Put {
                            key: b"k".to_vec(),
                            value: b"v".to_vec(),
                            lease: LeaseId::new(3),
                        },
                    ],
                    failure: vec![TxnOp::Delete {
                        selector: KeySelector::Key(b"k".to_vec()),
                    }],
                    guard: Some(Guard {
                        lock: "lk".into(),
                        token: FencingToken::new(8)
                    }),
                })
            )
        );
        assert_eq!(
            shape,
            TxnShape {
                success: vec![
                    OpShape::Range { keys_only: false },
                    OpShape::Put { prev_kv: true }
                ],
                failure: vec![OpShape::DeleteRange],
            }
        );
    }

    #[test]
    fn txn_compare_targets_and_relations() {
        use v1::compare::{Operand, Result as R, Target as T};
        let cases = [
            (
                T::Value,
                Operand::Value(b"v".to_vec()),
                CompareTarget::Value(b"v".to_vec()),
            ),
            (T::Version, Operand::Version(2), CompareTarget::Version(2)),
            (
                T::ModRevision,
                Operand::ModRevision(3),
                CompareTarget::ModRevision(Revision::new(3)),
            ),
            (
                T::CreateRevision,
                Operand::CreateRevision(4),
                CompareTarget::CreateRevision(Revision::new(4)),
            ),
            (
                T::Lease,
                Operand::Lease(0),
                CompareTarget::Lease(LeaseId::NONE),
            ),
        ];
        for (target, operand, expected) in cases {
            let (request, _) = txn_ok(txn(
                vec![wire_compare(b"k", target, R::Less, Some(operand))],
                vec![],
            ));
            let Command::Txn(converted) = request.command else {
                panic!("not a txn");
            };
            assert_eq!(converted.compares[0].target, expected);
        }
        for (relation, expected) in [
            (R::Equal, CompareOp::Equal),
            (R::NotEqual, CompareOp::NotEqual),
            (R::Greater, CompareOp::Greater),
            (R::Less, CompareOp::Less),
        ] {
            let (request, _) = txn_ok(txn(
                vec![wire_compare(
                    b"k",
                    T::Version,
                    relation,
                    Some(Operand::Version(1)),
                )],
                vec![],
            ));
            let Command::Txn(converted) = request.command else {
                panic!("not a txn");
            };
            assert_eq!(converted.compares[0].op, expected);
        }
    }

    #[test]
    fn txn_compare_errors() {
        use v1::compare::{Operand, Result as R, Target as T};
        let version = Some(Operand::Version(1));
        assert_invalid(
            txn_err(txn(
                vec![wire_compare(b"k", T::Value, R::Equal, version.clone())],
                vec![],
            )),
            "compares[0].target TARGET_VALUE does not match the operand that is set (version)",
        );
        assert_invalid(
            txn_err(txn(
                vec![wire_compare(b"k", T::Lease, R::Equal, None)],
                vec![],
            )),
            "compares[0].operand must be set",
        );
        assert_invalid(
            txn_err(txn(
                vec![wire_compare(
                    b"k",
                    T::Unspecified,
                    R::Equal,
                    version.clone(),
                )],
                vec![],
            )),
            "compares[0].target must be set",
        );
        assert_invalid(
            txn_err(txn(
                vec![wire_compare(
                    b"k",
                    T::Version,
                    R::Unspecified,
                    version.clone(),
                )],
                vec![],
            )),
            "compares[0].result must be set",
        );
        let mut unknown_target = wire_compare(b"k", T::Version, R::Equal, version.clone());
        unknown_target.target = 99;
        assert_invalid(
            txn_err(txn(vec![unknown_target], vec![])),
            "compares[0].target has unknown value 99",
        );
        let mut unknown_result = wire_compare(b"k", T::Version, R::Equal, version.clone());
        unknown_result.result = -1;
        assert_invalid(
            txn_err(txn(
                vec![
                    wire_compare(b"k", T::Version, R::Equal, version.clone()),
                    unknown_result,
                ],
                vec![],
            )),
            "compares[1].result has unknown value -1",
        );
        assert_invalid(
            txn_err(txn(
                vec![wire_compare(b"", T::Version, R::Equal, version)],
                vec![],
            )),
            "key must not be empty",
        );
        assert_limit(
            txn_err(txn(
                vec![wire_compare(
                    b"k",
                    T::Value,
                    R::Equal,
                    Some(Operand::Value(vec![0; 17])),
                )],
                vec![],
            )),
            ErrorCode::LimitExceeded,
            "max_value_bytes",
        );
    }

    #[test]
    fn txn_op_errors() {
        assert_invalid(
            txn_err(txn(vec![], vec![v1::TxnOp { op: None }])),
            "success[0]: no operation set",
        );

        let mut guarded = v1::PutRequest {
            key: b"k".to_vec(),
            guard: wire_guard("l", 1),
            ..Default::default()
        };
        assert_invalid(
            txn_err(txn(vec![], vec![op(v1::txn_op::Op::Put(guarded.clone()))])),
            "success[0].put.guard must be unset",
        );
        guarded.guard = None;
        guarded.request_id = wire_id(1, 1);
        assert_invalid(
            txn_err(txn(vec![], vec![op(v1::txn_op::Op::Put(guarded))])),
            "success[0].put.request_id must be unset",
        );

        let delete = v1::DeleteRangeRequest {
            key: b"k".to_vec(),
            guard: wire_guard("l", 1),
            ..Default::default()
        };
        let failing = v1::TxnRequest {
            failure: vec![delete_op(b"a"), op(v1::txn_op::Op::DeleteRange(delete))],
            ..Default::default()
        };
        assert_invalid(
            txn_err(failing),
            "failure[1].delete_range.guard must be unset",
        );
        let prev = v1::DeleteRangeRequest {
            key: b"k".to_vec(),
            prev_kv: true,
            ..Default::default()
        };
        assert_invalid(
            txn_err(txn(vec![], vec![op(v1::txn_op::Op::DeleteRange(prev))])),
            "success[0].delete_range.prev_kv is not supported",
        );
        let both = v1::DeleteRangeRequest {
            key: b"k".to_vec(),
            range_end: b"z".to_vec(),
            prefix: true,
            ..Default::default()
        };
        assert_invalid(
            txn_err(txn(vec![], vec![op(v1::txn_op::Op::DeleteRange(both))])),
            "success[0].delete_range.range_end and success[0].delete_range.prefix are mutually \
             exclusive",
        );

        let range = |change: fn(&mut v1::RangeRequest)| {
            let mut range = v1::RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            };
            change(&mut range);
            txn(vec![], vec![op(v1::txn_op::Op::Range(range))])
        };
        assert_invalid(
            txn_err(range(|r| r.revision = 3)),
            "historical reads are not supported",
        );
        assert_invalid(
            txn_err(range(|r| r.serializable = true)),
            "success[0].range.serializable must be false",
        );
        assert_invalid(
            txn_err(range(|r| r.count_only = true)),
            "success[0].range.count_only is not supported",
        );
        assert_limit(
            txn_err(range(|r| r.limit = MAX_RANGE_KEYS + 1)),
            ErrorCode::LimitExceeded,
            "max_range_keys",
        );
        let (request, shape) = txn_ok(range(|r| {
            r.limit = 3;
            r.keys_only = true;
        }));
        let Command::Txn(converted) = request.command else {
            panic!("not a txn");
        };
        assert_eq!(
            converted.success,
            vec![TxnOp::Get {
                selector: KeySelector::Key(b"k".to_vec()),
                limit: 3
            }]
        );
        assert_eq!(shape.success, vec![OpShape::Range { keys_only: true }]);

        assert_limit(
            txn_err(txn(vec![], vec![put_op(b"123456789", b"v")])),
            ErrorCode::LimitExceeded,
            "max_key_bytes",
        );
        assert_invalid(
            txn_err(txn(vec![], vec![put_op(b"", b"v")])),
            "key must not be empty",
        );
        let mut bad_guard = txn(vec![], vec![]);
        bad_guard.guard = wire_guard("l", 0);
        assert_invalid(txn_err(bad_guard), "guard.token");
        let mut bad_id = txn(vec![], vec![]);
        bad_id.request_id = wire_id(0, 0);
        assert_invalid(txn_err(bad_id), "client_id");
    }

    #[test]
    fn txn_size_limit() {
        // small() allows 4 compares + ops in all.
        let ops = vec![put_op(b"a", b""), put_op(b"b", b""), delete_op(b"c")];
        txn_ok(v1::TxnRequest {
            success: ops.clone(),
            failure: vec![delete_op(b"d")],
            ..Default::default()
        });
        assert_limit(
            txn_err(v1::TxnRequest {
                success: ops.clone(),
                failure: vec![delete_op(b"d"), delete_op(b"e")],
                ..Default::default()
            }),
            ErrorCode::LimitExceeded,
            "max_txn_ops",
        );
        let status = err(txn_err(v1::TxnRequest {
            success: vec![put_op(b"a", b""); 10],
            ..Default::default()
        }));
        let limit = detail(&status).limit.unwrap_or_default();
        assert_eq!(
            (limit.name.as_str(), limit.limit, limit.actual),
            ("max_txn_ops", 4, 10)
        );
    }

    fn shape() -> TxnShape {
        TxnShape {
            success: vec![
                OpShape::Range { keys_only: true },
                OpShape::Put { prev_kv: false },
                OpShape::Put { prev_kv: true },
            ],
            failure: vec![OpShape::DeleteRange, OpShape::Range { keys_only: false }],
        }
    }

    #[test]
    fn txn_response_success_branch() {
        let answer = ok(txn_response(
            header(11),
            &shape(),
            Ok(Outcome::Txn {
                succeeded: true,
                results: vec![
                    OpResult::Got {
                        kvs: vec![core_kv(b"a", b"1")],
                        more: false,
                    },
                    OpResult::Put {
                        prev: Some(core_kv(b"k", b"old")),
                    },
                    OpResult::Put {
                        prev: Some(core_kv(b"k", b"older")),
                    },
                ],
            }),
        ));
        use v1::txn_op_response::Response as R;
        assert_eq!(answer.header, Some(header(11)));
        assert_eq!(answer.result(), v1::TxnResult::CompareSucceeded);
        let responses: Vec<_> = answer.responses.into_iter().map(|r| r.response).collect();
        let [
            Some(R::Range(range)),
            Some(R::Put(put)),
            Some(R::Put(put_prev)),
        ] = &responses[..]
        else {
            panic!("wrong responses: {responses:?}");
        };
        assert_eq!(range.header, None);
        assert_eq!(range.kvs.len(), 1);
        assert!(range.kvs[0].value.is_empty(), "keys_only");
        assert_eq!(range.count, 1);
        assert!(!range.more);
        assert_eq!(put.header, None);
        assert_eq!(put.result(), v1::PutResult::Ok);
        assert_eq!(put.prev_kv, None, "prev_kv not requested");
        assert_eq!(
            put_prev.prev_kv.as_ref().map(|kv| kv.value.clone()),
            Some(b"older".to_vec())
        );
    }

    #[test]
    fn txn_response_failure_branch() {
        let answer = ok(txn_response(
            header(11),
            &shape(),
            Ok(Outcome::Txn {
                succeeded: false,
                results: vec![
                    OpResult::Deleted { deleted: 3 },
                    OpResult::Got {
                        kvs: vec![core_kv(b"a", b"1"), core_kv(b"b", b"2")],
                        more: true,
                    },
                ],
            }),
        ));
        use v1::txn_op_response::Response as R;
        assert_eq!(answer.result(), v1::TxnResult::CompareFailed);
        let responses: Vec<_> = answer.responses.into_iter().map(|r| r.response).collect();
        let [Some(R::DeleteRange(delete)), Some(R::Range(range))] = &responses[..] else {
            panic!("wrong responses: {responses:?}");
        };
        assert_eq!(delete.result(), v1::DeleteResult::Ok);
        assert_eq!(delete.deleted, 3);
        assert_eq!(range.kvs[1].value, b"2");
        assert!(range.more);
        assert_eq!(range.count, 2);
    }

    #[test]
    fn txn_response_rejections_and_mismatches() {
        let answer = ok(txn_response(
            header(11),
            &shape(),
            Err(Rejection::GuardFailed {
                lock: "l".into(),
                token: FencingToken::new(1),
                current: None,
            }),
        ));
        assert_eq!(answer.result(), v1::TxnResult::GuardFailed);
        assert!(answer.responses.is_empty());
        let answer = ok(txn_response(
            header(11),
            &shape(),
            Err(Rejection::LeaseNotFound(LeaseId::new(5))),
        ));
        assert_eq!(answer.result(), v1::TxnResult::LeaseNotFound);
        assert!(answer.responses.is_empty());
        assert_limit(
            txn_response(
                header(11),
                &shape(),
                Err(Rejection::LimitExceeded {
                    limit: LimitKind::KeysPerLease,
                    max: 2,
                    actual: 3,
                }),
            ),
            ErrorCode::CapacityExceeded,
            "max_keys_per_lease",
        );
        // Wrong number of results for the branch.
        assert_internal(txn_response(
            header(11),
            &shape(),
            Ok(Outcome::Txn {
                succeeded: false,
                results: vec![OpResult::Deleted { deleted: 1 }],
            }),
        ));
        // A result of the wrong kind.
        assert_internal(txn_response(
            header(11),
            &shape(),
            Ok(Outcome::Txn {
                succeeded: false,
                results: vec![
                    OpResult::Put { prev: None },
                    OpResult::Got {
                        kvs: vec![],
                        more: false,
                    },
                ],
            }),
        ));
        assert_internal(txn_response(
            header(11),
            &shape(),
            Ok(Outcome::Put { prev: None }),
        ));
    }
}
