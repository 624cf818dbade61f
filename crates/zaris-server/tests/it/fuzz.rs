//! Random bytes on every port, in plaintext and TLS: each connection is refused or closed, no
//! node crashes, the cluster keeps its leader, and nothing acknowledged is lost. The bytes come
//! from a fixed seed, so a failure repeats.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use zaris_client::{ClientOptions, PutOptions};
use zaris_testkit::cluster::TestCluster;

use crate::tls::Certs;

/// xorshift64*: enough randomness for garbage, and no dependency.
struct Garbage(u64);

impl Garbage {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Up to 4 KiB of bytes: pure noise, or noise after a TLS record header or the HTTP/2
    /// preface, so that each layer (TLS, HTTP/2 framing, gRPC) gets its share.
    fn blob(&mut self) -> Vec<u8> {
        let len = (self.next() % 4096) as usize + 1;
        let mut bytes: Vec<u8> = match self.next() % 3 {
            0 => Vec::new(),
            1 => vec![0x16, 0x03, 0x01],
            _ => b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
        };
        bytes.extend((0..len).map(|_| self.next() as u8));
        bytes
    }
}

/// Sends `blobs` random blobs to `addr`, one connection each, and reads until the node closes
/// the connection or stops answering for a moment.
async fn spray(addr: SocketAddr, garbage: &mut Garbage, blobs: usize) {
    for _ in 0..blobs {
        let Ok(mut socket) = tokio::net::TcpStream::connect(addr).await else {
            panic!("the node at {addr} stopped accepting connections");
        };
        let _ = socket.write_all(&garbage.blob()).await;
        let mut sink = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_millis(100), socket.read_to_end(&mut sink)).await;
    }
}

async fn sprayed_cluster_serves_on(cluster: TestCluster, options: ClientOptions, seed: u64) {
    let leader = cluster.leader().await;
    let client_options = options.with_timeout(Duration::from_secs(10));
    let ids: Vec<u64> = cluster.running();
    let endpoints: Vec<String> = ids.iter().map(|id| cluster.address(*id)).collect();
    let client = zaris_client::Client::connect_with(endpoints, client_options)
        .await
        .expect("client");
    let before = client
        .put("kept", "acknowledged", PutOptions::default())
        .await
        .expect("put");
    let mut garbage = Garbage(seed);
    for id in &ids {
        spray(cluster.addrs[id], &mut garbage, 40).await;
        spray(cluster.peer_addrs[id], &mut garbage, 40).await;
    }
    for id in &ids {
        assert!(
            cluster.node(*id).state().read(|d| d.state.last_applied()) >= before.revision,
            "node {id}"
        );
    }
    assert_eq!(
        cluster.leader().await,
        leader,
        "the garbage cost the leader"
    );
    let kept = client
        .get("kept")
        .await
        .expect("get")
        .expect("nothing lost");
    assert_eq!(kept.value, b"acknowledged");
    client
        .put("after", "garbage", PutOptions::default())
        .await
        .expect("still serving");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_on_the_plaintext_ports_change_nothing() {
    let cluster = TestCluster::start(3).await;
    sprayed_cluster_serves_on(cluster, ClientOptions::default(), 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_on_the_tls_ports_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let cluster = TestCluster::start_configured(3, certs.configure()).await;
    let options = ClientOptions::default().with_tls(certs.client_tls("tenant-a"));
    sprayed_cluster_serves_on(cluster, options, 0x5eed_0002).await;
}
