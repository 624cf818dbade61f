//! A run with TLS on every link and access control on: certificates of the run's own CAs
//! (`zaris_testkit::pki`), mutual TLS between the members (through the harness's proxies, which
//! pass the bytes on), TLS with client certificates for the clients, and auth enabled before the
//! workload starts. The workers call as user `worker` (read and write on every key and lock,
//! owner of every lease they grant), the harness's own calls (membership changes, status) as
//! `root`, an admin: so every request of the run goes through authentication, the role check and,
//! for leases, the ownership check, including its read barrier for a lease the checking node has
//! not applied yet.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use zaris_client::proto::auth_change_request::Change;
use zaris_client::proto::{
    AuthEnable, AuthRoleName, AuthRolePermission, AuthUserAdd, AuthUserRole, Permission,
    PermissionAccess, PermissionKind,
};
use zaris_client::{BearerToken, Client, ClientOptions, ClientTls};
use zaris_testkit::pki::{CertFiles, Pki};

/// The run's certificates and tokens.
#[derive(Clone, Debug)]
pub struct Secure {
    /// Every node's certificate for both listeners (they all listen on 127.0.0.1).
    node: CertFiles,
    cluster_ca: PathBuf,
    client_ca: PathBuf,
    client_tls: ClientTls,
    /// The admin's token: the harness's own calls.
    pub admin: BearerToken,
    /// The workers' token.
    pub worker: BearerToken,
    /// Whether the users exist: until then a token would be refused (it names no user), so
    /// the harness's calls carry none.
    users_made: Arc<AtomicBool>,
}

impl Secure {
    /// Makes the certificates in `dir`.
    pub fn new(dir: &Path) -> Result<Secure> {
        let cluster = Pki::new(dir, "cluster");
        let clients = Pki::new(dir, "clients");
        let node = cluster.issue("node", &["127.0.0.1", "localhost"]);
        let harness = clients.issue("harness", &["harness"]);
        let client_tls = ClientTls::from_ca_file(cluster.ca())?
            .with_identity_files(&harness.cert, &harness.key)?;
        Ok(Secure {
            node,
            cluster_ca: cluster.ca(),
            client_ca: clients.ca(),
            client_tls,
            admin: BearerToken::generate(),
            worker: BearerToken::generate(),
            users_made: Arc::new(AtomicBool::new(false)),
        })
    }

    /// `zaris serve` flags for a node.
    pub fn serve_args(&self) -> Vec<String> {
        let path = |p: &Path| p.display().to_string();
        vec![
            "--tls-cert".into(),
            path(&self.node.cert),
            "--tls-key".into(),
            path(&self.node.key),
            "--client-cacert".into(),
            path(&self.client_ca),
            "--peer-tls-cert".into(),
            path(&self.node.cert),
            "--peer-tls-key".into(),
            path(&self.node.key),
            "--peer-cacert".into(),
            path(&self.cluster_ca),
        ]
    }

    /// `options` with TLS, and the admin's token unless they carry one (once the users exist).
    pub fn client_options(&self, options: ClientOptions) -> ClientOptions {
        let options = options.with_tls(self.client_tls.clone());
        if options.token.is_some() || !self.users_made.load(Ordering::Acquire) {
            return options;
        }
        options.with_token(self.admin.clone())
    }

    /// Adds `root` (admin) and `worker` (read and write on everything) and enables auth, through
    /// `endpoints` (first with TLS and no token, as auth is still off and `root` does not exist).
    pub async fn enable_auth(&self, endpoints: Vec<String>) -> Result<()> {
        let client = Client::lazy(
            endpoints.clone(),
            quiet_options().with_tls(self.client_tls.clone()),
        )?;
        let changes = [
            Change::UserAdd(AuthUserAdd {
                name: "root".into(),
                token_sha256: self.admin.sha256().to_vec(),
            }),
            Change::UserGrantRole(AuthUserRole {
                name: "root".into(),
                role: "admin".into(),
            }),
            Change::RoleAdd(AuthRoleName {
                name: "workload".into(),
            }),
            Change::RoleGrant(AuthRolePermission {
                role: "workload".into(),
                permission: Some(everything(PermissionKind::Key)),
            }),
            Change::RoleGrant(AuthRolePermission {
                role: "workload".into(),
                permission: Some(everything(PermissionKind::Lock)),
            }),
            Change::UserAdd(AuthUserAdd {
                name: "worker".into(),
                token_sha256: self.worker.sha256().to_vec(),
            }),
            Change::UserGrantRole(AuthUserRole {
                name: "worker".into(),
                role: "workload".into(),
            }),
        ];
        for change in changes {
            client
                .auth_change(change.clone())
                .await
                .with_context(|| format!("auth setup: {change:?}"))?;
        }
        self.users_made.store(true, Ordering::Release);
        let admin = Client::lazy(endpoints, self.client_options(quiet_options()))?;
        admin
            .auth_change(Change::Enable(AuthEnable {}))
            .await
            .context("enabling auth")?;
        let me = admin.who_am_i().await?;
        anyhow::ensure!(me.admin && me.enabled, "auth is not on: {me:?}");
        Ok(())
    }
}

fn quiet_options() -> ClientOptions {
    ClientOptions::default().with_timeout(std::time::Duration::from_secs(10))
}

fn everything(kind: PermissionKind) -> Permission {
    Permission {
        kind: kind.into(),
        prefix: Vec::new(),
        access: PermissionAccess::Readwrite.into(),
    }
}
