//! What TLS costs: the grant and put workloads against a plaintext cluster and against one with
//! mutual TLS on every link (clients and peers), started one after the other in the same run,
//! on the same machine. The figure is the ratio.

use std::path::Path;
use std::time::Duration;

use zaris_client::{Client, ClientOptions, ClientTls};
use zaris_testkit::pki::Pki;
use zaris_testkit::{Serve, grow_cluster_with};

use crate::{Args, CLIENT_TIMEOUT, READY_TIMEOUT, workloads};

/// Grants and puts per second on one cluster.
struct Rates {
    grants: f64,
    puts: f64,
}

pub async fn overhead(args: &Args) -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    println!("-- plaintext");
    let plain = measure(args, &root.path().join("plain"), None).await?;
    let pki_dir = root.path().join("pki");
    let pki = Pki::new(&pki_dir, "bench");
    println!("-- mutual TLS for clients and peers");
    let tls = measure(args, &root.path().join("tls"), Some(&pki)).await?;
    println!(
        "TLS / plaintext: grants {:.2}, puts {:.2} ({} nodes, {} clients, {} s each)",
        tls.grants / plain.grants,
        tls.puts / plain.puts,
        args.nodes,
        args.clients,
        args.seconds
    );
    Ok(())
}

async fn measure(args: &Args, root: &Path, pki: Option<&Pki>) -> anyhow::Result<Rates> {
    std::fs::create_dir_all(root)?;
    let mut options = ClientOptions::default().with_timeout(CLIENT_TIMEOUT);
    let mut tls_args: Vec<String> = Vec::new();
    if let Some(pki) = pki {
        // One certificate for every node (they all listen on 127.0.0.1), for both listeners.
        let node = pki.issue("node", &["127.0.0.1", "localhost"]);
        let client = pki.issue("bench-client", &["bench-client"]);
        let ca = pki.ca().display().to_string();
        let (cert, key) = (
            node.cert.display().to_string(),
            node.key.display().to_string(),
        );
        tls_args = [
            ("--tls-cert", &cert),
            ("--tls-key", &key),
            ("--client-cacert", &ca),
            ("--peer-tls-cert", &cert),
            ("--peer-tls-key", &key),
            ("--peer-cacert", &ca),
        ]
        .iter()
        .flat_map(|(flag, value)| [(*flag).to_owned(), (*value).clone()])
        .collect();
        options = options.with_tls(
            ClientTls::from_ca_file(pki.ca())?.with_identity_files(client.cert, client.key)?,
        );
    }
    let nodes = grow_cluster_with(args.nodes, options.clone(), |id| {
        Serve::new(&args.zaris, id, root)
            .ready_timeout(READY_TIMEOUT)
            .args(tls_args.iter())
    })
    .await?;
    let addrs: Vec<String> = nodes.iter().map(|n| n.endpoint().to_owned()).collect();
    let client = Client::connect_with(addrs, options).await?;
    let duration = Duration::from_secs(args.seconds);
    let rates = Rates {
        grants: workloads::grants(&client, args.clients, duration).await?,
        puts: workloads::puts_with_lease(&client, args.clients, duration).await?,
    };
    for mut node in nodes {
        node.kill().await;
    }
    Ok(rates)
}
