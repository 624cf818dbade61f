//! [`Presence`]: group membership by lease-bound keys. A member's key lives as long as its lease:
//! when the member dies its lease expires and the key vanishes, and watchers learn it with the
//! reason (expired, revoked, deleted).
//!
//! Keys: `presence/GROUP/MEMBER`, value = the member's metadata.

use std::collections::BTreeSet;

use zaris_types::{LeaseId, Revision};

use crate::client::Client;
use crate::error::Error;
use crate::kv::{DeleteOptions, KeyValue, PutOptions, RangeOptions};
use crate::lease_handle::Lease;
use crate::watch::{EventKind, WatchOptions, Watcher};

/// A presence group. Cheap to create.
#[derive(Debug, Clone)]
pub struct Presence {
    client: Client,
    group: String,
}

/// One live member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's name within the group.
    pub name: String,
    /// What the member published about itself.
    pub metadata: Vec<u8>,
    /// The lease keeping the member present.
    pub lease: LeaseId,
    /// Revision of the member's last join or update.
    pub revision: Revision,
}

/// A change in a group's membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresenceEvent {
    /// A member joined.
    Joined(Member),
    /// A present member re-joined with new metadata or a new lease.
    Updated(Member),
    /// A member left.
    Left {
        /// The member's name.
        name: String,
        /// How: [`EventKind::Expire`] (its lease expired: it died or lost the cluster),
        /// [`EventKind::Revoke`] (its lease was revoked: it shut down cleanly) or
        /// [`EventKind::Delete`] (its key was deleted: it left, or was removed).
        how: EventKind,
        /// The lease that ended (Expire, Revoke); 0 for Delete.
        lease: LeaseId,
        /// Revision of the departure.
        revision: Revision,
    },
}

impl Presence {
    /// The group `group` (non-empty, without `/`).
    pub fn new(client: &Client, group: impl Into<String>) -> Presence {
        Presence {
            client: client.clone(),
            group: group.into(),
        }
    }

    /// The key prefix of the group's members.
    pub fn prefix(&self) -> String {
        format!("presence/{}/", self.group)
    }

    fn check(&self, member: Option<&str>) -> Result<(), Error> {
        let reason = if self.group.is_empty() || self.group.contains('/') {
            "a presence group name must be non-empty and contain no '/'"
        } else if member.is_some_and(str::is_empty) {
            "a presence member name must be non-empty"
        } else {
            return Ok(());
        };
        Err(Error::InvalidArgument {
            reason: reason.into(),
        })
    }

    /// Announces `member` with `metadata` for as long as `lease` lives (joining again updates
    /// the metadata). Returns the revision of the join.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zaris_client::Error> {
    /// use std::time::Duration;
    /// use zaris_client::{Client, Presence};
    ///
    /// let client = Client::connect(["127.0.0.1:7001"]).await?;
    /// let lease = client.lease(Duration::from_secs(5)).await?;
    /// let workers = Presence::new(&client, "workers");
    /// workers.join(&lease, "worker-a", "10.0.0.7:8080").await?;
    /// for member in workers.members().await?.0 {
    ///     println!("{} at {}", member.name, String::from_utf8_lossy(&member.metadata));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn join(
        &self,
        lease: &Lease,
        member: &str,
        metadata: impl Into<Vec<u8>>,
    ) -> Result<Revision, Error> {
        self.check(Some(member))?;
        let options = PutOptions {
            lease: Some(lease.id()),
            ..PutOptions::default()
        };
        let key = format!("{}{member}", self.prefix());
        match self.client.put(key, metadata, options).await {
            Ok(written) => Ok(written.revision),
            Err(Error::LeaseNotFound { .. }) => Err(lease.lost("the cluster has no such lease")),
            Err(err) => Err(err),
        }
    }

    /// Removes `member` from the group now (its lease lives on).
    pub async fn leave(&self, member: &str) -> Result<bool, Error> {
        self.check(Some(member))?;
        let key = format!("{}{member}", self.prefix());
        let response = self.client.delete(key, DeleteOptions::default()).await?;
        Ok(response.deleted > 0)
    }

    /// The live members, read linearizably, and the revision they reflect.
    pub async fn members(&self) -> Result<(Vec<Member>, Revision), Error> {
        self.check(None)?;
        let prefix = self.prefix();
        let options = RangeOptions {
            prefix: true,
            ..RangeOptions::default()
        };
        let response = self.client.range(prefix.clone(), options).await?;
        let revision = response.revision;
        if response.more {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "group {:?} has more members ({}) than one read returns",
                    self.group, response.count
                ),
            });
        }
        let members = response
            .kvs
            .into_iter()
            .filter_map(|kv| member_of(&prefix, kv))
            .collect();
        Ok((members, revision))
    }

    /// The live members now, then every join, update and departure after them, with no gap
    /// between the two.
    pub async fn watch(&self) -> Result<PresenceWatch, Error> {
        let (members, revision) = self.members().await?;
        let watcher = self
            .client
            .watch(
                self.prefix(),
                WatchOptions::prefix().from_revision(revision.next()),
            )
            .await?;
        Ok(PresenceWatch {
            prefix: self.prefix(),
            present: members.iter().map(|m| m.name.clone()).collect(),
            members,
            watcher,
        })
    }
}

fn member_of(prefix: &str, kv: KeyValue) -> Option<Member> {
    let name = kv.key.strip_prefix(prefix.as_bytes())?;
    Some(Member {
        name: String::from_utf8_lossy(name).into_owned(),
        metadata: kv.value,
        lease: kv.lease.unwrap_or(LeaseId::NONE),
        revision: kv.mod_revision,
    })
}

/// Membership changes of a group, from [`Presence::watch`].
#[derive(Debug)]
pub struct PresenceWatch {
    prefix: String,
    members: Vec<Member>,
    present: BTreeSet<String>,
    watcher: Watcher,
}

impl PresenceWatch {
    /// The members present when the watch started.
    pub fn initial_members(&self) -> &[Member] {
        &self.members
    }

    /// The next change; `None` once the watch ended.
    pub async fn next(&mut self) -> Option<Result<PresenceEvent, Error>> {
        loop {
            let event = match self.watcher.next().await? {
                Ok(event) => event,
                Err(err) => return Some(Err(err)),
            };
            let (revision, lease, kind) = (event.revision, event.lease, event.kind);
            let Some(member) = member_of(&self.prefix, event.kv) else {
                continue;
            };
            if kind.is_removal() {
                self.present.remove(&member.name);
                return Some(Ok(PresenceEvent::Left {
                    name: member.name,
                    how: kind,
                    lease,
                    revision,
                }));
            }
            let fresh = self.present.insert(member.name.clone());
            return Some(Ok(if fresh {
                PresenceEvent::Joined(member)
            } else {
                PresenceEvent::Updated(member)
            }));
        }
    }
}
