//! Writers for a recorded [`History`]: EDN for Jepsen's own tools (Knossos, elle-cli) and JSON
//! lines for saving a run and checking it again later with [`from_jsonl`].
//!
//! # EDN format
//!
//! One map per line, keys in this order, `:error` only on a `fail` / `info` that has one:
//!
//! ```text
//! {:type :invoke, :f :read, :process 3, :time 12345, :index 7, :node 2, :value ["k1" nil]}
//! {:type :ok, :f :read, :process 3, :time 12999, :index 9, :node 2, :value ["k1" 4]}
//! {:type :info, :f :cas, :process 1, :time 13000, :index 10, :node 1, :value ["k1" [4 5]], :error "timeout"}
//! ```
//!
//! `:time` is nanoseconds since the run started, `:process` and `:node` are integers.
//!
//! Register calls use Jepsen's independent-key convention, `:value [key v]` with the key as a
//! string, where `v` is what Knossos' `cas-register` model expects: `:read` → the integer read or
//! `nil` (absent, or unknown on an invoke / `fail` / `info`), `:write` → the integer written,
//! `:cas` → `[from to]`. Check such a history with `jepsen.independent/checker` around
//! `checker/linearizable {:model (model/cas-register)}`. Two caveats when feeding it to Jepsen:
//! Jepsen's own independent tuples are `MapEntry`s (which print as these vectors), so a reader
//! that yields plain vectors may need to wrap each `:value` with `independent/tuple`; and Knossos
//! takes a `nil` read as "value unknown" and accepts it in any state, where
//! [`crate::check::linear`] takes it as "absent" — stricter.
//!
//! Every other call's `:value` is a map of its fields in kebab-case, `nil` for an output not
//! known yet: `{:lease 5, :ttl-ms 2000}` (grant), `{:lease 5, :found true}` (renew),
//! `{:lease 5}` (revoke), `{:lease 5, :keys ["a" "b"]}` (put-leased),
//! `{:lease 5, :keys ["a" "b"], :present ["a"]}` (get-leased),
//! `{:lock "l", :lease 5, :token 17}` (acquire), `{:lock "l", :lease 5, :token 17}` (release),
//! `{:resource "r", :token 17, :accepted true}` (fenced-write),
//! `{:lock "l", :token 17, :key "k"}` (guarded-put).

use std::fmt::Write as _;

use anyhow::Context as _;

use crate::history::{Call, History, Kind, Op};

/// The history as EDN, one op per line (see the module docs for the exact format).
pub fn to_edn(history: &History) -> String {
    let mut out = String::new();
    for op in &history.ops {
        write_op(&mut out, op);
        out.push('\n');
    }
    out
}

/// The history as JSON lines: one [`Op`] object per line, as serde writes it.
pub fn to_jsonl(history: &History) -> String {
    let mut out = String::new();
    for op in &history.ops {
        // An `Op` holds only strings, integers, booleans and sequences: serializing cannot fail.
        let line = serde_json::to_string(op).expect("an Op always serializes to JSON");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Parses what [`to_jsonl`] wrote. Blank lines are skipped; an error names the line.
pub fn from_jsonl(text: &str) -> anyhow::Result<History> {
    let mut ops = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let op: Op =
            serde_json::from_str(line).with_context(|| format!("history line {}", n + 1))?;
        ops.push(op);
    }
    Ok(History { ops })
}

fn write_op(out: &mut String, op: &Op) {
    let kind = match op.kind {
        Kind::Invoke => "invoke",
        Kind::Ok => "ok",
        Kind::Fail => "fail",
        Kind::Info => "info",
    };
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "{{:type :{kind}, :f :{}, :process {}, :time {}, :index {}, :node {}, :value ",
        op.call.name(),
        op.process,
        op.time_ns,
        op.index,
        op.node,
    );
    write_value(out, &op.call);
    if let Some(error) = &op.error {
        out.push_str(", :error ");
        write_str(out, error);
    }
    out.push('}');
}

fn write_value(out: &mut String, call: &Call) {
    match call {
        Call::Read { key, value } => tuple(out, key, |out| opt_u64(out, *value)),
        Call::Write { key, value } => tuple(out, key, |out| push_u64(out, *value)),
        Call::Cas { key, from, to } => tuple(out, key, |out| {
            let _ = write!(out, "[{from} {to}]");
        }),
        Call::Grant {
            lease,
            ttl_ms,
            keys,
        } => {
            out.push_str("{:lease ");
            opt_u64(out, *lease);
            let _ = write!(out, ", :ttl-ms {ttl_ms}");
            if !keys.is_empty() {
                out.push_str(", :keys ");
                str_vec(out, keys);
            }
            out.push('}');
        }
        Call::GrantId { lease, ttl_ms } => {
            let _ = write!(out, "{{:lease {lease}, :ttl-ms {ttl_ms}}}");
        }
        Call::Renew { lease, found } | Call::TimeToLive { lease, found } => {
            let _ = write!(out, "{{:lease {lease}, :found ");
            opt_bool(out, *found);
            out.push('}');
        }
        Call::Revoke { lease } => {
            let _ = write!(out, "{{:lease {lease}}}");
        }
        Call::PutLeased { lease, keys } => {
            let _ = write!(out, "{{:lease {lease}, :keys ");
            str_vec(out, keys);
            out.push('}');
        }
        Call::GetLeased {
            lease,
            keys,
            present,
        } => {
            let _ = write!(out, "{{:lease {lease}, :keys ");
            str_vec(out, keys);
            out.push_str(", :present ");
            match present {
                Some(present) => str_vec(out, present),
                None => out.push_str("nil"),
            }
            out.push('}');
        }
        Call::Acquire { lock, lease, token } => {
            out.push_str("{:lock ");
            write_str(out, lock);
            let _ = write!(out, ", :lease {lease}, :token ");
            opt_u64(out, *token);
            out.push('}');
        }
        Call::Release { lock, lease, token } => {
            out.push_str("{:lock ");
            write_str(out, lock);
            let _ = write!(out, ", :lease {lease}, :token {token}}}");
        }
        Call::FencedWrite {
            resource,
            token,
            accepted,
        } => {
            out.push_str("{:resource ");
            write_str(out, resource);
            let _ = write!(out, ", :token {token}, :accepted ");
            opt_bool(out, *accepted);
            out.push('}');
        }
        Call::GuardedPut { lock, token, key } => {
            out.push_str("{:lock ");
            write_str(out, lock);
            let _ = write!(out, ", :token {token}, :key ");
            write_str(out, key);
            out.push('}');
        }
    }
}

/// Jepsen's independent-key tuple `[key v]`.
fn tuple(out: &mut String, key: &str, value: impl FnOnce(&mut String)) {
    out.push('[');
    write_str(out, key);
    out.push(' ');
    value(out);
    out.push(']');
}

fn push_u64(out: &mut String, n: u64) {
    let _ = write!(out, "{n}");
}

fn opt_u64(out: &mut String, n: Option<u64>) {
    match n {
        Some(n) => push_u64(out, n),
        None => out.push_str("nil"),
    }
}

fn opt_bool(out: &mut String, b: Option<bool>) {
    out.push_str(match b {
        Some(true) => "true",
        Some(false) => "false",
        None => "nil",
    });
}

fn str_vec(out: &mut String, items: &[String]) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_str(out, item);
    }
    out.push(']');
}

/// An EDN string literal: the escapes Clojure's reader knows, `\uXXXX` for other controls.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(index: u64, kind: Kind, process: u64, time_ns: u64, call: Call) -> Op {
        Op {
            index,
            kind,
            process,
            node: 2,
            time_ns,
            call,
            error: None,
        }
    }

    fn sample() -> History {
        let mut info = op(
            3,
            Kind::Info,
            1,
            40,
            Call::Cas {
                key: "k1".into(),
                from: 3,
                to: 4,
            },
        );
        info.error = Some("timed out: \"deadline\"\n".into());
        History {
            ops: vec![
                op(
                    0,
                    Kind::Invoke,
                    3,
                    12345,
                    Call::Read {
                        key: "k1".into(),
                        value: None,
                    },
                ),
                op(
                    1,
                    Kind::Ok,
                    3,
                    12400,
                    Call::Read {
                        key: "k1".into(),
                        value: Some(3),
                    },
                ),
                op(
                    2,
                    Kind::Invoke,
                    1,
                    20,
                    Call::Write {
                        key: "k1".into(),
                        value: 7,
                    },
                ),
                info,
                op(
                    4,
                    Kind::Ok,
                    5,
                    50,
                    Call::GetLeased {
                        lease: 9,
                        keys: vec!["a".into(), "b".into()],
                        present: Some(vec!["a".into()]),
                    },
                ),
                op(
                    5,
                    Kind::Invoke,
                    6,
                    60,
                    Call::Grant {
                        lease: None,
                        ttl_ms: 2000,
                        keys: Vec::new(),
                    },
                ),
                op(
                    6,
                    Kind::Ok,
                    7,
                    70,
                    Call::Acquire {
                        lock: "l".into(),
                        lease: 9,
                        token: Some(17),
                    },
                ),
            ],
        }
    }

    #[test]
    fn edn_lines_match_knossos_cas_register_format() {
        let edn = to_edn(&sample());
        let lines: Vec<&str> = edn.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{:type :invoke, :f :read, :process 3, :time 12345, :index 0, :node 2, :value ["k1" nil]}"#,
                r#"{:type :ok, :f :read, :process 3, :time 12400, :index 1, :node 2, :value ["k1" 3]}"#,
                r#"{:type :invoke, :f :write, :process 1, :time 20, :index 2, :node 2, :value ["k1" 7]}"#,
                r#"{:type :info, :f :cas, :process 1, :time 40, :index 3, :node 2, :value ["k1" [3 4]], :error "timed out: \"deadline\"\n"}"#,
                r#"{:type :ok, :f :get-leased, :process 5, :time 50, :index 4, :node 2, :value {:lease 9, :keys ["a" "b"], :present ["a"]}}"#,
                r#"{:type :invoke, :f :grant, :process 6, :time 60, :index 5, :node 2, :value {:lease nil, :ttl-ms 2000}}"#,
                r#"{:type :ok, :f :acquire, :process 7, :time 70, :index 6, :node 2, :value {:lock "l", :lease 9, :token 17}}"#,
            ]
        );
    }

    #[test]
    fn edn_escapes_control_characters() {
        let mut out = String::new();
        write_str(&mut out, "a\\b\u{1}");
        assert_eq!(out, r#""a\\b\u0001""#);
    }

    #[test]
    fn jsonl_round_trips_every_call() {
        let mut history = sample();
        let extra = [
            Call::Renew {
                lease: 1,
                found: Some(false),
            },
            Call::Revoke { lease: 1 },
            Call::Grant {
                lease: Some(2),
                ttl_ms: 1500,
                keys: vec!["k/a".into(), "k/b".into()],
            },
            Call::GrantId {
                lease: 1,
                ttl_ms: 1500,
            },
            Call::PutLeased {
                lease: 1,
                keys: vec!["x".into()],
            },
            Call::Release {
                lock: "l".into(),
                lease: 1,
                token: 3,
            },
            Call::FencedWrite {
                resource: "r".into(),
                token: 3,
                accepted: None,
            },
            Call::GuardedPut {
                lock: "l".into(),
                token: 3,
                key: "k".into(),
            },
        ];
        for (i, call) in extra.into_iter().enumerate() {
            let index = 7 + i as u64;
            history
                .ops
                .push(op(index, Kind::Fail, 9, 100 + index, call));
        }
        let text = to_jsonl(&history);
        assert_eq!(text.lines().count(), history.ops.len());
        assert!(
            to_edn(&history).contains(":value {:lease 2, :ttl-ms 1500, :keys [\"k/a\" \"k/b\"]}"),
            "{}",
            to_edn(&history)
        );
        assert_eq!(from_jsonl(&text).expect("parses"), history);
    }

    #[test]
    fn jsonl_error_names_the_line() {
        let text = format!(
            "{}\nnot json\n",
            to_jsonl(&sample()).lines().next().unwrap_or("")
        );
        let err = from_jsonl(&text).expect_err("line 2 is not JSON");
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
    }
}
