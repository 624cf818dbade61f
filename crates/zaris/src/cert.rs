//! `zaris cert init`: the certificates a TLS cluster needs, made in one go with rcgen (ECDSA
//! P-256): a cluster CA and one certificate per member (for its client and peer listeners, and
//! as its identity when it dials a peer), a client CA and one certificate per client user. For
//! a first setup, tests and the TLS compose file; an organisation with a CA of its own issues
//! the same files with it (docs/security.md shows the openssl steps).
//!
//! Never overwrites: a directory that already holds any of the files is refused, so a CA key
//! is never replaced by accident. Keys are written with mode 0600.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// Longest validity accepted, in days (ten years).
const MAX_DAYS: u32 = 3_650;

/// `zaris cert init DIR --node NAME... [--host NAME]... [--client USER]...`
#[derive(Args, Debug)]
pub struct CertInitArgs {
    /// Where to write the files (created if missing; refused if it holds any of them).
    pub dir: PathBuf,
    /// A member's host name or IP address, as its peer and client addresses name it
    /// (`zaris-1` for `zaris-1:7101`): one certificate `NAME.pem` per --node (repeatable).
    #[arg(long = "node", value_name = "NAME", required = true)]
    pub nodes: Vec<String>,
    /// Another name every member certificate carries: what clients dial (`localhost`,
    /// `127.0.0.1`, a load balancer's name) (repeatable).
    #[arg(long = "host", value_name = "NAME")]
    pub hosts: Vec<String>,
    /// A client certificate `client-USER.pem` whose common name is USER: the user it
    /// authenticates as where auth is enabled (repeatable).
    #[arg(long = "client", value_name = "USER")]
    pub clients: Vec<String>,
    /// How long the certificates are valid, in days (at most 3650).
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=MAX_DAYS as i64))]
    pub days: u32,
}

/// `zaris cert ...`
#[derive(clap::Subcommand, Debug)]
pub enum CertCmd {
    /// Make a cluster CA and member certificates, and a client CA and client certificates.
    #[command(
        after_help = "Example: zaris cert init certs --node zaris-1 --node zaris-2 --node zaris-3 \
                      --host localhost --host 127.0.0.1 --client root"
    )]
    Init(CertInitArgs),
}

pub fn run(command: CertCmd) -> Result<()> {
    match command {
        CertCmd::Init(args) => init(&args),
    }
}

/// What `init` writes, relative to its directory.
fn planned(args: &CertInitArgs) -> Vec<String> {
    let mut files = vec![
        "ca.pem".to_owned(),
        "ca-key.pem".to_owned(),
        "client-ca.pem".to_owned(),
        "client-ca-key.pem".to_owned(),
    ];
    for node in &args.nodes {
        files.push(format!("{node}.pem"));
        files.push(format!("{node}-key.pem"));
    }
    for user in &args.clients {
        files.push(format!("client-{user}.pem"));
        files.push(format!("client-{user}-key.pem"));
    }
    files
}

fn init(args: &CertInitArgs) -> Result<()> {
    for name in args.nodes.iter().chain(&args.hosts).chain(&args.clients) {
        ensure!(
            !name.is_empty()
                && name.len() <= 253
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':')),
            "{name:?} is not a host name, IP address or user name this command can use (letters, \
             digits, '-', '.', '_', ':')"
        );
    }
    let files = planned(args);
    let mut unique = files.clone();
    unique.sort();
    unique.dedup();
    ensure!(
        unique.len() == files.len(),
        "a name is given twice (each --node and --client makes its own files)"
    );
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let existing: Vec<&String> = files.iter().filter(|f| args.dir.join(f).exists()).collect();
    if !existing.is_empty() {
        bail!(
            "{} already holds {:?}: refusing to overwrite certificates or keys (use an empty \
             directory)",
            args.dir.display(),
            existing
        );
    }
    let days = args.days;
    let cluster_ca = make_ca("zaris cluster CA", days)?;
    write_pair(
        &args.dir,
        "ca",
        &cluster_ca.pem(),
        &cluster_ca.key().serialize_pem(),
    )?;
    let client_ca = make_ca("zaris client CA", days)?;
    write_pair(
        &args.dir,
        "client-ca",
        &client_ca.pem(),
        &client_ca.key().serialize_pem(),
    )?;
    for node in &args.nodes {
        let mut names = vec![node.clone()];
        names.extend(args.hosts.iter().filter(|h| *h != node).cloned());
        let (cert, key) = make_leaf(
            &cluster_ca,
            node,
            names,
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
            days,
        )?;
        write_pair(&args.dir, node, &cert, &key)?;
    }
    for user in &args.clients {
        let (cert, key) = make_leaf(
            &client_ca,
            user,
            Vec::new(),
            &[ExtendedKeyUsagePurpose::ClientAuth],
            days,
        )?;
        write_pair(&args.dir, &format!("client-{user}"), &cert, &key)?;
    }
    let dir = args.dir.display();
    println!(
        "wrote {} files to {dir}, valid for {} days",
        files.len(),
        args.days
    );
    if let Some(node) = args.nodes.first() {
        println!(
            "a member ({node}):\n  zaris serve --tls-cert {dir}/{node}.pem --tls-key {dir}/{node}-key.pem \
             --client-cacert {dir}/client-ca.pem \\\n    --peer-tls-cert {dir}/{node}.pem \
             --peer-tls-key {dir}/{node}-key.pem --peer-cacert {dir}/ca.pem ..."
        );
    }
    match args.clients.first() {
        Some(user) => println!(
            "a client ({user}):\n  zaris --cacert {dir}/ca.pem --cert {dir}/client-{user}.pem \
             --key {dir}/client-{user}-key.pem status"
        ),
        None => println!(
            "clients need a certificate of the client CA (--client USER), and --cacert {dir}/ca.pem"
        ),
    }
    println!("keep ca-key.pem and client-ca-key.pem offline: they issue new certificates");
    Ok(())
}

fn make_ca(name: &str, days: u32) -> Result<CertifiedIssuer<'static, KeyPair>> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut params, days)?;
    let key = KeyPair::generate()?;
    Ok(CertifiedIssuer::self_signed(params, key)?)
}

/// A certificate whose common name is `common_name` and whose SANs are `names` (DNS names or IP
/// addresses), signed by `issuer`: its PEM and its key's PEM.
fn make_leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    common_name: &str,
    names: Vec<String>,
    usages: &[ExtendedKeyUsagePurpose],
    days: u32,
) -> Result<(String, String)> {
    let mut params = CertificateParams::new(names)
        .with_context(|| format!("the names of {common_name}'s certificate"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = usages.to_vec();
    set_validity(&mut params, days)?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// `stem.pem` (mode 0644) and `stem-key.pem` (mode 0600), created new (never overwritten).
fn write_pair(dir: &Path, stem: &str, cert: &str, key: &str) -> Result<()> {
    write_new(&dir.join(format!("{stem}-key.pem")), key.as_bytes(), 0o600)?;
    write_new(&dir.join(format!("{stem}.pem")), cert.as_bytes(), 0o644)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Valid from the start of yesterday (clocks differ) to `days` from now.
fn set_validity(params: &mut CertificateParams, days: u32) -> Result<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_secs();
    let at = |secs: u64| {
        let (year, month, day) = civil_from_days((secs / 86_400) as i64);
        rcgen::date_time_ymd(year, month, day)
    };
    params.not_before = at(now.saturating_sub(86_400));
    params.not_after = at(now + u64::from(days) * 86_400);
    Ok(())
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_788), (2026, 12, 1));
    }

    #[test]
    fn init_writes_every_file_once_and_never_overwrites() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = CertInitArgs {
            dir: dir.path().join("certs"),
            nodes: vec!["zaris-1".into(), "zaris-2".into()],
            hosts: vec!["127.0.0.1".into(), "localhost".into()],
            clients: vec!["root".into()],
            days: 30,
        };
        init(&args).expect("init");
        for file in planned(&args) {
            let path = args.dir.join(&file);
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&path).expect("written").permissions(),
            );
            let expected = if file.ends_with("-key.pem") {
                0o600
            } else {
                0o644
            };
            assert_eq!(mode & 0o777, expected, "{file}");
        }
        let again = init(&args).expect_err("a second init is refused");
        assert!(
            format!("{again:#}").contains("refusing to overwrite"),
            "{again:#}"
        );
        let bad = CertInitArgs {
            dir: dir.path().join("other"),
            nodes: vec!["a b".into()],
            hosts: Vec::new(),
            clients: Vec::new(),
            days: 1,
        };
        assert!(init(&bad).is_err());
    }
}
