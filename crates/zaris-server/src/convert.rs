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
//! rejection becomes an error ([`ApiError::Rejected`]). An [`Outcome`] of the wrong kind
//! for the call becomes INTERNAL: it means a server bug, or a `request_id` reused for a different
//! request (the state machine de-duplicates by id alone and replays the first request's answer).
//!
//! **Request ids.** An unset `request_id` means no de-duplication. A set one with `client_id` 0 is
//! INVALID_ARGUMENT rather than silently "none": a client that set an id believes its retries are
//! safe, and quietly dropping the id would let a retry apply twice. (`seq` 0 is allowed.)

use std::collections::{HashMap, HashSet};

use zaris_core::{
    CancelOutcome, Command, Compare, CompareOp, CompareTarget, Event, EventKind, Guard,
    KeySelector, LeaseId, LeaseInfo, LimitKind, Limits, LockInfo, LockOutcome, OpResult, Outcome,
    RangeResult, Rejection, Request, RequestId, Response, Revision, Txn, TxnOp,
};
use zaris_proto::v1::{self, ResponseHeader};

use crate::error::ApiError;

// ---- requests ----------------------------------------------------------------------------------

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
            seen_revision,
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

fn guard(guard: Option<v1::Guard>, at: &str) -> Result<Option<Guard>, ApiError> {
    match guard {
        None => Ok(None),
        Some(v1::Guard { token: 0, .. }) => Err(ApiError::invalid_argument(format!(
            "{at}guard.token must not be 0: no lock is ever held with token 0"
        ))),
        Some(v1::Guard { lock_name, token }) => Ok(Some(Guard {
            lock: lock_name,
            token,
        })),
    }
}

/// Validates `request` against `limits`, the check the state machine repeats on apply.
fn validated(request: Request, limits: &Limits) -> Result<Request, ApiError> {
    request.validate(limits).map_err(ApiError::from)?;
    Ok(request)
}

/// A Put, validated.
pub fn put_request(request: v1::PutRequest, limits: &Limits) -> Result<Request, ApiError> {
    let request_id = request_id(request.request_id)?;
    let command = Command::Put {
        key: request.key,
        value: request.value,
        lease: request.lease,
        guard: guard(request.guard, "")?,
        prev_kv: request.prev_kv,
    };
    validated(
        Request {
            request_id,
            command,
        },
        limits,
    )
}

/// A DeleteRange, validated.
pub fn delete_request(
    request: v1::DeleteRangeRequest,
    limits: &Limits,
) -> Result<Request, ApiError> {
    let request_id = request_id(request.request_id)?;
    let command = Command::Delete {
        selector: select(request.key, request.range_end, request.prefix, "")?,
        guard: guard(request.guard, "")?,
        prev_kv: request.prev_kv,
    };
    validated(
        Request {
            request_id,
            command,
        },
        limits,
    )
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
    let request_id = request_id(request.request_id)?;
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
    let request = validated(
        Request {
            request_id,
            command: Command::Txn(txn),
        },
        limits,
    )?;
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
        (Target::ModRevision, Operand::ModRevision(r)) => CompareTarget::ModRevision(r),
        (Target::CreateRevision, Operand::CreateRevision(r)) => CompareTarget::CreateRevision(r),
        (Target::Lease, Operand::Lease(l)) => CompareTarget::Lease(l),
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
                    lease: put.lease,
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

/// A lease Grant, validated (TTL bounds).
pub fn grant_request(request: v1::LeaseGrantRequest, limits: &Limits) -> Result<Request, ApiError> {
    let request_id = request_id(request.request_id)?;
    validated(
        Request {
            request_id,
            command: Command::Grant {
                id: request.id,
                ttl_ms: request.ttl_ms,
            },
        },
        limits,
    )
}

/// A lease Revoke, validated (id 0 is refused).
pub fn revoke_request(
    request: v1::LeaseRevokeRequest,
    limits: &Limits,
) -> Result<Request, ApiError> {
    let request_id = request_id(request.request_id)?;
    validated(
        Request {
            request_id,
            command: Command::Revoke { id: request.id },
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
    let mut seen = HashSet::with_capacity(request.ids.len());
    let ids: Vec<LeaseId> = request
        .ids
        .iter()
        .copied()
        .filter(|id| seen.insert(*id))
        .collect();
    if !ids.is_empty() {
        Request::new(Command::Renew { ids: ids.clone() })
            .validate(limits)
            .map_err(ApiError::from)?;
    }
    Ok(ids)
}

/// A Lock call's LockAcquire, validated. The call's `timeout_ms` is the server's business: see
/// [`lock_wait_ms`].
pub fn lock_request(request: v1::LockRequest, limits: &Limits) -> Result<Request, ApiError> {
    validated(
        Request::new(Command::LockAcquire {
            name: request.name,
            lease: request.lease,
            wait: request.wait,
        }),
        limits,
    )
}

/// How long a Lock call may block for the lock, in milliseconds: 0 without `wait` (then
/// `timeout_ms` is ignored) or when `timeout_ms` is 0; above `max_lock_wait_ms` → LIMIT_EXCEEDED.
pub fn lock_wait_ms(request: &v1::LockRequest, max_lock_wait_ms: u64) -> Result<u64, ApiError> {
    if !request.wait {
        return Ok(0);
    }
    if request.timeout_ms > max_lock_wait_ms {
        return Err(ApiError::limit_exceeded(
            "max_lock_wait_ms",
            max_lock_wait_ms,
            request.timeout_ms,
        ));
    }
    Ok(request.timeout_ms)
}

/// An Unlock, validated: token 0 withdraws the lease from the wait queue (core `LockCancel`), any
/// other token is a fenced release (`LockRelease`).
pub fn unlock_request(request: v1::UnlockRequest, limits: &Limits) -> Result<Request, ApiError> {
    let request_id = request_id(request.request_id)?;
    let command = if request.token == 0 {
        Command::LockCancel {
            name: request.name,
            lease: request.lease,
        }
    } else {
        Command::LockRelease {
            name: request.name,
            lease: request.lease,
            token: request.token,
        }
    };
    validated(
        Request {
            request_id,
            command,
        },
        limits,
    )
}

/// The event kinds a watch delivers, from `WatchCreateRequest.event_types`: empty → `None` (every
/// kind, also ones added later). UNSPECIFIED or an unknown value → INVALID_ARGUMENT, like every
/// enum this server reads: a filter the server cannot honour would silently deliver nothing.
pub fn event_kinds(event_types: &[i32]) -> Result<Option<Vec<EventKind>>, ApiError> {
    if event_types.is_empty() {
        return Ok(None);
    }
    let mut kinds = Vec::with_capacity(event_types.len());
    for (at, value) in event_types.iter().enumerate() {
        let kind = match v1::EventType::try_from(*value) {
            Ok(v1::EventType::Put) => EventKind::Put,
            Ok(v1::EventType::Delete) => EventKind::Delete,
            Ok(v1::EventType::Expire) => EventKind::Expire,
            Ok(v1::EventType::Revoke) => EventKind::Revoke,
            Ok(v1::EventType::Unspecified) => {
                return Err(ApiError::invalid_argument(format!(
                    "event_types[{at}] must not be EVENT_TYPE_UNSPECIFIED"
                )));
            }
            Err(_) => {
                return Err(ApiError::invalid_argument(format!(
                    "event_types[{at}] has unknown value {value}"
                )));
            }
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(Some(kinds))
}

// ---- results -----------------------------------------------------------------------------------

/// The wire type of an event kind.
pub fn event_type(kind: EventKind) -> v1::EventType {
    match kind {
        EventKind::Put => v1::EventType::Put,
        EventKind::Delete => v1::EventType::Delete,
        EventKind::Expire => v1::EventType::Expire,
        EventKind::Revoke => v1::EventType::Revoke,
    }
}

/// A change applied at `revision`, as a watcher sees it; `prev_kv` only if the watch asked for it.
pub fn watch_event(event: &Event, revision: Revision, prev_kv: bool) -> v1::Event {
    v1::Event {
        r#type: event_type(event.kind).into(),
        kv: Some(kv(event.kv.clone())),
        prev_kv: if prev_kv {
            event.prev.clone().map(kv)
        } else {
            None
        },
        lease: event.lease,
        revision,
    }
}

/// A stored key-value on the wire.
pub fn kv(kv: zaris_core::KeyValue) -> v1::KeyValue {
    v1::KeyValue {
        key: kv.key,
        value: kv.value,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        lease: kv.lease,
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

/// A Grant answer: created → GRANTED with id and TTL; requested id used before → ID_IN_USE with the
/// next free id.
pub fn grant_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::LeaseGrantResponse, ApiError> {
    let (result, id, ttl_ms, next_free_id) = match response {
        Ok(Outcome::Granted { id, ttl_ms }) => (v1::GrantResult::Granted, id, ttl_ms, 0),
        Err(Rejection::LeaseIdUsed { next_free, .. }) => {
            (v1::GrantResult::IdInUse, 0, 0, next_free)
        }
        Err(rejection) => return Err(rejection.into()),
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

/// The outcome of one applied Renew (possibly the group-committed ids of many KeepAlive requests),
/// indexed by lease id so that each request in the batch is answered without rescanning it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Renewals {
    renewed: HashMap<LeaseId, u64>,
    not_found: HashSet<LeaseId>,
}

impl Renewals {
    /// From the Renew's response; a rejection (a batch over `max_batch_ids`, say) is the status
    /// every request in the batch gets.
    pub fn from_response(response: &Response) -> Result<Self, ApiError> {
        match response {
            Ok(Outcome::Renewed { renewed, not_found }) => Ok(Renewals {
                renewed: renewed.iter().copied().collect(),
                not_found: not_found.iter().copied().collect(),
            }),
            Err(rejection) => Err(rejection.clone().into()),
            Ok(other) => Err(ApiError::unexpected("KeepAlive", other)),
        }
    }
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
        if let Some(&ttl_ms) = renewals.renewed.get(&id) {
            renewed.push(v1::LeaseRenewed { id, ttl_ms });
        } else if renewals.not_found.contains(&id) {
            not_found.push(id);
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

/// A Lock answer: HELD with the token; QUEUED with the queue position; BUSY with the holder; the
/// lease missing → LEASE_NOT_FOUND. A full queue is CAPACITY_EXCEEDED (an error).
///
/// For QUEUED, `holder_lease` is 0: the core outcome does not say who holds the lock. A caller that
/// wants it there can fill it from [`zaris_core::State::lock`].
pub fn lock_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::LockResponse, ApiError> {
    let mut answer = v1::LockResponse {
        header: Some(header),
        ..v1::LockResponse::default()
    };
    match response {
        Ok(Outcome::Lock(LockOutcome::Held { token })) => {
            answer.result = v1::LockResult::Held.into();
            answer.token = token;
        }
        Ok(Outcome::Lock(LockOutcome::Queued { position })) => {
            answer.result = v1::LockResult::Queued.into();
            answer.queue_position = position.into();
        }
        Ok(Outcome::Lock(LockOutcome::Busy { holder, .. })) => {
            // The holder's token is not the caller's business: `token` is for HELD only.
            answer.result = v1::LockResult::Busy.into();
            answer.holder_lease = holder;
        }
        Err(Rejection::LeaseNotFound(_)) => {
            answer.result = v1::LockResult::LeaseNotFound.into();
        }
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Lock", &other)),
    }
    Ok(answer)
}

/// An Unlock answer: released → RELEASED; withdrawn from the queue → WITHDRAWN; handed the lock
/// before the withdrawal applied → HELD with its token; not holding with that token, or (token 0)
/// neither queued nor holding → NOT_HOLDER.
pub fn unlock_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::UnlockResponse, ApiError> {
    let (result, token) = match response {
        Ok(Outcome::Unlocked { .. }) => (v1::UnlockResult::Released, 0),
        Ok(Outcome::Cancelled(CancelOutcome::Withdrawn)) => (v1::UnlockResult::Withdrawn, 0),
        Ok(Outcome::Cancelled(CancelOutcome::Held { token })) => (v1::UnlockResult::Held, token),
        Ok(Outcome::Cancelled(CancelOutcome::NotWaiting)) | Err(Rejection::NotHolder { .. }) => {
            (v1::UnlockResult::NotHolder, 0)
        }
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Unlock", &other)),
    };
    Ok(v1::UnlockResponse {
        header: Some(header),
        result: result.into(),
        token,
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
        id: info.id,
        ttl_ms: info.ttl_ms,
        remaining_ttl_ms,
        granted_revision: info.granted_revision,
        renewed_revision: info.renewed_revision,
        bound_keys,
        keys_truncated,
        locks_held: info.locks_held,
        locks_waiting: info.locks_waiting,
    }
}

/// One lease of a Leases listing.
pub fn lease_summary(info: &LeaseInfo, remaining_ttl_ms: u64) -> v1::LeaseSummary {
    v1::LeaseSummary {
        id: info.id,
        ttl_ms: info.ttl_ms,
        remaining_ttl_ms,
        key_count: info.key_count.into(),
        lock_count: info.locks_held.len() as u64,
    }
}

/// A LockStatus answer: `None` (no holder) → `held: false`.
pub fn lock_status_response(
    header: ResponseHeader,
    info: Option<LockInfo>,
) -> v1::LockStatusResponse {
    let mut answer = v1::LockStatusResponse {
        header: Some(header),
        ..v1::LockStatusResponse::default()
    };
    if let Some(info) = info {
        answer.held = true;
        answer.holder_lease = info.holder;
        answer.token = info.token;
        answer.waiters = info.waiters.len() as u64;
    }
    answer
}

#[cfg(test)]
mod tests {
    use tonic::{Code, Status};
    use zaris_core::State;
    use zaris_proto::v1::{ErrorCode, ErrorDetail, Outcome as WireOutcome};

    use super::*;

    const MAX_RANGE_KEYS: u64 = 100;

    /// Small limits so that oversize requests are cheap to build.
    fn small() -> Limits {
        Limits {
            max_key_bytes: 8,
            max_value_bytes: 16,
            max_lock_name_bytes: 6,
            min_ttl_ms: 1_000,
            max_ttl_ms: 60_000,
            max_txn_ops: 4,
            max_batch_ids: 3,
            max_waiters_per_lock: 1,
            max_keys_per_lease: 2,
            max_leases: 3,
            dedup_capacity: 16,
            dedup_max_bytes: zaris_core::limits::MIN_DEDUP_MAX_BYTES,
        }
    }

    fn header(revision: u64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: 1,
            member_id: 2,
            revision,
            raft_term: 3,
        }
    }

    fn ok<T>(result: Result<T, ApiError>) -> T {
        match result {
            Ok(value) => value,
            Err(status) => panic!("unexpected error: {status:?}"),
        }
    }

    fn err<T: std::fmt::Debug>(result: Result<T, ApiError>) -> Status {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(error) => error.into(),
        }
    }

    fn detail(status: &Status) -> ErrorDetail {
        match zaris_proto::detail(status) {
            Some(detail) => detail,
            None => panic!("status without a Zaris detail: {status:?}"),
        }
    }

    /// Asserts INVALID_ARGUMENT / INVALID_ARGUMENT, definite, with `needle` in the message.
    fn assert_invalid<T: std::fmt::Debug>(result: Result<T, ApiError>, needle: &str) {
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
    fn assert_limit<T: std::fmt::Debug>(result: Result<T, ApiError>, code: ErrorCode, name: &str) {
        let status = err(result);
        let detail = detail(&status);
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert_eq!(detail.code(), code, "{detail:?}");
        assert_eq!(detail.outcome(), WireOutcome::Definite);
        assert_eq!(detail.limit.map(|l| l.name).as_deref(), Some(name));
        assert!(detail.message.contains(name), "{:?}", detail.message);
    }

    fn assert_internal<T: std::fmt::Debug>(result: Result<T, ApiError>) {
        let status = err(result);
        assert_eq!(status.code(), Code::Internal, "{status:?}");
        assert_eq!(detail(&status).code(), ErrorCode::Internal);
    }

    fn core_kv(key: &[u8], value: &[u8]) -> zaris_core::KeyValue {
        zaris_core::KeyValue {
            key: key.to_vec(),
            value: value.to_vec(),
            create_revision: 4,
            mod_revision: 5,
            version: 2,
            lease: 9,
        }
    }

    fn wire_id(client_id: u64, seq: u64) -> Option<v1::RequestId> {
        Some(v1::RequestId {
            client_id,
            seq,
            seen_revision: 0,
        })
    }

    fn wire_guard(lock: &str, token: u64) -> Option<v1::Guard> {
        Some(v1::Guard {
            lock_name: lock.into(),
            token,
        })
    }

    // ---- selectors and request ids ---------------------------------------------------------

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
                seen_revision: 0,
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

    // ---- Range -----------------------------------------------------------------------------

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

    // ---- Put and DeleteRange ---------------------------------------------------------------

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
                    seen_revision: 0,
                },
                Command::Put {
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                    lease: 4,
                    guard: Some(Guard {
                        lock: "lk".into(),
                        token: 12
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
                    token: 3
                }),
                prev_kv: true,
            }
        );
        assert_eq!(
            request.request_id,
            Some(RequestId {
                client_id: 5,
                seq: 6,
                seen_revision: 0,
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
                token: 2,
                current: Some(3),
            }),
        ));
        assert_eq!(answer.result(), v1::PutResult::GuardFailed);
        let answer = ok(put_response(header(7), Err(Rejection::LeaseNotFound(4))));
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
            Ok(Outcome::Granted { id: 1, ttl_ms: 5 }),
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
                token: 2,
                current: None,
            }),
        ));
        assert_eq!(answer.result(), v1::DeleteResult::GuardFailed);
        assert_eq!(answer.deleted, 0);

        let status = err(delete_response(header(9), Err(Rejection::LeaseNotFound(3))));
        assert_eq!(status.code(), Code::Internal);
        assert_eq!(detail(&status).outcome(), WireOutcome::Definite);
        assert_internal(delete_response(header(9), Ok(Outcome::Put { prev: None })));
    }

    // ---- Txn -------------------------------------------------------------------------------

    fn wire_compare(
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

    fn op(op: v1::txn_op::Op) -> v1::TxnOp {
        v1::TxnOp { op: Some(op) }
    }

    fn range_op(key: &[u8], prefix: bool) -> v1::TxnOp {
        op(v1::txn_op::Op::Range(v1::RangeRequest {
            key: key.to_vec(),
            prefix,
            ..Default::default()
        }))
    }

    fn put_op(key: &[u8], value: &[u8]) -> v1::TxnOp {
        op(v1::txn_op::Op::Put(v1::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            ..Default::default()
        }))
    }

    fn delete_op(key: &[u8]) -> v1::TxnOp {
        op(v1::txn_op::Op::DeleteRange(v1::DeleteRangeRequest {
            key: key.to_vec(),
            ..Default::default()
        }))
    }

    fn txn(compares: Vec<v1::Compare>, success: Vec<v1::TxnOp>) -> v1::TxnRequest {
        v1::TxnRequest {
            compares,
            success,
            ..Default::default()
        }
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
                    seen_revision: 0,
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
                            lease: 3,
                        },
                    ],
                    failure: vec![TxnOp::Delete {
                        selector: KeySelector::Key(b"k".to_vec()),
                    }],
                    guard: Some(Guard {
                        lock: "lk".into(),
                        token: 8
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
                CompareTarget::ModRevision(3),
            ),
            (
                T::CreateRevision,
                Operand::CreateRevision(4),
                CompareTarget::CreateRevision(4),
            ),
            (T::Lease, Operand::Lease(0), CompareTarget::Lease(0)),
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
                token: 1,
                current: None,
            }),
        ));
        assert_eq!(answer.result(), v1::TxnResult::GuardFailed);
        assert!(answer.responses.is_empty());
        let answer = ok(txn_response(
            header(11),
            &shape(),
            Err(Rejection::LeaseNotFound(5)),
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

    // ---- leases ----------------------------------------------------------------------------

    #[test]
    fn grant_requests() {
        let request = ok(grant_request(
            v1::LeaseGrantRequest {
                ttl_ms: 5_000,
                id: 42,
                request_id: wire_id(3, 4),
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::with_id(
                RequestId {
                    client_id: 3,
                    seq: 4,
                    seen_revision: 0,
                },
                Command::Grant {
                    id: 42,
                    ttl_ms: 5_000
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
    }

    #[test]
    fn grant_responses() {
        let answer = ok(grant_response(
            header(3),
            Ok(Outcome::Granted {
                id: 9,
                ttl_ms: 5_000,
            }),
        ));
        assert_eq!(answer.header, Some(header(3)));
        assert_eq!(answer.result(), v1::GrantResult::Granted);
        assert_eq!((answer.id, answer.ttl_ms), (9, 5_000));

        let answer = ok(grant_response(
            header(3),
            Err(Rejection::LeaseIdUsed {
                id: 9,
                next_free: 12,
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
        assert_internal(grant_response(
            header(3),
            Ok(Outcome::Revoked {
                id: 1,
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
        assert_eq!(request, Request::new(Command::Revoke { id: 5 }));
        assert_invalid(
            revoke_request(v1::LeaseRevokeRequest::default(), &small()),
            "lease id 0",
        );

        let answer = ok(revoke_response(
            header(4),
            Ok(Outcome::Revoked {
                id: 5,
                keys_deleted: 2,
            }),
        ));
        assert_eq!(answer.header, Some(header(4)));
        assert_eq!(answer.result(), v1::RevokeResult::Revoked);
        let answer = ok(revoke_response(header(4), Err(Rejection::LeaseNotFound(5))));
        assert_eq!(answer.result(), v1::RevokeResult::NotFound);
        assert_internal(revoke_response(
            header(4),
            Ok(Outcome::Expired {
                revoked: vec![5],
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
            vec![3, 1, 2]
        );
        // The listed ids count against the limit, duplicates included.
        assert_limit(
            keepalive_ids(&ids(vec![1, 1, 1, 1]), &small()),
            ErrorCode::LimitExceeded,
            "max_batch_ids",
        );
        assert_eq!(ok(keepalive_ids(&ids(vec![]), &small())), Vec::<u64>::new());
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
            renewed: vec![(1, 1_000), (2, 2_000)],
            not_found: vec![3],
        })));
        let answer = ok(keepalive_response(header(6), 17, &[3, 1], &renewals));
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

        let answer = ok(keepalive_response(header(6), 18, &[2, 1], &renewals));
        assert_eq!(
            answer.renewed.iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![2, 1]
        );
        assert!(answer.not_found.is_empty());

        // An id the batch did not carry is a server bug, never "not found".
        assert_internal(keepalive_response(header(6), 19, &[1, 4], &renewals));

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
            id: 5,
            ttl_ms: 10_000,
            granted_revision: 3,
            renewed_revision: 8,
            key_count: 3,
            keys: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            locks_held: vec!["l1".into(), "l2".into()],
            locks_waiting: vec!["l3".into()],
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
            }
        );
    }

    // ---- locks -----------------------------------------------------------------------------

    #[test]
    fn lock_requests() {
        let request = ok(lock_request(
            v1::LockRequest {
                name: "job".into(),
                lease: 5,
                wait: true,
                timeout_ms: 100,
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::new(Command::LockAcquire {
                name: "job".into(),
                lease: 5,
                wait: true
            })
        );
        let lock = |name: &str, lease| v1::LockRequest {
            name: name.into(),
            lease,
            ..Default::default()
        };
        assert_invalid(
            lock_request(lock("", 5), &small()),
            "lock name must not be empty",
        );
        assert_invalid(lock_request(lock("job", 0), &small()), "lease id 0");
        assert_limit(
            lock_request(lock("toolong", 5), &small()),
            ErrorCode::LimitExceeded,
            "max_lock_name_bytes",
        );
    }

    #[test]
    fn lock_waits() {
        let lock = |wait, timeout_ms| v1::LockRequest {
            name: "job".into(),
            lease: 1,
            wait,
            timeout_ms,
        };
        assert_eq!(ok(lock_wait_ms(&lock(false, 1_000_000), 500)), 0);
        assert_eq!(ok(lock_wait_ms(&lock(true, 0), 500)), 0);
        assert_eq!(ok(lock_wait_ms(&lock(true, 500), 500)), 500);
        assert_limit(
            lock_wait_ms(&lock(true, 501), 500),
            ErrorCode::LimitExceeded,
            "max_lock_wait_ms",
        );
    }

    #[test]
    fn unlock_requests() {
        let unlock = |token, request_id| v1::UnlockRequest {
            name: "job".into(),
            lease: 5,
            token,
            request_id,
        };
        assert_eq!(
            ok(unlock_request(unlock(0, None), &small())),
            Request::new(Command::LockCancel {
                name: "job".into(),
                lease: 5
            })
        );
        assert_eq!(
            ok(unlock_request(unlock(12, wire_id(1, 9)), &small())),
            Request::with_id(
                RequestId {
                    client_id: 1,
                    seq: 9,
                    seen_revision: 0,
                },
                Command::LockRelease {
                    name: "job".into(),
                    lease: 5,
                    token: 12
                }
            )
        );
        assert_invalid(
            unlock_request(
                v1::UnlockRequest {
                    name: "job".into(),
                    token: 3,
                    ..Default::default()
                },
                &small(),
            ),
            "lease id 0",
        );
        assert_invalid(
            unlock_request(
                v1::UnlockRequest {
                    lease: 5,
                    ..Default::default()
                },
                &small(),
            ),
            "lock name must not be empty",
        );
    }

    #[test]
    fn lock_responses() {
        let answer = ok(lock_response(
            header(5),
            Ok(Outcome::Lock(LockOutcome::Held { token: 44 })),
        ));
        assert_eq!(
            answer,
            v1::LockResponse {
                header: Some(header(5)),
                result: v1::LockResult::Held.into(),
                token: 44,
                holder_lease: 0,
                queue_position: 0,
            }
        );
        let answer = ok(lock_response(
            header(5),
            Ok(Outcome::Lock(LockOutcome::Queued { position: 2 })),
        ));
        assert_eq!(answer.result(), v1::LockResult::Queued);
        assert_eq!((answer.token, answer.queue_position), (0, 2));
        let answer = ok(lock_response(
            header(5),
            Ok(Outcome::Lock(LockOutcome::Busy {
                holder: 8,
                token: 40,
            })),
        ));
        assert_eq!(answer.result(), v1::LockResult::Busy);
        assert_eq!((answer.token, answer.holder_lease), (0, 8));
        let answer = ok(lock_response(header(5), Err(Rejection::LeaseNotFound(5))));
        assert_eq!(answer.result(), v1::LockResult::LeaseNotFound);
        assert_eq!(answer.header, Some(header(5)));

        assert_limit(
            lock_response(
                header(5),
                Err(Rejection::LimitExceeded {
                    limit: LimitKind::WaitersPerLock,
                    max: 1,
                    actual: 2,
                }),
            ),
            ErrorCode::CapacityExceeded,
            "max_waiters_per_lock",
        );
        assert_internal(lock_response(
            header(5),
            Ok(Outcome::Unlocked { next: None }),
        ));
    }

    #[test]
    fn unlock_responses() {
        let cases = [
            (
                Ok(Outcome::Unlocked {
                    next: Some((6, 50)),
                }),
                v1::UnlockResult::Released,
                0,
            ),
            (
                Ok(Outcome::Unlocked { next: None }),
                v1::UnlockResult::Released,
                0,
            ),
            (
                Ok(Outcome::Cancelled(CancelOutcome::Withdrawn)),
                v1::UnlockResult::Withdrawn,
                0,
            ),
            (
                Ok(Outcome::Cancelled(CancelOutcome::Held { token: 33 })),
                v1::UnlockResult::Held,
                33,
            ),
            (
                Ok(Outcome::Cancelled(CancelOutcome::NotWaiting)),
                v1::UnlockResult::NotHolder,
                0,
            ),
            (
                Err(Rejection::NotHolder {
                    lock: "job".into(),
                    lease: 5,
                    token: 3,
                }),
                v1::UnlockResult::NotHolder,
                0,
            ),
        ];
        for (response, result, token) in cases {
            let answer = ok(unlock_response(header(2), response));
            assert_eq!(answer.header, Some(header(2)));
            assert_eq!(answer.result(), result);
            assert_eq!(answer.token, token);
        }
        assert_invalid(
            unlock_response(header(2), Err(Rejection::InvalidArgument("x".into()))),
            "x",
        );
        assert_internal(unlock_response(
            header(2),
            Ok(Outcome::Lock(LockOutcome::Held { token: 1 })),
        ));
    }

    #[test]
    fn lock_status_responses() {
        let answer = lock_status_response(
            header(3),
            Some(LockInfo {
                name: "job".into(),
                holder: 5,
                token: 12,
                waiters: vec![6, 7],
            }),
        );
        assert_eq!(
            answer,
            v1::LockStatusResponse {
                header: Some(header(3)),
                held: true,
                holder_lease: 5,
                token: 12,
                waiters: 2,
            }
        );
        assert_eq!(
            lock_status_response(header(3), None),
            v1::LockStatusResponse {
                header: Some(header(3)),
                ..Default::default()
            }
        );
    }

    // ---- through the real state machine ----------------------------------------------------

    /// Wire request → core request → `State::apply` → wire response, for the main flows.
    #[test]
    fn round_trip_through_the_state_machine() {
        let limits = small();
        let mut state = State::new(limits.clone());
        let mut rev = 0;
        let mut apply = |state: &mut State, request: Request| {
            rev += 1;
            state.apply(rev, &request).response
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
            },
            &limits,
        ));
        state.apply(1, &grant);
        let put = ok(put_request(
            v1::PutRequest {
                key: b"k".to_vec(),
                request_id: wire_id(1, 1),
                ..Default::default()
            },
            &limits,
        ));
        let replayed = state.apply(2, &put).response;
        assert_internal(put_response(header(2), replayed));
        assert_eq!(state.key_count(), 0);
    }

    #[test]
    fn event_type_filters() {
        use v1::EventType as T;
        assert_eq!(ok(event_kinds(&[])), None);
        assert_eq!(
            ok(event_kinds(&[
                T::Revoke as i32,
                T::Put as i32,
                T::Revoke as i32
            ])),
            Some(vec![EventKind::Revoke, EventKind::Put])
        );
        assert_eq!(
            ok(event_kinds(&[
                T::Put as i32,
                T::Delete as i32,
                T::Expire as i32,
                T::Revoke as i32
            ])),
            Some(vec![
                EventKind::Put,
                EventKind::Delete,
                EventKind::Expire,
                EventKind::Revoke
            ])
        );
        assert_invalid(
            event_kinds(&[T::Put as i32, T::Unspecified as i32]),
            "event_types[1] must not be EVENT_TYPE_UNSPECIFIED",
        );
        assert_invalid(event_kinds(&[99]), "event_types[0] has unknown value 99");
    }

    /// Events from the real state machine, on the wire: lease ids on PUT, REVOKE and EXPIRE, none
    /// on DELETE; deletions carry the deletion revision and version 0; prev_kv only on request.
    #[test]
    fn watch_events_from_the_state_machine() {
        use zaris_core::ExpiredLease;

        let limits = small();
        let mut state = State::new(limits.clone());
        let events = |state: &mut State, revision: u64, command: Command| {
            state.apply(revision, &Request::new(command)).effects.events
        };
        let grant = |id| Command::Grant { id, ttl_ms: 5_000 };
        let put = |key: &[u8], lease| Command::Put {
            key: key.to_vec(),
            value: b"v".to_vec(),
            lease,
            guard: None,
            prev_kv: false,
        };
        events(&mut state, 1, grant(7));
        events(&mut state, 2, grant(8));

        let put_events = events(&mut state, 3, put(b"a", 7));
        let wire = watch_event(&put_events[0], 3, true);
        assert_eq!(wire.r#type(), v1::EventType::Put);
        assert_eq!((wire.lease, wire.revision), (7, 3));
        let kv = wire.kv.clone().unwrap_or_default();
        assert_eq!(
            (kv.key.as_slice(), kv.value.as_slice()),
            (&b"a"[..], &b"v"[..])
        );
        assert_eq!((kv.mod_revision, kv.version, kv.lease), (3, 1, 7));
        assert_eq!(wire.prev_kv, None, "no previous value: the key was new");

        let overwrite = events(&mut state, 4, put(b"a", 0));
        let with_prev = watch_event(&overwrite[0], 4, true);
        assert_eq!(with_prev.lease, 0);
        assert_eq!(
            with_prev.prev_kv.map(|p| (p.mod_revision, p.lease)),
            Some((3, 7))
        );
        assert_eq!(watch_event(&overwrite[0], 4, false).prev_kv, None);

        let deleted = events(
            &mut state,
            5,
            Command::Delete {
                selector: KeySelector::Key(b"a".to_vec()),
                guard: None,
                prev_kv: false,
            },
        );
        let wire = watch_event(&deleted[0], 5, true);
        assert_eq!(wire.r#type(), v1::EventType::Delete);
        assert_eq!(wire.lease, 0);
        let kv = wire.kv.unwrap_or_default();
        assert_eq!((kv.mod_revision, kv.version, kv.value.len()), (5, 0, 0));
        assert_eq!(wire.prev_kv.map(|p| p.version), Some(2));

        events(&mut state, 6, put(b"b", 7));
        events(&mut state, 7, put(b"c", 8));
        let revoked = events(&mut state, 8, Command::Revoke { id: 7 });
        let wire = watch_event(&revoked[0], 8, false);
        assert_eq!(wire.r#type(), v1::EventType::Revoke);
        assert_eq!((wire.lease, wire.revision), (7, 8));
        let expired = events(
            &mut state,
            9,
            Command::Expire {
                leases: vec![ExpiredLease {
                    id: 8,
                    observed_renewed_revision: 2,
                }],
            },
        );
        let wire = watch_event(&expired[0], 9, false);
        assert_eq!(wire.r#type(), v1::EventType::Expire);
        assert_eq!(wire.lease, 8);
        assert_eq!(wire.kv.map(|kv| kv.key), Some(b"c".to_vec()));
    }
}
