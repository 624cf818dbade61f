//! `zaris serve` as a child process: started, waited for (its ready file), killed, and reaped,
//! without blocking the tokio runtime. The demo, the process tests, the bench and the fault
//! harness all start their nodes here, so they agree on the files a node leaves behind.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};
use tokio::time::Instant;
use zaris_client::{Client, ClientOptions};

use crate::wait::POLL_INTERVAL;

/// How long a node may take to write its ready file: opening sled and binding take well under a
/// second; this only bounds a node that hangs.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of the node's log an error about its start quotes.
const LOG_TAIL_LINES: usize = 10;
/// The membership calls of [`grow_cluster`]: `member add` with promotion waits for the learner
/// to catch up.
const MEMBERSHIP_TIMEOUT: Duration = Duration::from_secs(30);

/// How to run one `zaris serve` process. Everything a node writes lives under `root`:
/// `node-{id}/` (data), `node-{id}.ready` (its client and peer address, once it serves) and
/// `node-{id}.log` (its stderr, where it logs).
#[derive(Debug, Clone)]
pub struct Serve {
    exe: PathBuf,
    id: u64,
    root: PathBuf,
    listen: SocketAddr,
    peer_listen: SocketAddr,
    join: bool,
    election_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    min_ttl_ms: Option<u64>,
    append_log: bool,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    via: Option<(OsString, Vec<OsString>)>,
    ready_timeout: Duration,
}

impl Serve {
    /// Node `id` of the `zaris` binary `exe`, serving clients and peers on `127.0.0.1:0` (ports
    /// the OS picks), with the server's default timings.
    pub fn new(exe: impl Into<PathBuf>, id: u64, root: impl Into<PathBuf>) -> Serve {
        Serve {
            exe: exe.into(),
            id,
            root: root.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            peer_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            join: false,
            election_timeout_ms: None,
            heartbeat_ms: None,
            min_ttl_ms: None,
            append_log: false,
            args: Vec::new(),
            envs: Vec::new(),
            via: None,
            ready_timeout: DEFAULT_READY_TIMEOUT,
        }
    }

    /// Serves clients on `addr`: a restarted node takes its old address, which clients and the
    /// membership know it by.
    pub fn listen(mut self, addr: SocketAddr) -> Serve {
        self.listen = addr;
        self
    }

    /// Serves peers on `addr` (a restarted node takes its old one, see [`Serve::listen`]).
    pub fn peer_listen(mut self, addr: SocketAddr) -> Serve {
        self.peer_listen = addr;
        self
    }

    /// Both of a node's old addresses (a restart).
    pub fn listen_as(self, node: &ServeProcess) -> Serve {
        self.listen(node.addr()).peer_listen(node.peer_addr())
    }

    /// `--join`: starts empty and waits to be added with `member add`.
    pub fn join(mut self) -> Serve {
        self.join = true;
        self
    }

    /// `--election-timeout-ms`.
    pub fn election_timeout_ms(mut self, ms: u64) -> Serve {
        self.election_timeout_ms = Some(ms);
        self
    }

    /// `--heartbeat-ms`.
    pub fn heartbeat_ms(mut self, ms: u64) -> Serve {
        self.heartbeat_ms = Some(ms);
        self
    }

    /// `--min-ttl-ms`.
    pub fn min_ttl_ms(mut self, ms: u64) -> Serve {
        self.min_ttl_ms = Some(ms);
        self
    }

    /// Appends to the log instead of truncating it, so the log of a restarted node tells the
    /// whole story (the fault harness reads it afterwards).
    pub fn append_log(mut self) -> Serve {
        self.append_log = true;
        self
    }

    /// One more `zaris serve` argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Serve {
        self.args.push(arg.into());
        self
    }

    /// More `zaris serve` arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<OsString>>) -> Serve {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable for the process.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Serve {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Runs `program ARGS... EXE serve ...` instead of `EXE serve ...`: a node under `prlimit`,
    /// say. The wrapper must `exec` the node, so that signals and the exit status are its own.
    pub fn via(
        mut self,
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Serve {
        self.via = Some((program.into(), args.into_iter().map(Into::into).collect()));
        self
    }

    /// How long [`Serve::start`] waits for the ready file.
    pub fn ready_timeout(mut self, timeout: Duration) -> Serve {
        self.ready_timeout = timeout;
        self
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join(format!("node-{}", self.id))
    }

    pub fn ready_file(&self) -> PathBuf {
        self.root.join(format!("node-{}.ready", self.id))
    }

    pub fn log_path(&self) -> PathBuf {
        self.root.join(format!("node-{}.log", self.id))
    }

    fn command(&self, log: std::fs::File) -> Command {
        let mut command = match &self.via {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(&self.exe);
                command
            }
            None => Command::new(&self.exe),
        };
        command
            .args(["serve", "--node-id", &self.id.to_string()])
            .args(["--listen", &self.listen.to_string()])
            .args(["--peer-listen", &self.peer_listen.to_string()])
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--ready-file")
            .arg(self.ready_file());
        let timings = [
            ("--election-timeout-ms", self.election_timeout_ms),
            ("--heartbeat-ms", self.heartbeat_ms),
            ("--min-ttl-ms", self.min_ttl_ms),
        ];
        for (flag, value) in timings {
            if let Some(value) = value {
                command.args([flag, &value.to_string()]);
            }
        }
        if self.join {
            command.arg("--join");
        }
        command
            .args(&self.args)
            // A config file from the caller's environment would change what these flags mean.
            .env_remove("ZARIS_CONFIG")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Nothing outlives its handle, also when a test panics.
            .kill_on_drop(true);
        command
    }

    /// Starts the process and waits until it serves (its ready file holds its address). Fails
    /// if it exits first, or does not get there within the ready timeout; the error quotes the
    /// end of its log.
    pub async fn start(self) -> Result<ServeProcess> {
        let id = self.id;
        let ready = self.ready_file();
        let log = self.log_path();
        // A ready file left by an earlier run of this node would name a dead process.
        match std::fs::remove_file(&ready) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("removing {}", ready.display())),
        }
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.append_log)
            .truncate(!self.append_log)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let mut child = self
            .command(log_file)
            .spawn()
            .with_context(|| format!("starting {} serve", self.exe.display()))?;
        let deadline = Instant::now() + self.ready_timeout;
        loop {
            // The node writes the file and renames it into place: a reader never sees half.
            if let Ok(text) = std::fs::read_to_string(&ready)
                && let Some((addr, peer_addr)) = parse_ready(&text)
            {
                return Ok(ServeProcess {
                    id,
                    addr,
                    peer_addr,
                    endpoint: addr.to_string(),
                    data_dir: self.data_dir(),
                    log,
                    child,
                    exit: None,
                });
            }
            if let Some(status) = child.try_wait().context("checking on zaris serve")? {
                bail!(
                    "node {id} exited during start ({status}); the end of {}:\n{}",
                    log.display(),
                    log_tail(&log, LOG_TAIL_LINES)
                );
            }
            if Instant::now() >= deadline {
                let _ = child.start_kill();
                let _ = child.wait().await;
                bail!(
                    "node {id} did not start within {:?}; the end of {}:\n{}",
                    self.ready_timeout,
                    log.display(),
                    log_tail(&log, LOG_TAIL_LINES)
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// A ready file's client and peer address (a line each).
fn parse_ready(text: &str) -> Option<(SocketAddr, SocketAddr)> {
    let mut lines = text.lines().map(str::trim);
    let addr = lines.next()?.parse().ok()?;
    let peer_addr = lines.next()?.parse().ok()?;
    Some((addr, peer_addr))
}

/// A running `zaris serve` process, SIGKILLed when dropped.
#[derive(Debug)]
pub struct ServeProcess {
    id: u64,
    addr: SocketAddr,
    peer_addr: SocketAddr,
    endpoint: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Child,
    /// Set once the process has been reaped (by `kill`, `wait` or `try_wait`).
    exit: Option<ExitStatus>,
}

impl ServeProcess {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The address it serves clients on (from its ready file).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address it serves peers on (from its ready file).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// [`ServeProcess::addr`] as a client endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of its log (empty if it cannot be read).
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// None once it has been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// False once it has been reaped: a process that died on its own still counts as running
    /// until [`ServeProcess::try_wait`], [`ServeProcess::wait`] or [`ServeProcess::kill`] sees it.
    pub fn is_running(&self) -> bool {
        self.exit.is_none()
    }

    /// SIGTERM, a planned stop (a leader hands its leadership over first); returns at once:
    /// [`ServeProcess::wait`] for the exit. An error if it is not running.
    pub fn terminate(&self) -> std::io::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| std::io::Error::other("the process is not running"))?;
        let status = std::process::Command::new("kill")
            .args(["-s", "TERM", &pid.to_string()])
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "kill -s TERM {pid}: {status}"
            )));
        }
        Ok(())
    }

    /// SIGKILL, and waits for the process to be gone: no shutdown path runs, exactly like a
    /// crash. Nothing happens if it already exited.
    pub async fn kill(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.start_kill();
            if let Ok(status) = self.child.wait().await {
                self.exit = Some(status);
            }
        }
    }

    /// Waits for the process to exit on its own (bound it with `tokio::time::timeout`).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.exit {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.exit = Some(status);
        Ok(status)
    }

    /// The exit status if it has exited, without waiting.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait()?;
        }
        Ok(self.exit)
    }
}

/// The last `lines` lines of the file at `path` (empty if it cannot be read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A cluster grown the way an operator would: node 1 bootstraps alone, nodes `2..=size` start
/// with `--join` and are added (and promoted) by `member add`. `serve` describes node `id`; the
/// `--join` is added here.
pub async fn grow_cluster(size: u64, serve: impl Fn(u64) -> Serve) -> Result<Vec<ServeProcess>> {
    grow_cluster_with(size, ClientOptions::default(), serve).await
}

/// [`grow_cluster`], with the membership calls made by a client with `options` (TLS settings,
/// say; its timeout is raised for the catch-up `member add` waits for).
pub async fn grow_cluster_with(
    size: u64,
    options: ClientOptions,
    serve: impl Fn(u64) -> Serve,
) -> Result<Vec<ServeProcess>> {
    let first = serve(1).start().await?;
    let options = options.with_timeout(MEMBERSHIP_TIMEOUT);
    let admin = Client::connect_with([first.endpoint().to_owned()], options)
        .await
        .context("connecting to node 1")?;
    let mut nodes = vec![first];
    for id in 2..=size {
        let node = serve(id).join().start().await?;
        admin
            .member_add(
                id,
                node.endpoint().to_owned(),
                node.peer_addr().to_string(),
                true,
            )
            .await
            .with_context(|| format!("adding node {id}"))?;
        nodes.push(node);
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands in for `zaris serve`: logs its arguments, then acts as `FAKE_MODE` says.
    const FAKE_SERVE: &str = r#"
echo "args: $*" >&2
ready=""
while [ $# -gt 0 ]; do
    if [ "$1" = "--ready-file" ]; then ready="$2"; fi
    shift
done
case "$FAKE_MODE" in
    fail) echo "boom: storage on fire" >&2; exit 3 ;;
    hang) exec sleep 30 ;;
esac
printf '127.0.0.1:4242\n127.0.0.1:4343\n' > "$ready.tmp" && mv "$ready.tmp" "$ready"
if [ "$FAKE_MODE" = "exit-after-ready" ]; then exit 5; fi
exec sleep 30
"#;

    /// A [`Serve`] of the fake, run by `sh` (a script written and executed at once can fail
    /// with ETXTBSY while other tests fork).
    fn fake(root: &Path, id: u64, mode: &str) -> Serve {
        let script = root.join("fake-serve.sh");
        std::fs::write(&script, FAKE_SERVE).expect("write the fake");
        Serve::new(script, id, root)
            .via("sh", std::iter::empty::<OsString>())
            .env("FAKE_MODE", mode)
    }

    #[tokio::test]
    async fn start_waits_for_the_ready_address_and_kill_reaps_the_process() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut node = fake(root.path(), 7, "serve")
            .join()
            .heartbeat_ms(50)
            .arg("--extra")
            .start()
            .await
            .expect("starts");
        assert_eq!(node.addr(), SocketAddr::from(([127, 0, 0, 1], 4242)));
        assert_eq!(node.peer_addr(), SocketAddr::from(([127, 0, 0, 1], 4343)));
        assert_eq!(node.endpoint(), "127.0.0.1:4242");
        assert!(node.is_running());
        assert!(node.pid().is_some());
        let args = node.log_tail(1);
        let expected = format!(
            "args: serve --node-id 7 --listen 127.0.0.1:0 --peer-listen 127.0.0.1:0 --data-dir {} \
             --ready-file {} \
             --heartbeat-ms 50 --join --extra",
            root.path().join("node-7").display(),
            root.path().join("node-7.ready").display()
        );
        assert_eq!(args, expected);

        node.kill().await;
        assert!(!node.is_running());
        assert!(node.pid().is_none());
        let status = node.try_wait().expect("try_wait").expect("reaped");
        assert_eq!(status.code(), None, "killed by a signal: {status}");
    }

    #[tokio::test]
    async fn a_node_that_exits_during_start_fails_with_its_log() {
        let root = tempfile::tempdir().expect("tempdir");
        let err = fake(root.path(), 1, "fail")
            .start()
            .await
            .expect_err("exits");
        let message = format!("{err:#}");
        assert!(message.contains("node 1 exited during start"), "{message}");
        assert!(message.contains("boom: storage on fire"), "{message}");
    }

    #[tokio::test]
    async fn a_node_that_never_gets_ready_times_out() {
        let root = tempfile::tempdir().expect("tempdir");
        let err = fake(root.path(), 2, "hang")
            .ready_timeout(Duration::from_millis(300))
            .start()
            .await
            .expect_err("hangs");
        let message = format!("{err:#}");
        assert!(message.contains("node 2 did not start within"), "{message}");
        assert!(message.contains("args: serve"), "{message}");
    }

    #[tokio::test]
    async fn wait_returns_the_exit_status() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut node = fake(root.path(), 3, "exit-after-ready")
            .start()
            .await
            .expect("starts");
        let status = tokio::time::timeout(Duration::from_secs(10), node.wait())
            .await
            .expect("exits")
            .expect("wait");
        assert_eq!(status.code(), Some(5));
        assert!(!node.is_running());
    }

    #[tokio::test]
    async fn the_log_is_truncated_unless_appending_and_a_stale_ready_file_is_ignored() {
        let root = tempfile::tempdir().expect("tempdir");
        let serve = fake(root.path(), 4, "serve");
        // A leftover from a dead run must not count as ready.
        std::fs::write(serve.ready_file(), "127.0.0.1:1\n127.0.0.1:2\n").expect("stale ready file");
        let mut first = serve.clone().start().await.expect("starts");
        assert_eq!(first.endpoint(), "127.0.0.1:4242");
        first.kill().await;
        let mut second = serve.clone().append_log().start().await.expect("again");
        second.kill().await;
        let runs = |text: String| text.lines().filter(|l| l.starts_with("args:")).count();
        assert_eq!(runs(second.log_tail(100)), 2);
        let mut third = serve.start().await.expect("and again");
        third.kill().await;
        assert_eq!(runs(third.log_tail(100)), 1);
    }
}
