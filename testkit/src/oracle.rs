//! The one launcher of a real Apache ZooKeeper — 3.8.0 (Debian 12's `zookeeper` package) or
//! 3.9.3 (Debian 13's `libzookeeper-java`, unpacked beside it by
//! `scripts/install-test-deps.sh`) — used by the differential and end-to-end tests, the
//! benchmarks and `scripts/zookeeper-oracle.sh`.
//!
//! The server runs as a child process (`java … ZooKeeperServerMain zoo.cfg`, no wrapper
//! script, so the pid is ours) on a free loopback port with a fresh data directory. Dropping
//! an [`Oracle`] kills the process and removes its temporary directory.
//!
//! Settings: `tickTime=2000`, all four-letter words whitelisted, `forceSync=no`, no admin
//! server, `maxClientCnxns=0` (no per-address connection limit), loopback only, extended types
//! (TTL nodes) enabled, log written to `zookeeper.log` in the server's directory.
//!
//! Environment overrides:
//! * `ZKD_ZOOKEEPER_VERSION`: the release [`Launcher::new`] starts and the end-to-end tests
//!   compare with, `3.8` or `3.9` (default `3.9`; see [`version_from_env`]);
//! * `ZKD_ZOOKEEPER_JARS`: directory holding the 3.8 jars and every dependency jar (default
//!   `/usr/share/java`);
//! * `ZKD_ZOOKEEPER_39_JARS`: directory holding the 3.9.3 `zookeeper.jar` and
//!   `zookeeper-jute.jar` (default `/opt/zkd-test/zookeeper-3.9.3/usr/share/java`); they come
//!   first on the class path, so the 3.8 jute jar that the 3.9.3 jar's manifest names is never
//!   used;
//! * `JAVA_HOME`: the JVM to use (default: `java` on `PATH`).

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod ensemble;
pub mod member_control;
pub mod netns;
pub use ensemble::{EnsembleMember, OracleEnsemble};

/// The message every "not installed" error starts with.
pub const NOT_INSTALLED: &str =
    "Apache ZooKeeper is not installed: run scripts/install-test-deps.sh";

/// Default directory of the Debian-packaged jars.
const DEFAULT_JAR_DIR: &str = "/usr/share/java";

/// Default directory of the ZooKeeper 3.9.3 jars (Debian 13's `libzookeeper-java`, unpacked).
pub const DEFAULT_39_JAR_DIR: &str = "/opt/zkd-test/zookeeper-3.9.3/usr/share/java";

/// The jars that make up the server itself; they come from the chosen release's directory,
/// the rest of [`JARS`] from the dependency directory.
const SERVER_JARS: &[&str] = &["zookeeper.jar", "zookeeper-jute.jar"];

pub use zkd_server::ZookeeperVersion;

/// The release line the end-to-end tests compare with: `ZKD_ZOOKEEPER_VERSION` (`3.8` or
/// `3.9`), by default 3.9 — the same default as zkd's `--zookeeper-version`. Panics on any
/// other value, so a typo never silently tests the wrong release.
pub fn version_from_env() -> ZookeeperVersion {
    match std::env::var("ZKD_ZOOKEEPER_VERSION") {
        Ok(v) if !v.is_empty() => v
            .parse()
            .unwrap_or_else(|e| panic!("ZKD_ZOOKEEPER_VERSION: {e}")),
        _ => ZookeeperVersion::default(),
    }
}

/// The exact release the oracle of a release line is.
pub fn oracle_release(version: ZookeeperVersion) -> &'static str {
    match version {
        ZookeeperVersion::V3_8 => "3.8.0",
        ZookeeperVersion::V3_9 => "3.9.3",
    }
}

/// Jars put on the class path. `zookeeper.jar`'s manifest pulls in the rest of its runtime
/// dependencies (netty, metrics, …); `slf4j-simple` is the logging backend, configured
/// through system properties to write a file. The jute jar comes first: 3.9.3's
/// `zookeeper.jar` names the system's 3.8 `zookeeper-jute.jar` in its manifest, and that one
/// must never be found first (3.9.3 then fails every connection with a `NoSuchMethodError`).
pub const JARS: &[&str] = &[
    "zookeeper-jute.jar",
    "zookeeper.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    // Netty parts the manifest leaves out, needed by the Netty connection factory (TLS).
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-unix-common.jar",
];

/// Jars the AdminServer (embedded Jetty) needs on top of [`JARS`]; Debian's `libjetty9-java`
/// and `libservlet-api-java` ship them.
pub const ADMIN_JARS: &[&str] = &[
    "jetty9-server.jar",
    "jetty9-servlet.jar",
    "jetty9-util.jar",
    "jetty9-http.jar",
    "jetty9-io.jar",
    "jetty9-security.jar",
    "servlet-api.jar",
];

/// The standalone server's entry point.
pub const MAIN_CLASS: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// JVM flags for tests: a JVM that starts fast and stays small.
const TEST_JVM_OPTS: &[&str] = &[
    "-Xshare:auto",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Xms32m",
    "-Xmx256m",
];

/// `zoo.cfg` entries every launched server gets unless overridden.
const DEFAULT_CFG: &[(&str, &str)] = &[
    ("tickTime", "2000"),
    ("4lw.commands.whitelist", "*"),
    ("forceSync", "no"),
    ("admin.enableServer", "false"),
    ("maxClientCnxns", "0"),
    ("clientPortAddress", "127.0.0.1"),
];

/// How long `start` waits for the server to serve requests.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a port collision is retried with a fresh port.
const START_ATTEMPTS: u32 = 3;

/// How to start an Apache ZooKeeper server: JVM, jars, JVM flags, log level and `zoo.cfg`.
#[derive(Debug, Clone)]
pub struct Launcher {
    java: PathBuf,
    version: ZookeeperVersion,
    jar_dir: PathBuf,
    jar_dir_39: PathBuf,
    jvm_opts: Vec<String>,
    log_level: String,
    cfg: Vec<(String, String)>,
    detached: bool,
    admin: bool,
}

impl Default for Launcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Launcher {
    /// The settings the tests use (see the module docs), release, JVM and jars from the
    /// environment.
    pub fn new() -> Launcher {
        let dir = |var: &str, default: &str| {
            std::env::var_os(var)
                .filter(|d| !d.is_empty())
                .map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        Launcher {
            java: java(),
            version: version_from_env(),
            jar_dir: dir("ZKD_ZOOKEEPER_JARS", DEFAULT_JAR_DIR),
            jar_dir_39: dir("ZKD_ZOOKEEPER_39_JARS", DEFAULT_39_JAR_DIR),
            jvm_opts: TEST_JVM_OPTS.iter().map(|s| s.to_string()).collect(),
            log_level: "info".to_string(),
            cfg: DEFAULT_CFG
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            detached: false,
            admin: false,
        }
    }

    /// Runs the given release line's oracle: 3.8.0 or 3.9.3.
    pub fn version(mut self, version: ZookeeperVersion) -> Launcher {
        self.version = version;
        self
    }

    /// The release line this launcher starts.
    pub fn zookeeper_version(&self) -> ZookeeperVersion {
        self.version
    }

    /// Enables the AdminServer on loopback `port` (its jars join the class path).
    pub fn admin_server(mut self, port: u16) -> Launcher {
        self.admin = true;
        self.cfg(&[
            ("admin.enableServer", "true"),
            ("admin.serverAddress", "127.0.0.1"),
            ("admin.serverPort", &port.to_string()),
        ])
    }

    /// Replaces the JVM performance flags (heap, collector, JIT); the system properties the
    /// launcher needs (IPv4, extended types, logging) are always added.
    pub fn jvm_opts(mut self, opts: Vec<String>) -> Launcher {
        self.jvm_opts = opts;
        self
    }

    /// Adds one JVM flag after the performance flags, e.g. a `-D` system property that has
    /// no `zoo.cfg` key.
    pub fn jvm_opt(mut self, opt: &str) -> Launcher {
        self.jvm_opts.push(opt.to_string());
        self
    }

    /// The slf4j-simple log level (`info`, `warn`, …).
    pub fn log_level(mut self, level: &str) -> Launcher {
        self.log_level = level.to_string();
        self
    }

    /// Extra `zoo.cfg` lines. A key given here replaces the default of the same name (e.g.
    /// `("tickTime", "1000")`). `clientPort`, `dataDir` and `dataLogDir` are chosen by the
    /// launcher and cannot be overridden. Keys that 3.8 does not know become
    /// `zookeeper.<key>` system properties of the server.
    pub fn cfg(mut self, extra: &[(&str, &str)]) -> Launcher {
        for (k, v) in extra {
            if matches!(*k, "clientPort" | "dataDir" | "dataLogDir") {
                continue;
            }
            match self.cfg.iter_mut().find(|(ek, _)| ek == k) {
                Some(entry) => entry.1 = v.to_string(),
                None => self.cfg.push((k.to_string(), v.to_string())),
            }
        }
        self
    }

    /// The server gets its own process group and outlives this process (for the script).
    pub fn detached(mut self) -> Launcher {
        self.detached = true;
        self
    }

    /// The JVM this launcher runs.
    pub fn java_path(&self) -> &Path {
        &self.java
    }

    /// The command line, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} {} -cp <{}> {MAIN_CLASS} zoo.cfg (ZooKeeper {})",
            self.java.display(),
            self.jvm_opts.join(" "),
            JARS.join(":"),
            oracle_release(self.version)
        )
    }

    /// The class path: the release's own jars first, then the dependencies and `extra`.
    /// Fails with [`NOT_INSTALLED`] when a jar is missing.
    pub fn classpath(&self, extra: &[&str]) -> Result<OsString, String> {
        let server_dir = match self.version {
            ZookeeperVersion::V3_8 => &self.jar_dir,
            ZookeeperVersion::V3_9 => &self.jar_dir_39,
        };
        classpath_in(server_dir, &self.jar_dir, extra)
    }

    /// Writes `dir/zoo.cfg` and `dir/data/` for a server on `port` and returns the command
    /// that runs it (working directory `dir`, log `dir/zookeeper.log`; stdio left to the
    /// caller). Fails with [`NOT_INSTALLED`] when a jar is missing.
    pub fn command(&self, dir: &Path, port: u16) -> Result<Command, String> {
        let data_dir = dir.join("data");
        self.command_with(dir, &self.zoo_cfg(port, &data_dir), MAIN_CLASS)
    }

    /// Writes `cfg` as it is to `dir/zoo.cfg` (none of the launcher's `zoo.cfg` settings are
    /// added: the file's own keys and ZooKeeper's defaults apply) and returns the command that
    /// runs a standalone server on it; `dir/data/` is created for the file to use.
    pub fn command_for_file(&self, dir: &Path, cfg: &str) -> Result<Command, String> {
        self.command_with(dir, cfg, MAIN_CLASS)
    }

    /// Writes `dir/zoo.cfg` holding `cfg` (and creates `dir/data/`) and returns the command
    /// that runs `main_class` on it.
    fn command_with(&self, dir: &Path, cfg: &str, main_class: &str) -> Result<Command, String> {
        let extra: &[&str] = if self.admin { ADMIN_JARS } else { &[] };
        let classpath = self.classpath(extra)?;
        fs::create_dir_all(dir.join("data"))
            .and_then(|()| fs::write(dir.join("zoo.cfg"), cfg))
            .map_err(|e| format!("cannot prepare {}: {e}", dir.display()))?;
        let mut cmd = Command::new(&self.java);
        cmd.args(&self.jvm_opts)
            .args([
                "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.extendedTypesEnabled=true",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            ])
            .arg(format!(
                "-Dorg.slf4j.simpleLogger.defaultLogLevel={}",
                self.log_level
            ))
            .arg(format!(
                "-Dorg.slf4j.simpleLogger.logFile={}",
                dir.join("zookeeper.log").display()
            ))
            .arg("-cp")
            .arg(classpath)
            .arg(main_class)
            .arg(dir.join("zoo.cfg"))
            .current_dir(dir)
            .stdin(Stdio::null());
        if self.detached {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        Ok(cmd)
    }

    /// Starts a server in a fresh temporary directory on a free port and waits until it
    /// serves requests.
    pub fn start(&self) -> Result<Oracle, String> {
        self.start_attempts(None, None)
    }

    /// Like [`Launcher::start`] in the given directory (kept when the server stops), on
    /// `port` if given (no retry then) or a free one.
    pub fn start_in(&self, dir: &Path, port: Option<u16>) -> Result<Oracle, String> {
        self.start_attempts(Some(dir), port)
    }

    fn start_attempts(&self, dir: Option<&Path>, port: Option<u16>) -> Result<Oracle, String> {
        let mut last_err = String::new();
        let attempts = if port.is_some() { 1 } else { START_ATTEMPTS };
        for _ in 0..attempts {
            match self.try_start(dir, port)? {
                Ok(oracle) => return Ok(oracle),
                // The port was taken between probing and the server binding it: try another.
                Err(e) => last_err = e,
            }
        }
        Err(format!(
            "Apache ZooKeeper could not bind a free port after {attempts} attempt(s): {last_err}"
        ))
    }

    /// One attempt. The outer `Err` is fatal; the inner `Err` means "port collision, retry".
    fn try_start(
        &self,
        given_dir: Option<&Path>,
        port: Option<u16>,
    ) -> Result<Result<Oracle, String>, String> {
        let port = match port {
            Some(p) => p,
            None => free_port().map_err(|e| format!("cannot find a free loopback port: {e}"))?,
        };
        let (dir, owned) = match given_dir {
            Some(d) => {
                fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
                (d.to_path_buf(), false)
            }
            None => (
                make_temp_dir().map_err(|e| format!("cannot create a temporary dir: {e}"))?,
                true,
            ),
        };
        // From here on the directory is removed by `Oracle`'s Drop or by `cleanup`.
        let cleanup = |child: Option<Child>, msg: String| {
            if let Some(mut child) = child {
                let _ = child.kill();
                let _ = child.wait();
            }
            if owned {
                let _ = fs::remove_dir_all(&dir);
            }
            msg
        };
        let mut cmd = match self.command(&dir, port) {
            Ok(c) => c,
            Err(e) => return Err(cleanup(None, e)),
        };
        let files =
            fs::File::create(dir.join("stdout.log")).and_then(|out| Ok((out.try_clone()?, out)));
        let (out, err) = match files {
            Ok(f) => f,
            Err(e) => return Err(cleanup(None, format!("cannot write stdout.log: {e}"))),
        };
        let mut child = match cmd.stdout(out).stderr(err).spawn() {
            Ok(c) => c,
            Err(e) => {
                let java = self.java.display();
                return Err(cleanup(
                    None,
                    format!("{NOT_INSTALLED} (cannot run {java}: {e})"),
                ));
            }
        };

        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let data_dir = dir.join("data");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    let log = read_logs(&dir);
                    let msg = format!(
                        "Apache ZooKeeper exited during start-up ({status}); log:\n{}",
                        tail(&log, 40)
                    );
                    let collision =
                        log.contains("Address already in use") || log.contains("BindException");
                    let msg = cleanup(None, msg);
                    return if collision { Ok(Err(msg)) } else { Err(msg) };
                }
                Ok(None) => {}
                Err(e) => return Err(cleanup(Some(child), format!("waiting for java: {e}"))),
            }
            if four_letter_word(addr, "ruok").ok().as_deref() == Some("imok") {
                // `ruok` answers as soon as the socket is open; `conf` only once the server
                // serves requests. Its dataDir also proves the answer comes from our server and
                // not from someone else's that took the port first.
                let conf = four_letter_word(addr, "conf").unwrap_or_default();
                if let Some(line) = conf.lines().find(|l| l.starts_with("dataDir=")) {
                    if line.contains(&*data_dir.to_string_lossy()) {
                        return Ok(Ok(Oracle {
                            addr,
                            version: self.version,
                            child: Some(child),
                            dir,
                            owned,
                        }));
                    }
                    let msg = format!("port {port} is answered by another server ({line})");
                    return Ok(Err(cleanup(Some(child), msg)));
                }
            }
            if Instant::now() >= deadline {
                let msg = format!(
                    "Apache ZooKeeper did not answer ruok within {}s; log:\n{}",
                    START_TIMEOUT.as_secs(),
                    tail(&read_logs(&dir), 40)
                );
                return Err(cleanup(Some(child), msg));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The server's configuration file.
    fn zoo_cfg(&self, port: u16, data_dir: &Path) -> String {
        let mut cfg = format!("dataDir={}\nclientPort={port}\n", data_dir.display());
        for (k, v) in &self.cfg {
            cfg.push_str(&format!("{k}={v}\n"));
        }
        cfg
    }
}

/// A running Apache ZooKeeper standalone server owned by this process.
pub struct Oracle {
    addr: SocketAddr,
    version: ZookeeperVersion,
    /// `None` once detached.
    child: Option<Child>,
    dir: PathBuf,
    /// Whether the directory is a temporary one to remove on drop.
    owned: bool,
}

impl Oracle {
    /// Starts a server with the test settings and waits until it serves requests.
    pub fn start() -> Result<Oracle, String> {
        Launcher::new().start()
    }

    /// Like [`Oracle::start`], running the given release line's oracle.
    pub fn start_version(version: ZookeeperVersion) -> Result<Oracle, String> {
        Launcher::new().version(version).start()
    }

    /// Like [`Oracle::start`], with extra `zoo.cfg` lines (see [`Launcher::cfg`]).
    pub fn start_with(extra_cfg: &[(&str, &str)]) -> Result<Oracle, String> {
        Launcher::new().cfg(extra_cfg).start()
    }

    /// Client address (`127.0.0.1:port`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The release line this server is (3.8.0 or 3.9.3).
    pub fn version(&self) -> ZookeeperVersion {
        self.version
    }

    /// Process id of the server JVM (0 once detached).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// The directory holding `zoo.cfg`, `data/` and the logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's log file.
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    /// Leaves the server running after this value is gone; returns its pid.
    pub fn detach(mut self) -> u32 {
        self.owned = false;
        self.child.take().map_or(0, |c| c.id())
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.owned {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// `$JAVA_HOME/bin/java` if set, else `java` found on `PATH`, else plain `java`.
pub fn java() -> PathBuf {
    if let Some(home) = std::env::var_os("JAVA_HOME").filter(|h| !h.is_empty()) {
        let java = Path::new(&home).join("bin").join("java");
        if java.is_file() {
            return java;
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let java = dir.join("java");
            if java.is_file() {
                return java;
            }
        }
    }
    PathBuf::from("java")
}

/// `SERVER_JARS` from `server_dir`, the rest of [`JARS`] and `extra` from `dir`.
fn classpath_in(server_dir: &Path, dir: &Path, extra: &[&str]) -> Result<OsString, String> {
    let mut paths = Vec::new();
    for jar in JARS.iter().chain(extra) {
        let from = if SERVER_JARS.contains(jar) {
            server_dir
        } else {
            dir
        };
        let path = from.join(jar);
        if !path.is_file() {
            return Err(format!("{NOT_INSTALLED} (missing {})", path.display()));
        }
        paths.push(path);
    }
    std::env::join_paths(paths).map_err(|e| format!("bad jar path: {e}"))
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// A fresh directory under the system's temporary directory, named after `prefix`.
pub fn temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos:08x}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

fn make_temp_dir() -> std::io::Result<PathBuf> {
    temp_dir("zkd-oracle")
}

/// Sends a four-letter word on a fresh connection and reads the answer until the server
/// closes the connection.
pub fn four_letter_word(addr: SocketAddr, word: &str) -> std::io::Result<String> {
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(word.as_bytes())?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn read_logs(dir: &Path) -> String {
    let mut s = fs::read_to_string(dir.join("stdout.log")).unwrap_or_default();
    s.push_str(&fs::read_to_string(dir.join("zookeeper.log")).unwrap_or_default());
    s
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_overrides_defaults_but_not_port_or_dir() {
        let launcher = Launcher::new().cfg(&[
            ("tickTime", "1000"),
            ("clientPort", "1"),
            ("minSessionTimeout", "100"),
        ]);
        let cfg = launcher.zoo_cfg(1234, Path::new("/tmp/x/data"));
        assert!(cfg.contains("clientPort=1234\n"));
        assert!(!cfg.contains("clientPort=1\n"));
        assert!(cfg.contains("dataDir=/tmp/x/data\n"));
        assert!(cfg.contains("tickTime=1000\n"));
        assert!(!cfg.contains("tickTime=2000"));
        assert!(cfg.contains("minSessionTimeout=100\n"));
        assert!(cfg.contains("4lw.commands.whitelist=*\n"));
    }

    #[test]
    fn missing_jars_say_how_to_install() {
        let dir = std::env::temp_dir().join("zkd-oracle-no-such-dir");
        let err = classpath_in(&dir, &dir, &[]).unwrap_err();
        assert!(
            err.starts_with("Apache ZooKeeper is not installed: run scripts/install-test-deps.sh")
        );
    }
}
