//! [`Client`]: options, connect, request ids, and the retry loop every unary call goes through
//! (where each retry goes is [`crate::routing`]'s, shared with the keepalive and watch streams).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;
use tonic::transport::Channel;
use zaris_proto::v1::cluster_client::ClusterClient;
use zaris_proto::v1::kv_client::KvClient;
use zaris_proto::v1::lease_client::LeaseClient;
use zaris_proto::v1::lock_client::LockClient;
use zaris_proto::v1::watch_client::WatchClient;
use zaris_proto::v1::{
    ErrorCode, Outcome, RequestId, ResponseHeader, StatusRequest, StatusResponse,
};
use zaris_types::Revision;

use crate::ClientTls;
use crate::auth::BearerToken;
use crate::endpoint::{Connect, Endpoints, Target, parse_endpoint};
use crate::error::{Error, RpcError};
use crate::keepalive::Slot;
use crate::routing::{Next, Router};

/// Default for [`ClientOptions::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default for [`ClientOptions::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for [`ClientOptions::initial_backoff`].
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(50);
/// Default for [`ClientOptions::max_backoff`].
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Default for [`ClientOptions::drift_permille`]: 5% of a lease's TTL.
pub const DEFAULT_DRIFT_PERMILLE: u32 = 50;

/// Stand-in for "no deadline" (an `Instant` cannot be pushed arbitrarily far).
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How a [`Client`] connects, waits and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Limit on establishing one TCP/HTTP2 connection.
    pub connect_timeout: Duration,
    /// Limit on one call, end to end: every attempt, redirect and backoff included (calls that
    /// wait on purpose, such as a lock with a wait timeout, get their wait added). After it the
    /// call fails with [`Error::DeadlineExhausted`]. One attempt that gets no answer within half
    /// of it is abandoned and the call moves on to another member, so a member that hangs cannot
    /// use up the whole call.
    pub timeout: Duration,
    /// First delay before retrying on another endpoint.
    pub initial_backoff: Duration,
    /// Cap on the delay between retries (it doubles from `initial_backoff`).
    pub max_backoff: Duration,
    /// Share of a lease's TTL, in parts per thousand, that a [`Lease`](crate::Lease) keeps as a
    /// margin for the client's clock running slower than the leader's: the safe deadline is
    /// `send time of the last acknowledged renewal + TTL * (1000 - drift_permille) / 1000`.
    pub drift_permille: u32,
    /// TLS to every member; `None`: plaintext.
    pub tls: Option<ClientTls>,
    /// Sent with every call, where the cluster checks access (a token travels in the clear
    /// without TLS: use it over TLS, or on loopback only).
    pub token: Option<BearerToken>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            drift_permille: DEFAULT_DRIFT_PERMILLE,
            tls: None,
            token: None,
        }
    }
}

impl ClientOptions {
    /// Sets [`ClientOptions::connect_timeout`].
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`ClientOptions::timeout`], the end-to-end limit on one call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`ClientOptions::drift_permille`] (values above 1000 make every lease expire at once).
    pub fn with_drift_permille(mut self, drift_permille: u32) -> Self {
        self.drift_permille = drift_permille;
        self
    }

    /// Speaks TLS to every member ([`ClientOptions::tls`]).
    pub fn with_tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Identifies the client with a bearer token ([`ClientOptions::token`]).
    pub fn with_token(mut self, token: BearerToken) -> Self {
        self.token = Some(token);
        self
    }

    /// Sets the backoff between retries: `initial`, doubling up to `max`.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// The longest one attempt may go unanswered before the call tries another member: half of
    /// [`ClientOptions::timeout`].
    pub fn attempt_timeout(&self) -> Duration {
        (self.timeout / 2).max(Duration::from_millis(1))
    }
}

/// A handle on a Zaris cluster. Cheap to clone: clones share connections, the cached Raft
/// leader and the request-id sequence.
///
/// Every call goes to the cached Raft leader (else to the first reachable endpoint), follows
/// NOT_LEADER redirects, and rotates through the endpoints with backoff while no leader answers,
/// until [`ClientOptions::timeout`]. Reads are always retried; writes are retried after an
/// indeterminate failure only when they carry a [`RequestId`], which this client attaches to
/// every write that supports one (Put, DeleteRange, Txn, Grant, Revoke, Unlock).
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: ClientOptions,
    endpoints: Endpoints,
    /// Random per client; names this client in every [`RequestId`].
    client_id: u64,
    /// Last [`RequestId::seq`] handed out.
    request_seq: AtomicU64,
    /// Last `seq` used on a KeepAlive stream.
    keepalive_seq: AtomicU64,
    /// First non-zero cluster id seen in a response; 0 until then.
    cluster_id: AtomicU64,
    /// The highest revision seen in any response header: committed, so a request sent after
    /// seeing it cannot apply at or below it ([`RequestId::seen_revision`]).
    seen_revision: AtomicU64,
    /// The background keepalive task of this client's [`Lease`](crate::Lease) handles.
    keepalive: Slot,
}

/// The largest response this client accepts, in bytes: what a member may send (a Range page or
/// a transaction's reads, or one watch revision such as a prefix delete or a large expiry), not
/// tonic's default of 4 MiB, which would refuse such an answer on every member alike.
const MAX_RESPONSE_BYTES: usize = 512 * 1024 * 1024;

/// The KV service at `channel`, accepting answers up to [`MAX_RESPONSE_BYTES`].
pub(crate) fn kv_service(channel: Channel) -> KvClient<Channel> {
    KvClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES)
}

/// The Lease service at `channel`, accepting answers up to [`MAX_RESPONSE_BYTES`].
pub(crate) fn lease_service(channel: Channel) -> LeaseClient<Channel> {
    LeaseClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES)
}

/// The Lock service at `channel`, accepting answers up to [`MAX_RESPONSE_BYTES`].
pub(crate) fn lock_service(channel: Channel) -> LockClient<Channel> {
    LockClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES)
}

/// The Watch service at `channel`, accepting answers up to [`MAX_RESPONSE_BYTES`].
pub(crate) fn watch_service(channel: Channel) -> WatchClient<Channel> {
    WatchClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES)
}

/// How the retry loop may treat one kind of call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSpec {
    /// Method name, for logs.
    pub(crate) method: &'static str,
    /// Safe to resend after an indeterminate failure (a read, an idempotent write, or a write
    /// carrying a request id).
    pub(crate) retry_indeterminate: bool,
    /// One attempt may use the whole call timeout (a call that is never resent after an
    /// indeterminate failure, and whose server-side wait has no known bound).
    pub(crate) whole_budget_attempt: bool,
    /// Extra time the call and each attempt may take on top of [`ClientOptions::timeout`] (a wait
    /// the caller asked for).
    pub(crate) extra_wait: Duration,
    /// The request's id was made for this call, so a REQUEST_ID_FORGOTTEN with no earlier attempt
    /// of this call that may have applied means no attempt ever did, and the request may be
    /// re-dated and sent again. False for an id the caller supplied: it may be the retry of an
    /// earlier call that applied.
    pub(crate) id_made_here: bool,
}

impl CallSpec {
    /// A read, or a write that is safe to resend.
    pub(crate) const fn idempotent(method: &'static str) -> Self {
        CallSpec {
            method,
            retry_indeterminate: true,
            whole_budget_attempt: false,
            extra_wait: Duration::ZERO,
            id_made_here: true,
        }
    }

    /// A write that may apply twice if resent after an indeterminate failure: never resent then,
    /// so its one attempt may take the whole call timeout.
    pub(crate) const fn non_idempotent(method: &'static str) -> Self {
        CallSpec {
            method,
            retry_indeterminate: false,
            whole_budget_attempt: true,
            extra_wait: Duration::ZERO,
            id_made_here: true,
        }
    }

    /// One attempt may take the whole call timeout (a call whose server side takes long before
    /// it answers, such as encoding a snapshot of a large state).
    pub(crate) const fn with_whole_budget(mut self) -> Self {
        self.whole_budget_attempt = true;
        self
    }

    pub(crate) const fn with_extra_wait(mut self, wait: Duration) -> Self {
        self.extra_wait = wait;
        self
    }

    /// The request carries an id the caller supplied (see [`CallSpec::id_made_here`]).
    pub(crate) const fn with_callers_id(mut self) -> Self {
        self.id_made_here = false;
        self
    }
}

/// For a REQUEST_ID_FORGOTTEN that says nothing was applied: the revision the table has
/// forgotten through.
fn forgotten(err: &RpcError) -> Option<u64> {
    let detail = err.detail()?;
    (ErrorCode::try_from(detail.code) == Ok(ErrorCode::RequestIdForgotten)
        && detail.applied_revision == 0)
        .then_some(detail.compact_revision)
}

/// Requests whose [`RequestId`] the retry loop may re-date (see [`Client::call`]).
pub(crate) trait Reissue {
    /// Marks the request as issued after `revision`; false if it carries no request id or
    /// already was.
    fn reissue(&mut self, revision: u64) -> bool;
}

macro_rules! reissue {
    (with_id: $($with:ty),* ; without: $($without:ty),* $(,)?) => {
        $(impl Reissue for $with {
            fn reissue(&mut self, revision: u64) -> bool {
                match self.request_id.as_mut() {
                    Some(id) if id.seen_revision < revision => {
                        id.seen_revision = revision;
                        true
                    }
                    _ => false,
                }
            }
        })*
        $(impl Reissue for $without {
            fn reissue(&mut self, _: u64) -> bool {
                false
            }
        })*
    };
}

reissue!(
    with_id: pb::PutRequest, pb::DeleteRangeRequest, pb::TxnRequest, pb::LeaseGrantRequest,
        pb::LeaseRevokeRequest, pb::UnlockRequest;
    without: pb::RangeRequest, pb::LeaseKeepAliveRequest, pb::LeaseTimeToLiveRequest,
        pb::LeaseListRequest, pb::LockRequest, pb::LockStatusRequest, pb::LockListRequest,
        pb::StatusRequest,
        pb::MemberListRequest, pb::MemberAddRequest, pb::MemberPromoteRequest,
        pb::MemberRemoveRequest, pb::SnapshotRequest, pb::WhoAmIRequest, pb::AuthStatusRequest,
        pb::AuthChangeRequest,
);

/// Response messages whose header the client checks (cluster id).
pub(crate) trait HasHeader {
    fn header(&self) -> Option<&ResponseHeader>;
}

macro_rules! has_header {
    ($($ty:ty),* $(,)?) => {
        $(impl HasHeader for $ty {
            fn header(&self) -> Option<&ResponseHeader> {
                self.header.as_ref()
            }
        })*
    };
}

use zaris_proto::v1 as pb;
has_header!(
    pb::RangeResponse,
    pb::PutResponse,
    pb::DeleteRangeResponse,
    pb::TxnResponse,
    pb::LeaseGrantResponse,
    pb::LeaseRevokeResponse,
    pb::LeaseKeepAliveResponse,
    pb::LeaseTimeToLiveResponse,
    pb::LeaseListResponse,
    pb::LockResponse,
    pb::UnlockResponse,
    pb::LockStatusResponse,
    pb::LockListResponse,
    pb::StatusResponse,
    pb::MemberListResponse,
    pb::MemberAddResponse,
    pb::MemberPromoteResponse,
    pb::MemberRemoveResponse,
    pb::WatchResponse,
    pb::WhoAmIResponse,
    pb::AuthStatusResponse,
    pb::AuthChangeResponse,
);

impl Client {
    /// Connects to the cluster serving at `endpoints` (`host:port` or `http://host:port`), with
    /// default [`ClientOptions`]: tries the endpoints in order until one member answers (any
    /// member, leader or not), and fails with [`Error::Unreachable`] if none does within twice
    /// [`ClientOptions::connect_timeout`] each. A member that refuses the client's credentials
    /// (UNAUTHENTICATED, PERMISSION_DENIED) fails the connect with that error at once. Later
    /// calls reconnect on their own.
    pub async fn connect(
        endpoints: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Client, Error> {
        Client::connect_with(endpoints, ClientOptions::default()).await
    }

    /// Like [`Client::connect`], with explicit options.
    pub async fn connect_with(
        endpoints: impl IntoIterator<Item = impl Into<String>>,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        let client = Client::lazy(endpoints, options)?;
        client.dial().await?;
        Ok(client)
    }

    /// A client for the cluster at `endpoints` that connects on first use: fails only on
    /// malformed endpoints, never because a member is down. For programs that start before the
    /// cluster does. Must be called inside a Tokio runtime.
    pub fn lazy(
        endpoints: impl IntoIterator<Item = impl Into<String>>,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        let addresses = endpoints
            .into_iter()
            .map(|raw| parse_endpoint(&raw.into()))
            .collect::<Result<Vec<_>, _>>()?;
        let endpoints = Endpoints::new(
            addresses,
            Connect {
                timeout: options.connect_timeout,
                tls: options.tls.clone(),
            },
        )?;
        // 0 never names anything on the wire; keep the id non-zero.
        let client_id = rand::random::<u64>().max(1);
        Ok(Client {
            inner: Arc::new(Inner {
                options,
                endpoints,
                client_id,
                request_seq: AtomicU64::new(0),
                keepalive_seq: AtomicU64::new(0),
                cluster_id: AtomicU64::new(0),
                seen_revision: AtomicU64::new(0),
                keepalive: Slot::default(),
            }),
        })
    }

    /// One Status to each endpoint in turn until a member answers; that member's view of the
    /// Raft leader seeds the leader cache.
    async fn dial(&self) -> Result<(), Error> {
        let endpoints = &self.inner.endpoints;
        // A connection, then one Status from a member that has nothing to wait for: twice the
        // connect timeout is plenty, and keeps "nothing answers" quick to say.
        let timeout = self
            .inner
            .options
            .connect_timeout
            .saturating_mul(2)
            .min(self.inner.options.timeout);
        let mut last = None;
        for _ in 0..endpoints.len() {
            let target = endpoints.pick();
            let err = match self.status_at(&target, timeout).await {
                Ok(Ok(response)) => {
                    let status = response.into_inner();
                    self.check_cluster(&status, &target)?;
                    // Applied there, so committed: the first write of a new client is then
                    // issued after it, not after revision 0, which the de-duplication table of a
                    // cluster that ever forgot a request id would refuse.
                    if let Some(header) = &status.header {
                        self.observe_revision(header.revision);
                    }
                    endpoints.succeeded(target.index);
                    // A follower's view of the leader saves the first call a redirect. An
                    // endpoint that is the leader stays the way in, whatever address the leader
                    // advertises (the endpoint may be a proxy or a NAT address).
                    if status.raft_leader_id != status.member_id
                        && let Some(leader) = status
                            .members
                            .iter()
                            .find(|member| member.id == status.raft_leader_id)
                    {
                        endpoints.redirect(leader.id, &leader.address);
                    }
                    return Ok(());
                }
                // A member that refuses who we are answered: the cluster is reachable, and every
                // member would say the same.
                Ok(Err(status))
                    if matches!(
                        status.code(),
                        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
                    ) =>
                {
                    return Err(RpcError::from_status(&status, target.authority.clone()).into());
                }
                Ok(Err(status)) => {
                    let err = RpcError::from_status(&status, target.authority.clone());
                    // So does a member that says it requires TLS.
                    if err.is_plaintext_refused() {
                        return Err(err.into());
                    }
                    err
                }
                Err(_elapsed) => RpcError::timed_out(timeout, target.authority.clone()),
            };
            tracing::debug!(endpoint = %target.authority, error = %err, "endpoint did not answer");
            endpoints.failed(target.index);
            last = Some(err);
        }
        Err(Error::Unreachable {
            endpoints: endpoints.authorities(),
            last: Box::new(match last {
                Some(err) => err.into(),
                None => Error::InvalidArgument {
                    reason: "no endpoints".to_owned(),
                },
            }),
        })
    }

    /// The options this client was built with.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// The endpoints (`host:port`) this client knows: the ones given, plus leader addresses
    /// learned from redirects.
    pub fn endpoints(&self) -> Vec<String> {
        self.inner.endpoints.authorities()
    }

    /// `host:port` of the cached Raft leader, if one is cached.
    pub fn cached_raft_leader(&self) -> Option<String> {
        self.inner.endpoints.raft_leader()
    }

    /// The random id naming this client in its request ids.
    pub fn client_id(&self) -> u64 {
        self.inner.client_id
    }

    /// A fresh request id for one logical write; reuse it for every retry of that write. It is
    /// issued after the highest revision this client has seen.
    pub fn next_request_id(&self) -> RequestId {
        RequestId {
            client_id: self.inner.client_id,
            seq: self.inner.request_seq.fetch_add(1, Ordering::Relaxed) + 1,
            seen_revision: self.seen_revision().get(),
        }
    }

    /// The highest revision this client has seen in a response.
    pub fn seen_revision(&self) -> Revision {
        Revision::new(self.inner.seen_revision.load(Ordering::Acquire))
    }

    pub(crate) fn observe_revision(&self, revision: u64) {
        self.inner
            .seen_revision
            .fetch_max(revision, Ordering::AcqRel);
    }

    pub(crate) fn endpoints_ref(&self) -> &Endpoints {
        &self.inner.endpoints
    }

    pub(crate) fn keepalive_slot(&self) -> &Slot {
        &self.inner.keepalive
    }

    /// A fresh `seq` for a KeepAlive request.
    pub(crate) fn next_keepalive_seq(&self) -> u64 {
        self.inner.keepalive_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Sends `request` with `send` until it succeeds, fails for good, or the deadline passes.
    ///
    /// `send` performs one attempt on a channel; the request it gets already has the attempt's
    /// gRPC timeout set. Every attempt sends the same request (so a request id is reused).
    pub(crate) async fn call<Req, Resp, F, Fut>(
        &self,
        spec: CallSpec,
        mut request: Req,
        mut send: F,
    ) -> Result<Resp, Error>
    where
        Req: Clone + Reissue,
        Resp: HasHeader,
        F: FnMut(Channel, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        let options = &self.inner.options;
        let endpoints = &self.inner.endpoints;
        let attempt_limit = if spec.whole_budget_attempt {
            options.timeout
        } else {
            options.attempt_timeout()
        }
        .saturating_add(spec.extra_wait);
        let started = Instant::now();
        let budget = options.timeout.saturating_add(spec.extra_wait);
        let deadline = started.checked_add(budget).unwrap_or(started + FAR_FUTURE);
        let mut router = Router::new(options);
        let mut attempts: u32 = 0;
        let mut maybe_applied = false;
        loop {
            let target = endpoints.pick();
            let timeout = attempt_limit
                .min(deadline.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1));
            let mut attempt = tonic::Request::new(request.clone());
            attempt.set_timeout(timeout);
            self.authorize(&mut attempt);
            attempts = attempts.saturating_add(1);
            let result = tokio::time::timeout(timeout, send(target.channel.clone(), attempt)).await;
            let mut err = match result {
                Ok(Ok(response)) => {
                    let response = response.into_inner();
                    self.check_cluster(&response, &target)?;
                    if let Some(header) = response.header() {
                        self.observe_revision(header.revision);
                    }
                    router.succeeded(endpoints, target.index);
                    return Ok(response);
                }
                Ok(Err(status)) => RpcError::from_status(&status, target.authority.clone()),
                Err(_elapsed) => RpcError::timed_out(timeout, target.authority.clone()),
            };
            if spec.id_made_here
                && !maybe_applied
                && let Some(forgotten_through) = forgotten(&err)
            {
                // The de-duplication table refused the request because it may have forgotten
                // an earlier attempt. No earlier attempt can have been applied, so this one is
                // the first to reach the log: send it again as issued after a revision committed
                // now. Not merely after `forgotten_through`: under a steady write load the table
                // forgets more while the resend travels, and would refuse it again, round after
                // round, until the deadline.
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                let committed = self
                    .applied_revision(&target, timeout.min(left))
                    .await
                    .unwrap_or(0);
                let reissued_at = forgotten_through
                    .max(committed)
                    .max(self.seen_revision().get());
                if request.reissue(reissued_at) {
                    self.observe_revision(reissued_at);
                    if Instant::now() < deadline {
                        continue;
                    }
                    return Err(Error::DeadlineExhausted {
                        attempts,
                        elapsed: started.elapsed(),
                        last: Box::new(err.into()),
                        outcome: Outcome::Definite,
                    });
                }
            }
            if maybe_applied {
                err.make_indeterminate();
            }
            maybe_applied |= !err.is_definite();

            if !err.is_definite() && !spec.retry_indeterminate {
                return Err(err.into());
            }
            let delay = match router.failed(endpoints, target.index, &err) {
                Next::GiveUp => return Err(err.into()),
                Next::Retry(delay) => delay,
            };
            let elapsed = started.elapsed();
            if Instant::now()
                .checked_add(delay)
                .is_none_or(|resume| resume >= deadline)
            {
                tracing::debug!(
                    method = spec.method,
                    attempts,
                    error = %err,
                    "giving up: retry deadline reached"
                );
                return Err(Error::DeadlineExhausted {
                    attempts,
                    elapsed,
                    last: Box::new(err.into()),
                    outcome: if maybe_applied {
                        Outcome::Indeterminate
                    } else {
                        Outcome::Definite
                    },
                });
            }
            tracing::debug!(
                method = spec.method,
                attempt = attempts,
                endpoint = %target.authority,
                error = %err,
                ?delay,
                "retrying"
            );
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
    }

    /// The revision the member at `target` has applied (so committed), from a Status; `None` if
    /// it does not answer in `timeout` or answers for another cluster.
    async fn applied_revision(&self, target: &Target, timeout: Duration) -> Option<u64> {
        let status = self
            .status_at(target, timeout)
            .await
            .ok()?
            .ok()?
            .into_inner();
        self.check_cluster(&status, target).ok()?;
        status.header.map(|header| header.revision)
    }

    /// One Status call to the member at `target`, within `timeout`.
    async fn status_at(
        &self,
        target: &Target,
        timeout: Duration,
    ) -> Result<Result<tonic::Response<StatusResponse>, Status>, tokio::time::error::Elapsed> {
        let mut request = tonic::Request::new(StatusRequest {});
        request.set_timeout(timeout);
        self.authorize(&mut request);
        tokio::time::timeout(
            timeout,
            ClusterClient::new(target.channel.clone()).status(request),
        )
        .await
    }

    /// Remembers the first cluster id seen, and refuses answers from any other cluster; notes
    /// which member answered at the endpoint (so a redirect to that member's id can use it).
    pub(crate) fn check_cluster<Resp: HasHeader>(
        &self,
        response: &Resp,
        target: &Target,
    ) -> Result<(), Error> {
        let endpoint = target.authority.as_str();
        if let Some(member_id) = response.header().map(|h| h.member_id) {
            self.inner.endpoints.answered_as(target.index, member_id);
        }
        let Some(actual) = response
            .header()
            .map(|h| h.cluster_id)
            .filter(|id| *id != 0)
        else {
            return Ok(());
        };
        match self
            .inner
            .cluster_id
            .compare_exchange(0, actual, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(expected) if expected == actual => Ok(()),
            Err(expected) => Err(Error::ClusterMismatch {
                expected,
                actual,
                endpoint: endpoint.to_owned(),
            }),
        }
    }
}

/// The revision a response reflects (zero for a response without a header).
pub(crate) fn header_revision(header: Option<&ResponseHeader>) -> Revision {
    Revision::new(header.map_or(0, |h| h.revision))
}

/// A response that breaks the contract (for example a result value this client does not know),
/// from the member named in `header`.
pub(crate) fn unexpected(header: Option<&ResponseHeader>, reason: impl Into<String>) -> Error {
    Error::Protocol {
        endpoint: match header {
            Some(header) if header.member_id != 0 => format!("member {}", header.member_id),
            _ => "the cluster".to_owned(),
        },
        reason: reason.into(),
    }
}

/// A duration as whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn request_ids_share_the_client_id_and_increase() {
        let client = match Client::lazy(["127.0.0.1:1"], ClientOptions::default()) {
            Ok(client) => client,
            Err(err) => panic!("{err}"),
        };
        let clone = client.clone();
        let a = client.next_request_id();
        let b = clone.next_request_id();
        assert_ne!(a.client_id, 0);
        assert_eq!(a.client_id, b.client_id);
        assert_eq!((a.seq, b.seq), (1, 2));
        let other = match Client::lazy(["127.0.0.1:1"], ClientOptions::default()) {
            Ok(client) => client,
            Err(err) => panic!("{err}"),
        };
        // 2^-64 chance of a false failure.
        assert_ne!(other.client_id(), client.client_id());
    }

    #[tokio::test]
    async fn connect_rejects_bad_endpoints_before_any_io() {
        let err = match Client::connect(["127.0.0.1:1", "nope"]).await {
            Ok(_) => panic!("accepted a bad endpoint"),
            Err(err) => err,
        };
        assert!(matches!(err, Error::InvalidEndpoint { .. }), "{err}");
        assert!(err.is_definite());
        let none: [&str; 0] = [];
        assert!(Client::connect(none).await.is_err());
    }

    #[test]
    fn millis_saturates() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
