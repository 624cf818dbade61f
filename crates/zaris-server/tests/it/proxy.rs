//! A TCP proxy in front of one node, to cut a client off the cluster without touching the node:
//! while cut, bytes are held back in both directions (a silent partition, no reset), and released
//! in order once healed.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    _accept: AbortOnDropHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let cut = Arc::new(watch::Sender::new(false));
        let state = cut.clone();
        let accept = tokio::spawn(async move {
            // Connections live in this set: dropping the proxy aborts them all.
            let mut pumps = tokio::task::JoinSet::new();
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(target).await else {
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                pumps.spawn(pump(in_read, out_write, state.subscribe()));
                pumps.spawn(pump(out_read, in_write, state.subscribe()));
            }
        });
        Proxy {
            addr,
            cut,
            _accept: AbortOnDropHandle::new(accept),
        }
    }

    /// Stops forwarding (silently: connections stay open, bytes wait).
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Forwards again, including what waited.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cut: watch::Receiver<bool>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        while *cut.borrow_and_update() {
            if cut.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
