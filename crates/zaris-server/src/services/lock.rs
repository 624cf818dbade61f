//! Lock (at once, or queued with a timeout), Unlock (fenced), LockStatus.

use std::time::Duration;

use tonic::{Request, Response, Status};
use zaris_core::{CancelOutcome, Command, LockOutcome, Outcome};
use zaris_proto::v1::lock_server::Lock;
use zaris_proto::v1::{
    LockRequest, LockResponse, LockResult, LockStatusRequest, LockStatusResponse, UnlockRequest,
    UnlockResponse,
};

use super::NodeContext;
use crate::config::MAX_LOCK_WAIT_MS;
use crate::convert;
use crate::locks::Wake;

#[derive(Clone, Debug)]
pub struct LockService(pub NodeContext);

impl LockService {
    fn held(&self, revision: u64, token: u64) -> LockResponse {
        LockResponse {
            header: Some(self.0.proposer.header(revision)),
            result: LockResult::Held.into(),
            token,
            ..LockResponse::default()
        }
    }

    /// The wait timed out: withdraw from the queue. If the lock was handed over in the meantime,
    /// the withdrawal says so and the caller holds it after all.
    async fn give_up(
        &self,
        name: &str,
        lease: u64,
        queued: LockResponse,
    ) -> Result<LockResponse, Status> {
        let cancel = zaris_core::Request::new(Command::LockCancel {
            name: name.to_string(),
            lease,
        });
        let reply = self.0.proposer.propose(cancel).await?;
        match reply.response {
            Ok(Outcome::Cancelled(CancelOutcome::Held { token })) => {
                Ok(self.held(reply.revision, token))
            }
            _ => Ok(queued),
        }
    }
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, request: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let request = request.into_inner();
        let wait_ms = convert::lock_wait_ms(&request, MAX_LOCK_WAIT_MS)?;
        let (name, lease) = (request.name.clone(), request.lease);
        let acquire = convert::lock_request(request, &self.0.limits)?;
        // Register before proposing: the hand-over may apply right after our own entry.
        let woken = (wait_ms > 0).then(|| self.0.waiters.register(&name, lease));
        let reply = self.0.proposer.propose(acquire).await;
        let reply = match reply {
            Ok(reply) => reply,
            Err(status) => {
                self.0.waiters.forget(&name, lease);
                return Err(status);
            }
        };
        let queued = matches!(
            reply.response,
            Ok(Outcome::Lock(LockOutcome::Queued { .. }))
        );
        let answer =
            convert::lock_response(self.0.proposer.header(reply.revision), reply.response)?;
        let Some(woken) = woken.filter(|_| queued) else {
            self.0.waiters.forget(&name, lease);
            return Ok(Response::new(answer));
        };
        let wake = tokio::select! {
            _ = self.0.shutdown.cancelled() => None,
            woken = tokio::time::timeout(Duration::from_millis(wait_ms), woken) => woken.ok().and_then(Result::ok),
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
            None => {
                self.0.waiters.forget(&name, lease);
                Ok(Response::new(self.give_up(&name, lease, answer).await?))
            }
        }
    }

    async fn unlock(
        &self,
        request: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        let request = convert::unlock_request(request.into_inner(), &self.0.limits)?;
        let reply = self.0.proposer.propose(request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::unlock_response(
            header,
            reply.response,
        )?))
    }

    async fn lock_status(
        &self,
        request: Request<LockStatusRequest>,
    ) -> Result<Response<LockStatusResponse>, Status> {
        let name = request.into_inner().name;
        self.0.proposer.linearizable().await?;
        let (info, revision) = self
            .0
            .state
            .read(|d| (d.state.lock(&name), d.state.last_applied()));
        Ok(Response::new(convert::lock_status_response(
            self.0.proposer.header(revision),
            info,
        )))
    }
}
