//! Certificates for the TLS tests, made by `zkd ctl gen-certs` (the command users run), so no
//! openssl or keytool step is needed: a CA, a server certificate for localhost, two client
//! certificates signed by the CA, and one signed by a second, untrusted CA.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The subject of the client certificate `client1` as the x509 scheme names it.
pub const CLIENT_DN: &str = "CN=client1,O=zkd";
/// The subject of the client certificate `client2`.
pub const OTHER_DN: &str = "CN=client2,O=zkd";

/// The PEM files `zkd ctl gen-certs` writes (`ca.pem`, and for each of `server`, `client1`
/// and `client2`: `NAME.pem`, `NAME.key` and `NAME-combined.pem`, key then certificate, the
/// single-file form ZooKeeper's PEM key stores read), plus `rogue.*`: a certificate with
/// `client1`'s subject from a CA nobody trusts.
#[derive(Debug, Clone)]
pub struct TestPki {
    pub dir: PathBuf,
}

impl TestPki {
    /// Runs `zkd ctl gen-certs` into `dir` (created if needed), and once more into
    /// `dir/untrusted` for the `rogue.*` files.
    pub fn create(dir: &Path) -> Result<TestPki, String> {
        gen_certs(dir)?;
        let untrusted = dir.join("untrusted");
        gen_certs(&untrusted)?;
        for suffix in [".pem", ".key", "-combined.pem"] {
            let from = untrusted.join(format!("client1{suffix}"));
            let to = dir.join(format!("rogue{suffix}"));
            fs::copy(&from, &to)
                .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
        }
        Ok(TestPki {
            dir: dir.to_path_buf(),
        })
    }

    /// Path of a file in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn gen_certs(dir: &Path) -> Result<(), String> {
    let bin = zkd_binary()?;
    let out = Command::new(&bin)
        .args(["ctl", "gen-certs", "--force"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "zkd ctl gen-certs {} failed ({}): {}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The `zkd` binary: `$ZKD_BINARY` if set, else this workspace's, brought up to date first
/// with `cargo build -p zkd` (nothing to do when `cargo test --workspace` built it).
pub fn zkd_binary() -> Result<PathBuf, String> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("ZKD_BINARY") {
            return Ok(PathBuf::from(path));
        }
        // A test executable lives in target/<profile>/deps/.
        let exe = std::env::current_exe().map_err(|e| format!("no test executable path: {e}"))?;
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .ok_or_else(|| format!("unexpected test executable path {}", exe.display()))?;
        let target_dir = profile_dir
            .parent()
            .ok_or_else(|| format!("unexpected target directory {}", profile_dir.display()))?;
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "zkd",
            "--bin",
            "zkd",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run cargo to build zkd: {e}"))?;
        if !status.success() {
            return Err(format!("cargo build -p zkd failed ({status})"));
        }
        Ok(profile_dir.join("zkd"))
    })
    .clone()
}
