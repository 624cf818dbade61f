//! Access control from the client side: the bearer token a client sends with every call, and the
//! Auth service (who am I, users and roles, changes to them).
//!
//! Tokens are made here ([`BearerToken::generate`]) and only their SHA-256 goes to the cluster
//! ([`BearerToken::sha256`]): the token itself never enters the Raft log or a snapshot.

use sha2::{Digest as _, Sha256};
use tonic::metadata::{Ascii, MetadataValue};
use zaris_proto::v1 as pb;
use zaris_proto::v1::auth_change_request::Change;
use zaris_proto::v1::auth_client::AuthClient;

use crate::Revision;
use crate::client::{CallSpec, Client};
use crate::error::Error;

/// Longest token accepted, in bytes (the server refuses longer authorization metadata).
pub const MAX_TOKEN_BYTES: usize = 1_024;

/// A bearer token, sent as `authorization: Bearer <token>` with every call.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken {
    token: String,
    header: MetadataValue<Ascii>,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// A token as given (by an admin, from `zaris auth user add`): visible ASCII, no spaces.
    pub fn new(token: impl Into<String>) -> Result<BearerToken, Error> {
        let token = token.into();
        let token = token.trim().to_owned();
        let invalid = |why: &str| Error::InvalidArgument {
            reason: format!("invalid bearer token: {why}"),
        };
        if token.is_empty() {
            return Err(invalid("empty"));
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid("longer than 1024 bytes"));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid("only visible ASCII characters, without spaces"));
        }
        let header = format!("Bearer {token}")
            .parse()
            .map_err(|_| invalid("not valid in gRPC metadata"))?;
        Ok(BearerToken { token, header })
    }

    /// A new random token (256 bits, 64 hex digits).
    pub fn generate() -> BearerToken {
        let bytes: [u8; 32] = rand::random();
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // Hex digits are always a valid token.
        BearerToken::new(token).unwrap_or_else(|_| unreachable!("hex is a valid token"))
    }

    /// The token, to hand to its user once.
    pub fn expose(&self) -> &str {
        &self.token
    }

    /// What the cluster stores: the token's SHA-256.
    pub fn sha256(&self) -> [u8; 32] {
        Sha256::digest(self.token.as_bytes()).into()
    }

    pub(crate) fn header(&self) -> &MetadataValue<Ascii> {
        &self.header
    }
}

/// Who the cluster takes this client to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhoAmI {
    /// Empty: anonymous (no credential, or a certificate that names no user).
    pub user: String,
    pub admin: bool,
    /// Whether the cluster checks access at all.
    pub enabled: bool,
    pub roles: Vec<String>,
}

/// Users, roles and the switch, as the leader sees them.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthStatus {
    pub enabled: bool,
    pub users: Vec<pb::AuthUser>,
    pub roles: Vec<pb::AuthRole>,
}

impl Client {
    /// Adds this client's bearer token, if it has one, to an outgoing call.
    pub(crate) fn authorize<T>(&self, request: &mut tonic::Request<T>) {
        if let Some(token) = &self.options().token {
            request
                .metadata_mut()
                .insert("authorization", token.header().clone());
        }
    }

    /// Who the answering member takes this client to be.
    pub async fn who_am_i(&self) -> Result<WhoAmI, Error> {
        let response = self
            .call(
                CallSpec::idempotent("WhoAmI"),
                pb::WhoAmIRequest {},
                |channel, req| async move { AuthClient::new(channel).who_am_i(req).await },
            )
            .await?;
        Ok(WhoAmI {
            user: response.user,
            admin: response.admin,
            enabled: response.enabled,
            roles: response.roles,
        })
    }

    /// Whether auth is enabled, every user and every role (admin only once enabled).
    pub async fn auth_status(&self) -> Result<AuthStatus, Error> {
        let response = self
            .call(
                CallSpec::idempotent("AuthStatus"),
                pb::AuthStatusRequest {},
                |channel, req| async move { AuthClient::new(channel).auth_status(req).await },
            )
            .await?;
        Ok(AuthStatus {
            enabled: response.enabled,
            users: response.users,
            roles: response.roles,
        })
    }

    /// Applies one change to users, roles or the switch; answers the revision that applied it.
    /// Not resent after an indeterminate failure (a resend could answer "exists"): check with
    /// [`Client::auth_status`].
    pub async fn auth_change(&self, change: Change) -> Result<Revision, Error> {
        let response = self
            .call(
                CallSpec::non_idempotent("AuthChange"),
                pb::AuthChangeRequest {
                    change: Some(change),
                },
                |channel, req| async move { AuthClient::new(channel).auth_change(req).await },
            )
            .await?;
        Ok(Revision::new(
            response.header.map_or(0, |header| header.revision),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_never_printed() {
        let token = BearerToken::generate();
        assert_eq!(token.expose().len(), 64);
        assert_eq!(format!("{token:?}"), "BearerToken(..)");
        assert_ne!(BearerToken::generate(), token);
        assert_eq!(
            BearerToken::new(format!(" {} ", token.expose())).expect("a valid token"),
            token
        );
        for bad in ["", "two words", "tab\there", "é"] {
            assert!(BearerToken::new(bad).is_err(), "{bad:?}");
        }
        assert!(BearerToken::new("x".repeat(MAX_TOKEN_BYTES + 1)).is_err());
    }
}
