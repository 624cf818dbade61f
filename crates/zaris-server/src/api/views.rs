//! The JSON the API answers with, from the gRPC answers (no I/O). Names follow the gRPC fields;
//! times are `_ms`; keys and values are shown as UTF-8 (invalid bytes replaced), which is what
//! a console displays.

use openraft::RaftMetrics;
use serde_json::{Value, json};
use zaris_proto::v1::{
    LeaseListResponse, LeaseRevokeResponse, LeaseTimeToLiveResponse, LockListResponse, MemberKind,
    NodeRole, RangeResponse, ResponseHeader, RevokeResult, StatusResponse,
};
use zaris_raft::TypeConfig;

/// What every answer carries: who answered, at which revision and term.
fn header(header: Option<&ResponseHeader>) -> Value {
    let header = header.cloned().unwrap_or_default();
    json!({
        "answered_by": header.member_id,
        "revision": header.revision,
        "raft_term": header.raft_term,
    })
}

fn with_header(mut body: Value, response_header: Option<&ResponseHeader>) -> Value {
    if let (Value::Object(body), Value::Object(header)) = (&mut body, header(response_header)) {
        body.extend(header);
    }
    body
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn role(role: i32) -> &'static str {
    match NodeRole::try_from(role) {
        Ok(NodeRole::Leader) => "leader",
        Ok(NodeRole::Follower) => "follower",
        Ok(NodeRole::Candidate) => "candidate",
        Ok(NodeRole::Learner) => "learner",
        Ok(NodeRole::Shutdown) => "shutdown",
        _ => "unknown",
    }
}

/// The answering member's own view.
pub fn node(status: &StatusResponse) -> Value {
    with_header(
        json!({
            "id": status.member_id,
            "role": role(status.role),
            "leader_id": status.raft_leader_id,
            "term": status.raft_term,
            "commit_index": status.commit_index,
            "applied_index": status.applied_index,
            "server_version": status.server_version,
        }),
        status.header.as_ref(),
    )
}

/// The members as the leader (the answering member) sees them: each one's replicated index,
/// how far it lags the leader's log, and how long ago it last acknowledged the leader.
pub fn cluster(status: &StatusResponse, metrics: &RaftMetrics<TypeConfig>) -> Value {
    let last_log_index = metrics.last_log_index.unwrap_or(0);
    let members: Vec<Value> = status
        .members
        .iter()
        .map(|member| {
            let is_leader = member.id == status.member_id;
            let voter = member.kind == MemberKind::Voter as i32;
            let matched = if is_leader {
                last_log_index
            } else {
                member.matched_index
            };
            let last_contact_ms = if is_leader {
                Some(0)
            } else {
                metrics
                    .heartbeat
                    .as_ref()
                    .and_then(|acked| acked.get(&member.id).cloned().flatten())
                    .map(|at| {
                        u64::try_from(openraft::Instant::elapsed(&*at).as_millis())
                            .unwrap_or(u64::MAX)
                    })
            };
            json!({
                "id": member.id,
                "address": member.address,
                "peer_address": member.peer_address,
                "voter": voter,
                "role": if is_leader { "leader" } else if voter { "follower" } else { "learner" },
                "matched_index": matched,
                "lag": last_log_index.saturating_sub(matched),
                "last_contact_ms": last_contact_ms,
            })
        })
        .collect();
    with_header(
        json!({
            "leader_id": status.member_id,
            "term": status.raft_term,
            "commit_index": status.commit_index,
            "applied_index": status.applied_index,
            "last_log_index": last_log_index,
            "members": members,
        }),
        status.header.as_ref(),
    )
}

/// The leader's samples: lease grants, renewals, expiries and revocations applied per second
/// (the cluster's, as every member applies every entry) and its mean commit latency.
pub fn stats(samples: &[crate::stats::Sample], answered: &ResponseHeader) -> Value {
    with_header(
        json!({
            "interval_ms": crate::stats::SAMPLE_INTERVAL.as_millis() as u64,
            "samples": samples,
        }),
        Some(answered),
    )
}

pub fn leases(page: &LeaseListResponse) -> Value {
    let leases: Vec<Value> = page
        .leases
        .iter()
        .map(|lease| {
            json!({
                "id": lease.id,
                "ttl_ms": lease.ttl_ms,
                "remaining_ttl_ms": lease.remaining_ttl_ms,
                "granted_revision": lease.granted_revision,
                "renewed_revision": lease.renewed_revision,
                "key_count": lease.key_count,
                "lock_count": lease.lock_count,
                "owner": lease.owner,
            })
        })
        .collect();
    with_header(
        json!({"leases": leases, "more": page.more}),
        page.header.as_ref(),
    )
}

pub fn lease(lease: &LeaseTimeToLiveResponse) -> Value {
    let keys: Vec<String> = lease.bound_keys.iter().map(|key| text(key)).collect();
    with_header(
        json!({
            "id": lease.id,
            "ttl_ms": lease.ttl_ms,
            "remaining_ttl_ms": lease.remaining_ttl_ms,
            "granted_revision": lease.granted_revision,
            "renewed_revision": lease.renewed_revision,
            "keys": keys,
            "keys_truncated": lease.keys_truncated,
            "locks_held": lease.locks_held,
            "locks_waiting": lease.locks_waiting,
            "owner": lease.owner,
        }),
        lease.header.as_ref(),
    )
}

pub fn revoked(id: u64, revoked: &LeaseRevokeResponse) -> Value {
    let result = match RevokeResult::try_from(revoked.result) {
        Ok(RevokeResult::Revoked) => "revoked",
        Ok(RevokeResult::NotFound) => "not_found",
        _ => "unknown",
    };
    with_header(json!({"id": id, "result": result}), revoked.header.as_ref())
}

pub fn locks(page: &LockListResponse) -> Value {
    let locks: Vec<Value> = page
        .locks
        .iter()
        .map(|lock| {
            json!({
                "name": lock.name,
                "holder_lease": lock.holder_lease,
                "token": lock.token,
                "waiters": lock.waiters,
                "waiter_count": lock.waiter_count,
            })
        })
        .collect();
    with_header(
        json!({"locks": locks, "more": page.more}),
        page.header.as_ref(),
    )
}

/// Most bytes of member names and values one presence page shows (before JSON escaping).
pub const MAX_PRESENCE_PAGE_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// The members of a presence group: each key `presence/GROUP/MEMBER`, its metadata, its lease,
/// and the revision it joined at (the key's creation; a member that rejoins keeps it).
pub fn presence(group: &str, range: &RangeResponse) -> Value {
    let prefix = format!("presence/{group}/");
    // A page's members stop once their names and values pass the budget (as text, escaped
    // bytes count up to six times): a page of large values must not become a reply many times
    // the size of the values.
    let mut budget = MAX_PRESENCE_PAGE_TEXT_BYTES;
    let shown = range
        .kvs
        .iter()
        .take_while(|kv| {
            let within = budget > 0;
            budget = budget.saturating_sub(kv.key.len().saturating_add(kv.value.len()));
            within
        })
        .count();
    let members: Vec<Value> = range.kvs[..shown]
        .iter()
        .map(|kv| {
            let key = text(&kv.key);
            json!({
                "member": key.strip_prefix(&prefix).unwrap_or(&key),
                "value": text(&kv.value),
                "lease": kv.lease,
                "joined_revision": kv.create_revision,
                "updated_revision": kv.mod_revision,
            })
        })
        .collect();
    with_header(
        json!({"group": group, "members": members, "more": range.more || shown < range.kvs.len()}),
        range.header.as_ref(),
    )
}

#[cfg(test)]
mod tests {
    use zaris_proto::v1::{KeyValue, LeaseSummary, LockSummary};

    use super::*;

    fn header(member_id: u64, revision: u64) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            cluster_id: 1,
            member_id,
            revision,
            raft_term: 3,
        })
    }

    #[test]
    fn pages_carry_who_answered_and_their_items() {
        let page = LeaseListResponse {
            header: header(2, 40),
            leases: vec![LeaseSummary {
                id: 7,
                ttl_ms: 5_000,
                remaining_ttl_ms: 4_200,
                key_count: 1,
                lock_count: 1,
                owner: String::new(),
                granted_revision: 30,
                renewed_revision: 38,
            }],
            more: true,
        };
        assert_eq!(
            leases(&page),
            json!({
                "answered_by": 2, "revision": 40, "raft_term": 3, "more": true,
                "leases": [{"id": 7, "ttl_ms": 5_000, "remaining_ttl_ms": 4_200,
                            "granted_revision": 30, "renewed_revision": 38, "key_count": 1,
                            "lock_count": 1, "owner": ""}],
            })
        );
        let page = LockListResponse {
            header: header(2, 41),
            locks: vec![LockSummary {
                name: "job".into(),
                holder_lease: 7,
                token: 33,
                waiters: vec![8, 9],
                waiter_count: 2,
            }],
            more: false,
        };
        assert_eq!(
            locks(&page)["locks"][0],
            json!({"name": "job", "holder_lease": 7, "token": 33, "waiters": [8, 9],
                   "waiter_count": 2})
        );
    }

    #[test]
    fn presence_members_are_named_without_the_group_prefix() {
        let range = RangeResponse {
            header: header(1, 9),
            kvs: vec![KeyValue {
                key: b"presence/workers/w-1".to_vec(),
                value: b"10.0.0.5:80".to_vec(),
                create_revision: 5,
                mod_revision: 8,
                version: 2,
                lease: 7,
            }],
            more: false,
            count: 1,
        };
        assert_eq!(
            presence("workers", &range)["members"],
            json!([{"member": "w-1", "value": "10.0.0.5:80", "lease": 7, "joined_revision": 5,
                    "updated_revision": 8}])
        );
    }

    /// Large values end a page early, with `more`: escaped, a page would be up to six times
    /// their size.
    #[test]
    fn a_presence_page_of_large_values_stops_at_its_budget() {
        let value = vec![1u8; 1024 * 1024];
        let kvs: Vec<KeyValue> = (0..10)
            .map(|i| KeyValue {
                key: format!("presence/g/m{i}").into_bytes(),
                value: value.clone(),
                ..KeyValue::default()
            })
            .collect();
        let range = RangeResponse {
            header: header(1, 9),
            kvs,
            more: false,
            count: 10,
        };
        let page = presence("g", &range);
        let shown = page["members"].as_array().map_or(0, Vec::len);
        assert_eq!(shown, MAX_PRESENCE_PAGE_TEXT_BYTES / value.len());
        assert_eq!(page["more"], json!(true));
    }
}
