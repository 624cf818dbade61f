//! Backups: a consistent copy of the cluster's whole state, streamed from the Raft leader.

use sha2::{Digest, Sha256};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use zaris_proto::v1::cluster_client::ClusterClient;
use zaris_proto::v1::{self as pb, ResponseHeader, SnapshotRequest};
use zaris_types::Revision;

use crate::client::{CallSpec, Client, HasHeader};
use crate::error::Error;

/// What [`Client::snapshot`] wrote, as the serving member described it (and this client checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSaved {
    /// The member that sent it (the Raft leader at the time).
    pub member_id: u64,
    /// The cluster it came from.
    pub cluster_id: u64,
    /// Every write at or below this revision is in the snapshot, none above it.
    pub revision: Revision,
    /// Bytes written.
    pub size_bytes: u64,
    /// SHA-256 of the bytes written, checked against the member's.
    pub sha256: [u8; 32],
    /// Version of the state encoding (the data's first byte).
    pub format_version: u32,
    pub lease_count: u64,
    pub key_count: u64,
}

/// A snapshot stream whose first message (header and description) has arrived.
struct Opened {
    first: pb::SnapshotChunk,
    rest: tonic::Streaming<pb::SnapshotChunk>,
}

impl HasHeader for Opened {
    fn header(&self) -> Option<&ResponseHeader> {
        self.first.header.as_ref()
    }
}

impl Client {
    /// Writes a consistent snapshot of the whole state to `out`: every write acknowledged before
    /// the call, taken online by the Raft leader (reached through redirects like any call). The
    /// bytes are checked against the length and SHA-256 the member announced; on an error, what
    /// was written to `out` is incomplete and must be discarded. `zaris snapshot save` adds a
    /// file header and writes it atomically.
    ///
    /// Opening the stream retries like a read, within the client's timeout, and one attempt may
    /// take all of it (the leader encodes the whole state before it answers: give a large state
    /// a longer timeout). Once data flows, each chunk must arrive within the timeout, and the
    /// call is not retried.
    pub async fn snapshot<W: AsyncWrite + Unpin>(
        &self,
        out: &mut W,
    ) -> Result<SnapshotSaved, Error> {
        let opened = self
            .call(
                CallSpec::idempotent("Snapshot").with_whole_budget(),
                SnapshotRequest {},
                |channel, req| async move {
                    let mut rest = ClusterClient::new(channel)
                        .snapshot(req)
                        .await?
                        .into_inner();
                    let first = rest.message().await?.ok_or_else(|| {
                        tonic::Status::unavailable(
                            "the snapshot stream ended before its first message",
                        )
                    })?;
                    Ok(tonic::Response::new(Opened { first, rest }))
                },
            )
            .await?;
        let Opened { first, mut rest } = opened;
        let header = first.header.unwrap_or_default();
        let source = format!("member {}", header.member_id);
        let protocol = |reason: String| Error::Protocol {
            endpoint: source.clone(),
            reason,
        };
        let info = first.info.ok_or_else(|| {
            protocol("the snapshot stream's first message has no description".into())
        })?;
        let expected: [u8; 32] = info
            .sha256
            .as_slice()
            .try_into()
            .map_err(|_| protocol(format!("a SHA-256 of {} bytes", info.sha256.len())))?;
        let chunk_timeout = self.options().timeout;
        let mut hasher = Sha256::new();
        let mut written: u64 = 0;
        loop {
            let next = tokio::time::timeout(chunk_timeout, rest.message())
                .await
                .map_err(|_| protocol(format!("no snapshot data for {chunk_timeout:?}")))?;
            let chunk = match next {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(status) => {
                    return Err(crate::error::RpcError::from_status(&status, source.clone()).into());
                }
            };
            written = written.saturating_add(chunk.data.len() as u64);
            if written > info.size_bytes {
                return Err(protocol(format!(
                    "more snapshot data than the {} bytes announced",
                    info.size_bytes
                )));
            }
            hasher.update(&chunk.data);
            out.write_all(&chunk.data)
                .await
                .map_err(|source| Error::Output { source })?;
        }
        if written != info.size_bytes {
            return Err(protocol(format!(
                "the snapshot stream ended after {written} of {} bytes",
                info.size_bytes
            )));
        }
        let sha256: [u8; 32] = hasher.finalize().into();
        if sha256 != expected {
            return Err(protocol(
                "the snapshot data does not match its SHA-256".into(),
            ));
        }
        out.flush()
            .await
            .map_err(|source| Error::Output { source })?;
        Ok(SnapshotSaved {
            member_id: header.member_id,
            cluster_id: header.cluster_id,
            revision: Revision::new(info.revision),
            size_bytes: written,
            sha256,
            format_version: info.format_version,
            lease_count: info.lease_count,
            key_count: info.key_count,
        })
    }
}
