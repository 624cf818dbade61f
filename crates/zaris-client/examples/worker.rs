//! A worker that owns a job queue while it lives: lease-backed lock, fenced writes, and a clean
//! stop when the lock is lost.
//!
//! Start a cluster (`zaris serve`), then run two of these; kill the first with `kill -9` and
//! watch the second take over with a higher fencing token once the first one's lease expires:
//!
//! ```text
//! cargo run -p zaris-client --example worker -- worker-a
//! ZARIS_ENDPOINTS=127.0.0.1:7001,127.0.0.1:7002 cargo run -p zaris-client --example worker -- b
//! ```

use std::time::Duration;

use zaris_client::{Client, Error, PutOptions};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "worker".into());
    let endpoints = std::env::var("ZARIS_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:7001".into());
    let client = Client::connect(endpoints.split(',')).await?;

    // The lease is renewed in the background; if this process dies, it expires after 5 s.
    let lease = client.lease(Duration::from_secs(5)).await?;
    println!(
        "{name}: lease {} granted, waiting for the job queue",
        lease.id()
    );
    let guard = lease.lock("jobs/queue").await?;
    println!(
        "{name}: got the job queue with fencing token {}",
        guard.token()
    );

    for job in 1.. {
        tokio::select! {
            reason = guard.lost() => {
                // Stop at once: another worker may own the queue by now.
                println!("{name}: lost the job queue ({reason:?}); stopping");
                return Ok(());
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        // The store applies this only while our token still holds the lock: a write delayed
        // past a takeover is refused instead of overwriting the new owner's work.
        match guard
            .put(
                "jobs/last",
                format!("job {job} by {name}"),
                PutOptions::default(),
            )
            .await
        {
            Ok(revision) => println!("{name}: job {job} done (revision {revision})"),
            Err(Error::NotHeld { .. }) => {
                println!("{name}: the store refused our token; stopping");
                return Ok(());
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
