//! Folds [`Settings`] into the [`Config`] the flags built: a flag given on the command line
//! wins; otherwise the file's value; otherwise ZooKeeper's default (which differs from zkd's
//! flag defaults for tickTime, the four-letter whitelist, TTL nodes, the container check
//! interval, fsync and the AdminServer).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use zkd_server::{ClientAuth, Config, FourLetterWhitelist, FsyncPolicy, SaslUsers, TlsConfig};

use super::keys::{Set, Settings};
use super::{ConfigError, Note, Origin};

/// Which kind of source the settings came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `--config FILE`: ZooKeeper's own defaults.
    File,
    /// `--env-config`: the official image's defaults (tickTime 2000, client port 2181) and
    /// all interfaces, which is what a container is for.
    Env,
}

/// ZooKeeper's AdminServer port when `admin.serverPort` is not set.
pub const ADMIN_SERVER_PORT: u16 = 8080;

/// Applies `s` to `c`. `given(id)` says whether the flag with that clap id was on the
/// command line; `source` names the file or the environment; `jaas` is the JAAS file the
/// JVM flags variables name, with the variable. Returns the lines to log.
pub fn apply(
    s: &Settings,
    mode: Mode,
    source: &Origin,
    given: &dyn Fn(&str) -> bool,
    jaas: Option<(String, PathBuf)>,
    c: &mut Config,
) -> Result<Vec<Note>, ConfigError> {
    let mut notes = s.notes.clone();
    let unless = |id: &str| !given(id);
    let err = |origin: &Origin, key: &str, message: String| ConfigError {
        origin: origin.clone(),
        key: Some(key.to_string()),
        message,
    };

    // Membership: no server line, or one, is a standalone server; more (or one with
    // standaloneEnabled=false) are the members of a simulated ensemble.
    let standalone = s.standalone_enabled.as_ref().is_none_or(|b| b.value);
    let (member, ensemble) = match s.servers.as_slice() {
        [] => (None, false),
        [one] if standalone => (Some(one), false),
        [first, ..] if given("ensemble") => {
            notes.push(Note::info(format!(
                "{}: the server.N lines are not used: --ensemble gives the members",
                first.origin
            )));
            (None, false)
        }
        lines => {
            let e =
                super::members::ensemble(lines, s, given("port").then_some(c.port), &mut notes)?;
            limits_are_set(s, mode, source)?;
            c.port = e.members.first().map_or(c.port, |m| m.port);
            c.ensemble = Some(e);
            (None, true)
        }
    };
    if let Some(ro) = s
        .read_only_enabled
        .as_ref()
        .filter(|_| c.ensemble.is_none())
    {
        notes.push(Note::info(format!(
            "{}: key readonlymode.enabled: a standalone server has no quorum to lose, so \
             read-only mode never starts",
            ro.origin
        )));
    }

    // Client port and address.
    let line_client = member.and_then(|m| m.client.clone().map(|c| (m, c)));
    if unless("port") && !ensemble {
        c.port = match (&s.client_port, &line_client) {
            (Some(p), Some((m, (_, lp)))) if p.value != *lp => {
                return Err(err(
                    &m.origin,
                    &format!("server.{}", m.id),
                    format!(
                        "client port {lp} differs from clientPort={} ({})",
                        p.value, p.origin
                    ),
                ))
            }
            (Some(p), _) => p.value,
            (None, Some((_, (_, lp)))) => *lp,
            (None, None) if mode == Mode::Env => 2181,
            // secureClientPort alone: the secure port only, as ZooKeeper does.
            (None, None) if s.secure_client_port.is_some() && unless("secure_port") => {
                c.secure_only = true;
                c.port
            }
            (None, None) => {
                return Err(ConfigError {
                    origin: source.clone(),
                    key: None,
                    message: "neither clientPort nor secureClientPort is set: add \
                              clientPort=N, or give --port"
                        .into(),
                })
            }
        };
    }
    if unless("bind") {
        let line_address = line_client
            .as_ref()
            .and_then(|(m, (addr, _))| addr.clone().map(|a| (m, a)));
        c.bind = match (&s.client_port_address, line_address) {
            (Some(a), _) => a.value,
            (None, Some((m, text))) => resolve(&text).ok_or_else(|| {
                err(
                    &m.origin,
                    &format!("server.{}", m.id),
                    format!("client address {text:?} is neither an IP address nor a host name that resolves"),
                )
            })?,
            (None, None) => {
                let (ip, note) = default_bind(mode, source, "clientPortAddress", "client port", "--bind");
                notes.push(note);
                ip
            }
        };
    }

    if unless("tick_time") {
        let default = if mode == Mode::Env { 2000 } else { 3000 };
        c.tick_time = Duration::from_millis(s.tick_time.as_ref().map_or(default, |t| t.value));
    }
    session_timeouts(s, source, given, c)?;
    if let Some(v) = from_file(given, "max_client_cnxns", &s.max_client_cnxns) {
        c.max_client_cnxns = *v;
    }
    if unless("four_letter_whitelist") {
        let list = s
            .four_letter_whitelist
            .as_ref()
            .map_or("", |w| w.value.as_str());
        c.four_letter_whitelist = FourLetterWhitelist::parse(list)
            .map_err(|m| err(source, "4lw.commands.whitelist", m))?;
    }
    if unless("reconfig_enabled") {
        c.reconfig_enabled = s.reconfig_enabled.as_ref().is_some_and(|b| b.value);
    }
    if unless("no_ttl") {
        c.ttl_enabled = s.extended_types_enabled.as_ref().is_some_and(|b| b.value);
    }
    if unless("reaper_interval") {
        c.reaper_interval = Duration::from_millis(
            s.container_check_interval
                .as_ref()
                .map_or(60_000, |i| i.value),
        );
    }
    if let Some(v) = from_file(given, "max_frame_len", &s.jute_max_buffer) {
        c.max_frame_len = *v as usize;
    }

    // Persistence.
    if let Some(v) = from_file(given, "data_dir", &s.data_dir) {
        c.data_dir = Some(v.clone());
    }
    if let Some(v) = from_file(given, "snap_retain_count", &s.snap_retain_count) {
        c.snap_retain_count = usize::try_from(*v).unwrap_or(usize::MAX);
    }
    if let Some(v) = from_file(given, "snap_count", &s.snap_count) {
        c.snap_count = *v;
    }
    if let Some(v) = &s.fsync_warning_threshold_ms {
        c.fsync_warning_threshold_ms = v.value;
    }
    if unless("fsync") {
        c.fsync = if s.force_sync.as_ref().is_none_or(|f| f.value) {
            FsyncPolicy::Always
        } else {
            FsyncPolicy::Never
        };
    }

    // The read-only AdminServer listener.
    if unless("admin_server_port") {
        let enabled = s.admin_enable_server.as_ref().is_none_or(|b| b.value);
        c.admin_server_port = enabled.then(|| {
            s.admin_server_port
                .as_ref()
                .map_or(ADMIN_SERVER_PORT, |p| p.value)
        });
    }
    if c.admin_server_port.is_some() && unless("admin_server_bind") {
        c.admin_server_bind = match &s.admin_server_address {
            Some(a) => a.value,
            None => {
                let (ip, note) = default_bind(
                    mode,
                    source,
                    "admin.serverAddress",
                    "AdminServer",
                    "--admin-server-bind",
                );
                notes.push(note);
                ip
            }
        };
    }

    // Secure client port.
    if let Some(v) = from_file(given, "secure_port", &s.secure_client_port) {
        c.secure_port = Some(*v);
        if let Some(a) = &s.secure_client_port_address {
            if a.value != c.bind {
                return Err(err(
                    &a.origin,
                    "secureClientPortAddress",
                    format!(
                        "zkd serves the secure port on the client port's address ({}), not {}",
                        c.bind, a.value
                    ),
                ));
            }
        }
    }
    if c.secure_port.is_some() && c.tls.is_none() {
        c.tls = Some(tls(s, source, c.secure_port)?);
    }
    if let Some(v) = from_file(given, "x509_super_user", &s.x509_super_user) {
        c.x509_super_user = Some(v.clone());
    }
    if let Some(v) = from_file(given, "super_digest", &s.super_digest) {
        c.super_digest = Some(v.clone());
    }
    if let Some(v) = from_file(given, "sasl_super_user", &s.sasl_super_user) {
        c.sasl_super_user = Some(v.clone());
    }
    if unless("enforce_auth_schemes") {
        c.enforce_auth_schemes = enforced_schemes(s)?;
    }
    if let Some((var, path)) = jaas.filter(|_| unless("sasl_users")) {
        let origin = Origin::Env { var };
        let section = s
            .sasl_section
            .as_ref()
            .map_or("Server", |s| s.value.as_str());
        let text = zkd_server::files::read_capped_text(&path, zkd_server::files::SMALL_FILE_CAP)
            .map_err(|e| ConfigError {
                origin: origin.clone(),
                key: None,
                message: format!("cannot read the JAAS file: {e}"),
            })?;
        let users = SaslUsers::parse(&text, section).map_err(|e| ConfigError {
            origin: origin.clone(),
            key: None,
            message: format!("JAAS file {}: {e}", path.display()),
        })?;
        notes.push(Note::info(format!(
            "{origin}: SASL DIGEST-MD5 users from section {section} of {}",
            path.display()
        )));
        c.sasl_users = Some(users);
    }
    Ok(notes)
}

/// An ensemble's file must set `initLimit` and `syncLimit` to something other than 0, as
/// ZooKeeper's quorum configuration requires (its sentences: "initLimit is not set",
/// "syncLimit is not set"). `--ensemble N`, which has no file, keeps 10 and 5, and so do
/// the container variables when they leave them out (the image's own file always has them).
fn limits_are_set(s: &Settings, mode: Mode, source: &Origin) -> Result<(), ConfigError> {
    for (key, limit) in [("initLimit", &s.init_limit), ("syncLimit", &s.sync_limit)] {
        let (origin, how) = match limit {
            None if mode == Mode::Env => continue,
            None => (source.clone(), "missing"),
            Some(l) if l.value == 0 => (l.origin.clone(), "0"),
            Some(_) => continue,
        };
        return Err(ConfigError {
            origin,
            key: Some(key.into()),
            message: format!(
                "{key} is not set ({how}): a file whose server lines make an ensemble needs \
                 {key}=N (N ticks, not 0), as ZooKeeper requires; zkd's members need no \
                 limit, but the file is refused as ZooKeeper refuses it"
            ),
        });
    }
    Ok(())
}

/// `minSessionTimeout` and `maxSessionTimeout` as ZooKeeper reads them: -1 (or no key) is
/// the default (2 and 20 ticks), any other value is taken as it is, and a minimum above the
/// maximum is refused with ZooKeeper's sentence. A negative minimum other than -1, which
/// ZooKeeper takes as no lower bound, is refused: zkd keeps every session at least one tick
/// (see `Config::validate`).
fn session_timeouts(
    s: &Settings,
    source: &Origin,
    given: &dyn Fn(&str) -> bool,
    c: &mut Config,
) -> Result<(), ConfigError> {
    let key_error = |t: &Set<i64>, key: &str, message: String| ConfigError {
        origin: t.origin.clone(),
        key: Some(key.to_string()),
        message,
    };
    let min = s
        .min_session_timeout
        .as_ref()
        .filter(|_| !given("min_session_timeout"));
    let max = s
        .max_session_timeout
        .as_ref()
        .filter(|_| !given("max_session_timeout"));
    if let Some(t) = min {
        c.min_session_timeout = match t.value {
            -1 => None,
            n if n < 0 => {
                return Err(key_error(
                    t,
                    "minSessionTimeout",
                    format!(
                        "{n} ms is negative: zkd keeps every session at least one tick; set \
                         -1 (or leave the key out) for the default of 2 ticks"
                    ),
                ))
            }
            n => Some(Duration::from_millis(n as u64)),
        };
    }
    // A negative maximum other than -1 is below any minimum, as it is to ZooKeeper.
    let max_ms = match max {
        Some(t) if t.value != -1 => {
            let ms = t.value;
            if ms >= 0 {
                c.max_session_timeout = Some(Duration::from_millis(ms as u64));
            }
            Some(ms)
        }
        Some(_) => {
            c.max_session_timeout = None;
            None
        }
        None => None,
    };
    let min_ms = i64::try_from(c.min_session_timeout().as_millis()).unwrap_or(i64::MAX);
    let max_ms = max_ms
        .unwrap_or_else(|| i64::try_from(c.max_session_timeout().as_millis()).unwrap_or(i64::MAX));
    // A bound beyond 32-bit milliseconds is refused as such by `Config::validate`.
    let fits = |ms: i64| ms <= i64::from(i32::MAX);
    if (min.is_some() || max.is_some()) && fits(min_ms) && fits(max_ms) && min_ms > max_ms {
        let default = |is: bool| if is { " (the default)" } else { "" };
        let (origin, key) = match (max, min) {
            (Some(t), _) => (t.origin.clone(), "maxSessionTimeout"),
            (None, Some(t)) => (t.origin.clone(), "minSessionTimeout"),
            (None, None) => (source.clone(), "maxSessionTimeout"),
        };
        return Err(ConfigError {
            origin,
            key: Some(key.into()),
            message: format!(
                "minSessionTimeout must not be larger than maxSessionTimeout: the minimum is \
                 {min_ms} ms{}, the maximum {max_ms} ms{} (tickTime {} ms)",
                default(c.min_session_timeout.is_none()),
                default(c.max_session_timeout.is_none() && max.is_none_or(|t| t.value == -1)),
                c.tick_time.as_millis()
            ),
        });
    }
    Ok(())
}

/// The schemes to enforce, as ZooKeeper reads them: `sessionRequireClientSASLAuth=true` means
/// sasl (and wins); `enforce.auth.enabled=true` needs `enforce.auth.schemes`.
fn enforced_schemes(s: &Settings) -> Result<Vec<String>, ConfigError> {
    if s.session_require_sasl.as_ref().is_some_and(|v| v.value) {
        return Ok(vec!["sasl".to_string()]);
    }
    match (&s.enforce_auth_enabled, &s.enforce_auth_schemes) {
        (Some(on), schemes) if on.value => match schemes {
            Some(list) if !list.value.is_empty() => Ok(list.value.clone()),
            _ => Err(ConfigError {
                origin: on.origin.clone(),
                key: Some("enforce.auth.enabled".into()),
                message: "enforce.auth.enabled is true, so enforce.auth.schemes must name the \
                          schemes to enforce"
                    .into(),
            }),
        },
        _ => Ok(Vec::new()),
    }
}

/// The value the source set for a setting whose flag (clap id `flag`) was not given.
fn from_file<'a, T>(
    given: &dyn Fn(&str) -> bool,
    flag: &str,
    v: &'a Option<Set<T>>,
) -> Option<&'a T> {
    v.as_ref().filter(|_| !given(flag)).map(|s| &s.value)
}

/// The address to bind when the source names none: loopback for a file (the one deliberate
/// deviation from ZooKeeper, which binds all interfaces), all interfaces in a container.
fn default_bind(mode: Mode, source: &Origin, key: &str, what: &str, flag: &str) -> (IpAddr, Note) {
    match mode {
        Mode::File => (
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            Note::info(format!(
                "{source}: no {key}, so the {what} binds 127.0.0.1 (loopback) where ZooKeeper \
                 would bind all interfaces; set {key}=0.0.0.0 or {flag} to serve other hosts"
            )),
        ),
        Mode::Env => (
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Note::info(format!(
                "{source}: the {what} binds all interfaces (0.0.0.0), as the ZooKeeper image \
                 does: a container is reached through its published ports"
            )),
        ),
    }
}

/// Resolves an address or host name.
fn resolve(text: &str) -> Option<IpAddr> {
    use std::net::ToSocketAddrs as _;
    text.parse().ok().or_else(|| {
        (text, 0)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
    })
}

/// The secure port's PEM files from the key and trust stores.
fn tls(s: &Settings, source: &Origin, port: Option<u16>) -> Result<TlsConfig, ConfigError> {
    let missing = || ConfigError {
        origin: s
            .secure_client_port
            .as_ref()
            .map_or(source.clone(), |p| p.origin.clone()),
        key: Some("secureClientPort".into()),
        message: format!(
            "the secure port{} needs ssl.keyStore.location (a PEM file with the private key \
             and the certificate chain), or --tls-cert and --tls-key",
            port.map_or(String::new(), |p| format!(" {p}"))
        ),
    };
    let key_store = s.key_store_location.as_ref().ok_or_else(missing)?;
    pem_store(key_store, s.key_store_type.as_ref(), "ssl.keyStore")?;
    let client_ca = match &s.trust_store_location {
        Some(t) => {
            pem_store(t, s.trust_store_type.as_ref(), "ssl.trustStore")?;
            Some(t.value.clone())
        }
        None => None,
    };
    let client_auth = s.client_auth.as_ref().map_or(ClientAuth::Need, |a| a.value);
    if client_auth != ClientAuth::None && client_ca.is_none() {
        let origin = s
            .client_auth
            .as_ref()
            .map_or(key_store.origin.clone(), |a| a.origin.clone());
        return Err(ConfigError {
            origin,
            key: Some("ssl.clientAuth".into()),
            message: "client certificates are verified (ssl.clientAuth is need, ZooKeeper's \
                      default, or want) but no ssl.trustStore.location names the CA \
                      certificates (PEM); add one, or set ssl.clientAuth=none"
                .into(),
        });
    }
    Ok(TlsConfig {
        cert: key_store.value.clone(),
        key: key_store.value.clone(),
        client_ca,
        client_auth,
    })
}

/// Checks that a key or trust store is PEM, by its type or, as ZooKeeper infers it, its
/// file name's extension.
fn pem_store(
    location: &Set<PathBuf>,
    kind: Option<&Set<String>>,
    prefix: &str,
) -> Result<(), ConfigError> {
    let (origin, key, ty) = match kind {
        Some(t) => (
            t.origin.clone(),
            format!("{prefix}.type"),
            t.value.to_ascii_uppercase(),
        ),
        None => {
            let ext = location
                .value
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_ascii_lowercase();
            let ty = match ext.as_str() {
                "pem" | "crt" | "key" => "PEM",
                "jks" => "JKS",
                "p12" | "pfx" => "PKCS12",
                "bcfks" => "BCFKS",
                _ => "",
            };
            (
                location.origin.clone(),
                format!("{prefix}.location"),
                ty.to_string(),
            )
        }
    };
    match ty.as_str() {
        "PEM" => Ok(()),
        "" => Err(ConfigError {
            origin,
            key: Some(key),
            message: format!(
                "cannot tell the type of {} from its name; set {prefix}.type=PEM",
                location.value.display()
            ),
        }),
        other => Err(ConfigError {
            origin,
            key: Some(key),
            message: format!(
                "zkd reads PEM files only, not {other}; convert it (openssl pkcs12 -nodes, or \
                 keytool -importkeystore to PKCS12 first) and set {prefix}.type=PEM"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{keys, props, Level};
    use super::*;

    fn settings(text: &str) -> Settings {
        keys::interpret(&props::read("zoo.cfg", text).expect("lines").0).expect("settings")
    }

    fn source() -> Origin {
        Origin::Source("zoo.cfg".into())
    }

    fn run(text: &str, mode: Mode, flags: &[&str]) -> Result<(Config, Vec<Note>), String> {
        let mut c = Config::default();
        let given = |id: &str| flags.contains(&id);
        let notes = apply(&settings(text), mode, &source(), &given, None, &mut c)
            .map_err(|e| e.to_string())?;
        Ok((c, notes))
    }

    fn file(text: &str) -> Config {
        run(text, Mode::File, &[]).expect("valid").0
    }

    #[test]
    fn zookeeper_defaults_in_file_mode() {
        let (c, notes) = run("clientPort=2181\n", Mode::File, &[]).unwrap();
        assert_eq!(c.port, 2181);
        assert_eq!(c.bind, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(c.tick_time, Duration::from_millis(3000));
        assert_eq!(c.min_session_timeout(), Duration::from_millis(6000));
        assert_eq!(c.max_session_timeout(), Duration::from_millis(60000));
        assert_eq!(c.max_client_cnxns, 60);
        assert_eq!(
            c.four_letter_whitelist,
            FourLetterWhitelist::parse("").unwrap()
        );
        assert!(!c.ttl_enabled);
        assert_eq!(c.reaper_interval, Duration::from_secs(60));
        assert_eq!(c.max_frame_len, 0xFFFFF);
        assert_eq!(c.fsync, FsyncPolicy::Always);
        assert_eq!(c.snap_retain_count, 3);
        assert_eq!(c.admin_server_port, Some(8080));
        assert_eq!(c.admin_server_bind, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(c.admin_port, None, "the control plane needs its own option");
        assert_eq!((c.data_dir, c.secure_port), (None, None));
        // One info line for each loopback bind, naming the deviation.
        assert_eq!(notes.len(), 2);
        assert!(notes.iter().all(|n| n.level == Level::Info));
        assert!(notes[0]
            .text
            .contains("no clientPortAddress, so the client port binds 127.0.0.1"));
        assert!(notes[1].text.contains("no admin.serverAddress"));
    }

    #[test]
    fn file_values_apply() {
        let c = file(
            "clientPort=2281\nclientPortAddress=0.0.0.0\ntickTime=100\nminSessionTimeout=300\n\
             maxSessionTimeout=900\nmaxClientCnxns=7\n4lw.commands.whitelist=*\n\
             extendedTypesEnabled=true\nznode.container.checkIntervalMs=250\n\
             jute.maxbuffer=2048\ndataDir=/tmp/zk\nautopurge.snapRetainCount=4\nsnapCount=50\n\
             forceSync=no\nadmin.serverPort=9090\nadmin.serverAddress=0.0.0.0\n\
             DigestAuthenticationProvider.superDigest=super:x\nsuperUser=alice\n\
             X509AuthenticationProvider.superUser=CN=root\nreconfigEnabled=true\n\
             fsync.warningthresholdms=-1\n",
        );
        assert!(c.reconfig_enabled);
        assert!(
            !file("clientPort=2281\n").reconfig_enabled,
            "ZooKeeper's default"
        );
        assert_eq!((c.port, c.bind), (2281, IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        assert_eq!(c.tick_time, Duration::from_millis(100));
        assert_eq!(c.min_session_timeout(), Duration::from_millis(300));
        assert_eq!(c.max_session_timeout(), Duration::from_millis(900));
        assert_eq!(c.max_client_cnxns, 7);
        assert_eq!(c.four_letter_whitelist, FourLetterWhitelist::All);
        assert!(c.ttl_enabled);
        assert_eq!(c.reaper_interval, Duration::from_millis(250));
        assert_eq!(c.max_frame_len, 2048);
        assert_eq!(c.data_dir, Some(PathBuf::from("/tmp/zk")));
        assert_eq!((c.snap_retain_count, c.snap_count), (4, 50));
        assert_eq!(c.fsync_warning_threshold_ms, -1);
        assert_eq!(
            file("clientPort=2281\n").fsync_warning_threshold_ms,
            1000,
            "ZooKeeper's default"
        );
        assert_eq!(c.fsync, FsyncPolicy::Never);
        assert_eq!(c.admin_server_port, Some(9090));
        assert_eq!(c.admin_server_bind, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(c.super_digest.as_deref(), Some("super:x"));
        assert_eq!(c.sasl_super_user.as_deref(), Some("alice"));
        assert_eq!(c.x509_super_user.as_deref(), Some("CN=root"));
        assert_eq!(
            file("clientPort=1\nadmin.enableServer=false\n").admin_server_port,
            None
        );
        assert_eq!(
            file("clientPort=1\nmaxSessionTimeout=-1\n").max_session_timeout,
            None
        );
    }

    #[test]
    fn session_timeout_bounds_as_zookeeper_judges_them() {
        let err = |text: &str| run(text, Mode::File, &[]).unwrap_err();
        // A maximum below the minimum (a negative one other than -1 included) is
        // ZooKeeper's "minSessionTimeout must not be larger than maxSessionTimeout".
        for (text, says) in [
            (
                "clientPort=1\nmaxSessionTimeout=-5\n",
                "zoo.cfg line 2: key maxSessionTimeout: minSessionTimeout must not be larger \
                 than maxSessionTimeout: the minimum is 6000 ms (the default), the maximum -5 \
                 ms (tickTime 3000 ms)",
            ),
            (
                "clientPort=1\nmaxSessionTimeout=0\n",
                "the minimum is 6000 ms (the default), the maximum 0 ms",
            ),
            (
                "clientPort=1\ntickTime=2000\nminSessionTimeout=50000\n",
                "zoo.cfg line 3: key minSessionTimeout: minSessionTimeout must not be larger \
                 than maxSessionTimeout: the minimum is 50000 ms, the maximum 40000 ms (the \
                 default)",
            ),
            (
                "clientPort=1\nminSessionTimeout=9000\nmaxSessionTimeout=8000\n",
                "line 3: key maxSessionTimeout: minSessionTimeout must not be larger",
            ),
            (
                "clientPort=1\nminSessionTimeout=-5\n",
                "line 2: key minSessionTimeout: -5 ms is negative",
            ),
        ] {
            let e = err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
        // -1 is the default; equal bounds are fine.
        let c = file("clientPort=1\nminSessionTimeout=-1\nmaxSessionTimeout=-1\n");
        assert_eq!((c.min_session_timeout, c.max_session_timeout), (None, None));
        let c = file("clientPort=1\nminSessionTimeout=7000\nmaxSessionTimeout=7000\n");
        assert_eq!(c.max_session_timeout(), Duration::from_millis(7000));
        // A flag's bound counts against the file's other bound.
        let e = run(
            "clientPort=1\nmaxSessionTimeout=-5\n",
            Mode::File,
            &["max_session_timeout"],
        );
        assert!(e.is_ok(), "the flag replaces the file's maximum");
    }

    #[test]
    fn flags_given_on_the_command_line_win() {
        let text = "clientPort=2281\nclientPortAddress=0.0.0.0\ntickTime=100\n\
                    4lw.commands.whitelist=*\nadmin.serverPort=9090\ndataDir=/x\nforceSync=no\n";
        let all = [
            "port",
            "bind",
            "tick_time",
            "four_letter_whitelist",
            "admin_server_port",
            "admin_server_bind",
            "data_dir",
            "fsync",
            "no_ttl",
            "reaper_interval",
        ];
        let (c, notes) = run(text, Mode::File, &all).unwrap();
        let d = Config::default();
        assert_eq!((c.port, c.bind, c.tick_time), (d.port, d.bind, d.tick_time));
        assert_eq!(c.four_letter_whitelist, d.four_letter_whitelist);
        assert_eq!((c.admin_server_port, c.data_dir), (None, None));
        assert_eq!(
            (c.fsync, c.ttl_enabled, c.reaper_interval),
            (d.fsync, true, d.reaper_interval)
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn env_mode_binds_all_interfaces_and_uses_the_image_defaults() {
        let (c, notes) = run("", Mode::Env, &[]).unwrap();
        assert_eq!((c.port, c.bind), (2181, IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        assert_eq!(c.tick_time, Duration::from_millis(2000));
        assert_eq!(c.admin_server_bind, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(
            c.admin_bind,
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            "control plane stays on loopback"
        );
        assert_eq!(notes.len(), 2);
        assert!(notes[0].text.contains("binds all interfaces (0.0.0.0)"));
    }

    #[test]
    fn a_single_server_line_is_a_standalone_server() {
        let c = file("server.1=localhost:2888:3888;127.0.0.3:2190\n");
        assert_eq!((c.port, c.bind), (2190, "127.0.0.3".parse().unwrap()));
        let c = file("clientPort=2190\nserver.1=localhost:2888:3888;2190\n");
        assert_eq!(c.port, 2190);
        let e = run(
            "clientPort=2191\nserver.1=h:2888:3888;2190\n",
            Mode::File,
            &[],
        )
        .unwrap_err();
        assert!(
            e.contains("key server.1: client port 2190 differs from clientPort=2191"),
            "{e}"
        );
    }

    #[test]
    fn server_lines_become_a_simulated_ensemble() {
        let three = "clientPort=2181\ninitLimit=5\nsyncLimit=2\nserver.1=a:2888:3888\n\
                     server.2=b:2888:3888\nserver.3=c:2888:3888\n";
        let (c, notes) = run(three, Mode::File, &[]).unwrap();
        let e = c.ensemble.expect("an ensemble, not a single server");
        let ids: Vec<_> = e.members.iter().map(|m| (m.id, m.port)).collect();
        assert_eq!(ids, [(1, 2181), (2, 2182), (3, 2183)]);
        assert_eq!(c.port, 2181);
        assert!(notes
            .iter()
            .any(|n| n.text.contains("a simulated ensemble of 3 members")));
        // One line with standaloneEnabled=false is an ensemble of one.
        let (c, _) = run(
            "clientPort=1\nstandaloneEnabled=false\ninitLimit=1\nsyncLimit=1\nserver.1=a:1:2\n",
            Mode::File,
            &[],
        )
        .unwrap();
        assert_eq!(c.ensemble.map(|e| e.members.len()), Some(1));
        // --port 0 gives every member a free port; --ensemble N replaces the lines.
        let (c, _) = run(three, Mode::File, &["port"]).unwrap();
        assert!(c.ensemble.is_some());
        let (c, notes) = run(three, Mode::File, &["ensemble"]).unwrap();
        assert!(
            c.ensemble.is_none(),
            "the flag's ensemble is built from the flags"
        );
        assert!(notes
            .iter()
            .any(|n| n.text.contains("--ensemble gives the members")));
    }

    #[test]
    fn an_ensemble_file_needs_init_and_sync_limits() {
        let lines = "clientPort=1\nserver.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2\n";
        for (extra, says) in [
            ("", "zoo.cfg: key initLimit: initLimit is not set (missing)"),
            (
                "initLimit=10\n",
                "zoo.cfg: key syncLimit: syncLimit is not set (missing)",
            ),
            (
                "initLimit=0\nsyncLimit=5\n",
                "zoo.cfg line 5: key initLimit: initLimit is not set (0)",
            ),
            (
                "initLimit=10\nsyncLimit=0\n",
                "zoo.cfg line 6: key syncLimit: syncLimit is not set (0)",
            ),
        ] {
            let e = run(&format!("{lines}{extra}"), Mode::File, &[]).unwrap_err();
            assert!(e.starts_with(says), "{extra}: {e}");
        }
        // standaloneEnabled=false makes one line an ensemble too, as in ZooKeeper.
        let e = run(
            "clientPort=1\nstandaloneEnabled=false\nserver.1=a:1:2\n",
            Mode::File,
            &[],
        )
        .unwrap_err();
        assert!(e.contains("initLimit is not set"), "{e}");
        // Negative limits pass ZooKeeper's check, and so here; a standalone line needs none;
        // --ensemble replaces the lines; the container variables keep 10 and 5.
        assert!(run(
            &format!("{lines}initLimit=-1\nsyncLimit=-1\n"),
            Mode::File,
            &[]
        )
        .is_ok());
        assert!(run("clientPort=1\nserver.1=a:1:2\n", Mode::File, &[]).is_ok());
        assert!(run(lines, Mode::File, &["ensemble"]).is_ok());
        let (c, _) = run(lines, Mode::Env, &[]).unwrap();
        let e = c.ensemble.expect("ensemble");
        assert_eq!((e.init_limit, e.sync_limit), (10, 5));
        let e = run(&format!("{lines}initLimit=0\n"), Mode::Env, &[]).unwrap_err();
        assert!(e.contains("initLimit is not set (0)"), "{e}");
    }

    #[test]
    fn enforced_authentication() {
        let schemes = |text: &str| file(text).enforce_auth_schemes;
        assert!(schemes("clientPort=1\n").is_empty());
        assert_eq!(
            schemes("clientPort=1\nsessionRequireClientSASLAuth=true\n"),
            ["sasl"]
        );
        assert_eq!(
            schemes("clientPort=1\nenforce.auth.enabled=true\nenforce.auth.schemes=sasl, digest\n"),
            ["sasl", "digest"]
        );
        assert!(
            schemes("clientPort=1\nenforce.auth.enabled=false\nenforce.auth.schemes=x509\n")
                .is_empty()
        );
        let e = run("clientPort=1\nenforce.auth.enabled=true\n", Mode::File, &[]).unwrap_err();
        assert!(e.contains("enforce.auth.schemes must name"), "{e}");
        // The flag wins over the file.
        let (c, _) = run(
            "clientPort=1\nsessionRequireClientSASLAuth=true\n",
            Mode::File,
            &["enforce_auth_schemes"],
        )
        .unwrap();
        assert!(c.enforce_auth_schemes.is_empty());
    }

    #[test]
    fn missing_or_contradictory_settings_are_errors() {
        for (text, expected) in [
            (
                "tickTime=2000\n",
                "zoo.cfg: neither clientPort nor secureClientPort is set",
            ),
            (
                "clientPort=1\nsecureClientPort=2\n",
                "zoo.cfg line 2: key secureClientPort: the secure port 2 needs ssl.keyStore.location",
            ),
            (
                "clientPort=1\nsecureClientPort=2\nssl.keyStore.location=/k.pem\n",
                "zoo.cfg line 3: key ssl.clientAuth: client certificates are verified",
            ),
            (
                "clientPort=1\nsecureClientPort=2\nssl.keyStore.location=/k.jks\n",
                "key ssl.keyStore.location: zkd reads PEM files only, not JKS",
            ),
            (
                "clientPort=1\nsecureClientPort=2\nssl.keyStore.location=/k.pem\nssl.keyStore.type=PKCS12\n",
                "zoo.cfg line 4: key ssl.keyStore.type: zkd reads PEM files only, not PKCS12",
            ),
            (
                "clientPort=1\nsecureClientPort=2\nssl.keyStore.location=/k\n",
                "cannot tell the type of /k from its name; set ssl.keyStore.type=PEM",
            ),
            (
                "clientPort=1\nsecureClientPort=2\nssl.keyStore.location=/k.pem\nssl.clientAuth=need\nssl.trustStore.location=/t.p12\n",
                "key ssl.trustStore.location: zkd reads PEM files only, not PKCS12",
            ),
            (
                "clientPort=1\nsecureClientPort=2\nsecureClientPortAddress=10.1.1.1\nssl.keyStore.location=/k.pem\nssl.clientAuth=none\n",
                "key secureClientPortAddress: zkd serves the secure port on the client port's address (127.0.0.1)",
            ),
        ] {
            let e = run(text, Mode::File, &[]).unwrap_err();
            assert!(e.starts_with("zoo.cfg") && e.contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn key_stores_become_the_secure_port_pem_files() {
        let c = file(
            "clientPort=1\nsecureClientPort=0\nssl.keyStore.location=/s.pem\n\
             ssl.trustStore.location=/ca.pem\nssl.clientAuth=want\n",
        );
        assert_eq!(c.secure_port, Some(0));
        let tls = c.tls.expect("tls");
        assert_eq!(
            (tls.cert.clone(), tls.key.clone()),
            (PathBuf::from("/s.pem"), PathBuf::from("/s.pem"))
        );
        assert_eq!(tls.client_ca, Some(PathBuf::from("/ca.pem")));
        assert_eq!(tls.client_auth, ClientAuth::Want);
        let c = file("clientPort=1\nsecureClientPort=5\nssl.keyStore.location=/s\nssl.keyStore.type=pem\nssl.clientAuth=NONE\n");
        assert_eq!(c.tls.map(|t| t.client_auth), Some(ClientAuth::None));
        let c = file("secureClientPort=2281\nssl.keyStore.location=/s.pem\nssl.clientAuth=none\n");
        assert!(c.secure_only, "secureClientPort alone: no plain port");
        assert_eq!(c.secure_port, Some(2281));
        assert!(!file("clientPort=1\nsecureClientPort=2\nssl.keyStore.location=/s.pem\nssl.clientAuth=none\n").secure_only);
    }

    #[test]
    fn jaas_users_from_the_jvm_flags() {
        let dir = std::env::temp_dir().join(format!("zkd-jaas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.jaas");
        std::fs::write(
            &path,
            "Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n \
             user_alice=\"secret\";\n};\nOther { x required user_bob=\"b\"; };\n",
        )
        .unwrap();
        let with_jaas = |text: &str, var: &str, file: PathBuf| {
            let mut c = Config::default();
            let jaas = Some((var.to_string(), file));
            apply(
                &settings(text),
                Mode::File,
                &source(),
                &|_| false,
                jaas,
                &mut c,
            )
            .map(|notes| (c, notes))
        };
        let (c, notes) = with_jaas("clientPort=1\n", "SERVER_JVMFLAGS", path.clone()).unwrap();
        let users = c.sasl_users.expect("users");
        assert_eq!(users.password("alice"), Some("secret"));
        assert!(notes.iter().any(|n| n.text.contains("section Server")));
        let (c, _) = with_jaas(
            "clientPort=1\nsasl.serverconfig=Other\n",
            "JVMFLAGS",
            path.clone(),
        )
        .unwrap();
        assert_eq!(c.sasl_users.expect("users").password("bob"), Some("b"));
        let e = with_jaas("clientPort=1\n", "JVMFLAGS", dir.join("missing.jaas")).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "environment variable JVMFLAGS: cannot read the JAAS file: cannot read"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
