//! TLS settings for a client: the CA that signed the servers' certificates, and optionally a
//! client certificate for servers that require one (mutual TLS). Read once, when the client is
//! made: a program that rotates its certificate makes a new [`Client`](crate::Client).

use std::path::Path;

use crate::error::Error;

/// Largest certificate or key file read, in bytes.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// How a client speaks TLS to every member (see [`ClientOptions::with_tls`]).
///
/// [`ClientOptions::with_tls`]: crate::ClientOptions::with_tls
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    pub(crate) ca_pem: Vec<u8>,
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) domain: Option<String>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ClientTls")
            .field("client_certificate", &self.identity.is_some())
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Servers' certificates must chain to the CA certificates in `ca_pem` (PEM).
    pub fn new(ca_pem: impl Into<Vec<u8>>) -> ClientTls {
        ClientTls {
            ca_pem: ca_pem.into(),
            identity: None,
            domain: None,
        }
    }

    /// [`ClientTls::new`] with the CA read from a file.
    pub fn from_ca_file(path: impl AsRef<Path>) -> Result<ClientTls, Error> {
        Ok(ClientTls::new(read_pem("CA certificate", path.as_ref())?))
    }

    /// Presents this certificate chain and key (PEM) to servers that require client
    /// certificates.
    pub fn with_identity(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// [`ClientTls::with_identity`] from files.
    pub fn with_identity_files(
        self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, Error> {
        let cert = read_pem("certificate", cert.as_ref())?;
        let key = read_pem("key", key.as_ref())?;
        Ok(self.with_identity(cert, key))
    }

    /// Expects every server certificate to name `domain`, instead of the host each endpoint is
    /// dialed by (for members reached through addresses their certificates do not carry).
    pub fn with_domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    pub(crate) fn config(&self) -> tonic::transport::ClientTlsConfig {
        let mut config = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca_pem));
        if let Some((cert, key)) = &self.identity {
            config = config.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        config
    }
}

fn read_pem(what: &str, path: &Path) -> Result<Vec<u8>, Error> {
    let invalid = |reason: String| Error::InvalidTls {
        reason: format!("{what} {}: {reason}", path.display()),
    };
    let len = std::fs::metadata(path)
        .map_err(|e| invalid(e.to_string()))?
        .len();
    if len > MAX_PEM_BYTES {
        return Err(invalid(format!(
            "{len} bytes, more than a PEM file of {MAX_PEM_BYTES} bytes"
        )));
    }
    let pem = std::fs::read(path).map_err(|e| invalid(e.to_string()))?;
    if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(invalid(
            "not a PEM file (no \"-----BEGIN\" line)".to_owned(),
        ));
    }
    Ok(pem)
}
