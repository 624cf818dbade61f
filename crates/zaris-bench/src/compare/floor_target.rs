//! The replication floor's gRPC leader (`crate::floor`) as a target of the comparison's own
//! workloads: each Raft round a Zaris request takes is one group-committed round of the floor
//! (a grant, a put: one; a lock cycle: two, acquire and release), a serializable read is the call
//! alone, and a KeepAlive stream is a stream whose every message is committed. What the
//! workload would cost if a Raft round through gRPC cost no more than the bare pipeline.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;

use super::target::{Renewer, Target};
use crate::floor::ENTRY_BYTES;
use crate::proto::floor as proto;
use proto::floor_client::FloorClient;

/// One connection to the floor's leader, shared by every worker (as for Zaris and etcd).
#[derive(Clone, Debug)]
pub struct FloorTarget(pub Channel);

/// What a request would carry, cut to a floor entry's size (a put's key and value fit).
fn entry(parts: &[&[u8]]) -> proto::Entry {
    let mut data: Vec<u8> = parts.concat();
    data.truncate(ENTRY_BYTES);
    if data.is_empty() {
        data.push(0);
    }
    proto::Entry { data }
}

impl FloorTarget {
    fn commit(&self, entry: proto::Entry) -> BoxFuture<'static, anyhow::Result<u64>> {
        let mut client = FloorClient::new(self.0.clone());
        async move { Ok(client.commit(entry).await?.into_inner().id) }.boxed()
    }
}

impl Target for FloorTarget {
    type Renewer = FloorRenewer;

    fn grant(&self, ttl: Duration) -> BoxFuture<'static, anyhow::Result<u64>> {
        self.commit(entry(&[&ttl.as_millis().to_le_bytes()]))
    }

    fn read_local(&self, key: String) -> BoxFuture<'static, anyhow::Result<()>> {
        let mut client = FloorClient::new(self.0.clone());
        async move {
            client.read(entry(&[key.as_bytes()])).await?;
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
        let committed = self.commit(entry(&[key.as_bytes(), &value, &lease.to_le_bytes()]));
        async move { committed.await.map(drop) }.boxed()
    }

    fn lock_cycle(&self, name: String, lease: u64) -> BoxFuture<'static, anyhow::Result<()>> {
        let target = self.clone();
        async move {
            for step in [&b"lock"[..], b"unlock"] {
                target
                    .commit(entry(&[step, name.as_bytes(), &lease.to_le_bytes()]))
                    .await?;
            }
            Ok(())
        }
        .boxed()
    }

    fn renewer(&self) -> BoxFuture<'static, anyhow::Result<FloorRenewer>> {
        let mut client = FloorClient::new(self.0.clone());
        let (outbound, entries) = mpsc::channel(1_024);
        async move {
            let inbound = client
                .renew(ReceiverStream::new(entries))
                .await?
                .into_inner();
            Ok(FloorRenewer { outbound, inbound })
        }
        .boxed()
    }
}

pub struct FloorRenewer {
    outbound: mpsc::Sender<proto::Entry>,
    inbound: Streaming<proto::Ack>,
}

impl Renewer for FloorRenewer {
    fn send(&mut self, lease: u64) -> BoxFuture<'_, anyhow::Result<()>> {
        async move {
            self.outbound
                .send(entry(&[&lease.to_le_bytes()]))
                .await
                .map_err(|_| anyhow::anyhow!("the floor's Renew stream ended"))
        }
        .boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, anyhow::Result<()>> {
        async move {
            match self.inbound.message().await? {
                Some(_) => Ok(()),
                None => anyhow::bail!("the floor's Renew stream ended"),
            }
        }
        .boxed()
    }
}
