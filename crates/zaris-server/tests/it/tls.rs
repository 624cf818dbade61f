//! TLS on both listeners, with real handshakes on 127.0.0.1: mutual TLS between peers (a
//! cluster that elects a leader has talked through it), clients with and without certificates,
//! certificates from another CA, plaintext against a TLS port, and certificate rotation while a
//! client keeps a lease alive.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::Code;
use zaris_client::{Client, ClientOptions, ClientTls, PutOptions};
use zaris_proto::v1::RaftMessage;
use zaris_proto::v1::raft_service_client::RaftServiceClient;
use zaris_server::{NodeConfig, TlsFiles};
use zaris_testkit::cluster::TestCluster;
use zaris_testkit::eventually;
use zaris_testkit::pki::{CertFiles, Pki};

use crate::counter;

/// Every node's files: `node-{id}` (client listener) and `peer-{id}` (peer listener), signed
/// by the `cluster` CA; clients' certificates by the `clients` CA.
pub(crate) struct Certs {
    dir: PathBuf,
    cluster: Pki,
    clients: Pki,
}

impl Certs {
    pub(crate) fn new(dir: &Path) -> Certs {
        let certs = Certs {
            dir: dir.to_owned(),
            cluster: Pki::new(dir, "cluster"),
            clients: Pki::new(dir, "clients"),
        };
        for id in 1..=3 {
            certs
                .cluster
                .issue(&format!("node-{id}"), &["127.0.0.1", "localhost"]);
            certs.cluster.issue(&format!("peer-{id}"), &["127.0.0.1"]);
        }
        certs
    }

    /// Sets each node's TLS files by its id.
    pub(crate) fn configure(&self) -> impl Fn(&mut NodeConfig) + Send + Sync + 'static {
        let (dir, cluster_ca, clients_ca) =
            (self.dir.clone(), self.cluster.ca(), self.clients.ca());
        move |config: &mut NodeConfig| {
            let id = config.node_id;
            config.client_tls = Some(TlsFiles {
                cert: dir.join(format!("node-{id}.pem")),
                key: dir.join(format!("node-{id}-key.pem")),
                ca: Some(clients_ca.clone()),
            });
            config.peer_tls = Some(TlsFiles {
                cert: dir.join(format!("peer-{id}.pem")),
                key: dir.join(format!("peer-{id}-key.pem")),
                ca: Some(cluster_ca.clone()),
            });
        }
    }

    pub(crate) fn client_tls(&self, name: &str) -> ClientTls {
        let CertFiles { cert, key } = self.clients.issue(name, &[name]);
        ClientTls::from_ca_file(self.cluster.ca())
            .expect("CA")
            .with_identity_files(cert, key)
            .expect("identity")
    }
}

fn options(tls: Option<ClientTls>) -> ClientOptions {
    let options = ClientOptions::default().with_timeout(Duration::from_secs(3));
    match tls {
        Some(tls) => options.with_tls(tls),
        None => options,
    }
}

/// A put through a client of `endpoints` with `tls`: its error's text, or None if it succeeded.
async fn put_error(endpoints: &[String], tls: Option<ClientTls>) -> Option<String> {
    let client = match Client::lazy(endpoints.iter().map(String::as_str), options(tls)) {
        Ok(client) => client,
        Err(err) => return Some(err.to_string()),
    };
    client
        .put("tls/probe", "v", PutOptions::default())
        .await
        .err()
        .map(|err| format!("{err:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_need_a_certificate_of_the_client_ca_and_strangers_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let mut cluster = TestCluster::start_configured(3, certs.configure()).await;
    // A leader elected, and entries committed below: the peers speak mutual TLS.
    let leader = cluster.leader().await;
    cluster.set_client_options(options(Some(certs.client_tls("tenant-a"))));
    let endpoints: Vec<String> = (1..=3).map(|id| cluster.address(id)).collect();
    let client = cluster.client(&[1, 2, 3]).await;
    let lease = client
        .grant(Duration::from_secs(60))
        .await
        .expect("grant over TLS");
    let put = client
        .put("tls/a", "1", PutOptions::default())
        .await
        .expect("put over TLS");
    cluster.wait_applied(put.revision).await;

    let failures_before = counter("zaris_tls_handshake_failures_total", "listener=\"client\"");
    let no_cert = put_error(
        &endpoints,
        Some(ClientTls::from_ca_file(certs.cluster.ca()).expect("CA")),
    )
    .await
    .expect("no client certificate is refused");
    let rogue = Pki::new(&dir.path().join("rogue"), "rogue");
    let CertFiles { cert, key } = rogue.issue("mallory", &["mallory"]);
    let other_ca = put_error(
        &endpoints,
        Some(
            ClientTls::from_ca_file(certs.cluster.ca())
                .expect("CA")
                .with_identity_files(cert, key)
                .expect("identity"),
        ),
    )
    .await
    .expect("a certificate of another CA is refused");
    let plaintext = put_error(&endpoints, None)
        .await
        .expect("plaintext against the TLS port is refused");
    // The client side checks the server too: a CA that did not sign the nodes' certificates.
    let untrusted_server = put_error(
        &endpoints,
        Some(ClientTls::from_ca_file(rogue.ca()).expect("CA")),
    )
    .await
    .expect("a server certificate of another CA is refused");
    for (what, error) in [
        ("no certificate", &no_cert),
        ("another CA", &other_ca),
        ("plaintext", &plaintext),
        ("untrusted server", &untrusted_server),
    ] {
        println!("{what}: {error}");
        assert!(!error.is_empty(), "{what}");
    }
    assert!(
        untrusted_server.contains("certificate")
            && untrusted_server.contains("TLS refused")
            && untrusted_server.contains("definite"),
        "the error says the server's certificate is the trouble, and that nothing was sent: \
         {untrusted_server}"
    );
    // Plaintext: the node answers in HTTP/2 that the port requires TLS, and the client knows
    // nothing was sent.
    assert!(
        plaintext.contains("this port requires TLS")
            && plaintext.contains("definite")
            && !plaintext.contains("attempt(s)"),
        "the first refusal is final: {plaintext}"
    );
    // An HTTP/1 client (curl without https) is told the same.
    let mut raw = tokio::net::TcpStream::connect(&endpoints[0])
        .await
        .expect("connect");
    tokio::io::AsyncWriteExt::write_all(&mut raw, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut raw, &mut answer)
        .await
        .expect("read to the close");
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("this port requires TLS"),
        "{answer}"
    );
    // No certificate, or one of another CA: a clear, definite UNAUTHENTICATED on every
    // service.
    assert!(
        no_cert.contains("requires a client certificate") && no_cert.contains("definite"),
        "{no_cert}"
    );
    assert!(
        other_ca.contains("client certificate refused")
            && other_ca.contains("UnknownIssuer")
            && other_ca.contains("definite"),
        "{other_ca}"
    );
    let anonymous = Client::lazy(
        endpoints.iter().map(String::as_str),
        options(Some(
            ClientTls::from_ca_file(certs.cluster.ca()).expect("CA"),
        )),
    )
    .expect("client");
    let refusals = [
        anonymous.status().await.map(drop).err(),
        anonymous
            .grant(Duration::from_secs(5))
            .await
            .map(drop)
            .err(),
        anonymous.get("tls/a").await.map(drop).err(),
        anonymous
            .leases(zaris_client::LeaseId::new(0), 10)
            .await
            .map(drop)
            .err(),
    ];
    for refused in refusals {
        let refused = refused.expect("refused");
        assert_eq!(
            refused.rpc().map(|rpc| rpc.code()),
            Some(Code::Unauthenticated),
            "{refused}"
        );
    }
    // Plaintext fails the handshake itself.
    assert!(
        counter("zaris_tls_handshake_failures_total", "listener=\"client\"") > failures_before,
        "a refused handshake is counted"
    );
    assert!(
        counter(
            "zaris_client_certificates_refused_total",
            "reason=\"missing\""
        ) >= 5.0
    );
    assert!(
        counter(
            "zaris_client_certificates_refused_total",
            "reason=\"invalid\""
        ) >= 1.0
    );

    // The node serves on: the good client works, and its lease is there.
    client
        .put("tls/after", "2", PutOptions::default())
        .await
        .expect("put after the refusals");
    assert!(
        client
            .time_to_live(lease.id, false)
            .await
            .expect("ttl")
            .is_some()
    );
    assert_eq!(cluster.leader().await, leader);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_members_with_a_peer_certificate_reach_the_raft_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let cluster = TestCluster::start_configured(1, certs.configure()).await;
    let leader = cluster.leader().await;
    let peer = format!("https://{}", cluster.peer_addrs[&leader]);
    let cluster_id = cluster.cluster_id();
    let vote = || RaftMessage {
        cluster_id,
        payload: Vec::new(),
    };
    let dial = |tls: Option<tonic::transport::ClientTlsConfig>| {
        let peer = peer.clone();
        async move {
            let endpoint = tonic::transport::Endpoint::from_shared(match &tls {
                Some(_) => peer,
                None => peer.replace("https://", "http://"),
            })
            .expect("endpoint")
            .connect_timeout(Duration::from_secs(2));
            let endpoint = match tls {
                Some(tls) => endpoint.tls_config(tls).expect("tls"),
                None => endpoint,
            };
            match endpoint.connect().await {
                Ok(channel) => RaftServiceClient::new(channel)
                    .vote(vote())
                    .await
                    .map(drop)
                    .map_err(|status| status.code()),
                Err(_) => Err(Code::Unavailable),
            }
        }
    };
    let ca = tonic::transport::Certificate::from_pem(
        std::fs::read(certs.cluster.ca()).expect("read CA"),
    );
    let identity = |files: &CertFiles| {
        tonic::transport::Identity::from_pem(
            std::fs::read(&files.cert).expect("cert"),
            std::fs::read(&files.key).expect("key"),
        )
    };
    let trusting = || {
        tonic::transport::ClientTlsConfig::new()
            .ca_certificate(ca.clone())
            .domain_name("127.0.0.1")
    };
    // Plaintext, TLS without a certificate, a client certificate (another CA): all refused
    // before they reach the Raft service (which would answer INVALID_ARGUMENT).
    let client_cert = certs.clients.issue("tenant-b", &["tenant-b"]);
    for (what, refused) in [
        ("plaintext", dial(None).await),
        ("no certificate", dial(Some(trusting())).await),
        (
            "a client certificate",
            dial(Some(trusting().identity(identity(&client_cert)))).await,
        ),
    ] {
        assert!(
            matches!(refused, Err(code) if code != Code::InvalidArgument),
            "{what}: {refused:?}"
        );
    }
    // A member's peer certificate gets through to the Raft service (which refuses an empty
    // vote as malformed).
    let member = CertFiles {
        cert: certs.dir.join("peer-2.pem"),
        key: certs.dir.join("peer-2-key.pem"),
    };
    assert_eq!(
        dial(Some(trusting().identity(identity(&member)))).await,
        Err(Code::InvalidArgument)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_rotate_while_a_client_holds_a_lease() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let mut cluster = TestCluster::start_configured(3, certs.configure()).await;
    cluster.leader().await;
    let client_files = certs.clients.issue("tenant-a", &["tenant-a"]);
    let next = Pki::new(&dir.path().join("next"), "next");
    // The client trusts the old and the new CA, as during any rotation.
    let bundle = dir.path().join("bundle.pem");
    let both = [
        std::fs::read(certs.cluster.ca()).expect("old CA"),
        std::fs::read(next.ca()).expect("new CA"),
    ]
    .concat();
    std::fs::write(&bundle, &both).expect("bundle");
    let tls = ClientTls::from_ca_file(&bundle)
        .expect("CA")
        .with_identity_files(&client_files.cert, &client_files.key)
        .expect("identity");
    cluster.set_client_options(options(Some(tls)));
    let client = cluster.client(&[1, 2, 3]).await;
    let lease = client.lease(Duration::from_secs(2)).await.expect("lease");

    // Step 1: every node trusts both CAs for peers. Step 2: every node's certificates are
    // replaced by ones of the new CA. The files change in place; the nodes notice by themselves
    // (they also reload on SIGHUP: `NodeHandle::reload_tls`).
    std::fs::write(certs.cluster.ca(), &both).expect("peer CA bundle");
    for id in 1..=3u64 {
        cluster.node(id).reload_tls();
    }
    for id in 1..=3u64 {
        let node = next.issue(&format!("node-{id}"), &["127.0.0.1", "localhost"]);
        let peer = next.issue(&format!("peer-{id}"), &["127.0.0.1"]);
        for (from, to) in [
            (node.cert, format!("node-{id}.pem")),
            (node.key, format!("node-{id}-key.pem")),
            (peer.cert, format!("peer-{id}.pem")),
            (peer.key, format!("peer-{id}-key.pem")),
        ] {
            let tmp = certs.dir.join(format!("{to}.tmp"));
            std::fs::copy(&from, &tmp).expect("copy");
            std::fs::rename(&tmp, certs.dir.join(&to)).expect("rename");
        }
    }
    for id in 1..=3u64 {
        cluster.node(id).reload_tls();
    }
    // New connections get the new certificates: a client that trusts only the new CA gets in.
    let only_new = ClientTls::from_ca_file(next.ca())
        .expect("CA")
        .with_identity_files(&client_files.cert, &client_files.key)
        .expect("identity");
    let endpoints: Vec<String> = (1..=3).map(|id| cluster.address(id)).collect();
    eventually(
        "the new certificates served",
        Duration::from_secs(20),
        || {
            let (endpoints, only_new) = (endpoints.clone(), only_new.clone());
            async move {
                put_error(&endpoints, Some(only_new))
                    .await
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    // A node restarted now dials and is dialed with the new peer certificates only.
    let leader = cluster.leader().await;
    let follower = cluster.followers(leader)[0];
    cluster.stop(follower).await;
    cluster.restart(follower).await;
    let put = client
        .put("after/rotation", "1", PutOptions::default())
        .await
        .expect("put after rotation");
    cluster.wait_applied(put.revision).await;

    // The lease lived through it all: renewed every TTL/3 over the old connections and new.
    assert!(lease.is_valid(), "{:?}", lease.state());
    let info = client
        .time_to_live(lease.id(), false)
        .await
        .expect("ttl")
        .expect("the lease is alive");
    assert!(info.remaining_ttl > Duration::ZERO, "{info:?}");
    let reloads = counter("zaris_tls_reloads_total", "result=\"ok\"");
    // At least the last forced reload of both listeners on all three nodes.
    assert!(reloads >= 6.0, "the reloads are counted: {reloads}");
    cluster.shutdown().await;
}

/// A certificate of the peer CA admits a connection, but each Raft request must come from the
/// member it speaks for: a certificate that does not name that member's peer host, or a node id
/// that is no member, is refused (and counted); the member's own certificate gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_speaks_only_for_the_member_its_certificate_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let cluster = TestCluster::start_configured(1, certs.configure()).await;
    let leader = cluster.leader().await;
    let peer = format!("https://{}", cluster.peer_addrs[&leader]);
    let cluster_id = cluster.cluster_id();
    let ca = tonic::transport::Certificate::from_pem(
        std::fs::read(certs.cluster.ca()).expect("read CA"),
    );
    // A stale vote (term 0), or stale empty entries: the member answers it (with a refusal
    // inside the answer).
    let send_as = |files: CertFiles, node_id: u64, append: bool| {
        let peer = peer.clone();
        let ca = ca.clone();
        async move {
            let tls = tonic::transport::ClientTlsConfig::new()
                .ca_certificate(ca)
                .domain_name("127.0.0.1")
                .identity(tonic::transport::Identity::from_pem(
                    std::fs::read(&files.cert).expect("cert"),
                    std::fs::read(&files.key).expect("key"),
                ));
            let channel = tonic::transport::Endpoint::from_shared(peer)
                .expect("endpoint")
                .tls_config(tls)
                .expect("tls")
                .connect()
                .await
                .expect("a peer certificate passes the handshake");
            let vote = zaris_raft::Vote::new(0, node_id);
            let mut raft = RaftServiceClient::new(channel.clone());
            let answer = if append {
                let request = openraft::raft::AppendEntriesRequest::<zaris_raft::TypeConfig> {
                    vote,
                    prev_log_id: None,
                    entries: Vec::new(),
                    leader_commit: None,
                };
                raft.append_entries(RaftMessage {
                    cluster_id,
                    payload: zaris_core::codec::encode(&request).expect("encode"),
                })
                .await
            } else {
                let request =
                    openraft::raft::VoteRequest::<zaris_raft::TypeConfig>::new(vote, None);
                raft.vote(RaftMessage {
                    cluster_id,
                    payload: zaris_core::codec::encode(&request).expect("encode"),
                })
                .await
            }
            .map(drop)
            .map_err(|status| (status.code(), status.message().to_owned()));
            // The connection too: kept open by the test, so that only the node can close it.
            (answer, channel)
        }
    };
    let refused_before = counter("zaris_peer_messages_refused_total", "reason=\"identity\"");
    let cut_before = counter("zaris_connections_cut_total", "listener=\"peer\"");
    let elsewhere = certs.cluster.issue("elsewhere", &["peer.example"]);
    let (refused, _open_elsewhere) = send_as(elsewhere, leader, false).await;
    let refused = refused.expect_err("a certificate for another host");
    assert_eq!(refused.0, Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.1.contains("does not name \"127.0.0.1\""),
        "{refused:?}"
    );
    let member = CertFiles {
        cert: certs.dir.join("peer-1.pem"),
        key: certs.dir.join("peer-1-key.pem"),
    };
    let (stranger, _open_stranger) = send_as(member.clone(), 9, false).await;
    let stranger = stranger.expect_err("a vote for a node id that is no member");
    assert_eq!(stranger.0, Code::PermissionDenied, "{stranger:?}");
    assert!(
        stranger.1.contains("node 9 is not a member"),
        "{stranger:?}"
    );
    send_as(member.clone(), leader, false)
        .await
        .0
        .expect("the member's own certificate reaches Raft");
    // Entries from a node this member does not know get through: a member added after what
    // this node has applied may lead, and this node learns of it only from them.
    send_as(member, 9, true)
        .await
        .0
        .expect("entries from a leader this node does not know yet reach Raft");
    assert!(
        counter("zaris_peer_messages_refused_total", "reason=\"identity\"") >= refused_before + 2.0
    );
    // The connection of the certificate for another host is cut off (the TLS listener's
    // path); counted once dropped. A vote for an unknown member is only refused: a member can
    // earn that.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while counter("zaris_connections_cut_total", "listener=\"peer\"") < cut_before + 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the refused TLS connections were not cut off"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.shutdown().await;
}

/// A reload that finds the files half-way through a rotation (a key written only in part, or a
/// new certificate beside the old key) keeps serving the previous certificate, counts the
/// failure, and takes the new pair once both files are complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_finds_a_half_written_or_mismatched_key_keeps_the_old_pair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let cluster = TestCluster::start_configured(1, certs.configure()).await;
    cluster.leader().await;
    let client_files = certs.clients.issue("tenant-a", &["tenant-a"]);
    let trusting = |ca: PathBuf| {
        ClientTls::from_ca_file(ca)
            .expect("CA")
            .with_identity_files(&client_files.cert, &client_files.key)
            .expect("identity")
    };
    let endpoints = vec![cluster.address(1)];
    let old_ca = trusting(certs.cluster.ca());
    let next = Pki::new(&dir.path().join("next"), "next");
    let new_ca = trusting(next.ca());
    let new = next.issue("node-1", &["127.0.0.1"]);
    let (cert_path, key_path) = (
        certs.dir.join("node-1.pem"),
        certs.dir.join("node-1-key.pem"),
    );
    let errors = || counter("zaris_tls_reloads_total", "result=\"error\"");
    let wait_for_failed_reload = |before: f64| {
        eventually(
            "a failed reload",
            Duration::from_secs(10),
            move || async move { (errors() > before).then_some(()) },
        )
    };
    let serves_old_pair = |why: &'static str| {
        let (endpoints, old_ca, new_ca) = (endpoints.clone(), old_ca.clone(), new_ca.clone());
        async move {
            assert_eq!(put_error(&endpoints, Some(old_ca)).await, None, "{why}");
            assert!(
                put_error(&endpoints, Some(new_ca)).await.is_some(),
                "{why}: the new certificate is not served yet"
            );
        }
    };

    // The new certificate, and its key cut off half-way.
    let key = std::fs::read(&new.key).expect("key");
    let before = errors();
    std::fs::copy(&new.cert, &cert_path).expect("cert");
    std::fs::write(&key_path, &key[..key.len() / 2]).expect("half a key");
    cluster.node(1).reload_tls();
    wait_for_failed_reload(before).await;
    serves_old_pair("a half-written key").await;

    // The new certificate beside a whole key of another pair.
    let other = next.issue("other", &["127.0.0.1"]);
    let before = errors();
    std::fs::copy(&other.key, &key_path).expect("mismatched key");
    cluster.node(1).reload_tls();
    wait_for_failed_reload(before).await;
    serves_old_pair("a key that does not match the certificate").await;

    // Both files complete: the new pair is served.
    std::fs::write(&key_path, &key).expect("key");
    cluster.node(1).reload_tls();
    eventually(
        "the new certificate served",
        Duration::from_secs(10),
        || {
            let (endpoints, new_ca) = (endpoints.clone(), new_ca.clone());
            async move {
                put_error(&endpoints, Some(new_ca))
                    .await
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    cluster.shutdown().await;
}

/// One host that opens hundreds of connections and never sends a byte cannot keep other
/// clients out: beyond its share of handshakes in progress, its connections are closed at once,
/// and a client from another address is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_from_one_address_does_not_keep_others_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let cluster = TestCluster::start_configured(1, certs.configure()).await;
    cluster.leader().await;
    let target: std::net::SocketAddr = cluster.address(1).parse().expect("address");
    // The flood comes from 127.0.0.2 (loopback, like every address in 127.0.0.0/8).
    let mut flood = Vec::new();
    for _ in 0..300 {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 2], 0)))
            .expect("bind 127.0.0.2");
        flood.push(socket.connect(target).await.expect("connect"));
    }
    // A client from 127.0.0.1 is served at once, while the flood's connections are open.
    let client_files = certs.clients.issue("tenant-a", &["tenant-a"]);
    let tls = ClientTls::from_ca_file(certs.cluster.ca())
        .expect("CA")
        .with_identity_files(&client_files.cert, &client_files.key)
        .expect("identity");
    assert_eq!(
        put_error(&[cluster.address(1)], Some(tls)).await,
        None,
        "a client from another address is served during the flood"
    );
    // The node closed the flood's connections beyond its share; the rest wait for the
    // handshake timeout.
    let mut closed = 0;
    for socket in &mut flood {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(
            Duration::from_millis(20),
            tokio::io::AsyncReadExt::read(socket, &mut byte),
        )
        .await;
        if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
            closed += 1;
        }
    }
    assert!(
        closed >= 300 - 32,
        "only {closed} of the flood's 300 connections were closed at once"
    );
    drop(flood);
    cluster.shutdown().await;
}

/// With mutual TLS on the peer links, a dead leader is still found dead (the probe is a bare TCP
/// connection, below TLS) and replaced long before its 8 s lease on the followers runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_found_dead_over_tls_peer_links_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = Certs::new(dir.path());
    let tls = certs.configure();
    let mut cluster = TestCluster::start_configured(3, move |config| {
        tls(config);
        config.election_timeout_ms = 8_000;
        config.heartbeat_ms = 100;
        config.limits.min_ttl_ms = zaris_core::DurationMs::new(10_000);
    })
    .await;
    let leader = cluster.leader().await;
    let followers = cluster.followers(leader);
    cluster.stop(leader).await;
    crate::failover::new_leader_among(&cluster, &followers, leader, Duration::from_secs(4)).await;
    for id in &followers {
        assert!(cluster.node(*id).leaders_found_dead() >= 1, "node {id}");
    }
    cluster.shutdown().await;
}

/// A bare rustls acceptor on 127.0.0.1 with `files` standing in for a member, to see what its
/// handshakes end with: its address, and the error (or success) of its first handshake. It
/// accepts until dropped, so a client's retries find it and no other test's listener.
struct BareMember {
    address: String,
    first: tokio::sync::oneshot::Receiver<String>,
    task: tokio::task::JoinHandle<()>,
}

impl BareMember {
    async fn start(files: &CertFiles) -> BareMember {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
            .expect("certificate file")
            .collect::<Result<_, _>>()
            .expect("certificate");
        let key = PrivateKeyDer::from_pem_file(&files.key).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let (report, first) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut report = Some(report);
            while let Ok((tcp, _)) = listener.accept().await {
                let seen = match acceptor.accept(tcp).await {
                    Ok(_) => "handshake completed".to_owned(),
                    Err(err) => err.to_string(),
                };
                if let Some(report) = report.take() {
                    let _ = report.send(seen);
                }
            }
        });
        BareMember {
            address,
            first,
            task,
        }
    }

    /// What the first handshake ended with.
    async fn first_handshake(self) -> String {
        let seen = tokio::time::timeout(Duration::from_secs(10), self.first)
            .await
            .expect("a handshake ends")
            .expect("the member reports");
        self.task.abort();
        seen
    }
}

/// A put's error through a client with `tls`, which gives up after a second of retries.
async fn put_failure(address: &str, tls: ClientTls) -> zaris_client::Error {
    let options = ClientOptions::default()
        .with_timeout(Duration::from_secs(1))
        .with_tls(tls);
    let client = Client::lazy([address], options).expect("client");
    client
        .put("tls/probe", "v", PutOptions::default())
        .await
        .expect_err("the put fails")
}

/// A client that refuses a member's certificate tells the member why, in a TLS alert, as
/// rustls does without a cork: the member's log then names the reason ("received fatal alert")
/// instead of an EOF. The alert is written just before the failed handshake drops the client's
/// corked connection, in the same vectored write as a ChangeCipherSpec. The client's error says
/// which certificate to check, and that nothing was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_refuses_the_member_certificate_sends_its_alert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Pki::new(dir.path(), "cluster");
    let stranger = Pki::new(dir.path(), "stranger");
    let member = BareMember::start(&cluster.issue("node-1", &["127.0.0.1"])).await;
    let address = member.address.clone();

    let error = put_failure(
        &address,
        ClientTls::from_ca_file(stranger.ca()).expect("CA"),
    )
    .await;
    let seen = member.first_handshake().await;
    assert!(
        seen.contains("received fatal alert"),
        "the member saw {seen:?}, not the client's alert (client: {error})"
    );
    let rpc = error.rpc().expect("an RPC error");
    assert_eq!(
        rpc.tls_failure(),
        Some(zaris_client::TlsFailure::UntrustedCertificate),
        "{error}"
    );
    assert!(error.is_definite(), "{error}");
    assert!(error.to_string().contains("--cacert"), "{error}");
}

/// A member dialed by a name its certificate does not hold: the client says so, not "check
/// the CA".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_certificate_without_the_dialed_name_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Pki::new(dir.path(), "cluster");
    let member = BareMember::start(&cluster.issue("node-1", &["127.0.0.1"])).await;
    let address = member.address.clone();
    let tls = ClientTls::from_ca_file(cluster.ca())
        .expect("CA")
        .with_domain("node-9.zaris.test");
    let error = put_failure(&address, tls).await;
    let rpc = error.rpc().expect("an RPC error");
    assert_eq!(
        rpc.tls_failure(),
        Some(zaris_client::TlsFailure::WrongName),
        "{error}"
    );
    assert!(error.is_definite(), "{error}");
    assert!(
        error.to_string().contains("does not name the host"),
        "{error}"
    );
    member.task.abort();
}

/// A TLS client against an endpoint that answers in plaintext HTTP/2 (a node without TLS
/// sends its SETTINGS first): the client says the endpoint does not speak TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_against_a_plaintext_endpoint_is_told_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Pki::new(dir.path(), "cluster");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let plaintext = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((mut tcp, _)) = listener.accept().await {
            // An empty HTTP/2 SETTINGS frame, as a plaintext server's connection starts.
            let settings = [0u8, 0, 0, 4, 0, 0, 0, 0, 0];
            let _ = tokio::io::AsyncWriteExt::write_all(&mut tcp, &settings).await;
            open.push(tcp);
        }
    });
    let error = put_failure(&address, ClientTls::from_ca_file(cluster.ca()).expect("CA")).await;
    plaintext.abort();
    let rpc = error.rpc().expect("an RPC error");
    assert_eq!(
        rpc.tls_failure(),
        Some(zaris_client::TlsFailure::NotTls),
        "{error}"
    );
    assert!(error.to_string().contains("does not speak TLS"), "{error}");
}
