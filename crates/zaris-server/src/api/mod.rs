//! The console's JSON API: `/api/v1/...` on the `--http` listener (docs/api.md, "JSON API").
//!
//! Read-only but for revoking a lease. Every call but `node` is answered by the Raft leader
//! after a read barrier (linearizable), through the gRPC services themselves: the same access
//! checks, limits and answers. The leader runs a call itself; any other member forwards it over
//! the peer link (`RaftService.Api`) and relays the leader's answer, whose `answered_by` names
//! the member that produced it. A forwarded call is never forwarded again: a member that was
//! the leader when the call left and is not any more answers 503 NOT_LEADER.

mod events;
mod routes;
mod views;

use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use serde::{Deserialize, Serialize};
use tonic::Status;
use zaris_core::auth::{Caller, Credential};
use zaris_proto::v1::cluster_server::Cluster;
use zaris_proto::v1::kv_server::Kv;
use zaris_proto::v1::lease_server::Lease;
use zaris_proto::v1::lock_server::Lock;
use zaris_proto::v1::{
    LeaseListRequest, LeaseRevokeRequest, LeaseTimeToLiveRequest, LockListRequest, RaftMessage,
    RangeRequest, StatusRequest,
};

pub use self::routes::{Refusal, Route};
use crate::error::ApiError;
use crate::network::NetworkFactory;
use crate::services::NodeContext;
use crate::services::cluster::ClusterService;
use crate::services::kv::KvService;
use crate::services::lease::LeaseService;
use crate::services::lock::LockService;

/// A credential a member may pass on with a forwarded call. Never a certificate's name: only
/// the member that checked the certificate could vouch for it, and the JSON API takes none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForwardedCredential {
    Anonymous,
    /// The SHA-256 of the caller's bearer token (the token itself never leaves the member it
    /// was sent to).
    Token([u8; 32]),
}

impl From<ForwardedCredential> for Credential {
    fn from(credential: ForwardedCredential) -> Credential {
        match credential {
            ForwardedCredential::Anonymous => Credential::Anonymous,
            ForwardedCredential::Token(sha256) => Credential::Token(sha256),
        }
    }
}

/// One JSON API call, as received over HTTP or forwarded by another member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiCall {
    /// The member that received the call over HTTP (checked against its peer certificate when
    /// the peer links use TLS).
    pub from: u64,
    /// POST (else GET).
    pub post: bool,
    /// The path as received, percent-encoded.
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
    pub credential: ForwardedCredential,
}

/// An answer: an HTTP status and a JSON body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiReply {
    pub status: u16,
    pub body: String,
}

impl ApiReply {
    fn json(status: u16, value: &serde_json::Value) -> Self {
        ApiReply {
            status,
            body: value.to_string(),
        }
    }

    /// `{"error": {"code": CODE, "message": ...}}`.
    pub(crate) fn error(status: u16, code: &str, message: &str) -> Self {
        ApiReply::json(
            status,
            &serde_json::json!({"error": {"code": code, "message": message}}),
        )
    }

    pub(crate) fn refused(refusal: &Refusal) -> Self {
        let code = if refusal.http_status == 404 {
            "NOT_FOUND"
        } else {
            "INVALID_ARGUMENT"
        };
        ApiReply::error(refusal.http_status, code, &refusal.message)
    }

    /// The gRPC error a service answered, as HTTP: the status grpc-gateway would give its code,
    /// and the ErrorDetail code (LIMIT_EXCEEDED, NOT_LEADER, ...) when the status carries one.
    fn from_status(status: &Status) -> Self {
        use tonic::Code;
        let detail = zaris_proto::error::detail(status)
            .and_then(|d| zaris_proto::v1::ErrorCode::try_from(d.code).ok());
        let code = detail.map_or_else(
            || grpc_code_name(status.code()).to_owned(),
            |code| {
                code.as_str_name()
                    .trim_start_matches("ERROR_CODE_")
                    .to_owned()
            },
        );
        let http = match status.code() {
            Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => 400,
            // A request over a per-request limit is the caller's to fix, not a rate limit.
            Code::ResourceExhausted if code == "LIMIT_EXCEEDED" => 400,
            Code::ResourceExhausted => 429,
            Code::Unauthenticated => 401,
            Code::PermissionDenied => 403,
            Code::NotFound => 404,
            Code::AlreadyExists | Code::Aborted => 409,
            Code::Unavailable => 503,
            Code::DeadlineExceeded => 504,
            Code::Unimplemented => 501,
            _ => 500,
        };
        ApiReply::error(http, &code, status.message())
    }
}

impl From<ApiError> for ApiReply {
    fn from(error: ApiError) -> Self {
        ApiReply::from_status(&Status::from(error))
    }
}

/// A gRPC status code as the gRPC specification spells it.
fn grpc_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Answers JSON API calls on one member.
#[derive(Clone)]
pub struct Api {
    context: NodeContext,
    cluster: ClusterService,
    peers: NetworkFactory,
    cluster_id: u64,
    /// Longest a forwarded call may take: the leader's own bound on a read, plus the trip.
    forward_timeout: Duration,
    /// Event feeds being served ([`events::MAX_EVENT_STREAMS`]).
    event_streams: std::sync::Arc<tokio::sync::Semaphore>,
    /// The last minutes' rates and commit latency (`stats.rs`).
    stats: std::sync::Arc<crate::stats::Stats>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("node_id", &self.context.node_id)
            .finish_non_exhaustive()
    }
}

impl Api {
    pub fn new(
        context: NodeContext,
        peers: NetworkFactory,
        cluster_id: u64,
        request_timeout: Duration,
        stats: std::sync::Arc<crate::stats::Stats>,
    ) -> Self {
        Api {
            stats,
            cluster: ClusterService::new(context.clone()),
            context,
            peers,
            cluster_id,
            forward_timeout: request_timeout + Duration::from_secs(1),
            event_streams: std::sync::Arc::new(tokio::sync::Semaphore::new(
                events::MAX_EVENT_STREAMS,
            )),
        }
    }

    /// The feed of `GET /api/v1/events` (see `events.rs`), or why there is none.
    pub fn events(
        &self,
        credential: ForwardedCredential,
        query: &str,
    ) -> Result<
        impl futures::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>
        + use<>,
        ApiReply,
    > {
        events::open(
            &self.context,
            &self.event_streams,
            &Credential::from(credential),
            query,
        )
    }

    pub fn node_id(&self) -> u64 {
        self.context.node_id
    }

    /// Answers `call`; `forwarded` when another member sent it here.
    pub async fn answer(&self, call: ApiCall, forwarded: bool) -> ApiReply {
        let route = match Route::parse(call.post, &call.path, &call.query) {
            Ok(route) => route,
            Err(refusal) => return ApiReply::refused(&refusal),
        };
        if !route.local()
            && let Some(redirect) = self.context.proposer.redirect_to_leader()
        {
            return match redirect {
                ApiError::NotLeader { leader_id, .. } if !forwarded => {
                    self.forward(leader_id, &call).await
                }
                other => ApiReply::from(other),
            };
        }
        let credential = Credential::from(call.credential);
        let caller = match self.context.resolve(&credential) {
            Ok(caller) => caller,
            Err(error) => return ApiReply::from(error),
        };
        match self.run(route, &caller, &credential).await {
            Ok(value) => ApiReply::json(200, &value),
            Err(status) => ApiReply::from_status(&status),
        }
    }

    async fn run(
        &self,
        route: Route,
        caller: &Caller,
        credential: &Credential,
    ) -> Result<serde_json::Value, Status> {
        let leases = LeaseService(self.context.clone());
        match route {
            Route::Node => {
                let status = self
                    .cluster
                    .status(as_caller(StatusRequest {}, caller, credential))
                    .await?;
                Ok(views::node(&status.into_inner()))
            }
            Route::Stats => {
                let revision = self.context.state.read(|d| d.state.last_applied());
                Ok(views::stats(
                    &self.stats.samples(),
                    &self.context.proposer.header(revision),
                ))
            }
            Route::Cluster => {
                let status = self
                    .cluster
                    .status(as_caller(StatusRequest {}, caller, credential))
                    .await?;
                let metrics = self
                    .context
                    .proposer
                    .raft()
                    .metrics()
                    .borrow_watched()
                    .clone();
                Ok(views::cluster(&status.into_inner(), &metrics))
            }
            Route::Leases { after, limit } => {
                let page = leases
                    .leases(as_caller(
                        LeaseListRequest {
                            after_id: after,
                            limit,
                        },
                        caller,
                        credential,
                    ))
                    .await?;
                Ok(views::leases(&page.into_inner()))
            }
            Route::Lease { id } => {
                let lease = leases
                    .time_to_live(as_caller(
                        LeaseTimeToLiveRequest { id, keys: true },
                        caller,
                        credential,
                    ))
                    .await?
                    .into_inner();
                if !lease.found {
                    return Err(Status::not_found(format!(
                        "lease {id} not found: it never existed or has ended"
                    )));
                }
                Ok(views::lease(&lease))
            }
            Route::Revoke { id } => {
                let revoked = leases
                    .revoke(as_caller(
                        LeaseRevokeRequest {
                            id,
                            ..LeaseRevokeRequest::default()
                        },
                        caller,
                        credential,
                    ))
                    .await?;
                Ok(views::revoked(id, &revoked.into_inner()))
            }
            Route::Locks {
                prefix,
                after,
                limit,
            } => {
                let page = LockService(self.context.clone())
                    .lock_list(as_caller(
                        LockListRequest {
                            after_name: after,
                            limit,
                            prefix,
                        },
                        caller,
                        credential,
                    ))
                    .await?;
                Ok(views::locks(&page.into_inner()))
            }
            Route::Presence { group, limit } => {
                let members = KvService(self.context.clone())
                    .range(as_caller(
                        RangeRequest {
                            key: presence_prefix(&group).into_bytes(),
                            prefix: true,
                            limit,
                            ..RangeRequest::default()
                        },
                        caller,
                        credential,
                    ))
                    .await?;
                Ok(views::presence(&group, &members.into_inner()))
            }
        }
    }

    /// Sends `call` to the leader over the peer link and relays its answer.
    async fn forward(&self, leader_id: u64, call: &ApiCall) -> ApiReply {
        let member = {
            // Cloned out at once: the metrics guard must not be held.
            let metrics = self.context.proposer.raft().metrics();
            let metrics = metrics.borrow_watched();
            metrics
                .membership_config
                .membership()
                .get_node(&leader_id)
                .cloned()
        };
        let unreachable = |why: String| {
            ApiReply::error(
                503,
                "UNAVAILABLE",
                &format!(
                    "node {} cannot reach the Raft leader (node {leader_id}) to answer: {why}; \
                     retry, or ask the leader",
                    self.context.node_id
                ),
            )
        };
        let Some(member) = member else {
            return unreachable("it is not in this member's membership".into());
        };
        let Some(mut client) = self.peers.api_client(leader_id, &member) else {
            return unreachable(format!("invalid peer address {}", member.peer_addr));
        };
        let payload = match zaris_core::codec::encode(call) {
            Ok(payload) => payload,
            Err(e) => return unreachable(e.to_string()),
        };
        let message = RaftMessage {
            cluster_id: self.cluster_id,
            payload,
        };
        let answer = match tokio::time::timeout(self.forward_timeout, client.api(message)).await {
            Err(_) => return unreachable(format!("no answer in {:?}", self.forward_timeout)),
            Ok(Err(status)) => return unreachable(status.message().to_owned()),
            Ok(Ok(answer)) => answer.into_inner(),
        };
        zaris_core::codec::decode(&answer.payload, crate::network::MAX_RAFT_MESSAGE_BYTES)
            .unwrap_or_else(|e| unreachable(format!("undecodable answer: {e}")))
    }
}

/// `message` as a gRPC request from `caller`, as the Authenticate interceptor would have
/// passed it on.
fn as_caller<T>(message: T, caller: &Caller, credential: &Credential) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(caller.clone());
    request.extensions_mut().insert(credential.clone());
    request
}

/// The keys of presence group `group` (as `zaris_client::Presence` writes them).
fn presence_prefix(group: &str) -> String {
    format!("presence/{group}/")
}
