//! `zkd ctl gen-certs DIR`: a throwaway certificate authority, a server certificate and two
//! client certificates as PEM files, for the secure port in tests and local development,
//! with no openssl or keytool step.

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// The names every certificate is issued for (the server's, and the clients' too: ZooKeeper
/// checks a client certificate's names against the client's address by default).
const NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The client identities: file name stem and common name. Their subjects read
/// `CN=<name>,O=zkd` as the x509 scheme writes them.
const CLIENTS: [&str; 2] = ["client1", "client2"];

/// Organization of every subject.
const ORG: &str = "zkd";

/// Writes the files into `dir` (created if needed) and returns what was written, one line
/// each. Existing files are replaced only with `force`.
pub fn generate(dir: &Path, force: bool) -> Result<String, String> {
    let mut files = vec!["ca.pem".to_string()];
    for stem in std::iter::once("server").chain(CLIENTS) {
        for suffix in [".pem", ".key", "-combined.pem"] {
            files.push(format!("{stem}{suffix}"));
        }
    }
    if !force {
        if let Some(f) = files.iter().find(|f| dir.join(f).exists()) {
            return Err(format!(
                "{} already exists; pass --force to replace the certificates in {}",
                dir.join(f).display(),
                dir.display()
            ));
        }
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;

    let (ca, ca_key) = authority()?;
    write(dir, "ca.pem", &ca.pem(), false)?;
    let (server, server_key) = leaf("zkd server", &ca, &ca_key)?;
    write_identity(dir, "server", &server, &server_key)?;
    let mut out = format!(
        "wrote a throwaway CA and certificates for {} to {}\n\
         ca.pem                     CA certificate: --tls-client-ca, and the clients' trust store\n\
         server.pem, server.key     server certificate and key: --tls-cert, --tls-key\n",
        NAMES.join(", "),
        dir.display()
    );
    for name in CLIENTS {
        let (cert, key) = leaf(name, &ca, &ca_key)?;
        write_identity(dir, name, &cert, &key)?;
        out.push_str(&format!(
            "{name}.pem, {name}.key   client certificate, authenticated as x509:{}\n",
            subject(name)
        ));
    }
    out.push_str(
        "NAME-combined.pem          key and certificate in one file (a ZooKeeper PEM key store)",
    );
    Ok(out)
}

/// The subject of a client certificate as the x509 scheme writes it.
pub fn subject(name: &str) -> String {
    format!("CN={name},O={ORG}")
}

fn err(e: rcgen::Error) -> String {
    format!("certificate generation failed: {e}")
}

fn authority() -> Result<(Certificate, KeyPair), String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORG);
    dn.push(DnType::CommonName, "zkd throwaway CA");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    Ok((cert, key))
}

/// A certificate signed by the CA, good for both ends of a TLS connection, with subject
/// `CN=<cn>,O=zkd` (the organization first in the encoding, so Java prints the CN first).
fn leaf(cn: &str, ca: &Certificate, ca_key: &KeyPair) -> Result<(Certificate, KeyPair), String> {
    let mut params =
        CertificateParams::new(NAMES.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .map_err(err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORG);
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.signed_by(&key, ca, ca_key).map_err(err)?;
    Ok((cert, key))
}

fn write_identity(dir: &Path, stem: &str, cert: &Certificate, key: &KeyPair) -> Result<(), String> {
    let key_pem = key.serialize_pem();
    write(dir, &format!("{stem}.pem"), &cert.pem(), false)?;
    write(dir, &format!("{stem}.key"), &key_pem, true)?;
    write(
        dir,
        &format!("{stem}-combined.pem"),
        &format!("{key_pem}{}", cert.pem()),
        true,
    )
}

/// Writes one file; private keys are readable by the owner only.
fn write(dir: &Path, name: &str, text: &str, private: bool) -> Result<(), String> {
    let path: PathBuf = dir.join(name);
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let _ = fs::remove_file(&path);
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(&path).map_err(fail)?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(fail)
}
