//! What the client subcommands print: one JSON object per line with `-o json`, aligned text
//! otherwise. Pure functions from responses to text, so they are tested without a cluster.

use serde_json::{Value, json};
use zaris_client::proto::{
    DeleteRangeResponse, ErrorCode, KeyValue, LeaseSummary, LeaseTimeToLiveResponse, Member,
    MemberKind, NodeRole, PutResponse, PutResult, RangeResponse, ResponseHeader, RevokeResult,
    StatusResponse,
};

use super::duration::format_ms;

/// The revision a response reflects (0 if it came without a header).
pub(crate) fn revision(header: Option<&ResponseHeader>) -> u64 {
    header.map_or(0, |header| header.revision)
}

/// Bytes as text for display; invalid UTF-8 is replaced, not rejected.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn role_name(role: i32) -> &'static str {
    match NodeRole::try_from(role) {
        Ok(NodeRole::Leader) => "leader",
        Ok(NodeRole::Follower) => "follower",
        Ok(NodeRole::Candidate) => "candidate",
        Ok(NodeRole::Learner) => "learner",
        Ok(NodeRole::Shutdown) => "shutdown",
        Ok(NodeRole::Unspecified) | Err(_) => "unknown",
    }
}

pub(crate) fn kind_name(kind: i32) -> &'static str {
    match MemberKind::try_from(kind) {
        Ok(MemberKind::Voter) => "voter",
        Ok(MemberKind::Learner) => "learner",
        Ok(MemberKind::Unspecified) | Err(_) => "unknown",
    }
}

pub(crate) fn put_result_name(result: i32) -> &'static str {
    match PutResult::try_from(result) {
        Ok(PutResult::Ok) => "ok",
        Ok(PutResult::GuardFailed) => "guard_failed",
        Ok(PutResult::LeaseNotFound) => "lease_not_found",
        Ok(PutResult::Unspecified) | Err(_) => "unknown",
    }
}

pub(crate) fn revoke_result_name(result: i32) -> &'static str {
    match RevokeResult::try_from(result) {
        Ok(RevokeResult::Revoked) => "revoked",
        Ok(RevokeResult::NotFound) => "not_found",
        Ok(RevokeResult::Unspecified) | Err(_) => "unknown",
    }
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

pub(crate) fn member_json(member: &Member) -> Value {
    json!({
        "id": member.id,
        "address": member.address,
        "kind": kind_name(member.kind),
    })
}

pub(crate) fn members_json(members: &[Member]) -> Value {
    json!({ "members": members.iter().map(member_json).collect::<Vec<_>>() })
}

pub(crate) fn members_table(members: &[Member], raft_leader_id: u64) -> String {
    let rows: Vec<Vec<String>> = members
        .iter()
        .map(|m| {
            let mut kind = kind_name(m.kind).to_owned();
            if m.id == raft_leader_id && raft_leader_id != 0 {
                kind.push_str(" (Raft leader)");
            }
            vec![m.id.to_string(), m.address.clone(), kind]
        })
        .collect();
    table(&["ID", "ADDRESS", "KIND"], &rows)
}

pub(crate) fn status_json(status: &StatusResponse) -> Value {
    json!({
        "member_id": status.member_id,
        "leader": status.raft_leader_id,
        "term": status.raft_term,
        "role": role_name(status.role),
        "commit_index": status.commit_index,
        "applied_index": status.applied_index,
        "revision": revision(status.header.as_ref()),
        "server_version": status.server_version,
        "members": status.members.iter().map(member_json).collect::<Vec<_>>(),
    })
}

pub(crate) fn status_text(status: &StatusResponse) -> String {
    let raft_leader = match status.raft_leader_id {
        0 => "none known".to_owned(),
        id => id.to_string(),
    };
    format!(
        "member {} ({}), Raft leader {}, term {}\n\
         commit index {}, applied index {}, revision {}, server {}\n\n{}",
        status.member_id,
        role_name(status.role),
        raft_leader,
        status.raft_term,
        status.commit_index,
        status.applied_index,
        revision(status.header.as_ref()),
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
        "lease": kv.lease,
        "mod_revision": kv.mod_revision,
        "create_revision": kv.create_revision,
        "version": kv.version,
    })
}

pub(crate) fn range_json(range: &RangeResponse) -> Value {
    json!({
        "kvs": range.kvs.iter().map(kv_json).collect::<Vec<_>>(),
        "count": range.count,
        "more": range.more,
    })
}

pub(crate) fn range_text(range: &RangeResponse) -> String {
    let rows: Vec<Vec<String>> = range
        .kvs
        .iter()
        .map(|kv| {
            vec![
                text(&kv.key),
                text(&kv.value),
                match kv.lease {
                    0 => "-".to_owned(),
                    lease => lease.to_string(),
                },
                kv.mod_revision.to_string(),
                kv.version.to_string(),
            ]
        })
        .collect();
    let mut out = table(&["KEY", "VALUE", "LEASE", "MOD_REV", "VERSION"], &rows);
    if range.more {
        out.push_str(&format!(
            "\n({} of {} keys shown; use --limit to see more)",
            range.kvs.len(),
            range.count
        ));
    }
    out
}

pub(crate) fn put_json(put: &PutResponse, with_prev: bool) -> Value {
    let mut value = json!({
        "revision": revision(put.header.as_ref()),
        "result": put_result_name(put.result),
    });
    if with_prev {
        value["prev_kv"] = put.prev_kv.as_ref().map_or(Value::Null, kv_json);
    }
    value
}

pub(crate) fn put_text(put: &PutResponse, with_prev: bool) -> String {
    let mut out = format!("OK (revision {})", revision(put.header.as_ref()));
    if with_prev {
        match &put.prev_kv {
            Some(prev) => out.push_str(&format!("\nprevious value: {}", text(&prev.value))),
            None => out.push_str("\nno previous value"),
        }
    }
    out
}

pub(crate) fn delete_json(delete: &DeleteRangeResponse) -> Value {
    json!({
        "deleted": delete.deleted,
        "revision": revision(delete.header.as_ref()),
    })
}

pub(crate) fn delete_text(delete: &DeleteRangeResponse) -> String {
    let noun = if delete.deleted == 1 { "key" } else { "keys" };
    format!(
        "deleted {} {noun} (revision {})",
        delete.deleted,
        revision(delete.header.as_ref())
    )
}

pub(crate) fn grant_json(id: u64, ttl_ms: u64) -> Value {
    json!({ "id": id, "ttl_ms": ttl_ms })
}

pub(crate) fn time_to_live_json(ttl: &LeaseTimeToLiveResponse, id: u64) -> Value {
    if !ttl.found {
        return json!({ "id": id, "found": false });
    }
    json!({
        "id": ttl.id,
        "found": true,
        "ttl_ms": ttl.ttl_ms,
        "remaining_ttl_ms": ttl.remaining_ttl_ms,
        "granted_revision": ttl.granted_revision,
        "renewed_revision": ttl.renewed_revision,
        "keys": ttl.bound_keys.iter().map(|k| text(k)).collect::<Vec<_>>(),
        "keys_truncated": ttl.keys_truncated,
        "locks_held": ttl.locks_held,
        "locks_waiting": ttl.locks_waiting,
    })
}

pub(crate) fn time_to_live_text(ttl: &LeaseTimeToLiveResponse, with_keys: bool) -> String {
    let mut out = format!(
        "lease {}: TTL {}, remaining {}, granted at revision {}, renewed at revision {}",
        ttl.id,
        format_ms(ttl.ttl_ms),
        format_ms(ttl.remaining_ttl_ms),
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
                "ttl_ms": lease.ttl_ms,
                "remaining_ttl_ms": lease.remaining_ttl_ms,
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
                format_ms(lease.ttl_ms),
                format_ms(lease.remaining_ttl_ms),
                lease.key_count.to_string(),
                lease.lock_count.to_string(),
            ]
        })
        .collect();
    table(&["ID", "TTL", "REMAINING", "KEYS", "LOCKS"], &rows)
}

/// One line describing a client error for people, saying whether the operation may have
/// happened when that is in doubt. `endpoints` are the endpoints the client tried.
pub(crate) fn describe_error(err: &zaris_client::Error, endpoints: &[String]) -> String {
    use zaris_client::Error;

    let unknown_outcome = if err.is_definite() {
        ""
    } else {
        "; the outcome is unknown: it may or may not have taken effect"
    };
    if err.is_connect_failure() {
        let reason = err
            .rpc()
            .and_then(|rpc| {
                rpc.io_error_kind()
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
            let what = match last.error_code() {
                Some(ErrorCode::NoLeader | ErrorCode::NotLeader) => "no Raft leader available",
                Some(ErrorCode::ShuttingDown) => "the cluster is shutting down",
                _ => "no endpoint could serve the request",
            };
            format!(
                "{what} (gave up after {attempts} attempts in {:.1}s): {}{unknown_outcome}",
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

    fn header(revision: u64) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            cluster_id: 1,
            member_id: 1,
            revision,
            raft_term: 2,
        })
    }

    fn member(id: u64, kind: MemberKind) -> Member {
        Member {
            id,
            address: format!("127.0.0.1:700{id}"),
            kind: kind.into(),
            matched_index: 0,
        }
    }

    #[test]
    fn status_json_has_the_documented_shape() {
        let status = StatusResponse {
            header: header(12),
            member_id: 1,
            role: NodeRole::Leader.into(),
            raft_leader_id: 1,
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
                {"id": 1, "address": "127.0.0.1:7001", "kind": "voter"},
                {"id": 4, "address": "127.0.0.1:7004", "kind": "learner"},
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
    }

    #[test]
    fn range_json_decodes_keys_and_values_lossily() {
        let range = RangeResponse {
            header: header(9),
            kvs: vec![
                KeyValue {
                    key: b"a".to_vec(),
                    value: b"1".to_vec(),
                    create_revision: 3,
                    mod_revision: 5,
                    version: 2,
                    lease: 7,
                },
                KeyValue {
                    key: b"b".to_vec(),
                    value: vec![0xff, b'x'],
                    create_revision: 4,
                    mod_revision: 4,
                    version: 1,
                    lease: 0,
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
        let put = PutResponse {
            header: header(10),
            result: PutResult::GuardFailed.into(),
            prev_kv: None,
        };
        assert_eq!(
            put_json(&put, false),
            json!({"revision": 10, "result": "guard_failed"})
        );
        assert_eq!(
            put_json(&put, true),
            json!({"revision": 10, "result": "guard_failed", "prev_kv": null})
        );
        let put = PutResponse {
            result: PutResult::LeaseNotFound.into(),
            ..put
        };
        assert_eq!(put_json(&put, false)["result"], "lease_not_found");
        let put = PutResponse { result: 99, ..put };
        assert_eq!(put_json(&put, false)["result"], "unknown");

        let delete = DeleteRangeResponse {
            header: header(11),
            result: 1,
            deleted: 2,
            prev_kvs: Vec::new(),
        };
        assert_eq!(delete_json(&delete), json!({"deleted": 2, "revision": 11}));
        assert_eq!(delete_text(&delete), "deleted 2 keys (revision 11)");
    }

    #[test]
    fn lease_json_shapes() {
        assert_eq!(grant_json(7, 10_000), json!({"id": 7, "ttl_ms": 10_000}));
        let ttl = LeaseTimeToLiveResponse {
            header: header(5),
            found: true,
            id: 7,
            ttl_ms: 10_000,
            remaining_ttl_ms: 8_200,
            granted_revision: 2,
            renewed_revision: 4,
            bound_keys: vec![b"svc/a".to_vec()],
            keys_truncated: false,
            locks_held: vec!["db".into()],
            locks_waiting: Vec::new(),
        };
        let value = time_to_live_json(&ttl, 7);
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

        let missing = LeaseTimeToLiveResponse::default();
        assert_eq!(
            time_to_live_json(&missing, 9),
            json!({"id": 9, "found": false})
        );

        let leases = [LeaseSummary {
            id: 7,
            ttl_ms: 10_000,
            remaining_ttl_ms: 9_000,
            key_count: 1,
            lock_count: 0,
        }];
        assert_eq!(
            leases_json(&leases),
            json!({"leases": [{"id": 7, "ttl_ms": 10_000, "remaining_ttl_ms": 9_000,
                               "key_count": 1, "lock_count": 0}]})
        );
        assert_eq!(leases_text(&[]), "no leases");
        assert_eq!(
            revoke_result_name(RevokeResult::NotFound.into()),
            "not_found"
        );
        assert_eq!(revoke_result_name(RevokeResult::Revoked.into()), "revoked");
    }

    #[test]
    fn members_json_lists_every_member() {
        let members = [member(1, MemberKind::Voter), member(2, MemberKind::Voter)];
        assert_eq!(
            members_json(&members),
            json!({"members": [
                {"id": 1, "address": "127.0.0.1:7001", "kind": "voter"},
                {"id": 2, "address": "127.0.0.1:7002", "kind": "voter"},
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
        let text = describe_error(&err, &endpoints);
        assert_eq!(
            text,
            "leadership lost before the entry committed (LEADERSHIP_LOST, from 127.0.0.1:7001); \
             the outcome is unknown: it may or may not have taken effect"
        );

        let ttl = ErrorDetail::new(
            ErrorCode::TtlOutOfRange,
            Outcome::Definite,
            "ttl_ms 10 is below min_ttl_ms 2000",
        );
        let err = Error::from(RpcError::from_status(&ttl.into_status(), "127.0.0.1:7001"));
        assert_eq!(
            describe_error(&err, &endpoints),
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
        let text = describe_error(&err, &endpoints);
        assert!(
            text.starts_with("no Raft leader available (gave up after 4 attempts in 10.0s)"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }
}
