//! Grant, Revoke, KeepAlive (group-committed), TimeToLive, Leases.

use std::collections::VecDeque;
use std::future::Ready;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::Either;
use futures::stream::FuturesOrdered;
use futures::{Stream, TryFutureExt};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::debug;
use zaris_core::auth::{Credential, LeaseUse, Need};
use zaris_core::{KeySelector, LeaseId};
use zaris_proto::v1::lease_server::Lease;
use zaris_proto::v1::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseListRequest, LeaseListResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};

use super::NodeContext;
use crate::auth::{caller_of, credential_of};
use crate::config::{MAX_LEASE_KEYS_LISTED, MAX_LEASE_LIST};
use crate::convert;
use crate::error::ApiError;

#[derive(Clone, Debug)]
pub struct LeaseService(pub NodeContext);

/// Responses buffered per keepalive stream; a client that stops reading stalls only itself.
const KEEPALIVE_BUFFER: usize = 16;

/// Requests of one keepalive stream being renewed at once. Past it the stream's next request is
/// read only when the oldest is answered, so a client that pipelines without bound pushes back
/// on itself rather than on the node's renew queue (4,096 requests, shared by every stream).
pub const KEEPALIVES_IN_FLIGHT_PER_STREAM: usize = 256;

type KeepAliveStream =
    Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send + 'static>>;

impl LeaseService {
    /// One KeepAlive request. `lease_id` is set when the request renews a single lease (the
    /// common case); a request for several carries only their count.
    ///
    /// The per-request spans here are at DEBUG, the level of the only events inside them: at
    /// INFO the fmt subscriber formatted every span's fields into a string on creation, for
    /// nothing (callgrind: 15% of the leader's instructions per renewal, 5% per grant).
    ///
    /// Takes its context and credential by value, so that a stream's pump queues this future
    /// itself rather than an async block around it, which copied the future's state once more per
    /// renewal.
    #[tracing::instrument(
        name = "renew",
        level = "debug",
        skip_all,
        fields(
            node_id = context.node_id,
            lease_id = tracing::field::Empty,
            leases = request.ids.len(),
        )
    )]
    async fn keepalive_one(
        context: Arc<NodeContext>,
        credential: Arc<Credential>,
        request: LeaseKeepAliveRequest,
    ) -> Result<LeaseKeepAliveResponse, ApiError> {
        let ids = convert::lease::keepalive_ids(&request, &context.limits()?)?;
        // Each request is checked against the users and owners as they are now: a stream outlives
        // role changes.
        let caller = context.resolve(&credential)?;
        let missing = context.leases_missing(&caller, &ids).await?;
        if ids.is_empty() {
            let revision = context.state.read(|d| d.state.last_applied());
            return Ok(LeaseKeepAliveResponse {
                header: Some(context.proposer.header(revision)),
                seq: request.seq,
                ..LeaseKeepAliveResponse::default()
            });
        }
        if let [id] = ids.as_slice() {
            tracing::Span::current().record("lease_id", id.get());
        }
        let to_renew: Vec<LeaseId> = ids
            .iter()
            .copied()
            .filter(|id| !missing.contains(id))
            .collect();
        let renewal = if to_renew.is_empty() {
            crate::renew::Renewal {
                revision: context.state.read(|d| d.state.last_applied()),
                renewals: std::sync::Arc::default(),
            }
        } else {
            context.renewals.renew(to_renew).await?
        };
        let renewals = renewal.renewals.with_not_found(&missing);
        let response = convert::lease::keepalive_response(
            context.proposer.header(renewal.revision),
            request.seq,
            &ids,
            &renewals,
        )?;
        debug!(
            revision = renewal.revision.get(),
            renewed = response.renewed.len(),
            not_found = response.not_found.len(),
            "keepalive answered"
        );
        Ok(response)
    }
}

#[tonic::async_trait]
impl Lease for LeaseService {
    /// `lease_id` is the requested id, or (0 asks the server to choose) the granted one.
    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(node_id = self.0.node_id, lease_id = request.get_ref().id)
    )]
    async fn grant(
        &self,
        request: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        let caller = caller_of(&request);
        let request = convert::lease::grant_request(request.into_inner(), &self.0.grant_limits()?)?;
        let reply = self.0.propose_as(&caller, request).await?;
        let header = self.0.proposer.header(reply.revision);
        let response = convert::lease::grant_response(header, reply.response)?;
        if response.id != 0 {
            tracing::Span::current().record("lease_id", response.id);
        }
        debug!(
            revision = reply.revision.get(),
            result = ?response.result(),
            ttl_ms = response.ttl_ms,
            "grant answered"
        );
        Ok(Response::new(response))
    }

    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(node_id = self.0.node_id, lease_id = request.get_ref().id)
    )]
    async fn revoke(
        &self,
        request: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        let caller = caller_of(&request);
        let request = convert::lease::revoke_request(request.into_inner(), &self.0.limits()?)?;
        let reply = self.0.propose_as(&caller, request).await?;
        let header = self.0.proposer.header(reply.revision);
        let response = convert::lease::revoke_response(header, reply.response)?;
        debug!(
            revision = reply.revision.get(),
            result = ?response.result(),
            "revoke answered"
        );
        Ok(Response::new(response))
    }

    type KeepAliveStream = KeepAliveStream;

    /// One response per request, in order, each sent after its renewal applied. The stream ends
    /// with the first error (e.g. NOT_LEADER): the client reopens it at the leader.
    async fn keep_alive(
        &self,
        request: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let credential = Arc::new(credential_of(&request));
        let incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(KEEPALIVE_BUFFER);
        let context = Arc::new(self.0.clone());
        let shutdown = self.0.shutdown.clone();
        let answers = tx.clone();
        let pump = self
            .0
            .tasks
            .spawn(pump_keepalives(context, credential, incoming, tx));
        self.0
            .tasks
            .spawn(end_keepalives_early(pump, shutdown, answers));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn time_to_live(
        &self,
        request: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let caller = caller_of(&request);
        let request = request.into_inner();
        // Remaining TTL is the leader's view: only its lessor decides expiry.
        self.0.proposer.linearizable().await?;
        let id = LeaseId::new(request.id);
        self.0.check_access(|auth| {
            // Only an owned lease is checked: an unowned one is anyone's to see, and one that is
            // not live is reported not found to anyone.
            let owned = auth.lease_owner(id).is_some();
            auth.check_lease(&caller, id, owned, LeaseUse::Inspect)
                .map(drop)
        })?;
        let (info, revision) = self.0.state.read(|d| {
            let info = d.state.lease(id, request.keys).map(|mut info| {
                // Seeing a lease is not reading its keys or locks: the names the caller may not
                // read are left out (with auth on; an admin and everyone with auth off see all),
                // as a Range of them would be refused.
                let auth = d.state.auth();
                info.keys.retain(|key| {
                    auth.check_keys(&caller, &KeySelector::Key(key.clone()), Need::Read)
                        .is_ok()
                });
                for locks in [&mut info.locks_held, &mut info.locks_waiting] {
                    locks.retain(|name| auth.check_lock(&caller, name, Need::Read).is_ok());
                }
                info
            });
            (info, d.state.last_applied())
        });
        let remaining = self.0.remaining(id);
        Ok(Response::new(convert::lease::lease_ttl_response(
            self.0.proposer.header(revision),
            info,
            remaining.get(),
            MAX_LEASE_KEYS_LISTED,
        )))
    }

    async fn leases(
        &self,
        request: Request<LeaseListRequest>,
    ) -> Result<Response<LeaseListResponse>, Status> {
        let caller = caller_of(&request);
        let request = request.into_inner();
        let limit = convert::page_size(request.limit, MAX_LEASE_LIST as u64, "max_lease_list")?;
        self.0.proposer.linearizable().await?;
        // Other users' leases are left out (while auth is enabled, for all but admins).
        let (mut leases, revision) = self.0.state.read(|d| {
            let page =
                d.state
                    .leases_where(LeaseId::new(request.after_id), limit as usize + 1, |id| {
                        d.state.auth().lists_lease(&caller, id)
                    });
            (page, d.state.last_applied())
        });
        let more = leases.len() > limit as usize;
        leases.truncate(limit as usize);
        let summaries = leases
            .iter()
            .map(|info| convert::lease::lease_summary(info, (self.0.remaining(info.id)).get()))
            .collect();
        Ok(Response::new(LeaseListResponse {
            header: Some(self.0.proposer.header(revision)),
            leases: summaries,
            more,
        }))
    }
}

/// Answers one KeepAlive stream: up to [`KEEPALIVES_IN_FLIGHT_PER_STREAM`] requests are renewed
/// concurrently (so they share Renew entries with each other and with every other stream), and
/// their answers go out in request order, each once its own renewal is applied. The first error
/// is sent after the answers before it and ends the stream; the requests after it are dropped
/// unanswered (indeterminate to the client: renewing again is harmless).
///
/// The renewals in flight are driven to the end whether or not the client reads its answers:
/// finished answers wait in `ready` (within the same bound) while the response buffer is full.
/// A renewal may hold one of the node's renewal slots (`renew.rs`: with `--renew-inflight` above
/// 1, a renewal finding a slot free and nobody queued is proposed by its own stream), and one left
/// unpolled would keep it, narrowing every other stream's pipeline, until the client read again.
///
/// Ends when the client has closed its side and every answer is out, or on the first error;
/// [`end_keepalives_early`] ends it sooner when the client goes away or the node stops serving.
async fn pump_keepalives(
    context: Arc<NodeContext>,
    credential: Arc<Credential>,
    mut incoming: Streaming<LeaseKeepAliveRequest>,
    tx: mpsc::Sender<Result<LeaseKeepAliveResponse, Status>>,
) {
    // One concrete future type rather than a box per renewal: the queue's own allocation holds
    // the future, and that future is small because its rare paths (a proposal of its own, a
    // read barrier) are boxed where they are taken. A renewal's future used to be copied whole,
    // large, into a box and again from its wrapper: callgrind counted 27.7k of the leader's
    // instructions per renewal before, 26.1k after (64 streams of one renewal each).
    let mut in_flight: FuturesOrdered<Either<Ready<Result<LeaseKeepAliveResponse, Status>>, _>> =
        FuturesOrdered::new();
    let mut ready: VecDeque<Result<LeaseKeepAliveResponse, Status>> = VecDeque::new();
    let mut reading = true;
    let renew = |request: LeaseKeepAliveRequest| {
        LeaseService::keepalive_one(context.clone(), credential.clone(), request)
            .map_err(Status::from)
    };
    // The end of a half-closed stream is checked here. The `select!` has no `else` (it would
    // panic with every branch disabled): while this condition holds, one branch always is
    // (answers ready: sending them; else renewals in flight: their next; else reading, and below
    // the bound with both empty: the next request).
    while reading || !in_flight.is_empty() || !ready.is_empty() {
        tokio::select! {
            // Answers first: a client that sends faster than renewals commit must not starve
            // the answers it waits for.
            biased;
            permit = tx.reserve(), if !ready.is_empty() => {
                let (Ok(permit), Some(answer)) = (permit, ready.pop_front()) else { break };
                let failed = answer.is_err();
                permit.send(answer);
                if failed {
                    break;
                }
            }
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                if answer.is_err() {
                    // Nothing after an error is answered: stop reading, and drop the renewals
                    // still in flight (with any slot they hold).
                    reading = false;
                    in_flight = FuturesOrdered::new();
                }
                ready.push_back(answer);
            }
            message = incoming.next(),
                if reading && in_flight.len() + ready.len() < KEEPALIVES_IN_FLIGHT_PER_STREAM =>
            {
                match message {
                    Some(Ok(request)) => in_flight.push_back(Either::Right(renew(request))),
                    // A broken stream: answered after the requests before it, and read no further.
                    Some(Err(status)) => {
                        in_flight.push_back(Either::Left(std::future::ready(Err(status))));
                        reading = false;
                    }
                    None => reading = false,
                }
            }
        }
    }
    debug!(node_id = context.node_id, "keepalive stream ended");
}

/// Ends a keepalive stream's pump when its client goes away (the response stream dropped: no
/// answer can reach it) or the node stops serving, even while answers wait for a client that does
/// not read them (a graceful stop waits for both tasks). A task of its own rather than branches of
/// the pump's loop: the pump is woken several times per renewal, and a `select!` polls every
/// branch on every wake; these two waits took a lock each time (callgrind: 5% of the leader's
/// instructions per renewal, with 64 streams of one renewal each). Aborting the pump drops its
/// renewals in flight unanswered, as the end of the stream would.
async fn end_keepalives_early(
    mut pump: tokio::task::JoinHandle<()>,
    shutdown: tokio_util::sync::CancellationToken,
    answers: mpsc::Sender<Result<LeaseKeepAliveResponse, Status>>,
) {
    tokio::select! {
        _ = &mut pump => return,
        () = shutdown.cancelled() => {}
        () = answers.closed() => {}
    }
    // Dropped first: while it lives, the client's response stream cannot end.
    drop(answers);
    pump.abort();
    // Returns once the pump is dropped, so that a graceful stop that waits for this task finds
    // the stream's renewals gone.
    let _ = pump.await;
}
