//! Settings the binary refuses at start-up (exit code 2 and a sentence naming the problem),
//! and `zkd ctl gen-certs`, which needs no server.

use std::process::{Command, Output};

fn zkd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(args)
        .output()
        .expect("zkd runs")
}

fn refused(args: &[&str], says: &str) {
    let out = zkd(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

#[test]
fn session_timeout_below_one_tick() {
    refused(
        &["--port", "0", "--min-session-timeout", "0"],
        "minimum session timeout (0 ms) is below one tick (2000 ms)",
    );
    refused(
        &[
            "--port",
            "0",
            "--tick-time",
            "500",
            "--min-session-timeout",
            "499",
        ],
        "minimum session timeout (499 ms) is below one tick (500 ms)",
    );
}

#[test]
fn unknown_four_letter_word() {
    refused(&["--port", "0", "--4lw-whitelist", "ruok,nope"], "nope");
}

#[test]
fn secure_only_without_a_secure_port() {
    refused(&["--secure-only"], "--secure-port");
    refused(
        &["--secure-only", "--port", "2181", "--secure-port", "0"],
        "cannot be used with",
    );
}

#[test]
fn enforced_scheme_not_available() {
    refused(
        &["--port", "0", "--enforce-auth-schemes", "sasl"],
        "authentication scheme \"sasl\" cannot be enforced",
    );
    refused(
        &["--port", "0", "--enforce-auth-schemes", "digest,kerberos"],
        "\"kerberos\" cannot be enforced",
    );
}

#[test]
fn ctl_without_admin_listener() {
    refused(&["ctl", "sessions"], "--admin HOST:PORT");
}

/// `zkd ctl gen-certs` writes the PEM files, and does not replace them without --force.
#[test]
fn gen_certs_writes_and_keeps_certificates() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = zkd(&["ctl", "gen-certs", &dir.path().display().to_string()]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("x509:CN=client1,O=zkd"), "{said}");
    assert!(said.contains("x509:CN=client2,O=zkd"), "{said}");
    for stem in ["server", "client1", "client2"] {
        for suffix in [".pem", ".key", "-combined.pem"] {
            assert!(dir.path().join(format!("{stem}{suffix}")).is_file());
        }
    }
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca.pem");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let again = zkd(&["ctl", "gen-certs", &dir.path().display().to_string()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let ca_after = std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca.pem");
    assert_eq!(ca, ca_after, "kept without --force");
    let forced = zkd(&[
        "ctl",
        "gen-certs",
        "--force",
        &dir.path().display().to_string(),
    ]);
    assert!(forced.status.success(), "{forced:?}");
    let ca_forced = std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca.pem");
    assert_ne!(ca, ca_forced, "a new CA with --force");
}
