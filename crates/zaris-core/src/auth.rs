//! Access control: users, roles, and which user owns which lease.
//!
//! The [`AuthState`] is part of the replicated [`State`](crate::State), changed only by
//! [`AuthCommand`] entries, so every node resolves and checks callers alike. The server resolves a
//! caller's [`Credential`] (a client certificate's name or a bearer token's hash) to a [`Caller`]
//! and checks each request against it before proposing; a lease granted by a known user records
//! that user, and while auth is enabled only that user or an admin may renew it, revoke it, bind
//! keys to it or lock with it (etcd checks only the bound keys' permissions there).
//!
//! Tokens are never stored: a user holds the SHA-256 of its token (random and long, so an unsalted
//! hash is enough), and the client sends the token itself only to the server, never into the log.

use std::collections::{BTreeMap, BTreeSet};

use imbl::OrdMap;
use serde::{Deserialize, Serialize};

use crate::types::{KeySelector, LeaseId};

/// The built-in role that may do anything: manage users, roles, membership and limits, and use any
/// lease. It always exists and carries no permission list.
pub const ADMIN_ROLE: &str = "admin";
/// Users in a cluster.
pub const MAX_USERS: usize = 1_024;
/// Roles in a cluster, besides `admin`.
pub const MAX_ROLES: usize = 256;
/// Roles one user may hold.
pub const MAX_ROLES_PER_USER: usize = 64;
/// Permissions one role may hold.
pub const MAX_PERMISSIONS_PER_ROLE: usize = 256;
/// Longest user or role name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Longest permission prefix, in bytes (a key prefix longer than the largest key selects nothing
/// useful; 4 KiB is the default largest key).
pub const MAX_PREFIX_BYTES: usize = 4 * 1024;

/// What a permission allows on what it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn covers(self, need: Need) -> bool {
        matches!(
            (self, need),
            (Access::ReadWrite, _) | (Access::Read, Need::Read) | (Access::Write, Need::Write)
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "readwrite",
        }
    }
}

/// What a request needs of a key or lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
}

impl Need {
    fn name(self) -> &'static str {
        match self {
            Need::Read => "read",
            Need::Write => "write",
        }
    }
}

/// What a permission names: keys, or lock (and election) names, by prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResourceKind {
    Key,
    Lock,
}

impl ResourceKind {
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Key => "key",
            ResourceKind::Lock => "lock",
        }
    }
}

/// `access` to every key (or lock name) that starts with `prefix`; the empty prefix names all.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Permission {
    pub kind: ResourceKind,
    #[serde(with = "crate::codec::bytes")]
    pub prefix: Vec<u8>,
    pub access: Access,
}

/// A user: its roles and, for clients that cannot hold certificates, its token's SHA-256.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub roles: BTreeSet<String>,
    pub token_sha256: Option<[u8; 32]>,
}

/// A role: a set of permissions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub permissions: BTreeSet<Permission>,
}

/// A change to users, roles or the switch; admin only once auth is enabled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthCommand {
    /// Turns checking on; refused unless some user holds the admin role (or nobody could manage
    /// the cluster afterwards).
    Enable,
    Disable,
    UserAdd {
        name: String,
        token_sha256: Option<[u8; 32]>,
    },
    UserDelete {
        name: String,
    },
    /// Replaces (or, with `None`, removes) a user's token.
    UserSetToken {
        name: String,
        token_sha256: Option<[u8; 32]>,
    },
    UserGrantRole {
        name: String,
        role: String,
    },
    UserRevokeRole {
        name: String,
        role: String,
    },
    RoleAdd {
        name: String,
    },
    /// Deletes a role and takes it from every user.
    RoleDelete {
        name: String,
    },
    RoleGrant {
        role: String,
        permission: Permission,
    },
    RoleRevoke {
        role: String,
        permission: Permission,
    },
}

impl AuthCommand {
    /// Whether the change may add to the directory (so must fit the state quota, and is undone
    /// if it does not). Deletes, revokes and the switch never do, so a full state can always be
    /// tidied.
    pub fn may_grow(&self) -> bool {
        matches!(
            self,
            AuthCommand::UserAdd { .. }
                | AuthCommand::UserSetToken { .. }
                | AuthCommand::UserGrantRole { .. }
                | AuthCommand::RoleAdd { .. }
                | AuthCommand::RoleGrant { .. }
        )
    }

    /// Stateless checks: names and prefixes within their limits.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            AuthCommand::Enable | AuthCommand::Disable => Ok(()),
            AuthCommand::UserAdd { name, .. }
            | AuthCommand::UserDelete { name }
            | AuthCommand::UserSetToken { name, .. } => check_name("user", name),
            AuthCommand::UserGrantRole { name, role }
            | AuthCommand::UserRevokeRole { name, role } => {
                check_name("user", name)?;
                check_name("role", role)
            }
            AuthCommand::RoleAdd { name } | AuthCommand::RoleDelete { name } => {
                check_name("role", name)
            }
            AuthCommand::RoleGrant { role, permission }
            | AuthCommand::RoleRevoke { role, permission } => {
                check_name("role", role)?;
                if permission.prefix.len() > MAX_PREFIX_BYTES {
                    return Err(format!(
                        "a permission prefix may have at most {MAX_PREFIX_BYTES} bytes, this one \
                         has {}",
                        permission.prefix.len()
                    ));
                }
                Ok(())
            }
        }
    }
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("a {what} name must not be empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a {what} name may have at most {MAX_NAME_BYTES} bytes, {name:?} has {}",
            name.len()
        ));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "a {what} name must not contain whitespace or control characters: {name:?}"
        ));
    }
    Ok(())
}

/// How a caller identified itself, before it is resolved against the users.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// Neither a token nor a client certificate.
    Anonymous,
    /// The name a verified client certificate carries (its subject's CN, else its first SAN).
    Certificate(String),
    /// The SHA-256 of a bearer token.
    Token([u8; 32]),
}

/// A resolved caller: the user it is (if any) and whether that user is an admin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub user: Option<String>,
    pub admin: bool,
}

impl Caller {
    fn describe(&self) -> String {
        match &self.user {
            Some(user) => format!("user {user:?}"),
            None => "an anonymous caller".into(),
        }
    }
}

/// Why a caller may not do what it asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Not a known user (UNAUTHENTICATED).
    #[error("{0}")]
    Unauthenticated(String),
    /// A known user without the permission (PERMISSION_DENIED); the message names what was denied.
    #[error("permission denied: {0}")]
    Denied(String),
}

/// What a request does with a lease, for the message when it is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseUse {
    Renew,
    Revoke,
    Bind,
    Lock,
    Inspect,
}

impl LeaseUse {
    fn verb(self) -> &'static str {
        match self {
            LeaseUse::Renew => "renew",
            LeaseUse::Revoke => "revoke",
            LeaseUse::Bind => "bind keys to",
            LeaseUse::Lock => "lock with",
            LeaseUse::Inspect => "inspect",
        }
    }
}

/// Whether a caller may use a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseAccess {
    Allowed,
    /// The lease is not in this state: the caller must look again after a linearizable read
    /// barrier (the grant may be committed and not yet applied here), and treat it as not found if
    /// it is still missing, never let the request through to a lease granted later.
    Unknown,
}

/// Users, roles, the enable switch and lease owners.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthState {
    enabled: bool,
    users: BTreeMap<String, User>,
    roles: BTreeMap<String, Role>,
    /// The user that granted each live lease granted by a known user. Other leases (granted
    /// anonymously, before auth was enabled) have no owner: any authenticated user may use them.
    #[serde(with = "crate::state::persistent::ord_map")]
    lease_owners: OrdMap<LeaseId, String>,
}

/// The users and roles, apart from the switch and the lease owners.
#[derive(Debug)]
pub(crate) struct Directory {
    users: BTreeMap<String, User>,
    roles: BTreeMap<String, Role>,
}

/// The owner recorded for the leases of a deleted user: only an admin may use them.
fn deleted_owner(name: &str) -> String {
    format!("deleted user {name}")
}

impl AuthState {
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The encoded size of the users and roles (lease owners are charged with their leases).
    pub fn directory_bytes(&self) -> u64 {
        // Encoding into a counter cannot fail for these types; 0 would only under-charge.
        crate::codec::encoded_size(&(&self.users, &self.roles)).map_or(0, |n| n as u64)
    }

    pub fn users(&self) -> &BTreeMap<String, User> {
        &self.users
    }

    pub fn roles(&self) -> &BTreeMap<String, Role> {
        &self.roles
    }

    /// The user that granted lease `id`, or `deleted user NAME` once that user is deleted (a
    /// name no user can have: it holds spaces).
    pub fn lease_owner(&self, id: LeaseId) -> Option<&str> {
        self.lease_owners.get(&id).map(String::as_str)
    }

    /// Records `owner` as lease `id`'s. A user deleted between the grant's check and its apply
    /// is recorded as deleted, as its other leases are.
    pub(crate) fn set_lease_owner(&mut self, id: LeaseId, owner: &str) {
        let owner = if self.users.contains_key(owner) {
            owner.to_owned()
        } else {
            deleted_owner(owner)
        };
        self.lease_owners.insert(id, owner);
    }

    /// A copy of the users and roles, to undo a change with.
    pub(crate) fn directory(&self) -> Directory {
        Directory {
            users: self.users.clone(),
            roles: self.roles.clone(),
        }
    }

    pub(crate) fn restore_directory(&mut self, saved: Directory) {
        self.users = saved.users;
        self.roles = saved.roles;
    }

    pub(crate) fn forget_lease(&mut self, id: LeaseId) {
        self.lease_owners.remove(&id);
    }

    pub(crate) fn lease_owners(&self) -> impl Iterator<Item = (&LeaseId, &String)> {
        self.lease_owners.iter()
    }

    fn is_admin(&self, user: &str) -> bool {
        self.users
            .get(user)
            .is_some_and(|u| u.roles.contains(ADMIN_ROLE))
    }

    /// The user whose token hashes to `hash`. Every user's hash is compared, each in constant
    /// time, so how long the lookup takes tells nothing of how near a wrong token's hash came to
    /// a stored one, nor which user matched.
    fn user_with_token(&self, hash: &[u8; 32]) -> Option<&str> {
        use subtle::ConstantTimeEq as _;
        let mut found = None;
        for (name, user) in &self.users {
            if let Some(stored) = &user.token_sha256
                && bool::from(stored.ct_eq(hash))
            {
                found = Some(name.as_str());
            }
        }
        found
    }

    /// Resolves a credential to a caller. A token must belong to a user, enabled or not (a wrong
    /// token is a mistake worth saying); a certificate that names no user is anonymous. With auth
    /// enabled, anonymous callers are refused.
    pub fn resolve(&self, credential: &Credential) -> Result<Caller, AuthError> {
        let user = match credential {
            Credential::Anonymous => None,
            Credential::Certificate(name) => self.users.contains_key(name).then(|| name.clone()),
            Credential::Token(hash) => Some(
                self.user_with_token(hash)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        AuthError::Unauthenticated(
                            "the bearer token belongs to no user (it was replaced or its user \
                             deleted); ask an admin for a new one (zaris auth user token NAME)"
                                .into(),
                        )
                    })?,
            ),
        };
        if self.enabled && user.is_none() {
            let why = match credential {
                Credential::Certificate(name) => format!(
                    "this cluster requires authentication, and the client certificate names \
                     {name:?}, which is not a user; an admin adds it with `zaris auth user add \
                     {name}`"
                ),
                _ => "this cluster requires authentication: give a bearer token (--token or \
                      ZARIS_TOKEN) or a client certificate that names a user (--cert and --key)"
                    .into(),
            };
            return Err(AuthError::Unauthenticated(why));
        }
        let admin = user.as_deref().is_some_and(|u| self.is_admin(u));
        Ok(Caller { user, admin })
    }

    /// Whether checks apply to this caller at all.
    fn unchecked(&self, caller: &Caller) -> bool {
        !self.enabled || caller.admin
    }

    /// Admin only (membership, limits, users and roles, snapshots) once auth is enabled.
    pub fn check_admin(&self, caller: &Caller, what: &str) -> Result<(), AuthError> {
        if self.unchecked(caller) {
            return Ok(());
        }
        Err(AuthError::Denied(format!(
            "{} may not {what}: that needs the {ADMIN_ROLE} role",
            caller.describe()
        )))
    }

    /// Checks `need` on every key `selector` selects: one permission must cover the whole
    /// selection (permissions are not combined to cover a range).
    pub fn check_keys(
        &self,
        caller: &Caller,
        selector: &KeySelector,
        need: Need,
    ) -> Result<(), AuthError> {
        if self.unchecked(caller) {
            return Ok(());
        }
        let covered = self
            .permissions(caller, ResourceKind::Key, need)
            .any(|prefix| selection_within(selector, prefix));
        if covered {
            return Ok(());
        }
        Err(AuthError::Denied(format!(
            "{} has no {} permission on {}",
            caller.describe(),
            need.name(),
            describe_selector(selector)
        )))
    }

    /// Checks `need` on lock (or election) `name`.
    pub fn check_lock(&self, caller: &Caller, name: &str, need: Need) -> Result<(), AuthError> {
        if self.unchecked(caller) {
            return Ok(());
        }
        if self
            .permissions(caller, ResourceKind::Lock, need)
            .any(|prefix| name.as_bytes().starts_with(prefix))
        {
            return Ok(());
        }
        Err(AuthError::Denied(format!(
            "{} has no {} permission on lock {name:?}",
            caller.describe(),
            need.name()
        )))
    }

    /// Whether `caller` may use lease `id` (`exists`: whether the lease is live in this state).
    pub fn check_lease(
        &self,
        caller: &Caller,
        id: LeaseId,
        exists: bool,
        usage: LeaseUse,
    ) -> Result<LeaseAccess, AuthError> {
        if self.unchecked(caller) {
            return Ok(LeaseAccess::Allowed);
        }
        if !exists {
            return Ok(LeaseAccess::Unknown);
        }
        match self.lease_owners.get(&id) {
            None => Ok(LeaseAccess::Allowed),
            Some(owner) if Some(owner) == caller.user.as_ref() => Ok(LeaseAccess::Allowed),
            Some(_) => Err(AuthError::Denied(format!(
                "{} may not {} lease {id}: it was granted by another user (only its owner or \
                 an {ADMIN_ROLE} may)",
                caller.describe(),
                usage.verb()
            ))),
        }
    }

    /// Whether `caller` sees lease `id` in lease lists.
    pub fn lists_lease(&self, caller: &Caller, id: LeaseId) -> bool {
        self.unchecked(caller)
            || match self.lease_owners.get(&id) {
                None => true,
                Some(owner) => Some(owner) == caller.user.as_ref(),
            }
    }

    /// The prefixes of `kind` that `caller`'s roles grant `need` on.
    fn permissions<'a>(
        &'a self,
        caller: &'a Caller,
        kind: ResourceKind,
        need: Need,
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        caller
            .user
            .as_ref()
            .and_then(|name| self.users.get(name))
            .into_iter()
            .flat_map(|user| user.roles.iter())
            .filter_map(|role| self.roles.get(role))
            .flat_map(|role| role.permissions.iter())
            .filter(move |p| p.kind == kind && p.access.covers(need))
            .map(|p| p.prefix.as_slice())
    }

    /// Applies a change; rejections are messages (FAILED_PRECONDITION on the wire).
    pub(crate) fn apply(&mut self, command: &AuthCommand) -> Result<(), String> {
        match command {
            AuthCommand::Enable => {
                if !self.users.values().any(|u| u.roles.contains(ADMIN_ROLE)) {
                    return Err(format!(
                        "no user has the {ADMIN_ROLE} role: add one first (zaris auth user add \
                         NAME --role {ADMIN_ROLE}), or nobody could manage the cluster"
                    ));
                }
                self.enabled = true;
            }
            AuthCommand::Disable => self.enabled = false,
            AuthCommand::UserAdd { name, token_sha256 } => {
                if self.users.contains_key(name) {
                    return Err(format!("user {name:?} exists"));
                }
                if self.users.len() >= MAX_USERS {
                    return Err(format!(
                        "the cluster has {MAX_USERS} users, the most it may"
                    ));
                }
                self.check_token_free(token_sha256.as_ref())?;
                self.users.insert(
                    name.clone(),
                    User {
                        roles: BTreeSet::new(),
                        token_sha256: *token_sha256,
                    },
                );
            }
            AuthCommand::UserDelete { name } => {
                self.user(name)?;
                self.check_keeps_an_admin(name, None)?;
                self.users.remove(name);
                // Its leases stay (they end at their TTL, or when an admin revokes them), but
                // no user may use them any more: not even one created later with the same name.
                let orphaned = deleted_owner(name);
                let owned: Vec<LeaseId> = self
                    .lease_owners
                    .iter()
                    .filter(|(_, owner)| *owner == name)
                    .map(|(lease, _)| *lease)
                    .collect();
                for lease in owned {
                    self.lease_owners.insert(lease, orphaned.clone());
                }
            }
            AuthCommand::UserSetToken { name, token_sha256 } => {
                self.check_token_free(token_sha256.as_ref())?;
                self.user_mut(name)?.token_sha256 = *token_sha256;
            }
            AuthCommand::UserGrantRole { name, role } => {
                if role != ADMIN_ROLE && !self.roles.contains_key(role) {
                    return Err(format!("no role {role:?}"));
                }
                let user = self.user_mut(name)?;
                if !user.roles.contains(role) && user.roles.len() >= MAX_ROLES_PER_USER {
                    return Err(format!(
                        "user {name:?} has {MAX_ROLES_PER_USER} roles, the most a user may"
                    ));
                }
                user.roles.insert(role.clone());
            }
            AuthCommand::UserRevokeRole { name, role } => {
                self.user(name)?;
                self.check_keeps_an_admin(name, Some(role))?;
                self.user_mut(name)?.roles.remove(role);
            }
            AuthCommand::RoleAdd { name } => {
                if name == ADMIN_ROLE {
                    return Err(format!("{ADMIN_ROLE} is built in"));
                }
                if self.roles.contains_key(name) {
                    return Err(format!("role {name:?} exists"));
                }
                if self.roles.len() >= MAX_ROLES {
                    return Err(format!(
                        "the cluster has {MAX_ROLES} roles, the most it may"
                    ));
                }
                self.roles.insert(name.clone(), Role::default());
            }
            AuthCommand::RoleDelete { name } => {
                if name == ADMIN_ROLE {
                    return Err(format!("{ADMIN_ROLE} is built in and cannot be deleted"));
                }
                if self.roles.remove(name).is_none() {
                    return Err(format!("no role {name:?}"));
                }
                for user in self.users.values_mut() {
                    user.roles.remove(name);
                }
            }
            AuthCommand::RoleGrant { role, permission } => {
                let role_name = role;
                let role = self.role_mut(role_name)?;
                if !role.permissions.contains(permission)
                    && role.permissions.len() >= MAX_PERMISSIONS_PER_ROLE
                {
                    return Err(format!(
                        "role {role_name:?} has {MAX_PERMISSIONS_PER_ROLE} permissions, the most \
                         a role may"
                    ));
                }
                role.permissions.insert(permission.clone());
            }
            AuthCommand::RoleRevoke { role, permission } => {
                if !self.role_mut(role)?.permissions.remove(permission) {
                    return Err(format!("role {role:?} has no such permission"));
                }
            }
        }
        Ok(())
    }

    fn user(&self, name: &str) -> Result<&User, String> {
        self.users
            .get(name)
            .ok_or_else(|| format!("no user {name:?}"))
    }

    fn user_mut(&mut self, name: &str) -> Result<&mut User, String> {
        self.users
            .get_mut(name)
            .ok_or_else(|| format!("no user {name:?}"))
    }

    fn role_mut(&mut self, name: &str) -> Result<&mut Role, String> {
        if name == ADMIN_ROLE {
            return Err(format!(
                "{ADMIN_ROLE} is built in: it may do anything and has no permission list"
            ));
        }
        self.roles
            .get_mut(name)
            .ok_or_else(|| format!("no role {name:?}"))
    }

    fn check_token_free(&self, token_sha256: Option<&[u8; 32]>) -> Result<(), String> {
        match token_sha256 {
            Some(hash)
                if self
                    .users
                    .values()
                    .any(|u| u.token_sha256.as_ref() == Some(hash)) =>
            {
                Err("that token belongs to another user; generate a new one".into())
            }
            _ => Ok(()),
        }
    }

    /// While enabled, the last admin may not lose the role (by deletion, or by revoking `role`).
    fn check_keeps_an_admin(&self, name: &str, role: Option<&String>) -> Result<(), String> {
        if !self.enabled || role.is_some_and(|r| r != ADMIN_ROLE) || !self.is_admin(name) {
            return Ok(());
        }
        let admins = self
            .users
            .values()
            .filter(|u| u.roles.contains(ADMIN_ROLE))
            .count();
        if admins <= 1 {
            return Err(format!(
                "{name:?} is the last user with the {ADMIN_ROLE} role while auth is enabled; \
                 make another admin first, or disable auth"
            ));
        }
        Ok(())
    }
}

/// Whether every key `selector` selects starts with `prefix`.
fn selection_within(selector: &KeySelector, prefix: &[u8]) -> bool {
    match selector {
        KeySelector::Key(key) | KeySelector::Prefix(key) => key.starts_with(prefix),
        KeySelector::Range { start, end } => {
            start.starts_with(prefix)
                && match prefix_end(prefix) {
                    // Every key from `prefix` on starts with it (an all-0xff or empty prefix).
                    None => true,
                    Some(limit) => !end.is_empty() && end.as_slice() <= limit.as_slice(),
                }
        }
    }
}

/// The first key above every key that starts with `prefix`, if there is one.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

fn describe_selector(selector: &KeySelector) -> String {
    match selector {
        KeySelector::Key(key) => format!("key {:?}", String::from_utf8_lossy(key)),
        KeySelector::Prefix(prefix) => {
            format!("keys with prefix {:?}", String::from_utf8_lossy(prefix))
        }
        KeySelector::Range { start, end } => format!(
            "keys [{:?}, {})",
            String::from_utf8_lossy(start),
            if end.is_empty() {
                "the end".to_string()
            } else {
                format!("{:?}", String::from_utf8_lossy(end))
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_within_a_prefix_only_when_it_ends_before_the_prefix_does() {
        let range = |s: &[u8], e: &[u8]| KeySelector::Range {
            start: s.to_vec(),
            end: e.to_vec(),
        };
        assert!(selection_within(&range(b"a/", b"a0"), b"a/"));
        assert!(selection_within(&range(b"a/x", b"a/y"), b"a/"));
        assert!(!selection_within(&range(b"a/", b"a1"), b"a/"));
        assert!(!selection_within(&range(b"a/", b""), b"a/"));
        assert!(selection_within(&range(b"a/", b""), b""));
        assert!(selection_within(&range(b"\xff", b""), b"\xff"));
        assert!(!selection_within(
            &KeySelector::Prefix(b"a".to_vec()),
            b"a/"
        ));
        assert!(selection_within(
            &KeySelector::Prefix(b"a/b".to_vec()),
            b"a/"
        ));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}
