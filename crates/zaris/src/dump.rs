//! `zaris dump`: print a stopped node's Raft log as JSON lines, for comparing the logs of several
//! nodes offline (the fault harness does, up to the lowest committed index) and for operators.
//!
//! The first line is a header: `{"node_dir", "committed", "last_log", "last_purged", "snapshot"}`,
//! each position `{"term", "index"}` or null. Then one line per stored entry, in index order:
//! `{"index", "term", "kind": "normal"|"membership"|"blank", "command": name|null, "digest"}`,
//! where `digest` is the SHA-256 (hex) of the entry's encoded payload. Entries up to the last
//! purge (covered by the snapshot) are gone and not printed.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};
use zaris_raft::dump::{self, Position};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  zaris dump --data-dir /var/lib/zaris/1 --from 1000\nThe node must be stopped: a running node holds the data dir's lock, and dump refuses."
)]
pub struct DumpArgs {
    /// The stopped node's data dir.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Print entries from this log index on (the header is always printed).
    #[arg(long, value_name = "N", default_value_t = 0)]
    from: u64,
}

fn position(position: Option<Position>) -> Value {
    match position {
        Some(p) => json!({"term": p.term, "index": p.index}),
        None => Value::Null,
    }
}

pub async fn run(args: DumpArgs) -> anyhow::Result<()> {
    let dump = dump::read_log(&args.data_dir, args.from)
        .await
        .context("cannot dump")?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let header = json!({
        "node_dir": args.data_dir.display().to_string(),
        "committed": position(dump.committed),
        "last_log": position(dump.last_log),
        "last_purged": position(dump.last_purged),
        "snapshot": position(dump.snapshot),
    });
    writeln!(out, "{header}")?;
    for entry in &dump.entries {
        let line = json!({
            "index": entry.position.index,
            "term": entry.position.term,
            "kind": entry.kind.name(),
            "command": entry.command,
            "digest": entry.digest_hex(),
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
