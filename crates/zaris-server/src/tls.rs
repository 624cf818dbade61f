//! TLS for a node's two listeners, with rustls (no OpenSSL): the certificate, key and CA files
//! of each, re-read when they change or on demand (SIGHUP), so certificates rotate without a
//! restart. A handshake uses the files as they were when it began; connections already open keep
//! the certificate they started with, as in etcd.
//!
//! - Client listener: server certificate and key; with a client CA, every client must present a
//!   certificate it signed (mutual TLS). The handshake checks only that the client holds the
//!   key of the certificate it presents (if any); the chain is checked on every call
//!   ([`Authenticate`](crate::auth::Authenticate), cached per certificate), which refuses a
//!   missing or foreign certificate with UNAUTHENTICATED and says why, where a failed handshake
//!   shows the client only a closed connection.
//! - Peer listener: always mutual. A node presents its peer certificate both when it accepts and
//!   when it dials, and checks the other side's against the cluster's peer CA; a dialing node
//!   also checks that the certificate names the member's peer host (standard server-name
//!   verification).
//!
//! A failed reload (a key that does not match its certificate, a file half written) keeps the
//! material in use, is logged and counted, and is retried at the next change.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use rustls::RootCertStore;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::UnixTime;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::handshake_slots::{HandshakeSlots, MAX_HANDSHAKES_PER_ADDRESS};
use crate::metrics as m;

/// How often certificate files are checked for changes.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Longest a TLS handshake may take; a client that stalls it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes in progress on one listener; further connections wait to be accepted. One
/// client address may hold only a share of them (`handshake_slots.rs`).
const MAX_CONCURRENT_HANDSHAKES: usize = 256;
/// Largest certificate, key or CA file read, in bytes.
const MAX_PEM_BYTES: u64 = 1024 * 1024;
/// How long a client certificate chain's check is reused (expiry is seen this late at most).
const CHAIN_CHECK_CACHE_TTL: Duration = Duration::from_secs(60);
/// Most chain checks cached; the cache starts over when full.
const MAX_CHAIN_CHECKS_CACHED: usize = 4096;
/// Failed handshakes are logged at most this often per listener (all are counted).
const HANDSHAKE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The files of one listener's TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// This node's certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates (PEM) the other side's certificate must chain to. On the client listener
    /// it makes client certificates required; on the peer listener it is required.
    pub ca: Option<PathBuf>,
}

impl TlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }
}

/// One consistent read of a listener's files.
struct Material {
    server: Arc<rustls::ServerConfig>,
    /// The client listener's chain check ([`Authenticate`](crate::auth::Authenticate)), when it
    /// has a client CA.
    client_chain: Option<Arc<dyn ClientCertVerifier>>,
    /// For dialing peers: the same certificate and key as a client identity, and the CA.
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    ca_pem: Option<Vec<u8>>,
}

/// What the files looked like when last read: a change to any of them triggers a reload.
type Stamp = Vec<Option<(SystemTime, u64)>>;

/// A cached chain check: the TLS generation and time it was made in, and its outcome.
type ChainCheck = (u64, Instant, Result<(), String>);

/// One listener's TLS material, reloadable.
pub struct TlsSource {
    /// `client` or `peer`, for logs and metrics.
    listener: &'static str,
    /// Let clients without a certificate finish the handshake (the client listener: its calls
    /// refuse them, [`Authenticate`](crate::auth::Authenticate)); a certificate, if sent, must
    /// still be valid.
    defer_missing_cert: bool,
    files: TlsFiles,
    /// Shared, not copied: every handshake and every checked call reads it.
    current: RwLock<Arc<Material>>,
    stamp: Mutex<Stamp>,
    /// Bumped by every successful reload (dialers rebuild their connections' settings).
    generation: AtomicU64,
    /// Outcomes of recent chain checks, by SHA-256 of the chain: (generation, when, outcome).
    checked: Mutex<HashMap<[u8; 32], ChainCheck>>,
}

impl std::fmt::Debug for TlsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSource")
            .field("listener", &self.listener)
            .field("files", &self.files)
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl TlsSource {
    /// Reads the client listener's files; an error says which file and what is wrong with it.
    pub fn client(files: TlsFiles) -> anyhow::Result<TlsSource> {
        Self::load("client", files, true)
    }

    /// Reads the peer listener's files (mutual TLS, a certificate always required).
    pub fn peer(files: TlsFiles) -> anyhow::Result<TlsSource> {
        Self::load("peer", files, false)
    }

    fn load(
        listener: &'static str,
        files: TlsFiles,
        defer_missing_cert: bool,
    ) -> anyhow::Result<TlsSource> {
        let stamp = stamp(&files);
        let material = read_material(&files, defer_missing_cert)?;
        Ok(TlsSource {
            listener,
            defer_missing_cert,
            files,
            current: RwLock::new(Arc::new(material)),
            stamp: Mutex::new(stamp),
            generation: AtomicU64::new(0),
            checked: Mutex::new(HashMap::new()),
        })
    }

    /// Whether this listener checks client certificates against a CA.
    pub(crate) fn has_ca(&self) -> bool {
        self.files.ca.is_some()
    }

    /// Checks a client's certificate chain against the current client CA (cached for
    /// [`CHAIN_CHECK_CACHE_TTL`] per chain and generation). `Ok` if no client CA is set.
    pub(crate) fn check_client_chain(
        &self,
        chain: &[CertificateDer<'static>],
    ) -> Result<(), String> {
        let material = self.material();
        let Some(verifier) = &material.client_chain else {
            return Ok(());
        };
        let Some((end_entity, intermediates)) = chain.split_first() else {
            return Err("no certificate".to_owned());
        };
        // Each certificate with its length, so two chains never hash the same bytes.
        let mut bytes = Vec::new();
        for cert in chain {
            bytes.extend_from_slice(&(cert.len() as u64).to_le_bytes());
            bytes.extend_from_slice(cert);
        }
        let digest = zaris_core::codec::bytes_digest(&bytes).0;
        let generation = self.generation();
        let now = Instant::now();
        let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((made_in, at, outcome)) = checked.get(&digest)
            && *made_in == generation
            && now.duration_since(*at) < CHAIN_CHECK_CACHE_TTL
        {
            return outcome.clone();
        }
        let outcome = verifier
            .verify_client_cert(end_entity, intermediates, UnixTime::now())
            .map(drop)
            .map_err(|e| e.to_string());
        if checked.len() >= MAX_CHAIN_CHECKS_CACHED {
            checked.clear();
        }
        checked.insert(digest, (generation, now, outcome.clone()));
        outcome
    }

    fn material(&self) -> Arc<Material> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The rustls configuration new handshakes use.
    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        self.material().server.clone()
    }

    /// Increases with every reload.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The settings for dialing a peer whose certificate must name `domain`: this node's
    /// certificate as its identity, and the CA.
    pub fn client_config(&self, domain: &str) -> tonic::transport::ClientTlsConfig {
        let material = self.material();
        let mut config = tonic::transport::ClientTlsConfig::new()
            .domain_name(domain)
            .identity(tonic::transport::Identity::from_pem(
                &material.cert_pem,
                &material.key_pem,
            ));
        if let Some(ca) = &material.ca_pem {
            config = config.ca_certificate(tonic::transport::Certificate::from_pem(ca));
        }
        config
    }

    /// Re-reads the files if any changed since the last read, or always with `force`. Returns
    /// whether new material is in use; a failed read keeps the old one and is an error.
    pub fn reload(&self, force: bool) -> anyhow::Result<bool> {
        let now = stamp(&self.files);
        {
            let mut last = self.stamp.lock().unwrap_or_else(|p| p.into_inner());
            if !force && *last == now {
                return Ok(false);
            }
            // Remember the attempt: a broken file is reported once, not every interval, and
            // its next change is tried again.
            *last = now;
        }
        match read_material(&self.files, self.defer_missing_cert) {
            Ok(material) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(material);
                self.generation.fetch_add(1, Ordering::AcqRel);
                metrics::counter!(m::TLS_RELOADS, "listener" => self.listener, "result" => "ok")
                    .increment(1);
                info!(listener = self.listener, cert = %self.files.cert.display(), "TLS certificates reloaded");
                Ok(true)
            }
            Err(e) => {
                metrics::counter!(m::TLS_RELOADS, "listener" => self.listener, "result" => "error")
                    .increment(1);
                Err(e.context(format!(
                    "reloading the {} listener's TLS files (the previous ones stay in use)",
                    self.listener
                )))
            }
        }
    }
}

/// Modification times and sizes of the files (None for one that cannot be read).
fn stamp(files: &TlsFiles) -> Stamp {
    files
        .paths()
        .map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

fn read_pem(what: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?
        .len();
    if len > MAX_PEM_BYTES {
        bail!(
            "the {what} {} has {len} bytes, more than a PEM file of {MAX_PEM_BYTES} bytes",
            path.display()
        );
    }
    std::fs::read(path).with_context(|| format!("cannot read the {what} {}", path.display()))
}

fn parse_certs(
    what: &str,
    path: &Path,
    pem: &[u8],
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("the {what} {} is not valid PEM: {e}", path.display()))?;
    if certs.is_empty() {
        bail!(
            "the {what} {} holds no certificate (expected PEM \"BEGIN CERTIFICATE\" blocks)",
            path.display()
        );
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_material(files: &TlsFiles, defer_missing_cert: bool) -> anyhow::Result<Material> {
    let cert_pem = read_pem("certificate", &files.cert)?;
    let key_pem = read_pem("key", &files.key)?;
    let certs = parse_certs("certificate", &files.cert, &cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        anyhow::anyhow!(
            "the key {} holds no usable private key (PEM PKCS#8, PKCS#1 or SEC1): {e}",
            files.key.display()
        )
    })?;
    let (ca_pem, verifier) = match &files.ca {
        None => (None, None),
        Some(path) => {
            let pem = read_pem("CA certificate", path)?;
            let mut roots = RootCertStore::empty();
            for cert in parse_certs("CA certificate", path, &pem)? {
                roots.add(cert).with_context(|| {
                    format!("the CA certificate {} is not usable", path.display())
                })?;
            }
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            if defer_missing_cert {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .with_context(|| format!("the CA certificate {} is not usable", path.display()))?;
            let handshake: Arc<dyn ClientCertVerifier> = if defer_missing_cert {
                Arc::new(ChainCheckedPerCall(verifier.clone()))
            } else {
                verifier.clone()
            };
            (Some(pem), Some((handshake, verifier)))
        }
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let (builder, client_chain) = match verifier {
        Some((handshake, chain)) => (
            builder.with_client_cert_verifier(handshake),
            defer_missing_cert.then_some(chain),
        ),
        None => (builder.with_no_client_auth(), None),
    };
    let mut server = builder.with_single_cert(certs, key).with_context(|| {
        format!(
            "the key {} does not fit the certificate {}",
            files.key.display(),
            files.cert.display()
        )
    })?;
    // gRPC is HTTP/2 only.
    server.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Material {
        server: Arc::new(server),
        client_chain,
        cert_pem,
        key_pem,
        ca_pem,
    })
}

/// The client listener's handshake verifier when it has a client CA: it admits a client
/// without a certificate, and checks of a presented one only that the client holds its key;
/// [`Authenticate`](crate::auth::Authenticate) checks the chain on every call.
#[derive(Debug)]
struct ChainCheckedPerCall(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for ChainCheckedPerCall {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Checked per call, against the CA current then (crate::auth::Authenticate).
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Checks the files every [`RELOAD_CHECK_INTERVAL`], and whenever `now` is notified (SIGHUP),
/// until `stop`.
pub async fn watch_files(
    sources: Vec<Arc<TlsSource>>,
    now: Arc<tokio::sync::Notify>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(RELOAD_CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let force = tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => false,
            () = now.notified() => true,
        };
        for source in &sources {
            if let Err(e) = source.reload(force) {
                warn!(listener = source.listener, "{e:#}");
            }
        }
    }
}

/// Accepted TLS connections of `listener`, handshaken with `source`'s current material, as a
/// stream for tonic. A connection that fails its handshake (plaintext, an unknown CA, no client
/// certificate where one is required) is closed, counted and logged (rate-limited); the
/// listener serves on. `wrap` turns each accepted socket into what TLS runs over (the peer
/// listener registers it to be cut off if it misbehaves, `cutoff.rs`).
pub(crate) fn incoming<IO>(
    listener: TcpListener,
    source: Arc<TlsSource>,
    wrap: impl Fn(TcpStream, SocketAddr) -> IO + Clone + Send + Sync + 'static,
    tracker: &TaskTracker,
    stop: CancellationToken,
) -> tokio_stream::wrappers::ReceiverStream<io::Result<TlsStream<IO>>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(MAX_CONCURRENT_HANDSHAKES);
    let handshakes = Arc::new(Semaphore::new(MAX_CONCURRENT_HANDSHAKES));
    let log = Arc::new(Mutex::new(HandshakeLog::default()));
    let per_address = HandshakeSlots::default();
    let handshake_tasks = tracker.clone();
    tracker.spawn(async move {
        loop {
            let Ok(permit) = handshakes.clone().acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                () = tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (socket, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    warn!(listener = source.listener, error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Some(slot) = per_address.take(remote.ip()) else {
                drop(socket);
                handshake_failed(
                    &source,
                    &log,
                    remote,
                    &format!(
                        "{MAX_HANDSHAKES_PER_ADDRESS} handshakes from this address in progress \
                         already; connection closed"
                    ),
                );
                continue;
            };
            let _ = socket.set_nodelay(true);
            let (tx, source, log, wrap) = (tx.clone(), source.clone(), log.clone(), wrap.clone());
            handshake_tasks.spawn(async move {
                let (_permit, _slot) = (permit, slot);
                let acceptor = TlsAcceptor::from(source.server_config());
                let mut socket = socket;
                let handshake = async {
                    use crate::plaintext::{Greeting, refuse};
                    match refuse(&mut socket, source.listener).await {
                        Greeting::Closed => return Ok(None),
                        Greeting::Refused => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "a plaintext client (answered in plaintext that TLS is required)",
                            ));
                        }
                        Greeting::Other => {}
                    }
                    acceptor.accept(wrap(socket, remote)).await.map(Some)
                };
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                    Ok(Ok(Some(stream))) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => handshake_failed(&source, &log, remote, &e.to_string()),
                    Err(_) => handshake_failed(&source, &log, remote, "handshake timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[derive(Debug, Default)]
struct HandshakeLog {
    last: Option<tokio::time::Instant>,
    suppressed: u64,
}

fn handshake_failed(
    source: &TlsSource,
    log: &Mutex<HandshakeLog>,
    remote: SocketAddr,
    error: &str,
) {
    metrics::counter!(m::TLS_HANDSHAKE_FAILURES, "listener" => source.listener).increment(1);
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    let now = tokio::time::Instant::now();
    if log
        .last
        .is_some_and(|last| now.duration_since(last) < HANDSHAKE_LOG_INTERVAL)
    {
        log.suppressed += 1;
        return;
    }
    let suppressed = std::mem::take(&mut log.suppressed);
    log.last = Some(now);
    warn!(
        listener = source.listener,
        %remote,
        suppressed,
        "TLS handshake failed: {error} (plaintext, a certificate from another CA, or none where \
         one is required; {suppressed} more since the last report)"
    );
}
