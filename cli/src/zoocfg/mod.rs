//! ZooKeeper configuration compatibility: `zkd --config zoo.cfg` and `zkd --env-config` (the
//! official image's `ZOO_*` and the Confluent-style `ZOOKEEPER_*` variables) turned into a
//! [`zkd_server::Config`], with ZooKeeper's defaults and the command-line flags on top.
//!
//! The pipeline: [`props`] (or [`env`]) yields key/value [`Entry`]s with their origin,
//! [`keys`] interprets them into [`Settings`] (with [`servers`] for `server.N` lines), and
//! [`apply`] folds the settings into the `Config` the flags built ([`members`] turns
//! several `server.N` lines into a simulated ensemble).

mod apply;
mod env;
mod keys;
mod members;
mod props;
mod servers;

use std::fmt;
use std::path::Path;

pub use apply::{apply, Mode};
pub use keys::Settings;

/// Where a setting came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A line of a configuration file (1-based; the first line of a continued line).
    Line {
        /// The file as the user named it.
        file: String,
        /// The line number.
        line: usize,
    },
    /// An environment variable (`--env-config`).
    Env {
        /// The variable's name.
        var: String,
    },
    /// The whole source (a setting it lacks): the file's name, or "the environment".
    Source(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line { file, line } => write!(f, "{file} line {line}"),
            Origin::Env { var } => write!(f, "environment variable {var}"),
            Origin::Source(name) => f.write_str(name),
        }
    }
}

/// One `key=value` setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Where it was written.
    pub origin: Origin,
    /// The key, as ZooKeeper spells it (`tickTime`, `server.1`, ...).
    pub key: String,
    /// The value, trimmed.
    pub value: String,
}

/// A configuration that cannot be used: the message names where and which key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the offending setting or line is.
    pub origin: Origin,
    /// The key, when the line had one.
    pub key: Option<String>,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl ConfigError {
    fn at(entry: &Entry, message: impl Into<String>) -> ConfigError {
        ConfigError {
            origin: entry.origin.clone(),
            key: Some(entry.key.clone()),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{}: key {key}: {}", self.origin, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

/// How loud a note about the configuration is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Accepted, with something worth knowing (an inapplicable key, a deviation).
    Info,
    /// Probably a mistake (an unknown key), but not fatal, as in ZooKeeper.
    Warn,
}

/// A line to log once the configuration is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Info or warning.
    pub level: Level,
    /// The sentence, naming origin and key.
    pub text: String,
}

impl Note {
    fn info(text: impl Into<String>) -> Note {
        Note {
            level: Level::Info,
            text: text.into(),
        }
    }

    fn warn(text: impl Into<String>) -> Note {
        Note {
            level: Level::Warn,
            text: text.into(),
        }
    }
}

/// The most a zoo.cfg file may hold.
const CONFIG_FILE_CAP: u64 = 16 << 20;

/// Reads and interprets a zoo.cfg file.
pub fn read_file(path: &Path) -> Result<Settings, ConfigError> {
    let label = path.display().to_string();
    let bytes = zkd_server::files::read_capped(path, CONFIG_FILE_CAP).map_err(|e| ConfigError {
        origin: Origin::Source(label.clone()),
        key: None,
        message: e,
    })?;
    // ISO-8859-1, as java.util.Properties reads ZooKeeper's file.
    let text = props::latin1(&bytes);
    let (entries, notes) = props::read(&label, &text)?;
    let mut settings = keys::interpret(&entries)?;
    settings.notes.splice(0..0, notes);
    Ok(settings)
}

/// Interprets the process environment's `ZOO_*` and `ZOOKEEPER_*` variables.
pub fn read_env(vars: impl IntoIterator<Item = (String, String)>) -> Result<Settings, ConfigError> {
    let (entries, notes) = env::entries(vars)?;
    let mut settings = keys::interpret(&entries)?;
    settings.notes.splice(0..0, notes);
    Ok(settings)
}

/// The JAAS file named by `-Djava.security.auth.login.config=PATH` in the JVM flags
/// variables ZooKeeper's start scripts pass to the server (`SERVER_JVMFLAGS`, `JVMFLAGS`),
/// with the variable that named it.
pub fn jaas_from_jvm_flags(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Option<(String, std::path::PathBuf)> {
    const PROP: &str = "-Djava.security.auth.login.config=";
    let mut found = None;
    for (name, value) in vars {
        if name != "SERVER_JVMFLAGS" && name != "JVMFLAGS" {
            continue;
        }
        for word in value.split_whitespace() {
            if let Some(path) = word.strip_prefix(PROP) {
                let path = path.trim_matches(|c| c == '"' || c == '\'');
                // SERVER_JVMFLAGS comes after JVMFLAGS on ZooKeeper's java command line, so
                // it wins.
                if found.is_none() || name == "SERVER_JVMFLAGS" {
                    found = Some((name.clone(), std::path::PathBuf::from(path)));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn jaas_file_from_the_jvm_flags() {
        let none = vars(&[("PATH", "/bin"), ("JVMFLAGS", "-Xmx1g")]);
        assert_eq!(jaas_from_jvm_flags(none), None);
        let both = vars(&[
            (
                "SERVER_JVMFLAGS",
                "-Xmx1g -Djava.security.auth.login.config=/conf/server.jaas",
            ),
            (
                "JVMFLAGS",
                "-Djava.security.auth.login.config=\"/other.jaas\"",
            ),
        ]);
        assert_eq!(
            jaas_from_jvm_flags(both),
            Some(("SERVER_JVMFLAGS".into(), "/conf/server.jaas".into()))
        );
        let quoted = vars(&[("JVMFLAGS", "-Djava.security.auth.login.config='/a.jaas'")]);
        assert_eq!(
            jaas_from_jvm_flags(quoted).map(|(_, p)| p),
            Some("/a.jaas".into())
        );
    }

    #[test]
    fn errors_name_origin_and_key() {
        let e = ConfigError {
            origin: Origin::Line {
                file: "zoo.cfg".into(),
                line: 3,
            },
            key: Some("tickTime".into()),
            message: "\"x\" is not a whole number".into(),
        };
        assert_eq!(
            e.to_string(),
            "zoo.cfg line 3: key tickTime: \"x\" is not a whole number"
        );
        let e = ConfigError {
            origin: Origin::Env {
                var: "ZOO_TICK_TIME".into(),
            },
            key: None,
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), "environment variable ZOO_TICK_TIME: bad");
    }
}
