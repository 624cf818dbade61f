//! What the client subcommands print: one JSON object per line with `-o json`, aligned text
//! otherwise. Pure functions from responses to text, so they are tested without a cluster.

use serde_json::{Value, json};
use zaris_client::proto::ErrorCode;
use zaris_client::{
    ClusterMember, Deleted, EventKind, ExpiredReason, Incumbent, KeyValue, LeaseId, LeaseInfo,
    LeaseSummary, Member as PresenceMember, NodeStatus, PresenceEvent, Range, TxnOpResult,
    TxnOutcome, WatchEvent, Written,
};

use super::duration::{format_ms, millis};

/// Bytes as text for display; invalid UTF-8 is replaced, not rejected.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = width.saturating_sub(cell.chars().count()) + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.trim_end().to_owned()
    };
    let mut lines = vec![line(headers.to_vec())];
    lines.extend(
        rows.iter()
            .map(|row| line(row.iter().map(String::as_str).collect())),
    );
    lines.join("\n")
}

/// A member; `matched_index` only where the answer came from the Raft leader (it alone knows).
pub(crate) fn member_json(member: &ClusterMember) -> Value {
    let mut value = json!({
        "id": member.id,
        "address": member.address,
        "peer_address": member.peer_address,
        "kind": member.kind.as_str(),
    });
    if let Some(matched_index) = member.matched_index {
        value["matched_index"] = json!(matched_index);
    }
    value
}

pub(crate) fn members_json(members: &[ClusterMember]) -> Value {
    json!({ "members": members.iter().map(member_json).collect::<Vec<_>>() })
}

/// The members; a MATCHED column (the Raft leader's replication progress of each member) when
/// the answer came from the leader.
pub(crate) fn members_table(members: &[ClusterMember], raft_leader_id: Option<u64>) -> String {
    let with_matched = members.iter().any(|m| m.matched_index.is_some());
    let rows: Vec<Vec<String>> = members
        .iter()
        .map(|m| {
            let mut kind = m.kind.as_str().to_owned();
            if Some(m.id) == raft_leader_id {
                kind.push_str(" (Raft leader)");
            }
            let mut row = vec![
                m.id.to_string(),
                m.address.clone(),
                m.peer_address.clone(),
                kind,
            ];
            if with_matched {
                row.push(m.matched_index.map_or("-".to_owned(), |i| i.to_string()));
            }
            row
        })
        .collect();
    if with_matched {
        table(&["ID", "ADDRESS", "PEER ADDRESS", "KIND", "MATCHED"], &rows)
    } else {
        table(&["ID", "ADDRESS", "PEER ADDRESS", "KIND"], &rows)
    }
}

pub(crate) fn status_json(status: &NodeStatus) -> Value {
    json!({
        "member_id": status.member_id,
        "leader": status.raft_leader_id.unwrap_or(0),
        "term": status.raft_term,
        "role": status.role.as_str(),
        "commit_index": status.commit_index,
        "applied_index": status.applied_index,
        "revision": status.revision,
        "server_version": status.server_version,
        "members": status.members.iter().map(member_json).collect::<Vec<_>>(),
    })
}

pub(crate) fn status_text(status: &NodeStatus) -> String {
    let raft_leader = match status.raft_leader_id {
        None => "none known".to_owned(),
        Some(id) => id.to_string(),
    };
    let is_member = status.members.iter().any(|m| m.id == status.member_id);
    // A node that was removed, or is still joining, is not a member of the membership it
    // knows: say so rather than call it "member N".
    let who = if is_member {
        format!("member {} ({})", status.member_id, status.role.as_str())
    } else {
        format!("node {} (not a member)", status.member_id)
    };
    format!(
        "{who}, Raft leader {}, term {}\n\
         commit index {}, applied index {}, revision {}, server {}\n\n{}",
        raft_leader,
        status.raft_term,
        status.commit_index,
        status.applied_index,
        status.revision,
        if status.server_version.is_empty() {
            "?"
        } else {
            &status.server_version
        },
        members_table(&status.members, status.raft_leader_id),
    )
}

pub(crate) fn kv_json(kv: &KeyValue) -> Value {
    json!({
        "key": text(&kv.key),
        "value": text(&kv.value),
        "lease": kv.lease.map_or(0, LeaseId::get),
        "mod_revision": kv.mod_revision,
        "create_revision": kv.create_revision,
        "version": kv.version,
    })
}

pub(crate) fn range_json(range: &Range) -> Value {
    json!({
        "kvs": range.kvs.iter().map(kv_json).collect::<Vec<_>>(),
        "count": range.count,
        "more": range.more,
    })
}

pub(crate) fn range_text(range: &Range) -> String {
    kvs_text(&range.kvs, range.more, range.count)
}

fn kvs_text(kvs: &[KeyValue], more: bool, count: u64) -> String {
    let rows: Vec<Vec<String>> = kvs
        .iter()
        .map(|kv| {
            vec![
                text(&kv.key),
                text(&kv.value),
                kv.lease
                    .map_or_else(|| "-".to_owned(), |lease| lease.to_string()),
                kv.mod_revision.to_string(),
                kv.version.to_string(),
            ]
        })
        .collect();
    let mut out = table(&["KEY", "VALUE", "LEASE", "MOD_REV", "VERSION"], &rows);
    if more {
        out.push_str(&format!(
            "\n({} of {count} keys shown; use --limit to see more)",
            kvs.len(),
        ));
    }
    out
}

pub(crate) fn put_json(put: &Written, with_prev: bool) -> Value {
    let mut value = json!({
        "revision": put.revision,
        "result": "ok",
    });
    if with_prev {
        value["prev_kv"] = put.prev_kv.as_ref().map_or(Value::Null, kv_json);
    }
    value
}

pub(crate) fn put_text(put: &Written, with_prev: bool) -> String {
    let mut out = format!("OK (revision {})", put.revision);
    if with_prev {
        match &put.prev_kv {
            Some(prev) => out.push_str(&format!("\nprevious value: {}", text(&prev.value))),
            None => out.push_str("\nno previous value"),
        }
    }
    out
}

pub(crate) fn delete_json(delete: &Deleted) -> Value {
    json!({
        "deleted": delete.deleted,
        "revision": delete.revision,
    })
}

pub(crate) fn delete_text(delete: &Deleted) -> String {
    let noun = if delete.deleted == 1 { "key" } else { "keys" };
    format!(
        "deleted {} {noun} (revision {})",
        delete.deleted, delete.revision
    )
}

pub(crate) fn grant_json(id: u64, ttl_ms: u64) -> Value {
    json!({ "id": id, "ttl_ms": ttl_ms })
}

pub(crate) fn time_to_live_json(ttl: Option<&LeaseInfo>, id: u64) -> Value {
    let Some(ttl) = ttl else {
        return json!({ "id": id, "found": false });
    };
    json!({
        "id": ttl.id,
        "found": true,
        "ttl_ms": millis(ttl.ttl),
        "remaining_ttl_ms": millis(ttl.remaining_ttl),
        "granted_revision": ttl.granted_revision,
        "renewed_revision": ttl.renewed_revision,
        "keys": ttl.bound_keys.iter().map(|k| text(k)).collect::<Vec<_>>(),
        "keys_truncated": ttl.keys_truncated,
        "locks_held": ttl.locks_held,
        "locks_waiting": ttl.locks_waiting,
        "owner": ttl.owner,
    })
}

pub(crate) fn time_to_live_text(ttl: &LeaseInfo, with_keys: bool) -> String {
    let mut out = format!(
        "lease {}: TTL {}, remaining {}, granted at revision {}, renewed at revision {}",
        ttl.id,
        format_ms(millis(ttl.ttl)),
        format_ms(millis(ttl.remaining_ttl)),
        ttl.granted_revision,
        ttl.renewed_revision,
    );
    if with_keys {
        let keys: Vec<String> = ttl.bound_keys.iter().map(|k| text(k)).collect();
        out.push_str(&format!("\nkeys: {}", list_or_none(&keys)));
        if ttl.keys_truncated {
            out.push_str(" (truncated)");
        }
    }
    out.push_str(&format!("\nlocks held: {}", list_or_none(&ttl.locks_held)));
    if !ttl.locks_waiting.is_empty() {
        out.push_str(&format!(
            "\nlocks waiting: {}",
            ttl.locks_waiting.join(", ")
        ));
    }
    if !ttl.owner.is_empty() {
        out.push_str(&format!("\nowner: {}", ttl.owner));
    }
    out
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

pub(crate) fn leases_json(leases: &[LeaseSummary]) -> Value {
    let leases: Vec<Value> = leases
        .iter()
        .map(|lease| {
            json!({
                "id": lease.id,
                "ttl_ms": millis(lease.ttl),
                "remaining_ttl_ms": millis(lease.remaining_ttl),
                "key_count": lease.key_count,
                "lock_count": lease.lock_count,
            })
        })
        .collect();
    json!({ "leases": leases })
}

pub(crate) fn leases_text(leases: &[LeaseSummary]) -> String {
    if leases.is_empty() {
        return "no leases".to_owned();
    }
    let rows: Vec<Vec<String>> = leases
        .iter()
        .map(|lease| {
            vec![
                lease.id.to_string(),
                format_ms(millis(lease.ttl)),
                format_ms(millis(lease.remaining_ttl)),
                lease.key_count.to_string(),
                lease.lock_count.to_string(),
            ]
        })
        .collect();
    table(&["ID", "TTL", "REMAINING", "KEYS", "LOCKS"], &rows)
}

/// How a lease ended, as the tail of "lease N ...".
pub(crate) fn expired_reason_text(reason: ExpiredReason) -> &'static str {
    match reason {
        ExpiredReason::DeadlinePassed => "could not be renewed before its safe deadline",
        ExpiredReason::NotFound => "expired or was revoked",
        ExpiredReason::Revoked => "was revoked",
    }
}

/// A value or `-` for an absent lease.
fn lease_cell(lease: u64) -> String {
    match lease {
        0 => "-".to_owned(),
        lease => lease.to_string(),
    }
}

/// One watch event: `type` (put, delete, expire, revoke), `key`, `value` (puts only), `lease`
/// (put: the key's lease, 0 = none; expire/revoke: the lease that ended; delete: 0) and
/// `revision`; with `--prev-kv` also `prev_kv` (null if the key did not exist).
pub(crate) fn watch_event_json(event: &WatchEvent, with_prev: bool) -> Value {
    let mut value = json!({
        "type": event.kind.as_str(),
        "key": text(event.key()),
        "lease": event.lease,
        "revision": event.revision,
    });
    if event.kind == EventKind::Put {
        value["value"] = json!(text(&event.kv.value));
    }
    if with_prev {
        value["prev_kv"] = event.prev_kv.as_ref().map_or(Value::Null, kv_json);
    }
    value
}

pub(crate) fn watch_event_text(event: &WatchEvent, with_prev: bool) -> String {
    let key = text(event.key());
    let kind = event.kind.as_str().to_uppercase();
    let revision = event.revision;
    let mut line = match event.kind {
        EventKind::Put if event.lease == LeaseId::NONE => {
            format!(
                "{kind:<6}  {key} = {}  (revision {revision})",
                text(&event.kv.value)
            )
        }
        EventKind::Put => format!(
            "{kind:<6}  {key} = {}  (lease {}, revision {revision})",
            text(&event.kv.value),
            event.lease
        ),
        EventKind::Delete => format!("{kind:<6}  {key}  (revision {revision})"),
        EventKind::Expire => {
            format!(
                "{kind:<6}  {key}  (lease {} expired, revision {revision})",
                event.lease
            )
        }
        EventKind::Revoke => {
            format!(
                "{kind:<6}  {key}  (lease {} revoked, revision {revision})",
                event.lease
            )
        }
    };
    if with_prev {
        match &event.prev_kv {
            Some(prev) => line.push_str(&format!("  previous: {}", text(&prev.value))),
            None => line.push_str("  previous: none"),
        }
    }
    line
}

fn presence_member_json(event: &str, member: &PresenceMember) -> Value {
    json!({
        "event": event,
        "member": member.name,
        "metadata": text(&member.metadata),
        "lease": member.lease,
        "revision": member.revision,
    })
}

fn presence_member_text(event: &str, member: &PresenceMember) -> String {
    format!(
        "{event:<7}  {}  {}  (lease {}, revision {})",
        member.name,
        text(&member.metadata),
        member.lease,
        member.revision
    )
}

/// `zaris presence list`: the members and the revision they reflect.
pub(crate) fn presence_list_json(group: &str, members: &[PresenceMember], revision: u64) -> Value {
    let members: Vec<Value> = members
        .iter()
        .map(|member| {
            json!({
                "member": member.name,
                "metadata": text(&member.metadata),
                "lease": member.lease,
                "revision": member.revision,
            })
        })
        .collect();
    json!({ "group": group, "revision": revision, "members": members })
}

pub(crate) fn presence_list_text(group: &str, members: &[PresenceMember], revision: u64) -> String {
    if members.is_empty() {
        return format!("no members in {group} (revision {revision})");
    }
    let rows: Vec<Vec<String>> = members
        .iter()
        .map(|member| {
            vec![
                member.name.clone(),
                text(&member.metadata),
                lease_cell(member.lease.get()),
                member.revision.to_string(),
            ]
        })
        .collect();
    table(&["MEMBER", "METADATA", "LEASE", "REVISION"], &rows)
}

/// A member present when `zaris presence watch` started.
pub(crate) fn presence_initial_json(member: &PresenceMember) -> Value {
    presence_member_json("present", member)
}

pub(crate) fn presence_initial_text(member: &PresenceMember) -> String {
    presence_member_text("present", member)
}

/// A change seen by `zaris presence watch`: `event` is joined, updated or left; a departure has
/// `how` (expire, revoke, delete) and the `lease` that ended (0 for delete).
pub(crate) fn presence_event_json(event: &PresenceEvent) -> Value {
    match event {
        PresenceEvent::Joined(member) => presence_member_json("joined", member),
        PresenceEvent::Updated(member) => presence_member_json("updated", member),
        PresenceEvent::Left {
            name,
            how,
            lease,
            revision,
        } => json!({
            "event": "left",
            "member": name,
            "how": how.as_str(),
            "lease": lease,
            "revision": revision,
        }),
    }
}

pub(crate) fn presence_event_text(event: &PresenceEvent) -> String {
    match event {
        PresenceEvent::Joined(member) => presence_member_text("joined", member),
        PresenceEvent::Updated(member) => presence_member_text("updated", member),
        PresenceEvent::Left {
            name,
            how,
            lease,
            revision,
        } => {
            let lease = match lease.some() {
                None => String::new(),
                Some(lease) => format!("lease {lease}, "),
            };
            format!(
                "{:<7}  {name}  how={}  ({lease}revision {revision})",
                "left",
                how.as_str()
            )
        }
    }
}

/// The leader of an election as `zaris elect --listen` prints it; `leader` is null while there
/// is none.
pub(crate) fn leader_json(election: &str, incumbent: Option<&Incumbent>) -> Value {
    let leader = incumbent.map_or(Value::Null, |incumbent| {
        json!({
            "value": text(&incumbent.value),
            "lease": incumbent.lease,
            "revision": incumbent.revision,
        })
    });
    json!({ "election": election, "leader": leader })
}

pub(crate) fn leader_text(election: &str, incumbent: Option<&Incumbent>) -> String {
    match incumbent {
        Some(incumbent) => format!(
            "{election} = {}  (lease {}, revision {})",
            text(&incumbent.value),
            incumbent.lease,
            incumbent.revision
        ),
        None => format!("{election}: no leader"),
    }
}

fn txn_op_json(result: &TxnOpResult) -> Value {
    match result {
        TxnOpResult::Put { .. } => json!({ "op": "put", "result": "ok" }),
        TxnOpResult::Deleted { deleted, .. } => json!({ "op": "del", "deleted": deleted }),
        TxnOpResult::Range(range) => json!({
            "op": "get",
            "kvs": range.kvs.iter().map(kv_json).collect::<Vec<_>>(),
            "count": range.count,
            "more": range.more,
        }),
    }
}

/// `zaris txn`: the branch that ran (`result`: succeeded or failed) and one entry per operation
/// of that branch. (A refused transaction, guard_failed or lease_not_found, is printed by the
/// command as `{"result": ...}` alone.)
pub(crate) fn txn_json(txn: &TxnOutcome) -> Value {
    let responses: Vec<Value> = txn.results.iter().map(txn_op_json).collect();
    json!({
        "result": if txn.succeeded { "succeeded" } else { "failed" },
        "revision": txn.revision,
        "responses": responses,
    })
}

pub(crate) fn txn_text(txn: &TxnOutcome) -> String {
    let branch = if txn.succeeded {
        "succeeded: the --then operations ran"
    } else {
        "failed: the --else operations ran"
    };
    let mut out = format!("{branch} (revision {})", txn.revision);
    for op in &txn.results {
        out.push('\n');
        match op {
            TxnOpResult::Put { .. } => out.push_str("put: ok"),
            TxnOpResult::Deleted { deleted, .. } => {
                let noun = if *deleted == 1 { "key" } else { "keys" };
                out.push_str(&format!("del: deleted {deleted} {noun}"));
            }
            TxnOpResult::Range(range) if range.kvs.is_empty() => out.push_str("get: no keys"),
            TxnOpResult::Range(range) => {
                out.push_str("get:\n");
                out.push_str(&kvs_text(&range.kvs, range.more, range.count));
            }
        }
    }
    out
}

/// One line describing a client error for people, saying whether the operation may have
/// happened when that is in doubt. `endpoints` are the endpoints the client tried.
///
/// `read_only`: the command changes nothing, so its outcome is never in doubt.
pub(crate) fn describe_error(
    err: &zaris_client::Error,
    endpoints: &[String],
    read_only: bool,
) -> String {
    use zaris_client::Error;

    let unknown_outcome = if err.is_definite() || read_only {
        ""
    } else {
        "; the outcome is unknown: it may or may not have taken effect"
    };
    // A TLS node's own answer to plaintext: it was reached, and said what it needs.
    if let Some(rpc) = err.rpc().filter(|rpc| rpc.is_plaintext_refused()) {
        return format!(
            "{} requires TLS, and this client spoke plaintext: give --cacert FILE (or \
             ZARIS_CACERT), and --cert/--key where the cluster asks for a client certificate",
            rpc.endpoint()
        );
    }
    // Why a TLS session failed and what to check (the I/O error's kind alone, "invalid data",
    // would say nothing). A client certificate the member refused comes as its answer instead.
    if let Some(rpc) = err.rpc().filter(|rpc| rpc.detail().is_none())
        && let Some(tls) = rpc.tls_failure()
    {
        let sent = if err.is_definite() {
            "; nothing was sent"
        } else {
            unknown_outcome
        };
        return format!(
            "TLS with {} failed: {}; {}{sent}",
            rpc.endpoint(),
            rpc.cause().unwrap_or("refused"),
            tls.hint(),
        );
    }
    if err.is_connect_failure() {
        let reason = err
            .rpc()
            .and_then(|rpc| {
                // The kind reads better ("connection refused"), unless it says nothing (a DNS
                // failure is "uncategorized"): then the cause itself.
                rpc.io_error_kind()
                    .filter(|kind| {
                        *kind != std::io::ErrorKind::Other
                            && kind.to_string() != "uncategorized error"
                    })
                    .map(|kind| kind.to_string())
                    .or_else(|| rpc.cause().map(str::to_owned))
            })
            .unwrap_or_else(|| "connection failed".to_owned());
        return format!(
            "cannot reach any endpoint ({}): {reason}{unknown_outcome}",
            endpoints.join(", ")
        );
    }
    match err {
        Error::DeadlineExhausted {
            attempts,
            elapsed,
            last,
            ..
        } => {
            // Redirected to a leader to the end: the cluster has one, but this client could not
            // reach it (a name only the cluster's network resolves, seen from outside it).
            let unreached_leader = last
                .detail()
                .filter(|d| d.code() == ErrorCode::NotLeader && !d.raft_leader_address.is_empty())
                .map(|d| (d.raft_leader_id, d.raft_leader_address.clone()));
            let what = match (last.error_code(), &unreached_leader) {
                (_, Some((id, address))) => {
                    format!("the Raft leader, member {id} at {address}, could not be reached")
                }
                (Some(ErrorCode::NoLeader | ErrorCode::NotLeader), None) => {
                    "no Raft leader available".to_owned()
                }
                (Some(ErrorCode::ShuttingDown), None) => "the cluster is shutting down".to_owned(),
                _ => "no endpoint could serve the request".to_owned(),
            };
            let hint = match &unreached_leader {
                Some((id, _)) => format!(
                    "; if this client cannot reach that address, add an endpoint of member {id} \
                     (for a compose cluster: every node's published port)"
                ),
                None => String::new(),
            };
            format!(
                "{what} (gave up after {attempts} attempts in {:.1}s): {}{unknown_outcome}{hint}",
                elapsed.as_secs_f64(),
                rpc_message(last),
            )
        }
        Error::Rpc(_) => format!("{}{unknown_outcome}", rpc_message(err)),
        other => other.to_string(),
    }
}

/// The server's own message and error code for an RPC error, or the transport's.
fn rpc_message(err: &zaris_client::Error) -> String {
    let Some(rpc) = err.rpc() else {
        return err.to_string();
    };
    match (rpc.detail(), rpc.error_code()) {
        (Some(detail), Some(code)) => {
            let code = code.as_str_name().trim_start_matches("ERROR_CODE_");
            format!("{} ({code}, from {})", detail.message, rpc.endpoint())
        }
        _ if rpc.message().is_empty() => {
            format!(
                "{}: {} ({:?})",
                rpc.endpoint(),
                rpc.code().description(),
                rpc.code()
            )
        }
        _ => {
            let mut message = format!("{}: {}", rpc.endpoint(), rpc.message());
            if let Some(cause) = rpc.cause().filter(|cause| !rpc.message().contains(cause)) {
                message.push_str(&format!(": {cause}"));
            }
            message
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use zaris_client::proto::{ErrorDetail, Outcome};
    use zaris_client::{Error, RpcError};

    use super::*;

    use zaris_client::{MemberKind, Revision, Role};

    fn member(id: u64, kind: MemberKind) -> ClusterMember {
        ClusterMember {
            id,
            address: format!("127.0.0.1:700{id}"),
            peer_address: format!("127.0.0.1:710{id}"),
            kind,
            matched_index: None,
        }
    }

    #[test]
    fn status_json_has_the_documented_shape() {
        let status = NodeStatus {
            revision: Revision::new(12),
            member_id: 1,
            role: Role::Leader,
            raft_leader_id: Some(1),
            raft_term: 3,
            commit_index: 12,
            applied_index: 11,
            members: vec![member(1, MemberKind::Voter), member(4, MemberKind::Learner)],
            server_version: "0.1.0".into(),
        };
        let value = status_json(&status);
        assert_eq!(value["member_id"], 1);
        assert_eq!(value["leader"], 1);
        assert_eq!(value["term"], 3);
        assert_eq!(value["role"], "leader");
        assert_eq!(value["commit_index"], 12);
        assert_eq!(value["applied_index"], 11);
        assert_eq!(
            value["members"],
            json!([
                {"id": 1, "address": "127.0.0.1:7001", "peer_address": "127.0.0.1:7101", "kind": "voter"},
                {"id": 4, "address": "127.0.0.1:7004", "peer_address": "127.0.0.1:7104", "kind": "learner"},
            ])
        );
        // One line, as -o json promises.
        assert!(!value.to_string().contains('\n'));
        let text = status_text(&status);
        assert!(
            text.starts_with("member 1 (leader), Raft leader 1, term 3"),
            "{text}"
        );
        assert!(text.contains("voter (Raft leader)"), "{text}");

        // A node outside the membership it knows (removed, or still joining) says so.
        let removed = NodeStatus {
            member_id: 9,
            role: Role::Learner,
            ..status
        };
        assert!(
            status_text(&removed).starts_with("node 9 (not a member), Raft leader 1"),
            "{}",
            status_text(&removed)
        );
    }

    #[test]
    fn member_list_from_the_leader_shows_how_far_each_member_has_caught_up() {
        let members = [
            ClusterMember {
                matched_index: Some(40),
                ..member(1, MemberKind::Voter)
            },
            ClusterMember {
                matched_index: Some(12),
                ..member(4, MemberKind::Learner)
            },
        ];
        let text = members_table(&members, Some(1));
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|line| line.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            ["ID", "ADDRESS", "PEER", "ADDRESS", "KIND", "MATCHED"],
            "{text}"
        );
        assert_eq!(
            rows[2],
            ["4", "127.0.0.1:7004", "127.0.0.1:7104", "learner", "12"],
            "{text}"
        );
        assert_eq!(members_json(&members)["members"][1]["matched_index"], 12);
    }

    #[test]
    fn range_json_decodes_keys_and_values_lossily() {
        let range = Range {
            revision: Revision::new(9),
            kvs: vec![
                KeyValue {
                    key: b"a".to_vec(),
                    value: b"1".to_vec(),
                    create_revision: Revision::new(3),
                    mod_revision: Revision::new(5),
                    version: 2,
                    lease: LeaseId::new(7).some(),
                },
                KeyValue {
                    key: b"b".to_vec(),
                    value: vec![0xff, b'x'],
                    create_revision: Revision::new(4),
                    mod_revision: Revision::new(4),
                    version: 1,
                    lease: LeaseId::new(0).some(),
                },
            ],
            more: true,
            count: 3,
        };
        assert_eq!(
            range_json(&range),
            json!({
                "kvs": [
                    {"key": "a", "value": "1", "lease": 7, "mod_revision": 5,
                     "create_revision": 3, "version": 2},
                    {"key": "b", "value": "\u{fffd}x", "lease": 0, "mod_revision": 4,
                     "create_revision": 4, "version": 1},
                ],
                "count": 3,
                "more": true,
            })
        );
        let text = range_text(&range);
        assert_eq!(
            text.lines().next(),
            Some("KEY  VALUE  LEASE  MOD_REV  VERSION")
        );
        assert!(text.contains("a    1      7      5        2"), "{text}");
        assert!(
            text.ends_with("(2 of 3 keys shown; use --limit to see more)"),
            "{text}"
        );
    }

    #[test]
    fn put_and_delete_json() {
        let put = Written {
            revision: Revision::new(10),
            prev_kv: None,
        };
        assert_eq!(
            put_json(&put, false),
            json!({"revision": 10, "result": "ok"})
        );
        assert_eq!(
            put_json(&put, true),
            json!({"revision": 10, "result": "ok", "prev_kv": null})
        );
        assert_eq!(put_text(&put, true), "OK (revision 10)\nno previous value");

        let delete = Deleted {
            revision: Revision::new(11),
            deleted: 2,
            prev_kvs: Vec::new(),
        };
        assert_eq!(delete_json(&delete), json!({"deleted": 2, "revision": 11}));
        assert_eq!(delete_text(&delete), "deleted 2 keys (revision 11)");
    }

    #[test]
    fn lease_json_shapes() {
        assert_eq!(grant_json(7, 10_000), json!({"id": 7, "ttl_ms": 10_000}));
        let ttl = LeaseInfo {
            revision: Revision::new(5),
            id: LeaseId::new(7),
            ttl: Duration::from_millis(10_000),
            remaining_ttl: Duration::from_millis(8_200),
            granted_revision: Revision::new(2),
            renewed_revision: Revision::new(4),
            bound_keys: vec![b"svc/a".to_vec()],
            keys_truncated: false,
            locks_held: vec!["db".into()],
            locks_waiting: Vec::new(),
            owner: String::new(),
        };
        let value = time_to_live_json(Some(&ttl), 7);
        assert_eq!(value["id"], 7);
        assert_eq!(value["found"], true);
        assert_eq!(value["ttl_ms"], 10_000);
        assert_eq!(value["remaining_ttl_ms"], 8_200);
        assert_eq!(value["keys"], json!(["svc/a"]));
        assert_eq!(value["locks_held"], json!(["db"]));
        let text = time_to_live_text(&ttl, true);
        assert!(
            text.starts_with("lease 7: TTL 10s, remaining 8.2s"),
            "{text}"
        );
        assert!(text.contains("keys: svc/a"), "{text}");
        assert!(text.contains("locks held: db"), "{text}");

        assert_eq!(time_to_live_json(None, 9), json!({"id": 9, "found": false}));

        let leases = [LeaseSummary {
            id: LeaseId::new(7),
            ttl: Duration::from_millis(10_000),
            remaining_ttl: Duration::from_millis(9_000),
            key_count: 1,
            lock_count: 0,
            ..LeaseSummary::default()
        }];
        assert_eq!(
            leases_json(&leases),
            json!({"leases": [{"id": 7, "ttl_ms": 10_000, "remaining_ttl_ms": 9_000,
                               "key_count": 1, "lock_count": 0}]})
        );
        assert_eq!(leases_text(&[]), "no leases");
    }

    #[test]
    fn a_compacted_watch_and_a_lost_lease_read_as_one_line() {
        let endpoints = vec!["127.0.0.1:7001".to_owned()];
        let compacted = Error::Compacted {
            requested: Revision::new(1),
            compact_revision: Revision::new(40),
        };
        let text = describe_error(&compacted, &endpoints, true);
        assert_eq!(
            text,
            "watch from revision 1 is no longer possible: history starts at revision 40; \
             re-read and watch again"
        );
        let lost = Error::LeaseLost {
            id: LeaseId::new(7),
            reason: "it was revoked".into(),
        };
        assert_eq!(
            describe_error(&lost, &endpoints, false),
            "lease 7 is no longer valid (it was revoked)"
        );
    }

    #[test]
    fn lease_list_text_shows_remaining_ttl_keys_and_locks() {
        let leases = [
            LeaseSummary {
                id: LeaseId::new(7),
                ttl: Duration::from_millis(10_000),
                remaining_ttl: Duration::from_millis(8_500),
                key_count: 2,
                lock_count: 1,
                ..LeaseSummary::default()
            },
            LeaseSummary {
                id: LeaseId::new(12),
                ttl: Duration::from_millis(2_000),
                remaining_ttl: Duration::from_millis(900),
                key_count: 0,
                lock_count: 0,
                ..LeaseSummary::default()
            },
        ];
        assert_eq!(
            leases_text(&leases),
            "ID  TTL  REMAINING  KEYS  LOCKS\n\
             7   10s  8.5s       2     1\n\
             12  2s   900ms      0     0"
        );
    }

    fn kv(key: &str, value: &str, lease: u64, revision: u64) -> KeyValue {
        KeyValue {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            create_revision: Revision::new(revision),
            mod_revision: Revision::new(revision),
            version: 1,
            lease: LeaseId::new(lease).some(),
        }
    }

    #[test]
    fn watch_events_name_the_kind_key_lease_and_revision() {
        let put = WatchEvent {
            kind: EventKind::Put,
            kv: kv("svc/a", "up", 7, 12),
            prev_kv: None,
            lease: LeaseId::new(7),
            revision: Revision::new(12),
        };
        assert_eq!(
            watch_event_json(&put, false),
            json!({"type": "put", "key": "svc/a", "value": "up", "lease": 7, "revision": 12})
        );
        assert_eq!(
            watch_event_text(&put, false),
            "PUT     svc/a = up  (lease 7, revision 12)"
        );
        assert_eq!(watch_event_json(&put, true)["prev_kv"], Value::Null);
        assert!(watch_event_text(&put, true).ends_with("previous: none"));

        let expire = WatchEvent {
            kind: EventKind::Expire,
            kv: kv("svc/a", "", 0, 0),
            prev_kv: Some(kv("svc/a", "up", 7, 12)),
            lease: LeaseId::new(7),
            revision: Revision::new(15),
        };
        let value = watch_event_json(&expire, true);
        assert_eq!(value["type"], "expire");
        assert_eq!(value["lease"], 7);
        assert_eq!(value["revision"], 15);
        assert!(value.get("value").is_none(), "removals carry no value");
        assert_eq!(value["prev_kv"]["value"], "up");
        assert_eq!(
            watch_event_text(&expire, true),
            "EXPIRE  svc/a  (lease 7 expired, revision 15)  previous: up"
        );
        let revoke = WatchEvent {
            kind: EventKind::Revoke,
            ..expire.clone()
        };
        assert!(watch_event_text(&revoke, false).contains("lease 7 revoked"));
        let delete = WatchEvent {
            kind: EventKind::Delete,
            lease: LeaseId::NONE,
            ..expire
        };
        assert_eq!(
            watch_event_text(&delete, false),
            "DELETE  svc/a  (revision 15)"
        );
    }

    #[test]
    fn presence_and_election_output() {
        let member = PresenceMember {
            name: "w-1".into(),
            metadata: b"10.0.0.7:80".to_vec(),
            lease: LeaseId::new(7),
            revision: Revision::new(12),
        };
        assert_eq!(
            presence_list_json("workers", std::slice::from_ref(&member), 14),
            json!({"group": "workers", "revision": 14, "members": [
                {"member": "w-1", "metadata": "10.0.0.7:80", "lease": 7, "revision": 12}]})
        );
        assert_eq!(
            presence_list_text("workers", std::slice::from_ref(&member), 14),
            "MEMBER  METADATA     LEASE  REVISION\n\
             w-1     10.0.0.7:80  7      12"
        );
        assert_eq!(
            presence_list_text("workers", &[], 14),
            "no members in workers (revision 14)"
        );
        assert_eq!(presence_initial_json(&member)["event"], "present");
        assert_eq!(
            presence_event_json(&PresenceEvent::Joined(member.clone()))["event"],
            "joined"
        );
        assert_eq!(
            presence_event_text(&PresenceEvent::Updated(member)),
            "updated  w-1  10.0.0.7:80  (lease 7, revision 12)"
        );
        let left = PresenceEvent::Left {
            name: "w-1".into(),
            how: EventKind::Expire,
            lease: LeaseId::new(7),
            revision: Revision::new(20),
        };
        assert_eq!(
            presence_event_json(&left),
            json!({"event": "left", "member": "w-1", "how": "expire", "lease": 7, "revision": 20})
        );
        assert_eq!(
            presence_event_text(&left),
            "left     w-1  how=expire  (lease 7, revision 20)"
        );

        let incumbent = Incumbent {
            value: b"node-a".to_vec(),
            lease: LeaseId::new(9),
            revision: Revision::new(30),
        };
        assert_eq!(
            leader_json("scheduler", Some(&incumbent)),
            json!({"election": "scheduler",
                   "leader": {"value": "node-a", "lease": 9, "revision": 30}})
        );
        assert_eq!(
            leader_json("scheduler", None),
            json!({"election": "scheduler", "leader": null})
        );
        assert_eq!(
            leader_text("scheduler", Some(&incumbent)),
            "scheduler = node-a  (lease 9, revision 30)"
        );
        assert_eq!(leader_text("scheduler", None), "scheduler: no leader");
        assert_eq!(
            expired_reason_text(ExpiredReason::DeadlinePassed),
            "could not be renewed before its safe deadline"
        );
    }

    #[test]
    fn txn_output_names_the_branch_and_each_result() {
        let txn = TxnOutcome {
            revision: Revision::new(21),
            succeeded: true,
            results: vec![
                TxnOpResult::Put { prev_kv: None },
                TxnOpResult::Deleted {
                    deleted: 1,
                    prev_kvs: Vec::new(),
                },
                TxnOpResult::Range(Range {
                    kvs: vec![kv("k", "v", 0, 21)],
                    count: 1,
                    more: false,
                    revision: Revision::new(21),
                }),
            ],
        };
        assert_eq!(
            txn_json(&txn),
            json!({"result": "succeeded", "revision": 21, "responses": [
                {"op": "put", "result": "ok"},
                {"op": "del", "deleted": 1},
                {"op": "get", "count": 1, "more": false, "kvs": [
                    {"key": "k", "value": "v", "lease": 0, "mod_revision": 21,
                     "create_revision": 21, "version": 1}]},
            ]})
        );
        let text = txn_text(&txn);
        assert!(
            text.starts_with(
                "succeeded: the --then operations ran (revision 21)\nput: ok\n\
                              del: deleted 1 key\nget:\nKEY"
            ),
            "{text}"
        );
        let failed = TxnOutcome {
            succeeded: false,
            results: Vec::new(),
            ..txn
        };
        assert_eq!(txn_json(&failed)["result"], "failed");
        assert_eq!(
            txn_text(&failed),
            "failed: the --else operations ran (revision 21)"
        );
    }

    #[test]
    fn members_json_lists_every_member() {
        let members = [member(1, MemberKind::Voter), member(2, MemberKind::Voter)];
        assert_eq!(
            members_json(&members),
            json!({"members": [
                {"id": 1, "address": "127.0.0.1:7001", "peer_address": "127.0.0.1:7101", "kind": "voter"},
                {"id": 2, "address": "127.0.0.1:7002", "peer_address": "127.0.0.1:7102", "kind": "voter"},
            ]})
        );
    }

    #[test]
    fn table_aligns_columns() {
        let rows = vec![
            vec![
                "1".to_owned(),
                "long-address:1".to_owned(),
                "voter".to_owned(),
            ],
            vec!["22".to_owned(), "a:2".to_owned(), "learner".to_owned()],
        ];
        assert_eq!(
            table(&["ID", "ADDRESS", "KIND"], &rows),
            "ID  ADDRESS         KIND\n\
             1   long-address:1  voter\n\
             22  a:2             learner"
        );
    }

    #[test]
    fn errors_read_as_one_line_and_say_when_the_outcome_is_unknown() {
        let endpoints = vec!["127.0.0.1:7001".to_owned()];
        let lost = ErrorDetail::new(
            ErrorCode::LeadershipLost,
            Outcome::Indeterminate,
            "leadership lost before the entry committed",
        );
        let err = Error::from(RpcError::from_status(&lost.into_status(), "127.0.0.1:7001"));
        let text = describe_error(&err, &endpoints, false);
        assert_eq!(
            text,
            "leadership lost before the entry committed (LEADERSHIP_LOST, from 127.0.0.1:7001); \
             the outcome is unknown: it may or may not have taken effect"
        );
        // A read changes nothing: its failure never leaves anything in doubt.
        assert_eq!(
            describe_error(&err, &endpoints, true),
            "leadership lost before the entry committed (LEADERSHIP_LOST, from 127.0.0.1:7001)"
        );

        let ttl = ErrorDetail::new(
            ErrorCode::TtlOutOfRange,
            Outcome::Definite,
            "ttl_ms 10 is below min_ttl_ms 2000",
        );
        let err = Error::from(RpcError::from_status(&ttl.into_status(), "127.0.0.1:7001"));
        assert_eq!(
            describe_error(&err, &endpoints, false),
            "ttl_ms 10 is below min_ttl_ms 2000 (TTL_OUT_OF_RANGE, from 127.0.0.1:7001)"
        );

        let err = Error::DeadlineExhausted {
            attempts: 4,
            elapsed: Duration::from_millis(10_000),
            last: Box::new(Error::from(RpcError::from_status(
                &zaris_client::proto::ErrorDetail::new(
                    ErrorCode::NoLeader,
                    Outcome::Definite,
                    "no Raft leader is known",
                )
                .into_status(),
                "127.0.0.1:7001",
            ))),
            outcome: Outcome::Definite,
        };
        let text = describe_error(&err, &endpoints, false);
        assert!(
            text.starts_with("no Raft leader available (gave up after 4 attempts in 10.0s)"),
            "{text}"
        );
        assert!(!text.contains('\n'));

        // Redirected to the end to a leader this client could not reach (issue 11: a compose
        // cluster's service name, seen from the host).
        let mut redirect = zaris_client::proto::ErrorDetail::new(
            ErrorCode::NotLeader,
            Outcome::Definite,
            "not the Raft leader",
        );
        redirect.raft_leader_id = 1;
        redirect.raft_leader_address = "zaris-1:7001".into();
        let err = Error::DeadlineExhausted {
            attempts: 19,
            elapsed: Duration::from_millis(9_600),
            last: Box::new(Error::from(RpcError::from_status(
                &redirect.into_status(),
                "127.0.0.3:7002",
            ))),
            outcome: Outcome::Definite,
        };
        let text = describe_error(&err, &endpoints, false);
        assert!(
            text.starts_with(
                "the Raft leader, member 1 at zaris-1:7001, could not be reached (gave up after 19 attempts"
            ) && text.ends_with("add an endpoint of member 1 (for a compose cluster: every node's published port)"),
            "{text}"
        );
    }
}
