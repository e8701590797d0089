//! `--env-config`: the official ZooKeeper image's `ZOO_*` variables and the Confluent image's
//! `ZOOKEEPER_*` variables, turned into the zoo.cfg entries those images would write.

use super::{ConfigError, Entry, Note, Origin};

/// Official image variables that become one zoo.cfg key.
const ZOO_KEYS: &[(&str, &str)] = &[
    ("ZOO_TICK_TIME", "tickTime"),
    ("ZOO_INIT_LIMIT", "initLimit"),
    ("ZOO_SYNC_LIMIT", "syncLimit"),
    ("ZOO_MAX_CLIENT_CNXNS", "maxClientCnxns"),
    ("ZOO_STANDALONE_ENABLED", "standaloneEnabled"),
    ("ZOO_ADMINSERVER_ENABLED", "admin.enableServer"),
    ("ZOO_AUTOPURGE_PURGEINTERVAL", "autopurge.purgeInterval"),
    ("ZOO_AUTOPURGE_SNAPRETAINCOUNT", "autopurge.snapRetainCount"),
    ("ZOO_4LW_COMMANDS_WHITELIST", "4lw.commands.whitelist"),
    ("ZOO_DATA_DIR", "dataDir"),
    ("ZOO_DATA_LOG_DIR", "dataLogDir"),
    ("ZOO_MY_ID", "myid"),
];

/// Official image variables that only its scripts use.
const ZOO_SCRIPT_VARS: &[&str] = &[
    "ZOO_CONF_DIR",
    "ZOO_LOG_DIR",
    "ZOO_LOG4J_PROP",
    "ZOO_USER",
    "ZOO_VERSION",
];

/// Confluent image variables that become one zoo.cfg key.
const ZOOKEEPER_KEYS: &[(&str, &str)] = &[
    ("ZOOKEEPER_CLIENT_PORT", "clientPort"),
    ("ZOOKEEPER_CLIENT_PORT_ADDRESS", "clientPortAddress"),
    ("ZOOKEEPER_TICK_TIME", "tickTime"),
    ("ZOOKEEPER_INIT_LIMIT", "initLimit"),
    ("ZOOKEEPER_SYNC_LIMIT", "syncLimit"),
    ("ZOOKEEPER_MAX_CLIENT_CNXNS", "maxClientCnxns"),
    ("ZOOKEEPER_MIN_SESSION_TIMEOUT", "minSessionTimeout"),
    ("ZOOKEEPER_MAX_SESSION_TIMEOUT", "maxSessionTimeout"),
    ("ZOOKEEPER_SNAP_COUNT", "snapCount"),
    ("ZOOKEEPER_FORCE_SYNC", "forceSync"),
    (
        "ZOOKEEPER_AUTOPURGE_SNAP_RETAIN_COUNT",
        "autopurge.snapRetainCount",
    ),
    (
        "ZOOKEEPER_AUTOPURGE_PURGE_INTERVAL",
        "autopurge.purgeInterval",
    ),
    ("ZOOKEEPER_JUTE_MAX_BUFFER", "jute.maxbuffer"),
    ("ZOOKEEPER_SECURE_CLIENT_PORT", "secureClientPort"),
    ("ZOOKEEPER_SSL_CLIENT_AUTH", "ssl.clientAuth"),
    ("ZOOKEEPER_SSL_KEYSTORE_LOCATION", "ssl.keyStore.location"),
    ("ZOOKEEPER_SSL_KEYSTORE_PASSWORD", "ssl.keyStore.password"),
    ("ZOOKEEPER_SSL_KEYSTORE_TYPE", "ssl.keyStore.type"),
    (
        "ZOOKEEPER_SSL_TRUSTSTORE_LOCATION",
        "ssl.trustStore.location",
    ),
    (
        "ZOOKEEPER_SSL_TRUSTSTORE_PASSWORD",
        "ssl.trustStore.password",
    ),
    ("ZOOKEEPER_SSL_TRUSTSTORE_TYPE", "ssl.trustStore.type"),
    (
        "ZOOKEEPER_X509_AUTHENTICATION_PROVIDER_SUPER_USER",
        "X509AuthenticationProvider.superUser",
    ),
    ("ZOOKEEPER_ADMIN_ENABLE_SERVER", "admin.enableServer"),
    ("ZOOKEEPER_ADMIN_SERVER_ADDRESS", "admin.serverAddress"),
    ("ZOOKEEPER_ADMIN_SERVER_PORT", "admin.serverPort"),
    ("ZOOKEEPER_ADMIN_COMMAND_URL", "admin.commandURL"),
    ("ZOOKEEPER_SERVER_ID", "myid"),
    ("ZOOKEEPER_ELECTION_ALG", "electionAlg"),
    ("ZOOKEEPER_SYNC_ENABLED", "syncEnabled"),
    ("ZOOKEEPER_PRE_ALLOC_SIZE", "preAllocSize"),
    (
        "ZOOKEEPER_GLOBAL_OUTSTANDING_LIMIT",
        "globalOutstandingLimit",
    ),
    ("ZOOKEEPER_QUORUM_LISTEN_ON_ALL_IPS", "quorumListenOnAllIPs"),
    ("ZOOKEEPER_SERVER_CNXN_FACTORY", "serverCnxnFactory"),
    ("ZOOKEEPER_SKIP_ACL", "skipACL"),
];

/// The entries the environment describes, in a fixed order (sorted by variable), with notes
/// for variables that only the images' scripts use and warnings for unknown ones.
pub fn entries(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<(Vec<Entry>, Vec<Note>), ConfigError> {
    let mut vars: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| k.starts_with("ZOO_") || k.starts_with("ZOOKEEPER_"))
        .collect();
    vars.sort();
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    for (var, value) in vars {
        let origin = Origin::Env { var: var.clone() };
        let entry = |key: &str, value: &str| Entry {
            origin: origin.clone(),
            key: key.to_string(),
            value: value.trim().to_string(),
        };
        let mapped = ZOO_KEYS
            .iter()
            .chain(ZOOKEEPER_KEYS)
            .find(|(v, _)| *v == var)
            .map(|(_, key)| *key);
        match var.as_str() {
            _ if mapped.is_some() => {
                if !value.trim().is_empty() {
                    entries.push(entry(mapped.unwrap_or_default(), &value));
                }
            }
            // Whitespace-separated zoo.cfg lines, as the official image writes them.
            "ZOO_SERVERS" | "ZOO_CFG_EXTRA" => {
                for line in value.split_whitespace() {
                    let Some((key, v)) = line.split_once('=') else {
                        return Err(ConfigError {
                            origin,
                            key: None,
                            message: format!("{line:?} is not of the form key=value"),
                        });
                    };
                    entries.push(entry(key.trim(), v));
                }
            }
            // `;`-separated server addresses, numbered from 1, as Confluent's image does.
            "ZOOKEEPER_SERVERS" => {
                for (i, server) in value
                    .split(';')
                    .filter(|s| !s.trim().is_empty())
                    .enumerate()
                {
                    entries.push(entry(&format!("server.{}", i + 1), server));
                }
            }
            v if ZOO_SCRIPT_VARS.contains(&v) || v.starts_with("ZOOKEEPER_LOG4J") => {
                notes.push(Note::info(format!(
                    "{origin} is used only by the image's scripts; zkd logs to stderr and \
                     needs no configuration directory"
                )));
            }
            _ => notes.push(Note::warn(format!(
                "unknown {origin}: ignored (zkd knows the official image's ZOO_* and \
                 Confluent's ZOOKEEPER_* settings)"
            ))),
        }
    }
    Ok((entries, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Flat = (Vec<(String, String, String)>, Vec<Note>);

    fn run(list: &[(&str, &str)]) -> Result<Flat, ConfigError> {
        let (entries, notes) = entries(list.iter().map(|(k, v)| (k.to_string(), v.to_string())))?;
        let flat = entries
            .into_iter()
            .map(|e| match e.origin {
                Origin::Env { var } => (var, e.key, e.value),
                _ => unreachable!(),
            })
            .collect();
        Ok((flat, notes))
    }

    fn t(var: &str, key: &str, value: &str) -> (String, String, String) {
        (var.into(), key.into(), value.into())
    }

    /// Every variable of `table` set to `value`, plus `extra`: each maps to its key, and
    /// `expected` entries come from the extra variables.
    fn maps_every_variable(
        table: &[(&str, &str)],
        value: &str,
        extra: &[(&str, &str)],
        expected: &[(&str, &str, &str)],
    ) {
        let mut list: Vec<(&str, &str)> = table.iter().map(|(v, _)| (*v, value)).collect();
        list.extend_from_slice(extra);
        list.push(("PATH", "/bin"));
        let (entries, notes) = run(&list).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        for (var, key) in table {
            assert!(entries.contains(&t(var, key, value)), "{var}");
        }
        for (var, key, value) in expected {
            assert!(entries.contains(&t(var, key, value)), "{var} {key}");
        }
        assert_eq!(entries.len(), table.len() + expected.len());
    }

    #[test]
    fn every_official_image_variable() {
        maps_every_variable(
            ZOO_KEYS,
            "7",
            &[
                (
                    "ZOO_SERVERS",
                    "server.1=zoo1:2888:3888;2181 server.2=zoo2:2888:3888;2181",
                ),
                (
                    "ZOO_CFG_EXTRA",
                    "metricsProvider.httpPort=7000 jute.maxbuffer=9",
                ),
            ],
            &[
                ("ZOO_SERVERS", "server.1", "zoo1:2888:3888;2181"),
                ("ZOO_SERVERS", "server.2", "zoo2:2888:3888;2181"),
                ("ZOO_CFG_EXTRA", "metricsProvider.httpPort", "7000"),
                ("ZOO_CFG_EXTRA", "jute.maxbuffer", "9"),
            ],
        );
    }

    #[test]
    fn every_confluent_variable() {
        maps_every_variable(
            ZOOKEEPER_KEYS,
            "x",
            &[("ZOOKEEPER_SERVERS", "zoo1:2888:3888;zoo2:2888:3888")],
            &[
                ("ZOOKEEPER_SERVERS", "server.1", "zoo1:2888:3888"),
                ("ZOOKEEPER_SERVERS", "server.2", "zoo2:2888:3888"),
            ],
        );
    }

    #[test]
    fn script_and_unknown_variables() {
        let (entries, notes) = run(&[
            ("ZOO_LOG_DIR", "/logs"),
            ("ZOO_TICKTIME", "1"),
            ("ZOOKEEPER_LOG4J_ROOT_LOGLEVEL", "WARN"),
            ("ZOO_TICK_TIME", ""),
        ])
        .unwrap();
        assert!(entries.is_empty());
        assert_eq!(notes.len(), 3);
        assert_eq!(
            notes[2].text,
            "unknown environment variable ZOO_TICKTIME: ignored (zkd knows the official \
             image's ZOO_* and Confluent's ZOOKEEPER_* settings)"
        );
    }

    #[test]
    fn a_malformed_server_list_names_the_variable() {
        let e = run(&[("ZOO_SERVERS", "server.1=a:1:2 garbage")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable ZOO_SERVERS: \"garbage\" is not of the form key=value"
        );
    }
}
