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

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
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

/// An entry's size: about a put's log entry.
pub const ENTRY_BYTES: usize = 256;
/// Each log is a ring of this many bytes, written once before the run.
const LOG_BYTES: u64 = 8 << 20;
/// How long a node may take to print its port (the prefill included).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A node's role, as `--floor-node` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
}

impl Role {
    pub fn parse(role: &str) -> anyhow::Result<Self> {
        match role {
            "leader" => Ok(Role::Leader),
            "follower" => Ok(Role::Follower),
            other => anyhow::bail!("unknown floor role {other:?} (leader or follower)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Role::Leader => "leader",
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
pub fn serve_node(role: &str, dir: &Path, followers: &[String]) -> anyhow::Result<()> {
    let role = Role::parse(role)?;
    std::fs::create_dir_all(dir)?;
    let log = RingLog::create(&dir.join(format!("{}.log", role.name())))?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut stdout = io::stdout();
    writeln!(stdout, "port {}", listener.local_addr()?.port())?;
    stdout.flush()?;
    match role {
        Role::Follower => follow(&listener, log),
        Role::Leader => {
            let followers = followers
                .iter()
                .map(|addr| connect(addr.parse().context("a follower's address")?))
                .collect::<anyhow::Result<Vec<_>>>()?;
            anyhow::ensure!(!followers.is_empty(), "a floor leader needs followers");
            lead(&listener, followers, log)
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

/// A follower: append, fsync, acknowledge, for each entry of its one connection.
pub fn follow(listener: &TcpListener, mut log: RingLog) -> anyhow::Result<()> {
    let mut leader = accept(listener)?;
    let mut entry = [0u8; ENTRY_BYTES];
    while read_entry(&mut leader, &mut entry)?.is_some() {
        log.append(&entry)?;
        leader.write_all(&[1])?;
    }
    Ok(())
}

/// The leader: for each entry of its one client, forward it to every follower, append and fsync
/// it, wait until one follower has acknowledged it, and answer.
pub fn lead(
    listener: &TcpListener,
    mut followers: Vec<TcpStream>,
    mut log: RingLog,
) -> anyhow::Result<()> {
    let mut client = accept(listener)?;
    let mut entry = [0u8; ENTRY_BYTES];
    // Acknowledgements received from each follower: entry n is committed once any has n.
    let mut acked = vec![0u64; followers.len()];
    let mut appended = 0u64;
    while read_entry(&mut client, &mut entry)?.is_some() {
        for follower in &mut followers {
            follower.write_all(&entry)?;
        }
        log.append(&entry)?;
        appended += 1;
        while acked.iter().copied().max().unwrap_or(0) < appended {
            read_acks(&mut followers, &mut acked)?;
        }
        client.write_all(&[1])?;
    }
    // A clean end: each follower sees the end of its stream after the last entry, and its last
    // acknowledgements are read, not reset by closing over them.
    for follower in &mut followers {
        follower.shutdown(Shutdown::Write)?;
        io::copy(follower, &mut io::sink())?;
    }
    Ok(())
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
}

impl FloorCluster {
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut nodes = Vec::new();
        let mut followers = Vec::new();
        for name in ["a", "b"] {
            let (child, port) = spawn(&exe, Role::Follower, &dir.join(name), &[]).await?;
            nodes.push(child);
            followers.push(format!("127.0.0.1:{port}"));
        }
        let (child, port) = spawn(&exe, Role::Leader, &dir.join("leader"), &followers).await?;
        nodes.push(child);
        Ok(FloorCluster {
            nodes,
            leader: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }

    pub fn leader(&self) -> SocketAddr {
        self.leader
    }

    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(Child::id).collect()
    }

    /// The nodes end by themselves once the client has gone; any that did not are killed.
    pub async fn stop(mut self) {
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
) -> anyhow::Result<(Child, u16)> {
    let mut command = Command::new(exe);
    command
        .args(["--floor-node", role.name(), "--floor-dir"])
        .arg(dir)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The pipeline in one process (threads for nodes): every entry answered was written, in
    /// order, to the leader's log and to both followers'.
    #[test]
    fn every_answered_entry_is_in_all_three_logs() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut followers = Vec::new();
        let mut threads = Vec::new();
        for name in ["a", "b"] {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            followers.push(connect(listener.local_addr()?)?);
            let log = RingLog::create(&dir.path().join(name))?;
            threads.push(std::thread::spawn(move || follow(&listener, log)));
        }
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let leader = listener.local_addr()?;
        let log = RingLog::create(&dir.path().join("leader"))?;
        threads.push(std::thread::spawn(move || lead(&listener, followers, log)));

        let mut stream = connect(leader)?;
        let mut ack = [0u8; 1];
        for n in 1..=50u64 {
            let mut entry = [b'x'; ENTRY_BYTES];
            entry[..8].copy_from_slice(&n.to_be_bytes());
            stream.write_all(&entry)?;
            stream.read_exact(&mut ack)?;
        }
        drop(stream);
        for thread in threads {
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("a node panicked"))??;
        }
        for name in ["a", "b", "leader"] {
            let log = std::fs::read(dir.path().join(name))?;
            assert_eq!(log.len() as u64, LOG_BYTES, "{name}");
            for n in 1..=50u64 {
                let at = (n as usize - 1) * ENTRY_BYTES;
                assert_eq!(log[at..at + 8], n.to_be_bytes(), "{name}: entry {n}");
                assert!(log[at + 8..at + ENTRY_BYTES].iter().all(|&b| b == b'x'));
            }
            assert!(log[50 * ENTRY_BYTES..].iter().all(|&b| b == 0), "{name}");
        }
        Ok(())
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
        assert_eq!(Role::parse("follower")?, Role::Follower);
        assert!(Role::parse("candidate").is_err());
        Ok(())
    }
}
