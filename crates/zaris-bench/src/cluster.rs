//! Three `zaris serve` processes, grown by `member add`; killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use zaris_client::{Client, ClientOptions};

pub struct Cluster {
    children: Vec<Child>,
    pub addrs: Vec<String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn start(zaris: &Path, root: &Path, id: u64, join: bool) -> anyhow::Result<(Child, String)> {
    let ready = root.join(format!("{id}.ready"));
    let mut command = Command::new(zaris);
    command
        .args([
            "serve",
            "--node-id",
            &id.to_string(),
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(root.join(format!("node-{id}")))
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if join {
        command.arg("--join");
    }
    let child = command
        .spawn()
        .with_context(|| format!("cannot run {}", zaris.display()))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(addr) = std::fs::read_to_string(&ready)
            && !addr.is_empty()
        {
            return Ok((child, addr.trim().to_string()));
        }
        if Instant::now() > deadline {
            bail!("node {id} did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Cluster {
    pub async fn start(zaris: &Path, root: &Path, nodes: u64) -> anyhow::Result<Cluster> {
        let mut cluster = Cluster {
            children: Vec::new(),
            addrs: Vec::new(),
        };
        let (child, addr) = start(zaris, root, 1, false)?;
        cluster.children.push(child);
        cluster.addrs.push(addr);
        let admin = cluster.client().await?;
        for id in 2..=nodes {
            let (child, addr) = start(zaris, root, id, true)?;
            cluster.children.push(child);
            admin.member_add(id, addr.clone(), true).await?;
            cluster.addrs.push(addr);
        }
        println!(
            "cluster: {nodes} zaris processes on {}",
            cluster.addrs.join(", ")
        );
        Ok(cluster)
    }

    pub async fn client(&self) -> anyhow::Result<Client> {
        let options = ClientOptions::default().with_timeout(Duration::from_secs(30));
        Ok(Client::connect_with(self.addrs.clone(), options).await?)
    }
}
