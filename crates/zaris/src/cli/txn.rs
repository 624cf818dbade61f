//! `zaris txn`: the command-line grammar of compares and operations, and running the Txn.
//!
//! Each `--if`, `--then` and `--else` value is one shell word that is split on whitespace, so
//! keys and values containing spaces (or empty values) cannot be written in this form.
//!
//! - compare: `KEY TARGET OP OPERAND`, TARGET one of `value`, `version`, `mod` (mod_revision),
//!   `create` (create_revision), `lease`; OP one of `=`, `!=`, `>`, `<`. Every operand but a
//!   value's is an unsigned number.
//! - operation: `put KEY VALUE [--lease N]`, `del KEY [--prefix]`, `get KEY [--prefix]`.
//! - guard: `LOCK:TOKEN` (split at the last `:`, so lock names may contain `:`).

use anyhow::{Result, bail};
use serde_json::json;
use zaris_client::proto::compare::{Operand, Result as Relation, Target};
use zaris_client::proto::{
    Compare, DeleteRangeRequest, Guard, PutRequest, RangeRequest, TxnOp, TxnRequest, txn_op,
};

use super::output as out;
use super::{Cli, TxnArgs};

const COMPARE_FORM: &str = "expected \"KEY TARGET OP OPERAND\", TARGET one of value, version, \
                            mod, create, lease and OP one of =, !=, >, <";

const OP_FORMS: &str =
    "expected \"put KEY VALUE [--lease N]\", \"del KEY [--prefix]\" or \"get KEY [--prefix]\"";

/// Parses one `--if` value (see the module docs). The message is for clap, which names the
/// argument and the value before it.
pub(crate) fn parse_compare(text: &str) -> Result<Compare, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [key, target, relation, operand] = words[..] else {
        return Err(format!("{COMPARE_FORM} (got {} words)", words.len()));
    };
    let relation = match relation {
        "=" | "==" => Relation::Equal,
        "!=" => Relation::NotEqual,
        ">" => Relation::Greater,
        "<" => Relation::Less,
        other => return Err(format!("unknown OP {other:?}: {COMPARE_FORM}")),
    };
    let number = |what: &str| {
        operand
            .parse::<u64>()
            .map_err(|_| format!("the operand of {what} must be a number, not {operand:?}"))
    };
    let (target, operand) = match target {
        "value" => (Target::Value, Operand::Value(operand.as_bytes().to_vec())),
        "version" => (Target::Version, Operand::Version(number("version")?)),
        "mod" | "mod_revision" => (Target::ModRevision, Operand::ModRevision(number("mod")?)),
        "create" | "create_revision" => (
            Target::CreateRevision,
            Operand::CreateRevision(number("create")?),
        ),
        "lease" => (Target::Lease, Operand::Lease(number("lease")?)),
        other => return Err(format!("unknown TARGET {other:?}: {COMPARE_FORM}")),
    };
    Ok(Compare {
        key: key.as_bytes().to_vec(),
        target: target.into(),
        result: relation.into(),
        operand: Some(operand),
    })
}

/// Parses one `--then` / `--else` value (see the module docs).
pub(crate) fn parse_op(text: &str) -> Result<TxnOp, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let op = match words[..] {
        ["put", key, value] => put(key, value, 0),
        ["put", key, value, "--lease", lease] => {
            let lease = lease
                .parse::<u64>()
                .ok()
                .filter(|&lease| lease > 0)
                .ok_or_else(|| {
                    format!("--lease takes a lease id (a positive number), not {lease:?}")
                })?;
            put(key, value, lease)
        }
        ["put", ..] => return Err("expected \"put KEY VALUE [--lease N]\"".to_owned()),
        ["del" | "delete", key] => delete(key, false),
        ["del" | "delete", key, "--prefix"] => delete(key, true),
        ["del" | "delete", ..] => return Err("expected \"del KEY [--prefix]\"".to_owned()),
        ["get", key] => get(key, false),
        ["get", key, "--prefix"] => get(key, true),
        ["get", ..] => return Err("expected \"get KEY [--prefix]\"".to_owned()),
        [other, ..] => return Err(format!("unknown operation {other:?}: {OP_FORMS}")),
        [] => return Err(OP_FORMS.to_owned()),
    };
    Ok(TxnOp { op: Some(op) })
}

fn put(key: &str, value: &str, lease: u64) -> txn_op::Op {
    txn_op::Op::Put(PutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        lease,
        ..PutRequest::default()
    })
}

fn delete(key: &str, prefix: bool) -> txn_op::Op {
    txn_op::Op::DeleteRange(DeleteRangeRequest {
        key: key.as_bytes().to_vec(),
        prefix,
        ..DeleteRangeRequest::default()
    })
}

fn get(key: &str, prefix: bool) -> txn_op::Op {
    txn_op::Op::Range(RangeRequest {
        key: key.as_bytes().to_vec(),
        prefix,
        ..RangeRequest::default()
    })
}

/// Parses `--guard LOCK:TOKEN`.
pub(crate) fn parse_guard(text: &str) -> Result<Guard, String> {
    let Some((lock, token)) = text.rsplit_once(':') else {
        return Err("expected LOCK:TOKEN".to_owned());
    };
    if lock.is_empty() {
        return Err("expected LOCK:TOKEN with a non-empty lock name".to_owned());
    }
    let token = token
        .parse::<u64>()
        .ok()
        .filter(|&token| token > 0)
        .ok_or_else(|| format!("the token must be a positive number, not {token:?}"))?;
    Ok(Guard {
        lock_name: lock.to_owned(),
        token,
    })
}

impl Cli {
    /// Runs the Txn. A false compare is not an error (the `--else` branch ran, exit 0); a failed
    /// guard or a put naming a missing lease applied nothing and is (exit 1).
    pub(super) async fn txn(&self, args: TxnArgs) -> Result<()> {
        let request = TxnRequest {
            compares: args.compares,
            success: args.success,
            failure: args.failure,
            guard: args.guard,
            request_id: None,
        };
        match self.client.txn(request).await {
            Ok(outcome) => {
                self.emit(&out::txn_json(&outcome), || out::txn_text(&outcome));
                Ok(())
            }
            Err(zaris_client::Error::NotHeld { lock, token }) => {
                self.emit_json_only(&json!({ "result": "guard_failed" }));
                bail!(
                    "guard failed: lock {lock} is not held with token {token}; nothing was applied"
                )
            }
            Err(zaris_client::Error::LeaseNotFound { .. }) => {
                self.emit_json_only(&json!({ "result": "lease_not_found" }));
                bail!("a put in the chosen branch names a missing lease; nothing was applied")
            }
            Err(err) => Err(self.fail(&err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_cover_every_target_and_relation() {
        let compare = parse_compare("svc/a value = hello").expect("parses");
        assert_eq!(compare.key, b"svc/a");
        assert_eq!(compare.target(), Target::Value);
        assert_eq!(compare.result(), Relation::Equal);
        assert_eq!(compare.operand, Some(Operand::Value(b"hello".to_vec())));

        let cases = [
            (
                "k version != 0",
                Target::Version,
                Relation::NotEqual,
                Operand::Version(0),
            ),
            (
                "k mod > 5",
                Target::ModRevision,
                Relation::Greater,
                Operand::ModRevision(5),
            ),
            (
                "k create_revision < 9",
                Target::CreateRevision,
                Relation::Less,
                Operand::CreateRevision(9),
            ),
            (
                "k create == 3",
                Target::CreateRevision,
                Relation::Equal,
                Operand::CreateRevision(3),
            ),
            (
                "  k   lease =  7 ",
                Target::Lease,
                Relation::Equal,
                Operand::Lease(7),
            ),
        ];
        for (text, target, relation, operand) in cases {
            let compare = parse_compare(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(compare.key, b"k", "{text}");
            assert_eq!(compare.target(), target, "{text}");
            assert_eq!(compare.result(), relation, "{text}");
            assert_eq!(compare.operand, Some(operand), "{text}");
        }
    }

    #[test]
    fn bad_compares_say_what_is_wrong() {
        let err = |text: &str| parse_compare(text).expect_err(text);
        assert!(err("k version =").contains("got 3 words"));
        assert!(err("k value = two words").contains("got 5 words"));
        assert!(err("").contains("got 0 words"));
        assert!(err("k size = 1").contains("unknown TARGET \"size\""));
        assert!(err("k version >= 1").contains("unknown OP \">=\""));
        assert!(err("k version = one").contains("must be a number"));
        assert!(err("k lease = -1").contains("must be a number"));
    }

    #[test]
    fn operations_parse_into_nested_requests() {
        let op = |text: &str| parse_op(text).unwrap_or_else(|e| panic!("{text}: {e}")).op;
        match op("put svc/a 10.0.0.1 --lease 7") {
            Some(txn_op::Op::Put(put)) => {
                assert_eq!(
                    (put.key.as_slice(), put.value.as_slice()),
                    (&b"svc/a"[..], &b"10.0.0.1"[..])
                );
                assert_eq!(put.lease, 7);
                assert!(
                    put.guard.is_none() && put.request_id.is_none(),
                    "the Txn's own cover it"
                );
            }
            other => panic!("{other:?}"),
        }
        match op("put k v") {
            Some(txn_op::Op::Put(put)) => assert_eq!(put.lease, 0),
            other => panic!("{other:?}"),
        }
        match op("del svc/ --prefix") {
            Some(txn_op::Op::DeleteRange(delete)) => {
                assert_eq!(delete.key, b"svc/");
                assert!(delete.prefix);
            }
            other => panic!("{other:?}"),
        }
        match op("delete k") {
            Some(txn_op::Op::DeleteRange(delete)) => assert!(!delete.prefix),
            other => panic!("{other:?}"),
        }
        match op("get svc/ --prefix") {
            Some(txn_op::Op::Range(range)) => {
                assert_eq!(range.key, b"svc/");
                assert!(range.prefix && !range.serializable && range.revision == 0);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_operations_say_what_is_wrong() {
        let err = |text: &str| parse_op(text).expect_err(text);
        assert!(err("put k").contains("put KEY VALUE"));
        assert!(err("put k v --lease").contains("put KEY VALUE"));
        assert!(err("put k v --lease 0").contains("positive number"));
        assert!(err("put k v --lease x").contains("positive number"));
        assert!(err("put k v --ttl 5").contains("put KEY VALUE"));
        assert!(err("del").contains("del KEY"));
        assert!(err("del k --recursive").contains("del KEY"));
        assert!(err("get k v").contains("get KEY"));
        assert!(err("set k v").contains("unknown operation \"set\""));
        assert!(err("   ").contains("expected"));
    }

    #[test]
    fn guards_split_at_the_last_colon() {
        let guard = parse_guard("jobs:queue:42").expect("parses");
        assert_eq!((guard.lock_name.as_str(), guard.token), ("jobs:queue", 42));
        assert!(parse_guard("jobs").is_err());
        assert!(parse_guard(":5").is_err());
        assert!(
            parse_guard("jobs:0")
                .expect_err("zero")
                .contains("positive")
        );
        assert!(parse_guard("jobs:x").is_err());
    }
}
