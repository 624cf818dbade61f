//! The demo's worker (`zaris demo-worker`, hidden): takes the job-queue lock with a lease,
//! announces itself in the `workers` presence group, and processes jobs with fenced writes while
//! its lease is kept alive. It reports each step as one line on stdout for the demo to narrate:
//!
//! `lease ID` · `joined` · `locked TOKEN` · `job N REVISION` · `lost REASON` · `released`.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use zaris_client::{Presence, PutOptions};

use super::{JOB_LOCK, LAST_JOB_KEY, WORKERS_GROUP};

/// How often a worker finishes a job.
const JOB_INTERVAL: Duration = Duration::from_millis(400);

/// Arguments of `zaris demo-worker`.
#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The worker's name in the presence group.
    #[arg(long)]
    pub name: String,
    /// Cluster endpoints, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// Lease TTL, ms.
    #[arg(long)]
    pub ttl_ms: u64,
}

/// Resolves on SIGINT/SIGTERM or when stdin closes (the demo's way to stop a worker cleanly).
async fn stop_requested() {
    use tokio::io::AsyncReadExt;
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 256];
        while let Ok(read) = stdin.read(&mut buffer).await {
            if read == 0 {
                break;
            }
        }
    };
    tokio::select! {
        () = stdin_closed => {}
        () = super::terminated() => {}
    }
}

pub async fn run(args: WorkerArgs) -> Result<()> {
    let stop = stop_requested();
    tokio::pin!(stop);
    let client = super::client(&args.cluster).await?;
    let lease = client
        .lease(Duration::from_millis(args.ttl_ms))
        .await
        .context("granting the worker's lease")?;
    println!("lease {}", lease.id());
    Presence::new(&client, WORKERS_GROUP)
        .join(&lease, &args.name, format!("pid {}", std::process::id()))
        .await
        .context("joining the presence group")?;
    println!("joined");
    let guard = tokio::select! {
        guard = lease.lock(JOB_LOCK) => guard.context("taking the job-queue lock")?,
        () = &mut stop => return Ok(()),
    };
    println!("locked {}", guard.token());
    let mut job = 0u64;
    loop {
        tokio::select! {
            reason = guard.lost() => {
                println!("lost {reason:?}");
                bail!("lost the job-queue lock");
            }
            () = &mut stop => {
                guard.unlock().await.context("releasing the lock")?;
                let _revocation = lease.revoke().await.context("revoking the lease")?;
                println!("released");
                return Ok(());
            }
            () = tokio::time::sleep(JOB_INTERVAL) => {}
        }
        job += 1;
        let value = format!("job {job} by {} (token {})", args.name, guard.token());
        let revision = guard
            .put(LAST_JOB_KEY, value, PutOptions::default())
            .await
            .context("recording a job")?;
        println!("job {job} {revision}");
    }
}
