//! [`Lease`]: a lease kept alive in the background, with the state a holder may rely on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::lease::Revocation;
use tokio::sync::watch;
use tokio::time::Instant;
use zaris_types::LeaseId;

use crate::client::Client;
use crate::error::Error;
use crate::keepalive::{Command, ExpiredReason, LeaseState, Shared, Timing};
use crate::queue_place::Claims;

/// A lease this client keeps alive until it is revoked, dropped, or lost.
///
/// Made by [`Client::lease`]. Renewals ride on the client's one background KeepAlive stream,
/// about every TTL/3, and follow the Raft leader across elections. What the holder may rely on is
/// [`Lease::is_valid`]: true only before the **safe deadline**, computed from the send time of the
/// last acknowledged renewal minus [`ClientOptions::drift_permille`](crate::ClientOptions) of the
/// TTL, a moment before which the cluster cannot have expired the lease. [`Lease::subscribe`]
/// reports `Valid → Jeopardy → Expired`.
///
/// Clones share the lease. When the last clone is dropped the lease is revoked in the background
/// (best effort: if that fails the cluster expires it after its TTL); [`Lease::revoke`] does it
/// now and reports the outcome.
///
/// ```no_run
/// # async fn demo() -> Result<(), zaris_client::Error> {
/// use std::time::Duration;
/// use zaris_client::{Client, LeaseState};
///
/// let client = Client::connect(["127.0.0.1:7001"]).await?;
/// let lease = client.lease(Duration::from_secs(10)).await?;
/// let mut state = lease.subscribe();
/// while lease.is_valid() {
///     // ... do work that needs the lease, then:
///     tokio::select! {
///         _ = state.changed() => {
///             if *state.borrow() == LeaseState::Jeopardy {
///                 println!("renewals are failing; wrapping up");
///             }
///         }
///         _ = tokio::time::sleep(Duration::from_secs(1)) => {}
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Lease {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    id: LeaseId,
    granted_ttl: Duration,
    shared: Arc<Shared>,
    /// Set once revoked through this handle: nothing left to do on drop.
    closed: AtomicBool,
    /// This process's waits and guards of this lease, by lock name (see [`crate::queue_place`]).
    claims: Claims,
}

impl Client {
    /// Grants a lease of `ttl` and keeps it alive in the background (see [`Lease`]).
    pub async fn lease(&self, ttl: Duration) -> Result<Lease, Error> {
        // The TTL starts when the grant applies, after this moment: a safe lower bound.
        let sent = Instant::now();
        let grant = self.grant(ttl).await?;
        Ok(self.track_lease(grant.id, grant.ttl, sent))
    }

    /// [`Client::lease`], with `keys` written and bound to the lease in the grant's own step
    /// ([`Client::grant_with_keys`]): the lease never lives without them, and they go when it
    /// ends (the handle's last drop revokes it).
    pub async fn lease_with_keys<K, V>(
        &self,
        ttl: Duration,
        keys: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Lease, Error>
    where
        K: Into<Vec<u8>>,
        V: Into<Vec<u8>>,
    {
        let sent = Instant::now();
        let grant = self.grant_with_keys(ttl, keys).await?;
        Ok(self.track_lease(grant.id, grant.ttl, sent))
    }

    /// Starts keeping alive lease `id`, granted (or last renewed) by a request sent at `sent`.
    fn track_lease(&self, id: LeaseId, ttl: Duration, sent: Instant) -> Lease {
        let timing = Timing {
            ttl,
            acked_sent: sent,
            drift_permille: self.options().drift_permille,
        };
        let shared = Shared::new(timing, Instant::now());
        self.keepalive_slot().send(
            self,
            Command::Track {
                id,
                shared: shared.clone(),
            },
        );
        tracing::debug!(lease_id = id.get(), ?ttl, "keeping lease alive");
        Lease {
            inner: Arc::new(Inner {
                client: self.clone(),
                id,
                granted_ttl: ttl,
                claims: Claims::new(shared.clone()),
                shared,
                closed: AtomicBool::new(false),
            }),
        }
    }
}

impl Lease {
    /// The lease id (bind keys to it with [`PutOptions::lease`](crate::PutOptions)).
    pub fn id(&self) -> LeaseId {
        self.inner.id
    }

    /// The TTL the cluster granted.
    pub fn ttl(&self) -> Duration {
        self.inner.granted_ttl
    }

    /// The client this lease was made with.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    pub(crate) fn claims(&self) -> &Claims {
        &self.inner.claims
    }

    /// True while the lease is certainly held: before the safe deadline, and not reported lost.
    /// Checked against the clock on every call, not only when the background task wakes.
    pub fn is_valid(&self) -> bool {
        self.inner.shared.is_valid()
    }

    /// The moment until which the lease is certainly held, as of the last acknowledged renewal.
    pub fn safe_deadline(&self) -> Instant {
        self.inner.shared.timing().safe_deadline()
    }

    /// Time left until the safe deadline (zero once it passed or the lease is lost).
    pub fn remaining(&self) -> Duration {
        if self.inner.shared.state().is_expired() {
            return Duration::ZERO;
        }
        self.safe_deadline()
            .saturating_duration_since(Instant::now())
    }

    /// The current state, evaluated now.
    pub fn state(&self) -> LeaseState {
        match self.inner.shared.state() {
            expired @ LeaseState::Expired(_) => expired,
            _ => self.inner.shared.timing().state_at(Instant::now()),
        }
    }

    /// A receiver that sees every state change. The background task publishes changes at the
    /// moment they happen (it wakes for each deadline); [`Lease::is_valid`] is exact.
    pub fn subscribe(&self) -> watch::Receiver<LeaseState> {
        self.inner.shared.state.subscribe()
    }

    /// Resolves once the lease is [`LeaseState::Expired`] (at once if it already is).
    pub async fn expired(&self) -> ExpiredReason {
        let mut receiver = self.subscribe();
        loop {
            if let LeaseState::Expired(reason) = *receiver.borrow_and_update() {
                return reason;
            }
            if receiver.changed().await.is_err() {
                // The sender lives as long as this handle: unreachable, but never hang.
                return ExpiredReason::DeadlinePassed;
            }
        }
    }

    /// Revokes the lease now: its keys are deleted and its locks released. Says whether the
    /// cluster still had it. Every clone sees [`ExpiredReason::Revoked`].
    pub async fn revoke(&self) -> Result<Revocation, Error> {
        let revocation = self.inner.client.revoke(self.inner.id).await?;
        self.inner.closed.store(true, Ordering::Release);
        self.inner
            .client
            .keepalive_slot()
            .notify(Command::Untrack { id: self.inner.id });
        self.inner
            .shared
            .set_state(LeaseState::Expired(ExpiredReason::Revoked));
        Ok(revocation)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // No runtime (dropped after it shut down): nothing can be sent; the TTL will end it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.client
            .keepalive_slot()
            .notify(Command::Untrack { id: self.id });
        if self.shared.state().is_expired() {
            return;
        }
        let client = self.client.clone();
        let id = self.id;
        runtime.spawn(async move {
            if let Err(err) = client.revoke(id).await {
                tracing::debug!(lease_id = id.get(), error = %err, "revoking a dropped lease failed");
            }
        });
    }
}
