//! Lock calls: lock, unlock, status. [`crate::LockGuard`] and elections build on these.

use std::time::Duration;

use zaris_proto::v1::{
    LockListRequest, LockRequest, LockResult, LockStatusRequest, UnlockRequest, UnlockResult,
};
use zaris_types::{FencingToken, LeaseId, Revision};

use crate::client::lock_service;
use crate::client::{CallSpec, Client, header_revision, millis, unexpected};
use crate::error::Error;

/// What a Lock call achieved.
#[must_use = "a lock call may leave the lock busy or queued"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockOutcome {
    /// The lease holds the lock, fenced by `token` (the revision at which it acquired it).
    Held {
        /// The fencing token.
        token: FencingToken,
    },
    /// The lease waits in the queue at `position` (1 = next) behind holder `holder_lease`; the
    /// wait ended before its turn came. It keeps its place until it withdraws (unlock with token
    /// 0) or its lease ends.
    Queued {
        /// The lease holding the lock.
        holder_lease: LeaseId,
        /// 1-based place in the queue.
        position: u64,
    },
    /// Without waiting: another lease, `holder_lease`, holds the lock; nothing changed.
    Busy {
        /// The lease holding the lock.
        holder_lease: LeaseId,
    },
}

/// What an Unlock call achieved.
#[must_use = "an unlock may find the lock no longer held"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// The lock was released (and passed to the next waiter with a new token).
    Released,
    /// The lease left the wait queue (token 0).
    Withdrawn,
    /// Nothing changed: the lease does not hold the lock with this token (stale token, another
    /// holder, lock free), or with token 0 is neither queued nor holding.
    NotHolder,
    /// Token 0 only: the lock reached the lease before the withdrawal applied, so the lease now
    /// holds it with `token`. Unlock with that token to release it.
    HeldNow {
        /// The fencing token the lease now holds the lock with.
        token: FencingToken,
    },
}

/// Who holds a lock and how many wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LockStatus {
    /// The holder, if the lock is held.
    pub holder: Option<LockHolder>,
    /// Leases waiting in the queue.
    pub waiters: u64,
    /// The revision this status reflects.
    pub revision: Revision,
}

/// A held lock in a [`LockPage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// The lock's name.
    pub name: String,
    /// Its holder.
    pub holder: LockHolder,
    /// Leases waiting, in queue order (the first is next); at most the server's
    /// `max_lock_waiters_listed` of them.
    pub waiters: Vec<LeaseId>,
    /// How many leases wait in all.
    pub waiter_count: u64,
}

/// One page of the lock list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockPage {
    /// Held locks in ascending name order.
    pub locks: Vec<LockEntry>,
    /// More locks follow the last one: ask again with its name as `after_name`.
    pub more: bool,
    /// The revision this page reflects.
    pub revision: Revision,
}

/// The holder of a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHolder {
    /// The lease holding it.
    pub lease: LeaseId,
    /// Its fencing token.
    pub token: FencingToken,
}

/// A Lock call's answer, as the cluster gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockAnswer {
    Answered(LockOutcome),
    /// An Unlock of the lock by the lease applied after the revision the request was sent after;
    /// nothing changed.
    Overtaken,
}

/// How many times in a row a wait ([`crate::Lease::lock`] and its kin) asks again after an
/// Unlock of the same lock by its lease overtook its request. That takes another Unlock of that
/// very lock by the lease within one round trip each time (another guard of the lease on the
/// same lock, releasing without pause), so the bound is never met in ordinary use.
pub(crate) const MAX_OVERTAKEN: u32 = 16;

/// The error of a wait whose Lock requests were overtaken [`MAX_OVERTAKEN`] times in a row.
pub(crate) fn overtaken_too_often(name: &str, lease: LeaseId) -> Error {
    unexpected(
        None,
        format!(
            "lock {name:?}: {MAX_OVERTAKEN} requests in a row overtaken by Unlocks of it by lease \
             {lease}"
        ),
    )
}

impl Client {
    /// Acquires lock `name` for `lease`. Without `wait`, a lock held by another lease answers
    /// [`LockOutcome::Busy`]; with `wait`, the lease queues and the call blocks up to `timeout`
    /// for its turn, answering [`LockOutcome::Held`] or [`LockOutcome::Queued`]. A lease that
    /// does not exist is [`Error::LeaseNotFound`]. Idempotent per (name, lease), so retried
    /// freely.
    ///
    /// This raw call says nothing of when it was sent, so a copy held up in the network past a
    /// later Unlock of the lock (a wait this caller withdrew) still queues the lease. A
    /// [`crate::Lease`]'s `lock`, `lock_timeout` and `try_lock` do say it, and never leave a
    /// lock held with no guard that way.
    pub async fn lock(
        &self,
        name: impl Into<String>,
        lease: LeaseId,
        wait: bool,
        timeout: Duration,
    ) -> Result<LockOutcome, Error> {
        match self
            .lock_request(name.into(), lease, wait, timeout, None)
            .await?
        {
            LockAnswer::Answered(outcome) => Ok(outcome),
            LockAnswer::Overtaken => Err(unexpected(
                None,
                "OVERTAKEN for a Lock that said nothing of when it was sent",
            )),
        }
    }

    /// One Lock call, retried as one request. A wait's calls are sent after revision
    /// `sent_after`, and refused as [`LockAnswer::Overtaken`] if the lease unlocked the lock
    /// after it; without `wait` (a `try_lock`), such a call is never resent after an
    /// indeterminate failure: an attempt that may still apply after another was answered BUSY
    /// would take the lock with nobody waiting for it, while a failed call is given back, which
    /// overtakes that attempt. `None`: the raw call, unchecked and retried as before.
    pub(crate) async fn lock_request(
        &self,
        name: String,
        lease: LeaseId,
        wait: bool,
        timeout: Duration,
        sent_after: Option<Revision>,
    ) -> Result<LockAnswer, Error> {
        let timeout = if wait { timeout } else { Duration::ZERO };
        let request = LockRequest {
            name,
            lease: lease.get(),
            wait,
            timeout_ms: millis(timeout),
            seen_revision: sent_after.map(Revision::get),
        };
        let spec = if wait || sent_after.is_none() {
            CallSpec::idempotent("Lock").with_extra_wait(timeout)
        } else {
            CallSpec::non_idempotent("Lock")
        };
        let response = self
            .call(spec, request, |channel, req| async move {
                lock_service(channel).lock(req).await
            })
            .await?;
        let answered = LockAnswer::Answered;
        match LockResult::try_from(response.result) {
            Ok(LockResult::Held) => Ok(answered(LockOutcome::Held {
                token: FencingToken::new(response.token),
            })),
            Ok(LockResult::Queued) => Ok(answered(LockOutcome::Queued {
                holder_lease: LeaseId::new(response.holder_lease),
                position: response.queue_position,
            })),
            Ok(LockResult::Busy) => Ok(answered(LockOutcome::Busy {
                holder_lease: LeaseId::new(response.holder_lease),
            })),
            Ok(LockResult::Overtaken) => Ok(LockAnswer::Overtaken),
            Ok(LockResult::LeaseNotFound) => Err(Error::LeaseNotFound { id: lease }),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown lock result {}", response.result),
            )),
        }
    }

    /// Releases lock `name` held by `lease` with fencing `token`, or with `token` 0 withdraws the
    /// lease from the wait queue. Carries a request id, so retries are safe.
    pub async fn unlock(
        &self,
        name: impl Into<String>,
        lease: LeaseId,
        token: FencingToken,
    ) -> Result<UnlockOutcome, Error> {
        let request = UnlockRequest {
            name: name.into(),
            lease: lease.get(),
            token: token.get(),
            request_id: Some(self.next_request_id()),
        };
        let response = self
            .call(
                CallSpec::idempotent("Unlock"),
                request,
                |channel, req| async move { lock_service(channel).unlock(req).await },
            )
            .await?;
        match UnlockResult::try_from(response.result) {
            Ok(UnlockResult::Released) => Ok(UnlockOutcome::Released),
            Ok(UnlockResult::Withdrawn) => Ok(UnlockOutcome::Withdrawn),
            Ok(UnlockResult::NotHolder) => Ok(UnlockOutcome::NotHolder),
            Ok(UnlockResult::Held) => Ok(UnlockOutcome::HeldNow {
                token: FencingToken::new(response.token),
            }),
            _ => Err(unexpected(
                response.header.as_ref(),
                format!("unknown unlock result {}", response.result),
            )),
        }
    }

    /// Describes lock `name`: holder, token, number of waiters (linearizable).
    pub async fn lock_status(&self, name: impl Into<String>) -> Result<LockStatus, Error> {
        let request = LockStatusRequest { name: name.into() };
        let response = self
            .call(
                CallSpec::idempotent("LockStatus"),
                request,
                |channel, req| async move { lock_service(channel).lock_status(req).await },
            )
            .await?;
        Ok(LockStatus {
            holder: response.held.then_some(LockHolder {
                lease: LeaseId::new(response.holder_lease),
                token: FencingToken::new(response.token),
            }),
            waiters: response.waiters,
            revision: header_revision(response.header.as_ref()),
        })
    }

    /// One page of the held locks whose names start with `prefix`, after `after_name` in
    /// ascending order (linearizable). `limit` 0 asks for the server's page maximum.
    pub async fn lock_list(
        &self,
        prefix: impl Into<String>,
        after_name: impl Into<String>,
        limit: u64,
    ) -> Result<LockPage, Error> {
        let request = LockListRequest {
            after_name: after_name.into(),
            limit,
            prefix: prefix.into(),
        };
        let response = self
            .call(
                CallSpec::idempotent("LockList"),
                request,
                |channel, req| async move { lock_service(channel).lock_list(req).await },
            )
            .await?;
        Ok(LockPage {
            locks: response
                .locks
                .into_iter()
                .map(|lock| LockEntry {
                    name: lock.name,
                    holder: LockHolder {
                        lease: LeaseId::new(lock.holder_lease),
                        token: FencingToken::new(lock.token),
                    },
                    waiters: lock.waiters.into_iter().map(LeaseId::new).collect(),
                    waiter_count: lock.waiter_count,
                })
                .collect(),
            more: response.more,
            revision: header_revision(response.header.as_ref()),
        })
    }
}
