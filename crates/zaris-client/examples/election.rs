//! Leader election: campaign, lead while the lease lives, and follow who leads.
//!
//! ```text
//! cargo run -p zaris-client --example election -- node-a
//! cargo run -p zaris-client --example election -- node-b   # waits, then takes over
//! ```

use std::time::Duration;

use zaris_client::{Client, Election, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "candidate".into());
    let endpoints = std::env::var("ZARIS_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:7001".into());
    let client = Client::connect(endpoints.split(',')).await?;
    let election = Election::new(&client, "scheduler");

    // Followers see every change of leader.
    let mut observer = election.observe().await?;
    tokio::spawn(async move {
        while let Some(Ok(leader)) = observer.next().await {
            match leader {
                Some(leader) => println!("leader: {}", String::from_utf8_lossy(&leader.value)),
                None => println!("leader: none"),
            }
        }
    });

    let lease = client.lease(Duration::from_secs(5)).await?;
    let leadership = election.campaign(&lease, name.clone()).await?;
    println!("{name}: elected with token {}", leadership.token());
    tokio::select! {
        reason = leadership.lost() => println!("{name}: lost leadership ({reason:?})"),
        _ = tokio::signal::ctrl_c() => {
            leadership.resign().await?;
            println!("{name}: resigned");
        }
    }
    Ok(())
}
