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

/// The `zkd` binary: `$ZKD_BINARY` if set, else the one of the workspace these tests run in,
/// brought up to date first with `cargo build -p zkd` (nothing to do when `cargo test
/// --workspace` built it). The workspace is found when the tests run, never from where they
/// were compiled (see [`workspace_root`]), so a copied tree with its `target/` builds its own
/// sources.
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
        let cwd = std::env::current_dir().ok();
        let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
        let root = workspace_root(manifest_dir.as_deref(), &exe, cwd.as_deref())?;
        // The cargo that runs these tests (cargo sets CARGO for them), else the one on PATH.
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "zkd",
            "--bin",
            "zkd",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run cargo to build zkd: {e}"))?;
        if !status.success() {
            return Err(format!(
                "cargo build -p zkd in {} failed ({status})",
                root.display()
            ));
        }
        Ok(profile_dir.join("zkd"))
    })
    .clone()
}

/// The root of the workspace the tests run in, looked up at run time: from
/// `CARGO_MANIFEST_DIR` as cargo sets it when it runs a test (`manifest_dir`), else from the
/// test executable's place (`target/<profile>/deps/` inside the workspace), else from the
/// current directory; in each case the nearest directory upwards whose `Cargo.toml` declares
/// `[workspace]`.
pub fn workspace_root(
    manifest_dir: Option<&Path>,
    exe: &Path,
    cwd: Option<&Path>,
) -> Result<PathBuf, String> {
    let starts = manifest_dir.into_iter().chain([exe]).chain(cwd);
    for start in starts {
        if let Some(root) = start.ancestors().find(|d| is_workspace_root(d)) {
            return Ok(root.to_path_buf());
        }
    }
    Err(format!(
        "cannot find the zkd workspace (a Cargo.toml with [workspace]) above {}{}{}; set \
         ZKD_BINARY to a built zkd",
        manifest_dir.map_or(String::new(), |d| format!("{}, ", d.display())),
        exe.display(),
        cwd.map_or(String::new(), |d| format!(" or {}", d.display())),
    ))
}

/// Whether `dir` holds a `Cargo.toml` that declares a workspace.
fn is_workspace_root(dir: &Path) -> bool {
    fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|text| text.lines().any(|l| l.trim() == "[workspace]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree copied elsewhere finds itself, not the tree these tests were compiled in.
    #[test]
    fn the_workspace_is_found_at_run_time() {
        let tmp = std::env::temp_dir().join(format!("zkd-ws-{}", std::process::id()));
        let copy = tmp.join("copy");
        let deps = copy.join("target/debug/deps");
        fs::create_dir_all(&deps).unwrap();
        fs::create_dir_all(copy.join("client-tests")).unwrap();
        fs::write(copy.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        fs::write(
            copy.join("client-tests/Cargo.toml"),
            "[package]\nname = \"x\"\n",
        )
        .unwrap();
        let exe = deps.join("tls-0123");
        // Cargo's run-time CARGO_MANIFEST_DIR, the executable's place, the current directory.
        let from_manifest = workspace_root(
            Some(&copy.join("client-tests")),
            Path::new("/nowhere/x"),
            None,
        );
        assert_eq!(from_manifest, Ok(copy.clone()));
        assert_eq!(workspace_root(None, &exe, None), Ok(copy.clone()));
        let from_cwd = workspace_root(
            None,
            Path::new("/nowhere/x"),
            Some(&copy.join("client-tests")),
        );
        assert_eq!(from_cwd, Ok(copy.clone()));
        // Nothing compiled in: with no workspace around, it says so.
        let lost = workspace_root(None, Path::new("/nowhere/x"), Some(Path::new("/")));
        assert!(
            lost.is_err_and(|e| e.contains("set ZKD_BINARY")),
            "no fallback"
        );
        // And the workspace these tests run in is this one, as cargo sets it now.
        let here = workspace_root(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .map(PathBuf::from)
                .as_deref(),
            &std::env::current_exe().unwrap(),
            None,
        )
        .unwrap();
        assert!(here.join("client-tests/src/certs.rs").is_file());
        fs::remove_dir_all(&tmp).unwrap();
        // No path of the compiling machine is baked in (cargo's own path included).
        let compiled_in = concat!("env", "!(\"CARGO");
        assert!(!include_str!("certs.rs").contains(compiled_in));
    }
}
