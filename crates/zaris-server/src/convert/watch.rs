//! Watch: the event-type filter in, events out.

use zaris_core::{Event, EventKind, Revision};
use zaris_proto::v1;

use super::kv;
use crate::error::ApiError;

/// The event kinds a watch delivers, from `WatchCreateRequest.event_types`: empty → `None` (every
/// kind, also ones added later). UNSPECIFIED or an unknown value → INVALID_ARGUMENT, like every
/// enum this server reads: a filter the server cannot honour would silently deliver nothing.
pub fn event_kinds(event_types: &[i32]) -> Result<Option<Vec<EventKind>>, ApiError> {
    if event_types.is_empty() {
        return Ok(None);
    }
    // Not sized by the request: a filter repeating one kind millions of times would keep that
    // much capacity for the watch's whole life, where four kinds is all it can hold.
    let mut kinds = Vec::new();
    for (at, value) in event_types.iter().enumerate() {
        let kind = match v1::EventType::try_from(*value) {
            Ok(v1::EventType::Put) => EventKind::Put,
            Ok(v1::EventType::Delete) => EventKind::Delete,
            Ok(v1::EventType::Expire) => EventKind::Expire,
            Ok(v1::EventType::Revoke) => EventKind::Revoke,
            Ok(v1::EventType::Unspecified) => {
                return Err(ApiError::invalid_argument(format!(
                    "event_types[{at}] must not be EVENT_TYPE_UNSPECIFIED"
                )));
            }
            Err(_) => {
                return Err(ApiError::invalid_argument(format!(
                    "event_types[{at}] has unknown value {value}"
                )));
            }
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(Some(kinds))
}

/// The wire type of an event kind.
pub fn event_type(kind: EventKind) -> v1::EventType {
    match kind {
        EventKind::Put => v1::EventType::Put,
        EventKind::Delete => v1::EventType::Delete,
        EventKind::Expire => v1::EventType::Expire,
        EventKind::Revoke => v1::EventType::Revoke,
    }
}

/// A change applied at `revision`, as a watcher sees it; `prev_kv` only if the watch asked for it.
pub fn watch_event(event: &Event, revision: Revision, prev_kv: bool) -> v1::Event {
    v1::Event {
        r#type: event_type(event.kind).into(),
        kv: Some(kv(event.kv.clone())),
        prev_kv: if prev_kv {
            event.prev.clone().map(kv)
        } else {
            None
        },
        lease: event.lease.get(),
        revision: revision.get(),
    }
}

#[cfg(test)]
mod tests {
    use zaris_core::{Command, DurationMs, EventKind, KeySelector, LeaseId, Request, State};
    use zaris_proto::v1;

    use super::*;
    use crate::convert::test_support::*;

    #[test]
    fn event_type_filters() {
        use v1::EventType as T;
        assert_eq!(ok(event_kinds(&[])), None);
        assert_eq!(
            ok(event_kinds(&[
                T::Revoke as i32,
                T::Put as i32,
                T::Revoke as i32
            ])),
            Some(vec![EventKind::Revoke, EventKind::Put])
        );
        assert_eq!(
            ok(event_kinds(&[
                T::Put as i32,
                T::Delete as i32,
                T::Expire as i32,
                T::Revoke as i32
            ])),
            Some(vec![
                EventKind::Put,
                EventKind::Delete,
                EventKind::Expire,
                EventKind::Revoke
            ])
        );
        assert_invalid(
            event_kinds(&[T::Put as i32, T::Unspecified as i32]),
            "event_types[1] must not be EVENT_TYPE_UNSPECIFIED",
        );
        assert_invalid(event_kinds(&[99]), "event_types[0] has unknown value 99");
        let repeated = ok(event_kinds(&vec![T::Put as i32; 100_000])).unwrap_or_default();
        assert_eq!(repeated, vec![EventKind::Put]);
        // A small allocation (the allocator's least for one-byte items), not the request's length.
        assert!(repeated.capacity() <= 8, "kept {}", repeated.capacity());
    }

    /// Events from the real state machine, on the wire: lease ids on PUT, REVOKE and EXPIRE, none
    /// on DELETE; deletions carry the deletion revision and version 0; prev_kv only on request.
    #[test]
    fn watch_events_from_the_state_machine() {
        use zaris_core::ExpiredLease;

        let limits = small();
        let mut state = State::new(limits.clone());
        let events = |state: &mut State, revision: u64, command: Command| {
            state
                .apply(Revision::new(revision), &Request::new(command))
                .effects
                .events
        };
        let grant = |id| Command::Grant {
            id,
            ttl_ms: DurationMs::new(5_000),
        };
        let put = |key: &[u8], lease| Command::Put {
            key: key.to_vec(),
            value: b"v".to_vec(),
            lease,
            guard: None,
            prev_kv: false,
        };
        events(&mut state, 1, grant(LeaseId::new(7)));
        events(&mut state, 2, grant(LeaseId::new(8)));

        let put_events = events(&mut state, 3, put(b"a", LeaseId::new(7)));
        let wire = watch_event(&put_events[0], Revision::new(3), true);
        assert_eq!(wire.r#type(), v1::EventType::Put);
        assert_eq!((wire.lease, wire.revision), (7, 3));
        let kv = wire.kv.clone().unwrap_or_default();
        assert_eq!(
            (kv.key.as_slice(), kv.value.as_slice()),
            (&b"a"[..], &b"v"[..])
        );
        assert_eq!((kv.mod_revision, kv.version, kv.lease), (3, 1, 7));
        assert_eq!(wire.prev_kv, None, "no previous value: the key was new");

        let overwrite = events(&mut state, 4, put(b"a", LeaseId::NONE));
        let with_prev = watch_event(&overwrite[0], Revision::new(4), true);
        assert_eq!(with_prev.lease, 0);
        assert_eq!(
            with_prev.prev_kv.map(|p| (p.mod_revision, p.lease)),
            Some((3, 7))
        );
        assert_eq!(
            watch_event(&overwrite[0], Revision::new(4), false).prev_kv,
            None
        );

        let deleted = events(
            &mut state,
            5,
            Command::Delete {
                selector: KeySelector::Key(b"a".to_vec()),
                guard: None,
                prev_kv: false,
            },
        );
        let wire = watch_event(&deleted[0], Revision::new(5), true);
        assert_eq!(wire.r#type(), v1::EventType::Delete);
        assert_eq!(wire.lease, 0);
        let kv = wire.kv.unwrap_or_default();
        assert_eq!((kv.mod_revision, kv.version, kv.value.len()), (5, 0, 0));
        assert_eq!(wire.prev_kv.map(|p| p.version), Some(2));

        events(&mut state, 6, put(b"b", LeaseId::new(7)));
        events(&mut state, 7, put(b"c", LeaseId::new(8)));
        let revoked = events(
            &mut state,
            8,
            Command::Revoke {
                id: LeaseId::new(7),
            },
        );
        let wire = watch_event(&revoked[0], Revision::new(8), false);
        assert_eq!(wire.r#type(), v1::EventType::Revoke);
        assert_eq!((wire.lease, wire.revision), (7, 8));
        let expired = events(
            &mut state,
            9,
            Command::Expire {
                leases: vec![ExpiredLease {
                    id: LeaseId::new(8),
                    observed_renewed_revision: Revision::new(2),
                }],
            },
        );
        let wire = watch_event(&expired[0], Revision::new(9), false);
        assert_eq!(wire.r#type(), v1::EventType::Expire);
        assert_eq!(wire.lease, 8);
        assert_eq!(wire.kv.map(|kv| kv.key), Some(b"c".to_vec()));
    }
}
