//! `zaris elect NAME VALUE` and `zaris presence join|list`: holding a place in an election or a
//! presence group with a fresh lease for as long as zaris runs.
//!
//! Both stop on SIGINT or SIGTERM and give up their place first (resign, or revoke the lease so
//! watchers see the member leave with how=revoke), exit 0; a lost lease is an error, exit 1.

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde_json::json;
use zaris_client::{Election, Error, Presence};

use super::Cli;
use super::lock::{LOST_REVOKE_LIMIT, lease_lost};
use super::output as out;
use super::signals::Signals;

impl Cli {
    /// Campaigns, prints "elected NAME = VALUE (token N)", and holds leadership until a signal
    /// (resign, exit 0) or until the lease is lost (exit 1).
    pub(super) async fn elect(&self, name: String, value: String, ttl: Duration) -> Result<()> {
        let mut signals = Signals::install()?;
        let lease = self.client.lease(ttl).await.map_err(|e| self.fail(&e))?;
        let election = Election::new(&self.client, name.clone());
        let campaign = tokio::select! {
            won = election.campaign(&lease, value.clone()) => won.map_err(|e| self.fail(&e)),
            stop = signals.recv() => Err(anyhow!(
                "interrupted by SIG{} while campaigning in election {name}",
                stop.name()
            )),
        };
        let leadership = match campaign {
            Ok(leadership) => leadership,
            Err(err) => {
                self.release_lease(&lease, None).await;
                return Err(err);
            }
        };
        let token = leadership.token();
        self.emit(
            &json!({
                "event": "elected",
                "election": name,
                "value": value,
                "token": token,
                "lease": lease.id(),
            }),
            || format!("elected {name} = {value} (token {token})"),
        );
        tokio::select! {
            reason = leadership.lost() => {
                self.release_lease(&lease, Some(LOST_REVOKE_LIMIT)).await;
                bail!("lost leadership of {name} ({})", lease_lost((lease.id()).get(), reason));
            }
            _ = signals.recv() => {}
        }
        let resigned = leadership.resign().await;
        self.release_lease(&lease, None).await;
        match resigned {
            Ok(()) => {}
            Err(Error::NotHeld { .. }) => bail!(
                "lost leadership of {name} before resigning (lease {} ended)",
                lease.id()
            ),
            Err(err) => bail!(
                "resigning from {name} failed: {}; leadership ends with lease {}",
                self.describe(&err),
                lease.id()
            ),
        }
        self.emit(
            &json!({ "event": "resigned", "election": name, "token": token }),
            || format!("resigned from {name}"),
        );
        Ok(())
    }

    /// Joins the group and stays until a signal (revoke the lease, exit 0) or until the lease is
    /// lost (exit 1).
    pub(super) async fn presence_join(
        &self,
        group: String,
        member: String,
        metadata: String,
        ttl: Duration,
    ) -> Result<()> {
        let mut signals = Signals::install()?;
        let lease = self.client.lease(ttl).await.map_err(|e| self.fail(&e))?;
        let presence = Presence::new(&self.client, group.clone());
        let revision = match presence.join(&lease, &member, metadata.clone()).await {
            Ok(revision) => revision,
            Err(err) => {
                self.release_lease(&lease, None).await;
                return Err(self.fail(&err));
            }
        };
        self.emit(
            &json!({
                "event": "joined",
                "group": group,
                "member": member,
                "metadata": metadata,
                "lease": lease.id(),
                "revision": revision,
            }),
            || {
                let lease = lease.id();
                format!("joined {group} as {member} (lease {lease}, revision {revision}); staying")
            },
        );
        tokio::select! {
            reason = lease.expired() => {
                self.release_lease(&lease, Some(LOST_REVOKE_LIMIT)).await;
                let lost = lease_lost((lease.id()).get(), reason);
                bail!("lost membership of {group} as {member} ({lost})");
            }
            _ = signals.recv() => {}
        }
        let _revocation = lease.revoke().await.map_err(|e| {
            anyhow!(
                "leaving {group} failed: {}; {member} leaves when lease {} expires",
                self.describe(&e),
                lease.id()
            )
        })?;
        self.emit(
            &json!({ "event": "left", "group": group, "member": member, "lease": lease.id() }),
            || format!("left {group} (lease {} revoked)", lease.id()),
        );
        Ok(())
    }

    pub(super) async fn presence_list(&self, group: String) -> Result<()> {
        let presence = Presence::new(&self.client, group.clone());
        let (members, revision) = presence.members().await.map_err(|e| self.fail(&e))?;
        self.emit(
            &out::presence_list_json(&group, &members, revision.get()),
            || out::presence_list_text(&group, &members, revision.get()),
        );
        Ok(())
    }
}
