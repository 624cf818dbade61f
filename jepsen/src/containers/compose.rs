//! The top-level compose files themselves, as the README's deploy section runs them: `up -d` of
//! `docker-compose.yml` (3 nodes) and then of it with `docker-compose.5.yml` (5 nodes), with the
//! image under test, each reached from the host through its published ports and taken down with
//! `down -v` (also when the check fails). Uses the `docker compose` plugin if Docker has one,
//! else `docker-compose`.
//!
//! The files publish fixed ports (7001-7005, 9001-9005); the run publishes them on 127.0.0.2, so
//! a node on 127.0.0.1:7001 (`zaris serve`'s default) does not get in the way.
//!
//! Then the TLS variant (`docker-compose.tls.yml`), as its header says to run it: certificates
//! made by `zaris cert init` inside the image under test (as the image's user, so the nodes can
//! read their keys), three nodes speaking mutual TLS to each other by host name, and a client on
//! the host with the client certificate; a client without one is refused.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tokio::process::Command;
use zaris_client::{Client, ClientOptions, ClientTls, PutOptions};
use zaris_testkit::try_eventually;

use super::{Run, SETTLE};

const PUBLISH_IP: &str = "127.0.0.2";

/// One compose project: `down -v` with the same files when dropped.
struct Project {
    name: String,
    files: Vec<PathBuf>,
    tool: Vec<String>,
    image: String,
    /// `ZARIS_CERTS` for the TLS file.
    certs: Option<PathBuf>,
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
        if let Some(certs) = &self.certs {
            command.env("ZARIS_CERTS", certs);
        }
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
            certs: None,
        };
        project.run(&["up", "--detach"]).await?;
        check(size, ClientOptions::default())
            .await
            .with_context(|| format!("the {size}-node compose cluster ({})", tool.join(" ")))?;
        drop(project);
    }
    tls(image, &tool)
        .await
        .with_context(|| format!("the TLS compose cluster ({})", tool.join(" ")))?;
    println!(
        "  {}: 3 and 5 nodes up, and 3 with TLS on every link, reached from the host, taken down",
        tool.join(" ")
    );
    Ok(())
}

/// Certificates in a directory of their own, made (and removed) by the image's user.
struct Certs {
    dir: PathBuf,
    image: String,
    /// Labels the throwaway containers; a leftover one is removed when this drops.
    run: Run,
}

impl Certs {
    async fn make(image: &str) -> Result<Certs> {
        let run = Run::new();
        let dir = std::env::temp_dir().join(format!("zaris-test-certs-{}", run.id));
        std::fs::create_dir(&dir).context("cannot create the certificates' directory")?;
        let certs = Certs {
            dir,
            image: image.to_owned(),
            run,
        };
        // Writable by the image's user, who makes the files inside it.
        std::fs::set_permissions(
            &certs.dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )?;
        certs
            .in_image(&[
                "cert",
                "init",
                "/certs/tls",
                "--node",
                "zaris-1",
                "--node",
                "zaris-2",
                "--node",
                "zaris-3",
                "--host",
                PUBLISH_IP,
                "--client",
                "root",
                "--days",
                "1",
            ])
            .await?;
        Ok(certs)
    }

    fn files(&self) -> PathBuf {
        self.dir.join("tls")
    }

    /// `zaris ARGS` in a throwaway container of the image, as its user, with the directory at
    /// /certs.
    fn command(&self, entrypoint: &str, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new("docker");
        command
            .args([
                "run",
                "--rm",
                "--label",
                &self.run.label(),
                "--network",
                "none",
            ])
            .arg("--volume")
            .arg(format!("{}:/certs", self.dir.display()))
            .args(["--entrypoint", entrypoint, &self.image])
            .args(args);
        command
    }

    async fn in_image(&self, args: &[&str]) -> Result<()> {
        let output = Command::from(self.command("/usr/local/bin/zaris", args))
            .output()
            .await
            .context("cannot run docker")?;
        ensure!(
            output.status.success(),
            "zaris {} in the image failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(())
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        // The files belong to the image's user: it removes them.
        let _ = self
            .command("/bin/rm", &["-rf", "/certs/tls"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if std::fs::remove_dir_all(&self.dir).is_err() {
            eprintln!("warning: could not remove {}", self.dir.display());
        }
    }
}

/// The 3-node cluster with `docker-compose.tls.yml`.
async fn tls(image: &str, tool: &[String]) -> Result<()> {
    let certs = Certs::make(image).await?;
    let files = certs.files();
    let project = Project {
        name: format!("zaris-test-{}", Run::new().id),
        files: vec![
            repository_file("docker-compose.yml"),
            repository_file("docker-compose.tls.yml"),
        ],
        tool: tool.to_vec(),
        image: image.to_owned(),
        certs: Some(files.clone()),
    };
    project.run(&["up", "--detach"]).await?;
    let with_certificate = ClientTls::from_ca_file(files.join("ca.pem"))?.with_identity_files(
        files.join("client-root.pem"),
        files.join("client-root-key.pem"),
    )?;
    check(3, ClientOptions::default().with_tls(with_certificate)).await?;
    // Without a client certificate: refused, and it says why.
    let stranger = Client::lazy(
        (1..=3).map(|id| format!("{PUBLISH_IP}:{}", 7000 + id)),
        ClientOptions::default()
            .with_timeout(Duration::from_secs(5))
            .with_tls(ClientTls::from_ca_file(files.join("ca.pem"))?),
    )?;
    let refused = stranger
        .put("compose/stranger", "x", PutOptions::default())
        .await
        .err()
        .context("a client without a certificate was let in")?;
    ensure!(
        refused
            .to_string()
            .contains("requires a client certificate"),
        "unexpected refusal: {refused}"
    );
    drop(project);
    drop(certs);
    Ok(())
}

async fn check(size: u64, options: ClientOptions) -> Result<()> {
    let endpoints: Vec<String> = (1..=size)
        .map(|id| format!("{PUBLISH_IP}:{}", 7000 + id))
        .collect();
    let client = Client::lazy(endpoints, options.with_timeout(Duration::from_secs(5)))?;
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
