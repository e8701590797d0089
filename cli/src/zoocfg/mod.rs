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
    /// What kind of line it is, when a file can hold any number of them (a key given
    /// twice, a key that does not apply, a four-letter word zkd does not know): past
    /// [`NOTES_PER_KIND`] of one kind the rest are counted in one line.
    kind: Option<&'static str>,
}

impl Note {
    fn info(text: impl Into<String>) -> Note {
        Note {
            level: Level::Info,
            text: text.into(),
            kind: None,
        }
    }

    fn warn(text: impl Into<String>) -> Note {
        Note {
            level: Level::Warn,
            text: text.into(),
            kind: None,
        }
    }

    /// The note as one of many of `kind` (a plural noun phrase: "keys given twice").
    fn of_kind(mut self, kind: &'static str) -> Note {
        self.kind = Some(kind);
        self
    }
}

/// Notes of one kind logged one by one; the rest are counted in one line, so a file of a
/// million odd lines logs a handful, not a million.
pub const NOTES_PER_KIND: usize = 5;

/// `notes` with those past the first [`NOTES_PER_KIND`] of each kind folded into one line
/// per kind (at the place of the last one logged), giving the count.
fn fold(notes: Vec<Note>) -> Vec<Note> {
    let mut counts: Vec<(&'static str, usize, Level, usize)> = Vec::new();
    let mut out = Vec::with_capacity(notes.len().min(64));
    for note in notes {
        let Some(kind) = note.kind else {
            out.push(note);
            continue;
        };
        match counts.iter_mut().find(|(k, ..)| *k == kind) {
            Some((_, seen, level, _)) if *seen >= NOTES_PER_KIND => {
                *seen += 1;
                if note.level == Level::Warn {
                    *level = Level::Warn;
                }
            }
            Some((_, seen, _, at)) => {
                *seen += 1;
                out.push(note);
                *at = out.len();
            }
            None => {
                out.push(note);
                counts.push((kind, 1, out[out.len() - 1].level, out.len()));
            }
        }
    }
    // Insert the summaries after each kind's last logged line, back to front so that the
    // positions stay right.
    let mut summaries: Vec<(usize, Note)> = counts
        .into_iter()
        .filter(|(_, seen, ..)| *seen > NOTES_PER_KIND)
        .map(|(kind, seen, level, at)| {
            let more = seen - NOTES_PER_KIND;
            let text = format!(
                "... and {more} more {kind} ({seen} in all; only the first {NOTES_PER_KIND} \
                 are logged one by one)"
            );
            (
                at,
                Note {
                    level,
                    text,
                    kind: None,
                },
            )
        })
        .collect();
    summaries.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, note) in summaries {
        out.insert(at, note);
    }
    out
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
    settings.notes = fold(std::mem::take(&mut settings.notes));
    Ok(settings)
}

/// Interprets the process environment's `ZOO_*` and `ZOOKEEPER_*` variables.
pub fn read_env(vars: impl IntoIterator<Item = (String, String)>) -> Result<Settings, ConfigError> {
    let (entries, notes) = env::entries(vars)?;
    let mut settings = keys::interpret(&entries)?;
    settings.notes.splice(0..0, notes);
    settings.notes = fold(std::mem::take(&mut settings.notes));
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
    fn many_notes_of_one_kind_are_counted_in_one_line() {
        let mut text = String::from("clientPort=1\n");
        for i in 0..1000 {
            text.push_str(&format!("learner.k{i}=1\ntickTime={}\n", i + 1));
        }
        text.push_str("4lw.commands.whitelist=ruok,aaaa,bbbb\n");
        let (entries, notes) = props::read("zoo.cfg", &text).expect("lines");
        let mut settings = keys::interpret(&entries).expect("settings");
        settings.notes.splice(0..0, notes);
        let notes = fold(settings.notes);
        let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
        // Five of each kind one by one, then one line with the count; both unknown words.
        assert_eq!(notes.len(), 5 + 1 + 5 + 1 + 2, "{texts:#?}");
        assert!(
            texts[4].contains("key tickTime was already set"),
            "{texts:#?}"
        );
        assert_eq!(
            texts[5],
            "... and 994 more keys set again (999 in all; only the first 5 are logged one by \
             one)"
        );
        assert_eq!(notes[5].level, Level::Warn);
        assert!(
            texts[10].contains("key learner.k4 does not apply"),
            "{texts:#?}"
        );
        assert!(texts[11].starts_with("... and 995 more keys that do not apply to zkd"));
        assert_eq!(notes[11].level, Level::Info);
        assert!(texts[12].contains("\"aaaa\"") && texts[13].contains("\"bbbb\""));
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
