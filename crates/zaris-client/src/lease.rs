//! Lease calls: grant, revoke, one-shot keepalive, time-to-live, listing.
//!
//! Continuous keepalives live beside these: [`crate::Lease`] handles (one background stream per
//! client, safe deadlines) and [`crate::KeepAliveStream`] (a stream the caller drives).

use std::time::Duration;

use futures::StreamExt;
use tonic::Status;
use zaris_proto::v1::{
    self as pb, GrantResult, LeaseGrantKey, LeaseGrantRequest, LeaseKeepAliveRequest,
    LeaseKeepAliveResponse, LeaseListRequest, LeaseRevokeRequest, LeaseTimeToLiveRequest,
    RevokeResult,
};
use zaris_types::{LeaseId, Revision};

use crate::client::lease_service;
use crate::client::{CallSpec, Client, header_revision, millis, unexpected};
use crate::error::Error;

/// A granted lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The lease id.
    pub id: LeaseId,
    /// The granted time to live.
    pub ttl: Duration,
    /// The revision at which the lease was granted.
    pub revision: Revision,
}

/// What a revoke found.
#[must_use = "a revoke may find the lease already gone"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The lease was ended by this call, at `revision`.
    Revoked {
        /// The revision of the revoke.
        revision: Revision,
    },
    /// The lease did not exist (already expired or revoked, or never granted).
    NotFound,
}

/// The answer to one keepalive request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Renewal {
    /// The renewed leases with the TTL each was renewed for, in request order.
    pub renewed: Vec<Renewed>,
    /// The requested leases that do not exist (they expired or were revoked).
    pub not_found: Vec<LeaseId>,
    /// The `seq` of the request answered (see [`KeepAliveStream::send`](crate::KeepAliveStream)).
    pub seq: u64,
    /// The revision of the Raft entry that applied the renewal (renewals batched together
    /// share it); 0 for a request that renewed nothing.
    pub revision: Revision,
}

/// One renewed lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    /// The lease id.
    pub id: LeaseId,
    /// The TTL it was renewed for, counted from when the renewal applied.
    pub ttl: Duration,
}

impl From<LeaseKeepAliveResponse> for Renewal {
    fn from(response: LeaseKeepAliveResponse) -> Self {
        Renewal {
            renewed: response
                .renewed
                .into_iter()
                .map(|r| Renewed {
                    id: LeaseId::new(r.id),
                    ttl: Duration::from_millis(r.ttl_ms),
                })
                .collect(),
            not_found: response.not_found.into_iter().map(LeaseId::new).collect(),
            seq: response.seq,
            revision: header_revision(response.header.as_ref()),
        }
    }
}

/// A lease as the cluster describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The lease id.
    pub id: LeaseId,
    /// The TTL it was granted with.
    pub ttl: Duration,
    /// The Raft leader's estimate of the time left, to the millisecond (zero = overdue, a revoke
    /// is pending). Informational: safety decisions use the client's own deadline.
    pub remaining_ttl: Duration,
    /// Revision at which it was granted.
    pub granted_revision: Revision,
    /// Revision of its last renewal (the grant's if never renewed).
    pub renewed_revision: Revision,
    /// Keys bound to it, ascending, if asked for.
    pub bound_keys: Vec<Vec<u8>>,
    /// True if `bound_keys` was cut at the server's listing limit.
    pub keys_truncated: bool,
    /// Locks it holds, ascending.
    pub locks_held: Vec<String>,
    /// Locks it waits for, ascending.
    pub locks_waiting: Vec<String>,
    /// The user that granted it; empty when it was granted anonymously (see `zaris auth`).
    pub owner: String,
    /// The revision this description reflects.
    pub revision: Revision,
}

/// A lease in a [`LeasePage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseSummary {
    /// The lease id.
    pub id: LeaseId,
    /// The TTL it was granted with.
    pub ttl: Duration,
    /// The Raft leader's estimate of the time left (zero: overdue, a revoke is pending).
    pub remaining_ttl: Duration,
    /// Keys bound to it.
    pub key_count: u64,
    /// Locks it holds.
    pub lock_count: u64,
    /// The revision that granted it.
    pub granted_revision: Revision,
    /// The revision of its last renewal (the grant's, if never renewed).
    pub renewed_revision: Revision,
}

impl LeaseSummary {
    fn from_wire(lease: pb::LeaseSummary) -> LeaseSummary {
        LeaseSummary {
            id: LeaseId::new(lease.id),
            ttl: Duration::from_millis(lease.ttl_ms),
            remaining_ttl: Duration::from_millis(lease.remaining_ttl_ms),
            key_count: lease.key_count,
            lock_count: lease.lock_count,
            granted_revision: Revision::new(lease.granted_revision),
            renewed_revision: Revision::new(lease.renewed_revision),
        }
    }
}

/// One page of the lease list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeasePage {
    /// Leases in ascending id order.
    pub leases: Vec<LeaseSummary>,
    /// More leases follow the last one: ask again with its id as `after_id`.
    pub more: bool,
    /// The revision this page reflects.
    pub revision: Revision,
}

impl Client {
    /// Grants a lease with an id the server chooses. A TTL outside the cluster's bounds is an
    /// error (TTL_OUT_OF_RANGE), never clamped. Carries a request id, so retries are safe.
    pub async fn grant(&self, ttl: Duration) -> Result<LeaseGrant, Error> {
        match self.grant_request(LeaseId::NONE, ttl).await? {
            Some(grant) => Ok(grant),
            None => Err(unexpected(None, "ID_IN_USE for a grant without an id")),
        }
    }

    /// Grants a lease with the given non-zero id: `Ok(None)` if that id is live or was used before
    /// (lease ids are never reused, so a chosen id must be above every id granted so far); nothing
    /// was created then.
    pub async fn grant_with_id(
        &self,
        id: LeaseId,
        ttl: Duration,
    ) -> Result<Option<LeaseGrant>, Error> {
        self.grant_request(id, ttl).await
    }

    /// Grants a lease (id chosen by the server) with `keys` written and bound to it in the same
    /// apply step: the lease and all its keys exist from the returned revision on, or nothing
    /// was created (a presence key in one call, with no window where the lease lives without
    /// it). A key bound to another lease moves to this one. At most `max_txn_ops` and
    /// `max_keys_per_lease` keys, none twice; sizes as for [`Client::put`]. Carries a request id,
    /// so retries are safe.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zaris_client::Error> {
    /// use std::time::Duration;
    /// use zaris_client::Client;
    ///
    /// let client = Client::connect(["127.0.0.1:7001"]).await?;
    /// let grant = client
    ///     .grant_with_keys(Duration::from_secs(10), [("workers/a", "10.0.0.7:8080")])
    ///     .await?;
    /// // Renew it with `client.keep_alive_once([grant.id])` or a `KeepAliveStream`.
    /// # let _ = grant;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn grant_with_keys<K, V>(
        &self,
        ttl: Duration,
        keys: impl IntoIterator<Item = (K, V)>,
    ) -> Result<LeaseGrant, Error>
    where
        K: Into<Vec<u8>>,
        V: Into<Vec<u8>>,
    {
        let keys = keys
            .into_iter()
            .map(|(key, value)| LeaseGrantKey {
                key: key.into(),
                value: value.into(),
            })
            .collect();
        match self.grant_call(LeaseId::NONE, ttl, keys).await? {
            Some(grant) => Ok(grant),
            None => Err(unexpected(None, "ID_IN_USE for a grant without an id")),
        }
    }

    async fn grant_request(&self, id: LeaseId, ttl: Duration) -> Result<Option<LeaseGrant>, Error> {
        self.grant_call(id, ttl, Vec::new()).await
    }

    async fn grant_call(
        &self,
        id: LeaseId,
        ttl: Duration,
        keys: Vec<LeaseGrantKey>,
    ) -> Result<Option<LeaseGrant>, Error> {
        let request = LeaseGrantRequest {
            ttl_ms: millis(ttl),
            id: id.get(),
            request_id: Some(self.next_request_id()),
            keys,
        };
        let response = self
            .call(
                CallSpec::idempotent("Grant"),
                request,
                |channel, req| async move { lease_service(channel).grant(req).await },
            )
            .await?;
        match GrantResult::try_from(response.result) {
            Ok(GrantResult::Granted) => Ok(Some(LeaseGrant {
                id: LeaseId::new(response.id),
                ttl: Duration::from_millis(response.ttl_ms),
                revision: header_revision(response.header.as_ref()),
            })),
            Ok(GrantResult::IdInUse) => Ok(None),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown grant result {}", response.result),
            )),
        }
    }

    /// Ends a lease now (its keys and locks go with it). A lease that no longer exists is
    /// [`Revocation::NotFound`], not an error: either way it is gone. Carries a request id, so
    /// retries are safe.
    pub async fn revoke(&self, id: LeaseId) -> Result<Revocation, Error> {
        let request = LeaseRevokeRequest {
            id: id.get(),
            request_id: Some(self.next_request_id()),
        };
        let response = self
            .call(
                CallSpec::idempotent("Revoke"),
                request,
                |channel, req| async move { lease_service(channel).revoke(req).await },
            )
            .await?;
        match RevokeResult::try_from(response.result) {
            Ok(RevokeResult::Revoked) => Ok(Revocation::Revoked {
                revision: header_revision(response.header.as_ref()),
            }),
            Ok(RevokeResult::NotFound) => Ok(Revocation::NotFound),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown revoke result {}", response.result),
            )),
        }
    }

    /// Renews `ids` once: opens a KeepAlive stream, sends one request, waits for the answer, and
    /// closes the stream. Leases that no longer exist are listed in [`Renewal::not_found`].
    /// Retried freely (renewing twice is harmless); note that a retried renewal's TTL counts from
    /// the retry's send time. To renew many leases continuously, use [`Client::lease`] handles
    /// or a [`KeepAliveStream`].
    pub async fn keep_alive_once(
        &self,
        ids: impl IntoIterator<Item = LeaseId>,
    ) -> Result<Renewal, Error> {
        let request = LeaseKeepAliveRequest {
            ids: ids.into_iter().map(LeaseId::get).collect(),
            seq: self.next_keepalive_seq(),
        };
        let response = self
            .call(
                CallSpec::idempotent("KeepAlive"),
                request,
                |channel, req| async move {
                    let (metadata, extensions, message) = req.into_parts();
                    let seq = message.seq;
                    // Keep our half of the stream open until the answer arrives: the stream is
                    // closed by dropping it once we have what we came for.
                    let outbound = futures::stream::once(async move { message })
                        .chain(futures::stream::pending());
                    let request = tonic::Request::from_parts(metadata, extensions, outbound);
                    let response = lease_service(channel).keep_alive(request).await?;
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
            .await?;
        Ok(Renewal::from(response))
    }

    /// Describes a lease (`None` if it does not exist); with `keys`, lists its keys.
    pub async fn time_to_live(&self, id: LeaseId, keys: bool) -> Result<Option<LeaseInfo>, Error> {
        let request = LeaseTimeToLiveRequest { id: id.get(), keys };
        let response = self
            .call(
                CallSpec::idempotent("TimeToLive"),
                request,
                |channel, req| async move { lease_service(channel).time_to_live(req).await },
            )
            .await?;
        Ok(response.found.then(|| LeaseInfo {
            id: LeaseId::new(response.id),
            ttl: Duration::from_millis(response.ttl_ms),
            remaining_ttl: Duration::from_millis(response.remaining_ttl_ms),
            granted_revision: Revision::new(response.granted_revision),
            renewed_revision: Revision::new(response.renewed_revision),
            bound_keys: response.bound_keys,
            keys_truncated: response.keys_truncated,
            locks_held: response.locks_held,
            locks_waiting: response.locks_waiting,
            owner: response.owner,
            revision: header_revision(response.header.as_ref()),
        }))
    }

    /// One page of leases with ids above `after_id` (0 = from the start), at most `limit` of them
    /// (0 = the server's page size). Page on with the last id returned while `more` is true.
    pub async fn leases(&self, after_id: LeaseId, limit: u64) -> Result<LeasePage, Error> {
        let request = LeaseListRequest {
            after_id: after_id.get(),
            limit,
        };
        let response = self
            .call(
                CallSpec::idempotent("Leases"),
                request,
                |channel, req| async move { lease_service(channel).leases(req).await },
            )
            .await?;
        Ok(LeasePage {
            leases: response
                .leases
                .into_iter()
                .map(LeaseSummary::from_wire)
                .collect(),
            more: response.more,
            revision: header_revision(response.header.as_ref()),
        })
    }
}
