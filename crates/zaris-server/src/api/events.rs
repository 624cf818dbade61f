//! `GET /api/v1/events?prefix=P`: the key changes applied on this member from now on (puts,
//! deletes, and the deletions of expired or revoked leases' keys, with the lease id), as
//! Server-Sent Events, read from the watch history that gRPC watches read. Served by the member
//! asked, as gRPC Watch is: a follower's feed is its own applied state, at most a heartbeat
//! behind the leader's.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::Event as SseEvent;
use futures::Stream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use zaris_core::auth::{Credential, Need};
use zaris_core::{Event, EventKind, KeySelector, Revision};

use super::ApiReply;
use crate::error::ApiError;
use crate::services::NodeContext;

/// Event streams one member serves at once: each holds a task and a reader of the history.
pub const MAX_EVENT_STREAMS: usize = 64;
/// Most events read from the history per step (a larger revision is read whole).
const READ_EVENTS: usize = 1_000;
const READ_BYTES: usize = 1024 * 1024;

/// Opens a feed of the changes under `prefix` for `credential`'s caller, who must be allowed to
/// read those keys.
pub fn open(
    context: &NodeContext,
    streams: &Arc<Semaphore>,
    credential: &Credential,
    query: &str,
) -> Result<impl Stream<Item = Result<SseEvent, Infallible>> + use<>, ApiReply> {
    let prefix = super::routes::events_prefix(query).map_err(|e| ApiReply::refused(&e))?;
    let limits = context.limits()?;
    let max_key_bytes = u64::from(limits.max_key_bytes);
    if prefix.len() as u64 > max_key_bytes {
        return Err(
            ApiError::limit_exceeded("max_key_bytes", max_key_bytes, prefix.len() as u64).into(),
        );
    }
    let caller = context.resolve(credential)?;
    let selector = KeySelector::Prefix(prefix.clone().into_bytes());
    context.check_access(|auth| auth.check_keys(&caller, &selector, Need::Read))?;
    let permit = streams.clone().try_acquire_owned().map_err(|_| {
        ApiReply::error(
            429,
            "CAPACITY_EXCEEDED",
            &format!(
                "this member already serves {MAX_EVENT_STREAMS} event streams; close one, or \
                 ask another member"
            ),
        )
    })?;
    let hub = context.watch_hub.clone();
    let feed = Feed {
        next: hub.head().next(),
        changed: hub.subscribe(),
        hub,
        prefix: prefix.into_bytes(),
        pending: std::collections::VecDeque::new(),
        shutdown: context.shutdown.clone(),
        ended: false,
        _permit: permit,
    };
    Ok(futures::stream::unfold(feed, |mut feed| async move {
        let event = feed.next_event().await?;
        Some((Ok(event), feed))
    }))
}

struct Feed {
    hub: Arc<crate::watch::WatchHub>,
    changed: tokio::sync::watch::Receiver<Revision>,
    next: Revision,
    prefix: Vec<u8>,
    pending: std::collections::VecDeque<SseEvent>,
    shutdown: tokio_util::sync::CancellationToken,
    ended: bool,
    _permit: OwnedSemaphorePermit,
}

impl Feed {
    async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            match self.hub.read(self.next, READ_EVENTS, READ_BYTES) {
                Ok(read) => {
                    for (revision, events) in &read.entries {
                        self.pending.extend(
                            events
                                .iter()
                                .filter(|event| event.kv.key.starts_with(&self.prefix))
                                .map(|event| change(*revision, event)),
                        );
                    }
                    let caught_up = read.entries.is_empty();
                    self.next = read.next;
                    if caught_up {
                        tokio::select! {
                            _ = self.shutdown.cancelled() => return None,
                            changed = self.changed.changed() => changed.ok()?,
                        }
                    }
                }
                Err(gap) => {
                    // Fell behind the bounded history: say so and end; the console reopens.
                    self.ended = true;
                    self.pending.push_back(
                        SseEvent::default().event("gap").data(
                            serde_json::json!({
                                "message": "this feed fell behind the member's watch history \
                                            and missed changes; reopen it",
                                "oldest_available": gap.oldest_available.get(),
                            })
                            .to_string(),
                        ),
                    );
                }
            }
        }
    }
}

/// One change as an SSE `change` event.
fn change(revision: Revision, event: &Event) -> SseEvent {
    let kind = match event.kind {
        EventKind::Put => "PUT",
        EventKind::Delete => "DELETE",
        EventKind::Expire => "EXPIRE",
        EventKind::Revoke => "REVOKE",
    };
    // A put names the key's lease; an EXPIRE or REVOKE the lease that ended.
    let lease = match event.kind {
        EventKind::Expire | EventKind::Revoke => event.lease.get(),
        EventKind::Put | EventKind::Delete => event.kv.lease.get(),
    };
    let value = matches!(event.kind, EventKind::Put)
        .then(|| String::from_utf8_lossy(&event.kv.value).into_owned());
    SseEvent::default().event("change").data(
        serde_json::json!({
            "revision": revision.get(),
            "type": kind,
            "key": String::from_utf8_lossy(&event.kv.key),
            "value": value,
            "lease": lease,
        })
        .to_string(),
    )
}
