//! SIGINT and SIGTERM for `zaris serve` and the long-running subcommands (`watch`, `lock`, `elect`, `presence`,
//! `lease keepalive`): they stop on either, releasing what they hold, instead of dying mid-way.

use anyhow::{Context, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// A shutdown signal the process received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Stop {
    /// The signal's name, as `kill -s` takes it and people read it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "INT",
            Stop::Terminate => "TERM",
        }
    }
}

/// Listens for SIGINT and SIGTERM. Once installed, neither signal ends the process by itself any
/// more: a signal that arrives while nobody is waiting is kept for the next [`Signals::recv`].
#[derive(Debug)]
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    /// Installs the handlers; call it before anything that should be released on a signal.
    pub(crate) fn install() -> Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
        })
    }

    /// Waits for the next SIGINT or SIGTERM.
    pub(crate) async fn recv(&mut self) -> Stop {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Stop::Interrupt,
            Some(()) = self.terminate.recv() => Stop::Terminate,
            // Both streams ended (the runtime is shutting down): nothing will come.
            else => std::future::pending().await,
        }
    }
}
