//! Zaris under the comparison: a 3-node cluster of `zaris serve` processes at the default timings
//! (heartbeat 100 ms, election timeout 1 s), driven through the Rust client.

use std::path::Path;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use zaris_client::{
    Client, ClientOptions, KeepAliveStream, LeaseId, LockOutcome, PutOptions, RangeOptions,
    UnlockOutcome,
};
use zaris_testkit::{Serve, ServeProcess, grow_cluster};

use super::target::{Renewer, Target};
use crate::{CLIENT_TIMEOUT, READY_TIMEOUT};

/// How long one lock call waits for its turn.
const LOCK_WAIT: Duration = Duration::from_secs(10);

pub struct ZarisCluster {
    nodes: Vec<ServeProcess>,
}

impl ZarisCluster {
    pub async fn start(zaris: &Path, root: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root)?;
        let nodes = grow_cluster(3, |id| {
            Serve::new(zaris, id, root).ready_timeout(READY_TIMEOUT)
        })
        .await?;
        Ok(ZarisCluster { nodes })
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.endpoint().to_owned()).collect()
    }

    pub async fn target(&self) -> anyhow::Result<ZarisTarget> {
        let options = ClientOptions::default().with_timeout(CLIENT_TIMEOUT);
        Ok(ZarisTarget(
            Client::connect_with(self.endpoints(), options).await?,
        ))
    }

    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(ServeProcess::pid).collect()
    }

    pub async fn stop(mut self) {
        for node in &mut self.nodes {
            node.kill().await;
        }
    }
}

#[derive(Clone, Debug)]
pub struct ZarisTarget(pub(crate) Client);

impl Target for ZarisTarget {
    type Renewer = ZarisRenewer;

    fn grant(&self, ttl: Duration) -> BoxFuture<'static, anyhow::Result<u64>> {
        let client = self.0.clone();
        async move { Ok(client.grant(ttl).await?.id.get()) }.boxed()
    }

    fn read_local(&self, key: String) -> BoxFuture<'static, anyhow::Result<()>> {
        let client = self.0.clone();
        async move {
            let options = RangeOptions {
                serializable: true,
                ..RangeOptions::default()
            };
            client.range(key, options).await?;
            Ok(())
        }
        .boxed()
    }

    fn put(
        &self,
        key: String,
        value: Vec<u8>,
        lease: u64,
    ) -> BoxFuture<'static, anyhow::Result<()>> {
        let client = self.0.clone();
        async move {
            let options = PutOptions {
                lease: (lease != 0).then(|| LeaseId::new(lease)),
                ..PutOptions::default()
            };
            client.put(key, value, options).await?;
            Ok(())
        }
        .boxed()
    }

    fn grant_with_key(
        &self,
        ttl: Duration,
        key: String,
        value: Vec<u8>,
    ) -> BoxFuture<'static, anyhow::Result<u64>> {
        let client = self.0.clone();
        async move { Ok(client.grant_with_keys(ttl, [(key, value)]).await?.id.get()) }.boxed()
    }

    fn lock_cycle(&self, name: String, lease: u64) -> BoxFuture<'static, anyhow::Result<()>> {
        let client = self.0.clone();
        async move {
            let lease = LeaseId::new(lease);
            match client.lock(name.clone(), lease, true, LOCK_WAIT).await? {
                LockOutcome::Held { token } => match client.unlock(&name, lease, token).await? {
                    UnlockOutcome::Released => Ok(()),
                    other => anyhow::bail!("lock {name} not released: {other:?}"),
                },
                other => anyhow::bail!("lock {name} not acquired: {other:?}"),
            }
        }
        .boxed()
    }

    fn renewer(&self) -> BoxFuture<'static, anyhow::Result<ZarisRenewer>> {
        let client = self.0.clone();
        async move { Ok(ZarisRenewer(client.keep_alive_stream().await?)) }.boxed()
    }
}

#[derive(Debug)]
pub struct ZarisRenewer(KeepAliveStream);

impl Renewer for ZarisRenewer {
    fn send(&mut self, lease: u64) -> BoxFuture<'_, anyhow::Result<()>> {
        async move {
            self.0.send([LeaseId::new(lease)]).await?;
            Ok(())
        }
        .boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, anyhow::Result<()>> {
        async move {
            let answer = self.0.next().await?;
            anyhow::ensure!(!answer.renewed.is_empty(), "lease not renewed: {answer:?}");
            Ok(())
        }
        .boxed()
    }
}
