//! Key-value calls: range, put, delete, txn. Each answers with a domain type; a write that did
//! not happen (a failed guard, a missing lease) is an [`Error`], never a value to decode.

use zaris_proto::v1::{
    self as pb, DeleteRangeRequest, DeleteResult, PutRequest, PutResult, RangeRequest, TxnRequest,
    TxnResult, txn_op, txn_op_response,
};
use zaris_types::{FencingToken, LeaseId, Revision};

use crate::client::kv_service;
use crate::client::{CallSpec, Client, header_revision, unexpected};
use crate::error::Error;

/// A stored key and its metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// Revision of the put that created this incarnation of the key.
    pub create_revision: Revision,
    /// Revision of the key's last change (in a delete event, of the delete).
    pub mod_revision: Revision,
    /// Puts since the key was created, from 1 (0 in a delete event).
    pub version: u64,
    /// The lease the key is bound to, if any: the key is deleted when that lease ends.
    pub lease: Option<LeaseId>,
}

impl From<pb::KeyValue> for KeyValue {
    fn from(kv: pb::KeyValue) -> KeyValue {
        KeyValue {
            key: kv.key,
            value: kv.value,
            create_revision: Revision::new(kv.create_revision),
            mod_revision: Revision::new(kv.mod_revision),
            version: kv.version,
            lease: LeaseId::new(kv.lease).some(),
        }
    }
}

/// A write's condition: it applies only while lock `lock` is held with fencing token `token`
/// (see [`LockGuard::fence`](crate::LockGuard::fence)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The lock's name.
    pub lock: String,
    /// The token the holder acquired it with.
    pub token: FencingToken,
}

impl From<Fence> for pb::Guard {
    /// The wire form, for a transaction's `guard` ([`Client::txn`] takes the wire request).
    fn from(fence: Fence) -> pb::Guard {
        pb::Guard {
            lock_name: fence.lock,
            token: fence.token.get(),
        }
    }
}

/// A read: the keys found, in ascending key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Range {
    /// The key-value pairs read (at most the requested or the server's page size).
    pub kvs: Vec<KeyValue>,
    /// More keys matched than were returned: read on from after the last key.
    pub more: bool,
    /// Number of keys that matched.
    pub count: u64,
    /// The revision the read observed.
    pub revision: Revision,
}

/// A put that was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// The revision of the write.
    pub revision: Revision,
    /// The previous pair, if [`PutOptions::prev_kv`] asked for it and the key existed.
    pub prev_kv: Option<KeyValue>,
}

/// A delete that was applied (possibly deleting nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deleted {
    /// The revision the delete applied at.
    pub revision: Revision,
    /// How many keys were deleted.
    pub deleted: u64,
    /// The deleted pairs, if [`DeleteOptions::prev_kv`] asked for them.
    pub prev_kvs: Vec<KeyValue>,
}

/// A transaction that was applied: which branch ran, and each operation's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxnOutcome {
    /// True if every compare held and the success branch was applied; false if the failure
    /// branch was.
    pub succeeded: bool,
    /// The revision the transaction applied at.
    pub revision: Revision,
    /// One result per operation of the branch that ran, in order.
    pub results: Vec<TxnOpResult>,
}

/// What one operation of the transaction's branch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOpResult {
    /// A put (in a transaction that applied, every put did), with the previous pair if asked.
    Put { prev_kv: Option<KeyValue> },
    /// A delete: how many keys, and the deleted pairs if asked.
    Deleted {
        deleted: u64,
        prev_kvs: Vec<KeyValue>,
    },
    /// A read, at the transaction's revision.
    Range(Range),
}

impl TxnOpResult {
    fn from_wire(op: pb::TxnOpResponse, revision: Revision) -> Option<TxnOpResult> {
        Some(match op.response? {
            txn_op_response::Response::Put(put) => TxnOpResult::Put {
                prev_kv: put.prev_kv.map(KeyValue::from),
            },
            txn_op_response::Response::DeleteRange(delete) => TxnOpResult::Deleted {
                deleted: delete.deleted,
                prev_kvs: delete.prev_kvs.into_iter().map(KeyValue::from).collect(),
            },
            txn_op_response::Response::Range(range) => TxnOpResult::Range(Range {
                kvs: range.kvs.into_iter().map(KeyValue::from).collect(),
                more: range.more,
                count: range.count,
                revision,
            }),
        })
    }
}

/// Options of [`Client::put`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Bind the key to this lease; `None` = unbound (a put without a lease unbinds the key).
    pub lease: Option<LeaseId>,
    /// Return the previous key-value pair in [`Written::prev_kv`].
    pub prev_kv: bool,
    /// Apply only while this lock is held with this fencing token.
    pub guard: Option<Fence>,
}

/// Options of [`Client::range`]. The default reads exactly one key, linearizably.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeOptions {
    /// Treat the key as a prefix (an empty key with `prefix` selects every key).
    pub prefix: bool,
    /// Read the range `[key, range_end)` (`[0x00]` = to the last key). Exclusive with `prefix`.
    pub range_end: Option<Vec<u8>>,
    /// At most this many keys; `None` = the server's page size.
    pub limit: Option<u64>,
    /// Allow a stale read from whichever member answers.
    pub serializable: bool,
}

/// Options of [`Client::delete`]. The default deletes exactly one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Treat the key as a prefix.
    pub prefix: bool,
    /// Return the deleted pairs in [`Deleted::prev_kvs`].
    pub prev_kv: bool,
    /// Apply only while this lock is held with this fencing token.
    pub guard: Option<Fence>,
}

impl Client {
    /// Reads one key, a range or a prefix. Retried freely (a read).
    pub async fn range(
        &self,
        key: impl Into<Vec<u8>>,
        options: RangeOptions,
    ) -> Result<Range, Error> {
        let request = RangeRequest {
            key: key.into(),
            range_end: options.range_end.unwrap_or_default(),
            prefix: options.prefix,
            limit: options.limit.unwrap_or(0),
            serializable: options.serializable,
            ..RangeRequest::default()
        };
        let response = self
            .call(
                CallSpec::idempotent("Range"),
                request,
                |channel, req| async move { kv_service(channel).range(req).await },
            )
            .await?;
        Ok(Range {
            kvs: response.kvs.into_iter().map(KeyValue::from).collect(),
            more: response.more,
            count: response.count,
            revision: header_revision(response.header.as_ref()),
        })
    }

    /// Reads one key, linearizably: `None` if it does not exist.
    pub async fn get(&self, key: impl Into<Vec<u8>>) -> Result<Option<KeyValue>, Error> {
        let range = self.range(key, RangeOptions::default()).await?;
        Ok(range.kvs.into_iter().next())
    }

    /// Writes one key. A guard that no longer holds is [`Error::NotHeld`], a lease that does not
    /// exist [`Error::LeaseNotFound`]; nothing was written then. Carries a request id, so retries
    /// are safe.
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: PutOptions,
    ) -> Result<Written, Error> {
        let guard = options.guard.clone().map(pb::Guard::from);
        let lease = options.lease.unwrap_or(LeaseId::NONE);
        let request = PutRequest {
            key: key.into(),
            value: value.into(),
            lease: lease.get(),
            prev_kv: options.prev_kv,
            guard: guard.clone(),
            request_id: Some(self.next_request_id()),
        };
        let response = self
            .call(
                CallSpec::idempotent("Put"),
                request,
                |channel, req| async move { kv_service(channel).put(req).await },
            )
            .await?;
        match PutResult::try_from(response.result) {
            Ok(PutResult::Ok) => Ok(Written {
                revision: header_revision(response.header.as_ref()),
                prev_kv: response.prev_kv.map(KeyValue::from),
            }),
            Ok(PutResult::GuardFailed) => Err(not_held(guard)),
            Ok(PutResult::LeaseNotFound) => Err(Error::LeaseNotFound { id: lease }),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown put result {}", response.result),
            )),
        }
    }

    /// Deletes one key or a prefix. A guard that no longer holds is [`Error::NotHeld`]. Carries a
    /// request id, so retries are safe.
    pub async fn delete(
        &self,
        key: impl Into<Vec<u8>>,
        options: DeleteOptions,
    ) -> Result<Deleted, Error> {
        let request = DeleteRangeRequest {
            key: key.into(),
            prefix: options.prefix,
            prev_kv: options.prev_kv,
            guard: options.guard.map(pb::Guard::from),
            // Made by delete_range, as its own: re-dated if refused as forgotten.
            request_id: None,
            ..DeleteRangeRequest::default()
        };
        self.delete_range(request).await
    }

    /// Sends a DeleteRange as given (for a `range_end`), adding a request id if it has none.
    pub async fn delete_range(&self, mut request: DeleteRangeRequest) -> Result<Deleted, Error> {
        let spec = CallSpec::idempotent("DeleteRange");
        let spec = if request.request_id.is_none() {
            request.request_id = Some(self.next_request_id());
            spec
        } else {
            spec.with_callers_id()
        };
        let guard = request.guard.clone();
        let response = self
            .call(spec, request, |channel, req| async move {
                kv_service(channel).delete_range(req).await
            })
            .await?;
        match DeleteResult::try_from(response.result) {
            Ok(DeleteResult::Ok) => Ok(Deleted {
                revision: header_revision(response.header.as_ref()),
                deleted: response.deleted,
                prev_kvs: response.prev_kvs.into_iter().map(KeyValue::from).collect(),
            }),
            Ok(DeleteResult::GuardFailed) => Err(not_held(guard)),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown delete result {}", response.result),
            )),
        }
    }

    /// Runs a compare-and-set transaction, adding a request id if it has none (so retries are
    /// safe). Which branch applied is [`TxnOutcome::succeeded`]; a guard that no longer holds is
    /// [`Error::NotHeld`] and a Put naming a missing lease [`Error::LeaseNotFound`] (nothing was
    /// applied then).
    pub async fn txn(&self, mut request: TxnRequest) -> Result<TxnOutcome, Error> {
        let spec = CallSpec::idempotent("Txn");
        let spec = if request.request_id.is_none() {
            request.request_id = Some(self.next_request_id());
            spec
        } else {
            spec.with_callers_id()
        };
        let guard = request.guard.clone();
        let lease = sole_lease(&request);
        let response = self
            .call(spec, request, |channel, req| async move {
                kv_service(channel).txn(req).await
            })
            .await?;
        let succeeded = match TxnResult::try_from(response.result) {
            Ok(TxnResult::CompareSucceeded) => true,
            Ok(TxnResult::CompareFailed) => false,
            Ok(TxnResult::GuardFailed) => return Err(not_held(guard)),
            Ok(TxnResult::LeaseNotFound) => {
                return Err(Error::LeaseNotFound { id: lease });
            }
            _ => {
                return Err(unexpected(
                    response.header.as_ref(),
                    format!("unknown txn result {}", response.result),
                ));
            }
        };
        let revision = header_revision(response.header.as_ref());
        let mut results = Vec::with_capacity(response.responses.len());
        for op in response.responses {
            match TxnOpResult::from_wire(op, revision) {
                Some(result) => results.push(result),
                None => {
                    return Err(unexpected(
                        response.header.as_ref(),
                        "a transaction operation without a result",
                    ));
                }
            }
        }
        Ok(TxnOutcome {
            succeeded,
            revision,
            results,
        })
    }
}

/// The refusal of a write whose guard no longer holds.
fn not_held(guard: Option<pb::Guard>) -> Error {
    let guard = guard.unwrap_or_default();
    Error::NotHeld {
        lock: guard.lock_name,
        token: FencingToken::new(guard.token),
    }
}

/// The lease a transaction's Puts name, if they all name the same one (`NONE` otherwise): the
/// server says only that some lease was missing.
fn sole_lease(request: &TxnRequest) -> LeaseId {
    let mut leases = request
        .success
        .iter()
        .chain(&request.failure)
        .filter_map(|op| match &op.op {
            Some(txn_op::Op::Put(put)) if put.lease != 0 => Some(put.lease),
            _ => None,
        });
    match leases.next() {
        Some(first) if leases.all(|other| other == first) => LeaseId::new(first),
        _ => LeaseId::NONE,
    }
}
