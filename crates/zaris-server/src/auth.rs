//! Who is calling: every client call passes [`Authenticate`], which checks a client certificate's
//! chain (when the listener has a client CA), reads the caller's [`Credential`] (a bearer token,
//! else the verified certificate's name) and resolves it against the replicated users. The
//! resolved [`Caller`] rides in the request's extensions; handlers check it against the roles and
//! lease owners (`zaris_core::auth`) before proposing or reading.
//!
//! The check before proposing reads this node's applied state. That is exact for leases (a lease's
//! owner never changes, and ids are never reused), provided a lease missing here is looked up
//! again after a linearizable read barrier and answered "not found" if still missing
//! ([`NodeContext::propose_as`]): otherwise a request naming the next lease id could be let
//! through and then apply to another user's lease granted in between. Role changes take effect
//! for requests checked after the change applied on the node that checks them.
//!
//! Only the Raft leader refuses. A follower may not have applied a user, a token or a role yet
//! (a new member has applied nothing), so a caller it cannot resolve, or would deny, is sent to
//! the leader (NOT_LEADER, or NO_LEADER while none is known), which decides on the latest state.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use sha2::{Digest as _, Sha256};
use tonic::metadata::MetadataMap;
use zaris_core::auth::{AuthError, Caller, Credential};
use zaris_core::{Command, LeaseId, Rejection, Request};
use zaris_raft::{Reply, StateHandle};

use crate::error::ApiError;
use crate::metrics as m;
use crate::propose::Proposer;
use crate::services::NodeContext;
use crate::tls::TlsSource;

/// The metadata key a bearer token travels in (`authorization: Bearer <token>`).
pub const AUTHORIZATION_HEADER: &str = "authorization";
/// Longest token accepted, in bytes: tokens are generated (64 hex digits); a longer header is
/// garbage.
const MAX_TOKEN_BYTES: usize = 1_024;

/// The interceptor in front of every client service.
#[derive(Clone, Debug)]
pub struct Authenticate {
    /// The client listener's TLS, when it has a client CA.
    tls: Option<Arc<TlsSource>>,
    state: StateHandle,
    /// Where a caller this node cannot resolve is sent, unless this node leads.
    proposer: Proposer,
}

impl Authenticate {
    /// Checks certificates against `tls`'s client CA, if it has one, and resolves callers
    /// against `state`'s users.
    pub fn new(tls: Option<Arc<TlsSource>>, state: StateHandle, proposer: Proposer) -> Self {
        Authenticate {
            tls: tls.filter(|s| s.has_ca()),
            state,
            proposer,
        }
    }
}

impl tonic::service::Interceptor for Authenticate {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let chain = request.peer_certs().filter(|certs| !certs.is_empty());
        if let Some(source) = &self.tls {
            let Some(chain) = &chain else {
                metrics::counter!(m::CALLS_WITHOUT_CLIENT_CERT, "reason" => "missing").increment(1);
                return Err(tonic::Status::unauthenticated(
                    "this cluster requires a client certificate signed by its client CA; give one \
                     with --cert and --key (ZARIS_CERT, ZARIS_KEY, or ClientTls::with_identity)",
                ));
            };
            if let Err(why) = source.check_client_chain(chain) {
                metrics::counter!(m::CALLS_WITHOUT_CLIENT_CERT, "reason" => "invalid").increment(1);
                return Err(tonic::Status::unauthenticated(format!(
                    "client certificate refused: {why}; it must be signed by this cluster's \
                     client CA (--cert and --key)"
                )));
            }
        }
        // A certificate names a user only when its chain was checked here (a listener without a
        // client CA does not ask for one, and would not have verified it).
        let verified_name = match (&self.tls, &chain) {
            (Some(_), Some(chain)) => chain.first().and_then(certificate_name),
            _ => None,
        };
        let credential = credential(request.metadata(), verified_name).map_err(|e| {
            metrics::counter!(m::AUTH_FAILURES, "reason" => "bad_token").increment(1);
            tonic::Status::from(e)
        })?;
        let caller = self
            .state
            .read(|d| d.state.auth().resolve(&credential))
            .map_err(|e| tonic::Status::from(refusal(&self.proposer, e)))?;
        request.extensions_mut().insert(credential);
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

/// A refusal (counted) on the leader; elsewhere, the way to the leader: this node's users and
/// roles may be behind.
fn refusal(proposer: &Proposer, error: AuthError) -> ApiError {
    if let Some(redirect) = proposer.redirect_to_leader() {
        return redirect;
    }
    let reason = match error {
        AuthError::Unauthenticated(_) => "unauthenticated",
        AuthError::Denied(_) => "denied",
    };
    metrics::counter!(m::AUTH_FAILURES, "reason" => reason).increment(1);
    ApiError::from(error)
}

/// The caller's credential: a bearer token if the call carries one, else `verified_name`.
fn credential(
    metadata: &MetadataMap,
    verified_name: Option<String>,
) -> Result<Credential, ApiError> {
    let Some(value) = metadata.get(AUTHORIZATION_HEADER) else {
        return Ok(verified_name.map_or(Credential::Anonymous, Credential::Certificate));
    };
    bearer_token_sha256(value.as_bytes()).map(Credential::Token)
}

/// The SHA-256 of the bearer token an `authorization` value (gRPC metadata or HTTP header)
/// carries, or UNAUTHENTICATED saying what is wrong with it.
pub fn bearer_token_sha256(value: &[u8]) -> Result<[u8; 32], ApiError> {
    let bad = |why: &str| {
        ApiError::Unauthenticated(format!(
            "malformed authorization metadata: {why}; send `authorization: Bearer <token>`"
        ))
    };
    let value = std::str::from_utf8(value)
        .ok()
        .filter(|value| value.is_ascii())
        .ok_or_else(|| bad("not ASCII"))?;
    if value.len() > MAX_TOKEN_BYTES {
        return Err(bad("too long"));
    }
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(|| bad("not a bearer token"))?
        .trim();
    if token.is_empty() {
        return Err(bad("empty token"));
    }
    Ok(token_sha256(token))
}

/// What the cluster stores of a token.
pub fn token_sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The user a certificate names: its subject's common name, else its first DNS, else its first
/// URI subject alternative name (a SPIFFE id, say). `None` for a certificate that does not parse
/// or names nothing.
pub fn certificate_name(der: &CertificateDer<'_>) -> Option<String> {
    let cert = webpki::EndEntityCert::try_from(der).ok()?;
    if let Some(cn) = common_name(cert.subject()) {
        return Some(cn);
    }
    let mut dns = cert.valid_dns_names();
    if let Some(name) = dns.next() {
        return Some(name.to_owned());
    }
    cert.valid_uri_names().next().map(str::to_owned)
}

/// The first common name (OID 2.5.4.3) in the contents of an X.509 `Name` (a sequence of RDN
/// sets of attribute type-and-value sequences), if it is a UTF-8, printable or IA5 string.
fn common_name(name: &[u8]) -> Option<String> {
    const COMMON_NAME_OID: &[u8] = &[0x55, 0x04, 0x03];
    let mut rdns = name;
    while !rdns.is_empty() {
        let (tag, set, rest) = der_item(rdns)?;
        rdns = rest;
        if tag != 0x31 {
            return None;
        }
        let mut attributes = set;
        while !attributes.is_empty() {
            let (tag, attribute, rest) = der_item(attributes)?;
            attributes = rest;
            if tag != 0x30 {
                return None;
            }
            let (oid_tag, oid, value) = der_item(attribute)?;
            if oid_tag != 0x06 || oid != COMMON_NAME_OID {
                continue;
            }
            let (value_tag, value, _) = der_item(value)?;
            // UTF8String, PrintableString, IA5String.
            if matches!(value_tag, 0x0c | 0x13 | 0x16) {
                return std::str::from_utf8(value).ok().map(str::to_owned);
            }
            return None;
        }
    }
    None
}

/// One DER item: its tag, its contents and what follows it. `None` for anything malformed
/// (high tag numbers, indefinite or oversized lengths, truncation).
fn der_item(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let octets = usize::from(first & 0x7f);
        if octets == 0 || octets > 4 || rest.len() < octets {
            return None;
        }
        let (len_bytes, after) = rest.split_at(octets);
        rest = after;
        len_bytes
            .iter()
            .fold(0usize, |len, &b| (len << 8) | usize::from(b))
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    Some((tag, contents, after))
}

/// A request id's client id within `user`'s own space: deterministic (a retry maps alike), never
/// 0, and, short of a 64-bit collision, never another user's.
fn scoped_client_id(user: &str, client_id: u64) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update((user.len() as u64).to_le_bytes());
    hasher.update(user.as_bytes());
    hasher.update(client_id.to_le_bytes());
    let digest = hasher.finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(id).max(1)
}

/// The caller [`Authenticate`] resolved for `request` (anonymous if none: a path that skipped the
/// interceptor gets no permissions once auth is enabled).
pub fn caller_of<T>(request: &tonic::Request<T>) -> Caller {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or_default()
}

/// The credential [`Authenticate`] read for `request`, to resolve it again later (each message
/// of a long stream is checked against the users current then).
pub fn credential_of<T>(request: &tonic::Request<T>) -> Credential {
    request
        .extensions()
        .get::<Credential>()
        .cloned()
        .unwrap_or(Credential::Anonymous)
}

impl NodeContext {
    /// Runs a check against the access-control state as it is now (a denial is counted).
    pub fn check_access(
        &self,
        check: impl FnOnce(&zaris_core::auth::AuthState) -> Result<(), AuthError>,
    ) -> Result<(), ApiError> {
        self.state
            .read(|d| check(d.state.auth()))
            .map_err(|e| self.refuse(e))
    }

    fn refuse(&self, error: AuthError) -> ApiError {
        refusal(&self.proposer, error)
    }

    /// Resolves `credential` against the users as they are now.
    pub fn resolve(&self, credential: &Credential) -> Result<Caller, ApiError> {
        self.state
            .read(|d| d.state.auth().resolve(credential))
            .map_err(|e| self.refuse(e))
    }

    /// Checks that `caller` may have `request` proposed, then proposes it. A Grant by a known user
    /// records the user as the lease's owner. A lease the request uses that this node has not
    /// applied is looked up again after a linearizable read barrier; if it is still missing the
    /// answer is "lease not found", as applying the request would have said, without proposing.
    pub async fn propose_as(
        &self,
        caller: &Caller,
        mut request: Request,
    ) -> Result<Reply, ApiError> {
        if let Some(user) = &caller.user {
            match &mut request.command {
                Command::Grant { id, ttl_ms } => {
                    request.command = Command::GrantOwned {
                        id: *id,
                        ttl_ms: *ttl_ms,
                        owner: user.clone(),
                    };
                }
                Command::GrantBound { owner, .. } => *owner = Some(user.clone()),
                _ => {}
            }
            // Request ids are the user's own: another user who sends the same id gets neither
            // the remembered answer (which may hold keys it may not read) nor a refusal to apply.
            if let Some(request_id) = request.request_id.as_mut() {
                request_id.client_id = scoped_client_id(user, request_id.client_id);
            }
        }
        let unknown = self.authorize(caller, &request)?;
        if !unknown.is_empty() {
            // Boxed, as the rare path (see `leases_missing`).
            Box::pin(self.proposer.linearizable()).await?;
            if let Some(reply) = self.missing_lease_reply(caller, &request)? {
                return Ok(reply);
            }
        }
        self.proposer.propose(request).await
    }

    /// Checks that `caller` may renew `ids`, and returns those that are not live (looked up again
    /// after a read barrier if any is missing here): the keepalive answers them "not found"
    /// rather than renewing a lease granted later under one of their ids.
    pub async fn leases_missing(
        &self,
        caller: &Caller,
        ids: &[LeaseId],
    ) -> Result<Vec<LeaseId>, ApiError> {
        let unknown = self.renewable(caller, ids)?;
        if unknown.is_empty() {
            return Ok(unknown);
        }
        // Boxed, as the rare path: inline, a read barrier's future (openraft's, large) would make
        // every keepalive's future as large, and a future is copied whole each time it moves
        // (into its task, into a queue), whichever path it then takes.
        Box::pin(self.proposer.linearizable()).await?;
        self.renewable(caller, ids)
    }

    fn renewable(&self, caller: &Caller, ids: &[LeaseId]) -> Result<Vec<LeaseId>, ApiError> {
        self.state
            .read(|d| d.state.authorize_renewal(caller, ids))
            .map_err(|e| self.refuse(e))
    }

    /// Leases `request` uses that are not live here.
    fn authorize(&self, caller: &Caller, request: &Request) -> Result<Vec<LeaseId>, ApiError> {
        let outcome = self
            .state
            .read(|d| d.state.authorize(caller, &request.command));
        outcome.map_err(|e| self.refuse(e))
    }

    /// After a read barrier: the "not found" answer for a lease `request` uses that is still
    /// missing, if one is. A retry the de-duplication table answers is proposed as it is,
    /// whatever became of the lease since: one whose first attempt it remembers, and one it may
    /// have forgotten (its refusal says the first attempt may have applied; "not found" would
    /// say, wrongly, that nothing did).
    fn missing_lease_reply(
        &self,
        caller: &Caller,
        request: &Request,
    ) -> Result<Option<Reply>, ApiError> {
        let answered = request
            .request_id
            .is_some_and(|id| self.state.read(|d| d.state.answered_without_applying(&id)));
        if answered {
            return Ok(None);
        }
        let unknown = self.authorize(caller, request)?;
        let revision = self.state.read(|d| d.state.last_applied());
        Ok(unknown.first().map(|id| Reply {
            revision,
            response: Err(Rejection::LeaseNotFound(*id)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_walking_never_panics_on_garbage_and_finds_a_common_name() {
        // SET { SEQ { OID 2.5.4.6, PrintableString "NL" } }, SET { SEQ { OID 2.5.4.3, UTF8 "alice" } }
        let name = [
            0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'N', b'L', 0x31,
            0x0e, 0x30, 0x0c, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x05, b'a', b'l', b'i', b'c',
            b'e',
        ];
        assert_eq!(common_name(&name), Some("alice".to_string()));
        // Every truncation and every single-byte corruption is handled without a panic.
        for len in 0..name.len() {
            let _ = common_name(&name[..len]);
        }
        for at in 0..name.len() {
            for byte in [0x00, 0x7f, 0x80, 0x84, 0xff] {
                let mut bad = name;
                bad[at] = byte;
                let _ = common_name(&bad);
            }
        }
        assert_eq!(common_name(&[0x31, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn request_ids_are_scoped_per_user() {
        assert_eq!(scoped_client_id("a", 7), scoped_client_id("a", 7));
        assert_ne!(scoped_client_id("a", 7), scoped_client_id("b", 7));
        assert_ne!(scoped_client_id("a", 7), scoped_client_id("a", 8));
        // The name's length is hashed too: ("ab", x) and ("a", "b"-prefixed x) cannot meet.
        assert_ne!(scoped_client_id("ab", 1), scoped_client_id("a", 1));
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_metadata() {
        let mut metadata = MetadataMap::new();
        assert_eq!(
            credential(&metadata, Some("cn".into())),
            Ok(Credential::Certificate("cn".into()))
        );
        metadata.insert(
            AUTHORIZATION_HEADER,
            "Bearer secret".parse().expect("ascii"),
        );
        assert_eq!(
            credential(&metadata, Some("cn".into())),
            Ok(Credential::Token(token_sha256("secret"))),
            "a token wins over a certificate"
        );
        for bad in ["Basic abc", "Bearer ", "secret"] {
            metadata.insert(AUTHORIZATION_HEADER, bad.parse().expect("ascii"));
            assert!(
                matches!(credential(&metadata, None), Err(ApiError::Unauthenticated(why)) if why.contains("malformed")),
                "{bad}"
            );
        }
    }
}
