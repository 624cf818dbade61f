//! The top-level compose files themselves, as the README's deploy section runs them: `up -d` of
//! `docker-compose.yml` (3 nodes) and then of it with `docker-compose.5.yml` (5 nodes), with the
//! image under test, each reached from the host through its published ports and taken down with
//! `down -v` (also when the check fails). Uses the `docker compose` plugin if Docker has one,
//! else `docker-compose`.
//!
//! The files publish fixed ports (7001-7005, 9001-9005); the run publishes them on 127.0.0.2, so
//! a node on 127.0.0.1:7001 (`zaris serve`'s default) does not get in the way.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tokio::process::Command;
use zaris_client::{Client, ClientOptions, PutOptions};
use zaris_testkit::try_eventually;

use super::{Run, SETTLE};

const PUBLISH_IP: &str = "127.0.0.2";

/// One compose project: `down -v` with the same files when dropped.
struct Project {
    name: String,
    files: Vec<PathBuf>,
    tool: Vec<String>,
    image: String,
}

impl Project {
    fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.tool[0]);
        command.args(&self.tool[1..]).args(["-p", &self.name]);
        for file in &self.files {
            command.arg("-f").arg(file);
        }
        command
            .env("ZARIS_IMAGE", &self.image)
            .env("ZARIS_PUBLISH_IP", PUBLISH_IP);
        command
    }

    async fn run(&self, args: &[&str]) -> Result<()> {
        let output = Command::from(self.command())
            .args(args)
            .output()
            .await
            .context("cannot run compose")?;
        if !output.status.success() {
            bail!(
                "{} {} failed: {}",
                self.tool.join(" "),
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let removed = self
            .command()
            .args(["down", "--volumes", "--timeout", "5"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if !removed.is_ok_and(|s| s.success()) {
            eprintln!("warning: could not take compose project {} down", self.name);
        }
    }
}

/// `docker compose` if that plugin exists, else `docker-compose`.
async fn compose_tool() -> Result<Vec<String>> {
    let plugin = Command::new("docker")
        .args(["compose", "version"])
        .output()
        .await;
    if plugin.is_ok_and(|o| o.status.success()) {
        return Ok(vec!["docker".into(), "compose".into()]);
    }
    let standalone = Command::new("docker-compose").arg("version").output().await;
    if standalone.is_ok_and(|o| o.status.success()) {
        return Ok(vec!["docker-compose".into()]);
    }
    bail!("neither `docker compose` nor `docker-compose` is installed")
}

fn repository_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
}

/// Brings the 3-node and then the 5-node compose cluster up, checks each from the host, and
/// takes it down.
pub async fn run(image: &str) -> Result<()> {
    let tool = compose_tool().await?;
    for (size, files) in [
        (3u64, vec![repository_file("docker-compose.yml")]),
        (
            5,
            vec![
                repository_file("docker-compose.yml"),
                repository_file("docker-compose.5.yml"),
            ],
        ),
    ] {
        let project = Project {
            name: format!("zaris-test-{}", Run::new().id),
            files,
            tool: tool.clone(),
            image: image.to_owned(),
        };
        project.run(&["up", "--detach"]).await?;
        check(size)
            .await
            .with_context(|| format!("the {size}-node compose cluster ({})", tool.join(" ")))?;
        drop(project);
    }
    println!(
        "  {}: 3 and 5 nodes up, reached from the host, taken down",
        tool.join(" ")
    );
    Ok(())
}

async fn check(size: u64) -> Result<()> {
    let endpoints: Vec<String> = (1..=size)
        .map(|id| format!("{PUBLISH_IP}:{}", 7000 + id))
        .collect();
    let client = Client::lazy(
        endpoints,
        ClientOptions::default().with_timeout(Duration::from_secs(5)),
    )?;
    let members = try_eventually("the compose cluster to serve", SETTLE, || async {
        let members = client.member_list().await.ok()?;
        (members.len() as u64 == size).then_some(members)
    })
    .await?;
    for (member, id) in members.iter().zip(1..) {
        ensure!(
            member.id == id && member.address == format!("zaris-{id}:7001"),
            "member {member:?}, expected {id} at zaris-{id}:7001"
        );
    }
    let written = client
        .put("compose/check", "ok", PutOptions::default())
        .await?;
    ensure!(written.revision.get() > 1, "{written:?}");
    // Every node's HTTP port: /ready answers 200 once it knows the leader.
    for id in 1..=size {
        let address = format!("{PUBLISH_IP}:{}", 9000 + id);
        try_eventually(&format!("node {id}'s /ready"), SETTLE, || async {
            ready(&address).await.then_some(())
        })
        .await?;
    }
    Ok(())
}

/// GET /ready over a plain TCP connection: true on a 200 answer.
async fn ready(address: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(Ok(mut stream)) = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect(address),
    )
    .await
    else {
        return false;
    };
    let request = format!("GET /ready HTTP/1.0\r\nHost: {address}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut answer)).await;
    read.is_ok() && (answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200"))
}
