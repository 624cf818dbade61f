//! [`Election`]: leader election on a lease-backed lock, the way etcd's `concurrency.Election` and
//! ZooKeeper's leader recipe are used, with fencing.
//!
//! Candidates queue on lock `election/NAME` (FIFO); the holder is the leader and publishes its
//! value in key `election/NAME`, bound to its lease and written with its fencing token. A leader
//! whose lease ends loses the lock and its key in one replicated entry, and the next candidate
//! takes over with a higher token. Observers watch the key.

use zaris_types::{FencingToken, LeaseId, Revision};

use crate::client::Client;
use crate::error::Error;
use crate::keepalive::ExpiredReason;
use crate::kv::{DeleteOptions, KeyValue, PutOptions};
use crate::lease_handle::Lease;
use crate::lock_guard::LockGuard;
use crate::watch::{WatchOptions, Watcher};

/// An election named `name`. Cheap to create; holds no state on the cluster by itself.
#[derive(Debug, Clone)]
pub struct Election {
    client: Client,
    name: String,
}

/// The current leader of an election, as published in its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incumbent {
    /// The value the leader proclaimed.
    pub value: Vec<u8>,
    /// The leader's lease.
    pub lease: LeaseId,
    /// Revision of the last proclamation.
    pub revision: Revision,
}

impl Incumbent {
    fn from_kv(kv: KeyValue) -> Incumbent {
        Incumbent {
            value: kv.value,
            lease: kv.lease.unwrap_or(LeaseId::NONE),
            revision: kv.mod_revision,
        }
    }
}

/// Leadership won by [`Election::campaign`]: a held lock plus the published value.
#[derive(Debug)]
pub struct Leadership {
    guard: LockGuard,
    key: String,
}

/// Prefix of an election's lock and key.
const PREFIX: &str = "election/";

impl Election {
    /// The election `name` (any non-empty string; it names both a lock and a key).
    pub fn new(client: &Client, name: impl Into<String>) -> Election {
        Election {
            client: client.clone(),
            name: name.into(),
        }
    }

    /// The key (and lock name) the election uses.
    pub fn key(&self) -> String {
        format!("{PREFIX}{}", self.name)
    }

    /// Waits to become leader, then proclaims `value`. Candidates are served in the order they
    /// started campaigning. Fails with [`Error::LeaseLost`] if `lease` ends first.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zaris_client::Error> {
    /// use std::time::Duration;
    /// use zaris_client::{Client, Election};
    ///
    /// let client = Client::connect(["127.0.0.1:7001"]).await?;
    /// let lease = client.lease(Duration::from_secs(5)).await?;
    /// let leadership = Election::new(&client, "scheduler").campaign(&lease, "node-a").await?;
    /// println!("leading with token {}", leadership.token());
    /// leadership.lost().await; // step down when the lease is lost
    /// # Ok(())
    /// # }
    /// ```
    pub async fn campaign(
        &self,
        lease: &Lease,
        value: impl Into<Vec<u8>>,
    ) -> Result<Leadership, Error> {
        let key = self.key();
        if self.name.is_empty() {
            return Err(Error::InvalidArgument {
                reason: "an election name must not be empty".into(),
            });
        }
        let guard = lease
            .lock(key.clone())
            .await
            .map_err(|err| self.name_too_long(err))?;
        let leadership = Leadership { guard, key };
        leadership.proclaim(value).await?;
        Ok(leadership)
    }

    /// The cluster's lock-name limit counts the hidden `election/` prefix: say so in terms of
    /// the name the caller gave, not the lock name it never saw.
    fn name_too_long(&self, err: Error) -> Error {
        let limit = err
            .detail()
            .and_then(|detail| detail.limit.as_ref())
            .filter(|limit| limit.name == "max_lock_name_bytes")
            .map(|limit| limit.limit);
        match limit {
            Some(limit) => Error::InvalidArgument {
                reason: format!(
                    "election name {:?} is {} bytes; at most {} fit (the election is lock and \
                     key \"{PREFIX}NAME\", and the cluster's max_lock_name_bytes is {limit})",
                    self.name,
                    self.name.len(),
                    limit.saturating_sub(PREFIX.len() as u64),
                ),
            },
            None => err,
        }
    }

    /// The current leader, read linearizably; `None` while there is none.
    pub async fn leader(&self) -> Result<Option<Incumbent>, Error> {
        Ok(self.client.get(self.key()).await?.map(Incumbent::from_kv))
    }

    /// Follows the leadership: the first [`LeaderObserver::next`] is the current leader, then one
    /// value per change (`None` = no leader, for example between one leader's lease expiring and
    /// the next one proclaiming).
    pub async fn observe(&self) -> Result<LeaderObserver, Error> {
        let response = self
            .client
            .range(self.key(), crate::RangeOptions::default())
            .await?;
        let revision = response.revision;
        let current = response.kvs.into_iter().next().map(Incumbent::from_kv);
        let watcher = self
            .client
            .watch(
                self.key(),
                WatchOptions::default().from_revision(revision.next()),
            )
            .await?;
        Ok(LeaderObserver {
            first: Some(current),
            watcher,
        })
    }
}

impl Leadership {
    /// The fencing token of this leadership (greater than every earlier leader's).
    pub fn token(&self) -> FencingToken {
        self.guard.token()
    }

    /// The lock behind the leadership (for fenced writes: [`LockGuard::put`]).
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// True while leadership is certainly held (see [`LockGuard::is_held`]).
    pub fn is_leader(&self) -> bool {
        self.guard.is_held()
    }

    /// Resolves when leadership is lost because the lease ended.
    pub async fn lost(&self) -> ExpiredReason {
        self.guard.lost().await
    }

    /// Publishes a new value, only if still leader ([`Error::NotHeld`] otherwise).
    pub async fn proclaim(&self, value: impl Into<Vec<u8>>) -> Result<Revision, Error> {
        let options = PutOptions {
            lease: Some(self.guard.lease().id()),
            ..PutOptions::default()
        };
        self.guard.put(self.key.clone(), value, options).await
    }

    /// Steps down: removes the published value and releases the lock to the next candidate.
    pub async fn resign(self) -> Result<(), Error> {
        self.guard
            .delete(self.key.clone(), DeleteOptions::default())
            .await?;
        self.guard.unlock().await
    }
}

/// Leadership changes, from [`Election::observe`].
#[derive(Debug)]
pub struct LeaderObserver {
    first: Option<Option<Incumbent>>,
    watcher: Watcher,
}

impl LeaderObserver {
    /// The leader now (first call), then after each change. `None` at the end of the watch.
    pub async fn next(&mut self) -> Option<Result<Option<Incumbent>, Error>> {
        if let Some(first) = self.first.take() {
            return Some(Ok(first));
        }
        let event = match self.watcher.next().await? {
            Ok(event) => event,
            Err(err) => return Some(Err(err)),
        };
        Some(Ok(if event.kind.is_removal() {
            None
        } else {
            Some(Incumbent::from_kv(event.kv))
        }))
    }
}
