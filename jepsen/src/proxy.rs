//! The harness's TCP proxies: one per directed link (node → node, client → node), all on
//! 127.0.0.1. A link can be cut (bytes are held back in both directions, like a partition in which
//! TCP keeps retransmitting), slowed (delay with jitter per chunk, order kept), or reset (every
//! open connection is dropped). The target can change, so a restarted node can come back on a
//! new port behind the same proxy address.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// What a link does to the bytes crossing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Hold every byte until healed.
    pub cut: bool,
    /// Added to every chunk.
    pub delay: Duration,
    /// Up to this much more, uniformly at random.
    pub jitter: Duration,
}

/// One proxy: listens on `addr`, forwards to the current target.
#[derive(Debug)]
pub struct Link {
    pub addr: SocketAddr,
    shape: Arc<watch::Sender<Shape>>,
    /// Bumped to drop every open connection.
    resets: Arc<watch::Sender<u64>>,
    target: Arc<Mutex<Option<SocketAddr>>>,
    _accept: AbortOnDropHandle<()>,
}

impl Link {
    pub async fn start() -> Result<Link> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a proxy")?;
        let addr = listener.local_addr()?;
        let shape = Arc::new(watch::Sender::new(Shape::default()));
        let resets = Arc::new(watch::Sender::new(0u64));
        let target: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let accept = tokio::spawn(accept_loop(
            listener,
            shape.clone(),
            resets.clone(),
            target.clone(),
        ));
        Ok(Link {
            addr,
            shape,
            resets,
            target,
            _accept: AbortOnDropHandle::new(accept),
        })
    }

    /// Where new connections go.
    pub fn set_target(&self, target: SocketAddr) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = Some(target);
    }

    pub fn shape(&self, shape: Shape) {
        self.shape.send_replace(shape);
    }

    pub fn heal(&self) {
        self.shape.send_replace(Shape::default());
    }

    pub fn is_cut(&self) -> bool {
        self.shape.borrow().cut
    }

    /// Drops every open connection (the peers see a reset or end of stream).
    pub fn reset(&self) {
        self.resets.send_modify(|generation| *generation += 1);
    }
}

async fn accept_loop(
    listener: TcpListener,
    shape: Arc<watch::Sender<Shape>>,
    resets: Arc<watch::Sender<u64>>,
    target: Arc<Mutex<Option<SocketAddr>>>,
) {
    // Connections live in this set: dropping the link aborts them all.
    let mut pumps = tokio::task::JoinSet::new();
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        while pumps.try_join_next().is_some() {}
        let Some(to) = *target.lock().unwrap_or_else(|p| p.into_inner()) else {
            continue;
        };
        let Ok(outbound) = TcpStream::connect(to).await else {
            continue;
        };
        let _ = inbound.set_nodelay(true);
        let _ = outbound.set_nodelay(true);
        let (in_read, in_write) = inbound.into_split();
        let (out_read, out_write) = outbound.into_split();
        let generation = *resets.borrow();
        for (from, to) in [(in_read, out_write), (out_read, in_write)] {
            let shape = shape.subscribe();
            let mut resets = resets.subscribe();
            pumps.spawn(async move {
                tokio::select! {
                    () = pump(from, to, shape) => {}
                    _ = resets.wait_for(|g| *g != generation) => {}
                }
            });
        }
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut shape: watch::Receiver<Shape>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        loop {
            let now = *shape.borrow_and_update();
            if now.cut {
                if shape.changed().await.is_err() {
                    return;
                }
                continue;
            }
            let extra = if now.jitter.is_zero() {
                Duration::ZERO
            } else {
                now.jitter.mul_f64(rand::random::<f64>())
            };
            let wait = now.delay + extra;
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            break;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
