//! What a workload asks of a system under test. Zaris and etcd each implement it over their own
//! client, one shared connection per system (HTTP/2 multiplexing every worker's calls), so the
//! workloads are the same code for both.

use std::time::Duration;

use futures::future::BoxFuture;

/// One system's client, cloned into every worker.
pub trait Target: Clone + Send + Sync + 'static {
    type Renewer: Renewer;

    /// Grants a lease of `ttl`; its id.
    fn grant(&self, ttl: Duration) -> BoxFuture<'static, anyhow::Result<u64>>;

    /// Reads `key` from the member the target talks to, serializably: no Raft round, no
    /// leadership check; the cost of a call and nothing else. Whether it exists does not matter.
    fn read_local(&self, key: String) -> BoxFuture<'static, anyhow::Result<()>>;

    /// Puts `value` at `key`, bound to `lease`.
    fn put(
        &self,
        key: String,
        value: Vec<u8>,
        lease: u64,
    ) -> BoxFuture<'static, anyhow::Result<()>>;

    /// Grants a lease of `ttl` with `value` at `key` bound to it, in one call where the API
    /// has one (Zaris's Grant with keys); else a grant and then a put, as here. The lease's id.
    fn grant_with_key(
        &self,
        ttl: Duration,
        key: String,
        value: Vec<u8>,
    ) -> BoxFuture<'static, anyhow::Result<u64>> {
        let target = self.clone();
        Box::pin(async move {
            let lease = target.grant(ttl).await?;
            target.put(key, value, lease).await?;
            Ok(lease)
        })
    }

    /// Acquires lock `name` for `lease` (waiting its turn), then releases it.
    fn lock_cycle(&self, name: String, lease: u64) -> BoxFuture<'static, anyhow::Result<()>>;

    /// Opens a KeepAlive stream on the leader.
    fn renewer(&self) -> BoxFuture<'static, anyhow::Result<Self::Renewer>>;
}

/// A KeepAlive stream driven by one worker: renewals are sent ahead of their answers, and the
/// answers come back in the order sent.
pub trait Renewer: Send + 'static {
    /// Sends a renewal of `lease`.
    fn send(&mut self, lease: u64) -> BoxFuture<'_, anyhow::Result<()>>;

    /// Waits for the oldest unanswered renewal's answer; an error if it did not renew.
    fn next(&mut self) -> BoxFuture<'_, anyhow::Result<()>>;
}
