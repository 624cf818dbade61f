//! Lock (at once, or queued with a timeout), Unlock (fenced), LockStatus, LockList.

use std::time::Duration;

use tonic::{Request, Response, Status};
use zaris_core::auth::Need;
use zaris_core::{FencingToken, LeaseId, LockOutcome, Outcome, Revision};
use zaris_proto::v1::lock_server::Lock;
use zaris_proto::v1::{
    LockListRequest, LockListResponse, LockRequest, LockResponse, LockResult, LockStatusRequest,
    LockStatusResponse, UnlockRequest, UnlockResponse,
};

use super::NodeContext;
use crate::auth::caller_of;
use crate::config::{MAX_LOCK_LIST, MAX_LOCK_WAIT_MS, MAX_LOCK_WAITERS_LISTED};
use crate::convert;
use crate::locks::Wake;

#[derive(Clone, Debug)]
pub struct LockService(pub NodeContext);

impl LockService {
    fn held(&self, revision: Revision, token: FencingToken) -> LockResponse {
        LockResponse {
            header: Some(self.0.proposer.header(revision)),
            result: LockResult::Held.into(),
            token: token.get(),
            ..LockResponse::default()
        }
    }

    /// A QUEUED answer from this node's applied state: who holds the lock, where the lease is.
    fn queued(&self, name: &str, lease: u64, mut answer: LockResponse) -> LockResponse {
        let (info, revision) = self
            .0
            .state
            .read(|d| (d.state.lock(name), d.state.last_applied()));
        if let Some(info) = info {
            // The hand-over may have applied just as the wait ended.
            if info.holder == LeaseId::new(lease) {
                return self.held(revision, info.token);
            }
            answer.holder_lease = info.holder.get();
            if let Some(at) = info.waiters.iter().position(|w| *w == LeaseId::new(lease)) {
                answer.queue_position = at as u64 + 1;
            }
        }
        answer.header = Some(self.0.proposer.header(revision));
        answer
    }
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, request: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let caller = caller_of(&request);
        let request = request.into_inner();
        let wait_ms = convert::lock::lock_wait_ms(&request, MAX_LOCK_WAIT_MS)?;
        let (name, lease) = (request.name.clone(), request.lease);
        let acquire = convert::lock::lock_request(request, &self.0.limits()?)?;
        // Register before proposing: the hand-over may apply right after our own entry. The
        // registration forgets the wait when dropped, on every way out of this call, a client
        // that cancels it halfway included.
        let mut registration =
            (wait_ms > 0).then(|| self.0.waiters.register(&name, LeaseId::new(lease)));
        let reply = self.0.propose_as(&caller, acquire).await?;
        let queued = matches!(
            reply.response,
            Ok(Outcome::Lock(LockOutcome::Queued { .. }))
        );
        let answer =
            convert::lock::lock_response(self.0.proposer.header(reply.revision), reply.response)?;
        if !queued {
            return Ok(Response::new(answer));
        }
        let Some(registration) = registration.as_mut() else {
            return Ok(Response::new(self.queued(&name, lease, answer)));
        };
        let wait = tokio::time::timeout(Duration::from_millis(wait_ms), &mut registration.woken);
        let wake = tokio::select! {
            _ = self.0.shutdown.cancelled() => None,
            woken = wait => woken.ok().and_then(Result::ok),
        };
        match wake {
            Some(Wake::Acquired(token)) => {
                let revision = self.0.state.read(|d| d.state.last_applied());
                Ok(Response::new(self.held(revision, token)))
            }
            Some(Wake::LeaseEnded) => Ok(Response::new(LockResponse {
                header: Some(self.0.proposer.header(reply.revision)),
                result: LockResult::LeaseNotFound.into(),
                ..LockResponse::default()
            })),
            // Timed out (or stopping): the lease stays queued and gets the lock in turn; the
            // caller calls Lock again to wait more, or Unlock to withdraw.
            None => Ok(Response::new(self.queued(&name, lease, answer))),
        }
    }

    async fn unlock(
        &self,
        request: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        let caller = caller_of(&request);
        let request = convert::lock::unlock_request(request.into_inner(), &self.0.limits()?)?;
        let reply = self.0.propose_as(&caller, request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::lock::unlock_response(
            header,
            reply.response,
        )?))
    }

    async fn lock_status(
        &self,
        request: Request<LockStatusRequest>,
    ) -> Result<Response<LockStatusResponse>, Status> {
        let caller = caller_of(&request);
        let name = request.into_inner().name;
        self.0
            .check_access(|auth| auth.check_lock(&caller, &name, Need::Read))?;
        self.0.proposer.linearizable().await?;
        let (info, revision) = self
            .0
            .state
            .read(|d| (d.state.lock(&name), d.state.last_applied()));
        Ok(Response::new(convert::lock::lock_status_response(
            self.0.proposer.header(revision),
            info,
        )))
    }

    async fn lock_list(
        &self,
        request: Request<LockListRequest>,
    ) -> Result<Response<LockListResponse>, Status> {
        let caller = caller_of(&request);
        let request = request.into_inner();
        let limit = convert::page_size(request.limit, MAX_LOCK_LIST as u64, "max_lock_list")?;
        convert::lock::check_lock_list(&request, &self.0.limits()?)?;
        self.0.proposer.linearizable().await?;
        // Locks the caller may not read are left out, as leases of other users are from Leases.
        let (mut locks, revision) = self.0.state.read(|d| {
            let auth = d.state.auth();
            let page = d.state.locks_where(
                &request.after_name,
                &request.prefix,
                limit as usize + 1,
                MAX_LOCK_WAITERS_LISTED,
                |name| auth.check_lock(&caller, name, Need::Read).is_ok(),
            );
            (page, d.state.last_applied())
        });
        let more = locks.len() > limit as usize;
        locks.truncate(limit as usize);
        Ok(Response::new(LockListResponse {
            header: Some(self.0.proposer.header(revision)),
            locks: locks
                .into_iter()
                .map(|(info, waiting)| convert::lock::lock_summary(info, waiting))
                .collect(),
            more,
        }))
    }
}
