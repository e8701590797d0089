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
//! kazoo's cluster-control tests run on a three-member cluster: `TestClient::test_update_host_list`
//! (set_hosts, then stopping the member the client is on) and `TestReadOnlyMode` (stopping two of
//! three members; a `read_only=True` client reads and gets NotReadOnlyCallError on a write). On
//! zkd the harness's three `java` processes become members of one shared simulated ensemble
//! (`client-tests/python/kazoo_harness_ensemble.py`), started and stopped through the control
//! plane. kazoo's other tests that use `self.cluster[0]` only read its address.
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

/// The kazoo tests one run selects: their modules, a pytest `-k` expression, and the cluster
/// size kazoo's harness starts.
struct Selection {
    modules: &'static [&'static str],
    select: &'static str,
    cluster_size: u16,
}

const SASL_AND_SSL: Selection = Selection {
    modules: &["kazoo.tests.test_sasl", "kazoo.tests.test_client"],
    select: "SASLDigest or TestSSLClient",
    cluster_size: 1,
};

/// On zkd: `TestSSLClient` cannot run (see above).
const SASL: Selection = Selection {
    select: "SASLDigest",
    ..SASL_AND_SSL
};

const CLUSTER_CONTROL: Selection = Selection {
    modules: &["kazoo.tests.test_client", "kazoo.tests.test_connection"],
    select: "test_update_host_list or TestReadOnlyMode",
    cluster_size: 3,
};

/// A first port of `len` free consecutive ports (kazoo's harness takes each member's client,
/// secure, election, leader and admin ports from one offset, ten apart per member).
///
/// The block is taken below the kernel's ephemeral range: ports there are never handed to
/// outgoing connections, so the many client sockets of tests running alongside in this binary
/// cannot fill every block, as they can inside the range. The start is drawn at random so that
/// two of these tests running at once take different blocks.
fn free_port_block(len: u16) -> u16 {
    use std::hash::{BuildHasher, RandomState};
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.saturating_sub(len));
    assert!(
        high > low,
        "no room below the ephemeral ports ({ephemeral_low}) for {len} ports"
    );
    let random = RandomState::new();
    for attempt in 0u32..200 {
        let draw = random.hash_one((std::process::id(), attempt));
        let base = low + (draw % u64::from(high - low)) as u16;
        let held: Vec<_> = (base..base + len)
            .map(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)))
            .collect();
        if held.iter().all(Result::is_ok) {
            return base;
        }
    }
    panic!("no block of {len} free ports below {ephemeral_low}");
}

/// What one pytest run of kazoo's tests gave.
struct Run {
    passed: usize,
    /// The tests that failed or errored: (class, test, pytest's one-line reason).
    failed: Vec<(String, String, String)>,
    /// pytest's last line, its exit status, and everything it printed.
    summary: String,
    status: std::process::ExitStatus,
    output: String,
}

impl Run {
    fn ok(&self) -> bool {
        self.status.success() && !self.summary.contains("failed") && !self.summary.contains("error")
    }
}

/// Runs pytest on kazoo's tests in `selection` (narrowed to `only`, a `-k` expression, when
/// given) in `dir`, with `env`.
fn run_kazoo_tests(
    dir: &Path,
    selection: &Selection,
    only: Option<&str>,
    env: &[(&str, String)],
) -> Run {
    let python = venv_python();
    let select = match only {
        Some(only) => format!("({}) and ({only})", selection.select),
        None => selection.select.to_string(),
    };
    let out = Command::new("timeout")
        .args(["-k", "5", "600"])
        .arg(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-rfE",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore",
        ])
        .arg("--pyargs")
        .args(selection.modules)
        .args(["-k", &select])
        .current_dir(dir)
        // Wide enough that the short summary keeps each failure's whole reason (pytest cuts
        // it to the terminal's width, 80 columns without a terminal).
        .env("COLUMNS", "400")
        .env("ZOOKEEPER_VERSION", "3.8.0")
        .env("ZOOKEEPER_CLUSTER_SIZE", selection.cluster_size.to_string())
        .env(
            "ZOOKEEPER_PORT_OFFSET",
            free_port_block(10 * selection.cluster_size - 5).to_string(),
        )
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; {INSTALL}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let summary = stdout.lines().last().unwrap_or_default().to_string();
    let passed = summary
        .split_whitespace()
        .zip(summary.split_whitespace().skip(1))
        .find(|(_, word)| word.trim_end_matches(',') == "passed")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0);
    Run {
        passed,
        failed: stdout.lines().filter_map(failed_test).collect(),
        summary,
        status: out.status,
        output: format!("{stdout}\n{stderr}"),
    }
}

/// A `FAILED path::Class::test - reason` (or `ERROR ...`) line of pytest's short summary, as
/// (class, test, reason).
fn failed_test(line: &str) -> Option<(String, String, String)> {
    let rest = line
        .strip_prefix("FAILED ")
        .or_else(|| line.strip_prefix("ERROR "))?;
    let (id, reason) = rest.split_once(" - ").unwrap_or((rest, ""));
    let mut parts = id.rsplit("::");
    let test = parts.next()?.split('[').next()?.to_string();
    let class = parts.next()?.to_string();
    Some((class, test, reason.trim().to_string()))
}

/// Whether pytest's reason for a failure is a timeout (kazoo's `KazooTimeoutError`
/// "Connection time-out", a `TimeoutError`, "timed out"): a loaded machine (a JVM starting
/// and JIT-compiling its SASL code path, or kazoo's own threads), not a wrong answer.
fn is_timeout(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    ["timeout", "time-out", "timed out"]
        .iter()
        .any(|m| r.contains(m))
}

fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("zkd-kazoo-suite-{tag}-"))
        .tempdir()
        .expect("temp dir")
}

/// The environment that runs kazoo's harness on Apache ZooKeeper's jars.
fn zookeeper_env() -> Vec<(&'static str, String)> {
    let classpath: Vec<String> = JARS
        .iter()
        .map(|j| format!("/usr/share/java/{j}"))
        .collect();
    vec![("ZOOKEEPER_CLASSPATH", classpath.join(":"))]
}

/// The environment that runs kazoo's harness on zkd: a `java` in `dir`/bin that runs the shim.
fn zkd_env(dir: &Path) -> Vec<(&'static str, String)> {
    let bin = dir.join("bin");
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
    vec![
        ("PATH", path),
        ("ZKD_BINARY", zkd.display().to_string()),
        // Required by the harness, unused by the shim.
        ("ZOOKEEPER_CLASSPATH", "zkd".into()),
    ]
}

/// The suites run one at a time: kazoo's harness waits with fixed timeouts (15 s to reach
/// read-only mode, fixed sleeps around member stops), and three JVMs plus a zkd ensemble started
/// side by side on a 2-core machine could starve them.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `selection` in a fresh directory on ZooKeeper or zkd and checks how many tests ran.
///
/// A test that failed with a timeout is run once more (in a fresh directory, with a freshly
/// started server), saying why: `test_invalid_sasl_auth` has timed out on both servers on a
/// loaded machine and passed on the next run. On ZooKeeper the JVM answered kazoo's SASL
/// handshake late; on zkd the refusal was sent at once (the server's log says so) and kazoo's
/// own `start()`, which waits on its connection thread, still reported a connection time-out.
/// Any other failure fails at once, and so does a second time-out.
fn check(tag: &str, selection: &Selection, on_zkd: bool, expected: usize) {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let env_for = |dir: &Path| {
        if on_zkd {
            zkd_env(dir)
        } else {
            zookeeper_env()
        }
    };
    let dir = temp_dir(tag);
    let run = run_kazoo_tests(dir.path(), selection, None, &env_for(dir.path()));
    let mut passed = run.passed;
    let flakes = !run.ok()
        && !run.failed.is_empty()
        && run.failed.iter().all(|(_, _, reason)| is_timeout(reason));
    if !run.ok() && flakes {
        let only = run
            .failed
            .iter()
            .map(|(class, test, _)| format!("({class} and {test})"))
            .collect::<Vec<_>>()
            .join(" or ");
        let server = if on_zkd { "zkd" } else { "Apache ZooKeeper" };
        for (class, test, reason) in &run.failed {
            eprintln!(
                "kazoo's {class}::{test} timed out on {server} (a timing flake of a loaded \
                 machine: {reason}); running it once more"
            );
        }
        let again = temp_dir(tag);
        let retry = run_kazoo_tests(again.path(), selection, Some(&only), &env_for(again.path()));
        assert!(
            retry.ok() && retry.passed == run.failed.len(),
            "kazoo's tests failed again on {server} ({}): {}\n{}",
            retry.status,
            retry.summary,
            retry.output
        );
        passed += retry.passed;
    } else {
        assert!(
            run.ok(),
            "kazoo's tests failed ({}): {}\n{}",
            run.status,
            run.summary,
            run.output
        );
    }
    assert_eq!(passed, expected, "tests that ran");
}

#[test]
fn kazoo_sasl_and_ssl_tests_on_zookeeper() {
    // Legacy and current DIGEST-MD5 classes (login, wrong password) and the TLS create.
    check("zk", &SASL_AND_SSL, false, 5);
}

#[test]
fn kazoo_sasl_tests_on_zkd() {
    check("zkd", &SASL, true, 4);
}

#[test]
fn kazoo_cluster_control_tests_on_zookeeper() {
    check("zk-cluster", &CLUSTER_CONTROL, false, 2);
}

#[test]
fn kazoo_cluster_control_tests_on_zkd() {
    check("zkd-cluster", &CLUSTER_CONTROL, true, 2);
}

#[test]
fn failed_tests_and_timeouts_are_read_from_pytest_summary_lines() {
    let line = "FAILED ../../opt/v/lib/python3.11/site-packages/kazoo/tests/test_sasl.py::\
                TestLegacySASLDigestAuthentication::test_invalid_sasl_auth - \
                kazoo.handlers.threading.KazooTimeoutError: Connection time-out";
    let (class, test, reason) = failed_test(line).expect("a failed test");
    assert_eq!(
        (class.as_str(), test.as_str()),
        (
            "TestLegacySASLDigestAuthentication",
            "test_invalid_sasl_auth"
        )
    );
    assert!(is_timeout(&reason));
    let error = "ERROR kazoo/tests/test_client.py::TestSSLClient::test_create - AssertionError";
    let (_, _, reason) = failed_test(error).expect("an errored test");
    assert!(!is_timeout(&reason), "a wrong answer is no flake");
    assert!(failed_test("1 failed, 4 passed in 30.1s").is_none());
}
