//! Access control on real nodes: users and roles made through the Auth service, auth enabled on
//! a running cluster while a client keeps its lease alive, tenants kept out of each other's
//! leases, keys and locks (PERMISSION_DENIED naming what was denied), an admin allowed
//! everywhere, and a client certificate's name as the user.

use std::time::Duration;

use tonic::Code;
use zaris_client::proto::auth_change_request::Change;
use zaris_client::proto::kv_client::KvClient;
use zaris_client::proto::{
    AuthDisable, AuthEnable, AuthRoleName, AuthRolePermission, AuthUserAdd, AuthUserRole,
    ErrorCode, Permission, PermissionAccess, PermissionKind, PutRequest,
};
use zaris_client::{
    BearerToken, Client, ClientOptions, DeleteOptions, Error, LeaseId, LockOutcome, PutOptions,
    RangeOptions, Revocation,
};
use zaris_testkit::cluster::TestCluster;

use crate::counter;
use crate::tls::Certs;

fn options() -> ClientOptions {
    ClientOptions::default().with_timeout(Duration::from_secs(3))
}

/// A client that connects on first use: one the cluster refuses gets the refusal from its
/// calls.
async fn client_with(cluster: &TestCluster, options: ClientOptions) -> Client {
    let endpoints: Vec<String> = (1..=3).map(|id| cluster.address(id)).collect();
    Client::lazy(endpoints, options).expect("client")
}

async fn as_user(cluster: &TestCluster, token: &BearerToken) -> Client {
    client_with(cluster, options().with_token(token.clone())).await
}

/// A client of member `id` alone, calling as the user of `token`.
fn as_user_of(cluster: &TestCluster, id: u64, token: &BearerToken) -> Client {
    Client::lazy([cluster.address(id)], options().with_token(token.clone())).expect("client")
}

/// Enables auth through `admin`, and returns it.
async fn enabled_by(admin: Client) -> Client {
    admin
        .auth_change(Change::Enable(AuthEnable {}))
        .await
        .expect("enable");
    admin
}

fn permission(kind: PermissionKind, prefix: &str) -> Permission {
    Permission {
        kind: kind.into(),
        prefix: prefix.as_bytes().to_vec(),
        access: PermissionAccess::Readwrite.into(),
    }
}

/// Adds user `name` with a fresh token and, unless `admin`, a role `{name}-rw` that may read and
/// write keys and locks under `{name}/`.
async fn add_user(admin: &Client, name: &str, is_admin: bool) -> BearerToken {
    let token = BearerToken::generate();
    admin
        .auth_change(Change::UserAdd(AuthUserAdd {
            name: name.into(),
            token_sha256: token.sha256().to_vec(),
        }))
        .await
        .expect("user add");
    let role = if is_admin {
        "admin".to_string()
    } else {
        let role = format!("{name}-rw");
        admin
            .auth_change(Change::RoleAdd(AuthRoleName { name: role.clone() }))
            .await
            .expect("role add");
        for kind in [PermissionKind::Key, PermissionKind::Lock] {
            admin
                .auth_change(Change::RoleGrant(AuthRolePermission {
                    role: role.clone(),
                    permission: Some(permission(kind, &format!("{name}/"))),
                }))
                .await
                .expect("role grant");
        }
        role
    };
    admin
        .auth_change(Change::UserGrantRole(AuthUserRole {
            name: name.into(),
            role,
        }))
        .await
        .expect("user grant");
    token
}

/// The error's code and message; panics on success.
fn refusal<T: std::fmt::Debug>(result: Result<T, Error>, what: &str) -> (ErrorCode, String) {
    let err = result.expect_err(what);
    assert!(
        err.is_definite(),
        "{what}: a refusal changes nothing: {err}"
    );
    let code = err
        .detail()
        .and_then(|d| ErrorCode::try_from(d.code).ok())
        .unwrap_or(ErrorCode::Unspecified);
    (code, err.to_string())
}

fn assert_denied<T: std::fmt::Debug>(result: Result<T, Error>, what: &str, needle: &str) {
    let grpc_code = result.as_ref().err().and_then(Error::code);
    let (code, message) = refusal(result, what);
    assert_eq!(code, ErrorCode::PermissionDenied, "{what}: {message}");
    assert_eq!(grpc_code, Some(Code::PermissionDenied), "{what}");
    assert!(
        message.contains(needle),
        "{what}: {message:?} lacks {needle:?}"
    );
}

fn with_lease(id: LeaseId) -> PutOptions {
    PutOptions {
        lease: Some(id),
        ..PutOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_cannot_touch_each_others_leases_keys_or_locks_and_an_admin_can() {
    let mut cluster = crate::console_api::with_http(3).await;
    let open = cluster.client(&[1, 2, 3]).await;
    // Before auth is enabled anyone may manage users; the tokens are made here.
    let root = add_user(&open, "root", true).await;
    let token_a = add_user(&open, "a", false).await;
    let token_b = add_user(&open, "b", false).await;
    let (a, b, admin) = (
        as_user(&cluster, &token_a).await,
        as_user(&cluster, &token_b).await,
        as_user(&cluster, &root).await,
    );
    assert_eq!(a.who_am_i().await.expect("whoami").user, "a");

    // A's lease, granted and kept alive while auth is still off, is owned by A already.
    let kept = a.lease(Duration::from_secs(3)).await.expect("lease");
    let lease_a = kept.id();
    let info = a
        .time_to_live(lease_a, false)
        .await
        .expect("ttl")
        .expect("found");
    assert_eq!(info.owner, "a");
    a.put("a/x", "1", with_lease(lease_a))
        .await
        .expect("a binds a key");
    assert!(matches!(
        a.lock("a/lock", lease_a, false, Duration::ZERO)
            .await
            .expect("a locks"),
        LockOutcome::Held { .. }
    ));

    // Switched on while A's keepalive runs: A already sends its token, so it goes on.
    admin
        .auth_change(Change::Enable(AuthEnable {}))
        .await
        .expect("enable");
    assert!(admin.who_am_i().await.expect("whoami").enabled);

    // Anonymous callers are refused, saying how to authenticate.
    let (code, message) = refusal(
        open.put("a/y", "1", PutOptions::default()).await,
        "an anonymous put",
    );
    assert_eq!(code, ErrorCode::Unauthenticated, "{message}");
    assert!(message.contains("requires authentication"), "{message}");
    let wrong = client_with(&cluster, options().with_token(BearerToken::generate())).await;
    let (code, message) = refusal(wrong.get("a/x").await, "an unknown token");
    assert_eq!(code, ErrorCode::Unauthenticated, "{message}");
    assert!(message.contains("belongs to no user"), "{message}");

    // B cannot end, renew, bind to or lock with A's lease, nor read or write under a/.
    let denied_before = counter("zaris_auth_failures_total", "reason=\"denied\"");
    let lease_word = format!("lease {lease_a}");
    assert_denied(b.revoke(lease_a).await, "b revokes a's lease", &lease_word);
    assert_denied(
        b.keep_alive_once([lease_a]).await,
        "b renews a's lease",
        "may not renew",
    );
    let lease_b = b.grant(Duration::from_secs(60)).await.expect("grant").id;
    assert_denied(
        b.put("b/x", "1", with_lease(lease_a)).await,
        "b binds a key to a's lease",
        "may not bind keys to",
    );
    assert_denied(
        b.lock("b/lock", lease_a, false, Duration::ZERO).await,
        "b locks with a's lease",
        "may not lock with",
    );
    assert_denied(
        b.time_to_live(lease_a, true).await,
        "b inspects a's lease",
        "may not inspect",
    );
    assert_denied(
        b.get("a/x").await,
        "b reads a/",
        "no read permission on key \"a/x\"",
    );
    assert_denied(
        b.range(
            "a/",
            RangeOptions {
                prefix: true,
                ..RangeOptions::default()
            },
        )
        .await,
        "b lists a/",
        "no read permission on keys with prefix \"a/\"",
    );
    assert_denied(
        b.put("a/x", "stolen", PutOptions::default()).await,
        "b writes a/",
        "no write permission",
    );
    // A grant with keys needs write permission on every key, and a refusal creates no lease.
    let leases_before = b
        .leases(LeaseId::NONE, 1_000)
        .await
        .expect("list")
        .leases
        .len();
    assert_denied(
        b.grant_with_keys(Duration::from_secs(60), [("b/p", "1"), ("a/x", "stolen")])
            .await,
        "b grants a lease with a key under a/",
        "no write permission on key \"a/x\"",
    );
    assert_eq!(
        b.leases(LeaseId::NONE, 1_000)
            .await
            .expect("list")
            .leases
            .len(),
        leases_before,
        "a refused grant with keys created a lease"
    );
    assert!(b.get("b/p").await.expect("get").is_none());
    let present = b
        .grant_with_keys(Duration::from_secs(60), [("b/p", "1")])
        .await
        .expect("b grants a lease with its own key");
    let info = b
        .time_to_live(present.id, true)
        .await
        .expect("ttl")
        .expect("found");
    assert_eq!(info.owner, "b", "the caller owns a lease granted with keys");
    assert_eq!(info.bound_keys, vec![b"b/p".to_vec()]);
    assert!(matches!(
        b.revoke(present.id).await.expect("b revokes its own lease"),
        Revocation::Revoked { .. }
    ));
    assert_denied(
        b.lock("a/lock", lease_b, true, Duration::from_millis(100))
            .await,
        "b queues for a's lock",
        "lock \"a/lock\"",
    );
    assert_denied(
        b.auth_change(Change::Disable(AuthDisable {})).await,
        "b disables auth",
        "needs the admin role",
    );
    assert_denied(b.member_remove(1).await, "b removes a member", "admin");
    assert!(
        counter("zaris_auth_failures_total", "reason=\"denied\"") >= denied_before + 10.0,
        "denials are counted"
    );
    // B sees only its own lease; a lease id that does not exist is "not found", not denied.
    let page = b.leases(LeaseId::NONE, 100).await.expect("list");
    assert_eq!(
        page.leases.iter().map(|l| l.id).collect::<Vec<_>>(),
        vec![lease_b]
    );
    assert_eq!(
        b.revoke(LeaseId::new(lease_b.get() + 1_000)).await.ok(),
        Some(Revocation::NotFound)
    );
    // The console's JSON API applies the same rules, through a follower too (it forwards the
    // caller's token to the leader): anonymous is refused, B sees its own lease only.
    let leader = cluster.leader().await;
    let http = cluster
        .node(cluster.followers(leader)[0])
        .http_addr
        .expect("http address");
    let (status, body) = crate::console_api::get(http, "/api/v1/leases").await;
    assert_eq!(status, 401, "{body}");
    let bearer_b = format!("Bearer {}", token_b.expose());
    let (status, page) =
        crate::console_api::call(http, "GET", "/api/v1/leases", Some(&bearer_b)).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["leases"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["leases"][0]["id"], lease_b.get());
    let revoke_a = format!("/api/v1/leases/{}/revoke", lease_a.get());
    let (status, body) = crate::console_api::call(http, "POST", &revoke_a, Some(&bearer_b)).await;
    assert_eq!(
        (status, crate::console_api::error_code(&body)),
        (403, "PERMISSION_DENIED"),
        "{body}"
    );
    let (status, body) =
        crate::console_api::call(http, "GET", "/api/v1/leases", Some("Bearer wrong")).await;
    assert_eq!(status, 401, "{body}");
    // The event feed is checked as a gRPC watch is, by the member that serves it (here the
    // leader, which refuses rather than redirects): B may not read A's keys, anonymous nothing.
    let leader_http = cluster.node(leader).http_addr.expect("http address");
    let (status, body) = crate::console_api::call(
        leader_http,
        "GET",
        "/api/v1/events?prefix=a%2F",
        Some(&bearer_b),
    )
    .await;
    assert_eq!(
        (status, crate::console_api::error_code(&body)),
        (403, "PERMISSION_DENIED"),
        "{body}"
    );
    let (status, body) = crate::console_api::get(leader_http, "/api/v1/events").await;
    assert_eq!(status, 401, "{body}");

    // Locks too: B may not read A's lock, so B's lock list leaves it out; the admin's has it.
    let b_locks = b.lock_list("", "", 0).await.expect("b lists locks");
    assert!(b_locks.locks.is_empty(), "{:?}", b_locks.locks);
    let all_locks = admin.lock_list("", "", 0).await.expect("admin lists locks");
    assert!(
        all_locks
            .locks
            .iter()
            .any(|l| l.name == "a/lock" && l.holder.lease == lease_a),
        "{:?}",
        all_locks.locks
    );

    // A request id is its user's own: B reusing A's id gets its own write applied, not A's
    // remembered answer.
    let leader = cluster.address(cluster.leader().await);
    let same_id = zaris_client::proto::RequestId {
        client_id: 42,
        seq: 1,
        seen_revision: 0,
    };
    for (token, key) in [(&token_a, "a/replayed"), (&token_b, "b/replayed")] {
        let mut kv = KvClient::connect(format!("http://{leader}"))
            .await
            .expect("connect");
        let mut request = tonic::Request::new(PutRequest {
            key: key.into(),
            value: b"v".to_vec(),
            request_id: Some(same_id),
            ..PutRequest::default()
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", token.expose()).parse().expect("ascii"),
        );
        kv.put(request).await.expect("put with a fixed request id");
    }
    assert!(b.get("b/replayed").await.expect("b reads").is_some());

    // Through all of that A's lease stayed alive (3 s TTL, well past it by now), and A still
    // works inside its own prefix.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(kept.is_valid(), "a's lease lapsed: {:?}", kept.state());
    assert_eq!(
        a.get("a/x").await.expect("a reads").map(|kv| kv.value),
        Some(b"1".to_vec())
    );

    // The admin may do anything: it ends B's lease, and reads A's keys.
    assert!(matches!(
        admin.revoke(lease_b).await,
        Ok(Revocation::Revoked { .. })
    ));
    assert!(admin.get("a/x").await.expect("admin reads").is_some());
    // The last admin cannot lose the role while auth is on.
    let (code, message) = refusal(
        admin
            .auth_change(Change::UserRevokeRole(AuthUserRole {
                name: "root".into(),
                role: "admin".into(),
            }))
            .await,
        "the last admin drops the role",
    );
    assert_eq!(code, ErrorCode::AuthRefused, "{message}");
    let status = admin.auth_status().await.expect("status");
    assert!(status.enabled);
    assert_eq!(
        status
            .users
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "root"]
    );
    // A node that has not applied the users yet (a new node, not yet added) does not refuse a
    // valid token: it sends the caller to the leader (here, none it knows of: NO_LEADER,
    // retryable), which decides. The Jepsen-style harness found this with a wiped, re-added node.
    let joiner = cluster.start_joiner(4).await;
    let via_joiner = Client::lazy(
        [joiner.to_string()],
        options()
            .with_timeout(Duration::from_millis(500))
            .with_token(token_a.clone()),
    )
    .expect("client");
    let err = via_joiner
        .get("a/x")
        .await
        .expect_err("the joiner serves no one");
    assert_eq!(err.error_code(), Some(ErrorCode::NoLeader), "{err}");
    assert!(matches!(
        kept.revoke().await.expect("a revokes its own lease"),
        Revocation::Revoked { .. }
    ));
    cluster.shutdown().await;
}

/// The review of 2026-12-04: with auth on, the retry of a write bound to a lease, after the lease
/// ended and the table forgot the write's id, was answered LEASE_NOT_FOUND by the access check's
/// lease lookup (a definite "not applied"), though its first attempt applied. It is proposed
/// instead, and the table refuses it as REQUEST_ID_FORGOTTEN: the first attempt may have applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_retry_bound_to_an_ended_lease_whose_id_was_evicted_is_refused_as_forgotten() {
    let cluster = TestCluster::start_configured(1, |c| c.limits.dedup_capacity = 2).await;
    let leader = cluster.leader().await;
    let open = cluster.client(&[leader]).await;
    let root = add_user(&open, "root", true).await;
    let token_a = add_user(&open, "a", false).await;
    let admin = Client::lazy(
        [cluster.address(leader)],
        options().with_token(root.clone()),
    )
    .expect("client");
    admin
        .auth_change(Change::Enable(AuthEnable {}))
        .await
        .expect("enable");
    let a = Client::lazy(
        [cluster.address(leader)],
        options().with_token(token_a.clone()),
    )
    .expect("client");
    let lease = a.grant(Duration::from_secs(60)).await.expect("grant");
    let seen = a
        .put("a/before", "x", PutOptions::default())
        .await
        .expect("put")
        .revision;

    let mut kv = KvClient::connect(format!("http://{}", cluster.address(leader)))
        .await
        .expect("connect");
    let write = PutRequest {
        key: b"a/bound".to_vec(),
        value: b"1".to_vec(),
        lease: lease.id.get(),
        request_id: Some(zaris_client::proto::RequestId {
            client_id: 79,
            seq: 1,
            seen_revision: seen.get(),
        }),
        ..PutRequest::default()
    };
    let as_a = |write: &PutRequest| {
        let mut request = tonic::Request::new(write.clone());
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", token_a.expose())
                .parse()
                .expect("ascii"),
        );
        request
    };
    kv.put(as_a(&write)).await.expect("first attempt");
    assert!(matches!(
        a.revoke(lease.id).await.expect("revoke"),
        Revocation::Revoked { .. }
    ));
    // Two other identified writes evict the first id from a table of two.
    for _ in 0..2 {
        a.put("a/other", "y", PutOptions::default())
            .await
            .expect("put");
    }
    let status = kv
        .put(as_a(&write))
        .await
        .expect_err("the retry must be refused");
    let detail = zaris_proto::try_detail(&status)
        .expect("detail")
        .expect("a Zaris detail");
    assert_eq!(detail.code(), ErrorCode::RequestIdForgotten, "{detail:?}");
    cluster.shutdown().await;
}

/// A write answered with the values it replaced or deleted (`prev_kv`) reads them: a user who
/// may only write the keys is refused it, as etcd refuses, in a Put, a DeleteRange and a Txn's
/// put; the same writes without `prev_kv` apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_only_user_cannot_read_values_back_through_prev_kv() {
    use zaris_client::proto::{TxnOp, TxnRequest, txn_op::Op};

    let cluster = TestCluster::start(1).await;
    let leader = cluster.leader().await;
    let open = cluster.client(&[leader]).await;
    let root = add_user(&open, "root", true).await;
    let writer = BearerToken::generate();
    let changes = [
        Change::UserAdd(AuthUserAdd {
            name: "writer".into(),
            token_sha256: writer.sha256().to_vec(),
        }),
        Change::RoleAdd(AuthRoleName {
            name: "w-only".into(),
        }),
        Change::RoleGrant(AuthRolePermission {
            role: "w-only".into(),
            permission: Some(Permission {
                kind: PermissionKind::Key.into(),
                prefix: b"w/".to_vec(),
                access: PermissionAccess::Write.into(),
            }),
        }),
        Change::UserGrantRole(AuthUserRole {
            name: "writer".into(),
            role: "w-only".into(),
        }),
    ];
    for change in changes {
        open.auth_change(change).await.expect("auth change");
    }
    open.put("w/secret", "s3cret", PutOptions::default())
        .await
        .expect("put");
    let as_one = |token: &BearerToken| as_user_of(&cluster, leader, token);
    let admin = enabled_by(as_one(&root)).await;
    let w = as_one(&writer);

    let reading = PutOptions {
        prev_kv: true,
        ..PutOptions::default()
    };
    assert_denied(
        w.put("w/secret", "new", reading).await,
        "put with prev_kv",
        "read",
    );
    let deleting = DeleteOptions {
        prefix: true,
        prev_kv: true,
        ..DeleteOptions::default()
    };
    assert_denied(
        w.delete("w/", deleting).await,
        "delete with prev_kv",
        "read",
    );
    let txn_put = |prev_kv| TxnRequest {
        success: vec![TxnOp {
            op: Some(Op::Put(PutRequest {
                key: b"w/secret".to_vec(),
                value: b"txn".to_vec(),
                prev_kv,
                ..PutRequest::default()
            })),
        }],
        ..TxnRequest::default()
    };
    assert_denied(w.txn(txn_put(true)).await, "txn put with prev_kv", "read");
    // Nothing above applied; the same writes without prev_kv do.
    let value = admin.get("w/secret").await.expect("get").map(|kv| kv.value);
    assert_eq!(value.as_deref(), Some(&b"s3cret"[..]));
    w.put("w/secret", "new", PutOptions::default())
        .await
        .expect("put without prev_kv");
    w.txn(txn_put(false)).await.expect("txn without prev_kv");
    w.delete(
        "w/",
        DeleteOptions {
            prefix: true,
            ..DeleteOptions::default()
        },
    )
    .await
    .expect("delete without prev_kv");
    cluster.shutdown().await;
}

/// A lease nobody owns (granted before auth was enabled) is anyone's to see, but not its keys
/// and locks: TimeToLive lists only the names the caller may read, as a Range would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeing_an_unowned_lease_does_not_show_names_the_caller_may_not_read() {
    let cluster = TestCluster::start(1).await;
    let leader = cluster.leader().await;
    let open = cluster.client(&[leader]).await;
    let lease = open.grant(Duration::from_secs(60)).await.expect("grant").id;
    open.put("secret/x", "1", with_lease(lease))
        .await
        .expect("put");
    open.put("a/mine", "1", with_lease(lease))
        .await
        .expect("put");
    for name in ["secret/lock", "a/lock"] {
        assert!(matches!(
            open.lock(name, lease, false, Duration::ZERO)
                .await
                .expect("lock"),
            LockOutcome::Held { .. }
        ));
    }
    let root = add_user(&open, "root", true).await;
    let token_a = add_user(&open, "a", false).await;
    let as_one = |token: &BearerToken| as_user_of(&cluster, leader, token);
    let admin = enabled_by(as_one(&root)).await;

    let seen = as_one(&token_a)
        .time_to_live(lease, true)
        .await
        .expect("ttl")
        .expect("the lease is there");
    assert_eq!(seen.bound_keys, vec![b"a/mine".to_vec()]);
    assert_eq!(seen.locks_held, vec!["a/lock".to_owned()]);
    let all = admin
        .time_to_live(lease, true)
        .await
        .expect("ttl")
        .expect("the lease is there");
    assert_eq!(all.bound_keys.len(), 2);
    assert_eq!(all.locks_held.len(), 2);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_names_its_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let cluster = TestCluster::start_configured(3, certs.configure()).await;
    let tls_options = |name: &str| options().with_tls(certs.client_tls(name));
    let carol = client_with(&cluster, tls_options("carol")).await;
    assert_eq!(
        carol.who_am_i().await.expect("whoami").user,
        "",
        "a certificate that names no user is anonymous"
    );
    let root = add_user(&carol, "root", true).await;
    // A certificate-only user: no token.
    carol
        .auth_change(Change::UserAdd(AuthUserAdd {
            name: "carol".into(),
            token_sha256: Vec::new(),
        }))
        .await
        .expect("user add");
    carol
        .auth_change(Change::RoleAdd(AuthRoleName {
            name: "carol-rw".into(),
        }))
        .await
        .expect("role add");
    carol
        .auth_change(Change::RoleGrant(AuthRolePermission {
            role: "carol-rw".into(),
            permission: Some(permission(PermissionKind::Key, "carol/")),
        }))
        .await
        .expect("role grant");
    carol
        .auth_change(Change::UserGrantRole(AuthUserRole {
            name: "carol".into(),
            role: "carol-rw".into(),
        }))
        .await
        .expect("user grant");
    let admin = client_with(&cluster, tls_options("ops").with_token(root)).await;
    admin
        .auth_change(Change::Enable(AuthEnable {}))
        .await
        .expect("enable");

    let me = carol.who_am_i().await.expect("whoami");
    assert_eq!((me.user.as_str(), me.admin), ("carol", false));
    carol
        .put("carol/x", "1", PutOptions::default())
        .await
        .expect("carol writes her prefix");
    let grant = carol.grant(Duration::from_secs(30)).await.expect("grant");
    assert_eq!(
        carol
            .time_to_live(grant.id, false)
            .await
            .expect("ttl")
            .expect("found")
            .owner,
        "carol"
    );
    assert_denied(
        carol.put("ops/x", "1", PutOptions::default()).await,
        "carol writes elsewhere",
        "user \"carol\" has no write permission",
    );
    // A certificate of the right CA for a name that is no user: refused, naming it.
    let mallory = client_with(&cluster, tls_options("mallory")).await;
    let (code, message) = refusal(mallory.get("carol/x").await, "mallory reads");
    assert_eq!(code, ErrorCode::Unauthenticated, "{message}");
    assert!(
        message.contains("\"mallory\", which is not a user"),
        "{message}"
    );
    cluster.shutdown().await;
}
