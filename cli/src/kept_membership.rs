//! At start, with a data directory and an ensemble: the membership the last reconfig kept
//! there (ZooKeeper's dynamic configuration file, `zoo.cfg.dynamic.<version in hex>`)
//! replaces the one the flags or the zoo.cfg give, and later reconfigs are kept there too.
//! The file is read as hostile input: size-capped, every line a `server.N=` line ZooKeeper
//! would write, anything else refused naming file and line.

use std::path::{Path, PathBuf};

use zkd_core::ServerSpec;
use zkd_server::{Config, MemberConfig, DYNAMIC_FILE_PREFIX};

/// The most a kept membership file may hold: 255 members of well under 256 bytes each.
const FILE_CAP: u64 = 64 << 10;

/// Points the ensemble's kept membership at the data directory and, when a reconfig kept
/// one there, starts from it. Returns the line to log, if one was used.
pub fn apply(config: &mut Config) -> Result<Option<String>, String> {
    let (Some(e), Some(dir)) = (config.ensemble.as_mut(), config.data_dir.as_ref()) else {
        return Ok(None);
    };
    e.membership_dir = Some(dir.clone());
    let Some((version, path)) = newest(dir)? else {
        return Ok(None);
    };
    let specs = read(&path)?;
    e.members = specs
        .iter()
        .map(|s| MemberConfig {
            id: s.id,
            port: s.client.as_ref().map_or(0, |(_, p)| *p),
            observer: s.observer,
        })
        .collect();
    e.kept_version = Some(version);
    let listing: Vec<String> = e
        .members
        .iter()
        .map(|m| {
            let kind = if m.observer { " (observer)" } else { "" };
            format!("server.{}{kind} on {}", m.id, m.port)
        })
        .collect();
    Ok(Some(format!(
        "{}: the membership a reconfig made (version {version:x}) replaces the configured \
         one: {}",
        path.display(),
        listing.join(", ")
    )))
}

/// The kept membership file of the highest version in `dir`, if any.
fn newest(dir: &Path) -> Result<Option<(i64, PathBuf)>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut best: Option<(i64, PathBuf)> = None;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let name = entry.file_name();
        let Some(hex) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DYNAMIC_FILE_PREFIX))
        else {
            continue;
        };
        let version = parse_version(hex).ok_or_else(|| {
            format!(
                "{}: the name of a kept membership file ends in its version, a hexadecimal \
                 number of 1 to 16 digits, not {hex:?}",
                entry.path().display()
            )
        })?;
        if best.as_ref().is_none_or(|(v, _)| version > *v) {
            best = Some((version, entry.path()));
        }
    }
    Ok(best)
}

/// A positive version in hex, as ZooKeeper names the file (`Long.toHexString`).
fn parse_version(hex: &str) -> Option<i64> {
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    i64::try_from(u64::from_str_radix(hex, 16).ok()?)
        .ok()
        .filter(|v| *v > 0)
}

/// Reads and checks a kept membership file.
fn read(path: &Path) -> Result<Vec<ServerSpec>, String> {
    let bytes = zkd_server::files::read_capped(path, FILE_CAP)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| format!("{}: not text (byte {})", path.display(), e.valid_up_to()))?;
    parse(&path.display().to_string(), text)
}

/// Parses a membership file's text; `file` names it in messages.
fn parse(file: &str, text: &str) -> Result<Vec<ServerSpec>, String> {
    let mut specs: Vec<ServerSpec> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |what: String| format!("{file} line {}: {what}", i + 1);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(at(format!("{:?} is not a server.N= line", clip(line))));
        };
        let id = key
            .strip_prefix("server.")
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|id| (1..=255).contains(id))
            .ok_or_else(|| {
                at(format!(
                    "{:?} is not server.N with N a server id (1 to 255): a kept membership \
                     holds only server lines",
                    clip(key)
                ))
            })?;
        let spec = ServerSpec::parse(id, value.trim()).map_err(|_| {
            at(format!(
                "{:?} is not a server line ZooKeeper would write \
                 (host:quorumPort:electionPort:type;clientAddress:clientPort)",
                clip(value)
            ))
        })?;
        if spec.client.is_none() {
            return Err(at(format!("server.{id} names no client port")));
        }
        if specs.iter().any(|s| s.id == id) {
            return Err(at(format!("server.{id} is given twice")));
        }
        specs.push(spec);
    }
    if !specs.iter().any(|s| !s.observer) {
        return Err(format!(
            "{file}: a kept membership needs at least one voting member, and this one has none"
        ));
    }
    specs.sort_by_key(|s| s.id);
    Ok(specs)
}

/// At most 80 characters of hostile text, for a message.
fn clip(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_zookeeper_writes_is_read() {
        let specs = parse(
            "m",
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.4=127.0.0.1:2891:3891:observer;0.0.0.0:2184",
        )
        .expect("valid");
        let ids: Vec<_> = specs
            .iter()
            .map(|s| (s.id, s.observer, s.client.clone().map(|c| c.1)))
            .collect();
        assert_eq!(
            ids,
            [
                (1, false, Some(2181)),
                (2, false, Some(2182)),
                (4, true, Some(2184))
            ]
        );
        // What the server writes reads back the same.
        assert_eq!(parse("m", &ServerSpec::dynamic_file(&specs)), Ok(specs));
    }

    #[test]
    fn hostile_files_are_refused_naming_file_and_line() {
        for (text, says) in [
            (
                "server.1=h:1:2:participant;1\nversion=100",
                "m line 2: \"version\" is not server.N",
            ),
            (
                "server.1=h:1:2;1\n\nx",
                "m line 3: \"x\" is not a server.N= line",
            ),
            ("server.0=h:1:2;1", "m line 1: \"server.0\" is not server.N"),
            ("server.256=h:1:2;1", "is not server.N"),
            (
                "server.1=h:1:1;1",
                "m line 1: \"h:1:1;1\" is not a server line",
            ),
            ("server.1=h:1:2:boss;1", "is not a server line"),
            ("server.1=h:1:2", "m line 1: server.1 names no client port"),
            (
                "server.1=h:1:2;1\nserver.1=h:3:4;2",
                "m line 2: server.1 is given twice",
            ),
            (
                "server.1=h:1:2:observer;1",
                "m: a kept membership needs at least one voting",
            ),
            ("", "needs at least one voting member"),
        ] {
            let e = parse("m", text).expect_err(text);
            assert!(e.starts_with(says) || e.contains(says), "{text:?}: {e}");
        }
        let long = format!("server.1={}", "x".repeat(100_000));
        let e = parse("m", &long).expect_err("long");
        assert!(
            e.len() < 300,
            "the message quotes a bounded part: {}",
            e.len()
        );
    }

    #[test]
    fn versions_are_hex_as_zookeeper_names_the_file() {
        assert_eq!(parse_version("100000003"), Some(0x1_0000_0003));
        for bad in ["", "x1", "-1", "0", "10000000000000000", "8000000000000000"] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
    }
}
