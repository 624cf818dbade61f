//! Access control in the state machine: users and roles as replicated changes, how credentials
//! resolve, and what each caller may have proposed (tenant isolation of leases above all).

use zaris_core::auth::{
    ADMIN_ROLE, Access, AuthCommand, AuthError, Caller, Credential, Permission, ResourceKind,
};
use zaris_core::{
    Command, Compare, CompareOp, CompareTarget, Guard, KeySelector, LeaseId, Limits, Outcome,
    Rejection, State, Txn, TxnOp, codec,
};

use super::{Log, TTL, acquire, lease, put_v as put, token};

fn change(log: &mut Log, change: AuthCommand) -> zaris_core::Response {
    log.apply(Command::Auth(change))
}

fn ok(log: &mut Log, c: AuthCommand) {
    assert_eq!(change(log, c.clone()), Ok(Outcome::AuthChanged), "{c:?}");
}

fn refused(log: &mut Log, c: AuthCommand, needle: &str) {
    let before = log.state.auth().clone();
    match change(log, c.clone()) {
        Err(Rejection::AuthRefused(why)) => assert!(why.contains(needle), "{c:?}: {why}"),
        other => panic!("{c:?} should be refused, got {other:?}"),
    }
    assert_eq!(
        log.state.auth(),
        &before,
        "a refused change changed the users or roles"
    );
}

fn permission(kind: ResourceKind, prefix: &str, access: Access) -> Permission {
    Permission {
        kind,
        prefix: prefix.into(),
        access,
    }
}

fn hash(byte: u8) -> [u8; 32] {
    [byte; 32]
}

/// Tenants `a` (keys and locks under `a/`) and `b` (under `b/`, token 0xbb), an admin `root`
/// (token 0xaa), and auth enabled.
fn tenants() -> Log {
    let mut log = Log::new(Limits::default());
    ok(
        &mut log,
        AuthCommand::UserAdd {
            name: "root".into(),
            token_sha256: Some(hash(0xaa)),
        },
    );
    ok(
        &mut log,
        AuthCommand::UserGrantRole {
            name: "root".into(),
            role: ADMIN_ROLE.into(),
        },
    );
    for (tenant, token_byte) in [("a", None), ("b", Some(hash(0xbb)))] {
        ok(
            &mut log,
            AuthCommand::UserAdd {
                name: tenant.into(),
                token_sha256: token_byte,
            },
        );
        ok(
            &mut log,
            AuthCommand::RoleAdd {
                name: format!("{tenant}-rw"),
            },
        );
        for kind in [ResourceKind::Key, ResourceKind::Lock] {
            ok(
                &mut log,
                AuthCommand::RoleGrant {
                    role: format!("{tenant}-rw"),
                    permission: permission(kind, &format!("{tenant}/"), Access::ReadWrite),
                },
            );
        }
        ok(
            &mut log,
            AuthCommand::UserGrantRole {
                name: tenant.into(),
                role: format!("{tenant}-rw"),
            },
        );
    }
    ok(&mut log, AuthCommand::Enable);
    log
}

fn caller(log: &Log, name: &str) -> Caller {
    log.state
        .auth()
        .resolve(&Credential::Certificate(name.into()))
        .expect("a known user resolves")
}

fn grant_as(log: &mut Log, owner: &str) -> LeaseId {
    match log.apply(Command::GrantOwned {
        id: LeaseId::NONE,
        ttl_ms: TTL,
        owner: owner.into(),
    }) {
        Ok(Outcome::Granted { id, .. }) => id,
        other => panic!("grant failed: {other:?}"),
    }
}

fn denied(state: &State, who: &Caller, command: &Command, needle: &str) {
    match state.authorize(who, command) {
        Err(AuthError::Denied(why)) => assert!(why.contains(needle), "{command:?}: {why}"),
        other => panic!("{command:?} by {who:?} should be denied, got {other:?}"),
    }
}

fn allowed(state: &State, who: &Caller, command: &Command) {
    assert_eq!(
        state.authorize(who, command),
        Ok(Vec::new()),
        "{command:?} by {who:?}"
    );
}

#[test]
fn one_tenant_cannot_use_another_tenants_lease_and_an_admin_can() {
    let mut log = tenants();
    let (a, b, root) = (caller(&log, "a"), caller(&log, "b"), caller(&log, "root"));
    assert!(root.admin && !a.admin);
    let lease_b = grant_as(&mut log, "b");
    assert_eq!(log.state.auth().lease_owner(lease_b), Some("b"));
    assert_eq!(
        log.state.lease(lease_b, false).and_then(|l| l.owner),
        Some("b".to_string())
    );
    let state = &log.state;
    let uses = [
        (Command::Revoke { id: lease_b }, "may not revoke lease"),
        (Command::Renew { ids: vec![lease_b] }, "may not renew lease"),
        (put("a/x", lease_b), "may not bind keys to lease"),
        (acquire("a/lock", lease_b, true), "may not lock with lease"),
        (
            Command::LockRelease {
                name: "a/lock".into(),
                lease: lease_b,
                token: token(1),
            },
            "may not lock with lease",
        ),
        (
            Command::Txn(Txn {
                compares: Vec::new(),
                success: vec![TxnOp::Put {
                    key: b"a/y".to_vec(),
                    value: Vec::new(),
                    lease: lease_b,
                }],
                failure: Vec::new(),
                guard: None,
            }),
            "may not bind keys to lease",
        ),
    ];
    for (command, why) in &uses {
        denied(state, &a, command, why);
        // The message names the lease, and never its owner.
        denied(state, &a, command, &format!("lease {lease_b}"));
    }
    // B itself, within its prefix, and the admin anywhere.
    allowed(state, &b, &Command::Revoke { id: lease_b });
    allowed(state, &b, &put("b/x", lease_b));
    allowed(state, &b, &acquire("b/lock", lease_b, false));
    allowed(state, &root, &Command::Revoke { id: lease_b });
    allowed(state, &root, &put("anything", lease_b));
    // A renew batch with one foreign lease is refused whole.
    let lease_a = grant_as(&mut log, "a");
    denied(
        &log.state,
        &a,
        &Command::Renew {
            ids: vec![lease_a, lease_b],
        },
        "may not renew lease",
    );
}

#[test]
fn keys_and_locks_need_a_permission_covering_them_whole() {
    let log = tenants();
    let a = caller(&log, "a");
    let state = &log.state;
    allowed(state, &a, &put("a/x", LeaseId::NONE));
    denied(
        state,
        &a,
        &put("b/x", LeaseId::NONE),
        "user \"a\" has no write permission on key \"b/x\"",
    );
    assert!(
        state
            .auth()
            .check_keys(
                &a,
                &KeySelector::Prefix(b"a/sub".to_vec()),
                zaris_core::auth::Need::Read
            )
            .is_ok()
    );
    // A range reaching past the prefix, a wider prefix, everything.
    for selector in [
        KeySelector::Range {
            start: b"a/".to_vec(),
            end: b"b".to_vec(),
        },
        KeySelector::Range {
            start: b"a/".to_vec(),
            end: Vec::new(),
        },
        KeySelector::Prefix(b"a".to_vec()),
        KeySelector::Prefix(Vec::new()),
    ] {
        denied(
            state,
            &a,
            &Command::Delete {
                selector: selector.clone(),
                guard: None,
                prev_kv: false,
            },
            "no write permission on keys",
        );
    }
    denied(
        state,
        &a,
        &acquire("b/lock", lease(1), false),
        "lock \"b/lock\"",
    );
    // A guard reads the lock; a compare reads the key.
    denied(
        state,
        &a,
        &Command::Put {
            key: b"a/x".to_vec(),
            value: Vec::new(),
            lease: LeaseId::NONE,
            guard: Some(Guard {
                lock: "b/lock".into(),
                token: token(3),
            }),
            prev_kv: false,
        },
        "no read permission on lock \"b/lock\"",
    );
    denied(
        state,
        &a,
        &Command::Txn(Txn {
            compares: vec![Compare {
                key: b"b/secret".to_vec(),
                target: CompareTarget::Version(1),
                op: CompareOp::Equal,
            }],
            success: Vec::new(),
            failure: Vec::new(),
            guard: None,
        }),
        "no read permission on key \"b/secret\"",
    );
    // Limits and auth changes are the admin's.
    denied(
        state,
        &a,
        &Command::SetLimits(Limits::default()),
        "needs the admin role",
    );
    denied(
        state,
        &a,
        &Command::Auth(AuthCommand::Disable),
        "needs the admin role",
    );
}

#[test]
fn a_lease_missing_here_is_reported_for_a_second_look_never_allowed_blindly() {
    let log = tenants();
    let a = caller(&log, "a");
    // Lease 7 may be granted, committed and not yet applied here: the server must look again
    // after a read barrier, and answer "not found" if it is still missing.
    assert_eq!(
        log.state.authorize(&a, &Command::Revoke { id: lease(7) }),
        Ok(vec![lease(7)])
    );
    assert_eq!(
        log.state
            .authorize(&caller(&log, "root"), &Command::Revoke { id: lease(7) }),
        Ok(Vec::new()),
        "an admin may use any lease, known here or not"
    );
}

#[test]
fn credentials_resolve_to_users_and_anonymous_callers_are_refused_once_enabled() {
    let mut log = Log::new(Limits::default());
    ok(
        &mut log,
        AuthCommand::UserAdd {
            name: "svc".into(),
            token_sha256: Some(hash(1)),
        },
    );
    let auth = log.state.auth();
    // Disabled: anyone may call; a known name or token still resolves (and will own its leases).
    assert_eq!(auth.resolve(&Credential::Anonymous), Ok(Caller::default()));
    assert_eq!(
        auth.resolve(&Credential::Certificate("stranger".into())),
        Ok(Caller::default())
    );
    assert_eq!(
        auth.resolve(&Credential::Token(hash(1))).map(|c| c.user),
        Ok(Some("svc".to_string()))
    );
    assert!(
        matches!(auth.resolve(&Credential::Token(hash(2))), Err(AuthError::Unauthenticated(why)) if why.contains("belongs to no user")),
        "a wrong token is refused even while auth is disabled"
    );
    // Enabling needs an admin.
    refused(&mut log, AuthCommand::Enable, "no user has the admin role");
    ok(
        &mut log,
        AuthCommand::UserGrantRole {
            name: "svc".into(),
            role: ADMIN_ROLE.into(),
        },
    );
    ok(&mut log, AuthCommand::Enable);
    let auth = log.state.auth();
    assert!(matches!(
        auth.resolve(&Credential::Anonymous),
        Err(AuthError::Unauthenticated(why)) if why.contains("requires authentication")
    ));
    assert!(matches!(
        auth.resolve(&Credential::Certificate("stranger".into())),
        Err(AuthError::Unauthenticated(why)) if why.contains("\"stranger\", which is not a user")
    ));
    let svc = auth.resolve(&Credential::Token(hash(1))).expect("svc");
    assert!(svc.admin);
}

#[test]
fn user_and_role_changes_are_checked_and_the_last_admin_stays() {
    let mut log = tenants();
    refused(
        &mut log,
        AuthCommand::UserAdd {
            name: "a".into(),
            token_sha256: None,
        },
        "exists",
    );
    refused(
        &mut log,
        AuthCommand::UserAdd {
            name: "c".into(),
            token_sha256: Some(hash(0xbb)),
        },
        "belongs to another user",
    );
    refused(
        &mut log,
        AuthCommand::UserGrantRole {
            name: "a".into(),
            role: "nope".into(),
        },
        "no role \"nope\"",
    );
    refused(
        &mut log,
        AuthCommand::RoleAdd {
            name: ADMIN_ROLE.into(),
        },
        "built in",
    );
    refused(
        &mut log,
        AuthCommand::RoleDelete {
            name: ADMIN_ROLE.into(),
        },
        "built in",
    );
    refused(
        &mut log,
        AuthCommand::UserDelete {
            name: "root".into(),
        },
        "last user with the admin role",
    );
    refused(
        &mut log,
        AuthCommand::UserRevokeRole {
            name: "root".into(),
            role: ADMIN_ROLE.into(),
        },
        "last user with the admin role",
    );
    // Bad names never reach the log (stateless validation).
    assert!(matches!(
        change(&mut log, AuthCommand::RoleAdd { name: "has space".into() }),
        Err(Rejection::InvalidArgument(why)) if why.contains("whitespace")
    ));
    assert!(matches!(
        change(&mut log, AuthCommand::UserAdd { name: String::new(), token_sha256: None }),
        Err(Rejection::InvalidArgument(why)) if why.contains("must not be empty")
    ));
    // Deleting a role takes it from its users: a loses access to a/.
    ok(
        &mut log,
        AuthCommand::RoleDelete {
            name: "a-rw".into(),
        },
    );
    let a = caller(&log, "a");
    denied(
        &log.state,
        &a,
        &put("a/x", LeaseId::NONE),
        "no write permission",
    );
    // A token swap: the old one stops working at once.
    ok(
        &mut log,
        AuthCommand::UserSetToken {
            name: "b".into(),
            token_sha256: Some(hash(0xcc)),
        },
    );
    assert!(
        log.state
            .auth()
            .resolve(&Credential::Token(hash(0xbb)))
            .is_err()
    );
    assert_eq!(
        log.state
            .auth()
            .resolve(&Credential::Token(hash(0xcc)))
            .map(|c| c.user),
        Ok(Some("b".to_string()))
    );
}

#[test]
fn an_owner_is_forgotten_with_its_lease_and_unowned_leases_stay_usable() {
    let mut log = tenants();
    // A plain Grant: what a lease granted anonymously before auth was enabled looks like.
    let unowned = super::grant(&mut log);
    assert_eq!(log.state.auth().lease_owner(unowned), None);
    let a = caller(&log, "a");
    allowed(&log.state, &a, &Command::Renew { ids: vec![unowned] });
    assert!(log.state.auth().lists_lease(&a, unowned));
    let owned = grant_as(&mut log, "b");
    assert!(!log.state.auth().lists_lease(&a, owned));
    assert!(matches!(
        log.apply(Command::Revoke { id: owned }),
        Ok(Outcome::Revoked { .. })
    ));
    assert_eq!(log.state.auth().lease_owner(owned), None);
    // Ids are never reused, so no later lease inherits the owner or the check.
    assert_eq!(
        log.state.authorize(&a, &Command::Revoke { id: owned }),
        Ok(vec![owned])
    );
}

#[test]
fn auth_survives_a_snapshot_and_version_3_to_7_backups_restore_without_what_they_lack() {
    let mut log = tenants();
    let owned = grant_as(&mut log, "a");
    let bytes = log.state.snapshot().expect("snapshot");
    let restored = State::restore(&bytes).expect("restore");
    assert_eq!(restored, log.state);
    assert_eq!(restored.auth().lease_owner(owned), Some("a"));

    // A version-7 state (5 and 6 alike) is this encoding without the trailing lock epochs
    // (empty: one zero byte); a version-4 one also lacks the quota, the limits' last field; a
    // version-3 one also the AuthState before the epochs (empty: 4 zero bytes).
    let mut plain = Log::new(Limits::default());
    let id = super::grant(&mut plain);
    plain.apply(put("k", id)).expect("put");
    let with_epochs = plain.state.snapshot().expect("snapshot");
    assert_eq!(with_epochs.last(), Some(&0), "no lock epochs");
    let mut current = with_epochs[..with_epochs.len() - 1].to_vec();
    current[0] = 7;
    let restored = State::restore(&current).expect("a version-7 backup restores");
    assert_eq!(restored, plain.state);
    let limits_end = codec::encoded_size(&Limits::default()).expect("size");
    let quota_len = codec::encoded_size(&Limits::default().max_state_bytes).expect("size") - 1;
    let mut version_4 = current[..limits_end - quota_len].to_vec();
    version_4.extend_from_slice(&current[limits_end..]);
    version_4[0] = 4;
    let restored = State::restore(&version_4).expect("a version-4 backup restores");
    assert_eq!(restored, plain.state);
    assert_eq!(
        restored.footprint_bytes(),
        plain.state.footprint_bytes(),
        "the footprint is counted again"
    );

    assert_eq!(&version_4[version_4.len() - 4..], &[0, 0, 0, 0]);
    let mut version_3 = version_4[..version_4.len() - 4].to_vec();
    version_3[0] = 3;
    let restored = State::restore(&version_3).expect("a version-3 backup restores");
    assert_eq!(restored, plain.state);
    // A version-3 state with something trailing is not silently read.
    version_3.push(1);
    assert!(State::restore(&version_3).is_err());
}

/// A user deleted and created again under the same name is a new user: the old one's leases
/// are not its to renew or revoke (only an admin's), and their owner says so.
#[test]
fn a_user_created_again_under_a_deleted_users_name_does_not_inherit_its_leases() {
    let mut log = tenants();
    let old = grant_as(&mut log, "b");
    ok(&mut log, AuthCommand::UserDelete { name: "b".into() });
    assert_eq!(log.state.auth().lease_owner(old), Some("deleted user b"));
    ok(
        &mut log,
        AuthCommand::UserAdd {
            name: "b".into(),
            token_sha256: Some(hash(0xbc)),
        },
    );
    let new_b = caller(&log, "b");
    for (command, needle) in [
        (Command::Revoke { id: old }, "may not revoke lease"),
        (Command::Renew { ids: vec![old] }, "may not renew lease"),
    ] {
        denied(&log.state, &new_b, &command, needle);
    }
    let mine = grant_as(&mut log, "b");
    allowed(&log.state, &new_b, &Command::Revoke { id: mine });
    // A grant checked while the user existed, applied after its deletion, is no different.
    ok(&mut log, AuthCommand::UserDelete { name: "b".into() });
    let late = grant_as(&mut log, "b");
    assert_eq!(log.state.auth().lease_owner(late), Some("deleted user b"));
    allowed(
        &log.state,
        &caller(&log, "root"),
        &Command::Revoke { id: old },
    );
    // The orphaned owner is charged like any (the footprint stays exact).
    assert_eq!(
        log.state.footprint_bytes(),
        log.state.recounted_footprint_bytes()
    );
}
