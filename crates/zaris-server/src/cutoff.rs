//! Cutting off a connection that misbehaves: a peer that sends garbage, oversized messages,
//! another cluster's messages or messages for a member its certificate does not name.
//!
//! A refusal alone leaves the connection open, so such a peer could go on costing decode work
//! and memory for as long as it likes. Every accepted peer connection is therefore wrapped in a
//! [`Severable`] registered in [`Connections`] under its remote address; [`PeerGuard`], around
//! the Raft service, looks at each answer and severs the connection that earned a refusal, after
//! a short grace period so the refusal itself still reaches the peer. A member that merely fell
//! behind never gets such an answer: what it sends decodes, and it speaks for itself.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::Code;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use crate::metrics as m;

/// How long a refused connection stays open after the refusal, for the answer to go out.
pub const SEVER_GRACE: Duration = Duration::from_millis(200);

/// Each open connection's id and cut, by remote address.
type Open = HashMap<SocketAddr, (u64, Arc<Cut>)>;

/// The open connections of one listener, by remote address.
#[derive(Clone, Debug)]
pub struct Connections {
    listener: &'static str,
    open: Arc<Mutex<Open>>,
    next_id: Arc<AtomicU64>,
}

/// Whether a connection is severed, and the task to wake when it is. Checked on every read and
/// write of the connection: a load and a lock-free waker registration, no lock.
#[derive(Debug, Default)]
struct Cut {
    severed: AtomicBool,
    waker: AtomicWaker,
}

impl Cut {
    fn sever(&self) {
        self.severed.store(true, Ordering::Release);
        self.waker.wake();
    }

    fn is_severed(&self) -> bool {
        self.severed.load(Ordering::Acquire)
    }
}

impl Connections {
    /// `listener` names the listener in metrics (`peer`, `client`).
    pub fn new(listener: &'static str) -> Self {
        Connections {
            listener,
            open: Arc::default(),
            next_id: Arc::default(),
        }
    }

    /// Registers an accepted connection so it can be severed.
    pub fn wrap<IO>(&self, io: IO, remote: SocketAddr) -> Severable<IO> {
        let cut = Arc::new(Cut::default());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(remote, (id, cut.clone()));
        Severable {
            io,
            cut,
            id,
            remote,
            connections: self.clone(),
        }
    }

    /// Closes the connection from `remote` after [`SEVER_GRACE`]; nothing if it is gone or
    /// already being closed (it leaves the registry now, so a burst of refusals on one
    /// connection starts one timer).
    pub fn sever(&self, remote: SocketAddr) {
        let Some((_, cut)) = self.lock().remove(&remote) else {
            return;
        };
        tracing::debug!(listener = self.listener, %remote, "cutting off a connection");
        tokio::spawn(async move {
            tokio::time::sleep(SEVER_GRACE).await;
            cut.sever();
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A connection that fails every read and write once severed, which makes the HTTP/2 server
/// drop it (and close the socket).
pub struct Severable<IO> {
    io: IO,
    cut: Arc<Cut>,
    /// Tells this connection's entry from a later one's from the same address.
    id: u64,
    remote: SocketAddr,
    connections: Connections,
}

impl<IO> Severable<IO> {
    /// An error once severed; else registers the waker, so a cut wakes a pending read (checked
    /// again after registering: a cut in between is not missed).
    fn check(&mut self, cx: &mut Context<'_>) -> Result<(), io::Error> {
        let severed = || {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "connection cut off after a refused message",
            )
        };
        if self.cut.is_severed() {
            return Err(severed());
        }
        self.cut.waker.register(cx.waker());
        if self.cut.is_severed() {
            return Err(severed());
        }
        Ok(())
    }
}

impl<IO> Drop for Severable<IO> {
    fn drop(&mut self) {
        let mut open = self.connections.lock();
        // The address may already belong to a newer connection: leave that one registered.
        if open.get(&self.remote).is_some_and(|(id, _)| *id == self.id) {
            open.remove(&self.remote);
        }
        drop(open);
        if self.cut.is_severed() {
            metrics::counter!(m::CONNECTIONS_CUT, "listener" => self.connections.listener)
                .increment(1);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Severable<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Severable<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// The wrapped connection tells tonic what the connection itself would, so the remote address
/// and the TLS peer certificates are found where tonic looks for them.
impl<IO: Connected> Connected for Severable<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Wraps a gRPC service: an answer marked [`CUT_OFF_METADATA`], or gRPC's own refusal of an
/// oversized message (counted here, since no handler sees it), cuts the caller's connection
/// off.
#[derive(Clone, Debug)]
pub struct PeerGuard<S> {
    inner: S,
    connections: Connections,
}

impl<S> PeerGuard<S> {
    pub fn new(inner: S, connections: Connections) -> Self {
        PeerGuard { inner, connections }
    }
}

/// Marks a refusal that cuts the connection off: set by the Raft service on a message that
/// does not decode, belongs to another cluster, or speaks for a member the certificate does not
/// name. A member of this cluster and version never earns one; refusals a member can earn (a
/// vote from a member this node has not learnt of yet, a snapshot over this node's bound) do
/// not carry it.
pub const CUT_OFF_METADATA: &str = "zaris-cut-off";

/// The status of an answer that carries it in its headers (every refusal: a trailers-only
/// response).
fn refusal_code<B>(response: &http::Response<B>) -> Option<Code> {
    let status = response.headers().get("grpc-status")?;
    let code: i32 = status.to_str().ok()?.parse().ok()?;
    Some(Code::from_i32(code))
}

fn remote_addr<B>(request: &http::Request<B>) -> Option<SocketAddr> {
    let extensions = request.extensions();
    extensions
        .get::<TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.get_ref().remote_addr())
        })
}

impl<S, B, R> Service<http::Request<B>> for PeerGuard<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>, Error = Infallible>,
    S::Future: Send + 'static,
    R: 'static,
{
    type Response = http::Response<R>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let remote = remote_addr(&request);
        let answer = self.inner.call(request);
        let connections = self.connections.clone();
        Box::pin(async move {
            let response = answer.await?;
            // gRPC's decoder refuses a message over the size limit before any handler sees it:
            // a member never sends one (it splits its batches).
            let oversized = refusal_code(&response) == Some(Code::OutOfRange);
            if oversized {
                metrics::counter!(m::PEER_MESSAGES_REFUSED, "reason" => "too_large").increment(1);
            }
            if (oversized || response.headers().contains_key(CUT_OFF_METADATA))
                && let Some(remote) = remote
            {
                connections.sever(remote);
            }
            Ok(response)
        })
    }
}

impl<S: NamedService> NamedService for PeerGuard<S> {
    const NAME: &'static str = S::NAME;
}
