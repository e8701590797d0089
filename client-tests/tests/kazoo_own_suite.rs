//! kazoo's own SASL and SSL tests (the `kazoo.tests` package shipped in kazoo's wheel, run with
//! pytest) against Apache ZooKeeper and against zkd.
//!
//! kazoo's harness starts its servers itself: `java ... QuorumPeerMain zoo.cfg` with JKS key
//! stores and a JAAS file. For zkd a `java` on PATH runs `client-tests/python/kazoo_harness_java.py`,
//! which starts `zkd --config` on a PEM copy of that configuration. On zkd the SASL DIGEST-MD5
//! tests run; `TestSSLClient` cannot: kazoo 2.11's harness makes X.509 v1 certificates, which
//! ZooKeeper accepts and rustls (webpki) refuses, and the CA key that could sign a v3
//! replacement never leaves the harness. The GSSAPI tests need a Kerberos KDC and skip
//! themselves on both servers.
//!
//! The harness, pyOpenSSL, pyjks and pytest live in a virtualenv made by
//! scripts/install-test-deps.sh (`$KAZOO_SUITE_VENV`, default /opt/zkd-test/kazoo-suite).

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;

use zkd_testkit::oracle::JARS;

const INSTALL: &str = "run scripts/install-test-deps.sh";

fn venv_python() -> PathBuf {
    let venv = std::env::var_os("KAZOO_SUITE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/zkd-test/kazoo-suite"));
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "no virtualenv for kazoo's own tests at {}; {INSTALL}",
        venv.display()
    );
    python
}

/// A first port of five free consecutive ports (kazoo's harness takes client, secure,
/// election, leader and admin ports from one offset).
fn free_port_block() -> u16 {
    for _ in 0..100 {
        let base = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        if base > 60000 {
            continue;
        }
        let held: Vec<_> = (base..base + 5)
            .map(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)))
            .collect();
        if held.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no block of five free ports");
}

/// Runs pytest on kazoo's tests selected by `select` in `dir`, with `env`; returns how many
/// passed, panicking with the output if any failed.
fn run_kazoo_tests(dir: &Path, select: &str, env: &[(&str, String)]) -> usize {
    let python = venv_python();
    let out = Command::new("timeout")
        .args(["-k", "5", "600"])
        .arg(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore",
        ])
        .args([
            "--pyargs",
            "kazoo.tests.test_sasl",
            "kazoo.tests.test_client",
        ])
        .args(["-k", select])
        .current_dir(dir)
        .env("ZOOKEEPER_VERSION", "3.8.0")
        .env("ZOOKEEPER_CLUSTER_SIZE", "1")
        .env("ZOOKEEPER_PORT_OFFSET", free_port_block().to_string())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; {INSTALL}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let summary = stdout.lines().last().unwrap_or_default().to_string();
    assert!(
        out.status.success() && !summary.contains("failed") && !summary.contains("error"),
        "kazoo's tests failed ({}): {summary}\n{stdout}\n{stderr}",
        out.status
    );
    summary
        .split_whitespace()
        .zip(summary.split_whitespace().skip(1))
        .find(|(_, word)| word.trim_end_matches(',') == "passed")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0)
}

fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("zkd-kazoo-suite-{tag}-"))
        .tempdir()
        .expect("temp dir")
}

#[test]
fn kazoo_sasl_and_ssl_tests_on_zookeeper() {
    let dir = temp_dir("zk");
    let classpath: Vec<String> = JARS
        .iter()
        .map(|j| format!("/usr/share/java/{j}"))
        .collect();
    let passed = run_kazoo_tests(
        dir.path(),
        "SASLDigest or TestSSLClient",
        &[("ZOOKEEPER_CLASSPATH", classpath.join(":"))],
    );
    // Legacy and current DIGEST-MD5 classes (login, wrong password) and the TLS create.
    assert_eq!(passed, 5, "tests that ran");
}

#[test]
fn kazoo_sasl_tests_on_zkd() {
    let dir = temp_dir("zkd");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/kazoo_harness_java.py");
    let java = bin.join("java");
    std::fs::write(
        &java,
        format!(
            "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
            venv_python().display(),
            shim.display()
        ),
    )
    .expect("java shim");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&java, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let zkd = zkd_client_tests::certs::zkd_binary().unwrap_or_else(|e| panic!("{e}"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let passed = run_kazoo_tests(
        dir.path(),
        "SASLDigest",
        &[
            ("PATH", path),
            ("ZKD_BINARY", zkd.display().to_string()),
            // Required by the harness, unused by the shim.
            ("ZOOKEEPER_CLASSPATH", "zkd".into()),
        ],
    );
    assert_eq!(passed, 4, "tests that ran");
}
