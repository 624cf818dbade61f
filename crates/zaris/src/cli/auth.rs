//! `zaris auth ...`: who am I, users, roles, and the switch.

use anyhow::Result;
use clap::{Subcommand, ValueEnum};
use serde_json::{Value, json};
use zaris_client::BearerToken;
use zaris_client::proto::auth_change_request::Change;
use zaris_client::proto::{
    AuthDisable, AuthEnable, AuthRoleName, AuthRolePermission, AuthUserAdd, AuthUserName,
    AuthUserRole, AuthUserToken, Permission, PermissionAccess, PermissionKind,
};

use super::Cli;

/// `zaris auth ...`
#[derive(Subcommand, Debug)]
pub enum AuthCmd {
    /// Show who the cluster takes you to be (your user, roles, whether auth is enabled).
    #[command(after_help = "Example: zaris auth whoami --token \"$ZARIS_TOKEN\"")]
    Whoami,
    /// Show whether auth is enabled, every user and every role (admin only once enabled).
    #[command(after_help = "Example: zaris auth status -o json")]
    Status,
    /// Turn access checks on. A user with the admin role must exist, and clients should have
    /// their credentials first: from then on a call that names no user is refused.
    #[command(after_help = "Example: zaris auth enable --token \"$ROOT_TOKEN\"\n\
                      (after `zaris auth user add root --role admin` printed root's token)")]
    Enable,
    /// Turn access checks off (every call is allowed again; owners are kept).
    #[command(after_help = "Example: zaris auth disable --token \"$ROOT_TOKEN\"")]
    Disable,
    /// Add, delete or change users.
    #[command(
        subcommand,
        after_help = "Example: zaris auth user add billing --role billing-rw"
    )]
    User(UserCmd),
    /// Add, delete or change roles.
    #[command(subcommand, after_help = "Example: zaris auth role add billing-rw")]
    Role(RoleCmd),
}

/// `zaris auth user ...`
#[derive(Subcommand, Debug)]
pub enum UserCmd {
    /// Add a user and print a new bearer token for it (shown once; the cluster keeps only its
    /// SHA-256). A client certificate whose CN (or first SAN) is NAME also identifies the user.
    #[command(after_help = "Example: zaris auth user add billing --role billing-rw")]
    Add {
        name: String,
        /// Give the user this role too (repeatable; `admin` is built in).
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// No token: the user authenticates with a client certificate only.
        #[arg(long)]
        no_token: bool,
    },
    /// Delete a user (its leases keep their owner: only an admin may then use them).
    #[command(after_help = "Example: zaris auth user delete billing")]
    Delete { name: String },
    /// Give a user a new token and print it; the old one stops working at once.
    #[command(after_help = "Example: zaris auth user token billing")]
    Token {
        name: String,
        /// Remove the user's token instead (certificate only from then on).
        #[arg(long)]
        remove: bool,
    },
    /// Give a user a role.
    #[command(after_help = "Example: zaris auth user grant billing billing-rw")]
    Grant { name: String, role: String },
    /// Take a role from a user.
    #[command(after_help = "Example: zaris auth user revoke billing billing-rw")]
    Revoke { name: String, role: String },
}

/// `zaris auth role ...`
#[derive(Subcommand, Debug)]
pub enum RoleCmd {
    /// Add a role (without permissions).
    #[command(after_help = "Example: zaris auth role add billing-rw")]
    Add { name: String },
    /// Delete a role, and take it from every user.
    #[command(after_help = "Example: zaris auth role delete billing-rw")]
    Delete { name: String },
    /// Let a role read and/or write keys, or locks and elections, that start with PREFIX
    /// ("" names all).
    #[command(after_help = "Example: zaris auth role grant billing-rw key readwrite billing/")]
    Grant {
        role: String,
        kind: KindArg,
        access: AccessArg,
        prefix: String,
    },
    /// Take a permission from a role (given exactly as it was granted).
    #[command(after_help = "Example: zaris auth role revoke billing-rw key readwrite billing/")]
    Revoke {
        role: String,
        kind: KindArg,
        access: AccessArg,
        prefix: String,
    },
}

/// What a permission names.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindArg {
    /// Keys.
    Key,
    /// Lock and election names.
    Lock,
}

/// What a permission allows.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessArg {
    Read,
    Write,
    Readwrite,
}

fn permission(kind: KindArg, access: AccessArg, prefix: String) -> Permission {
    Permission {
        kind: match kind {
            KindArg::Key => PermissionKind::Key,
            KindArg::Lock => PermissionKind::Lock,
        }
        .into(),
        prefix: prefix.into_bytes(),
        access: match access {
            AccessArg::Read => PermissionAccess::Read,
            AccessArg::Write => PermissionAccess::Write,
            AccessArg::Readwrite => PermissionAccess::Readwrite,
        }
        .into(),
    }
}

fn permission_text(permission: &Permission) -> String {
    let kind = match PermissionKind::try_from(permission.kind) {
        Ok(PermissionKind::Lock) => "lock",
        _ => "key",
    };
    let access = match PermissionAccess::try_from(permission.access) {
        Ok(PermissionAccess::Read) => "read",
        Ok(PermissionAccess::Write) => "write",
        _ => "readwrite",
    };
    format!(
        "{kind} {access} {:?}",
        String::from_utf8_lossy(&permission.prefix)
    )
}

impl Cli {
    pub(super) async fn auth(&self, cmd: AuthCmd) -> Result<()> {
        match cmd {
            AuthCmd::Whoami => {
                let me = self.client.who_am_i().await.map_err(|e| self.fail(&e))?;
                self.emit(
                    &json!({ "user": me.user, "admin": me.admin, "enabled": me.enabled,
                             "roles": me.roles }),
                    || {
                        let who = if me.user.is_empty() {
                            "anonymous".to_string()
                        } else {
                            format!("user {}", me.user)
                        };
                        format!(
                            "{who} (roles: {}); auth is {}",
                            if me.roles.is_empty() {
                                "none".to_string()
                            } else {
                                me.roles.join(", ")
                            },
                            if me.enabled { "enabled" } else { "disabled" }
                        )
                    },
                );
            }
            AuthCmd::Status => {
                let status = self.client.auth_status().await.map_err(|e| self.fail(&e))?;
                let users: Vec<Value> = status
                    .users
                    .iter()
                    .map(|u| json!({ "name": u.name, "roles": u.roles, "has_token": u.has_token }))
                    .collect();
                let roles: Vec<Value> = status
                    .roles
                    .iter()
                    .map(|r| {
                        json!({ "name": r.name,
                                "permissions": r.permissions.iter().map(permission_text).collect::<Vec<_>>() })
                    })
                    .collect();
                self.emit(
                    &json!({ "enabled": status.enabled, "users": users, "roles": roles }),
                    || {
                        let mut text = format!(
                            "auth is {}\n\nUSER\tROLES\tTOKEN\n",
                            if status.enabled {
                                "enabled"
                            } else {
                                "disabled"
                            }
                        );
                        for u in &status.users {
                            text.push_str(&format!(
                                "{}\t{}\t{}\n",
                                u.name,
                                u.roles.join(","),
                                if u.has_token { "yes" } else { "no" }
                            ));
                        }
                        text.push_str("\nROLE\tPERMISSIONS\n");
                        for r in &status.roles {
                            let permissions: Vec<String> =
                                r.permissions.iter().map(permission_text).collect();
                            text.push_str(&format!("{}\t{}\n", r.name, permissions.join("; ")));
                        }
                        text.trim_end().to_string()
                    },
                );
            }
            AuthCmd::Enable => {
                self.change(Change::Enable(AuthEnable {}), "auth enabled")
                    .await?
            }
            AuthCmd::Disable => {
                self.change(Change::Disable(AuthDisable {}), "auth disabled")
                    .await?
            }
            AuthCmd::User(cmd) => self.auth_user(cmd).await?,
            AuthCmd::Role(cmd) => self.auth_role(cmd).await?,
        }
        Ok(())
    }

    async fn auth_user(&self, cmd: UserCmd) -> Result<()> {
        match cmd {
            UserCmd::Add {
                name,
                roles,
                no_token,
            } => {
                let token = (!no_token).then(BearerToken::generate);
                let add = AuthUserAdd {
                    name: name.clone(),
                    token_sha256: token.as_ref().map_or(Vec::new(), |t| t.sha256().to_vec()),
                };
                self.apply(Change::UserAdd(add)).await?;
                for role in &roles {
                    self.apply(Change::UserGrantRole(AuthUserRole {
                        name: name.clone(),
                        role: role.clone(),
                    }))
                    .await?;
                }
                self.print_token(&name, token.as_ref(), "added user");
            }
            UserCmd::Delete { name } => {
                self.change(
                    Change::UserDelete(AuthUserName { name: name.clone() }),
                    &format!("deleted user {name}"),
                )
                .await?
            }
            UserCmd::Token { name, remove } => {
                let token = (!remove).then(BearerToken::generate);
                self.apply(Change::UserSetToken(AuthUserToken {
                    name: name.clone(),
                    token_sha256: token.as_ref().map_or(Vec::new(), |t| t.sha256().to_vec()),
                }))
                .await?;
                self.print_token(&name, token.as_ref(), "new token for user");
            }
            UserCmd::Grant { name, role } => {
                self.change(
                    Change::UserGrantRole(AuthUserRole {
                        name: name.clone(),
                        role: role.clone(),
                    }),
                    &format!("user {name} has role {role}"),
                )
                .await?
            }
            UserCmd::Revoke { name, role } => {
                self.change(
                    Change::UserRevokeRole(AuthUserRole {
                        name: name.clone(),
                        role: role.clone(),
                    }),
                    &format!("user {name} no longer has role {role}"),
                )
                .await?
            }
        }
        Ok(())
    }

    async fn auth_role(&self, cmd: RoleCmd) -> Result<()> {
        match cmd {
            RoleCmd::Add { name } => {
                self.change(
                    Change::RoleAdd(AuthRoleName { name: name.clone() }),
                    &format!("added role {name}"),
                )
                .await
            }
            RoleCmd::Delete { name } => {
                self.change(
                    Change::RoleDelete(AuthRoleName { name: name.clone() }),
                    &format!("deleted role {name}"),
                )
                .await
            }
            RoleCmd::Grant {
                role,
                kind,
                access,
                prefix,
            } => {
                self.role_permission(role, permission(kind, access, prefix), true)
                    .await
            }
            RoleCmd::Revoke {
                role,
                kind,
                access,
                prefix,
            } => {
                self.role_permission(role, permission(kind, access, prefix), false)
                    .await
            }
        }
    }

    /// Gives (`grant`) or takes a permission.
    async fn role_permission(
        &self,
        role: String,
        permission: Permission,
        grant: bool,
    ) -> Result<()> {
        let (verb, change): (&str, fn(AuthRolePermission) -> Change) = if grant {
            ("may", Change::RoleGrant)
        } else {
            ("no longer may", Change::RoleRevoke)
        };
        let text = format!("role {role} {verb} {}", permission_text(&permission));
        let change = change(AuthRolePermission {
            role,
            permission: Some(permission),
        });
        self.change(change, &text).await
    }

    /// Applies one change; prints `done` (or its revision in JSON).
    async fn change(&self, change: Change, done: &str) -> Result<()> {
        let revision = self.apply(change).await?;
        self.emit(&json!({ "revision": revision }), || done.to_string());
        Ok(())
    }

    async fn apply(&self, change: Change) -> Result<u64> {
        self.client
            .auth_change(change)
            .await
            .map(|revision| revision.get())
            .map_err(|e| self.fail(&e))
    }

    fn print_token(&self, name: &str, token: Option<&BearerToken>, what: &str) {
        let exposed = token.map(BearerToken::expose);
        self.emit(&json!({ "user": name, "token": exposed }), || match exposed {
            Some(token) => format!(
                "{what} {name}\ntoken: {token}\n(shown once: the cluster keeps only its SHA-256; \
                 give it with --token or ZARIS_TOKEN, over TLS)"
            ),
            None => format!("{what} {name} (no token: a client certificate naming {name})"),
        });
    }
}
