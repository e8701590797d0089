//! Starts a real Apache ZooKeeper 3.8 (Debian's `zookeeper` package) for differential tests.
//!
//! The server runs as a child process of the test (`java … ZooKeeperServerMain zoo.cfg`, no
//! wrapper script, so the pid is ours) on a free loopback port with a fresh temporary data
//! directory. Dropping the [`Oracle`] kills the process and removes the directory.
//!
//! Settings (see also `scripts/zookeeper-oracle.sh`, which starts the same server by hand):
//! `tickTime=2000`, all four-letter words whitelisted, `forceSync=no`, no admin server,
//! `maxClientCnxns=0` (no per-address connection limit), extended types (TTL nodes) enabled,
//! log written to `zookeeper.log` in the temporary directory.
//!
//! Environment overrides:
//! * `ZKD_ZOOKEEPER_JARS`: directory holding the jars (default `/usr/share/java`);
//! * `JAVA_HOME`: the JVM to use (default: `java` on `PATH`).

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The message every "not installed" error starts with.
pub const NOT_INSTALLED: &str =
    "Apache ZooKeeper is not installed: run scripts/install-test-deps.sh";

/// Default directory of the Debian-packaged jars.
const DEFAULT_JAR_DIR: &str = "/usr/share/java";

/// Jars put on the class path. `zookeeper.jar`'s manifest pulls in the rest of its runtime
/// dependencies (netty, metrics, …); `slf4j-simple` is the logging backend, configured
/// through system properties to write a file.
const JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
];

const MAIN_CLASS: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// How long `start` waits for `ruok` to answer `imok`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a port collision is retried with a fresh port.
const START_ATTEMPTS: u32 = 3;

/// A running Apache ZooKeeper standalone server owned by this process.
pub struct Oracle {
    addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

impl Oracle {
    /// Starts a server with the default settings and waits until it answers `ruok`.
    pub fn start() -> Result<Oracle, String> {
        Self::start_with(&[])
    }

    /// Like [`Oracle::start`], with extra `zoo.cfg` lines. A key given here replaces the
    /// default of the same name (e.g. `("tickTime", "1000")`, `("maxClientCnxns", "10")`).
    /// `clientPort` and `dataDir` are chosen by the harness and cannot be overridden. Keys that
    /// 3.8 does not know become `zookeeper.<key>` system properties of the server.
    pub fn start_with(extra_cfg: &[(&str, &str)]) -> Result<Oracle, String> {
        let java = find_java()?;
        let classpath = classpath()?;
        let mut last_err = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(&java, &classpath, extra_cfg)? {
                Ok(oracle) => return Ok(oracle),
                // The port was taken between probing and the server binding it: try another.
                Err(e) => last_err = e,
            }
        }
        Err(format!(
            "Apache ZooKeeper could not bind a free port after {START_ATTEMPTS} attempts: {last_err}"
        ))
    }

    /// Client address (`127.0.0.1:port`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Process id of the server JVM.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temporary directory holding `zoo.cfg`, `data/` and the logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's log file.
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    /// One attempt. The outer `Err` is fatal; the inner `Err` means "port collision, retry".
    fn try_start(
        java: &Path,
        classpath: &OsString,
        extra_cfg: &[(&str, &str)],
    ) -> Result<Result<Oracle, String>, String> {
        let port = free_port().map_err(|e| format!("cannot find a free loopback port: {e}"))?;
        let dir = make_temp_dir().map_err(|e| format!("cannot create a temporary dir: {e}"))?;
        // From here on the directory is removed by `Oracle`'s Drop or by `cleanup`.
        let cleanup = |child: Option<Child>, msg: String| {
            if let Some(mut child) = child {
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = fs::remove_dir_all(&dir);
            msg
        };

        let data_dir = dir.join("data");
        let cfg_path = dir.join("zoo.cfg");
        let log_path = dir.join("zookeeper.log");
        let out_path = dir.join("stdout.log");
        let setup = (|| -> std::io::Result<(fs::File, fs::File)> {
            fs::create_dir(&data_dir)?;
            fs::write(&cfg_path, zoo_cfg(port, &data_dir, extra_cfg))?;
            let out = fs::File::create(&out_path)?;
            let err = out.try_clone()?;
            Ok((out, err))
        })();
        let (out, err) = match setup {
            Ok(files) => files,
            Err(e) => {
                return Err(cleanup(
                    None,
                    format!("cannot prepare {}: {e}", dir.display()),
                ))
            }
        };

        let spawned = Command::new(java)
            .args([
                "-Xshare:auto",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-XX:-UsePerfData",
                "-Xms32m",
                "-Xmx256m",
                "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.extendedTypesEnabled=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            ])
            .arg(format!(
                "-Dorg.slf4j.simpleLogger.logFile={}",
                log_path.display()
            ))
            .arg("-cp")
            .arg(classpath)
            .arg(MAIN_CLASS)
            .arg(&cfg_path)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                return Err(cleanup(
                    None,
                    format!("{NOT_INSTALLED} (cannot run {}: {e})", java.display()),
                ))
            }
        };

        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
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
                        return Ok(Ok(Oracle { addr, child, dir }));
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
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The server's configuration file.
fn zoo_cfg(port: u16, data_dir: &Path, extra: &[(&str, &str)]) -> String {
    let mut entries: Vec<(String, String)> = [
        ("tickTime", "2000"),
        ("4lw.commands.whitelist", "*"),
        ("forceSync", "no"),
        ("admin.enableServer", "false"),
        ("maxClientCnxns", "0"),
        ("clientPortAddress", "127.0.0.1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        if matches!(*k, "clientPort" | "dataDir" | "dataLogDir") {
            continue;
        }
        match entries.iter_mut().find(|(ek, _)| ek == k) {
            Some(entry) => entry.1 = v.to_string(),
            None => entries.push((k.to_string(), v.to_string())),
        }
    }
    let mut cfg = format!("dataDir={}\nclientPort={port}\n", data_dir.display());
    for (k, v) in entries {
        cfg.push_str(&format!("{k}={v}\n"));
    }
    cfg
}

/// `$JAVA_HOME/bin/java` if set, else `java` on `PATH`.
fn find_java() -> Result<PathBuf, String> {
    if let Some(home) = std::env::var_os("JAVA_HOME").filter(|h| !h.is_empty()) {
        let java = Path::new(&home).join("bin").join("java");
        if java.is_file() {
            return Ok(java);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let java = dir.join("java");
            if java.is_file() {
                return Ok(java);
            }
        }
    }
    Err(format!("{NOT_INSTALLED} (no `java` on PATH)"))
}

fn classpath() -> Result<OsString, String> {
    let dir = std::env::var_os("ZKD_ZOOKEEPER_JARS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_JAR_DIR));
    classpath_in(&dir)
}

fn classpath_in(dir: &Path) -> Result<OsString, String> {
    let mut paths = Vec::new();
    for jar in JARS {
        let path = dir.join(jar);
        if !path.is_file() {
            return Err(format!("{NOT_INSTALLED} (missing {})", path.display()));
        }
        paths.push(path);
    }
    std::env::join_paths(paths).map_err(|e| format!("bad jar path: {e}"))
}

/// A loopback port nobody listens on right now.
fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

fn make_temp_dir() -> std::io::Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("zkd-oracle-{}-{n}-{nanos:08x}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Sends a four-letter word on a fresh connection and reads the answer until the server
/// closes the connection.
fn four_letter_word(addr: SocketAddr, word: &str) -> std::io::Result<String> {
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
        let cfg = zoo_cfg(
            1234,
            Path::new("/tmp/x/data"),
            &[
                ("tickTime", "1000"),
                ("clientPort", "1"),
                ("minSessionTimeout", "100"),
            ],
        );
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
        let err = classpath_in(&dir).unwrap_err();
        assert!(
            err.starts_with("Apache ZooKeeper is not installed: run scripts/install-test-deps.sh")
        );
    }
}
