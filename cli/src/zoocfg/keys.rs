//! What each zoo.cfg key means to zkd: the keys it applies, the keys it accepts as
//! inapplicable (one info line each), and unknown keys (one warning each, as ZooKeeper
//! passes them on as system properties instead of failing).

use std::net::{IpAddr, ToSocketAddrs as _};
use std::path::PathBuf;

use super::servers::{self, ServerLine};
use super::{ConfigError, Entry, Note, Origin};

/// A value with the place it was set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set<T> {
    /// The value.
    pub value: T,
    /// Where it was set.
    pub origin: Origin,
}

/// Everything a zoo.cfg (or the environment) said that zkd uses. `None` = not set: the
/// ZooKeeper default applies (see `apply`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub client_port: Option<Set<u16>>,
    pub client_port_address: Option<Set<IpAddr>>,
    pub secure_client_port: Option<Set<u16>>,
    pub secure_client_port_address: Option<Set<IpAddr>>,
    pub tick_time: Option<Set<u64>>,
    /// Milliseconds; a negative value means the default (2 × tick).
    pub min_session_timeout: Option<Set<i64>>,
    /// Milliseconds; a negative value means the default (20 × tick).
    pub max_session_timeout: Option<Set<i64>>,
    pub max_client_cnxns: Option<Set<u32>>,
    /// The whitelist with the words zkd does not know removed (each named in a warning).
    pub four_letter_whitelist: Option<Set<String>>,
    pub extended_types_enabled: Option<Set<bool>>,
    pub admin_enable_server: Option<Set<bool>>,
    pub admin_server_port: Option<Set<u16>>,
    pub admin_server_address: Option<Set<IpAddr>>,
    pub jute_max_buffer: Option<Set<u32>>,
    pub data_dir: Option<Set<PathBuf>>,
    pub snap_retain_count: Option<Set<u64>>,
    pub snap_count: Option<Set<u64>>,
    /// `fsync.warningthresholdms` (ms; ZooKeeper reads it from zoo.cfg too, as a system
    /// property of the same name).
    pub fsync_warning_threshold_ms: Option<Set<i64>>,
    /// `forceSync`: false only for `no`.
    pub force_sync: Option<Set<bool>>,
    pub container_check_interval: Option<Set<u64>>,
    pub servers: Vec<ServerLine>,
    /// `initLimit` and `syncLimit` (ticks): an ensemble's `conf` shows them.
    pub init_limit: Option<Set<i32>>,
    pub sync_limit: Option<Set<i32>>,
    pub standalone_enabled: Option<Set<bool>>,
    pub read_only_enabled: Option<Set<bool>>,
    pub reconfig_enabled: Option<Set<bool>>,
    pub local_sessions_enabled: Option<Set<bool>>,
    pub local_sessions_upgrading_enabled: Option<Set<bool>>,
    pub key_store_location: Option<Set<PathBuf>>,
    pub key_store_type: Option<Set<String>>,
    pub trust_store_location: Option<Set<PathBuf>>,
    pub trust_store_type: Option<Set<String>>,
    pub client_auth: Option<Set<zkd_server::ClientAuth>>,
    pub x509_super_user: Option<Set<String>>,
    pub super_digest: Option<Set<String>>,
    pub sasl_super_user: Option<Set<String>>,
    /// The JAAS section the SASL users are in (`zookeeper.sasl.serverconfig`).
    pub sasl_section: Option<Set<String>>,
    /// `sessionRequireClientSASLAuth`: true enforces the sasl scheme.
    pub session_require_sasl: Option<Set<bool>>,
    /// `enforce.auth.enabled`: true enforces the schemes of `enforce.auth.schemes`.
    pub enforce_auth_enabled: Option<Set<bool>>,
    /// `enforce.auth.schemes`, a comma list.
    pub enforce_auth_schemes: Option<Set<Vec<String>>>,
    /// What to log once the configuration is in force.
    pub notes: Vec<Note>,
}

/// Keys zkd accepts but that change nothing in it, grouped by the reason given.
const INAPPLICABLE: &[(&[&str], &str)] = &[
    (
        &[
            "initLimit",
            "syncLimit",
            "connectToLearnerMasterLimit",
            "electionAlg",
            "quorumListenOnAllIPs",
            "syncEnabled",
            "sslQuorum",
            "sslQuorumReloadCertFiles",
            "quorum.cnxn.threads.size",
            "observerMasterPort",
            "leaderServes",
            "cnxTimeout",
            "multiAddress.enabled",
            "multiAddress.reachabilityCheckTimeoutMs",
            "multiAddress.reachabilityCheckEnabled",
            "oraclePath",
            "localSessionsEnabled",
            "localSessionsUpgradingEnabled",
        ],
        "quorum machinery: zkd's members share one process and need no peer links",
    ),
    (
        &[
            "dataLogDir",
            "autopurge.purgeInterval",
            "preAllocSize",
            "snapSizeLimitInKb",
            "txnLogSizeLimitInKb",
            "commitLogCount",
            "digest.enabled",
        ],
        "zkd keeps its log beside its snapshots in dataDir and prunes old files after \
         every snapshot",
    ),
    (
        &[
            "metricsProvider.className",
            "jvm.pause.info-threshold.ms",
            "jvm.pause.warn-threshold.ms",
            "jvm.pause.sleep.time.ms",
            "jvm.pause.monitor",
            "serverCnxnFactory",
            "clientCnxnSocket",
            "clientPortListenBacklog",
            "globalOutstandingLimit",
            "traceFile",
            "tcpKeepAlive",
            "audit.enable",
            "watchManagerName",
            "admin.idleTimeout",
            "maxCnxns",
            "emulate353TTLNodes",
            "client.portUnification",
            "portUnification",
            "ssl.authProvider",
            "ssl.protocol",
            "ssl.enabledProtocols",
            "ssl.ciphersuites",
            "ssl.hostnameVerification",
            "ssl.crl",
            "ssl.ocsp",
            "ssl.handshakeDetectionTimeoutMillis",
            "ssl.context.supplier.class",
            "ssl.keyStore.password",
            "ssl.trustStore.password",
            "enforceQuota",
        ],
        "JVM or implementation setting with no zkd counterpart (TLS is 1.2/1.3 with \
         rustls' cipher suites; PEM keys are read unencrypted; Prometheus metrics are on the \
         admin listener's /metrics; quotas are not enforced)",
    ),
];

/// Key prefixes accepted as inapplicable, with the reason.
const INAPPLICABLE_PREFIXES: &[(&str, &str)] = &[
    (
        "metricsProvider.",
        "zkd serves Prometheus metrics on the admin listener's /metrics",
    ),
    (
        "quorum.auth.",
        "quorum authentication: zkd's members share one process",
    ),
    ("ssl.quorum.", "quorum TLS: zkd's members share one process"),
    (
        "authProvider.",
        "zkd's auth schemes (digest, ip, x509, sasl) are built in",
    ),
    (
        "group.",
        "hierarchical quorums are not simulated; every member has one vote",
    ),
    (
        "weight.",
        "hierarchical quorums are not simulated; every member has one vote",
    ),
    (
        "requestThrottler.",
        "zkd applies requests in order without a throttle",
    ),
    (
        "learner.",
        "quorum machinery: zkd's members share one process",
    ),
];

/// Unknown keys named in the one warning about them.
const UNKNOWN_EXAMPLES: usize = 5;

/// Interprets entries into settings; the first malformed value is the error. Unknown keys
/// get one warning together, with their count and the first few.
pub fn interpret(entries: &[Entry]) -> Result<Settings, ConfigError> {
    let mut s = Settings::default();
    let mut unknown: Vec<&Entry> = Vec::new();
    let mut unknown_count = 0usize;
    for e in entries {
        if interpret_one(&mut s, e)? == Known::No {
            unknown_count += 1;
            if unknown.len() < UNKNOWN_EXAMPLES {
                unknown.push(e);
            }
        }
    }
    match (unknown.as_slice(), unknown_count) {
        ([], _) => {}
        ([e], 1) => s.notes.push(Note::warn(format!(
            "{}: unknown key {}: ignored (ZooKeeper would pass it on as the system property \
             zookeeper.{})",
            e.origin, e.key, e.key
        ))),
        (some, n) => {
            let named: Vec<String> = some
                .iter()
                .map(|e| format!("{} ({})", e.key, e.origin))
                .collect();
            let rest = match n - some.len() {
                0 => String::new(),
                more => format!(" and {more} more"),
            };
            s.notes.push(Note::warn(format!(
                "{n} unknown keys ignored (ZooKeeper would pass each on as a system property \
                 zookeeper.KEY): {}{rest}",
                named.join(", ")
            )));
        }
    }
    Ok(s)
}

/// Whether `interpret_one` knew the key.
#[derive(PartialEq, Eq)]
enum Known {
    Yes,
    No,
}

fn set<T>(e: &Entry, value: T) -> Option<Set<T>> {
    Some(Set {
        value,
        origin: e.origin.clone(),
    })
}

fn interpret_one(s: &mut Settings, e: &Entry) -> Result<Known, ConfigError> {
    let v = e.value.as_str();
    match e.key.as_str() {
        "clientPort" => s.client_port = set(e, port_or_zero(e)?),
        "clientPortAddress" => s.client_port_address = set(e, address(e)?),
        "secureClientPort" => s.secure_client_port = set(e, port_or_zero(e)?),
        "secureClientPortAddress" => s.secure_client_port_address = set(e, address(e)?),
        "tickTime" => s.tick_time = set(e, whole(e, 1, i32::MAX as u64)?),
        "minSessionTimeout" => s.min_session_timeout = set(e, int(e)?),
        "maxSessionTimeout" => s.max_session_timeout = set(e, int(e)?),
        "maxClientCnxns" => s.max_client_cnxns = set(e, whole(e, 0, i32::MAX as u64)? as u32),
        "4lw.commands.whitelist" => s.four_letter_whitelist = set(e, whitelist(e, &mut s.notes)),
        "extendedTypesEnabled" => s.extended_types_enabled = set(e, boolean(e)?),
        "admin.enableServer" => s.admin_enable_server = set(e, boolean(e)?),
        "admin.serverPort" => s.admin_server_port = set(e, port_or_zero(e)?),
        "admin.serverAddress" => s.admin_server_address = set(e, address(e)?),
        "admin.commandURL" if v != "/commands" => {
            s.notes.push(Note::warn(format!(
                "{}: key admin.commandURL: zkd serves the AdminServer commands at /commands \
                 only, not at {v:?}",
                e.origin
            )));
        }
        "jute.maxbuffer" => s.jute_max_buffer = set(e, whole(e, 1, i32::MAX as u64)? as u32),
        "dataDir" => s.data_dir = set(e, PathBuf::from(v)),
        "autopurge.snapRetainCount" => {
            let n = int(e)?;
            let n = if n < 3 {
                s.notes.push(Note::warn(format!(
                    "{}: key autopurge.snapRetainCount: {n} is below the minimum of 3; 3 \
                     snapshots are kept, as ZooKeeper does",
                    e.origin
                )));
                3
            } else {
                n as u64
            };
            s.snap_retain_count = set(e, n);
        }
        "snapCount" => s.snap_count = set(e, whole(e, 2, i32::MAX as u64)?),
        "fsync.warningthresholdms" => s.fsync_warning_threshold_ms = set(e, int(e)?),
        "forceSync" => s.force_sync = set(e, v != "no"),
        "znode.container.checkIntervalMs" => {
            s.container_check_interval = set(e, whole(e, 1, i64::MAX as u64)?)
        }
        "standaloneEnabled" => s.standalone_enabled = set(e, boolean(e)?),
        "readonlymode.enabled" => s.read_only_enabled = set(e, boolean(e)?),
        "reconfigEnabled" => s.reconfig_enabled = set(e, boolean(e)?),
        "localSessionsEnabled" => s.local_sessions_enabled = set(e, boolean(e)?),
        "localSessionsUpgradingEnabled" => s.local_sessions_upgrading_enabled = set(e, boolean(e)?),
        "ssl.keyStore.location" => s.key_store_location = set(e, PathBuf::from(v)),
        "ssl.keyStore.type" => s.key_store_type = set(e, v.to_string()),
        "ssl.trustStore.location" => s.trust_store_location = set(e, PathBuf::from(v)),
        "ssl.trustStore.type" => s.trust_store_type = set(e, v.to_string()),
        "ssl.clientAuth" => {
            s.client_auth = set(e, v.parse().map_err(|m: String| ConfigError::at(e, m))?)
        }
        "X509AuthenticationProvider.superUser" => s.x509_super_user = set(e, v.to_string()),
        "DigestAuthenticationProvider.superDigest" => {
            if !v.contains(':') {
                return Err(ConfigError::at(
                    e,
                    format!("{v:?} is not of the form user:hash"),
                ));
            }
            s.super_digest = set(e, v.to_string())
        }
        "superUser" => s.sasl_super_user = set(e, v.to_string()),
        "sasl.serverconfig" => s.sasl_section = set(e, v.to_string()),
        "sessionRequireClientSASLAuth" => s.session_require_sasl = set(e, boolean(e)?),
        "enforce.auth.enabled" => s.enforce_auth_enabled = set(e, boolean(e)?),
        "enforce.auth.schemes" => {
            let schemes = v.split(',').map(str::trim).filter(|x| !x.is_empty());
            s.enforce_auth_schemes = set(e, schemes.map(String::from).collect());
        }
        "skipACL" if v == "yes" => {
            s.notes.push(Note::warn(format!(
                "{}: key skipACL: zkd always enforces ACLs",
                e.origin
            )));
        }
        "dynamicConfigFile" => {
            return Err(ConfigError::at(
                e,
                "zkd reads the membership only from server.N lines in this file; move them \
                 here from the dynamic file",
            ))
        }
        // One member's own claim; ZooKeeper checks its value, then goes by the member's
        // server line where the two disagree (with a warning).
        "peerType" => match v.to_ascii_lowercase().as_str() {
            "observer" | "participant" => s.notes.push(Note::info(format!(
                "{}: key peerType ({v}): the server.N lines decide which members observe \
                 (`:observer`), as in ZooKeeper, which goes by a member's server line when \
                 its peerType disagrees",
                e.origin
            ))),
            _ => {
                return Err(ConfigError::at(
                    e,
                    format!("{v:?} is not a peer type: expected observer or participant"),
                ))
            }
        },
        "myid" => s.notes.push(Note::info(format!(
            "{}: key myid ({v}): every member runs in this one zkd process, so the id \
             selects nothing",
            e.origin
        ))),
        key if key.starts_with("server.") => s.servers.push(servers::parse(e)?),
        // Read as ZooKeeper reads them (any int) for `conf`; otherwise inapplicable.
        key @ ("initLimit" | "syncLimit") => {
            let n = i32::try_from(int(e)?)
                .map_err(|_| ConfigError::at(e, format!("{v} is outside the range of an int")))?;
            if key == "initLimit" {
                s.init_limit = set(e, n);
            } else {
                s.sync_limit = set(e, n);
            }
            if let Some(reason) = inapplicable(key) {
                s.notes.push(Note::info(format!(
                    "{}: key {key} does not apply to zkd ({reason}); accepted, and shown by \
                     `conf` on an ensemble",
                    e.origin
                )));
            }
        }
        key => {
            if let Some(reason) = inapplicable(key) {
                s.notes.push(
                    Note::info(format!(
                        "{}: key {key} does not apply to zkd ({reason}); accepted",
                        e.origin
                    ))
                    .of_kind("keys that do not apply to zkd"),
                );
            } else if !matches!(key, "admin.commandURL" | "skipACL") {
                return Ok(Known::No);
            }
        }
    }
    Ok(Known::Yes)
}

fn inapplicable(key: &str) -> Option<&'static str> {
    INAPPLICABLE
        .iter()
        .find(|(keys, _)| keys.contains(&key))
        .map(|(_, why)| *why)
        .or_else(|| {
            INAPPLICABLE_PREFIXES
                .iter()
                .find(|(prefix, _)| key.starts_with(prefix))
                .map(|(_, why)| *why)
        })
}

/// A whole number as Java's `Integer.parseInt`/`Long.parseLong` read it.
fn int(e: &Entry) -> Result<i64, ConfigError> {
    e.value
        .parse::<i64>()
        .map_err(|_| ConfigError::at(e, format!("{:?} is not a whole number", e.value)))
}

/// A whole number within `min..=max`.
fn whole(e: &Entry, min: u64, max: u64) -> Result<u64, ConfigError> {
    let n = int(e)?;
    u64::try_from(n)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| ConfigError::at(e, format!("{n} is outside {min}..={max}")))
}

/// A port; 0 picks a free one.
fn port_or_zero(e: &Entry) -> Result<u16, ConfigError> {
    Ok(whole(e, 0, 65535)? as u16)
}

/// `true` or `false` in any case, as ZooKeeper's own keys take them.
fn boolean(e: &Entry) -> Result<bool, ConfigError> {
    match e.value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::at(
            e,
            format!("{:?} is not a boolean: expected true or false", e.value),
        )),
    }
}

/// An IP address, or a host name resolved now (as Java's `InetAddress.getByName` does).
fn address(e: &Entry) -> Result<IpAddr, ConfigError> {
    if let Ok(ip) = e.value.parse::<IpAddr>() {
        return Ok(ip);
    }
    (e.value.as_str(), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| {
            ConfigError::at(
                e,
                format!(
                    "{:?} is neither an IP address nor a host name that resolves",
                    e.value
                ),
            )
        })
}

/// The whitelist without words zkd does not know (one warning each, as ZooKeeper ignores
/// them too).
fn whitelist(e: &Entry, notes: &mut Vec<Note>) -> String {
    let mut kept = Vec::new();
    for word in e.value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word == "*" || word.parse::<zkd_protocol::FourLetterWord>().is_ok() {
            kept.push(word);
        } else {
            notes.push(
                Note::warn(format!(
                    "{}: key 4lw.commands.whitelist: unknown four-letter word {word:?} ignored",
                    e.origin
                ))
                .of_kind("unknown four-letter words"),
            );
        }
    }
    kept.join(",")
}

#[cfg(test)]
mod tests {
    use super::super::Level;
    use super::*;

    fn entries(text: &str) -> Vec<Entry> {
        super::super::props::read("zoo.cfg", text)
            .expect("valid lines")
            .0
    }

    fn settings(text: &str) -> Settings {
        interpret(&entries(text)).expect("valid settings")
    }

    fn error(text: &str) -> String {
        interpret(&entries(text)).expect_err("invalid").to_string()
    }

    #[test]
    fn every_applied_key() {
        let s = settings(
            "clientPort=2182\nclientPortAddress=127.0.0.2\nsecureClientPort=2282\n\
             secureClientPortAddress=::1\ntickTime=500\nminSessionTimeout=1000\n\
             maxSessionTimeout=-1\nmaxClientCnxns=0\n4lw.commands.whitelist=ruok, srvr\n\
             extendedTypesEnabled=TRUE\nadmin.enableServer=false\nadmin.serverPort=0\n\
             admin.serverAddress=localhost\njute.maxbuffer=4096\ndataDir=/var/zk\n\
             autopurge.snapRetainCount=5\nsnapCount=1000\nforceSync=no\n\
             znode.container.checkIntervalMs=500\nstandaloneEnabled=false\n\
             readonlymode.enabled=true\nlocalSessionsEnabled=true\n\
             localSessionsUpgradingEnabled=false\nssl.keyStore.location=/k.pem\nssl.keyStore.type=PEM\n\
             ssl.trustStore.location=/ca.pem\nssl.trustStore.type=PEM\nssl.clientAuth=want\n\
             X509AuthenticationProvider.superUser=CN=admin\n\
             DigestAuthenticationProvider.superDigest=super:abc=\nsuperUser=bob\n\
             sasl.serverconfig=Other\nserver.1=h:2888:3888;2181\nadmin.commandURL=/commands\n",
        );
        fn v<T: Clone>(o: &Option<Set<T>>) -> Option<T> {
            o.as_ref().map(|s| s.value.clone())
        }
        assert_eq!(v(&s.client_port), Some(2182));
        assert_eq!(
            v(&s.client_port_address),
            Some("127.0.0.2".parse().unwrap())
        );
        assert_eq!(v(&s.secure_client_port), Some(2282));
        assert_eq!(
            v(&s.secure_client_port_address),
            Some("::1".parse().unwrap())
        );
        assert_eq!(v(&s.tick_time), Some(500));
        assert_eq!(v(&s.min_session_timeout), Some(1000));
        assert_eq!(v(&s.max_session_timeout), Some(-1));
        assert_eq!(v(&s.max_client_cnxns), Some(0));
        assert_eq!(v(&s.four_letter_whitelist).as_deref(), Some("ruok,srvr"));
        assert_eq!(v(&s.extended_types_enabled), Some(true));
        assert_eq!(v(&s.admin_enable_server), Some(false));
        assert_eq!(v(&s.admin_server_port), Some(0));
        assert!(v(&s.admin_server_address).is_some_and(|a| a.is_loopback()));
        assert_eq!(v(&s.jute_max_buffer), Some(4096));
        assert_eq!(v(&s.data_dir), Some(PathBuf::from("/var/zk")));
        assert_eq!(v(&s.snap_retain_count), Some(5));
        assert_eq!(v(&s.snap_count), Some(1000));
        assert_eq!(v(&s.force_sync), Some(false));
        assert_eq!(v(&s.container_check_interval), Some(500));
        assert_eq!(v(&s.standalone_enabled), Some(false));
        assert_eq!(v(&s.read_only_enabled), Some(true));
        assert_eq!(v(&s.local_sessions_enabled), Some(true));
        assert_eq!(v(&s.local_sessions_upgrading_enabled), Some(false));
        assert_eq!(v(&s.key_store_location), Some(PathBuf::from("/k.pem")));
        assert_eq!(v(&s.key_store_type).as_deref(), Some("PEM"));
        assert_eq!(v(&s.trust_store_location), Some(PathBuf::from("/ca.pem")));
        assert_eq!(v(&s.trust_store_type).as_deref(), Some("PEM"));
        assert_eq!(v(&s.client_auth), Some(zkd_server::ClientAuth::Want));
        assert_eq!(v(&s.x509_super_user).as_deref(), Some("CN=admin"));
        assert_eq!(v(&s.super_digest).as_deref(), Some("super:abc="));
        assert_eq!(v(&s.sasl_super_user).as_deref(), Some("bob"));
        assert_eq!(v(&s.sasl_section).as_deref(), Some("Other"));
        assert_eq!(s.servers.len(), 1);
        assert_eq!(s.notes, []);
        assert_eq!(
            s.tick_time.unwrap().origin,
            Origin::Line {
                file: "zoo.cfg".into(),
                line: 5
            }
        );
    }

    #[test]
    fn inapplicable_keys_get_one_info_line_each() {
        let s = settings(
            "initLimit=10\nsyncLimit=5\ndataLogDir=/x\nautopurge.purgeInterval=1\n\
             metricsProvider.className=x.Y\nmetricsProvider.httpPort=7000\n\
             authProvider.1=x.Sasl\nssl.quorum.keyStore.location=/q\nmyid=1\n",
        );
        assert_eq!(s.notes.len(), 9);
        assert!(s.notes.iter().all(|n| n.level == Level::Info));
        let first = &s.notes[0].text;
        assert!(
            first.starts_with("zoo.cfg line 1: key initLimit does not apply"),
            "{first}"
        );
        assert!(s.notes[5].text.contains("key metricsProvider.httpPort"));
        let limit = |l: &Option<Set<i32>>| l.as_ref().map(|l| l.value);
        assert_eq!(
            (limit(&s.init_limit), limit(&s.sync_limit)),
            (Some(10), Some(5))
        );
        assert!(s.notes[1]
            .text
            .ends_with("accepted, and shown by `conf` on an ensemble"));
    }

    #[test]
    fn peer_type_is_checked_and_left_to_the_server_lines() {
        let s = settings("peerType=Observer\n");
        assert_eq!(s.notes.len(), 1);
        let note = &s.notes[0].text;
        assert!(
            note.contains("key peerType (Observer): the server.N lines decide"),
            "{note}"
        );
        let e = error("peerType=voter\n");
        assert!(
            e.contains("key peerType: \"voter\" is not a peer type"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_and_words_warn_naming_file_line_and_key() {
        let s = settings("tickTime=2000\nfrobnicate=yes\n4lw.commands.whitelist=ruok,zzzz\n");
        assert_eq!(s.notes.len(), 2);
        assert!(s.notes.iter().all(|n| n.level == Level::Warn));
        assert!(s.notes[0].text.contains("\"zzzz\""));
        assert_eq!(
            s.notes[1].text,
            "zoo.cfg line 2: unknown key frobnicate: ignored (ZooKeeper would pass it on as \
             the system property zookeeper.frobnicate)"
        );
        assert_eq!(s.four_letter_whitelist.unwrap().value, "ruok");
        let s = settings("skipACL=yes\nadmin.commandURL=/cmds\nautopurge.snapRetainCount=1\n");
        assert_eq!(s.notes.len(), 3);
        assert_eq!(s.snap_retain_count.unwrap().value, 3);
        assert!(settings("skipACL=no\nsessionRequireClientSASLAuth=false\n")
            .notes
            .is_empty());
    }

    #[test]
    fn many_unknown_keys_get_one_warning_with_the_count_and_a_few_names() {
        let text: String = (0..100_000).map(|i| format!("custom.k{i}=v\n")).collect();
        let s = settings(&format!("tickTime=2000\n{text}"));
        assert_eq!(s.notes.len(), 1, "{:?}", &s.notes[..s.notes.len().min(3)]);
        assert_eq!(s.notes[0].level, Level::Warn);
        assert_eq!(
            s.notes[0].text,
            "100000 unknown keys ignored (ZooKeeper would pass each on as a system property \
             zookeeper.KEY): custom.k0 (zoo.cfg line 2), custom.k1 (zoo.cfg line 3), \
             custom.k2 (zoo.cfg line 4), custom.k3 (zoo.cfg line 5), custom.k4 (zoo.cfg line \
             6) and 99995 more"
        );
        let s = settings("a=1\nb=2\n");
        assert_eq!(s.notes.len(), 1);
        let note = &s.notes[0].text;
        assert!(
            note.starts_with("2 unknown keys ignored")
                && note.ends_with("a (zoo.cfg line 1), b (zoo.cfg line 2)"),
            "{note}"
        );
    }

    #[test]
    fn malformed_values_name_file_line_and_key() {
        for (text, expected) in [
            (
                "tickTime=fast",
                "zoo.cfg line 1: key tickTime: \"fast\" is not a whole number",
            ),
            (
                "tickTime=0",
                "zoo.cfg line 1: key tickTime: 0 is outside 1..=2147483647",
            ),
            (
                "\nclientPort=70000",
                "zoo.cfg line 2: key clientPort: 70000 is outside 0..=65535",
            ),
            (
                "secureClientPort=-1",
                "key secureClientPort: -1 is outside 0..=65535",
            ),
            (
                "admin.serverPort=x",
                "key admin.serverPort: \"x\" is not a whole number",
            ),
            (
                "minSessionTimeout=1.5",
                "key minSessionTimeout: \"1.5\" is not a whole number",
            ),
            ("maxSessionTimeout=x", "key maxSessionTimeout"),
            ("maxClientCnxns=-2", "key maxClientCnxns: -2 is outside"),
            ("jute.maxbuffer=0", "key jute.maxbuffer: 0 is outside"),
            ("snapCount=1", "key snapCount: 1 is outside 2..="),
            (
                "initLimit=ten",
                "key initLimit: \"ten\" is not a whole number",
            ),
            (
                "syncLimit=3000000000",
                "key syncLimit: 3000000000 is outside the range of an int",
            ),
            (
                "autopurge.snapRetainCount=many",
                "key autopurge.snapRetainCount",
            ),
            (
                "znode.container.checkIntervalMs=0",
                "key znode.container.checkIntervalMs",
            ),
            (
                "standaloneEnabled=yes",
                "key standaloneEnabled: \"yes\" is not a boolean",
            ),
            (
                "readonlymode.enabled=1",
                "key readonlymode.enabled: \"1\" is not a boolean",
            ),
            ("extendedTypesEnabled=on", "key extendedTypesEnabled"),
            ("admin.enableServer=maybe", "key admin.enableServer"),
            (
                "clientPortAddress=no such host.invalid",
                "key clientPortAddress: \"no such",
            ),
            (
                "admin.serverAddress=300.1.1.1.invalid",
                "key admin.serverAddress",
            ),
            (
                "secureClientPortAddress=x y.invalid",
                "key secureClientPortAddress",
            ),
            (
                "ssl.clientAuth=sometimes",
                "key ssl.clientAuth: \"sometimes\" is not one of",
            ),
            (
                "DigestAuthenticationProvider.superDigest=nocolon",
                "is not of the form user:hash",
            ),
            ("sessionRequireClientSASLAuth=x", "is not a boolean"),
            (
                "dynamicConfigFile=/zoo.cfg.dynamic",
                "key dynamicConfigFile: zkd reads",
            ),
            ("server.a=h:1:2", "key server.a: \"a\" is not a server id"),
        ] {
            let e = error(text);
            assert!(e.contains(expected), "{text}: {e}");
            assert!(e.starts_with("zoo.cfg line "), "{e}");
        }
    }
}
