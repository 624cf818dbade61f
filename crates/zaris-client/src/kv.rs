//! Key-value calls: range, put, delete, txn. Each answers with a domain type; a write that did
//! not happen (a failed guard, a missing lease) is an [`Error`], never a value to decode.

use zaris_proto::v1::kv_client::KvClient;
use zaris_proto::v1::{
    DeleteRangeRequest, DeleteResult, Guard, KeyValue, PutRequest, PutResult, RangeRequest,
    TxnOpResponse, TxnRequest, TxnResult, txn_op,
};
use zaris_types::{FencingToken, LeaseId, Revision};

use crate::client::{CallSpec, Client, unexpected};
use crate::error::Error;

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
    pub responses: Vec<TxnOpResponse>,
}

/// Options of [`Client::put`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Bind the key to this lease; `None` = unbound (a put without a lease unbinds the key).
    pub lease: Option<LeaseId>,
    /// Return the previous key-value pair in [`PutResponse::prev_kv`].
    pub prev_kv: bool,
    /// Apply only while this lock is held with this fencing token.
    pub guard: Option<Guard>,
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
    /// Return the deleted pairs in [`DeleteRangeResponse::prev_kvs`].
    pub prev_kv: bool,
    /// Apply only while this lock is held with this fencing token.
    pub guard: Option<Guard>,
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
                |channel, req| async move { KvClient::new(channel).range(req).await },
            )
            .await?;
        Ok(Range {
            kvs: response.kvs,
            more: response.more,
            count: response.count,
            revision: response
                .header
                .map_or(Revision::ZERO, |h| Revision::new(h.revision)),
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
        let guard = options.guard.clone();
        let lease = options.lease.unwrap_or(LeaseId::NONE);
        let request = PutRequest {
            key: key.into(),
            value: value.into(),
            lease: (options.lease.unwrap_or(LeaseId::NONE)).get(),
            prev_kv: options.prev_kv,
            guard: options.guard,
            request_id: Some(self.next_request_id()),
        };
        let response = self
            .call(
                CallSpec::idempotent("Put"),
                request,
                |channel, req| async move { KvClient::new(channel).put(req).await },
            )
            .await?;
        match PutResult::try_from(response.result) {
            Ok(PutResult::Ok) => Ok(Written {
                revision: response
                    .header
                    .map_or(Revision::ZERO, |h| Revision::new(h.revision)),
                prev_kv: response.prev_kv,
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
            guard: options.guard,
            request_id: Some(self.next_request_id()),
            ..DeleteRangeRequest::default()
        };
        self.delete_range(request).await
    }

    /// Sends a DeleteRange as given (for a `range_end`), adding a request id if it has none.
    pub async fn delete_range(&self, mut request: DeleteRangeRequest) -> Result<Deleted, Error> {
        if request.request_id.is_none() {
            request.request_id = Some(self.next_request_id());
        }
        let guard = request.guard.clone();
        let response = self
            .call(
                CallSpec::idempotent("DeleteRange"),
                request,
                |channel, req| async move { KvClient::new(channel).delete_range(req).await },
            )
            .await?;
        match DeleteResult::try_from(response.result) {
            Ok(DeleteResult::Ok) => Ok(Deleted {
                revision: response
                    .header
                    .map_or(Revision::ZERO, |h| Revision::new(h.revision)),
                deleted: response.deleted,
                prev_kvs: response.prev_kvs,
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
        if request.request_id.is_none() {
            request.request_id = Some(self.next_request_id());
        }
        let guard = request.guard.clone();
        let lease = sole_lease(&request);
        let response = self
            .call(
                CallSpec::idempotent("Txn"),
                request,
                |channel, req| async move { KvClient::new(channel).txn(req).await },
            )
            .await?;
        let succeeded = match TxnResult::try_from(response.result) {
            Ok(TxnResult::CompareSucceeded) => true,
            Ok(TxnResult::CompareFailed) => false,
            Ok(TxnResult::GuardFailed) => return Err(not_held(guard)),
            Ok(TxnResult::LeaseNotFound) => {
                return Err(Error::LeaseNotFound {
                    id: LeaseId::new(lease),
                });
            }
            _ => {
                return Err(unexpected(
                    response.header.as_ref(),
                    format!("unknown txn result {}", response.result),
                ));
            }
        };
        Ok(TxnOutcome {
            succeeded,
            revision: response
                .header
                .map_or(Revision::ZERO, |h| Revision::new(h.revision)),
            responses: response.responses,
        })
    }
}

/// The refusal of a write whose guard no longer holds.
fn not_held(guard: Option<Guard>) -> Error {
    let guard = guard.unwrap_or_default();
    Error::NotHeld {
        lock: guard.lock_name,
        token: FencingToken::new(guard.token),
    }
}

/// The lease a transaction's Puts name, if they all name the same one (0 otherwise): the server
/// says only that some lease was missing.
fn sole_lease(request: &TxnRequest) -> u64 {
    let mut leases = request
        .success
        .iter()
        .chain(&request.failure)
        .filter_map(|op| match &op.op {
            Some(txn_op::Op::Put(put)) if put.lease != 0 => Some(put.lease),
            _ => None,
        });
    match leases.next() {
        Some(first) if leases.all(|other| other == first) => first,
        _ => 0,
    }
}
