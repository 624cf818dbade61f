//! The client's routing and retry rules, against in-process fake members that answer with
//! scripted statuses (no Raft, no state machine): redirects, rotation, request-id reuse, outcome
//! reporting, keepalive seq matching, cluster-id checks, and a lock release whose answer is lost.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;
use tonic::{Code, Request, Response, Status};
use zaris_client::proto::cluster_server::{Cluster, ClusterServer};
use zaris_client::proto::kv_server::{Kv, KvServer};
use zaris_client::proto::lease_server::{Lease, LeaseServer};
use zaris_client::proto::lock_server::{Lock, LockServer};
use zaris_client::proto::*;
use zaris_client::{Client, ClientOptions, Error, LeaseId, PutOptions, Renewed, Revision};

/// How a fake member answers writes.
#[derive(Debug, Clone)]
enum Behavior {
    /// Serves every call.
    Leader,
    /// Answers NOT_LEADER pointing at this address.
    Follower(String),
    /// Answers NOT_LEADER naming member `.0` as the leader, at address `.1`.
    FollowerOf(u64, String),
    /// Answers NO_LEADER.
    Leaderless,
    /// Answers LEADERSHIP_LOST (indeterminate) this many times, then serves.
    LoseLeadership(u32),
    /// Like a de-duplication table that forgot every id applied up to this revision: a Put
    /// whose request id is issued before it is refused with REQUEST_ID_FORGOTTEN, and the table
    /// then forgets `advance` revisions more (other clients' writes evict older ids meanwhile).
    /// The first `lose` calls answer LEADERSHIP_LOST first.
    Forgetful {
        forgotten_through: u64,
        lose: u32,
        advance: u64,
    },
}

#[derive(Debug)]
struct State {
    behavior: Behavior,
    cluster_id: u64,
    /// The revision every response header names (the member's applied revision).
    revision: u64,
    /// Request ids of the Put requests received, in order.
    put_ids: Vec<Option<RequestId>>,
    /// Number of calls received, of any kind.
    calls: u32,
    /// What Snapshot sends after its first message: the data chunks (the first message
    /// announces the length and SHA-256 of `SNAPSHOT_DATA`).
    snapshot_chunks: Vec<Vec<u8>>,
    /// The one lock this member keeps, whatever its name: (holder lease, token).
    lock: Option<(u64, u64)>,
    /// While set, a release (an Unlock with a token) is answered LEADERSHIP_LOST and kept, not
    /// applied, in `late_releases` (a leader deposed with the entry in its log, which a later
    /// leader may still commit). The next Lock call clears it.
    lose_releases: bool,
    /// Releases lost so far, as (lease, token).
    late_releases: Vec<(u64, u64)>,
    /// While set, a Lock request's entry is held up this long before it applies (a paused
    /// leader, or a request held up in the network): the call is not answered before.
    hold_locks: Option<Duration>,
    /// With `hold_locks`: how many more Lock requests to hold up (`None`: all of them).
    hold_only: Option<u32>,
    /// Lock requests held up and not applied yet.
    held_locks: u32,
    /// Each lease's last Unlock, by revision: a Lock sent before it is OVERTAKEN.
    unlocked_at: BTreeMap<u64, u64>,
}

/// The data a fake member's snapshot announces.
const SNAPSHOT_DATA: &[u8] = b"the whole state, in two chunks";

#[derive(Debug, Clone)]
struct FakeMember {
    id: u64,
    state: Arc<Mutex<State>>,
}

impl FakeMember {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set_behavior(&self, behavior: Behavior) {
        self.state().behavior = behavior;
    }

    fn calls(&self) -> u32 {
        self.state().calls
    }

    /// Applies the releases answered as lost, as a new leader committing them late would.
    fn commit_late_releases(&self) {
        let mut state = self.state();
        let late = std::mem::take(&mut state.late_releases);
        for (lease, token) in late {
            let _result = unlock_in(&mut state, lease, token);
        }
    }

    fn header(&self) -> Option<ResponseHeader> {
        let state = self.state();
        Some(ResponseHeader {
            cluster_id: state.cluster_id,
            member_id: self.id,
            revision: state.revision,
            raft_term: 1,
        })
    }

    /// Counts the call and answers per the behavior: `Ok` = serve it.
    fn admit(&self) -> Result<(), Status> {
        let mut state = self.state();
        state.calls += 1;
        let seen_revision = state
            .put_ids
            .last()
            .copied()
            .flatten()
            .map_or(0, |id| id.seen_revision);
        match &mut state.behavior {
            Behavior::Forgetful { lose, .. } if *lose > 0 => {
                *lose -= 1;
                Err(ErrorDetail::new(
                    ErrorCode::LeadershipLost,
                    Outcome::Indeterminate,
                    "leadership lost before the entry committed",
                )
                .into_status())
            }
            Behavior::Forgetful {
                forgotten_through,
                advance,
                ..
            } if seen_revision < *forgotten_through => {
                let mut detail = ErrorDetail::new(
                    ErrorCode::RequestIdForgotten,
                    Outcome::Definite,
                    "this request id may have been applied and forgotten",
                );
                detail.compact_revision = *forgotten_through;
                *forgotten_through += *advance;
                Err(detail.into_status())
            }
            Behavior::Forgetful { .. } => Ok(()),
            Behavior::Leader => Ok(()),
            Behavior::Follower(address) => Err(zaris_proto_not_leader(99, address)),
            Behavior::FollowerOf(leader_id, address) => {
                Err(zaris_proto_not_leader(*leader_id, address))
            }
            Behavior::Leaderless => Err(no_leader()),
            Behavior::LoseLeadership(0) => Ok(()),
            Behavior::LoseLeadership(left) => {
                *left -= 1;
                Err(ErrorDetail::new(
                    ErrorCode::LeadershipLost,
                    Outcome::Indeterminate,
                    "leadership lost before the entry committed",
                )
                .into_status())
            }
        }
    }
}

/// An Unlock applied to the fake's lock: with token 0 a withdrawal (nobody ever waits here).
fn unlock_in(state: &mut State, lease: u64, token: u64) -> (UnlockResult, u64) {
    // Every Unlock is an entry of its own; a withdrawal counts whatever it finds, a release only
    // if it releases.
    state.revision += 1;
    if token == 0 {
        state.unlocked_at.insert(lease, state.revision);
    }
    match state.lock {
        Some((holder, held_with)) if holder == lease && token == 0 => {
            (UnlockResult::Held, held_with)
        }
        Some((holder, held_with)) if holder == lease && held_with == token => {
            state.lock = None;
            state.unlocked_at.insert(lease, state.revision);
            (UnlockResult::Released, 0)
        }
        _ => (UnlockResult::NotHolder, 0),
    }
}

/// Applies a Lock of `lease`: (result, token, holder lease).
fn lock_in(state: &mut State, lease: u64, sent_after: Option<u64>) -> (LockResult, u64, u64) {
    state.revision += 1;
    if let (Some(sent_after), Some(unlocked)) = (sent_after, state.unlocked_at.get(&lease))
        && *unlocked > sent_after
    {
        return (LockResult::Overtaken, 0, 0);
    }
    match state.lock {
        Some((holder, token)) if holder == lease => (LockResult::Held, token, 0),
        Some((holder, _)) => (LockResult::Busy, 0, holder),
        None => {
            let token = state.revision;
            state.lock = Some((lease, token));
            (LockResult::Held, token, 0)
        }
    }
}

fn zaris_proto_not_leader(leader_id: u64, address: &str) -> Status {
    let mut detail = ErrorDetail::new(ErrorCode::NotLeader, Outcome::Definite, "not the leader");
    detail.raft_leader_id = leader_id;
    detail.raft_leader_address = address.to_owned();
    detail.into_status()
}

fn no_leader() -> Status {
    ErrorDetail::new(
        ErrorCode::NoLeader,
        Outcome::Definite,
        "no Raft leader is known",
    )
    .into_status()
}

#[tonic::async_trait]
impl Kv for FakeMember {
    async fn range(&self, _: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        self.admit()?;
        Ok(Response::new(RangeResponse {
            header: self.header(),
            ..RangeResponse::default()
        }))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        self.state().put_ids.push(request.get_ref().request_id);
        self.admit()?;
        Ok(Response::new(PutResponse {
            header: self.header(),
            result: PutResult::Ok.into(),
            prev_kv: None,
        }))
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        // Counted with the puts: the de-duplication behaviors treat every write alike.
        self.state().put_ids.push(request.get_ref().request_id);
        self.admit()?;
        Ok(Response::new(DeleteRangeResponse {
            header: self.header(),
            result: DeleteResult::Ok.into(),
            ..DeleteRangeResponse::default()
        }))
    }

    async fn txn(&self, _: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

type KeepAliveStream = Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Lease for FakeMember {
    type KeepAliveStream = KeepAliveStream;

    async fn grant(
        &self,
        request: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        self.admit()?;
        Ok(Response::new(LeaseGrantResponse {
            header: self.header(),
            result: GrantResult::Granted.into(),
            id: 77,
            ttl_ms: request.get_ref().ttl_ms,
            next_free_id: 0,
        }))
    }

    async fn revoke(
        &self,
        _: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    /// Answers every request twice: first with an unrelated seq, then with the real one.
    async fn keep_alive(
        &self,
        request: Request<tonic::Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<KeepAliveStream>, Status> {
        self.admit()?;
        let header = self.header();
        let answers = request.into_inner().flat_map(move |item| {
            let items = match item {
                Ok(req) => vec![
                    Ok(LeaseKeepAliveResponse {
                        header,
                        seq: req.seq + 1000,
                        renewed: Vec::new(),
                        not_found: req.ids.clone(),
                    }),
                    Ok(LeaseKeepAliveResponse {
                        header,
                        seq: req.seq,
                        renewed: req
                            .ids
                            .iter()
                            .filter(|id| **id != 13)
                            .map(|id| LeaseRenewed {
                                id: *id,
                                ttl_ms: 5000,
                            })
                            .collect(),
                        not_found: req.ids.iter().copied().filter(|id| *id == 13).collect(),
                    }),
                ],
                Err(status) => vec![Err(status)],
            };
            futures::stream::iter(items)
        });
        Ok(Response::new(Box::pin(answers)))
    }

    async fn time_to_live(
        &self,
        _: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn leases(
        &self,
        _: Request<LeaseListRequest>,
    ) -> Result<Response<LeaseListResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

#[tonic::async_trait]
impl Lock for FakeMember {
    async fn lock(&self, request: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        self.admit()?;
        let LockRequest {
            lease,
            seen_revision,
            ..
        } = request.into_inner();
        let hold = {
            let mut state = self.state();
            state.lose_releases = false;
            let hold = match state.hold_only {
                Some(0) => None,
                _ => state.hold_locks,
            };
            if hold.is_some() {
                state.held_locks += 1;
                state.hold_only = state.hold_only.map(|left| left - 1);
            }
            hold
        };
        let (result, token, holder_lease) = match hold {
            None => lock_in(&mut self.state(), lease, seen_revision),
            Some(delay) => {
                // Applies even if the caller gives up on the call: the entry is in the log.
                let member = self.clone();
                let applied = tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let mut state = member.state();
                    state.held_locks -= 1;
                    lock_in(&mut state, lease, seen_revision)
                });
                applied
                    .await
                    .map_err(|e| Status::internal(format!("held lock: {e}")))?
            }
        };
        Ok(Response::new(LockResponse {
            header: self.header(),
            result: result.into(),
            token,
            holder_lease,
            queue_position: 0,
        }))
    }

    async fn unlock(
        &self,
        request: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        self.admit()?;
        let UnlockRequest { lease, token, .. } = request.into_inner();
        let (result, token) = {
            let mut state = self.state();
            if token != 0 && state.lose_releases {
                state.late_releases.push((lease, token));
                None
            } else {
                Some(unlock_in(&mut state, lease, token))
            }
        }
        .ok_or_else(|| {
            ErrorDetail::new(
                ErrorCode::LeadershipLost,
                Outcome::Indeterminate,
                "leadership lost before the entry committed",
            )
            .into_status()
        })?;
        Ok(Response::new(UnlockResponse {
            header: self.header(),
            result: result.into(),
            token,
        }))
    }

    async fn lock_status(
        &self,
        _: Request<LockStatusRequest>,
    ) -> Result<Response<LockStatusResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn lock_list(
        &self,
        _: Request<LockListRequest>,
    ) -> Result<Response<LockListResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<SnapshotChunk, Status>> + Send>>;

#[tonic::async_trait]
impl Cluster for FakeMember {
    type SnapshotStream = SnapshotStream;

    async fn snapshot(
        &self,
        _: Request<SnapshotRequest>,
    ) -> Result<Response<SnapshotStream>, Status> {
        self.admit()?;
        use sha2::Digest;
        let first = SnapshotChunk {
            header: self.header(),
            info: Some(SnapshotInfo {
                revision: 7,
                size_bytes: SNAPSHOT_DATA.len() as u64,
                sha256: sha2::Sha256::digest(SNAPSHOT_DATA).to_vec(),
                format_version: 2,
                lease_count: 1,
                key_count: 2,
            }),
            data: Vec::new(),
        };
        let chunks = self.state().snapshot_chunks.clone();
        let stream =
            futures::stream::iter(std::iter::once(first).chain(chunks.into_iter().map(|data| {
                SnapshotChunk {
                    data,
                    ..SnapshotChunk::default()
                }
            })))
            .map(Ok);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        self.state().calls += 1;
        Ok(Response::new(StatusResponse {
            header: self.header(),
            member_id: self.id,
            ..StatusResponse::default()
        }))
    }

    async fn member_list(
        &self,
        _: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn member_add(
        &self,
        _: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn member_promote(
        &self,
        _: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn member_remove(
        &self,
        _: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        self.admit()?;
        Ok(Response::new(MemberRemoveResponse {
            header: self.header(),
            members: Vec::new(),
        }))
    }
}

/// Starts a fake member on a free local port; returns it and its "host:port".
async fn start(id: u64, behavior: Behavior) -> (FakeMember, String) {
    let member = FakeMember {
        id,
        state: Arc::new(Mutex::new(State {
            behavior,
            cluster_id: 42,
            revision: 7,
            put_ids: Vec::new(),
            calls: 0,
            snapshot_chunks: vec![SNAPSHOT_DATA[..10].to_vec(), SNAPSHOT_DATA[10..].to_vec()],
            lock: None,
            lose_releases: false,
            late_releases: Vec::new(),
            hold_locks: None,
            hold_only: None,
            held_locks: 0,
            unlocked_at: BTreeMap::new(),
        })),
    };
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(err) => panic!("bind: {err}"),
    };
    let address = match listener.local_addr() {
        Ok(address) => address.to_string(),
        Err(err) => panic!("local_addr: {err}"),
    };
    let router = Server::builder()
        .add_service(KvServer::new(member.clone()))
        .add_service(LeaseServer::new(member.clone()))
        .add_service(LockServer::new(member.clone()))
        .add_service(ClusterServer::new(member.clone()));
    tokio::spawn(router.serve_with_incoming(TcpListenerStream::new(listener)));
    (member, address)
}

/// A local address nothing listens on (bound, then released).
async fn dead_address() -> String {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(err) => panic!("bind: {err}"),
    };
    match listener.local_addr() {
        Ok(address) => address.to_string(),
        Err(err) => panic!("local_addr: {err}"),
    }
}

/// A local address whose listener's accept queue is full, so that the kernel drops further
/// SYNs: a dial there neither connects nor is refused (a host that is down, or partitioned).
/// Keep the listener and the held connections alive while the address is used.
async fn silent_address() -> (TcpListener, Vec<tokio::net::TcpStream>, String) {
    let socket = match tokio::net::TcpSocket::new_v4() {
        Ok(socket) => socket,
        Err(err) => panic!("socket: {err}"),
    };
    if let Err(err) = socket.bind(([127, 0, 0, 1], 0).into()) {
        panic!("bind: {err}");
    }
    let listener = match socket.listen(1) {
        Ok(listener) => listener,
        Err(err) => panic!("listen: {err}"),
    };
    let address = match listener.local_addr() {
        Ok(address) => address,
        Err(err) => panic!("local_addr: {err}"),
    };
    let mut held = Vec::new();
    for _ in 0..4 {
        let dial = tokio::net::TcpStream::connect(address);
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_millis(100), dial).await {
            held.push(stream);
        }
    }
    let probe = tokio::net::TcpStream::connect(address);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), probe)
            .await
            .is_err(),
        "the accept queue of {address} is full: a dial hangs"
    );
    (listener, held, address.to_string())
}

/// A member whose de-duplication table has forgotten every id up to revision 500 (see
/// [`Behavior::Forgetful`]) and whose responses name `revision`.
async fn forgetful(lose: u32, advance: u64, revision: u64) -> (FakeMember, String) {
    let (member, address) = start(
        1,
        Behavior::Forgetful {
            forgotten_through: 500,
            lose,
            advance,
        },
    )
    .await;
    member.state().revision = revision;
    (member, address)
}

fn fast_options() -> ClientOptions {
    ClientOptions::default()
        .with_backoff(Duration::from_millis(5), Duration::from_millis(20))
        .with_timeout(Duration::from_secs(5))
}

/// A lazy client: the tests count every call a member receives, dialing included.
async fn client(endpoints: &[&str], options: ClientOptions) -> Client {
    match Client::lazy(endpoints.iter().copied(), options) {
        Ok(client) => client,
        Err(err) => panic!("client: {err}"),
    }
}

#[tokio::test]
async fn connect_dials_until_a_member_answers_and_says_when_none_does() {
    let dead = dead_address().await;
    let other_dead = dead_address().await;
    let err = match Client::connect_with([dead.as_str(), other_dead.as_str()], fast_options()).await
    {
        Ok(client) => panic!("connected to dead endpoints: {client:?}"),
        Err(err) => err,
    };
    match &err {
        Error::Unreachable { endpoints, last } => {
            assert_eq!(endpoints, &[dead.clone(), other_dead.clone()]);
            assert!(last.is_connect_failure(), "{last:?}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(err.is_definite());
    assert!(err.is_connect_failure());
    assert!(err.to_string().contains(&dead), "{err}");

    // A dead endpoint first, then a follower: connect succeeds on the follower.
    let (member, address) = start(1, Behavior::Follower("127.0.0.1:1".into())).await;
    let client = match Client::connect_with([dead.as_str(), address.as_str()], fast_options()).await
    {
        Ok(client) => client,
        Err(err) => panic!("connect: {err}"),
    };
    assert_eq!(member.calls(), 1, "connect sends one Status");
    assert_eq!(client.endpoints(), [dead, address]);
}

/// A member whose host drops the dial (nothing answers the SYN) is a connect failure, as a
/// refused one is: nothing was sent, so the client tries the next member, even for a call it
/// may not repeat once sent (a Lock).
#[tokio::test]
async fn a_dial_nobody_answers_is_a_connect_failure_and_the_next_member_is_tried() {
    let (_silent, _held, silent) = silent_address().await;
    let options = fast_options().with_connect_timeout(Duration::from_millis(200));
    let err = match Client::connect_with([silent.as_str()], options.clone()).await {
        Ok(client) => panic!("connected to a silent endpoint: {client:?}"),
        Err(err) => err,
    };
    assert!(err.is_connect_failure(), "{err:?}");
    assert!(err.is_definite(), "{err:?}");

    let (leader, leader_address) = start(1, Behavior::Leader).await;
    let client = client(&[silent.as_str(), leader_address.as_str()], options).await;
    let lease = LeaseId::new(5);
    let outcome = client
        .lock("dialed", lease, false, Duration::from_millis(10))
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(leader.calls(), 1);
}

#[tokio::test]
async fn follows_not_leader_redirect_and_caches_the_leader() {
    let (leader, leader_address) = start(2, Behavior::Leader).await;
    let (follower, follower_address) = start(1, Behavior::Follower(leader_address.clone())).await;
    let client = client(&[&follower_address], fast_options()).await;

    let response = client.put("k", "v", PutOptions::default()).await;
    assert!(response.is_ok(), "{response:?}");
    assert_eq!(follower.calls(), 1);
    assert_eq!(leader.calls(), 1);
    assert_eq!(
        client.endpoints(),
        [follower_address, leader_address.clone()]
    );
    assert_eq!(client.cached_raft_leader(), Some(leader_address));

    // The next call goes straight to the cached leader.
    assert!(client.get("k").await.is_ok());
    assert_eq!(follower.calls(), 1);
    assert_eq!(leader.calls(), 2);
}

/// Issue 11: in a compose cluster a follower redirects to the leader's address on the cluster's
/// own network (`zaris-2:7001`), which a client on the host cannot resolve. The client goes
/// back to its configured endpoints at once, without a backoff, and reaches the leader there.
#[tokio::test]
async fn a_redirect_to_an_address_the_client_cannot_resolve_falls_back_to_its_endpoints() {
    let (leader, leader_address) = start(2, Behavior::Leader).await;
    let unresolvable = "zaris-2.invalid:7001".to_owned();
    let (follower, follower_address) =
        start(1, Behavior::FollowerOf(2, unresolvable.clone())).await;
    // A backoff longer than the call's whole budget: a call that backed off even once would
    // fail with a timeout instead of succeeding.
    let options = ClientOptions::default()
        .with_backoff(Duration::from_secs(60), Duration::from_secs(60))
        .with_timeout(Duration::from_secs(10));
    let client = client(&[&follower_address, &leader_address], options).await;

    let written = client.put("k", "v", PutOptions::default()).await;
    assert!(written.is_ok(), "{written:?}");
    assert_eq!((follower.calls(), leader.calls()), (1, 1));
    assert_eq!(
        client.endpoints(),
        [
            follower_address.clone(),
            leader_address.clone(),
            unresolvable
        ]
    );

    // The endpoint that answered stays the way in: the next call goes straight there.
    assert!(client.get("k").await.is_ok());
    assert_eq!((follower.calls(), leader.calls()), (1, 2));
}

#[tokio::test]
async fn rotates_past_unreachable_and_leaderless_endpoints() {
    let dead = dead_address().await;
    let (leaderless, leaderless_address) = start(1, Behavior::Leaderless).await;
    let (leader, leader_address) = start(2, Behavior::Leader).await;
    let client = client(
        &[&dead, &leaderless_address, &leader_address],
        fast_options(),
    )
    .await;

    let response = client.range("k", Default::default()).await;
    assert!(response.is_ok(), "{response:?}");
    assert_eq!(leaderless.calls(), 1);
    assert_eq!(leader.calls(), 1);

    // The endpoint that answered is used first from now on.
    assert!(client.get("k").await.is_ok());
    assert_eq!((leaderless.calls(), leader.calls()), (1, 2));
}

#[tokio::test]
async fn resends_an_indeterminate_write_with_the_same_request_id() {
    let (leader, address) = start(1, Behavior::LoseLeadership(2)).await;
    let client = client(&[&address], fast_options()).await;

    let response = client.put("k", "v", PutOptions::default()).await;
    assert!(response.is_ok(), "{response:?}");
    let ids = leader.state().put_ids.clone();
    assert_eq!(ids.len(), 3);
    assert!(ids[0].is_some_and(|id| id.client_id == client.client_id()));
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");

    // The next write is a new logical write: a new sequence number.
    assert!(client.put("k", "w", PutOptions::default()).await.is_ok());
    let last = leader.state().put_ids.last().copied().flatten();
    let first = ids[0];
    assert!(matches!((first, last), (Some(a), Some(b)) if b.seq > a.seq));
}

/// Issue 9, hole 4: a write refused because the de-duplication table may have forgotten it is
/// resent as issued after what was forgotten, but only when no earlier attempt can have applied.
#[tokio::test]
async fn a_first_attempt_refused_as_forgotten_is_resent_seen_revision_what_was_forgotten() {
    let (member, address) = forgetful(0, 0, 7).await;
    let client = client(&[&address], fast_options()).await;
    let response = client.put("k", "v", PutOptions::default()).await;
    assert!(response.is_ok(), "{response:?}");
    let ids = member.state().put_ids.clone();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let (first, second) = (ids[0].expect("id"), ids[1].expect("id"));
    assert_eq!((first.client_id, first.seq), (second.client_id, second.seq));
    assert_eq!((first.seen_revision, second.seen_revision), (0, 500));
    // Later writes are issued after the revisions the client has seen.
    assert!(client.seen_revision() >= Revision::new(500));
}

/// The review of 2026-12-04: a resend dated only after `forgotten_through` raced the table,
/// which under a steady write load forgets more while the resend travels, and was refused
/// again, round after round, until the deadline. It is dated after a revision the member has
/// applied now instead, well above what the table forgot.
#[tokio::test]
async fn a_resend_refused_as_forgotten_is_issued_after_a_revision_committed_now() {
    let (member, address) = forgetful(0, 10, 2_000).await;
    let client = client(&[&address], fast_options()).await;
    let response = client.put("k", "v", PutOptions::default()).await;
    assert!(response.is_ok(), "{response:?}");
    let ids = member.state().put_ids.clone();
    assert_eq!(ids.len(), 2, "one resend: {ids:?}");
    assert_eq!(ids[1].map(|id| id.seen_revision), Some(2_000), "{ids:?}");
    assert!(client.seen_revision() >= Revision::new(2_000));
}

/// However fast the table forgets, re-dating a request that was never applied ends at the
/// client's deadline, and says that nothing was applied.
#[tokio::test]
async fn a_resend_refused_again_and_again_ends_at_the_deadline_as_not_applied() {
    let (member, address) = forgetful(0, 1_000_000, 7).await;
    let options = fast_options().with_timeout(Duration::from_millis(300));
    let client = client(&[&address], options).await;
    let started = std::time::Instant::now();
    let err = match client.put("k", "v", PutOptions::default()).await {
        Ok(response) => panic!("a refused write succeeded: {response:?}"),
        Err(err) => err,
    };
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, Error::DeadlineExhausted { .. }), "{err:?}");
    assert!(err.is_definite(), "no attempt was applied: {err}");
    assert_eq!(err.error_code(), Some(ErrorCode::RequestIdForgotten));
    assert!(member.state().put_ids.len() > 2);
}

/// A connected client learns a committed revision when it dials, so its first write is not
/// dated revision 0, which a cluster that ever forgot a request id refuses.
#[tokio::test]
async fn a_connected_client_issues_its_first_write_after_the_revision_it_dialed() {
    let (member, address) = forgetful(0, 0, 2_000).await;
    let client = match Client::connect_with([address.as_str()], fast_options()).await {
        Ok(client) => client,
        Err(err) => panic!("connect: {err}"),
    };
    let response = client.put("k", "v", PutOptions::default()).await;
    assert!(response.is_ok(), "{response:?}");
    let ids = member.state().put_ids.clone();
    assert_eq!(ids.len(), 1, "refused first: {ids:?}");
    assert_eq!(ids[0].map(|id| id.seen_revision), Some(2_000));
}

/// The review of this stop's fixes: an id the caller supplies may be its retry of an earlier call
/// that applied (that call failed as indeterminate). Refused as forgotten, it is never re-dated
/// and sent again: the refusal goes back to the caller. An id the call made itself is.
#[tokio::test]
async fn a_callers_own_request_id_refused_as_forgotten_is_not_resent() {
    let (member, address) = forgetful(0, 0, 2_000).await;
    let client = client(&[&address], fast_options()).await;
    let theirs = RequestId {
        client_id: client.client_id(),
        seq: 99,
        seen_revision: 0,
    };
    let err = match client
        .delete_range(DeleteRangeRequest {
            key: b"k".to_vec(),
            request_id: Some(theirs),
            ..DeleteRangeRequest::default()
        })
        .await
    {
        Ok(deleted) => panic!("a possibly applied write was sent again: {deleted:?}"),
        Err(err) => err,
    };
    assert_eq!(err.error_code(), Some(ErrorCode::RequestIdForgotten));
    assert_eq!(member.state().put_ids, vec![Some(theirs)], "sent once");

    // The convenience call makes its own id: re-dated after the refusal, and applied.
    let deleted = client.delete("k", Default::default()).await;
    assert!(deleted.is_ok(), "{deleted:?}");
    let ids = member.state().put_ids.clone();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[2].map(|id| id.seen_revision), Some(2_000));
}

#[tokio::test]
async fn a_retry_refused_as_forgotten_after_an_indeterminate_attempt_is_indeterminate() {
    let (member, address) = forgetful(1, 0, 7).await;
    let client = client(&[&address], fast_options()).await;
    let err = match client.put("k", "v", PutOptions::default()).await {
        Ok(response) => panic!("a possibly applied write was resent as new: {response:?}"),
        Err(err) => err,
    };
    assert_eq!(err.error_code(), Some(ErrorCode::RequestIdForgotten));
    assert!(
        !err.is_definite(),
        "the first attempt may have applied: {err}"
    );
    let ids = member.state().put_ids.clone();
    assert_eq!(ids.len(), 2, "no third attempt: {ids:?}");
    assert!(
        ids.iter()
            .all(|id| id.is_some_and(|id| id.seen_revision == 0))
    );
}

#[tokio::test]
async fn does_not_resend_a_non_idempotent_write_after_an_indeterminate_failure() {
    let (member, address) = start(1, Behavior::LoseLeadership(1)).await;
    let client = client(&[&address], fast_options()).await;

    let err = match client.member_remove(3).await {
        Ok(response) => panic!("resent after an indeterminate failure: {response:?}"),
        Err(err) => err,
    };
    assert_eq!(member.calls(), 1);
    assert!(!err.is_definite(), "{err}");
    assert_eq!(err.error_code(), Some(ErrorCode::LeadershipLost));
    assert!(matches!(err, Error::Rpc(_)), "{err:?}");
}

#[tokio::test]
async fn gives_up_at_the_deadline_with_a_definite_connect_failure() {
    let dead = dead_address().await;
    let options = fast_options().with_timeout(Duration::from_millis(300));
    let client = client(&[&dead], options).await;

    let started = std::time::Instant::now();
    let err = match client.put("k", "v", PutOptions::default()).await {
        Ok(response) => panic!("a dead endpoint answered: {response:?}"),
        Err(err) => err,
    };
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    match &err {
        Error::DeadlineExhausted { attempts, last, .. } => {
            assert!(*attempts > 1, "{err}");
            assert!(last.is_connect_failure(), "{err:?}");
        }
        other => panic!("expected DeadlineExhausted, got {other:?}"),
    }
    assert!(err.is_connect_failure());
    assert!(err.is_definite(), "{err}");
    assert_eq!(err.code(), Some(Code::Unavailable));
    assert!(err.to_string().contains("definite: not applied"), "{err}");
    let rpc = err.rpc().map(|rpc| rpc.io_error_kind());
    assert_eq!(
        rpc,
        Some(Some(std::io::ErrorKind::ConnectionRefused)),
        "{err:?}"
    );
}

#[tokio::test]
async fn exhaustion_after_an_indeterminate_attempt_is_indeterminate() {
    let (leader, address) = start(1, Behavior::LoseLeadership(u32::MAX)).await;
    let options = fast_options().with_timeout(Duration::from_millis(200));
    let client = client(&[&address], options).await;

    let err = match client.put("k", "v", PutOptions::default()).await {
        Ok(response) => panic!("unexpected success: {response:?}"),
        Err(err) => err,
    };
    assert!(matches!(err, Error::DeadlineExhausted { .. }), "{err:?}");
    assert!(!err.is_definite(), "{err}");
    assert!(leader.calls() > 1);

    // A new write whose every attempt was refused outright is definite again.
    leader.set_behavior(Behavior::Leaderless);
    let err = match client.put("k", "v", PutOptions::default()).await {
        Ok(response) => panic!("unexpected success: {response:?}"),
        Err(err) => err,
    };
    assert!(
        err.is_definite(),
        "a fresh write that never got in is definite: {err}"
    );
}

#[tokio::test]
async fn keep_alive_once_waits_for_the_matching_seq() {
    let (_member, address) = start(1, Behavior::Leader).await;
    let client = client(&[&address], fast_options()).await;

    let first = match client.keep_alive_once([5, 13].map(LeaseId::new)).await {
        Ok(response) => response,
        Err(err) => panic!("{err}"),
    };
    assert!(first.seq < 1000, "took the unrelated answer: {first:?}");
    assert_eq!(
        first.renewed,
        [Renewed {
            id: LeaseId::new(5),
            ttl: Duration::from_secs(5)
        }]
    );
    assert_eq!(first.not_found, [LeaseId::new(13)]);
    let second = match client.keep_alive_once([LeaseId::new(5)]).await {
        Ok(response) => response,
        Err(err) => panic!("{err}"),
    };
    assert!(second.seq > first.seq);
}

#[tokio::test]
async fn refuses_an_endpoint_of_another_cluster() {
    let (member, address) = start(1, Behavior::Leader).await;
    let client = client(&[&address], fast_options()).await;
    assert!(client.status().await.is_ok());

    member.state().cluster_id = 43;
    match client.status().await {
        Err(Error::ClusterMismatch {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (42, 43)),
        other => panic!("expected ClusterMismatch, got {other:?}"),
    }
}

/// A snapshot is fetched from the leader through a follower's redirect, and its bytes are
/// checked: data that does not match the announced SHA-256, a stream cut short, or more data
/// than announced is an error, never a snapshot.
#[tokio::test]
async fn snapshot_follows_redirects_and_checks_what_arrives() {
    let (leader, leader_address) = start(1, Behavior::Leader).await;
    let (_follower, follower_address) =
        start(2, Behavior::FollowerOf(1, leader_address.clone())).await;
    let client = Client::connect_with([follower_address], fast_options())
        .await
        .expect("connect");
    let mut out = Vec::new();
    let saved = client.snapshot(&mut out).await.expect("snapshot");
    assert_eq!(out, SNAPSHOT_DATA);
    assert_eq!(saved.member_id, 1);
    assert_eq!(saved.revision, Revision::new(7));
    assert_eq!(saved.size_bytes, SNAPSHOT_DATA.len() as u64);

    let damaged = {
        let mut data = SNAPSHOT_DATA.to_vec();
        data[3] ^= 1;
        data
    };
    let cases: [(Vec<Vec<u8>>, &str); 3] = [
        (vec![damaged], "does not match its SHA-256"),
        (vec![SNAPSHOT_DATA[..10].to_vec()], "ended after 10 of"),
        (
            vec![SNAPSHOT_DATA.to_vec(), b"more".to_vec()],
            "more snapshot data than",
        ),
    ];
    for (chunks, expected) in cases {
        leader.state().snapshot_chunks = chunks;
        let err = client
            .snapshot(&mut Vec::new())
            .await
            .expect_err("a bad snapshot is refused");
        assert!(
            matches!(err, Error::Protocol { .. }) && err.to_string().contains(expected),
            "{err}"
        );
    }
}

/// Waits until every Lock request the member held up has applied, then a little more for the
/// client's background work (a give-back answered late) to run.
async fn held_locks_applied(member: &FakeMember) {
    let applied = tokio::time::timeout(Duration::from_secs(10), async {
        while member.state().held_locks > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(applied.is_ok(), "the held Lock requests never applied");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A leader member and a lease of a client with a 300 ms call timeout.
async fn member_and_lease() -> (FakeMember, zaris_client::Lease) {
    let (member, address) = start(1, Behavior::Leader).await;
    let client = client(
        &[&address],
        fast_options().with_timeout(Duration::from_millis(300)),
    )
    .await;
    match client.lease(Duration::from_secs(30)).await {
        Ok(lease) => (member, lease),
        Err(err) => panic!("lease: {err}"),
    }
}

/// A dropped guard's release whose answer is lost may still apply later (a new leader commits
/// it). Until then the lease holds the lock with that token, and a new wait of the same lease is
/// answered with the same token; a guard made with it would be freed by the late release while
/// `is_held()` said true. The client must finish that release first and take a new token.
#[tokio::test]
async fn a_lock_taken_again_while_its_release_is_in_doubt_gets_a_new_token() {
    let (member, lease) = member_and_lease().await;
    let first = match lease.lock("job").await {
        Ok(guard) => guard,
        Err(err) => panic!("first lock: {err}"),
    };
    let first_token = first.token();

    // The guard is dropped; its background release is answered as lost, again and again.
    member.state().lose_releases = true;
    drop(first);
    let lost_one = tokio::time::timeout(Duration::from_secs(10), async {
        while member.state().late_releases.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(lost_one.is_ok(), "the dropped guard sent no release");

    // The same lease locks again while that release is in doubt.
    let second = match tokio::time::timeout(Duration::from_secs(10), lease.lock("job")).await {
        Ok(Ok(guard)) => guard,
        Ok(Err(err)) => panic!("second lock: {err}"),
        Err(_) => panic!("the second lock did not finish in 10 s"),
    };
    assert!(
        second.token() > first_token,
        "the second guard got token {} back, whose release is in doubt (first {first_token})",
        second.token()
    );

    // The lost release is committed late: it must not free the second guard's lock.
    member.commit_late_releases();
    assert!(second.is_held(), "the second guard should be held");
    let holder = member.state().lock;
    assert_eq!(holder, Some((77, second.token().get())));
}

/// A Lock request held up (in the network, or in a paused leader) past the give-back of its
/// wait applies when nobody waits for it any more: it must take nothing, or the lease would hold
/// the lock with no guard, kept alive by its keeper, until the lease ends. The give-back's
/// second withdrawal, after the call's answer, cannot catch it: no answer ever comes.
#[tokio::test]
async fn a_lock_request_applied_after_its_wait_was_given_back_takes_nothing() {
    let (member, lease) = member_and_lease().await;
    member.state().hold_locks = Some(Duration::from_millis(1_500));
    let waited = tokio::time::timeout(
        Duration::from_secs(10),
        lease.lock_timeout("job", Duration::from_millis(100)),
    )
    .await;
    match waited {
        Ok(Ok(None)) | Ok(Err(_)) => {}
        Ok(Ok(Some(guard))) => panic!("no Lock applied in time, yet a guard: {guard:?}"),
        Err(_) => panic!("the wait did not end in 10 s"),
    }
    let held = member.state().held_locks;
    assert!(held > 0, "no Lock request was held up");
    held_locks_applied(&member).await;
    assert_eq!(
        member.state().lock,
        None,
        "a Lock applied after its wait was given back took the lock, with no guard"
    );

    // A new wait takes it.
    member.state().hold_locks = None;
    match tokio::time::timeout(Duration::from_secs(10), lease.lock("job")).await {
        Ok(Ok(guard)) => assert!(guard.is_held()),
        Ok(Err(err)) => panic!("lock: {err}"),
        Err(_) => panic!("the lock did not finish in 10 s"),
    }
}

/// try_lock: an attempt held up past the call's timeout may apply after the answer BUSY came
/// from another attempt, once the holder let go, and take the lock for a lease that nobody
/// waits for. So a try_lock is never resent after an indeterminate failure: it fails, and the
/// failed call is given back, which overtakes the held attempt.
#[tokio::test]
async fn a_try_lock_attempt_held_up_past_its_call_takes_nothing() {
    let (member, lease) = member_and_lease().await;
    {
        let mut state = member.state();
        state.lock = Some((999, 5));
        state.hold_locks = Some(Duration::from_millis(1_500));
        state.hold_only = Some(1);
    }
    match tokio::time::timeout(Duration::from_secs(10), lease.try_lock("job")).await {
        Ok(Ok(None)) | Ok(Err(_)) => {}
        Ok(Ok(Some(guard))) => panic!("the lock is held by another lease, yet {guard:?}"),
        Err(_) => panic!("try_lock did not end in 10 s"),
    }
    // The other holder lets go before the held attempt applies.
    member.state().lock = None;
    held_locks_applied(&member).await;
    assert_eq!(
        member.state().lock,
        None,
        "a try_lock attempt applied after its call ended took the lock, with no guard"
    );
}
