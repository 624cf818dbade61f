//! Key-value calls: range, put, delete, txn.

use zaris_proto::v1::kv_client::KvClient;
use zaris_proto::v1::{
    DeleteRangeRequest, DeleteRangeResponse, Guard, KeyValue, PutRequest, PutResponse,
    RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};

use crate::client::{CallSpec, Client};
use crate::error::Error;

/// Options of [`Client::put`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Bind the key to this lease; `None` = unbound (a put without a lease unbinds the key).
    pub lease: Option<u64>,
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
    ) -> Result<RangeResponse, Error> {
        let request = RangeRequest {
            key: key.into(),
            range_end: options.range_end.unwrap_or_default(),
            prefix: options.prefix,
            limit: options.limit.unwrap_or(0),
            serializable: options.serializable,
            ..RangeRequest::default()
        };
        self.call(
            CallSpec::idempotent("Range"),
            request,
            |channel, req| async move { KvClient::new(channel).range(req).await },
        )
        .await
    }

    /// Reads one key, linearizably: `None` if it does not exist.
    pub async fn get(&self, key: impl Into<Vec<u8>>) -> Result<Option<KeyValue>, Error> {
        let response = self.range(key, RangeOptions::default()).await?;
        Ok(response.kvs.into_iter().next())
    }

    /// Writes one key. The outcome ([`PutResponse::result`]: OK, GUARD_FAILED, LEASE_NOT_FOUND)
    /// is a value, not an error. Carries a request id, so retries are safe.
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: PutOptions,
    ) -> Result<PutResponse, Error> {
        let request = PutRequest {
            key: key.into(),
            value: value.into(),
            lease: options.lease.unwrap_or(0),
            prev_kv: options.prev_kv,
            guard: options.guard,
            request_id: Some(self.next_request_id()),
        };
        self.call(
            CallSpec::idempotent("Put"),
            request,
            |channel, req| async move { KvClient::new(channel).put(req).await },
        )
        .await
    }

    /// Deletes one key or a prefix. Carries a request id, so retries are safe.
    pub async fn delete(
        &self,
        key: impl Into<Vec<u8>>,
        options: DeleteOptions,
    ) -> Result<DeleteRangeResponse, Error> {
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

    /// Sends a DeleteRange as given, adding a request id if it has none.
    pub async fn delete_range(
        &self,
        mut request: DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, Error> {
        if request.request_id.is_none() {
            request.request_id = Some(self.next_request_id());
        }
        self.call(
            CallSpec::idempotent("DeleteRange"),
            request,
            |channel, req| async move { KvClient::new(channel).delete_range(req).await },
        )
        .await
    }

    /// Runs a compare-and-set transaction, adding a request id if it has none (so retries are
    /// safe). Which branch applied is [`TxnResponse::result`].
    pub async fn txn(&self, mut request: TxnRequest) -> Result<TxnResponse, Error> {
        if request.request_id.is_none() {
            request.request_id = Some(self.next_request_id());
        }
        self.call(
            CallSpec::idempotent("Txn"),
            request,
            |channel, req| async move { KvClient::new(channel).txn(req).await },
        )
        .await
    }
}
