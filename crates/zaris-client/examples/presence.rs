//! Presence: join a group for as long as this process lives, and print who comes and goes, with
//! how they left (their lease expired = they died; revoked = they shut down cleanly).
//!
//! ```text
//! cargo run -p zaris-client --example presence -- node-a "10.0.0.7:8080"
//! ```

use std::time::Duration;

use zaris_client::{Client, Error, Presence, PresenceEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let member = args.next().unwrap_or_else(|| "member".into());
    let metadata = args.next().unwrap_or_default();
    let endpoints = std::env::var("ZARIS_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:7001".into());
    let client = Client::connect(endpoints.split(',')).await?;

    let group = Presence::new(&client, "services");
    let lease = client.lease(Duration::from_secs(5)).await?;
    group.join(&lease, &member, metadata).await?;

    let mut changes = group.watch().await?;
    for present in changes.initial_members() {
        println!(
            "present: {} ({})",
            present.name,
            String::from_utf8_lossy(&present.metadata)
        );
    }
    while let Some(change) = changes.next().await {
        match change? {
            PresenceEvent::Joined(m) => println!("joined: {}", m.name),
            PresenceEvent::Updated(m) => println!("updated: {}", m.name),
            PresenceEvent::Left {
                name, how, lease, ..
            } => {
                println!("left: {name} ({}, lease {lease})", how.as_str())
            }
        }
    }
    Ok(())
}
