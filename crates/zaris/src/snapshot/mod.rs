//! `zaris snapshot save | status | restore`: backups of a running cluster, and new clusters
//! seeded from them (docs/deploy.md, "Backups and restore").

mod file;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use clap::Subcommand;
use serde_json::json;

use crate::cli::{GlobalOpts, OutputFormat, print_line};

/// Longest `--bump-revision`: far more revisions than a cluster writes in years, far from u64's
/// end.
const MAX_BUMP_REVISION: u64 = 1 << 48;

/// `zaris snapshot ...`
#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Save a consistent snapshot of the running cluster to FILE (written atomically): every
    /// write acknowledged before the command started, taken by the Raft leader without
    /// stopping anything.
    #[command(after_help = "Example: zaris snapshot save backup.zsnap --endpoints zaris-1:7001")]
    Save {
        /// The file to write (replaced if it exists).
        file: PathBuf,
    },
    /// Check a snapshot file (length, SHA-256, decoding) and print what it holds. Offline.
    #[command(after_help = "Example: zaris snapshot status backup.zsnap")]
    Status {
        /// The snapshot file.
        file: PathBuf,
    },
    /// Seed one member of a new cluster from a snapshot file. Offline: run it once per member,
    /// each with its own --node-id and --data-dir and the same FILE, --initial-cluster and
    /// --bump-revision, then start the members with `zaris serve` on those data dirs.
    #[command(
        after_help = "Example, for member 1 of three (the same file, --initial-cluster and --bump-revision on each;\ncompare the seed each prints):\n  \
        zaris snapshot restore backup.zsnap --node-id 1 --data-dir /var/lib/zaris \\\n      \
        --initial-cluster 1=zaris-1:7001/zaris-1:7101,2=zaris-2:7001/zaris-2:7101,3=zaris-3:7001/zaris-3:7101 \\\n      \
        --bump-revision 1000000"
    )]
    Restore {
        /// The snapshot file.
        file: PathBuf,
        /// This member's id; it must be in --initial-cluster.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        node_id: u64,
        /// The data dir to create for it (must not exist, or be empty).
        #[arg(long)]
        data_dir: PathBuf,
        /// The new cluster's members, `id=CLIENT/PEER,...`, as `zaris serve` takes them. The same
        /// on every member: members seeded with different lists do not form one cluster.
        #[arg(long)]
        initial_cluster: String,
        /// Start the new cluster's revisions (and server-chosen lease ids) this far above the
        /// snapshot's. At least the revisions the old cluster wrote after the snapshot, so that
        /// fencing tokens the new cluster issues exceed every token the old one issued, and no
        /// lease id it handed out is handed out again. 0 keeps them.
        /// Required, and the same on every member (members seeded at different positions would
        /// diverge): give 0 only if the old cluster wrote nothing after the snapshot.
        #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_BUMP_REVISION))]
        bump_revision: u64,
    },
}

pub async fn run(global: GlobalOpts, command: SnapshotCmd) -> anyhow::Result<()> {
    match command {
        SnapshotCmd::Save { file } => save(&global, &file).await,
        SnapshotCmd::Status { file } => status(global.output, &file),
        SnapshotCmd::Restore {
            file,
            node_id,
            data_dir,
            initial_cluster,
            bump_revision,
        } => {
            let members = crate::serve::parse_initial_cluster(&initial_cluster)?;
            restore(
                global.output,
                &file,
                node_id,
                &data_dir,
                &members,
                bump_revision,
            )
            .await
        }
    }
}

async fn save(global: &GlobalOpts, path: &Path) -> anyhow::Result<()> {
    let client = crate::cli::client(global)?;
    let mut data = Vec::new();
    let saved = client
        .snapshot(&mut data)
        .await
        .map_err(|err| anyhow!("cannot take a snapshot: {err}"))?;
    let header = file::Header {
        cluster_id: saved.cluster_id,
        member_id: saved.member_id,
        revision: saved.revision.get(),
        size_bytes: saved.size_bytes,
        sha256: zaris_core::codec::StateDigest(saved.sha256).to_string(),
        state_format: saved.format_version,
        lease_count: saved.lease_count,
        key_count: saved.key_count,
        saved_at_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as u64,
    };
    file::write(path, &header, &data)?;
    match global.output {
        OutputFormat::Json => print_line(json!({"file": path, "header": header})),
        OutputFormat::Table => print_line(format!(
            "saved revision {} ({} leases, {} keys, {} bytes) from member {} to {}",
            header.revision,
            header.lease_count,
            header.key_count,
            header.size_bytes,
            header.member_id,
            path.display()
        )),
    }
    Ok(())
}

fn status(output: OutputFormat, path: &Path) -> anyhow::Result<()> {
    let backup = file::read(path)?;
    let locks = backup.state.locks().len();
    let header = &backup.header;
    match output {
        OutputFormat::Json => print_line(json!({
            "file": path,
            "header": header,
            "locks": locks,
            "verified": true,
        })),
        OutputFormat::Table => {
            print_line(format!("file           {}", path.display()));
            print_line(format!("revision       {}", header.revision));
            print_line(format!("leases         {}", header.lease_count));
            print_line(format!("keys           {}", header.key_count));
            print_line(format!("locks          {locks}"));
            print_line(format!("size           {} bytes", header.size_bytes));
            print_line(format!("sha256         {} (verified)", header.sha256));
            print_line(format!("cluster id     {}", header.cluster_id));
            print_line(format!("saved from     member {}", header.member_id));
            print_line(format!(
                "saved at       {} ms since the Unix epoch",
                header.saved_at_unix_ms
            ));
        }
    }
    Ok(())
}

async fn restore(
    output: OutputFormat,
    path: &Path,
    node_id: u64,
    data_dir: &Path,
    members: &std::collections::BTreeMap<u64, zaris_server::Member>,
    bump_revision: u64,
) -> anyhow::Result<()> {
    if !members.contains_key(&node_id) {
        bail!(
            "member {node_id} is not in the initial cluster ({})",
            describe(members)
        );
    }
    let mut backup = file::read(path)?;
    let revision = backup.state.last_applied();
    backup.state.skip_ahead(bump_revision);
    let start = backup.state.last_applied();
    match std::fs::read_dir(data_dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!(
                    "data dir {} is not empty: restore seeds a new member; give it an empty or new dir",
                    data_dir.display()
                );
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", data_dir.display())),
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create data dir {}", data_dir.display()))?;
    zaris_raft::restore::seed(data_dir, &backup.state, members)
        .await
        .with_context(|| format!("cannot restore into {}", data_dir.display()))?;
    // Every member must be seeded alike; nothing can check that across machines before they
    // start, so the operator compares this: equal on every member, or do not start them.
    let seed = zaris_core::codec::bytes_digest(
        format!(
            "{} {bump_revision} {}",
            backup.header.sha256,
            describe(members)
        )
        .as_bytes(),
    )
    .to_string()[..16]
        .to_owned();
    match output {
        OutputFormat::Json => print_line(json!({
            "seed": seed,
            "file": path,
            "data_dir": data_dir,
            "node_id": node_id,
            "revision": revision.get(),
            "start_revision": start.get(),
            "members": members,
        })),
        OutputFormat::Table => print_line(format!(
            "restored revision {revision} into {} as member {node_id} of {}; new revisions start after {start}\n\
             seed {seed}: every member of the new cluster must show the same seed\n\
             start it with: zaris serve --node-id {node_id} --data-dir {} --initial-cluster {}",
            data_dir.display(),
            describe(members),
            data_dir.display(),
            describe(members),
        )),
    }
    Ok(())
}

fn describe(members: &std::collections::BTreeMap<u64, zaris_server::Member>) -> String {
    members
        .iter()
        .map(|(id, m)| format!("{id}={}/{}", m.addr, m.peer_addr))
        .collect::<Vec<_>>()
        .join(",")
}
