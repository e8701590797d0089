//! Several `server.N` lines (or one with `standaloneEnabled=false`) as the members of zkd's
//! simulated ensemble: ids from the lines, observers from their `:observer` type, client
//! ports from each line's `;port` or `clientPort`, read-only mode from `readonlymode.enabled`
//! (off, ZooKeeper's default).

use std::collections::BTreeSet;

use zkd_server::{ElectionTiming, EnsembleConfig, MemberConfig};

use super::keys::Settings;
use super::servers::{Role, ServerLine};
use super::{ConfigError, Note};

/// The ensemble `lines` describe. `flag_port` is `--port` when it was given: members then
/// listen on it and the ports after it (each on a free port with 0), as with `--ensemble`.
pub fn ensemble(
    lines: &[ServerLine],
    s: &Settings,
    flag_port: Option<u16>,
    notes: &mut Vec<Note>,
) -> Result<EnsembleConfig, ConfigError> {
    let mut lines: Vec<&ServerLine> = lines.iter().collect();
    lines.sort_by_key(|l| l.id);
    let err = |l: &ServerLine, message: String| ConfigError {
        origin: l.origin.clone(),
        key: Some(format!("server.{}", l.id)),
        message,
    };
    for l in &lines {
        if !(1..=255).contains(&l.id) {
            return Err(err(l, "zkd's ensemble members have ids 1 to 255".into()));
        }
    }
    // ZooKeeper's own checks: observers need participants, and a quorum of them unless a
    // lone participant is told not to run standalone.
    let participants = lines.iter().filter(|l| l.role == Role::Participant).count();
    let standalone = s.standalone_enabled.as_ref().is_none_or(|b| b.value);
    if let Some(o) = lines.iter().find(|l| l.role == Role::Observer) {
        if participants == 0 {
            return Err(err(
                o,
                "observers without participants: at least one server.N line must be a \
                 participant"
                    .into(),
            ));
        }
        if participants == 1 && standalone {
            return Err(err(
                o,
                "observers without a quorum: a single participant runs standalone unless \
                 standaloneEnabled=false"
                    .into(),
            ));
        }
    }
    let mut ports = match flag_port {
        Some(0) => vec![0; lines.len()],
        Some(p) => lines.iter().map(|_| p).collect(),
        None => lines
            .iter()
            .map(|l| match (&l.client, &s.client_port) {
                (Some((_, p)), _) => Ok(*p),
                (None, Some(p)) => Ok(p.value),
                (None, None) => Err(err(
                    l,
                    "gives no client port (;port) and no clientPort is set".into(),
                )),
            })
            .collect::<Result<Vec<u16>, _>>()?,
    };
    let fixed: Vec<u16> = ports.iter().copied().filter(|p| *p != 0).collect();
    let distinct = fixed.iter().collect::<BTreeSet<_>>().len() == fixed.len();
    if !distinct || flag_port.is_some_and(|p| p != 0) {
        // Members of a real ensemble run on different hosts and often share one client port;
        // in one process each needs its own: the first member's port and the ports after it.
        let base = ports[0];
        for (k, (port, l)) in ports.iter_mut().zip(&lines).enumerate() {
            *port = u16::try_from(u32::from(base) + k as u32).map_err(|_| {
                err(
                    l,
                    format!("its client port would be {base} + {k}, past 65535"),
                )
            })?;
        }
        if flag_port.is_none() {
            notes.push(Note::info(format!(
                "{}: the members share client port {base} (on their own hosts); in this one \
                 process they listen on {}",
                lines[0].origin,
                listing(&lines, &ports)
            )));
        }
    }
    let read_only = s.read_only_enabled.as_ref().is_some_and(|r| r.value);
    notes.push(Note::info(format!(
        "{}: a simulated ensemble of {} members in this one process ({}), read-only mode {}",
        lines[0].origin,
        lines.len(),
        listing(&lines, &ports),
        if read_only {
            "on"
        } else {
            "off (readonlymode.enabled is not true)"
        }
    )));
    if let Some(l) = lines
        .iter()
        .find(|l| l.client.as_ref().is_some_and(|(a, _)| a.is_some()))
    {
        notes.push(Note::info(format!(
            "{}: client addresses of server.N lines are not used: every member binds the \
             client address (clientPortAddress, or the default)",
            l.origin
        )));
    }
    let members = lines
        .iter()
        .zip(ports)
        .map(|(l, port)| MemberConfig {
            id: l.id,
            port,
            observer: l.role == Role::Observer,
        })
        .collect();
    let (init, sync) = EnsembleConfig::DEFAULT_LIMITS;
    Ok(EnsembleConfig {
        members,
        read_only,
        init_limit: s.init_limit.as_ref().map_or(init, |l| l.value),
        sync_limit: s.sync_limit.as_ref().map_or(sync, |l| l.value),
        kept_version: None,
        membership_dir: None,
        local_sessions: s.local_sessions_enabled.as_ref().is_some_and(|b| b.value),
        local_sessions_upgrading: s
            .local_sessions_upgrading_enabled
            .as_ref()
            .is_some_and(|b| b.value),
        // A zoo.cfg describes a ZooKeeper deployment: its members take ZooKeeper's time to
        // notice a lost leader and to elect.
        election_timing: ElectionTiming::ZooKeeper,
    })
}

/// `server.1 on 2181, server.2 on 2182, server.3 (observer) on 2183, ...` (0: a free port).
fn listing(lines: &[&ServerLine], ports: &[u16]) -> String {
    lines
        .iter()
        .zip(ports)
        .map(|(l, p)| {
            let kind = match l.role {
                Role::Observer => " (observer)",
                Role::Participant => "",
            };
            match p {
                0 => format!("server.{}{kind} on a free port", l.id),
                p => format!("server.{}{kind} on {p}", l.id),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::{keys, props};
    use super::*;

    fn run(text: &str, flag_port: Option<u16>) -> Result<(EnsembleConfig, Vec<Note>), String> {
        let s = keys::interpret(&props::read("zoo.cfg", text).expect("lines").0).expect("keys");
        let mut notes = Vec::new();
        ensemble(&s.servers, &s, flag_port, &mut notes)
            .map(|e| (e, notes))
            .map_err(|e| e.to_string())
    }

    fn ports(e: &EnsembleConfig) -> Vec<(u64, u16)> {
        e.members.iter().map(|m| (m.id, m.port)).collect()
    }

    #[test]
    fn members_take_their_lines_client_ports() {
        let (e, notes) = run(
            "server.3=localhost:2890:3890;2183\nserver.1=localhost:2888:3888;2181\n\
             server.2=localhost:2889:3889;2182\nreadonlymode.enabled=true\n",
            None,
        )
        .unwrap();
        assert_eq!(ports(&e), [(1, 2181), (2, 2182), (3, 2183)]);
        assert!(e.read_only);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].text.contains("a simulated ensemble of 3 members"),
            "{notes:?}"
        );
    }

    #[test]
    fn init_and_sync_limits_are_kept_for_conf_with_the_sample_values_by_default() {
        let lines = "server.1=a:1:2;2181\nserver.2=b:1:2;2182\nserver.3=c:1:2;2183\n";
        let (e, _) = run(&format!("{lines}initLimit=7\nsyncLimit=3\n"), None).unwrap();
        assert_eq!((e.init_limit, e.sync_limit), (7, 3));
        assert_eq!(
            e.election_timing,
            ElectionTiming::ZooKeeper,
            "a zoo.cfg's ensemble fails over on ZooKeeper's timing"
        );
        let (e, _) = run(lines, None).unwrap();
        assert_eq!((e.init_limit, e.sync_limit), (10, 5));
    }

    #[test]
    fn observer_lines_make_observers() {
        let (e, notes) = run(
            "server.1=a:1:2;2181\nserver.2=b:1:2;2182\nserver.3=c:1:2;2183\n\
             server.4=d:1:2:observer;2184\n",
            None,
        )
        .unwrap();
        let observers: Vec<bool> = e.members.iter().map(|m| m.observer).collect();
        assert_eq!(observers, [false, false, false, true]);
        assert!(
            notes[0].text.contains("server.4 (observer) on 2184"),
            "{notes:?}"
        );
        // A lone participant with an observer is an ensemble once standalone is off.
        let (e, _) = run(
            "standaloneEnabled=false\nserver.1=a:1:2;2181\nserver.2=b:1:2:observer;2182\n",
            None,
        )
        .unwrap();
        assert_eq!(e.members.iter().filter(|m| m.observer).count(), 1);
    }

    #[test]
    fn a_shared_client_port_is_spread_over_the_ports_after_it() {
        let text = "clientPort=2181\nserver.1=zoo1:2888:3888\nserver.2=zoo2:2888:3888\n\
                    server.3=zoo3:2888:3888\n";
        let (e, notes) = run(text, None).unwrap();
        assert_eq!(ports(&e), [(1, 2181), (2, 2182), (3, 2183)]);
        assert!(!e.read_only, "ZooKeeper's default");
        assert!(
            notes[0].text.contains("share client port 2181"),
            "{notes:?}"
        );
        let (e, _) = run(text, Some(0)).unwrap();
        assert_eq!(ports(&e), [(1, 0), (2, 0), (3, 0)]);
        let (e, _) = run(text, Some(3000)).unwrap();
        assert_eq!(ports(&e), [(1, 3000), (2, 3001), (3, 3002)]);
        let (e, _) = run("clientPort=0\nserver.1=a:1:2\nserver.2=b:1:2\n", None).unwrap();
        assert_eq!(ports(&e), [(1, 0), (2, 0)]);
    }

    #[test]
    fn members_that_cannot_be_simulated_are_errors_naming_the_line() {
        for (text, says) in [
            (
                "server.1=a:1:2;2181\nserver.2=b:1:2:observer;2182\n",
                "zoo.cfg line 2: key server.2: observers without a quorum",
            ),
            (
                "server.1=a:1:2:observer;2181\nserver.2=b:1:2:observer;2182\n\
                 standaloneEnabled=false\n",
                "key server.1: observers without participants",
            ),
            (
                "server.1=a:1:2;2181\nserver.300=b:1:2;2182\n",
                "key server.300: zkd's ensemble members have ids 1 to 255",
            ),
            (
                "server.1=a:1:2;2181\nserver.2=b:1:2\n",
                "key server.2: gives no client port (;port) and no clientPort is set",
            ),
            (
                "clientPort=65535\nserver.1=a:1:2\nserver.2=b:1:2\n",
                "key server.2: its client port would be 65535 + 1, past 65535",
            ),
        ] {
            let e = run(text, None).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
