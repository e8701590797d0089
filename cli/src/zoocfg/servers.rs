//! `server.N` lines: `server.N=host:quorumPort:electionPort[:participant|observer]`, optionally
//! several such addresses joined by `|`, then optionally `;[clientAddress:]clientPort`. The
//! line is cut into its parts by zkd-core (`LineParts`, `host_and_ports`, the grammar a
//! reconfig reads too); here are zoo.cfg's rules on the parts and the sentences naming what
//! is wrong.

use zkd_core::{host_and_ports, is_observer, LineParts};

use super::{ConfigError, Entry, Origin};

/// Whether a member votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A voting member (the default).
    Participant,
    /// A non-voting member.
    Observer,
}

/// One parsed `server.N` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerLine {
    /// N, the member's id.
    pub id: u64,
    /// The first quorum address's host.
    pub host: String,
    /// Its quorum (follower) port.
    pub quorum_port: u16,
    /// Its leader-election port.
    pub election_port: u16,
    /// Participant or observer.
    pub role: Role,
    /// The client address after `;`, when given: the host (if any) and the port.
    pub client: Option<(Option<String>, u16)>,
    /// Where the line is.
    pub origin: Origin,
}

/// Parses a `server.N` entry (the caller has checked the key starts with `server.`).
pub fn parse(entry: &Entry) -> Result<ServerLine, ConfigError> {
    let err = |msg: String| ConfigError::at(entry, msg);
    let id_text = &entry.key["server.".len()..];
    let id: u64 = id_text.parse().map_err(|_| {
        err(format!(
            "{id_text:?} is not a server id: expected server.N with N a whole number"
        ))
    })?;
    let form =
        "expected host:quorumPort:electionPort[:participant|observer][;[clientAddress:]clientPort]";
    let line = LineParts::cut(&entry.value);
    if line.secure.is_some() {
        return Err(err(format!(
            "{:?} has more than one ';': {form}",
            entry.value
        )));
    }
    let mut first = None;
    for address in line.addresses {
        let not_of_form = || err(format!("{:?} is not of the form {form}", entry.value));
        let fields = host_and_ports(address).ok_or_else(not_of_form)?;
        // A host may be empty only as written in brackets (`[]`).
        let no_host = fields[0].is_empty() && !address.trim().starts_with('[');
        let (host, q, e, role) = match fields.as_slice() {
            _ if no_host => return Err(not_of_form()),
            [host, q, e] => (*host, *q, *e, None),
            [host, q, e, r] => (*host, *q, *e, Some(*r)),
            _ => return Err(not_of_form()),
        };
        let quorum_port = port(q).map_err(|m| err(format!("quorum port {m}")))?;
        let election_port = port(e).map_err(|m| err(format!("election port {m}")))?;
        let role = match role.map(|r| (r, is_observer(r))) {
            None | Some((_, Some(false))) => Role::Participant,
            Some((_, Some(true))) => Role::Observer,
            Some((other, None)) => {
                return Err(err(format!(
                    "{:?} is not a member type: expected participant or observer",
                    other.to_ascii_lowercase()
                )))
            }
        };
        first.get_or_insert((host.to_string(), quorum_port, election_port, role));
    }
    let Some((host, quorum_port, election_port, role)) = first else {
        return Err(err(format!("{:?} is not of the form {form}", entry.value)));
    };
    let client = match line.client.map(str::trim) {
        None => None,
        Some(text) => Some(match text.rsplit_once(':') {
            _ if text.starts_with('[') && text.ends_with(']') => {
                return Err(err(format!("client address {text:?} has no port")))
            }
            Some((addr, p)) => {
                let addr = addr.trim_start_matches('[').trim_end_matches(']');
                (
                    Some(addr.to_string()),
                    port(p).map_err(|m| err(format!("client port {m}")))?,
                )
            }
            None => (
                None,
                port(text).map_err(|m| err(format!("client port {m}")))?,
            ),
        }),
    };
    Ok(ServerLine {
        id,
        host,
        quorum_port,
        election_port,
        role,
        client,
        origin: entry.origin.clone(),
    })
}

/// A port number 1..=65535.
pub fn port(text: &str) -> Result<u16, String> {
    match text.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("{text:?} is not a port number (1-65535)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: &str) -> Entry {
        Entry {
            origin: Origin::Line {
                file: "zoo.cfg".into(),
                line: 7,
            },
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn every_form_of_the_line() {
        let s = parse(&entry("server.1", "zoo1:2888:3888")).unwrap();
        assert_eq!(
            (
                s.id,
                &*s.host,
                s.quorum_port,
                s.election_port,
                s.role,
                s.client
            ),
            (1, "zoo1", 2888, 3888, Role::Participant, None)
        );
        let s = parse(&entry("server.2", "zoo2:2888:3888;2181")).unwrap();
        assert_eq!(s.client, Some((None, 2181)));
        let s = parse(&entry("server.3", "zoo3:2888:3888:observer;0.0.0.0:2182")).unwrap();
        assert_eq!(s.role, Role::Observer);
        assert_eq!(s.client, Some((Some("0.0.0.0".into()), 2182)));
        let s = parse(&entry("server.4", "[::1]:2888:3888:participant;[::1]:2183")).unwrap();
        assert_eq!(
            (&*s.host, s.client),
            ("::1", Some((Some("::1".into()), 2183)))
        );
        let s = parse(&entry("server.5", "a:1:2|b:3:4;2184")).unwrap();
        assert_eq!(
            (&*s.host, s.quorum_port, s.client),
            ("a", 1, Some((None, 2184)))
        );
    }

    #[test]
    fn an_empty_host_is_taken_only_in_brackets() {
        assert_eq!(parse(&entry("server.1", "[]:1:2")).unwrap().host, "");
        let e = parse(&entry("server.1", ":1:2")).unwrap_err();
        assert!(e.message.contains("is not of the form"), "{}", e.message);
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_key() {
        for (key, value, needle) in [
            ("server.x", "h:1:2", "\"x\" is not a server id"),
            ("server.1", "h:2888", "is not of the form"),
            ("server.1", "h", "is not of the form"),
            ("server.1", ":1:2", "is not of the form"),
            ("server.1", "h:1:2:3:4", "is not of the form"),
            (
                "server.1",
                "h:0:2",
                "quorum port \"0\" is not a port number",
            ),
            ("server.1", "h:1:99999", "election port \"99999\""),
            ("server.1", "h:1:2:voter", "\"voter\" is not a member type"),
            ("server.1", "h:1:2;x", "client port \"x\""),
            ("server.1", "h:1:2;1;2", "more than one ';'"),
        ] {
            let e = parse(&entry(key, value)).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(key));
            assert!(e.message.contains(needle), "{value}: {}", e.message);
            assert!(e.to_string().starts_with("zoo.cfg line 7: key "), "{e}");
        }
    }
}
