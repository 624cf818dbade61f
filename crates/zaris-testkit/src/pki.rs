//! Certificates for TLS tests: a CA of its own, and certificates it signs for names and IP
//! addresses, written as PEM files into a directory. For tests only: it panics where a test
//! should fail.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A certificate and key written as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A certificate authority whose files live in `dir`.
pub struct Pki {
    dir: PathBuf,
    name: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("dir", &self.dir)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Pki {
    /// A new CA called `name`; its certificate is `dir/{name}-ca.pem`.
    pub fn new(dir: &Path, name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        std::fs::create_dir_all(dir).expect("pki dir");
        let pki = Pki {
            dir: dir.to_owned(),
            name: name.to_owned(),
            issuer,
        };
        std::fs::write(pki.ca(), pki.issuer.pem()).expect("write CA");
        pki
    }

    /// The CA certificate (PEM).
    pub fn ca(&self) -> PathBuf {
        self.dir.join(format!("{}-ca.pem", self.name))
    }

    /// A certificate for `names` (DNS names or IP addresses; the first is also its common name),
    /// good for servers and clients alike, written to `dir/{file}.pem` and `dir/{file}-key.pem`.
    pub fn issue(&self, file: &str, names: &[&str]) -> CertFiles {
        let sans: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        let files = CertFiles {
            cert: self.dir.join(format!("{file}.pem")),
            key: self.dir.join(format!("{file}-key.pem")),
        };
        write_atomically(&files.key, key.serialize_pem().as_bytes());
        write_atomically(&files.cert, cert.pem().as_bytes());
        files
    }
}

/// Writes through a temporary file and a rename, as a certificate manager does, so a reader
/// never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}
