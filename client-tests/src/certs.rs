//! Throwaway certificates for TLS tests: a CA, a server certificate for localhost/127.0.0.1,
//! client certificates signed by the CA, and one signed by an unrelated CA, written as PEM
//! files so that no openssl or keytool step is needed.

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// The subject of the client certificate `client` as the x509 scheme names it.
pub const CLIENT_DN: &str = "CN=client,O=zkd test";
/// The subject of the client certificate `other`.
pub const OTHER_DN: &str = "CN=other,O=zkd test";

/// PEM files written by [`TestPki::create`]. Each identity NAME has `NAME.pem` (certificate),
/// `NAME.key` (PKCS#8 key) and `NAME-combined.pem` (key then certificate, the single-file
/// form ZooKeeper's PEM key stores read).
#[derive(Debug, Clone)]
pub struct TestPki {
    pub dir: PathBuf,
}

impl TestPki {
    /// Writes into `dir` (created if needed): `ca.pem`, `server.*` (localhost, 127.0.0.1),
    /// `client.*` ([`CLIENT_DN`]) and `other.*` ([`OTHER_DN`]) signed by the CA, and
    /// `rogue.*` ([`CLIENT_DN`] again) signed by a CA nobody trusts.
    pub fn create(dir: &Path) -> Result<TestPki, String> {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let pki = TestPki {
            dir: dir.to_path_buf(),
        };
        let (ca, ca_key) = make_ca("zkd test CA")?;
        pki.write("ca.pem", &ca.pem())?;
        let (server, server_key) = make_leaf(&[("CN", "zkd server")], &ca, &ca_key)?;
        pki.write_identity("server", &server, &server_key)?;
        let (client, client_key) = make_leaf(&[("O", "zkd test"), ("CN", "client")], &ca, &ca_key)?;
        pki.write_identity("client", &client, &client_key)?;
        let (other, other_key) = make_leaf(&[("O", "zkd test"), ("CN", "other")], &ca, &ca_key)?;
        pki.write_identity("other", &other, &other_key)?;
        let (rogue_ca, rogue_ca_key) = make_ca("rogue CA")?;
        let (rogue, rogue_key) = make_leaf(
            &[("O", "zkd test"), ("CN", "client")],
            &rogue_ca,
            &rogue_ca_key,
        )?;
        pki.write_identity("rogue", &rogue, &rogue_key)?;
        Ok(pki)
    }

    /// Path of a file in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, text: &str) -> Result<(), String> {
        let p = self.path(name);
        fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    }

    fn write_identity(&self, name: &str, cert: &Certificate, key: &KeyPair) -> Result<(), String> {
        self.write(&format!("{name}.pem"), &cert.pem())?;
        self.write(&format!("{name}.key"), &key.serialize_pem())?;
        self.write(
            &format!("{name}-combined.pem"),
            &format!("{}{}", key.serialize_pem(), cert.pem()),
        )
    }
}

fn err(e: rcgen::Error) -> String {
    format!("certificate generation failed: {e}")
}

fn make_ca(cn: &str) -> Result<(Certificate, KeyPair), String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    Ok((cert, key))
}

/// A leaf for localhost and 127.0.0.1 (ZooKeeper also checks client certificates' names
/// against the peer address), subject attributes in the given order.
fn make_leaf(
    subject: &[(&str, &str)],
    ca: &Certificate,
    ca_key: &KeyPair,
) -> Result<(Certificate, KeyPair), String> {
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(err)?;
    let mut dn = DistinguishedName::new();
    for (kind, value) in subject {
        let t = match *kind {
            "CN" => DnType::CommonName,
            "O" => DnType::OrganizationName,
            "OU" => DnType::OrganizationalUnitName,
            _ => return Err(format!("unsupported subject attribute {kind}")),
        };
        dn.push(t, *value);
    }
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.signed_by(&key, ca, ca_key).map_err(err)?;
    Ok((cert, key))
}
