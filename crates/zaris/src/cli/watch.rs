//! The event streams: `zaris watch`, `zaris presence watch` and `zaris elect --listen`. Each prints
//! one line (one JSON object with `-o json`) per event until SIGINT or SIGTERM (exit 0), until
//! `--count` events (exit 0), or until the watch fails (exit 1; for example COMPACTED when the
//! start revision's events are gone).

use anyhow::{Result, bail};
use zaris_client::{Election, Presence, Revision, WatchOptions};

use super::output as out;
use super::signals::Signals;
use super::{Cli, WatchArgs};

/// Counts printed events against `--count`.
#[derive(Debug)]
struct Budget(Option<u64>);

impl Budget {
    /// True once `--count` events were printed.
    fn spent(&self) -> bool {
        self.0 == Some(0)
    }

    fn take(&mut self) {
        if let Some(left) = &mut self.0 {
            *left = left.saturating_sub(1);
        }
    }
}

impl Cli {
    pub(super) async fn watch(&self, args: WatchArgs) -> Result<()> {
        let mut signals = Signals::install()?;
        let options = WatchOptions {
            prefix: args.prefix,
            start_revision: Revision::new(args.rev.unwrap_or(0)),
            prev_kv: args.prev_kv,
            ..WatchOptions::default()
        };
        let mut watcher = tokio::select! {
            watcher = self.client.watch(args.key.clone(), options) => {
                watcher.map_err(|e| self.fail(&e))?
            }
            _ = signals.recv() => return Ok(()),
        };
        let mut budget = Budget(args.count);
        while !budget.spent() {
            let event = tokio::select! {
                event = watcher.next() => event,
                _ = signals.recv() => return Ok(()),
            };
            match event {
                Some(Ok(event)) => {
                    self.emit(&out::watch_event_json(&event, args.prev_kv), || {
                        out::watch_event_text(&event, args.prev_kv)
                    });
                    budget.take();
                }
                Some(Err(err)) => return Err(self.fail(&err)),
                None => bail!("the watch on {:?} ended unexpectedly", args.key),
            }
        }
        Ok(())
    }

    /// Prints the members present now, then each change (`count` counts the changes only).
    pub(super) async fn presence_watch(&self, group: String, count: Option<u64>) -> Result<()> {
        let mut signals = Signals::install()?;
        let presence = Presence::new(&self.client, group.clone());
        let mut watch = tokio::select! {
            watch = presence.watch() => watch.map_err(|e| self.fail(&e))?,
            _ = signals.recv() => return Ok(()),
        };
        for member in watch.initial_members() {
            self.emit(&out::presence_initial_json(member), || {
                out::presence_initial_text(member)
            });
        }
        let mut budget = Budget(count);
        while !budget.spent() {
            let event = tokio::select! {
                event = watch.next() => event,
                _ = signals.recv() => return Ok(()),
            };
            match event {
                Some(Ok(event)) => {
                    self.emit(&out::presence_event_json(&event), || {
                        out::presence_event_text(&event)
                    });
                    budget.take();
                }
                Some(Err(err)) => return Err(self.fail(&err)),
                None => bail!("the watch on group {group} ended unexpectedly"),
            }
        }
        Ok(())
    }

    /// Prints the current leader (or "no leader"), then each change (`count` counts every line).
    pub(super) async fn elect_listen(&self, name: String, count: Option<u64>) -> Result<()> {
        let mut signals = Signals::install()?;
        let election = Election::new(&self.client, name.clone());
        let mut observer = tokio::select! {
            observer = election.observe() => observer.map_err(|e| self.fail(&e))?,
            _ = signals.recv() => return Ok(()),
        };
        let mut budget = Budget(count);
        while !budget.spent() {
            let leader = tokio::select! {
                leader = observer.next() => leader,
                _ = signals.recv() => return Ok(()),
            };
            match leader {
                Some(Ok(incumbent)) => {
                    self.emit(&out::leader_json(&name, incumbent.as_ref()), || {
                        out::leader_text(&name, incumbent.as_ref())
                    });
                    budget.take();
                }
                Some(Err(err)) => return Err(self.fail(&err)),
                None => bail!("the watch on election {name} ended unexpectedly"),
            }
        }
        Ok(())
    }
}
