//! Range, Put, DeleteRange, Txn.

use tonic::{Request, Response, Status};
use zaris_proto::v1::kv_server::Kv;
use zaris_proto::v1::{
    DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, RangeRequest, RangeResponse,
    TxnRequest, TxnResponse,
};

use super::NodeContext;
use crate::config::MAX_RANGE_KEYS;
use crate::convert;

#[derive(Clone, Debug)]
pub struct KvService(pub NodeContext);

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: Request<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        let query = convert::range_query(request.into_inner(), &self.0.limits()?, MAX_RANGE_KEYS)?;
        // Serializable reads are served from this node's applied state, possibly stale; all
        // others wait until this node is a confirmed leader that applied everything committed.
        if !query.serializable {
            self.0.proposer.linearizable().await?;
        }
        let (result, revision) = self.0.state.read(|d| {
            (
                d.state.range(&query.selector, query.limit),
                d.state.last_applied(),
            )
        });
        convert::check_read_revision(query.revision, revision)?;
        Ok(Response::new(convert::range_response(
            self.0.proposer.header(revision),
            result,
            query.keys_only,
            query.count_only,
        )))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let request = convert::put_request(request.into_inner(), &self.0.limits()?)?;
        let reply = self.0.proposer.propose(request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::put_response(
            header,
            reply.response,
        )?))
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let request = convert::delete_request(request.into_inner(), &self.0.limits()?)?;
        let reply = self.0.proposer.propose(request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::delete_response(
            header,
            reply.response,
        )?))
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let (request, shape) =
            convert::txn_request(request.into_inner(), &self.0.limits()?, MAX_RANGE_KEYS)?;
        let reply = self.0.proposer.propose(request).await?;
        let header = self.0.proposer.header(reply.revision);
        Ok(Response::new(convert::txn_response(
            header,
            &shape,
            reply.response,
        )?))
    }
}
