//! Range, Put, DeleteRange, Txn.

use tonic::{Request, Response, Status};
use zaris_core::KeySelector;
use zaris_core::auth::Need;
use zaris_proto::v1::kv_server::Kv;
use zaris_proto::v1::{
    DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest, RangeResponse,
    TxnRequest, TxnResponse,
};

use super::NodeContext;
use crate::auth::caller_of;
use crate::config::MAX_RANGE_KEYS;
use crate::convert;
use crate::faults::Bug;

#[derive(Clone, Debug)]
pub struct KvService(pub NodeContext);

impl KvService {
    /// The `ack-before-commit` bug: answers OK with a made-up revision (last applied + 1) and
    /// proposes in the background, so the write may be lost, or land at another revision.
    fn ack_before_commit(
        &self,
        request: zaris_core::Request,
    ) -> Result<PutResponse, crate::error::ApiError> {
        let revision = self.0.state.read(|d| d.state.last_applied()).next();
        let proposer = self.0.proposer.clone();
        let node_id = self.0.node_id;
        self.0.tasks.spawn(async move {
            if let Err(error) = proposer.propose(request).await {
                tracing::warn!(node_id, %error, "ack-before-commit: an acknowledged put failed");
            }
        });
        convert::kv::put_response(
            self.0.proposer.header(revision),
            Ok(zaris_core::Outcome::Put { prev: None }),
        )
    }
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: Request<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        let caller = caller_of(&request);
        let query =
            convert::kv::range_query(request.into_inner(), &self.0.limits()?, MAX_RANGE_KEYS)?;
        self.0
            .check_access(|auth| auth.check_keys(&caller, &query.selector, Need::Read))?;
        // Serializable reads are served from this node's applied state, possibly stale; all
        // others wait until this node is a confirmed leader that applied everything committed.
        let confirm = !query.serializable && !self.0.faults.has(Bug::StaleReads);
        if confirm {
            self.0.proposer.linearizable().await?;
        }
        // Only the key map is taken under the lock (a shared copy, O(1)): the read, which may
        // walk every matching key to count them, must not hold up apply.
        let (keys, revision) = self
            .0
            .state
            .read(|d| (d.state.keys(), d.state.last_applied()));
        let result = keys.range(&query.selector, query.limit);
        convert::kv::check_read_revision(query.revision, revision.get())?;
        Ok(Response::new(convert::kv::range_response(
            self.0.proposer.header(revision),
            result,
            query.keys_only,
            query.count_only,
        )))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let caller = caller_of(&request);
        let request = convert::kv::put_request(request.into_inner(), &self.0.limits()?)?;
        if self.0.faults.has(Bug::AckBeforeCommit) && self.0.proposer.is_raft_leader() {
            return Ok(Response::new(self.ack_before_commit(request)?));
        }
        let reply = self.0.propose_as(&caller, request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::kv::put_response(
            header,
            reply.response,
        )?))
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let caller = caller_of(&request);
        let request = convert::kv::delete_request(request.into_inner(), &self.0.limits()?)?;
        let reply = self.0.propose_as(&caller, request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::kv::delete_response(
            header,
            reply.response,
        )?))
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let caller = caller_of(&request);
        let (request, shape) =
            convert::kv::txn_request(request.into_inner(), &self.0.limits()?, MAX_RANGE_KEYS)?;
        // A nested put's `prev_kv` (a shape the core command does not carry) answers the value
        // it replaced: reading it needs read permission on the key, as a Range would.
        self.0.check_access(|auth| {
            convert::kv::txn_prev_kv_keys(&request.command, &shape).try_for_each(|key| {
                auth.check_keys(&caller, &KeySelector::Key(key.to_vec()), Need::Read)
            })
        })?;
        let reply = self.0.propose_as(&caller, request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::kv::txn_response(
            header,
            &shape,
            reply.response,
        )?))
    }
}
