//! The `docker` CLI for the container tests. Every object a run creates carries the run's label
//! (`com.clustron.zaris.test=<run id>`), and [`Run`] removes them all when dropped, also when a
//! scenario fails or panics: containers, then networks, then volumes.

use std::process::Stdio;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

/// The label on everything a run creates.
pub const LABEL: &str = "com.clustron.zaris.test";

/// Runs `docker ARGS` and returns its standard output, trimmed. A failure says which command
/// failed and what docker printed.
pub async fn docker(args: &[&str]) -> Result<String> {
    let output = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run docker (is Docker installed?)")?;
    if !output.status.success() {
        bail!(
            "docker {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// One run's objects: removed on drop.
#[derive(Debug)]
pub struct Run {
    pub id: String,
}

impl Run {
    pub fn new() -> Run {
        Run {
            id: format!("{:08x}", rand::random::<u32>()),
        }
    }

    /// `--label` argument value for this run.
    pub fn label(&self) -> String {
        format!("{LABEL}={}", self.id)
    }
}

impl Default for Run {
    fn default() -> Self {
        Run::new()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Synchronous: drop may run while the runtime shuts down, or in a panic.
        let filter = format!("label={}", self.label());
        for (list, remove) in [
            (
                vec!["ps", "--all", "--quiet", "--filter", &filter],
                vec!["rm", "--force", "--volumes"],
            ),
            (
                vec!["network", "ls", "--quiet", "--filter", &filter],
                vec!["network", "rm"],
            ),
            (
                vec!["volume", "ls", "--quiet", "--filter", &filter],
                vec!["volume", "rm", "--force"],
            ),
        ] {
            let ids = std::process::Command::new("docker")
                .args(&list)
                .output()
                .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
                .unwrap_or_default();
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if ids.is_empty() {
                continue;
            }
            let removed = std::process::Command::new("docker")
                .args(&remove)
                .args(&ids)
                .stdout(Stdio::null())
                .status();
            if !removed.is_ok_and(|s| s.success()) {
                eprintln!(
                    "warning: could not remove docker objects {ids:?} of run {}",
                    self.id
                );
            }
        }
    }
}
