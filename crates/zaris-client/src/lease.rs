//! Lease calls: grant, revoke, one-shot keepalive, time-to-live, listing.
//!
//! The background keepalive loop (one stream carrying many leases, safe deadlines computed from
//! send times) will live beside these; [`Client::keep_alive_once`] is its one-shot building block.

use std::time::Duration;

use futures::StreamExt;
use tonic::Status;
use zaris_proto::v1::lease_client::LeaseClient;
use zaris_proto::v1::{
    GrantResult, LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseListRequest, LeaseListResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};

use crate::client::{CallSpec, Client, millis, unexpected};
use crate::error::Error;

/// A granted lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The lease id.
    pub id: u64,
    /// The granted time to live, in milliseconds.
    pub ttl_ms: u64,
    /// The revision at which the lease was granted.
    pub revision: u64,
}

impl LeaseGrant {
    /// The granted time to live.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }
}

impl Client {
    /// Grants a lease with an id the server chooses. A TTL outside the cluster's bounds is an
    /// error (TTL_OUT_OF_RANGE), never clamped. Carries a request id, so retries are safe.
    pub async fn grant(&self, ttl: Duration) -> Result<LeaseGrant, Error> {
        match self.grant_request(0, ttl).await? {
            Some(grant) => Ok(grant),
            None => Err(unexpected(None, "ID_IN_USE for a grant without an id")),
        }
    }

    /// Grants a lease with the given non-zero id: `Ok(None)` if that id is live or was used before
    /// (lease ids are never reused, so a chosen id must be above every id granted so far); nothing
    /// was created then.
    pub async fn grant_with_id(&self, id: u64, ttl: Duration) -> Result<Option<LeaseGrant>, Error> {
        self.grant_request(id, ttl).await
    }

    async fn grant_request(&self, id: u64, ttl: Duration) -> Result<Option<LeaseGrant>, Error> {
        let request = LeaseGrantRequest {
            ttl_ms: millis(ttl),
            id,
            request_id: Some(self.next_request_id()),
        };
        let response = self
            .call(
                CallSpec::idempotent("Grant"),
                request,
                |channel, req| async move { LeaseClient::new(channel).grant(req).await },
            )
            .await?;
        match GrantResult::try_from(response.result) {
            Ok(GrantResult::Granted) => Ok(Some(LeaseGrant {
                id: response.id,
                ttl_ms: response.ttl_ms,
                revision: response.header.map_or(0, |h| h.revision),
            })),
            Ok(GrantResult::IdInUse) => Ok(None),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown grant result {}", response.result),
            )),
        }
    }

    /// Ends a lease now (its keys and locks go with it). [`LeaseRevokeResponse::result`] says
    /// REVOKED or NOT_FOUND. Carries a request id, so retries are safe.
    pub async fn revoke(&self, id: u64) -> Result<LeaseRevokeResponse, Error> {
        let request = LeaseRevokeRequest {
            id,
            request_id: Some(self.next_request_id()),
        };
        self.call(
            CallSpec::idempotent("Revoke"),
            request,
            |channel, req| async move { LeaseClient::new(channel).revoke(req).await },
        )
        .await
    }

    /// Renews `ids` once: opens a KeepAlive stream, sends one request, waits for the answer with
    /// the same `seq`, and closes the stream. Leases that no longer exist are listed in
    /// [`LeaseKeepAliveResponse::not_found`]. Retried freely (renewing twice is harmless); note
    /// that a retried renewal's TTL counts from the retry's send time.
    pub async fn keep_alive_once(
        &self,
        ids: impl IntoIterator<Item = u64>,
    ) -> Result<LeaseKeepAliveResponse, Error> {
        let request = LeaseKeepAliveRequest {
            ids: ids.into_iter().collect(),
            seq: self.next_keepalive_seq(),
        };
        self.call(
            CallSpec::idempotent("KeepAlive"),
            request,
            |channel, req| async move {
                let (metadata, extensions, message) = req.into_parts();
                let seq = message.seq;
                // Keep our half of the stream open until the answer arrives: the stream is closed by
                // dropping it once we have what we came for.
                let outbound =
                    futures::stream::once(async move { message }).chain(futures::stream::pending());
                let request = tonic::Request::from_parts(metadata, extensions, outbound);
                let response = LeaseClient::new(channel).keep_alive(request).await?;
                let (metadata, mut inbound, extensions) = response.into_parts();
                while let Some(ack) = inbound.message().await? {
                    if ack.seq == seq {
                        return Ok(tonic::Response::from_parts(metadata, ack, extensions));
                    }
                }
                Err(Status::unavailable(
                    "the KeepAlive stream ended before acknowledging the renewal",
                ))
            },
        )
        .await
    }

    /// Describes a lease (`found: false` if it does not exist); with `keys`, lists its keys.
    pub async fn time_to_live(
        &self,
        id: u64,
        keys: bool,
    ) -> Result<LeaseTimeToLiveResponse, Error> {
        let request = LeaseTimeToLiveRequest { id, keys };
        self.call(
            CallSpec::idempotent("TimeToLive"),
            request,
            |channel, req| async move { LeaseClient::new(channel).time_to_live(req).await },
        )
        .await
    }

    /// One page of leases with ids above `after_id` (0 = from the start), at most `limit` of them
    /// (0 = the server's page size). Page on with the last id returned while `more` is true.
    pub async fn leases(&self, after_id: u64, limit: u64) -> Result<LeaseListResponse, Error> {
        let request = LeaseListRequest { after_id, limit };
        self.call(
            CallSpec::idempotent("Leases"),
            request,
            |channel, req| async move { LeaseClient::new(channel).leases(req).await },
        )
        .await
    }
}
