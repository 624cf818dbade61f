//! `--workloads floor1`: the least a replicated, durable write costs on this machine, whatever
//! the Raft library or RPC stack. Three processes of this binary (`--floor-node`, hidden) form a
//! bare replication pipeline over loopback TCP, with no consensus logic, no encoding and no
//! async runtime: one blocking thread each, the fewest thread wake-ups a write can take.
//!
//! A client sends a 256-byte entry to the leader; the leader forwards it to both followers,
//! writes it to its own log and `fdatasync`s it (so the three fsyncs overlap), then waits for the
//! first follower's acknowledgement (the quorum: itself and one follower) and answers. Each
//! follower writes and `fdatasync`s the entry, then acknowledges with one byte. Logs are
//! prefilled rings, so an fsync never has to write the inode of a growing file (the cheapest
//! case: Zaris's and etcd's logs both grow).
//!
//! Set beside `put × 1`, it tells how much of a round is the machine's (loopback, scheduler,
//! disk) and how much the software's; it is not a system anyone could run (no leader election,
//! no recovery, no reads).
//!
//! `--workloads floorapi1` puts the same pipeline behind the API stack a Zaris node must serve:
//! the leader answers a tonic unary call (`proto/floor`, HTTP/2 over loopback, from a tonic
//! client as the bench's etcd client is) and replicates the entry inside the call's handler, on a
//! single-threaded async runtime, so no thread hand-off is added. What a replicated write
//! through gRPC costs at the least on this machine, before any consensus, log format or state.
//! `floorgrant16`, `floorka64` and `floorlock4` drive that leader with the comparison's own
//! workloads (`compare::floor_target`), its writes group-committed as concurrent requests share a Raft
//! entry in Zaris (`api`).
//!
//! Between the leader and its followers an entry is framed by its length (`u32`, little-endian);
//! each log holds the framed entries one after the other.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use rustix::event::{PollFd, PollFlags, poll};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

use crate::load::Sample;

mod api;

pub use api::{channel, write_api_until};

/// A client's entry: about a put's log entry.
pub const ENTRY_BYTES: usize = 256;
/// The largest framed entry a follower accepts: a group of entries from many clients.
const MAX_FRAME_BYTES: usize = 1 << 20;
/// An entry's frame: its length.
const FRAME_HEADER_BYTES: usize = 4;
/// Each log is a ring of this many bytes, written once before the run.
const LOG_BYTES: u64 = 8 << 20;
/// How long a node may take to print its port (the prefill included).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A node's role, as `--floor-node` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// A leader that its clients reach through gRPC (`floorapi1` and the group-committed floors).
    ApiLeader,
    Follower,
}

impl Role {
    pub fn parse(role: &str) -> anyhow::Result<Self> {
        match role {
            "leader" => Ok(Role::Leader),
            "leader-api" => Ok(Role::ApiLeader),
            "follower" => Ok(Role::Follower),
            other => anyhow::bail!("unknown floor role {other:?} (leader, leader-api or follower)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::ApiLeader => "leader-api",
            Role::Follower => "follower",
        }
    }
}

/// A prefilled log file written as a ring of entries.
pub struct RingLog {
    file: File,
    next_offset: u64,
}

impl RingLog {
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let zeros = vec![0u8; 1 << 20];
        let mut written = 0;
        while written < LOG_BYTES {
            file.write_all_at(&zeros, written)?;
            written += zeros.len() as u64;
        }
        file.sync_all()?;
        Ok(RingLog {
            file,
            next_offset: 0,
        })
    }

    /// Writes `entry` after the last one (wrapping at the end) and makes it durable.
    pub fn append(&mut self, entry: &[u8]) -> io::Result<()> {
        if self.next_offset + entry.len() as u64 > LOG_BYTES {
            self.next_offset = 0;
        }
        self.file.write_all_at(entry, self.next_offset)?;
        self.next_offset += entry.len() as u64;
        self.file.sync_data()
    }
}

/// The `--floor-node` process: binds 127.0.0.1:0, prints `port <n>`, serves one connection and
/// exits when it closes.
pub fn serve_node(
    role: &str,
    dir: &Path,
    followers: &[String],
    api_workers: usize,
) -> anyhow::Result<()> {
    let role = Role::parse(role)?;
    std::fs::create_dir_all(dir)?;
    let log = RingLog::create(&dir.join(format!("{}.log", role.name())))?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut stdout = io::stdout();
    writeln!(stdout, "port {}", listener.local_addr()?.port())?;
    stdout.flush()?;
    match role {
        Role::Follower => follow(&listener, log),
        Role::Leader | Role::ApiLeader => {
            let followers = followers
                .iter()
                .map(|addr| connect(addr.parse().context("a follower's address")?))
                .collect::<anyhow::Result<Vec<_>>>()?;
            anyhow::ensure!(!followers.is_empty(), "a floor leader needs followers");
            let pipeline = Pipeline::new(followers, log);
            if role == Role::ApiLeader {
                api::serve(listener, pipeline, api_workers)
            } else {
                lead(&listener, pipeline)
            }
        }
    }
}

fn connect(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
    let (stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Reads one entry; `None` at a clean end of the stream.
fn read_entry(stream: &mut TcpStream, entry: &mut [u8; ENTRY_BYTES]) -> io::Result<Option<()>> {
    match stream.read_exact(entry) {
        Ok(()) => Ok(Some(())),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads one framed entry, frame and all, into `frame`; `None` at a clean end of the stream.
fn read_frame(stream: &mut impl Read, frame: &mut Vec<u8>) -> io::Result<Option<()>> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    match stream.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(header) as usize;
    if len == 0 || len > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a framed entry of {len} bytes (1 to {MAX_FRAME_BYTES})"),
        ));
    }
    frame.clear();
    frame.extend_from_slice(&header);
    frame.resize(FRAME_HEADER_BYTES + len, 0);
    stream.read_exact(&mut frame[FRAME_HEADER_BYTES..])?;
    Ok(Some(()))
}

/// `entry` with its frame, as the leader sends it and each log holds it.
fn framed(entry: &[u8]) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(
        !entry.is_empty() && entry.len() <= MAX_FRAME_BYTES,
        "an entry of {} bytes (1 to {MAX_FRAME_BYTES})",
        entry.len()
    );
    let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + entry.len());
    push_frame(&mut frame, entry);
    Ok(frame)
}

/// Appends `entry` to `out` with its frame (its length first). The caller keeps it within
/// [`MAX_FRAME_BYTES`].
fn push_frame(out: &mut Vec<u8>, entry: &[u8]) {
    out.extend_from_slice(&(entry.len() as u32).to_le_bytes());
    out.extend_from_slice(entry);
}

/// A follower: append, fsync, acknowledge, for each entry of its one connection.
pub fn follow(listener: &TcpListener, mut log: RingLog) -> anyhow::Result<()> {
    let mut leader = accept(listener)?;
    // Buffered: a frame's header and body come in one read.
    let mut entries = BufReader::new(leader.try_clone()?);
    let mut frame = Vec::new();
    loop {
        match read_frame(&mut entries, &mut frame) {
            Ok(Some(())) => {}
            Ok(None) => return Ok(()),
            Err(e) if leader_gone(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        log.append(&frame)?;
        match leader.write_all(&[1]) {
            Ok(()) => {}
            Err(e) if leader_gone(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A gRPC leader ends by being killed, with acknowledgements it never read: the kernel resets
/// the connection rather than closing it, which a follower sees in its next read or in the
/// acknowledgement it was writing.
fn leader_gone(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

/// The leader's side of the pipeline: its followers, its log, and what each has acknowledged.
pub struct Pipeline {
    followers: Vec<TcpStream>,
    log: RingLog,
    /// Acknowledgements received from each follower: entry n is committed once any has n.
    acked: Vec<u64>,
    appended: u64,
}

impl Pipeline {
    pub fn new(followers: Vec<TcpStream>, log: RingLog) -> Self {
        Pipeline {
            acked: vec![0; followers.len()],
            followers,
            log,
            appended: 0,
        }
    }

    /// Forwards `entry` to every follower, appends and fsyncs it, and returns once one follower
    /// has acknowledged it too (the quorum).
    pub fn replicate(&mut self, entry: &[u8]) -> anyhow::Result<()> {
        let frame = framed(entry)?;
        for follower in &mut self.followers {
            follower.write_all(&frame)?;
        }
        self.log.append(&frame)?;
        self.appended += 1;
        while self.acked.iter().copied().max().unwrap_or(0) < self.appended {
            read_acks(&mut self.followers, &mut self.acked)?;
        }
        Ok(())
    }

    /// A clean end: each follower sees the end of its stream after the last entry, and its last
    /// acknowledgements are read, not reset by closing over them.
    pub fn finish(mut self) -> anyhow::Result<()> {
        for follower in &mut self.followers {
            follower.shutdown(Shutdown::Write)?;
            io::copy(follower, &mut io::sink())?;
        }
        Ok(())
    }
}

/// The leader: replicates each entry of its one client, then answers.
pub fn lead(listener: &TcpListener, mut pipeline: Pipeline) -> anyhow::Result<()> {
    let mut client = accept(listener)?;
    let mut entry = [0u8; ENTRY_BYTES];
    while read_entry(&mut client, &mut entry)?.is_some() {
        pipeline.replicate(&entry)?;
        client.write_all(&[1])?;
    }
    pipeline.finish()
}

/// Waits until a follower's acknowledgements can be read, and counts every one that can.
fn read_acks(followers: &mut [TcpStream], acked: &mut [u64]) -> anyhow::Result<()> {
    let mut fds: Vec<PollFd<'_>> = followers
        .iter()
        .map(|f| PollFd::new(f, PollFlags::IN))
        .collect();
    poll(&mut fds, None)?;
    let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
    let mut buffer = [0u8; 64];
    for ((follower, count), ready) in followers.iter_mut().zip(acked.iter_mut()).zip(ready) {
        if ready {
            let read = follower.read(&mut buffer)?;
            anyhow::ensure!(read > 0, "a follower closed its connection");
            *count += read as u64;
        }
    }
    Ok(())
}

/// The client's closed loop: one entry at a time (its first 8 bytes its number) until `until`.
pub fn write_until(leader: SocketAddr, until: Instant) -> anyhow::Result<Sample> {
    let mut stream = connect(leader)?;
    let mut sample = Sample::default();
    let started = Instant::now();
    let mut entry = [b'x'; ENTRY_BYTES];
    let mut ack = [0u8; 1];
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        entry[..8].copy_from_slice(&n.to_be_bytes());
        let sent = Instant::now();
        stream.write_all(&entry)?;
        stream.read_exact(&mut ack)?;
        sample.latencies.push(sent.elapsed());
        sample.ok += 1;
    }
    sample.elapsed = started.elapsed();
    Ok(sample)
}

/// Three `--floor-node` processes of this binary, logs under `dir`; killed when dropped.
pub struct FloorCluster {
    nodes: Vec<Child>,
    leader: SocketAddr,
    /// The leader serves gRPC, and ends only when killed.
    api: bool,
}

impl FloorCluster {
    /// The pipeline with a plain TCP leader (`floor1`).
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        Self::start_as(dir, Role::Leader, 1).await
    }

    /// The pipeline with a gRPC leader (`floorapi1` and the group-committed floors) on an async
    /// runtime of `workers` threads: one runs everything on one thread, two as a Zaris node
    /// runs on this machine (one worker per core).
    pub async fn start_api(dir: &Path, workers: u16) -> anyhow::Result<Self> {
        Self::start_as(dir, Role::ApiLeader, workers).await
    }

    async fn start_as(dir: &Path, leader_role: Role, workers: u16) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut nodes = Vec::new();
        let mut followers = Vec::new();
        for name in ["a", "b"] {
            let (child, port) = spawn(&exe, Role::Follower, &dir.join(name), &[], 1).await?;
            nodes.push(child);
            followers.push(format!("127.0.0.1:{port}"));
        }
        let (child, port) =
            spawn(&exe, leader_role, &dir.join("leader"), &followers, workers).await?;
        nodes.push(child);
        Ok(FloorCluster {
            nodes,
            leader: SocketAddr::from(([127, 0, 0, 1], port)),
            api: leader_role == Role::ApiLeader,
        })
    }

    pub fn leader(&self) -> SocketAddr {
        self.leader
    }

    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(Child::id).collect()
    }

    /// The nodes end by themselves once the client has gone (a gRPC leader once killed, its
    /// followers then); any that did not are killed.
    pub async fn stop(mut self) {
        if self.api
            && let Some(leader) = self.nodes.last_mut()
        {
            let _ = leader.kill().await;
        }
        for node in &mut self.nodes {
            if tokio::time::timeout(Duration::from_secs(5), node.wait())
                .await
                .is_err()
            {
                let _ = node.kill().await;
            }
        }
    }
}

async fn spawn(
    exe: &Path,
    role: Role,
    dir: &Path,
    followers: &[String],
    workers: u16,
) -> anyhow::Result<(Child, u16)> {
    let mut command = Command::new(exe);
    command
        .args(["--floor-node", role.name(), "--floor-dir"])
        .arg(dir)
        .arg("--floor-workers")
        .arg(workers.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    if !followers.is_empty() {
        command.arg("--floor-followers").arg(followers.join(","));
    }
    let mut child = command.spawn()?;
    let stdout = child
        .stdout
        .take()
        .context("a floor node's standard output")?;
    let mut line = String::new();
    tokio::time::timeout(
        START_TIMEOUT,
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .context("a floor node did not start")??;
    let port = line
        .trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("a floor node printed {line:?}, not its port"))?;
    Ok((child, port))
}

/// What the floor tests share: followers on threads, and the logs read back.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub(crate) type NodeThread = std::thread::JoinHandle<anyhow::Result<()>>;

    /// Two followers on threads, logs `a` and `b` in `dir`: the leader's connections to them,
    /// and the threads, which end when those connections do.
    pub(crate) fn start_followers(dir: &Path) -> anyhow::Result<(Vec<TcpStream>, Vec<NodeThread>)> {
        let mut followers = Vec::new();
        let mut threads = Vec::new();
        for name in ["a", "b"] {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            followers.push(connect(listener.local_addr()?)?);
            let log = RingLog::create(&dir.join(name))?;
            threads.push(std::thread::spawn(move || follow(&listener, log)));
        }
        Ok((followers, threads))
    }

    /// Leader connections to two followers that are gone at once.
    pub(crate) fn vanished_followers() -> anyhow::Result<Vec<TcpStream>> {
        let mut followers = Vec::new();
        for _ in 0..2 {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            followers.push(connect(listener.local_addr()?)?);
            drop(accept(&listener)?);
        }
        Ok(followers)
    }

    /// The entries of each of the three logs in `dir` (`a`, `b`, `leader`), unframed, in order;
    /// asserts that the rest of each ring is as prefilled.
    pub(crate) fn logs(dir: &Path) -> anyhow::Result<Vec<Vec<Vec<u8>>>> {
        ["a", "b", "leader"]
            .iter()
            .map(|name| {
                let log = std::fs::read(dir.join(name))?;
                assert_eq!(log.len() as u64, LOG_BYTES, "{name}");
                let mut reader = &log[..];
                let mut entries = Vec::new();
                let mut frame = Vec::new();
                while reader.len() >= FRAME_HEADER_BYTES
                    && reader[..FRAME_HEADER_BYTES].iter().any(|&b| b != 0)
                {
                    read_frame(&mut reader, &mut frame)?;
                    entries.push(frame[FRAME_HEADER_BYTES..].to_vec());
                }
                assert!(
                    reader.iter().all(|&b| b == 0),
                    "{name}: after the last entry"
                );
                Ok(entries)
            })
            .collect()
    }

    /// Entry `n` of the tests: its number, then `x`s.
    pub(crate) fn numbered(n: u64) -> Vec<u8> {
        let mut entry = vec![b'x'; ENTRY_BYTES];
        entry[..8].copy_from_slice(&n.to_be_bytes());
        entry
    }

    /// [`logs`] once both followers' logs match the leader's, or as they are after 10 s. The leader
    /// answers once one follower has an entry, so the other may still be writing the last ones
    /// when the client has its answers (it has them in its socket: it catches up).
    pub(crate) fn settled_logs(dir: &Path) -> anyhow::Result<Vec<Vec<Vec<u8>>>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // A follower's frame caught halfway written reads as a bad frame: read again.
            let logs = match logs(dir) {
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                read => read?,
            };
            if logs.iter().all(|log| *log == logs[2]) || Instant::now() > deadline {
                return Ok(logs);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Entries 1..=`count` ([`numbered`]) are all three logs, in order.
    pub(crate) fn assert_entries_in_every_log(dir: &Path, count: u64) -> anyhow::Result<()> {
        let expected: Vec<Vec<u8>> = (1..=count).map(numbered).collect();
        for log in settled_logs(dir)? {
            assert_eq!(log, expected);
        }
        Ok(())
    }

    pub(crate) fn current_thread() -> io::Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    /// The pipeline in one process (threads for nodes): every entry answered was written, in
    /// order, to the leader's log and to both followers'.
    #[test]
    fn every_answered_entry_is_in_all_three_logs() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (followers, mut threads) = start_followers(dir.path())?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let leader = listener.local_addr()?;
        let log = RingLog::create(&dir.path().join("leader"))?;
        threads.push(std::thread::spawn(move || {
            lead(&listener, Pipeline::new(followers, log))
        }));

        let mut stream = connect(leader)?;
        let mut ack = [0u8; 1];
        for n in 1..=50u64 {
            stream.write_all(&numbered(n))?;
            stream.read_exact(&mut ack)?;
        }
        drop(stream);
        for thread in threads {
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("a node panicked"))??;
        }
        assert_entries_in_every_log(dir.path(), 50)
    }

    /// A frame that is empty or larger than any group of entries is refused, not allocated; a
    /// stream cut inside a frame is an error, at a frame's end a clean end.
    #[test]
    fn frames_are_checked() {
        let mut frame = Vec::new();
        for len in [0u32, MAX_FRAME_BYTES as u32 + 1, u32::MAX] {
            let header = len.to_le_bytes();
            let err = read_frame(&mut &header[..], &mut frame).expect_err("a bad length");
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{len}: {err}");
        }
        let whole = framed(b"abc").expect("framed");
        assert!(matches!(
            read_frame(&mut &whole[..], &mut frame),
            Ok(Some(()))
        ));
        assert_eq!(frame, whole);
        assert!(
            read_frame(&mut &whole[..5], &mut frame).is_err(),
            "cut inside"
        );
        assert!(matches!(read_frame(&mut &[][..], &mut frame), Ok(None)));
        assert!(framed(b"").is_err());
    }

    #[test]
    fn the_ring_wraps_at_its_end() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("ring");
        let mut log = RingLog::create(&path)?;
        log.next_offset = LOG_BYTES - 10;
        log.append(&[7u8; 16])?;
        let bytes = std::fs::read(&path)?;
        assert_eq!(bytes.len() as u64, LOG_BYTES);
        assert_eq!(bytes[..16], [7u8; 16]);
        assert_eq!(log.next_offset, 16);
        Ok(())
    }

    #[test]
    fn roles_are_named() -> anyhow::Result<()> {
        assert_eq!(Role::parse("leader")?, Role::Leader);
        assert_eq!(Role::parse("leader-api")?, Role::ApiLeader);
        assert_eq!(Role::parse("follower")?, Role::Follower);
        assert!(Role::parse("candidate").is_err());
        Ok(())
    }
}
