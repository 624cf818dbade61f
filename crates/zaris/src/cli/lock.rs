//! `zaris lock NAME [-- CMD ARGS...]`: a lock held by a fresh lease for as long as zaris runs, or
//! for as long as CMD runs.
//!
//! Without CMD, zaris prints the fencing token and holds the lock until SIGINT or SIGTERM (then
//! releases it, exit 0) or until the lease is lost (exit 1).
//!
//! With CMD, stdout and stdin belong to CMD: zaris prints nothing there (in table mode, one note
//! on stderr). CMD runs with `ZARIS_LOCK_NAME`, `ZARIS_LOCK_TOKEN`, `ZARIS_LEASE_ID` and
//! `ZARIS_ENDPOINTS`, so it can fence its own writes (`zaris txn --guard NAME:$ZARIS_LOCK_TOKEN`).
//! SIGINT and SIGTERM are forwarded to CMD (a Ctrl-C on a terminal thus reaches CMD twice: from
//! the terminal, since CMD stays in the foreground process group so it can use the terminal, and
//! from zaris), and zaris keeps holding the lock until CMD exits. When CMD exits, zaris releases
//! the lock, revokes the lease and exits with CMD's exit code (128 + the signal number if a
//! signal ended it). If the lease is lost first, CMD gets SIGTERM and, if it is still running
//! [`KILL_GRACE`] later, SIGKILL; zaris then exits 1 with "lost lock ...".
//!
//! What CMD may assume: the lock is held while it runs, up to the moment zaris learns the lease
//! is lost, which is before the cluster can expire it; but CMD can outlive that by up to
//! [`KILL_GRACE`], so writes that must not come from a former holder need the fencing token.
//!
//! If zaris itself is killed with SIGKILL, nothing stops CMD or its children: they run on without
//! the lock once the lease expires. Only the fencing token protects against that (and a
//! supervisor that kills the whole process group or cgroup); docs/api.md says so.
//!
//! Signals are sent with the system's `kill` program (the crate has no `unsafe` and no libc
//! binding); if that fails, CMD is killed with SIGKILL at once.

use std::io::Write;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde_json::json;
use tokio::process::Child;
use zaris_client::{Error, ExpiredReason, Lease, LockGuard};

use super::duration::format_ms;
use super::output as out;
use super::signals::Signals;
use super::{Cli, LockArgs, OutputFormat};

/// How long CMD may take to exit after SIGTERM once the lock is lost, before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// How long a best-effort revoke may take when the lease is (probably) gone already.
pub(super) const LOST_REVOKE_LIMIT: Duration = Duration::from_secs(2);

impl Cli {
    pub(super) async fn lock(&self, args: LockArgs) -> Result<()> {
        let mut signals = Signals::install()?;
        let lease = self
            .client
            .lease(args.ttl)
            .await
            .map_err(|e| self.fail(&e))?;
        let acquired = tokio::select! {
            acquired = self.acquire(&lease, &args.name, args.timeout_lock) => acquired,
            stop = signals.recv() => Err(anyhow!(
                "interrupted by SIG{} while waiting for lock {}; nothing was run",
                stop.name(),
                args.name
            )),
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(err) => {
                // Revoking the lease also takes it out of the lock's wait queue.
                self.release_lease(&lease, None).await;
                return Err(err);
            }
        };
        if args.command.is_empty() {
            self.hold_lock(&lease, guard, signals).await
        } else {
            self.run_locked(&lease, guard, &args.command, signals).await
        }
    }

    async fn acquire(
        &self,
        lease: &Lease,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<LockGuard> {
        let Some(timeout) = timeout else {
            return lease.lock(name).await.map_err(|e| self.fail(&e));
        };
        if let Some(guard) = lease
            .lock_timeout(name, timeout)
            .await
            .map_err(|e| self.fail(&e))?
        {
            return Ok(guard);
        }
        let holder = match self.client.lock_status(name).await {
            Ok(status) => status
                .holder
                .map(|holder| format!(" (held by lease {})", holder.lease))
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        bail!(
            "lock {name} was not acquired within {}{holder}",
            format_ms(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
        )
    }

    /// Holds the lock until a signal (release, exit 0) or until it is lost (exit 1).
    async fn hold_lock(&self, lease: &Lease, guard: LockGuard, mut signals: Signals) -> Result<()> {
        let (name, token) = (guard.name().to_owned(), guard.token());
        self.emit(
            &json!({ "event": "acquired", "lock": name, "token": token, "lease": lease.id() }),
            || {
                format!(
                    "acquired lock {name} with token {token} (lease {}); holding it until Ctrl-C",
                    lease.id()
                )
            },
        );
        tokio::select! {
            reason = guard.lost() => {
                self.release_lease(lease, Some(LOST_REVOKE_LIMIT)).await;
                bail!("lost lock {name} ({})", lease_lost((lease.id()).get(), reason));
            }
            _ = signals.recv() => {}
        }
        self.release(lease, guard).await?;
        self.emit(
            &json!({ "event": "released", "lock": name, "token": token, "lease": lease.id() }),
            || format!("released lock {name}"),
        );
        Ok(())
    }

    /// Runs `command` while holding the lock; see the module docs.
    async fn run_locked(
        &self,
        lease: &Lease,
        guard: LockGuard,
        command: &[String],
        mut signals: Signals,
    ) -> Result<()> {
        let (name, token) = (guard.name().to_owned(), guard.token());
        let program = &command[0];
        let spawned = tokio::process::Command::new(program)
            .args(&command[1..])
            .env("ZARIS_LOCK_NAME", &name)
            .env("ZARIS_LOCK_TOKEN", token.to_string())
            .env("ZARIS_LEASE_ID", lease.id().to_string())
            .env("ZARIS_ENDPOINTS", self.client.endpoints().join(","))
            // Only if zaris fails in between: every path below waits for the child.
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                let _ = self.release(lease, guard).await;
                bail!("cannot run {program}: {err}; lock {name} released");
            }
        };
        if self.format == OutputFormat::Table {
            eprintln!(
                "zaris: holding lock {name} with token {token} (lease {}); running {program}",
                lease.id()
            );
        }
        // Taken before waiting: valid until the child is reaped, which only `wait` does, and
        // a completed `wait` ends the loop.
        let pid = child.id();
        let ended = loop {
            tokio::select! {
                status = child.wait() => break Ok(status),
                reason = guard.lost() => break Err(reason),
                stop = signals.recv() => {
                    if let Some(pid) = pid
                        && !send_signal(pid, stop.name()).await
                    {
                        let _ = child.start_kill();
                    }
                }
            }
        };
        match ended {
            Ok(Ok(status)) => {
                let code = exit_code(status);
                match self.release(lease, guard).await {
                    Err(err) if is_not_held(&err) => {
                        bail!("lost lock {name} while {program} ran ({program} exited with {code})")
                    }
                    Err(err) => eprintln!("warning: {err}"),
                    Ok(()) => {}
                }
                if code != 0 {
                    exit_now(code);
                }
                Ok(())
            }
            Ok(Err(err)) => {
                let _ = child.start_kill();
                let _ = self.release(lease, guard).await;
                bail!("cannot wait for {program}: {err}")
            }
            Err(reason) => {
                let how = terminate(&mut child, pid).await;
                self.release_lease(lease, Some(LOST_REVOKE_LIMIT)).await;
                bail!(
                    "lost lock {name} ({}); {how}",
                    lease_lost((lease.id()).get(), reason),
                    how = how.describe(program)
                )
            }
        }
    }

    /// Releases the lock and revokes the lease. An error is one line saying what is left.
    async fn release(&self, lease: &Lease, guard: LockGuard) -> Result<()> {
        let name = guard.name().to_owned();
        let unlocked = guard.unlock().await;
        self.release_lease(lease, None).await;
        unlocked.map_err(|err| match err {
            Error::NotHeld { .. } => anyhow!(NotHeld(format!(
                "lock {name} was no longer held when released (lease {} ended)",
                lease.id()
            ))),
            err => anyhow!(
                "releasing lock {name} failed: {}; it is released when lease {} ends",
                self.describe(&err),
                lease.id()
            ),
        })
    }

    /// Revokes the lease (within `limit`, if given), warning on stderr if that fails: the lease
    /// then ends after its TTL anyway.
    pub(super) async fn release_lease(&self, lease: &Lease, limit: Option<Duration>) {
        let revoked = match limit {
            None => lease.revoke().await,
            Some(limit) => match tokio::time::timeout(limit, lease.revoke()).await {
                Ok(revoked) => revoked,
                Err(_) => {
                    eprintln!(
                        "warning: revoking lease {} timed out; it ends after its TTL",
                        lease.id()
                    );
                    return;
                }
            },
        };
        if let Err(err) = revoked.map(drop) {
            eprintln!(
                "warning: revoking lease {} failed: {}; it ends after its TTL",
                lease.id(),
                self.describe(&err)
            );
        }
    }
}

/// "lease N expired or was revoked", and the like.
pub(super) fn lease_lost(id: u64, reason: ExpiredReason) -> String {
    format!("lease {id} {}", out::expired_reason_text(reason))
}

/// Marks a release refused because the lock was already lost (see [`is_not_held`]).
#[derive(Debug)]
struct NotHeld(String);

impl std::fmt::Display for NotHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotHeld {}

fn is_not_held(err: &anyhow::Error) -> bool {
    err.is::<NotHeld>()
}

/// How CMD ended after the lock was lost.
enum Terminated {
    /// It had exited by itself already.
    Exited(ExitStatus),
    /// It exited after SIGTERM.
    Term,
    /// It needed SIGKILL (it outlived the grace period, or SIGTERM could not be sent).
    Kill,
}

impl Terminated {
    fn describe(&self, program: &str) -> String {
        match self {
            Terminated::Exited(status) => {
                format!("{program} had exited with {}", exit_code(*status))
            }
            Terminated::Term => format!("terminated {program} with SIGTERM"),
            Terminated::Kill => format!(
                "terminated {program} with SIGKILL (it was still running {}s after SIGTERM)",
                KILL_GRACE.as_secs()
            ),
        }
    }
}

/// SIGTERM, then SIGKILL after [`KILL_GRACE`]; returns once the child is reaped.
async fn terminate(child: &mut Child, pid: Option<u32>) -> Terminated {
    if let Ok(Some(status)) = child.try_wait() {
        return Terminated::Exited(status);
    }
    if let Some(pid) = pid
        && send_signal(pid, "TERM").await
        && let Ok(Ok(_)) = tokio::time::timeout(KILL_GRACE, child.wait()).await
    {
        return Terminated::Term;
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
    Terminated::Kill
}

/// Sends SIG`signal` (a name such as `TERM`) to `pid` with the `kill` program; false if that
/// could not be done.
async fn send_signal(pid: u32, signal: &str) -> bool {
    tokio::process::Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success())
}

/// The exit code to pass on: CMD's own, or 128 + the signal that ended it (as shells do).
fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

/// Exits the process with `code` now. `main` maps an `Ok` to 0 and an error to 1; this is the
/// only way to pass on another code. Everything held has been released by then.
fn exit_now(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn exit_codes_pass_on_codes_and_signals() {
        // Raw wait statuses: exit code in the high byte, terminating signal in the low bits.
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 128 + 15);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 128 + 9);
    }

    #[test]
    fn a_lost_lock_names_the_lease_and_how_it_ended() {
        assert_eq!(
            lease_lost(7, ExpiredReason::NotFound),
            "lease 7 expired or was revoked"
        );
        assert_eq!(
            Terminated::Term.describe("sleep"),
            "terminated sleep with SIGTERM"
        );
        assert!(
            Terminated::Kill
                .describe("sleep")
                .starts_with("terminated sleep with SIGKILL")
        );
    }
}
