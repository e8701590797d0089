//! Settings the binary refuses at start-up (exit code 2 and a sentence naming the problem),
//! what it says of its own build (`zkd --version`, `srvr`, `envi`), and `zkd ctl gen-certs`,
//! which needs no server.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output, Stdio};

use zkd_server::{BUILD_COMMIT, BUILD_DATE};

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

/// Runs `cmd` and returns its trimmed standard output; panics when it fails.
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// `zkd --version`, `srvr` and `envi` name one commit and one build date: the commit checked
/// out here and the date the build script recorded (between the commit's date and now, or
/// `ZKD_BUILD_EPOCH` / `SOURCE_DATE_EPOCH` when the build set one), never a constant.
#[test]
fn version_names_commit_and_build_date() {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let head = stdout_of(Command::new("git").args(["-C", repo, "rev-parse", "HEAD"]));
    assert_eq!(BUILD_COMMIT, head, "the build names another commit");
    let minute = |args: &[&str]| stdout_of(Command::new(args[0]).args(&args[1..]).env("TZ", "UTC"));
    let commit_date = minute(&[
        "git",
        "-C",
        repo,
        "log",
        "-1",
        "--format=%cd",
        "--date=format-local:%Y-%m-%d %H:%M",
    ]);
    let now = minute(&["date", "-u", "+%Y-%m-%d %H:%M"]);
    // `YYYY-MM-DD HH:MM` orders as text does.
    assert_eq!(BUILD_DATE.len(), "2026-01-01 00:00".len(), "{BUILD_DATE}");
    let fixed = std::env::var("ZKD_BUILD_EPOCH").or_else(|_| std::env::var("SOURCE_DATE_EPOCH"));
    match fixed {
        Ok(epoch) => assert_eq!(
            BUILD_DATE,
            minute(&["date", "-u", "-d", &format!("@{epoch}"), "+%Y-%m-%d %H:%M"])
        ),
        Err(_) => assert!(
            commit_date.as_str() <= BUILD_DATE && BUILD_DATE <= now.as_str(),
            "build date {BUILD_DATE} is not between the commit's ({commit_date}) and now ({now})"
        ),
    }

    let version = zkd(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!(
            "zkd {} (commit {head}, built on {BUILD_DATE} UTC)\n",
            env!("CARGO_PKG_VERSION")
        )
    );

    let (mut child, _out, addr) = common::start_zkd(
        &["--port", "0", "--4lw-whitelist", "srvr,envi"],
        Stdio::null(),
    );
    let ask = |word: &str| {
        let mut conn = TcpStream::connect(addr).expect("connect");
        conn.write_all(word.as_bytes()).expect("send");
        let mut reply = String::new();
        conn.read_to_string(&mut reply).expect("reply");
        reply
    };
    let srvr = ask("srvr");
    let envi = ask("envi");
    let _ = child.kill();
    let _ = child.wait();
    // ZooKeeper's shape: `<version>-<revision>, built on <date> UTC`.
    let build = format!(
        "-zkd-{}-{head}, built on {BUILD_DATE} UTC",
        env!("CARGO_PKG_VERSION")
    );
    let first = srvr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Zookeeper version: 3.") && first.ends_with(&build),
        "srvr: {first:?}"
    );
    let line = envi
        .lines()
        .find(|l| l.starts_with("zookeeper.version="))
        .unwrap_or_default();
    assert_eq!(
        line.strip_prefix("zookeeper.version="),
        first.strip_prefix("Zookeeper version: "),
        "envi: {envi}"
    );
}

/// Clock steps and fixture TTLs are range-checked with a sentence: `zkd ctl clock advance`
/// and `POST /zkd/clock/advance` move the clock at most 2^40 - 1 ms (the longest TTL), and a
/// fixture's `ttl_ms` must be a TTL ZooKeeper can hold (1..=2^40 - 1), naming file and node.
#[test]
fn clock_steps_and_fixture_ttls_are_range_checked() {
    let (mut child, mut out, _) = common::start_zkd(
        &["--port", "0", "--admin-port", "0", "--clock", "manual"],
        Stdio::null(),
    );
    let admin = common::announced(&mut out, "zkd admin on ");
    let ctl = |step: &str| zkd(&["ctl", "--admin", &admin, "clock", "advance", step]);
    for step in ["1099511627776", "99999999999h", "18446744073709551615ms"] {
        let o = ctl(step);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{step}: {stderr}");
        assert!(
            stderr.contains("the clock moves at most 1099511627775 ms")
                || stderr.contains("is too long"),
            "{step}: {stderr}"
        );
    }
    let o = ctl("1099511627775");
    assert!(o.status.success(), "{o:?}");
    let shown = stdout_of(
        Command::new(env!("CARGO_BIN_EXE_zkd")).args(["ctl", "--admin", &admin, "clock", "show"]),
    );
    assert!(shown.contains("1099511627775 ms since start"), "{shown}");
    // The HTTP endpoint refuses the same, with 400 and the sentence.
    let mut s = TcpStream::connect(&admin).expect("admin");
    write!(
        s,
        "POST /zkd/clock/advance?ms=9223372036854775807 HTTP/1.1\r\nHost: localhost\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("is too far: the clock moves at most"),
        "{answer}"
    );
    let _ = child.kill();
    let _ = child.wait();

    let dir = tempfile::tempdir().expect("temp dir");
    let seed = dir.path().join("seed.json");
    std::fs::write(
        &seed,
        r#"{"nodes":[{"path":"/a"},{"path":"/cache","ttl_ms":-5}]}"#,
    )
    .expect("write");
    refused(
        &["--port", "0", "--seed", &seed.display().to_string()],
        "seed.json: node 2 (/cache): \"ttl_ms\" -5 is outside 1..=1099511627775",
    );
}

/// Two listeners on one port are named, with the options that set them, before anything is
/// bound (exit 2), instead of the second bind's "Address already in use" (exit 1).
#[test]
fn ports_given_twice_are_named() {
    refused(
        &[
            "--ensemble",
            "3",
            "--port",
            "27700",
            "--admin-port",
            "27701",
        ],
        "port 27701 is given twice: member 2's client port (member i listens on --port + i - \
         1, or on its server.2 line's port) on 127.0.0.1 and the control plane's port \
         (--admin-port) on 127.0.0.1",
    );
    refused(
        &["--port", "27702", "--admin-server-port", "27702"],
        "port 27702 is given twice: the client port (--port, clientPort) on 127.0.0.1 and the \
         AdminServer's port (--admin-server-port, admin.serverPort)",
    );
}
