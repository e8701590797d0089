//! The ensemble's dynamic configuration as plain data: one [`ServerSpec`] per member, parsed
//! from and printed as ZooKeeper's `server.N=HOST:QUORUMPORT:ELECTIONPORT[:TYPE][;CLIENT]`
//! lines, and the text `/zookeeper/config` holds (those lines, then `version=<hex>`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use zkd_protocol::ErrorCode;

/// One member of the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    pub id: u64,
    /// The host of the quorum and election addresses, as written.
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    /// A non-voting member.
    pub observer: bool,
    /// The client address (host as written, `0.0.0.0` when only a port was given), if any.
    pub client: Option<(String, u16)>,
}

/// Why a configuration text was refused: the error ZooKeeper answers a reconfig with.
pub type SpecResult<T> = Result<T, ErrorCode>;

/// The members by id (ZooKeeper prints them in id order).
pub type Servers = BTreeMap<u64, ServerSpec>;

impl ServerSpec {
    /// The value of the member's `server.N=` line, as ZooKeeper prints it: the type always
    /// named, the client address after `;` when there is one.
    pub fn value(&self) -> String {
        let mut s = format!(
            "{}:{}:{}:{}",
            bracketed(&self.host),
            self.quorum_port,
            self.election_port,
            if self.observer {
                "observer"
            } else {
                "participant"
            }
        );
        if let Some((host, port)) = &self.client {
            let _ = write!(s, ";{}:{port}", bracketed(host));
        }
        s
    }

    /// The text of ZooKeeper's dynamic configuration file for `specs`: one `server.N=` line
    /// each, sorted as text (as ZooKeeper sorts them), joined by newlines, without the
    /// `version` line (ZooKeeper names the file after the version instead).
    pub fn dynamic_file(specs: &[ServerSpec]) -> String {
        let mut lines: Vec<String> = specs
            .iter()
            .map(|s| format!("server.{}={}", s.id, s.value()))
            .collect();
        lines.sort();
        lines.join("\n")
    }

    /// Parses the value of a `server.N=` line for member `id`: `host:port:port` or
    /// `host:port:port:type`, optionally followed by `;clientPort` or `;host:clientPort`.
    /// What ZooKeeper's parser rejects is BADARGUMENTS here; several addresses (`|`) and a
    /// secure client address are refused the same way, as ZooKeeper does with its
    /// multi-address feature off (its default).
    pub fn parse(id: u64, value: &str) -> SpecResult<ServerSpec> {
        let line = LineParts::cut(value);
        if line.secure.is_some_and(|secure| !secure.is_empty())
            || line.more
            || line.addresses.len() > 1
        {
            return Err(ErrorCode::BadArguments);
        }
        let fields = host_and_ports(line.addresses[0]).ok_or(ErrorCode::BadArguments)?;
        if !(3..=4).contains(&fields.len()) {
            return Err(ErrorCode::BadArguments);
        }
        let quorum_port = port(fields[1])?;
        let election_port = port(fields[2])?;
        if quorum_port == election_port {
            return Err(ErrorCode::BadArguments);
        }
        let observer = match fields.get(3) {
            None => false,
            Some(t) => is_observer(t).ok_or(ErrorCode::BadArguments)?,
        };
        let client = match line.client.filter(|c| !c.is_empty()) {
            None => None,
            Some(client) => {
                let fields = host_and_ports(client).ok_or(ErrorCode::BadArguments)?;
                match fields.as_slice() {
                    [p] => Some(("0.0.0.0".to_string(), port(p)?)),
                    [h, p] => Some((h.to_string(), port(p)?)),
                    _ => return Err(ErrorCode::BadArguments),
                }
            }
        };
        Ok(ServerSpec {
            id,
            host: fields[0].to_string(),
            quorum_port,
            election_port,
            observer,
            client,
        })
    }

    /// The (host, port) pairs this member uses, wildcard hosts left out (ZooKeeper's
    /// duplicate check ignores them).
    fn addresses(&self) -> Vec<(&str, u16)> {
        let mut v = vec![
            (self.host.as_str(), self.quorum_port),
            (self.host.as_str(), self.election_port),
        ];
        if let Some((h, p)) = &self.client {
            v.push((h.as_str(), *p));
        }
        v.retain(|(h, _)| !matches!(*h, "0.0.0.0" | "::" | "[::]"));
        v
    }

    /// BADARGUMENTS when this member would use an address another member uses.
    pub fn check_no_shared_address(&self, other: &ServerSpec) -> SpecResult<()> {
        let theirs = other.addresses();
        if self.addresses().iter().any(|a| theirs.contains(a)) {
            Err(ErrorCode::BadArguments)
        } else {
            Ok(())
        }
    }
}

/// `host` as a config line writes it: an IPv6 literal in brackets.
fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// A port number; anything else is BADARGUMENTS.
fn port(text: &str) -> SpecResult<u16> {
    text.trim().parse().map_err(|_| ErrorCode::BadArguments)
}

/// A `server.N=` value cut at its separators, as written (nothing trimmed):
/// `ADDRESS[|ADDRESS…][;CLIENT[;SECURE]]`. This is the one place the line's shape is read;
/// a reconfig ([`ServerSpec::parse`]) and zoo.cfg (the `zkd` binary) each apply their own
/// rules to the parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineParts<'a> {
    /// The quorum addresses, `host:quorumPort:electionPort[:type]` each; at least one.
    pub addresses: Vec<&'a str>,
    /// The client address after the first `;`, if there is one.
    pub client: Option<&'a str>,
    /// The secure client address after a second `;`, if there is one.
    pub secure: Option<&'a str>,
    /// Whether a third `;` follows.
    pub more: bool,
}

impl LineParts<'_> {
    /// Cuts `value` at its `;` and its first part at `|`.
    pub fn cut(value: &str) -> LineParts<'_> {
        let mut parts = value.split(';');
        let quorum = parts.next().unwrap_or("");
        let client = parts.next();
        let secure = parts.next();
        LineParts {
            addresses: quorum.split('|').collect(),
            client,
            secure,
            more: parts.next().is_some(),
        }
    }
}

/// Splits `host:port[:...]` (trimmed) at its colons, an IPv6 host being written `[addr]`
/// (returned without its brackets); `None` when a `[` has no `]`, or text follows the `]`
/// without a colon.
pub fn host_and_ports(text: &str) -> Option<Vec<&str>> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('[') {
        let (host, tail) = rest.split_once(']')?;
        let mut v = vec![host];
        if !tail.is_empty() {
            v.extend(tail.strip_prefix(':')?.split(':'));
        }
        return Some(v);
    }
    Some(text.split(':').collect())
}

/// Whether a member type names an observer (`observer`) or a participant (`participant`),
/// in any case; `None` for anything else.
pub fn is_observer(member_type: &str) -> Option<bool> {
    match member_type.to_ascii_lowercase().as_str() {
        "participant" => Some(false),
        "observer" => Some(true),
        _ => None,
    }
}

/// The text of `/zookeeper/config`: every member's line in id order, then `version=` and
/// the configuration's version in hex, without a final newline.
pub fn config_text(servers: &Servers, version: i64) -> String {
    let mut s = String::new();
    for spec in servers.values() {
        let _ = writeln!(s, "server.{}={}", spec.id, spec.value());
    }
    let _ = write!(s, "version={version:x}");
    s
}

/// The number after `server.` in a key, as ZooKeeper reads it; `None` when it is no
/// number (ZooKeeper then fails the request with MARSHALLINGERROR).
fn server_id(key: &str) -> Option<u64> {
    let id = &key[key.rfind('.').map_or(0, |d| d + 1)..];
    id.trim().parse::<i64>().ok().map(|id| id as u64)
}

/// A reconfig's new membership, from the request's fields. `Err` carries the error code
/// ZooKeeper answers with.
pub fn next_servers(
    current: &Servers,
    joining: Option<&str>,
    leaving: Option<&str>,
    new_members: Option<&str>,
) -> SpecResult<Servers> {
    if let Some(text) = new_members {
        return parse_members(text);
    }
    let mut next = current.clone();
    for leaving in split_list(leaving) {
        let id: i64 = leaving.parse().map_err(|_| ErrorCode::MarshallingError)?;
        next.remove(&(id as u64));
    }
    for joiner in split_list(joining) {
        let parts: Vec<&str> = joiner
            .split('=')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let [key, value] = parts.as_slice() else {
            return Err(ErrorCode::BadArguments);
        };
        let id = server_id(key).ok_or(ErrorCode::MarshallingError)?;
        let spec = ServerSpec::parse(id, value)?;
        if spec.client.is_none() {
            return Err(ErrorCode::BadArguments);
        }
        for other in next.values().filter(|o| o.id != id) {
            spec.check_no_shared_address(other)?;
        }
        next.insert(id, spec);
    }
    Ok(next)
}

/// A comma-separated list, each item trimmed, empty items left out.
fn split_list(text: Option<&str>) -> impl Iterator<Item = &str> {
    text.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The non-incremental form: a whole membership, lines separated by commas or newlines,
/// each `key=value` as a properties file has them. Keys other than `server.N` and
/// `version` are BADARGUMENTS (`group`/`weight`, hierarchical quorums, are not simulated).
fn parse_members(text: &str) -> SpecResult<Servers> {
    let mut servers = Servers::new();
    for line in text.split([',', '\n', '\r']).map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line
            .find(['=', ':', ' ', '\t'])
            .ok_or(ErrorCode::BadArguments)?;
        let key = line[..split].trim();
        let value = line[split + 1..].trim_start_matches([' ', '\t', '=', ':']);
        if key == "version" {
            continue;
        }
        if !key.starts_with("server.") {
            return Err(ErrorCode::BadArguments);
        }
        let id = server_id(key).ok_or(ErrorCode::MarshallingError)?;
        servers.insert(id, ServerSpec::parse(id, value.trim())?);
    }
    let voters = servers.values().filter(|s| !s.observer).count();
    if voters == 0 && servers.values().any(|s| s.observer) {
        // ZooKeeper's parser throws an unchecked exception here: MARSHALLINGERROR.
        return Err(ErrorCode::MarshallingError);
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_dynamic_file_sorts_its_lines_as_text_and_has_no_version() {
        let spec = |id: u64| {
            ServerSpec::parse(id, &format!("h:{}:{};{}", 100 + id, 200 + id, id)).expect("valid")
        };
        let text = ServerSpec::dynamic_file(&[spec(2), spec(10), spec(1)]);
        assert_eq!(
            text,
            // As Java's String order puts them: '0' comes before '='.
            "server.10=h:110:210:participant;0.0.0.0:10\n\
             server.1=h:101:201:participant;0.0.0.0:1\n\
             server.2=h:102:202:participant;0.0.0.0:2"
        );
    }

    proptest! {
        /// Whatever a client sends, parsing ends in a spec or an error code, and a spec
        /// prints as a line that parses back to itself.
        #[test]
        fn any_text_parses_or_is_refused_and_specs_round_trip(
            value in "[a-z0-9:;|\\[\\]. =,]{0,40}",
            leaving in proptest::option::of("[0-9a-z, ]{0,12}"),
        ) {
            if let Ok(spec) = ServerSpec::parse(7, &value) {
                prop_assert_eq!(ServerSpec::parse(7, &spec.value()), Ok(spec));
            }
            let cur: Servers = Servers::new();
            let _ = next_servers(&cur, Some(&value), leaving.as_deref(), None);
            let _ = next_servers(&cur, None, None, Some(&value));
        }
    }

    fn three() -> Servers {
        (1..=3)
            .map(|id| {
                let v = format!(
                    "127.0.0.1:{}:{};127.0.0.1:{}",
                    2887 + id,
                    3887 + id,
                    2180 + id
                );
                (id, ServerSpec::parse(id, &v).expect("a spec"))
            })
            .collect()
    }

    #[test]
    fn lines_print_as_zookeeper_prints_them() {
        assert_eq!(
            config_text(&three(), 0x1_0000_0000),
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183\n\
             version=100000000"
        );
        let o = ServerSpec::parse(4, "h:1:2:OBSERVER;5").expect("a spec");
        assert_eq!(o.value(), "h:1:2:observer;0.0.0.0:5");
        let v6 = ServerSpec::parse(5, "[::1]:1:2;[::1]:3").expect("a spec");
        assert_eq!(v6.value(), "[::1]:1:2:participant;[::1]:3");
        assert_eq!(
            ServerSpec::parse(6, "h:1:2").expect("a spec").value(),
            "h:1:2:participant"
        );
    }

    #[test]
    fn a_line_is_cut_into_its_parts_as_written() {
        let line = LineParts::cut("a:1:2|[::1]:3:4:observer; 5 ;x");
        assert_eq!(line.addresses, ["a:1:2", "[::1]:3:4:observer"]);
        assert_eq!(
            (line.client, line.secure, line.more),
            (Some(" 5 "), Some("x"), false)
        );
        assert!(LineParts::cut("a:1:2;1;2;3").more);
        assert_eq!(host_and_ports(" [::1]:3:4 "), Some(vec!["::1", "3", "4"]));
        assert_eq!(host_and_ports("[::1]"), Some(vec!["::1"]));
        assert_eq!(host_and_ports(":1"), Some(vec!["", "1"]));
        assert_eq!(host_and_ports("[::1"), None);
        assert_eq!(host_and_ports("[::1]x:1"), None);
        assert_eq!(
            ["observer", "Participant", "voter"].map(is_observer),
            [Some(true), Some(false), None]
        );
    }

    #[test]
    fn malformed_lines_are_bad_arguments() {
        for bad in [
            "h:1",
            "h:1:1;3",
            "h:1:2:voter;3",
            "h:x:2;3",
            "h:1:2;h:3:4",
            "h:1:2|h:3:4;5",
            "h:1:2;3;4",
            "h:1:2:participant:9;3",
            "h:1:70000;3",
        ] {
            assert_eq!(
                ServerSpec::parse(1, bad),
                Err(ErrorCode::BadArguments),
                "{bad}"
            );
        }
    }

    #[test]
    fn incremental_changes_remove_then_add() {
        let cur = three();
        let next = next_servers(&cur, None, Some("3"), None).expect("valid");
        assert_eq!(next.keys().copied().collect::<Vec<_>>(), [1, 2]);
        // Leaving a non-member changes nothing, as on ZooKeeper.
        assert_eq!(
            next_servers(&cur, None, Some(" 9 ,"), None),
            Ok(cur.clone())
        );
        assert_eq!(
            next_servers(&cur, None, Some("x"), None),
            Err(ErrorCode::MarshallingError)
        );
        let back = next_servers(
            &next,
            Some("server.3=127.0.0.1:2890:3890;127.0.0.1:2183"),
            None,
            None,
        )
        .expect("valid");
        assert_eq!(back, cur);
        // A joiner needs its client address, and may not reuse another member's address.
        for joiner in [
            "server.4=127.0.0.1:2891:3891",
            "server.4=127.0.0.1:2888:3891;2184",
            "server.4=127.0.0.1:2891:3891;127.0.0.1:2181",
            "server.4",
        ] {
            assert_eq!(
                next_servers(&cur, Some(joiner), None, None),
                Err(ErrorCode::BadArguments),
                "{joiner}"
            );
        }
        // Replacing a member's own line is not a conflict with itself.
        let moved = next_servers(
            &cur,
            Some("server.3=127.0.0.1:2890:3890:observer;127.0.0.1:2183"),
            None,
            None,
        )
        .expect("valid");
        assert!(moved[&3].observer);
    }

    #[test]
    fn a_whole_membership_replaces_the_old_one() {
        let next = next_servers(
            &three(),
            None,
            None,
            Some(
                "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181,\
                 server.2=127.0.0.1:2889:3889;127.0.0.1:2182\nversion=5",
            ),
        )
        .expect("valid");
        assert_eq!(next.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            next_servers(&three(), None, None, Some("clientPort=2181")),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            next_servers(&three(), None, None, Some("server.1=h:1:2:observer;3")),
            Err(ErrorCode::MarshallingError)
        );
    }
}
