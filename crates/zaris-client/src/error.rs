//! The client's error type: every failure says whether the operation certainly did not happen
//! (definite) or may have happened (indeterminate).
//!
//! An [`Error`] is a transport failure, a server-side error status (with its decoded
//! [`ErrorDetail`]), a local usage error, the retry loop giving up, or a write the cluster
//! refused to apply ([`Error::NotHeld`], [`Error::LeaseNotFound`]). Answers that are normal
//! outcomes of what was asked (a lock that is busy, a revoke of a lease already gone) are values
//! of the calls' result enums instead.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::Duration;

use tonic::{Code, Status};
use zaris_proto::v1::{ErrorCode, ErrorDetail, Outcome};
use zaris_types::{FencingToken, LeaseId, Revision};

/// Everything a [`Client`](crate::Client) call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An endpoint string could not be used (or none was given). Nothing was sent.
    #[error("invalid endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The TLS settings could not be used (a file that cannot be read, or that is not PEM).
    /// Nothing was sent.
    #[error("invalid TLS settings: {reason}")]
    InvalidTls {
        /// What is wrong, naming the file.
        reason: String,
    },
    /// The server, or the transport on the way to it, answered with an error status.
    #[error(transparent)]
    Rpc(Box<RpcError>),
    /// Retrying did not succeed before the call's overall deadline; `last` is the last attempt's
    /// error. `outcome` covers every attempt: indeterminate if any attempt may have taken effect.
    #[error("gave up after {attempts} attempt(s) in {elapsed:.1?}: {last}")]
    DeadlineExhausted {
        /// How many attempts were sent.
        attempts: u32,
        /// Time spent from the first attempt to giving up.
        elapsed: Duration,
        /// The error of the last attempt.
        last: Box<Error>,
        /// Whether any attempt may have taken effect.
        outcome: Outcome,
    },
    /// An endpoint answered with a cluster id different from the one this client saw first: the
    /// endpoint list mixes two clusters. The client must not be used further.
    #[error(
        "endpoint {endpoint} belongs to cluster {actual}, not to cluster {expected} seen first; \
         the endpoint list mixes two clusters"
    )]
    ClusterMismatch {
        /// The cluster id seen first.
        expected: u64,
        /// The cluster id the endpoint answered with.
        actual: u64,
        /// The endpoint ("host:port").
        endpoint: String,
    },
    /// A request was refused before anything was sent (for example an empty name).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong.
        reason: String,
    },
    /// A watch could not resume: the events from `requested` on are no longer retained (the
    /// oldest available revision is `compact_revision`). Re-read the keys and watch again.
    #[error(
        "watch from revision {requested} is no longer possible: history starts at revision \
         {compact_revision}; re-read and watch again"
    )]
    Compacted {
        /// The revision the watch needed next.
        requested: Revision,
        /// The oldest revision still available.
        compact_revision: Revision,
    },
    /// The lease a lock, election or presence call relies on has expired or was revoked, so the
    /// call did not proceed.
    #[error("lease {id} is no longer valid ({reason})")]
    LeaseLost {
        /// The lease.
        id: LeaseId,
        /// Why it is gone.
        reason: String,
    },
    /// A fenced write or release was refused: lock `lock` is no longer held with `token`.
    /// Nothing was written.
    #[error("lock {lock:?} is no longer held with token {token}; nothing was written")]
    NotHeld {
        /// The lock name.
        lock: String,
        /// The fencing token that no longer holds it.
        token: FencingToken,
    },
    /// A write named lease `id`, which does not exist (it expired, was revoked, or never was);
    /// nothing was written. `id` is 0 when a transaction named several leases.
    #[error("{}", lease_not_found(*id))]
    LeaseNotFound {
        /// The lease.
        id: LeaseId,
    },
    /// [`Client::connect`](crate::Client::connect) reached none of the endpoints; `last` is the
    /// error of the last one tried.
    #[error("none of the endpoints {} answered: {last}", endpoints.join(", "))]
    Unreachable {
        /// The endpoints tried ("host:port").
        endpoints: Vec<String>,
        /// The error of the last endpoint tried.
        last: Box<Error>,
    },
    /// A successful response that breaks the wire contract (for example a result value this
    /// client does not know). Indeterminate.
    #[error("unexpected response from {endpoint}: {reason}")]
    Protocol {
        /// The endpoint ("host:port") that answered.
        endpoint: String,
        /// What was wrong with it.
        reason: String,
    },
    /// Writing what the cluster sent to the caller's output failed (a snapshot to a full disk).
    /// Nothing on the cluster changed.
    #[error("cannot write the output: {source}")]
    Output {
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// True if the operation certainly did not take effect (safe to retry); false if it may have.
    pub fn is_definite(&self) -> bool {
        self.outcome() == Outcome::Definite
    }

    /// Whether the operation took effect: [`Outcome::Definite`] (it did not) or
    /// [`Outcome::Indeterminate`] (it may have). Never [`Outcome::Unspecified`].
    pub fn outcome(&self) -> Outcome {
        match self {
            Error::InvalidEndpoint { .. }
            | Error::InvalidTls { .. }
            | Error::InvalidArgument { .. }
            | Error::Compacted { .. }
            | Error::LeaseLost { .. }
            | Error::NotHeld { .. }
            | Error::LeaseNotFound { .. }
            | Error::Unreachable { .. }
            | Error::Output { .. } => Outcome::Definite,
            Error::Rpc(rpc) => rpc.outcome(),
            Error::DeadlineExhausted { outcome, .. } => *outcome,
            Error::ClusterMismatch { .. } | Error::Protocol { .. } => Outcome::Indeterminate,
        }
    }

    /// The error of the (last) RPC attempt, if this error came from one.
    pub fn rpc(&self) -> Option<&RpcError> {
        match self {
            Error::Rpc(rpc) => Some(rpc.as_ref()),
            Error::DeadlineExhausted { last, .. } | Error::Unreachable { last, .. } => last.rpc(),
            _ => None,
        }
    }

    /// The gRPC status code of the (last) RPC attempt, if any.
    pub fn code(&self) -> Option<Code> {
        self.rpc().map(RpcError::code)
    }

    /// The Zaris error detail of the (last) RPC attempt, if the server sent one.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        self.rpc().and_then(RpcError::detail)
    }

    /// The Zaris error code of the (last) RPC attempt, if the server sent a detail.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.rpc().and_then(RpcError::error_code)
    }

    /// True if the (last) attempt failed because no endpoint could be reached at all (connection
    /// refused, connect timeout, ...), as opposed to a server answering with an error.
    pub fn is_connect_failure(&self) -> bool {
        self.rpc().is_some_and(RpcError::is_connect_failure)
    }
}

fn lease_not_found(id: LeaseId) -> String {
    if id == LeaseId::NONE {
        "a lease the request names does not exist; nothing was written".to_owned()
    } else {
        format!("lease {id} does not exist (it expired or was revoked); nothing was written")
    }
}

/// Why a TLS session with a member failed, as far as this client can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsFailure {
    /// This client refused the member's certificate: not signed by the CA it trusts
    /// ([`ClientTls`](crate::ClientTls)'s CA), or otherwise unusable.
    UntrustedCertificate,
    /// The member's certificate does not name the host this client dialed.
    WrongName,
    /// The member's certificate has expired or is not valid yet (or a clock is wrong).
    NotValidNow,
    /// The endpoint did not answer in TLS: a plaintext node, or no Zaris node at all.
    NotTls,
    /// The member ended the session with a TLS alert (it refused this client's key, say).
    AlertReceived,
    /// Another TLS error.
    Other,
}

impl TlsFailure {
    fn of(err: &rustls::Error) -> Self {
        use rustls::CertificateError as Cert;
        match err {
            rustls::Error::InvalidCertificate(
                Cert::NotValidForName | Cert::NotValidForNameContext { .. },
            ) => TlsFailure::WrongName,
            rustls::Error::InvalidCertificate(
                Cert::Expired
                | Cert::ExpiredContext { .. }
                | Cert::NotValidYet
                | Cert::NotValidYetContext { .. },
            ) => TlsFailure::NotValidNow,
            rustls::Error::InvalidCertificate(_) => TlsFailure::UntrustedCertificate,
            rustls::Error::InvalidMessage(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. } => TlsFailure::NotTls,
            rustls::Error::AlertReceived(_) => TlsFailure::AlertReceived,
            _ => TlsFailure::Other,
        }
    }

    /// This client checks the member's certificate before it sends a request.
    fn is_before_sending(self) -> bool {
        matches!(
            self,
            TlsFailure::UntrustedCertificate | TlsFailure::WrongName | TlsFailure::NotValidNow
        )
    }

    /// What to check, for people (with the CLI's flags).
    pub fn hint(self) -> &'static str {
        match self {
            TlsFailure::UntrustedCertificate => {
                "the member's certificate is not signed by the CA this client trusts: check \
                 that --cacert names the CA of the members' certificates"
            }
            TlsFailure::WrongName => {
                "the member's certificate does not name the host this client dialed: dial a \
                 name or address the certificate holds"
            }
            TlsFailure::NotValidNow => {
                "the member's certificate has expired or is not valid yet: check its dates and \
                 both machines' clocks"
            }
            TlsFailure::NotTls => {
                "the endpoint does not speak TLS: is it a plaintext node (then give no \
                 --cacert), or another service?"
            }
            TlsFailure::AlertReceived => {
                "the member refused the session: check that --cert/--key are a certificate of \
                 the cluster's client CA and its own key"
            }
            TlsFailure::Other => {
                "check that --cacert names the CA of the members' certificates and --cert/--key \
                 one of the client CA's"
            }
        }
    }
}

impl From<RpcError> for Error {
    fn from(err: RpcError) -> Self {
        Error::Rpc(Box::new(err))
    }
}

/// One failed RPC attempt: the gRPC status, decoded.
#[derive(Debug, Clone)]
pub struct RpcError {
    code: Code,
    message: String,
    detail: Option<ErrorDetail>,
    outcome: Outcome,
    endpoint: String,
    /// Innermost error of the transport error chain, for statuses the transport produced.
    cause: Option<String>,
    io_kind: Option<io::ErrorKind>,
    connect_failure: bool,
    /// The status came from the transport (an h2 or hyper error, a connection that broke), not
    /// from a server's answer.
    transport: bool,
    /// The TLS session failed, and why: in the handshake (a certificate refused by either
    /// side, a peer that does not speak TLS), nothing reached the server's services.
    tls_failure: Option<TlsFailure>,
    /// The endpoint requires TLS and this client spoke plaintext: nothing was processed.
    plaintext_refused: bool,
}

impl RpcError {
    /// Decodes `status`, received from `endpoint` ("host:port").
    ///
    /// The outcome is the server's ([`zaris_proto::outcome`]), except that a failure to even
    /// connect is definite: the request was never sent.
    pub fn from_status(status: &Status, endpoint: impl Into<String>) -> Self {
        let mut connect_failure = false;
        let mut tls_failure = None;
        let mut plaintext_refused = false;
        let mut io_kind = None;
        let mut cause = None;
        let mut source: Option<&(dyn StdError + 'static)> = status.source();
        while let Some(err) = source {
            if err.downcast_ref::<tonic::ConnectError>().is_some() {
                connect_failure = true;
            }
            if let Some(io_err) = err.downcast_ref::<io::Error>() {
                io_kind = Some(io_err.kind());
                // An I/O error's `source` skips the error it wraps: look at it directly.
                if let Some(tls) = io_err
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                {
                    tls_failure = Some(TlsFailure::of(tls));
                }
            }
            if let Some(tls) = err.downcast_ref::<rustls::Error>() {
                tls_failure = Some(TlsFailure::of(tls));
            }
            let text = err.to_string();
            // A TLS port's answer to plaintext: the request was never processed.
            if text.contains(zaris_proto::error::PLAINTEXT_REFUSED) {
                connect_failure = true;
                plaintext_refused = true;
            }
            cause = Some(text);
            source = err.source();
        }
        let detail = zaris_proto::detail(status);
        let transport = status.source().is_some() && detail.is_none();
        // A certificate this client refused was refused before it sent anything; other TLS
        // errors are definite only where the connection failed (in tonic's connector, where the
        // handshake runs): an alert or a broken record later may come after the request.
        let refused_before_sending = tls_failure.is_some_and(TlsFailure::is_before_sending);
        let outcome = if (connect_failure || refused_before_sending) && detail.is_none() {
            Outcome::Definite
        } else {
            zaris_proto::outcome(status)
        };
        RpcError {
            code: status.code(),
            message: status.message().to_owned(),
            detail,
            outcome,
            endpoint: endpoint.into(),
            cause,
            io_kind,
            connect_failure,
            transport,
            tls_failure,
            plaintext_refused,
        }
    }

    /// The attempt got no answer within `timeout`: indeterminate (the request may have been
    /// proposed).
    pub(crate) fn timed_out(timeout: Duration, endpoint: impl Into<String>) -> Self {
        RpcError {
            code: Code::DeadlineExceeded,
            message: format!("no response within {timeout:.1?}"),
            detail: None,
            outcome: Outcome::Indeterminate,
            endpoint: endpoint.into(),
            cause: None,
            io_kind: None,
            connect_failure: false,
            transport: true,
            tls_failure: None,
            plaintext_refused: false,
        }
    }

    /// The gRPC status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The status message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The Zaris error detail, if the server sent one.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        self.detail.as_ref()
    }

    /// The Zaris error code, if the server sent a detail with a code this client knows.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.detail
            .as_ref()
            .and_then(|detail| ErrorCode::try_from(detail.code).ok())
            .filter(|code| *code != ErrorCode::Unspecified)
    }

    /// Whether the attempt took effect: definite (it did not) or indeterminate (it may have).
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// True if the attempt certainly did not take effect.
    pub fn is_definite(&self) -> bool {
        self.outcome == Outcome::Definite
    }

    /// The endpoint ("host:port") the attempt went to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// True if the client could not connect to the endpoint (the request was never sent).
    pub fn is_connect_failure(&self) -> bool {
        self.connect_failure
    }

    /// True if the TLS session failed: one side refused the other's certificate, or the
    /// endpoint does not speak TLS ([`RpcError::tls_failure`] says which).
    pub fn is_tls_failure(&self) -> bool {
        self.tls_failure.is_some()
    }

    /// Why the TLS session failed, if it did.
    pub fn tls_failure(&self) -> Option<TlsFailure> {
        self.tls_failure
    }

    /// True if the endpoint requires TLS and this client spoke plaintext (the node said so):
    /// the request was never processed, and no member of that cluster will take it either.
    pub fn is_plaintext_refused(&self) -> bool {
        self.plaintext_refused
    }

    /// True if the transport produced this status (a connection that could not be made or
    /// broke, an h2 protocol error), not a server: another member may well answer.
    pub fn is_transport_failure(&self) -> bool {
        self.transport
    }

    /// The innermost transport error, if the transport produced this status (for example
    /// "Connection refused (os error 111)").
    pub fn cause(&self) -> Option<&str> {
        self.cause.as_deref()
    }

    /// The kind of the I/O error behind a transport failure, if there was one.
    pub fn io_error_kind(&self) -> Option<io::ErrorKind> {
        self.io_kind
    }

    /// Suggested minimum delay before retrying, from the server.
    pub fn retry_after(&self) -> Duration {
        Duration::from_millis(self.detail.as_ref().map_or(0, |d| d.retry_after_ms))
    }

    /// Marks this error indeterminate: used when an earlier attempt of the same call may have
    /// taken effect.
    pub(crate) fn make_indeterminate(&mut self) {
        self.outcome = Outcome::Indeterminate;
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.endpoint)?;
        match &self.detail {
            Some(detail) if !detail.message.is_empty() => f.write_str(&detail.message)?,
            _ if self.message.is_empty() => f.write_str(self.code.description())?,
            _ => f.write_str(&self.message)?,
        }
        // A transport error's status message is generic ("tcp connect error"): add its cause.
        if self.detail.is_none()
            && let Some(cause) = &self.cause
            && !self.message.contains(cause.as_str())
        {
            write!(f, ": {cause}")?;
        }
        if let Some(tls) = self.tls_failure {
            write!(f, " [TLS refused: {}]", tls.hint())?;
        } else if self
            .cause
            .as_deref()
            .is_some_and(|c| c.contains("frame with invalid size"))
        {
            // What HTTP/2 makes of a TLS server's first bytes.
            f.write_str(" [does the server require TLS? give --cacert]")?;
        }
        match self.error_code() {
            Some(code) => write!(f, " ({}", code.as_str_name())?,
            None => write!(f, " (gRPC {:?}", self.code)?,
        }
        match self.outcome {
            Outcome::Definite => f.write_str(", definite: not applied)"),
            _ => f.write_str(", indeterminate: may have been applied)"),
        }
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{no_leader, not_leader};

    #[test]
    fn not_leader_status_is_definite_and_carries_the_leader() {
        let err = RpcError::from_status(&not_leader(2, "127.0.0.1:7002"), "a:1");
        assert_eq!(err.code(), Code::Unavailable);
        assert_eq!(err.error_code(), Some(ErrorCode::NotLeader));
        assert!(err.is_definite());
        let detail = err.detail().cloned().unwrap_or_default();
        assert_eq!(detail.raft_leader_id, 2);
        assert_eq!(detail.raft_leader_address, "127.0.0.1:7002");
        assert!(!err.is_connect_failure());
    }

    #[test]
    fn status_without_detail_is_indeterminate_unless_rejected_before_handling() {
        let err = RpcError::from_status(&Status::unavailable("connection reset"), "a:1");
        assert_eq!(err.outcome(), Outcome::Indeterminate);
        assert_eq!(err.error_code(), None);
        let err = RpcError::from_status(&Status::invalid_argument("bad"), "a:1");
        assert_eq!(err.outcome(), Outcome::Definite);
    }

    #[test]
    fn server_outcome_wins_over_the_grpc_code() {
        let status = ErrorDetail::new(
            ErrorCode::LeadershipLost,
            Outcome::Indeterminate,
            "lost leadership",
        )
        .into_status();
        let err = RpcError::from_status(&status, "a:1");
        assert_eq!(err.code(), Code::Unavailable);
        assert!(!err.is_definite());
        let status =
            ErrorDetail::new(ErrorCode::Timeout, Outcome::Unspecified, "timeout").into_status();
        assert_eq!(
            RpcError::from_status(&status, "a:1").outcome(),
            Outcome::Indeterminate
        );
    }

    #[test]
    fn display_says_code_and_outcome() {
        let err = RpcError::from_status(&no_leader(), "127.0.0.1:7001");
        let text = err.to_string();
        assert!(
            text.starts_with("127.0.0.1:7001: no Raft leader is known"),
            "{text}"
        );
        assert!(text.contains("ERROR_CODE_NO_LEADER"), "{text}");
        assert!(text.contains("definite: not applied"), "{text}");
        let err = RpcError::from_status(&Status::unimplemented(""), "h:1");
        assert!(
            err.to_string()
                .starts_with("h:1: Operation is not implemented"),
            "{err}"
        );
        let err = RpcError::timed_out(Duration::from_secs(1), "h:1");
        assert!(err.to_string().contains("indeterminate"), "{err}");
    }

    #[test]
    fn exhausted_error_reports_the_aggregate_outcome_and_the_last_rpc() {
        let last = RpcError::from_status(&no_leader(), "h:1");
        let err = Error::DeadlineExhausted {
            attempts: 3,
            elapsed: Duration::from_secs(10),
            last: Box::new(last.into()),
            outcome: Outcome::Indeterminate,
        };
        assert!(!err.is_definite());
        assert_eq!(err.error_code(), Some(ErrorCode::NoLeader));
        assert_eq!(err.code(), Some(Code::Unavailable));
        assert!(
            err.to_string().starts_with("gave up after 3 attempt(s)"),
            "{err}"
        );
    }

    #[test]
    fn retry_after_comes_from_the_detail() {
        let mut detail = ErrorDetail::new(ErrorCode::CapacityExceeded, Outcome::Definite, "full");
        detail.retry_after_ms = 250;
        let err = RpcError::from_status(&detail.into_status(), "h:1");
        assert_eq!(err.retry_after(), Duration::from_millis(250));
        assert_eq!(err.code(), Code::ResourceExhausted);
    }
}
