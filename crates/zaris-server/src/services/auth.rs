//! WhoAmI, AuthStatus, AuthChange: users, roles and the switch, as replicated state.

use tonic::{Request, Response, Status};
use zaris_core::auth::{Access, AuthCommand, Permission, ResourceKind};
use zaris_core::{Command, Outcome};
use zaris_proto::v1::auth_change_request::Change;
use zaris_proto::v1::auth_server::Auth;
use zaris_proto::v1::{
    AuthChangeRequest, AuthChangeResponse, AuthRole, AuthStatusRequest, AuthStatusResponse,
    AuthUser, PermissionAccess, PermissionKind, WhoAmIRequest, WhoAmIResponse,
};

use super::NodeContext;
use crate::auth::caller_of;
use crate::error::ApiError;

#[derive(Clone, Debug)]
pub struct AuthService(pub NodeContext);

#[tonic::async_trait]
impl Auth for AuthService {
    async fn who_am_i(
        &self,
        request: Request<WhoAmIRequest>,
    ) -> Result<Response<WhoAmIResponse>, Status> {
        let caller = caller_of(&request);
        let (enabled, roles, revision) = self.0.state.read(|d| {
            let auth = d.state.auth();
            let roles = caller
                .user
                .as_ref()
                .and_then(|u| auth.users().get(u))
                .map(|u| u.roles.iter().cloned().collect())
                .unwrap_or_default();
            (auth.enabled(), roles, d.state.last_applied())
        });
        Ok(Response::new(WhoAmIResponse {
            header: Some(self.0.proposer.header(revision)),
            user: caller.user.unwrap_or_default(),
            admin: caller.admin,
            enabled,
            roles,
        }))
    }

    async fn auth_status(
        &self,
        request: Request<AuthStatusRequest>,
    ) -> Result<Response<AuthStatusResponse>, Status> {
        let caller = caller_of(&request);
        self.0
            .check_access(|auth| auth.check_admin(&caller, "list users and roles"))?;
        self.0.proposer.linearizable().await?;
        let response = self.0.state.read(|d| {
            let auth = d.state.auth();
            AuthStatusResponse {
                header: Some(self.0.proposer.header(d.state.last_applied())),
                enabled: auth.enabled(),
                users: auth
                    .users()
                    .iter()
                    .map(|(name, user)| AuthUser {
                        name: name.clone(),
                        roles: user.roles.iter().cloned().collect(),
                        has_token: user.token_sha256.is_some(),
                    })
                    .collect(),
                roles: auth
                    .roles()
                    .iter()
                    .map(|(name, role)| AuthRole {
                        name: name.clone(),
                        permissions: role.permissions.iter().map(permission_to_wire).collect(),
                    })
                    .collect(),
            }
        });
        Ok(Response::new(response))
    }

    async fn auth_change(
        &self,
        request: Request<AuthChangeRequest>,
    ) -> Result<Response<AuthChangeResponse>, Status> {
        let caller = caller_of(&request);
        let change = auth_command(request.into_inner())?;
        change.validate().map_err(ApiError::InvalidArgument)?;
        let reply = self
            .0
            .propose_as(&caller, zaris_core::Request::new(Command::Auth(change)))
            .await?;
        match reply.response {
            Ok(Outcome::AuthChanged) => Ok(Response::new(AuthChangeResponse {
                header: Some(self.0.proposer.header(reply.revision)),
            })),
            Err(rejection) => Err(ApiError::from(rejection).into()),
            Ok(other) => Err(ApiError::unexpected("AuthChange", &other).into()),
        }
    }
}

/// The core command for a wire change; INVALID_ARGUMENT names what is malformed.
pub fn auth_command(request: AuthChangeRequest) -> Result<AuthCommand, ApiError> {
    let change = request
        .change
        .ok_or_else(|| ApiError::invalid_argument("an AuthChangeRequest must set a change"))?;
    Ok(match change {
        Change::Enable(_) => AuthCommand::Enable,
        Change::Disable(_) => AuthCommand::Disable,
        Change::UserAdd(add) => AuthCommand::UserAdd {
            token_sha256: token_hash(&add.token_sha256)?,
            name: add.name,
        },
        Change::UserDelete(user) => AuthCommand::UserDelete { name: user.name },
        Change::UserSetToken(set) => AuthCommand::UserSetToken {
            token_sha256: token_hash(&set.token_sha256)?,
            name: set.name,
        },
        Change::UserGrantRole(grant) => AuthCommand::UserGrantRole {
            name: grant.name,
            role: grant.role,
        },
        Change::UserRevokeRole(revoke) => AuthCommand::UserRevokeRole {
            name: revoke.name,
            role: revoke.role,
        },
        Change::RoleAdd(role) => AuthCommand::RoleAdd { name: role.name },
        Change::RoleDelete(role) => AuthCommand::RoleDelete { name: role.name },
        Change::RoleGrant(grant) => AuthCommand::RoleGrant {
            permission: permission_from_wire(grant.permission)?,
            role: grant.role,
        },
        Change::RoleRevoke(revoke) => AuthCommand::RoleRevoke {
            permission: permission_from_wire(revoke.permission)?,
            role: revoke.role,
        },
    })
}

fn token_hash(bytes: &[u8]) -> Result<Option<[u8; 32]>, ApiError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    <[u8; 32]>::try_from(bytes).map(Some).map_err(|_| {
        ApiError::invalid_argument(format!(
            "token_sha256 must be a SHA-256 (32 bytes) or empty, not {} bytes",
            bytes.len()
        ))
    })
}

fn permission_from_wire(
    permission: Option<zaris_proto::v1::Permission>,
) -> Result<Permission, ApiError> {
    let permission =
        permission.ok_or_else(|| ApiError::invalid_argument("a permission must be given"))?;
    let kind = match PermissionKind::try_from(permission.kind) {
        Ok(PermissionKind::Key) => ResourceKind::Key,
        Ok(PermissionKind::Lock) => ResourceKind::Lock,
        _ => {
            return Err(ApiError::invalid_argument(format!(
                "permission kind {} is not KEY or LOCK",
                permission.kind
            )));
        }
    };
    let access = match PermissionAccess::try_from(permission.access) {
        Ok(PermissionAccess::Read) => Access::Read,
        Ok(PermissionAccess::Write) => Access::Write,
        Ok(PermissionAccess::Readwrite) => Access::ReadWrite,
        _ => {
            return Err(ApiError::invalid_argument(format!(
                "permission access {} is not READ, WRITE or READWRITE",
                permission.access
            )));
        }
    };
    Ok(Permission {
        kind,
        prefix: permission.prefix,
        access,
    })
}

fn permission_to_wire(permission: &Permission) -> zaris_proto::v1::Permission {
    zaris_proto::v1::Permission {
        kind: match permission.kind {
            ResourceKind::Key => PermissionKind::Key,
            ResourceKind::Lock => PermissionKind::Lock,
        }
        .into(),
        prefix: permission.prefix.clone(),
        access: match permission.access {
            Access::Read => PermissionAccess::Read,
            Access::Write => PermissionAccess::Write,
            Access::ReadWrite => PermissionAccess::Readwrite,
        }
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zaris_proto::v1::{AuthRolePermission, AuthUserAdd};

    #[test]
    fn malformed_changes_are_invalid_arguments() {
        let bad = [
            AuthChangeRequest { change: None },
            AuthChangeRequest {
                change: Some(Change::UserAdd(AuthUserAdd {
                    name: "u".into(),
                    token_sha256: vec![1; 31],
                })),
            },
            AuthChangeRequest {
                change: Some(Change::RoleGrant(AuthRolePermission {
                    role: "r".into(),
                    permission: None,
                })),
            },
            AuthChangeRequest {
                change: Some(Change::RoleGrant(AuthRolePermission {
                    role: "r".into(),
                    permission: Some(zaris_proto::v1::Permission {
                        kind: 9,
                        prefix: Vec::new(),
                        access: 1,
                    }),
                })),
            },
        ];
        for request in bad {
            assert!(
                matches!(
                    auth_command(request.clone()),
                    Err(ApiError::InvalidArgument(_))
                ),
                "{request:?}"
            );
        }
        let permission = Permission {
            kind: ResourceKind::Lock,
            prefix: b"jobs/".to_vec(),
            access: Access::ReadWrite,
        };
        assert_eq!(
            permission_from_wire(Some(permission_to_wire(&permission))),
            Ok(permission)
        );
    }
}
