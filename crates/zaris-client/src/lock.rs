//! Lock calls: lock, unlock, status. Lock guards and elections will build on these.

use std::time::Duration;

use zaris_proto::v1::lock_client::LockClient;
use zaris_proto::v1::{
    LockRequest, LockResponse, LockStatusRequest, LockStatusResponse, UnlockRequest, UnlockResponse,
};

use crate::client::{CallSpec, Client, millis};
use crate::error::Error;

impl Client {
    /// Acquires lock `name` for `lease`. Without `wait`, a lock held by another lease answers
    /// BUSY; with `wait`, the lease queues and the call blocks up to `timeout` for its turn,
    /// answering HELD (with the fencing token) or QUEUED. The result is
    /// [`LockResponse::result`]. Idempotent per (name, lease), so retried freely.
    pub async fn lock(
        &self,
        name: impl Into<String>,
        lease: u64,
        wait: bool,
        timeout: Duration,
    ) -> Result<LockResponse, Error> {
        let timeout = if wait { timeout } else { Duration::ZERO };
        let request = LockRequest {
            name: name.into(),
            lease,
            wait,
            timeout_ms: millis(timeout),
        };
        let spec = CallSpec::idempotent("Lock").with_extra_wait(timeout);
        self.call(spec, request, |channel, req| async move {
            LockClient::new(channel).lock(req).await
        })
        .await
    }

    /// Releases lock `name` held by `lease` with fencing `token`, or with `token` 0 withdraws the
    /// lease from the wait queue. The result is [`UnlockResponse::result`]. Carries a request id,
    /// so retries are safe.
    pub async fn unlock(
        &self,
        name: impl Into<String>,
        lease: u64,
        token: u64,
    ) -> Result<UnlockResponse, Error> {
        let request = UnlockRequest {
            name: name.into(),
            lease,
            token,
            request_id: Some(self.next_request_id()),
        };
        self.call(
            CallSpec::idempotent("Unlock"),
            request,
            |channel, req| async move { LockClient::new(channel).unlock(req).await },
        )
        .await
    }

    /// Describes lock `name`: holder, token, number of waiters.
    pub async fn lock_status(&self, name: impl Into<String>) -> Result<LockStatusResponse, Error> {
        let request = LockStatusRequest { name: name.into() };
        self.call(
            CallSpec::idempotent("LockStatus"),
            request,
            |channel, req| async move { LockClient::new(channel).lock_status(req).await },
        )
        .await
    }
}
