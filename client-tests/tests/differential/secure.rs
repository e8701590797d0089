//! The secure transports with unmodified clients, on zkd and on Apache ZooKeeper configured
//! the same way: TLS with client certificates and the x509 scheme (Java client over Netty,
//! kazoo), four-letter words inside TLS, hostile TLS input, and SASL DIGEST-MD5 (Java client
//! with a JAAS DigestLoginModule, kazoo with pure-sasl).
//!
//! A missing Java, kazoo, pure-sasl or ZooKeeper fails the test with a message naming
//! scripts/install-test-deps.sh.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_client_tests::certs::{TestPki, CLIENT_DN};
use zkd_server::{ClientAuth, Config, SaslUsers, Server, TlsConfig};
use zkd_testkit::oracle::{Launcher, Oracle, ZookeeperVersion};

const INSTALL: &str = "run scripts/install-test-deps.sh";
/// Upper bound for one client program (JVM start, TLS, waits); never reached when it works.
const TOOL_LIMIT_S: &str = "600";

fn temp_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("zkd-secure-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Removes a directory when dropped.
struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pki(tag: &str) -> (TempDir, TestPki) {
    let dir = temp_dir(tag);
    let pki = TestPki::create(&dir).expect("certificates");
    (TempDir(dir), pki)
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// zkd with a secure port verifying client certificates against the test CA.
async fn zkd_tls(pki: &TestPki, auth: ClientAuth) -> Server {
    Server::start(Config {
        port: 0,
        secure_port: Some(0),
        tls: Some(TlsConfig {
            cert: pki.path("server.pem"),
            key: pki.path("server.key"),
            client_ca: Some(pki.path("ca.pem")),
            client_auth: auth,
        }),
        ..Config::default()
    })
    .await
    .expect("zkd with TLS starts")
}

/// ZooKeeper 3.8.0 with the Netty connection factory and the same certificates (PEM key and
/// trust stores); returns it and its secure address. 3.8.0: the 3.9.3 oracle's Netty TLS does
/// not serve a client with Debian 12's Netty jars (its connections are lost).
fn zookeeper_tls(pki: &TestPki) -> (Oracle, SocketAddr) {
    let port = free_port();
    let port_s = port.to_string();
    let keystore = pki.path("server-combined.pem").display().to_string();
    let truststore = pki.path("ca.pem").display().to_string();
    let oracle = Launcher::new()
        .version(ZookeeperVersion::V3_8)
        .cfg(&[
            (
                "serverCnxnFactory",
                "org.apache.zookeeper.server.NettyServerCnxnFactory",
            ),
            ("secureClientPort", &port_s),
            ("secureClientPortAddress", "127.0.0.1"),
            ("ssl.keyStore.location", &keystore),
            ("ssl.keyStore.type", "PEM"),
            ("ssl.trustStore.location", &truststore),
            ("ssl.trustStore.type", "PEM"),
            ("ssl.clientAuth", "need"),
        ])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    // The plain port answering does not mean the secure one listens yet.
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "ZooKeeper's secure port {addr} does not accept connections"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (oracle, addr)
}

/// Runs a client program to completion; returns its output, panicking with it on failure.
fn run_checks(what: &str, cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}; {INSTALL}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("--- {what} ---\n{stdout}");
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "{what} failed ({}):\n{stdout}\n--- stderr (tail) ---\n{}",
            out.status,
            tail.join("\n")
        );
    }
    assert!(stdout.contains(" passed, 0 failed"), "{what}: {stdout}");
    stdout
}

const JAVA_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "netty-handler.jar",
    "netty-codec.jar",
    "netty-transport.jar",
    "netty-buffer.jar",
    "netty-common.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
];

/// The class path for the Java driver: the jars plus the compiled driver (compiled once).
fn java_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        let lib = Path::new("/usr/share/java");
        let mut parts: Vec<String> = JAVA_JARS
            .iter()
            .map(|j| {
                let p = lib.join(j);
                assert!(p.is_file(), "missing {}; {INSTALL}", p.display());
                p.display().to_string()
            })
            .collect();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("java-secure/SecureClient.java");
        let out = temp_dir("javac");
        let status = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(&out)
            .arg("-cp")
            .arg(parts.join(":"))
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("cannot run javac: {e}; {INSTALL}"));
        assert!(status.success(), "javac failed for {}", src.display());
        parts.insert(0, out.display().to_string());
        parts.join(":")
    })
    .clone()
}

fn java(jvm_args: &[String], args: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args([
        "-k",
        "5",
        TOOL_LIMIT_S,
        "java",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
    ])
    .args(jvm_args)
    .arg("-cp")
    .arg(java_classpath())
    .arg("SecureClient")
    .args(args);
    cmd
}

fn kazoo(args: &[&str]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/secure_checks.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", TOOL_LIMIT_S, &python])
        .arg(script)
        .args(args);
    cmd
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

fn tls_checks(addr: SocketAddr, pki: &TestPki) {
    let dir = pki.dir.display().to_string();
    let addr = addr.to_string();
    run_checks(
        "Java client over TLS",
        &mut java(&[], &["tls", &addr, &dir, CLIENT_DN]),
    );
    run_checks(
        "kazoo over TLS",
        &mut kazoo(&["tls", &addr, &dir, CLIENT_DN]),
    );
}

/// A `zkd` process, killed when dropped.
struct ZkdProcess(std::process::Child);
impl Drop for ZkdProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the `zkd` binary with `args`; returns it and the lines it printed up to and
/// including the first that starts with `until`.
fn zkd_process(args: &[std::ffi::OsString], until: &str) -> (ZkdProcess, Vec<String>) {
    use std::io::BufRead as _;
    let bin = zkd_client_tests::certs::zkd_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(&bin)
        .args(args)
        .args(["--log", "warn"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let stdout = child.stdout.take().expect("stdout");
    let process = ZkdProcess(child);
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.expect("zkd output");
        let done = line.starts_with(until);
        lines.push(line);
        if done {
            return (process, lines);
        }
    }
    panic!("zkd ended before printing {until:?}: {lines:?}");
}

/// The Java client and kazoo over TLS against the `zkd` binary in secure-only mode, with
/// the certificates `zkd ctl gen-certs` made: no plain port is opened.
#[test]
fn tls_clients_and_x509_acls_on_zkd_secure_only() {
    let (_dir, pki) = pki("tls-zkd");
    let file = |name: &str| pki.path(name).into_os_string();
    let args: Vec<std::ffi::OsString> = vec![
        "--secure-only".into(),
        "--secure-port".into(),
        "0".into(),
        "--tls-cert".into(),
        file("server.pem"),
        "--tls-key".into(),
        file("server.key"),
        "--tls-client-ca".into(),
        file("ca.pem"),
    ];
    let (_zkd, lines) = zkd_process(&args, "zkd secure listening on ");
    assert_eq!(
        lines.len(),
        1,
        "secure-only prints no plain listening line: {lines:?}"
    );
    let addr: SocketAddr = lines[0]["zkd secure listening on ".len()..]
        .parse()
        .expect("secure address");
    tls_checks(addr, &pki);
}

#[test]
fn tls_clients_and_x509_acls_on_zookeeper() {
    let (_dir, pki) = pki("tls-zk");
    let (_oracle, addr) = zookeeper_tls(&pki);
    tls_checks(addr, &pki);
}

/// A rustls client trusting the test CA, presenting `identity` (if any).
fn tls_connector(pki: &TestPki, identity: Option<&str>) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path("ca.pem")).expect("ca") {
        roots.add(c.expect("ca cert")).expect("add ca");
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match identity {
        Some(name) => {
            let certs = CertificateDer::pem_file_iter(pki.path(&format!("{name}.pem")))
                .expect("cert")
                .collect::<Result<Vec<_>, _>>()
                .expect("certs");
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).expect("key");
            builder
                .with_client_auth_cert(certs, key)
                .expect("client cert")
        }
        None => builder.with_no_client_auth(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Sends a four-letter word inside TLS; returns what came back before the close.
async fn word_over_tls(addr: SocketAddr, pki: &TestPki, word: &str) -> String {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = tls_connector(pki, Some("client1"))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    tls.write_all(word.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), tls.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_letter_words_inside_tls_as_zookeeper_answers_them() {
    let (_dir, pki) = pki("4lw");
    let (oracle, zk_addr) = {
        let pki = pki.clone();
        blocking(move || zookeeper_tls(&pki)).await
    };
    let reference = word_over_tls(zk_addr, &pki, "ruok").await;
    let their_conf = word_over_tls(zk_addr, &pki, "conf").await;
    drop(oracle);
    let server = zkd_tls(&pki, ClientAuth::Need).await;
    let secure = server.secure_addr().expect("secure");
    let ours = word_over_tls(secure, &pki, "ruok").await;
    assert_eq!(ours, reference, "ruok inside TLS");
    assert_eq!(ours, "imok");
    // `conf` names the secure port as bound, as ZooKeeper does, with the same lines.
    let our_conf = word_over_tls(secure, &pki, "conf").await;
    let line = |conf: &str, key: &str| {
        conf.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("no {key} in {conf}"))
    };
    let keys = |conf: &str| {
        conf.lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&our_conf), keys(&their_conf), "conf lines");
    assert_eq!(
        line(&their_conf, "secureClientPort"),
        zk_addr.port().to_string()
    );
    assert_eq!(
        line(&our_conf, "secureClientPort"),
        secure.port().to_string()
    );
    assert_eq!(
        line(&our_conf, "clientPort"),
        server.local_addr().port().to_string()
    );
    server.shutdown().await;
}

/// Whether the server closes the connection (EOF or reset) within the bound after `input`.
async fn closed_after(addr: SocketAddr, input: &[u8]) -> bool {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let _ = s.write_all(input).await;
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A TLS alert may come first; keep reading until the close.
            Ok(Ok(_)) => {}
        }
    }
}

/// A session over TLS that works (connect request answered) — proves the server still serves.
async fn tls_session_works(addr: SocketAddr, pki: &TestPki) -> bool {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let Ok(mut tls) = tls_connector(pki, Some("client1")).connect(name, tcp).await else {
        return false;
    };
    let frame = zkd_testkit::frame::connect_request(30000);
    if tls.write_all(&frame).await.is_err() {
        return false;
    }
    let mut len = [0u8; 4];
    matches!(
        tokio::time::timeout(Duration::from_secs(20), tls.read_exact(&mut len)).await,
        Ok(Ok(_))
    ) && i32::from_be_bytes(len) > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tls_input_closes_only_that_connection() {
    let (_dir, pki) = pki("hostile");
    let server = zkd_tls(&pki, ClientAuth::Need).await;
    let addr = server.secure_addr().expect("secure");
    // Somebody else's session stays up throughout.
    let bystander = tls_session_works(addr, &pki).await;
    assert!(bystander, "a TLS session works before");

    assert!(closed_after(addr, b"\x00\x01garbage before any handshake\r\n\r\n").await);
    // A plaintext ZooKeeper client on the secure port (its ConnectRequest).
    let mut plain = vec![0, 0, 0, 45];
    plain.extend_from_slice(&[0u8; 45]);
    assert!(closed_after(addr, &plain).await);
    assert!(closed_after(addr, b"ruok").await);
    // An aborted handshake: the start of a ClientHello, then the client goes away.
    {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
            .await
            .expect("write");
        drop(s);
    }
    // A client without a certificate where one is needed.
    {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let r = tls_connector(&pki, None).connect(name, tcp).await;
        if let Ok(mut tls) = r {
            // TLS 1.3 reports the refusal on the first read.
            let mut b = [0u8; 1];
            assert!(!matches!(tls.read(&mut b).await, Ok(n) if n > 0));
        }
    }
    // A certificate from a CA the server does not trust.
    {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        if let Ok(mut tls) = tls_connector(&pki, Some("rogue")).connect(name, tcp).await {
            let mut b = [0u8; 1];
            assert!(!matches!(tls.read(&mut b).await, Ok(n) if n > 0));
        }
    }
    assert!(server.failure().is_none());
    assert!(
        tls_session_works(addr, &pki).await,
        "TLS sessions still work"
    );
    let plain_ok = {
        let mut s = TcpStream::connect(server.local_addr())
            .await
            .expect("plain");
        s.write_all(b"ruok").await.expect("write");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        out == "imok"
    };
    assert!(plain_ok, "the plain port still answers");
    server.shutdown().await;
}

/// name:password users of the SASL tests.
const SASL_USERS: &str = "bob:bobsecret\nalice:alicesecret\n";

/// The JAAS file of the Java client (and of ZooKeeper's Server section).
fn jaas_file(dir: &Path) -> PathBuf {
    let mut text = String::from(
        "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
         user_bob=\"bobsecret\"\n    user_alice=\"alicesecret\";\n};\n",
    );
    for (section, user, password) in [
        ("Client", "bob", "bobsecret"),
        ("Alice", "alice", "alicesecret"),
        ("Wrong", "bob", "not-the-password"),
    ] {
        text.push_str(&format!(
            "{section} {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
             username=\"{user}\"\n    password=\"{password}\";\n}};\n"
        ));
    }
    let path = dir.join("jaas.conf");
    std::fs::write(&path, text).expect("jaas file");
    path
}

/// Runs the Java and kazoo SASL checks of `mode` (`sasl`, or `enforce` against a server that
/// enforces the sasl scheme).
fn sasl_checks(addr: SocketAddr, jaas: &Path, mode: &str) {
    let addr = addr.to_string();
    let jvm = [format!(
        "-Djava.security.auth.login.config={}",
        jaas.display()
    )];
    run_checks(
        &format!("Java client, {mode}"),
        &mut java(&jvm, &[mode, &addr]),
    );
    run_checks(&format!("kazoo, {mode}"), &mut kazoo(&[mode, &addr]));
}

/// zkd with the SASL users of the JAAS file, enforcing `enforce` schemes; runs the checks.
async fn sasl_on_zkd(tag: &str, enforce: &[&str], mode: &'static str) {
    let dir = TempDir(temp_dir(tag));
    let jaas = jaas_file(&dir.0);
    // The JAAS file's Server section is read as-is; the name:password form gives the same.
    let from_jaas =
        SaslUsers::parse(&std::fs::read_to_string(&jaas).expect("jaas"), "Server").expect("jaas");
    assert_eq!(
        from_jaas,
        SaslUsers::parse(SASL_USERS, "Server").expect("users")
    );
    let server = Server::start(Config {
        port: 0,
        sasl_users: Some(from_jaas),
        enforce_auth_schemes: enforce.iter().map(|s| s.to_string()).collect(),
        ..Config::default()
    })
    .await
    .expect("zkd starts");
    let addr = server.local_addr();
    blocking(move || sasl_checks(addr, &jaas, mode)).await;
    server.shutdown().await;
}

/// ZooKeeper with the SASL provider and the JAAS file, plus `cfg`; runs the checks.
fn sasl_on_zookeeper(tag: &str, cfg: &[(&str, &str)], mode: &str) {
    let dir = TempDir(temp_dir(tag));
    let jaas = jaas_file(&dir.0);
    let mut settings = vec![(
        "authProvider.1",
        "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
    )];
    settings.extend_from_slice(cfg);
    let oracle = Launcher::new()
        .cfg(&settings)
        .jvm_opts(vec![
            "-Xshare:auto".into(),
            "-XX:TieredStopAtLevel=1".into(),
            "-XX:+UseSerialGC".into(),
            "-Xmx256m".into(),
            format!("-Djava.security.auth.login.config={}", jaas.display()),
        ])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    sasl_checks(oracle.addr(), &jaas, mode);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_digest_md5_on_zkd() {
    sasl_on_zkd("sasl-zkd", &[], "sasl").await;
}

#[test]
fn sasl_digest_md5_on_zookeeper() {
    sasl_on_zookeeper("sasl-zk", &[], "sasl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_enforced_on_zkd() {
    sasl_on_zkd("enforce-zkd", &["sasl"], "enforce").await;
}

#[test]
fn sasl_enforced_on_zookeeper() {
    sasl_on_zookeeper(
        "enforce-zk",
        &[
            ("enforce.auth.enabled", "true"),
            ("enforce.auth.schemes", "sasl"),
        ],
        "enforce",
    );
}
