//! `zkd --config zoo.cfg` and `zkd --env-config` as real processes: the zoo.cfg Debian's
//! zookeeper package ships starts zkd and a real client uses it; malformed files are refused
//! with exit code 2 and a sentence naming file, line and key; the official image's `ZOO_*`
//! and Confluent's `ZOOKEEPER_*` variables configure it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use zookeeper_client as zk;

mod common;

/// Upper bound for any wait; generous so a loaded machine never fails a test.
const WAIT: Duration = Duration::from_secs(30);

/// The ZooKeeper start-up line container tooling waits for; zkd prints it last.
const READY: &str = "PrepRequestProcessor (sid:";

/// A running zkd: killed when dropped.
struct Running {
    child: Child,
    stdout: Vec<String>,
    stderr: mpsc::Receiver<String>,
    addr: SocketAddr,
    /// Every `zkd listening on` address (one per ensemble member).
    members: Vec<SocketAddr>,
    secure: Option<SocketAddr>,
    admin_server: Option<SocketAddr>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// Every stderr line logged so far. A line the server wrote before it said it listens
    /// may still be on its way through the reader thread, so lines are taken until none has
    /// come for 300 ms (at most 5 s in all).
    fn stderr_so_far(&self) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut lines = Vec::new();
        while std::time::Instant::now() < deadline {
            match self.stderr.recv_timeout(Duration::from_millis(300)) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        lines.join("\n")
    }

    /// Stops it with SIGTERM, waits for it, and hands everything it logged to `check`.
    fn stop_and_check_stderr(self, check: impl FnOnce(&str)) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let mut this = self;
        let _ = this.child.wait();
        let mut all = Vec::new();
        while let Ok(line) = this.stderr.recv_timeout(Duration::from_secs(5)) {
            all.push(line);
        }
        check(&all.join("\n"));
    }

    /// Stops it with SIGTERM and waits, so a data directory gets its final snapshot.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// A zkd command with `args` and `env` (on top of an empty environment), stderr piped.
fn zkd(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zkd"));
    cmd.args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stderr(Stdio::piped());
    cmd
}

/// Starts zkd with `args` and `env` (on top of an empty environment) and waits for the
/// ZooKeeper readiness line.
fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut child = zkd(args, env)
        .stdout(Stdio::piped())
        .spawn()
        .expect("zkd runs");
    let (out_tx, out_rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = out_tx.send(line);
        }
    });
    let (err_tx, err_rx) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = err_tx.send(line);
        }
    });
    let mut lines = Vec::new();
    loop {
        match out_rx.recv_timeout(WAIT) {
            Ok(line) => {
                let done = line.starts_with(READY);
                lines.push(line);
                if done {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                let err: Vec<String> = err_rx.try_iter().collect();
                panic!(
                    "zkd {args:?} did not become ready: {lines:?}\n{}",
                    err.join("\n")
                );
            }
        }
    }
    let find = |prefix: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|a| a.parse::<SocketAddr>().expect("address"))
    };
    let addr = find("zkd listening on ").expect("listening line");
    let admin_server = find("zkd admin server on ");
    let members = lines
        .iter()
        .filter_map(|l| l.strip_prefix("zkd listening on "))
        .map(|a| a.parse().expect("address"))
        .collect();
    Running {
        child,
        members,
        secure: find("zkd secure listening on "),
        stdout: lines,
        stderr: err_rx,
        addr,
        admin_server,
    }
}

/// Runs zkd with `args` expecting it to refuse to start: exit code 2; returns stderr. A zkd
/// that starts instead is killed and fails the test.
fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut child = zkd(args, env)
        .stdout(Stdio::null())
        .spawn()
        .expect("zkd runs");
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zkd {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

/// A four-letter word's answer.
fn four_letter(addr: SocketAddr, word: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    s.write_all(word.as_bytes()).expect("write");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

/// GET on an HTTP listener: status and body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(WAIT))
        .build()
        .new_agent();
    let mut resp = agent
        .get(&format!("http://{addr}{path}"))
        .call()
        .expect("HTTP answer");
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

/// Creates, reads and deletes a node with the Rust ZooKeeper client; returns the session
/// timeout the server negotiated for a 30 s request.
fn use_with_a_client(addr: SocketAddr) -> Duration {
    use_with_a_client_asking(&addr.to_string(), Duration::from_secs(30))
}

/// [`use_with_a_client`] with a connection string, asking for a session timeout of `asked`.
fn use_with_a_client_asking(hosts: &str, asked: Duration) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = tokio::time::timeout(
            WAIT,
            zk::Client::connector()
                .with_session_timeout(asked)
                .connect(hosts),
        )
        .await
        .expect("connects in time")
        .expect("connects");
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client
            .create("/configured", b"from zoo.cfg", &opts)
            .await
            .expect("create");
        let (data, _) = client.get_data("/configured").await.expect("get");
        assert_eq!(data, b"from zoo.cfg");
        client.delete("/configured", None).await.expect("delete");
        client.session_timeout()
    })
}

/// The zoo.cfg the Debian zookeeper package installs.
fn debian_zoo_cfg() -> PathBuf {
    [
        "/etc/zookeeper/conf/zoo.cfg",
        "/etc/zookeeper/conf_example/zoo.cfg",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .expect(
        "Debian's zookeeper package is not installed (no /etc/zookeeper/conf/zoo.cfg); run \
             scripts/install-test-deps.sh",
    )
}

/// Writes `text` as `dir/name` and returns the path as a string.
/// Fails, showing all of `stderr`, unless it contains `needle`.
fn says(stderr: &str, needle: &str) {
    assert!(stderr.contains(needle), "{needle:?} not in:\n{stderr}");
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

/// Writes `text` as `dir/name` and starts `zkd --config` on it.
fn started_config(dir: &Path, name: &str, text: &str) -> Running {
    start(&["--config", &write(dir, name, text)], &[])
}

/// Writes `text` as `dir/name` and runs `zkd --config` on it, which must refuse it: the
/// file's path and zkd's standard error.
fn refused_config(dir: &Path, name: &str, text: &str) -> (String, String) {
    let cfg = write(dir, name, text);
    let stderr = refused(&["--config", &cfg], &[]);
    (cfg, stderr)
}

#[test]
fn debian_zoo_cfg_starts_zkd_and_a_client_uses_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    // The file as shipped; only its dataDir line moves into the test's directory.
    let shipped = std::fs::read_to_string(debian_zoo_cfg()).expect("read zoo.cfg");
    assert!(
        shipped.lines().any(|l| l.starts_with("dataDir=")),
        "{shipped}"
    );
    let text: String = shipped
        .lines()
        .map(|l| {
            if l.starts_with("dataDir=") {
                format!("dataDir={}\n", data.display())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let cfg = write(dir.path(), "zoo.cfg", &text);
    // Its clientPort (2181) and the AdminServer's default port (8080) are fixed; the flags
    // move both to free ports, as flags override the file.
    let zkd = start(
        &["--config", &cfg, "--port", "0", "--admin-server-port", "0"],
        &[],
    );
    assert!(
        zkd.addr.ip().is_loopback(),
        "no clientPortAddress: loopback"
    );
    let admin = zkd.admin_server.expect("the AdminServer is on by default");
    assert!(zkd
        .stdout
        .iter()
        .any(|l| l.starts_with("Started AdminServer on address 127.0.0.1, port ")));
    assert!(zkd.stdout.iter().any(|l| l.starts_with("binding to port ")));
    assert_eq!(
        zkd.stdout.last().map(String::as_str),
        Some("PrepRequestProcessor (sid:0) started, reconfigEnabled=false")
    );

    // tickTime=2000 from the file: sessions between 4 s and 40 s.
    assert_eq!(use_with_a_client(zkd.addr), Duration::from_secs(30));
    // ZooKeeper's default whitelist: srvr only.
    assert!(four_letter(zkd.addr, "srvr").contains("Mode: standalone"));
    assert_eq!(
        four_letter(zkd.addr, "ruok"),
        "ruok is not executed because it is not in the whitelist.\n"
    );
    // The AdminServer answers /commands (ruok included), and nothing of the control plane.
    let (status, body) = get(admin, "/commands/ruok");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"error\":null"), "{body}");
    let (status, body) = get(admin, "/commands/configuration");
    assert!(
        status == 200 && body.contains("\"tick_time\":2000"),
        "{body}"
    );
    assert!(body.contains("\"min_session_timeout\":4000"), "{body}");
    for route in ["/zkd/sessions", "/", "/metrics", "/command/ping"] {
        assert_eq!(get(admin, route).0, 404, "{route} must not be served");
    }

    let stderr = zkd.stderr_so_far();
    for needle in [
        "line 5: key initLimit does not apply to zkd",
        "line 8: key syncLimit does not apply to zkd",
        "no clientPortAddress, so the client port binds 127.0.0.1",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    // dataDir is the data directory: a snapshot in ZooKeeper's layout.
    zkd.stop();
    let snaps = std::fs::read_dir(data.join("version-2"))
        .expect("version-2")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("snapshot."))
        .count();
    assert!(snaps >= 1);
}

#[test]
fn unknown_keys_warn_and_the_control_plane_needs_its_own_option() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = write(
        dir.path(),
        "zoo.cfg",
        "clientPort=0\nadmin.serverPort=0\nfrobnicate=1\n",
    );
    let zkd = start(&["--config", &cfg], &[]);
    let stderr = zkd.stderr_so_far();
    says(
        &stderr,
        &format!("{cfg} line 3: unknown key frobnicate: ignored"),
    );
    assert!(!zkd.stdout.iter().any(|l| l.starts_with("zkd admin on")));
    drop(zkd);

    // With --admin-port, the control plane is on its own loopback listener.
    let zkd = start(&["--config", &cfg, "--admin-port", "0"], &[]);
    let admin = zkd
        .stdout
        .iter()
        .find_map(|l| l.strip_prefix("zkd admin on "))
        .map(|a| a.parse::<SocketAddr>().expect("address"))
        .expect("control plane");
    assert!(admin.ip().is_loopback());
    assert_eq!(get(admin, "/zkd/sessions").0, 200);
    assert_eq!(
        get(zkd.admin_server.expect("AdminServer"), "/zkd/sessions").0,
        404
    );
}

#[test]
fn malformed_files_are_refused_naming_file_line_and_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (text, says) in [
        (
            "tickTime=2000\nclientPort\n",
            "line 2: key clientPort: the line has no value",
        ),
        (
            "clientPort=2181\ntickTime=fast\n",
            "line 2: key tickTime: \"fast\" is not a whole number",
        ),
        (
            "clientPort=99999\n",
            "line 1: key clientPort: 99999 is outside 0..=65535",
        ),
        (
            "clientPort=0\nstandaloneEnabled=maybe\n",
            "line 2: key standaloneEnabled: \"maybe\" is not a boolean",
        ),
        (
            "clientPort=0\nserver.1=zoo1:2888\n",
            "line 2: key server.1: \"zoo1:2888\" is not of the form",
        ),
        (
            "clientPort=0\nserver.1=zoo1:2888:3888\nserver.2=zoo2:2888:3888:observer\n",
            "line 3: key server.2: observers without a quorum",
        ),
        (
            "tickTime=2000\n",
            "neither clientPort nor secureClientPort is set",
        ),
        (
            "clientPort=0\nminSessionTimeout=10\n",
            "minimum session timeout (10 ms) is below one tick (3000 ms)",
        ),
    ] {
        let (cfg, stderr) = refused_config(dir.path(), "bad.cfg", text);
        assert!(
            stderr.contains(&cfg) || says.starts_with("minimum"),
            "{text}: {stderr}"
        );
        assert!(stderr.contains(says), "{text}: {stderr}");
    }
    let missing = dir.path().join("missing.cfg").display().to_string();
    let stderr = refused(&["--config", &missing], &[]);
    assert!(
        stderr.contains("cannot read") && stderr.contains("No such file"),
        "{stderr}"
    );
}

#[test]
fn official_image_variables() {
    let zkd = start(
        &[
            "--env-config",
            "--bind",
            "127.0.0.1",
            "--admin-server-bind",
            "127.0.0.1",
        ],
        &[
            ("ZOO_TICK_TIME", "500"),
            ("ZOO_MAX_CLIENT_CNXNS", "5"),
            ("ZOO_4LW_COMMANDS_WHITELIST", "ruok,srvr"),
            ("ZOO_STANDALONE_ENABLED", "true"),
            ("ZOO_ADMINSERVER_ENABLED", "true"),
            ("ZOO_SERVERS", "server.1=localhost:2888:3888"),
            (
                "ZOO_CFG_EXTRA",
                "clientPort=0 admin.serverPort=0 metricsProvider.httpPort=7000",
            ),
            ("ZOO_MY_ID", "1"),
        ],
    );
    // tickTime 500: the session timeout is capped at 20 ticks.
    assert_eq!(use_with_a_client(zkd.addr), Duration::from_secs(10));
    assert_eq!(four_letter(zkd.addr, "ruok"), "imok");
    let (_, body) = get(
        zkd.admin_server.expect("AdminServer"),
        "/commands/configuration",
    );
    assert!(body.contains("\"max_client_cnxns\":5"), "{body}");
    let stderr = zkd.stderr_so_far();
    says(
        &stderr,
        "environment variable ZOO_CFG_EXTRA: key metricsProvider.httpPort does not apply",
    );
}

#[test]
fn confluent_variables() {
    let zkd = start(
        &["--env-config", "--bind", "127.0.0.1"],
        &[
            ("ZOOKEEPER_CLIENT_PORT", "0"),
            ("ZOOKEEPER_TICK_TIME", "400"),
            ("ZOOKEEPER_ADMIN_ENABLE_SERVER", "false"),
        ],
    );
    assert_eq!(use_with_a_client(zkd.addr), Duration::from_secs(8));
    assert_eq!(zkd.admin_server, None);
    assert!(!zkd
        .stdout
        .iter()
        .any(|l| l.starts_with("Started AdminServer")));

    drop(zkd);
    // Confluent's server list: the members run in this process, here on free ports.
    let zkd = start(
        &["--env-config", "--bind", "127.0.0.1", "--port", "0"],
        &[
            (
                "ZOOKEEPER_SERVERS",
                "zoo1:2888:3888;zoo2:2888:3888;zoo3:2888:3888",
            ),
            ("ZOOKEEPER_ADMIN_ENABLE_SERVER", "false"),
        ],
    );
    assert_eq!(zkd.members.len(), 3);
    assert_eq!(modes(&zkd.members), ["follower", "follower", "leader"]);
    let stderr = refused(&["--env-config"], &[("ZOO_TICK_TIME", "soon")]);
    says(
        &stderr,
        "environment variable ZOO_TICK_TIME: key tickTime: \"soon\" is not a whole number",
    );
}

/// Runs kazoo's secure checks (`client-tests/python/secure_checks.py MODE ARGS`); each
/// failed check fails the test.
fn kazoo_checks(args: &[&str]) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../client-tests/python/secure_checks.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new("timeout")
        .args(["-k", "5", "300", &python])
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs (scripts/install-test-deps.sh installs kazoo)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" 0 failed"),
        "kazoo {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn tls_and_sasl_the_zookeeper_way() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = dir.path().join("pki");
    let mut gen_certs = Command::new(env!("CARGO_BIN_EXE_zkd"));
    gen_certs.args(["ctl", "gen-certs"]).arg(&pki);
    common::succeeds(&mut gen_certs, "zkd ctl gen-certs");
    let jaas = write(
        dir.path(),
        "server.jaas",
        "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
         user_bob=\"bobsecret\"\n    user_alice=\"alicesecret\";\n};\n",
    );
    // The keys a ZooKeeper 3.8 set-up with a PEM key store and SASL writes.
    let cfg = write(
        dir.path(),
        "zoo.cfg",
        &format!(
            "clientPort=0\nsecureClientPort=0\nadmin.enableServer=false\n\
             serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
             ssl.keyStore.location={pki}/server-combined.pem\nssl.keyStore.type=PEM\n\
             ssl.trustStore.location={pki}/ca.pem\nssl.trustStore.type=PEM\n\
             ssl.clientAuth=need\n",
            pki = pki.display()
        ),
    );
    let flags = format!("-Xmx512m -Djava.security.auth.login.config={jaas}");
    let zkd = start(&["--config", &cfg], &[("SERVER_JVMFLAGS", &flags)]);
    let secure = zkd.secure.expect("secure port").to_string();
    let pki = pki.display().to_string();
    kazoo_checks(&["tls", &secure, &pki, "CN=client1,O=zkd"]);
    kazoo_checks(&["sasl", &zkd.addr.to_string()]);
    let stderr = zkd.stderr_so_far();
    says(
        &stderr,
        "environment variable SERVER_JVMFLAGS: SASL DIGEST-MD5 users from section Server",
    );
}

/// Kills the child when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a client and a monitor see of a server's settings: four-letter answers, the
/// AdminServer's configuration and the session timeouts it negotiates.
fn observed(addr: SocketAddr, admin: SocketAddr) -> Vec<String> {
    let mut seen: Vec<String> = ["ruok", "conf", "stat", "mntr"]
        .iter()
        .map(|w| format!("{w}: {}", four_letter(addr, w)))
        .collect();
    let srvr = four_letter(addr, "srvr");
    seen.push(format!(
        "srvr standalone: {}",
        srvr.contains("Mode: standalone")
    ));
    let (status, body) = get(admin, "/commands/configuration");
    assert_eq!(status, 200, "{body}");
    let conf: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    for key in [
        "tick_time",
        "max_client_cnxns",
        "min_session_timeout",
        "max_session_timeout",
    ] {
        seen.push(format!("{key}: {}", conf[key]));
    }
    for asked in [1, 100] {
        let got = use_with_a_client_asking(&addr.to_string(), Duration::from_secs(asked));
        seen.push(format!("session asked {asked}s: {got:?}"));
    }
    seen
}

#[test]
fn a_file_means_to_zkd_what_it_means_to_zookeeper() {
    use zkd_testkit::oracle::{four_letter_word, free_port, Launcher};
    let dir = tempfile::tempdir().expect("temp dir");
    // Only where the data goes and the addresses: every other setting is the default.
    let text = |data: &Path, port: u16, admin: u16| {
        format!(
            "dataDir={}\nclientPortAddress=127.0.0.1\nclientPort={port}\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n",
            data.display()
        )
    };
    let zk_dir = dir.path().join("zookeeper");
    let (port, admin) = (free_port().expect("port"), free_port().expect("port"));
    let mut cmd = Launcher::new()
        .admin_server(admin)
        .command_for_file(&zk_dir, &text(&zk_dir.join("data"), port, admin))
        .unwrap_or_else(|e| panic!("{e}"));
    let _zookeeper = KillOnDrop(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("java runs"),
    );
    let zk_addr = SocketAddr::from(([127, 0, 0, 1], port));
    let zk_admin = SocketAddr::from(([127, 0, 0, 1], admin));
    let deadline = std::time::Instant::now() + WAIT;
    while !four_letter_word(zk_addr, "srvr").is_ok_and(|s| s.contains("Mode: standalone"))
        || TcpStream::connect(zk_admin).is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "ZooKeeper did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let zkd_cfg = write(
        dir.path(),
        "zkd.cfg",
        &text(&dir.path().join("zkd-data"), 0, 0),
    );
    let zkd = start(&["--config", &zkd_cfg], &[]);
    let zk_view = observed(zk_addr, zk_admin);
    let zkd_view = observed(zkd.addr, zkd.admin_server.expect("AdminServer"));
    assert_eq!(zkd_view, zk_view);
    // The defaults are ZooKeeper 3.8's: a 3 s tick, sessions of 2 to 20 ticks, 4lw srvr only.
    assert!(
        zk_view.contains(&"tick_time: 3000".to_string()),
        "{zk_view:?}"
    );
    assert!(
        zk_view.contains(&"session asked 100s: 60s".to_string()),
        "{zk_view:?}"
    );
}

/// The sorted `Mode:` lines of the members' `srvr`.
fn modes(members: &[SocketAddr]) -> Vec<String> {
    let mut modes: Vec<String> = members
        .iter()
        .map(|m| {
            let srvr = four_letter(*m, "srvr");
            srvr.lines()
                .find_map(|l| l.strip_prefix("Mode: "))
                .unwrap_or_else(|| panic!("no mode: {srvr}"))
                .to_string()
        })
        .collect();
    modes.sort();
    modes
}

#[test]
fn a_three_server_zoo_cfg_runs_a_simulated_ensemble() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A three-server file as written for one machine, on free ports (clientPort=0).
    let zkd = started_config(
        dir.path(),
        "zoo.cfg",
        "tickTime=2000\ninitLimit=7\nsyncLimit=3\nclientPort=0\nadmin.enableServer=false\n\
         4lw.commands.whitelist=srvr,isro,conf\nreadonlymode.enabled=true\n\
         server.1=localhost:2888:3888\nserver.2=localhost:2889:3889\n\
         server.3=localhost:2890:3890\n",
    );
    assert_eq!(zkd.members.len(), 3, "{:?}", zkd.stdout);
    // ZooKeeper's start-up lines: a binding line per member, the leader's request processor.
    let bindings = zkd
        .stdout
        .iter()
        .filter(|l| l.starts_with("binding to port "))
        .count();
    assert_eq!(bindings, 3, "{:?}", zkd.stdout);
    assert!(
        zkd.stdout
            .iter()
            .any(|l| l == "PrepRequestProcessor (sid:3) started, reconfigEnabled=false"),
        "{:?}",
        zkd.stdout
    );
    assert_eq!(modes(&zkd.members), ["follower", "follower", "leader"]);
    for m in &zkd.members {
        assert_eq!(four_letter(*m, "isro"), "rw");
        let conf = four_letter(*m, "conf");
        assert!(
            conf.contains("\ninitLimit=7\nsyncLimit=3\nelectionAlg=3\n"),
            "{conf}"
        );
    }
    let hosts: Vec<String> = zkd.members.iter().map(ToString::to_string).collect();
    assert_eq!(
        use_with_a_client_asking(&hosts.join(","), Duration::from_secs(30)),
        Duration::from_secs(30)
    );
    let stderr = zkd.stderr_so_far();
    says(
        &stderr,
        "a simulated ensemble of 3 members in this one process",
    );
    says(&stderr, "read-only mode on");
}

#[test]
fn an_observer_line_runs_an_observer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let zkd = started_config(
        dir.path(),
        "zoo.cfg",
        "tickTime=2000\ninitLimit=5\nsyncLimit=2\nclientPort=0\nadmin.enableServer=false\n\
         4lw.commands.whitelist=srvr\npeerType=participant\nserver.1=localhost:2888:3888\nserver.2=localhost:2889:3889\n\
         server.3=localhost:2890:3890\nserver.4=localhost:2891:3891:observer\n",
    );
    assert_eq!(zkd.members.len(), 4, "{:?}", zkd.stdout);
    assert_eq!(
        modes(&zkd.members),
        ["follower", "follower", "leader", "observer"]
    );
    let stderr = zkd.stderr_so_far();
    says(&stderr, "server.4 (observer) on a free port");
    says(&stderr, "key peerType (participant)");
}

#[test]
fn overflowing_times_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    // zoo.cfg: a tick whose derived session timeouts do not fit 32-bit milliseconds (clients
    // were handed a session timeout of -2), and an explicit timeout that does not.
    for (text, says) in [
        ("clientPort=0\ntickTime=2147483647\n", "tickTime"),
        ("clientPort=0\ntickTime=107374183\n", "tickTime"),
        (
            "clientPort=0\nmaxSessionTimeout=2147483648\n",
            "maxSessionTimeout",
        ),
        (
            "clientPort=0\nminSessionTimeout=9999999999\n",
            "minSessionTimeout",
        ),
        (
            "clientPort=0\nznode.container.checkIntervalMs=9223372036854775807\n",
            "znode.container.checkIntervalMs",
        ),
    ] {
        let (_, stderr) = refused_config(dir.path(), "times.cfg", text);
        assert!(stderr.contains(says), "{text}: {stderr}");
        assert!(stderr.contains("32-bit milliseconds"), "{text}: {stderr}");
    }
    // The same through the container variables and through flags.
    let stderr = refused(&["--env-config"], &[("ZOO_TICK_TIME", "2147483647")]);
    says(&stderr, "ZOO_TICK_TIME");
    let stderr = refused(
        &["--env-config"],
        &[
            ("ZOOKEEPER_TICK_TIME", "2147483647"),
            ("ZOOKEEPER_CLIENT_PORT", "0"),
        ],
    );
    says(&stderr, "tickTime");
    for flags in [
        &["--port", "0", "--tick-time", "2147483647"][..],
        &[
            "--port",
            "0",
            "--max-session-timeout",
            "18446744073709551615",
        ],
        &["--port", "0", "--reaper-interval", "18446744073709551615"],
        &["--port", "0", "--snap-interval", "18446744073709551615"],
    ] {
        let stderr = refused(flags, &[]);
        assert!(stderr.contains(flags[2]), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("32-bit milliseconds"),
            "{flags:?}: {stderr}"
        );
    }
    // The largest tick whose 20-tick default still fits starts.
    drop(started_config(
        dir.path(),
        "big-tick.cfg",
        "clientPort=0\ntickTime=107374182\n",
    ));
}

#[test]
fn hostile_files_are_refused_with_a_sentence() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A device as certificate or key: a sentence, not an allocation abort.
    let stderr = refused(
        &[
            "--port",
            "0",
            "--secure-port",
            "0",
            "--tls-cert",
            "/dev/zero",
            "--tls-key",
            "/dev/zero",
        ],
        &[],
    );
    says(&stderr, "/dev/zero is a device, not a regular file");
    // Oversized (sparse) SASL users, JAAS and fixture files are refused by size, unread.
    let big = |name: &str, len: u64| {
        let p = dir.path().join(name);
        std::fs::File::create(&p).unwrap().set_len(len).unwrap();
        p.display().to_string()
    };
    let users = big("users", 2 << 20);
    let stderr = refused(&["--port", "0", "--sasl-users", &users], &[]);
    says(&stderr, "more than the 1048576 bytes");
    let jaas = big("server.jaas", 2 << 20);
    let cfg = write(dir.path(), "sasl.cfg", "clientPort=0\n");
    let flags = format!("-Djava.security.auth.login.config={jaas}");
    let stderr = refused(&["--config", &cfg], &[("SERVER_JVMFLAGS", &flags)]);
    assert!(
        stderr.contains("JAAS file") && stderr.contains("more than the 1048576 bytes"),
        "{stderr}"
    );
    let seed = big("seed.json", 300 << 20);
    let stderr = refused(&["--port", "0", "--seed", &seed], &[]);
    says(&stderr, "more than the 268435456 bytes");
    // A FIFO as zoo.cfg or SASL users file: refused, not waited on.
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.display().to_string();
    let stderr = refused(&["--config", &fifo], &[]);
    says(&stderr, "is a FIFO, not a regular file");
    let stderr = refused(&["--port", "0", "--sasl-users", &fifo], &[]);
    says(&stderr, "is a FIFO, not a regular file");
}

#[test]
fn latin1_and_long_continuations_parse() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A Latin-1 byte in a comment (java.util.Properties reads ISO-8859-1), and 240 KB of
    // continuation lines, each ending in an odd run of backslashes, in an unknown key's
    // value: the file starts zkd, and the key after them still applies.
    let mut text = b"# Configuration de l'\xe9quipe\nclientPort=0\nfrobnicate=x".to_vec();
    for _ in 0..60_000 {
        text.extend_from_slice(b"\\\\\\\n");
    }
    text.extend_from_slice(b"end\n4lw.commands.whitelist=ruok,srvr,stat\n");
    assert!(text.len() > 240_000);
    let path = dir.path().join("latin1.cfg");
    std::fs::write(&path, &text).unwrap();
    let zkd = start(&["--config", path.to_str().unwrap()], &[]);
    assert!(four_letter(zkd.addr, "stat").contains("Zookeeper version"));
    // The unknown key is warned about (stderr is read by a thread: wait for the line).
    let deadline = std::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("frobnicate")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match zkd.stderr.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no warning about the unknown key: {seen:?}"),
        }
    }
}

/// `--zookeeper-version` picks the release zkd reports (3.9 by default) and nothing else is
/// taken; a configuration file cannot name it, so it is a flag that overrides nothing.
#[test]
fn zookeeper_version_flag_picks_the_reported_release() {
    let srvr_of = |args: &[&str]| {
        let mut child = zkd(args, &[]).stdout(Stdio::piped()).spawn().expect("zkd");
        let stdout = child.stdout.take().expect("stdout");
        let addr = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("zkd listening on ").map(str::to_string))
            .and_then(|a| a.parse::<SocketAddr>().ok());
        let srvr = addr.map(|a| four_letter(a, "srvr"));
        let _ = child.kill();
        let _ = child.wait();
        srvr.unwrap_or_else(|| panic!("zkd {args:?} did not listen"))
    };
    let srvr = srvr_of(&["--port", "0"]);
    assert!(srvr.starts_with("Zookeeper version: 3.9."), "{srvr}");
    let srvr = srvr_of(&["--port", "0", "--zookeeper-version", "3.8"]);
    assert!(srvr.starts_with("Zookeeper version: 3.8."), "{srvr}");
    let srvr = srvr_of(&["--port", "0", "--zookeeper-version", "3.9"]);
    assert!(srvr.starts_with("Zookeeper version: 3.9."), "{srvr}");
    for bad in ["3.7", "3.9.3", "latest"] {
        let err = refused(&["--port", "0", "--zookeeper-version", bad], &[]);
        assert!(err.contains("expected 3.8 or 3.9"), "{bad}: {err}");
    }
}

#[test]
fn reconfig_enabled_comes_from_zoo_cfg_or_the_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let servers = "clientPort=0\ninitLimit=5\nsyncLimit=2\nadmin.enableServer=false\n\
                   server.1=localhost:2888:3888\nserver.2=localhost:2889:3889\nserver.3=localhost:2890:3890\n";
    let on = write(
        dir.path(),
        "on.cfg",
        &format!("{servers}reconfigEnabled=true\n"),
    );
    let off = write(dir.path(), "off.cfg", servers);
    let line = |b: bool| format!("PrepRequestProcessor (sid:3) started, reconfigEnabled={b}");
    for (args, enabled) in [
        (vec!["--config", &on], true),
        (vec!["--config", &off], false),
        (vec!["--config", &off, "--reconfig-enabled"], true),
    ] {
        let zkd = start(&args, &[]);
        assert!(
            zkd.stdout.iter().any(|l| *l == line(enabled)),
            "{args:?}: {:?}",
            zkd.stdout
        );
    }
}

/// What ZooKeeper 3.9.3 (`ZooKeeperServerMain`, as `zkServer.sh` runs a file) does with the
/// file `text`: `Some(the reason it gave)` when it exits 2 refusing it, `None` when it starts
/// (it is then killed).
fn zookeeper_verdict(dir: &Path, text: &str) -> Option<String> {
    use zkd_testkit::oracle::{Launcher, ZookeeperVersion};
    let zk_dir = dir.join(format!("zookeeper-{}", text.len()));
    let mut child = Launcher::new()
        .version(ZookeeperVersion::V3_9)
        .command_for_file(&zk_dir, text)
        .unwrap_or_else(|e| panic!("{e}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("java runs");
    // A refusal comes within the JVM's start; one that still runs after 15 s serves.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            let log = std::fs::read_to_string(zk_dir.join("zookeeper.log")).unwrap_or_default();
            assert_eq!(status.code(), Some(2), "ZooKeeper: {log}");
            let reason = log
                .lines()
                .find_map(|l| l.strip_prefix("Caused by: java.lang.IllegalArgumentException: "))
                .unwrap_or_else(|| panic!("no reason in ZooKeeper's log: {log}"));
            return Some(reason.to_string());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn session_timeout_bounds_and_ensemble_limits_are_judged_as_zookeeper_judges_them() {
    use zkd_testkit::oracle::free_port;
    let dir = tempfile::tempdir().expect("temp dir");
    let base = |port: u16| {
        format!(
            "dataDir={}\nclientPortAddress=127.0.0.1\nclientPort={port}\n\
             admin.enableServer=false\n",
            dir.path().join("data").display()
        )
    };
    let servers = "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n\
                   server.3=127.0.0.1:2890:3890\n";
    for (extra, reason) in [
        (
            "maxSessionTimeout=-5\n".to_string(),
            "minSessionTimeout must not be larger than maxSessionTimeout",
        ),
        (
            "maxSessionTimeout=0\n".into(),
            "minSessionTimeout must not be larger than maxSessionTimeout",
        ),
        (
            "tickTime=2000\nminSessionTimeout=50000\n".into(),
            "minSessionTimeout must not be larger than maxSessionTimeout",
        ),
        (servers.to_string(), "initLimit is not set"),
        (format!("initLimit=10\n{servers}"), "syncLimit is not set"),
        (
            format!("initLimit=0\nsyncLimit=5\n{servers}"),
            "initLimit is not set",
        ),
        (
            format!("initLimit=10\nsyncLimit=0\n{servers}"),
            "syncLimit is not set",
        ),
    ] {
        let zk = zookeeper_verdict(
            dir.path(),
            &format!("{}{extra}", base(free_port().unwrap())),
        );
        assert_eq!(zk.as_deref(), Some(reason), "ZooKeeper on {extra}");
        let (_, stderr) = refused_config(dir.path(), "zkd.cfg", &format!("{}{extra}", base(0)));
        assert!(stderr.contains(reason), "{extra}: {stderr}");
    }
    // -1 is the default to both; zkd serves sessions of 2 to 20 ticks then.
    let extra = "minSessionTimeout=-1\nmaxSessionTimeout=-1\n";
    let zk = zookeeper_verdict(
        dir.path(),
        &format!("{}{extra}", base(free_port().unwrap())),
    );
    assert_eq!(zk, None, "ZooKeeper starts with {extra}");
    let zkd = started_config(dir.path(), "zkd.cfg", &format!("{}{extra}", base(0)));
    assert_eq!(
        use_with_a_client_asking(&zkd.addr.to_string(), Duration::from_secs(100)),
        Duration::from_secs(60)
    );
}

#[test]
fn seven_hundred_thousand_unknown_keys_log_one_warning() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut text = String::from("clientPort=0\nadmin.enableServer=false\n");
    for i in 0..700_000 {
        text.push_str(&format!("custom.k{i}=v\n"));
    }
    let zkd = started_config(dir.path(), "many.cfg", &text);
    zkd.stop_and_check_stderr(|stderr| {
        let lines = stderr.lines().count();
        assert!(
            lines < 20,
            "{lines} lines of log: {}",
            &stderr[..stderr.len().min(2000)]
        );
        assert!(
            stderr.contains("700000 unknown keys ignored")
                && stderr.contains("custom.k0 (")
                && stderr.contains("and 699995 more"),
            "{stderr}"
        );
    });
}

/// The `membership:` part of `conf` (the lines after it, up to the end).
fn conf_membership(addr: SocketAddr) -> String {
    let conf = four_letter(addr, "conf");
    conf.split_once("membership: \n")
        .unwrap_or_else(|| panic!("no membership in conf: {conf}"))
        .1
        .trim_end()
        .to_string()
}

#[test]
fn a_reconfigured_membership_survives_a_restart() {
    use zkd_testkit::oracle::free_port;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let (p1, p2, p3, p4) = (
        free_port().unwrap(),
        free_port().unwrap(),
        free_port().unwrap(),
        free_port().unwrap(),
    );
    let cfg = write(
        dir.path(),
        "zoo.cfg",
        &format!(
            "dataDir={}\ntickTime=2000\ninitLimit=5\nsyncLimit=2\nadmin.enableServer=false\n\
             4lw.commands.whitelist=conf,srvr\nreconfigEnabled=true\n\
             DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=\n\
             server.1=127.0.0.1:2888:3888;{p1}\nserver.2=127.0.0.1:2889:3889;{p2}\n\
             server.3=127.0.0.1:2890:3890;{p3}\n",
            data.display()
        ),
    );
    let first = start(&["--config", &cfg], &[]);
    assert_eq!(first.members.len(), 3);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // A fourth voter joins and the first leaves, through the Rust client as the superuser.
    let joining = format!("server.4=127.0.0.1:2891:3891:participant;127.0.0.1:{p4}");
    let (text, stat) = rt.block_on(async {
        let client = zk::Client::connector()
            .connect(&first.members[1].to_string())
            .await
            .expect("connects");
        client.auth("digest", b"super:secret").await.expect("auth");
        let joinings = [joining.as_str()];
        let leavings = ["1"];
        client
            .update_ensemble(
                zk::EnsembleUpdate::Incremental {
                    joinings: joinings.iter().copied(),
                    leavings: leavings.iter().copied(),
                },
                None,
            )
            .await
            .expect("reconfig")
    });
    let text = String::from_utf8(text).expect("text");
    assert!(!text.contains("server.1="), "{text}");
    assert!(text.contains(&format!("\n{joining}\nversion=")), "{text}");
    let version = text.rsplit_once("version=").expect("version").1.to_string();
    assert_eq!(format!("{:x}", stat.mzxid), version);
    let before = conf_membership(first.members[1]);
    assert_eq!(before, text);
    // Kept as ZooKeeper's dynamic file, named after the version, in the data directory.
    let kept = data.join(format!("zoo.cfg.dynamic.{version}"));
    let file = std::fs::read_to_string(&kept).expect("the kept membership");
    assert_eq!(
        file,
        format!(
            "server.2=127.0.0.1:2889:3889:participant;127.0.0.1:{p2}\n\
             server.3=127.0.0.1:2890:3890:participant;127.0.0.1:{p3}\n{joining}"
        )
    );
    first.stop();

    // The same command again starts from the kept membership: members 2, 3 and 4.
    let restarted = start(&["--config", &cfg], &[]);
    let ports: Vec<u16> = restarted.members.iter().map(SocketAddr::port).collect();
    assert_eq!(ports, [p2, p3, p4]);
    for m in &restarted.members {
        assert_eq!(conf_membership(*m), text, "member on {m}");
    }
    let after = rt.block_on(async {
        let client = zk::Client::connector()
            .connect(&restarted.members[2].to_string())
            .await
            .expect("connects");
        client.get_config().await.expect("config").0
    });
    assert_eq!(String::from_utf8(after).expect("text"), text);
    let stderr = restarted.stderr_so_far();
    assert!(
        stderr.contains("the membership a reconfig made (version")
            && stderr.contains("server.4 on"),
        "{stderr}"
    );
    drop(restarted);

    // A damaged kept membership stops the start, naming file and line.
    std::fs::write(&kept, "server.2=127.0.0.1:2889:3889;1\nrm -rf /\n").expect("write");
    let out = zkd(&["--config", &cfg], &[])
        .stdout(Stdio::null())
        .output()
        .expect("zkd runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} line 2: \"rm -rf /\" is not a server.N= line",
            kept.display()
        )),
        "{stderr}"
    );
}

/// A sync of the transaction log over `fsync.warningthresholdms` (here every sync, at -1) is
/// logged as a warning naming the time and the setting.
#[test]
fn a_log_sync_over_the_threshold_is_logged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let zkd = started_config(
        dir.path(),
        "zoo.cfg",
        &format!(
            "clientPort=0\nadmin.enableServer=false\ndataDir={}\nforceSync=yes\n\
             fsync.warningthresholdms=-1\n",
            data.display()
        ),
    );
    use_with_a_client(zkd.addr);
    zkd.stop_and_check_stderr(|stderr| {
        assert!(
            stderr.contains("WARN")
                && stderr.contains("syncing the transaction log took")
                && stderr.contains("fsync.warningthresholdms"),
            "{stderr}"
        );
    });
}
