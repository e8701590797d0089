//! Pure functions that format a [`FourLetterView`] exactly like a standalone ZooKeeper 3.8
//! answers each four-letter word.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use super::civil_date::civil_from_days;
use super::report::{ConnectionInfo, FourLetterView, HostInfo};
use crate::config::SESSIONLESS_CNXN_TIMEOUT_MS;
use crate::engine::ensemble::MemberMode;
use crate::VersionString;

/// The reply to a known word that is not whitelisted.
pub fn not_whitelisted(word: &str) -> String {
    format!("{word} is not executed because it is not in the whitelist.\n")
}

pub fn ruok() -> String {
    "imok".to_string()
}

/// `rw`, or `ro` on a read-only ensemble member.
pub fn isro(view: &FourLetterView) -> String {
    match view.member.as_ref().map(|m| m.mode) {
        Some(MemberMode::ReadOnly) => "ro",
        _ => "rw",
    }
    .to_string()
}

/// What a member that serves no client (no quorum, read-only mode off) answers to most words.
pub const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// The first lines of `srvr` and `stat`: the version, and on a read-only member a line
/// saying so.
fn version_lines(view: &FourLetterView) -> String {
    let version = view.conf.zookeeper_version.version_string();
    let mut s = format!("Zookeeper version: {version}\n");
    if view
        .member
        .as_ref()
        .is_some_and(|m| m.mode == MemberMode::ReadOnly)
    {
        s.push_str("READ-ONLY mode; serving only read-only clients\n");
    }
    s
}

pub fn srvr(view: &FourLetterView) -> String {
    let mut s = version_lines(view);
    server_stats(&mut s, view);
    s
}

pub fn stat(view: &FourLetterView) -> String {
    let mut s = version_lines(view);
    s.push_str("Clients:\n");
    for c in &view.connections {
        connection_line(&mut s, c, true);
        s.push('\n');
    }
    s.push('\n');
    server_stats(&mut s, view);
    s
}

pub fn cons(view: &FourLetterView) -> String {
    let mut s = String::new();
    for c in &view.connections {
        connection_line(&mut s, c, false);
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The reply to `crst` (reset per-connection counters).
pub fn crst() -> String {
    "Connection stats reset.\n".to_string()
}

/// The reply to `srst` (reset server counters).
pub fn srst() -> String {
    "Server stats reset.\n".to_string()
}

pub fn dump(view: &FourLetterView) -> String {
    let mut s = String::from("SessionTracker dump:\n");

    let mut buckets: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for session in &view.sessions {
        buckets
            .entry(session.expires_at_ms)
            .or_default()
            .push(session.id);
    }
    let _ = writeln!(
        s,
        "Session Sets ({})/({}):",
        buckets.len(),
        view.sessions.len()
    );
    for (at, ids) in &mut buckets {
        ids.sort_unstable();
        let _ = writeln!(s, "{} expire at {}:", ids.len(), java_date(*at));
        for id in ids.iter() {
            let _ = writeln!(s, "\t0x{id:x}");
        }
    }

    s.push_str("ephemeral nodes dump:\n");
    let owners = view.sessions.iter().filter(|x| !x.ephemerals.is_empty());
    let _ = writeln!(s, "Sessions with Ephemerals ({}):", owners.count());
    let ephemerals = view.sessions.iter().map(|x| (x.id, &x.ephemerals));
    write_groups(&mut s, ephemerals, ":");

    s.push_str("Connections dump:\n");
    let mut cnxn_buckets: BTreeMap<i64, Vec<&ConnectionInfo>> = BTreeMap::new();
    for c in &view.connections {
        let timeout = c
            .session
            .as_ref()
            .map_or(SESSIONLESS_CNXN_TIMEOUT_MS, |x| x.core.timeout_ms);
        let at = round_up_to_interval(c.last_activity_ms + timeout, SESSIONLESS_CNXN_TIMEOUT_MS);
        cnxn_buckets.entry(at).or_default().push(c);
    }
    let _ = writeln!(
        s,
        "Connections Sets ({})/({}):",
        cnxn_buckets.len(),
        view.connections.len()
    );
    for (at, conns) in &mut cnxn_buckets {
        conns.sort_by_key(|c| c.remote);
        let _ = writeln!(s, "{} expire at {}:", conns.len(), java_date(*at));
        for c in conns.iter() {
            let sid = c.session.as_ref().map_or(0, |x| x.core.session_id);
            let _ = writeln!(
                s,
                "\tip: {} sessionId: 0x{sid:x}",
                java_socket_addr(&c.remote)
            );
        }
    }
    s
}

pub fn wchs(view: &FourLetterView) -> String {
    let w = view.watch_summary();
    format!(
        "{} connections watching {} paths\nTotal watches:{}\n",
        w.connections, w.paths, w.watches
    )
}

/// Writes each session with paths (`0x{id}` and `suffix`, by id) and its paths, sorted,
/// one per tab-indented line.
fn write_groups<'a>(
    s: &mut String,
    groups: impl Iterator<Item = (i64, &'a Vec<String>)>,
    suffix: &str,
) {
    let mut groups: Vec<_> = groups.filter(|(_, paths)| !paths.is_empty()).collect();
    groups.sort_by_key(|(id, _)| *id);
    for (id, paths) in groups {
        let _ = writeln!(s, "0x{id:x}{suffix}");
        let mut paths: Vec<&String> = paths.iter().collect();
        paths.sort();
        for p in paths {
            let _ = writeln!(s, "\t{p}");
        }
    }
}

pub fn wchc(view: &FourLetterView) -> String {
    let mut s = String::new();
    let watched = view.data_watches.iter().map(|w| (w.session_id, &w.paths));
    write_groups(&mut s, watched, "");
    s.push('\n');
    s
}

pub fn wchp(view: &FourLetterView) -> String {
    let mut by_path: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for w in &view.data_watches {
        for p in &w.paths {
            by_path.entry(p).or_default().push(w.session_id);
        }
    }
    let mut s = String::new();
    for (path, ids) in &mut by_path {
        ids.sort_unstable();
        let _ = writeln!(s, "{path}");
        for id in ids.iter() {
            let _ = writeln!(s, "\t0x{id:x}");
        }
    }
    s.push('\n');
    s
}

pub fn conf(view: &FourLetterView) -> String {
    let c = &view.conf;
    let mut s = String::new();
    let _ = writeln!(s, "clientPort={}", port_or_none(Some(c.client_port)));
    let _ = writeln!(s, "secureClientPort={}", port_or_none(c.secure_client_port));
    // Snapshots and the log share one directory, so both lines name it.
    let (dir, size) = data_dir(view);
    let _ = writeln!(s, "dataDir={dir}\ndataDirSize={size}");
    let _ = writeln!(s, "dataLogDir={dir}\ndataLogSize={size}");
    let _ = writeln!(s, "tickTime={}", c.tick_time_ms);
    let _ = writeln!(s, "maxClientCnxns={}", c.max_client_cnxns);
    let _ = writeln!(s, "minSessionTimeout={}", c.min_session_timeout_ms);
    let _ = writeln!(s, "maxSessionTimeout={}", c.max_session_timeout_ms);
    s.push_str("clientPortListenBacklog=-1\n");
    match &view.member {
        None => s.push_str("serverId=0\n"),
        Some(m) => {
            let _ = writeln!(s, "serverId={}", m.id);
            let (quorum, election) = crate::engine::ensemble::quorum_ports(m.id);
            // ZooKeeper's learner type by number: 0 a participant, 1 an observer.
            let peer_type = u8::from(m.observer);
            let _ = write!(
                s,
                "initLimit={}\nsyncLimit={}\nelectionAlg=3\nelectionPort={election}\n\
                 quorumPort={quorum}\npeerType={peer_type}\n",
                m.limits.0, m.limits.1
            );
            // A read-only member's server prints no membership.
            if m.mode != MemberMode::ReadOnly {
                s.push_str("membership: \n");
                s.push_str(&m.membership);
                s.push('\n');
            }
        }
    }
    s
}

pub fn envi(host: &HostInfo, version: crate::ZookeeperVersion) -> String {
    let mb = |v: Option<u64>| v.map_or_else(|| "<NA>".to_string(), |v| format!("{v}MB"));
    let used = host.process.memory_used_mb;
    let free = match (host.process.memory_max_mb, used) {
        (Some(max), Some(used)) => Some(max.saturating_sub(used)),
        _ => None,
    };
    let mut s = String::from("Environment:\n");
    let lines: [(&str, String); 18] = [
        ("zookeeper.version", version.version_string().to_string()),
        ("host.name", host.host_name.clone()),
        ("java.version", "<NA>".to_string()),
        ("java.vendor", "<NA>".to_string()),
        ("java.home", "<NA>".to_string()),
        ("java.class.path", "<NA>".to_string()),
        ("java.library.path", "<NA>".to_string()),
        ("java.io.tmpdir", host.tmp_dir.clone()),
        ("java.compiler", "<NA>".to_string()),
        ("os.name", host.os_name.clone()),
        ("os.arch", host.os_arch.clone()),
        ("os.version", host.os_version.clone()),
        ("user.name", host.user_name.clone()),
        ("user.home", host.user_home.clone()),
        ("user.dir", host.user_dir.clone()),
        ("os.memory.free", mb(free)),
        ("os.memory.max", mb(host.process.memory_max_mb)),
        ("os.memory.total", mb(used)),
    ];
    for (k, v) in lines {
        let _ = writeln!(s, "{k}={v}");
    }
    s
}

/// A port as ZooKeeper prints it: -1 for a listener that does not exist (0 here).
pub fn port_or_none(port: Option<u16>) -> i32 {
    port.filter(|&p| p != 0).map_or(-1, i32::from)
}

/// The data directory (`DIR/version-2`) and the bytes its files hold; in memory
/// `(in-memory)` and 0.
pub fn data_dir(view: &FourLetterView) -> (&str, u64) {
    view.data_dir
        .as_ref()
        .map_or(("(in-memory)", 0), |d| (d.path.as_str(), d.size_bytes))
}

/// The sizes of the data and log directories (one directory here, so the same number).
pub fn dirs(view: &FourLetterView) -> String {
    let (_, size) = data_dir(view);
    format!("datadir_size: {size}\nlogdir_size: {size}\n")
}

pub fn mntr(view: &FourLetterView, host: &HostInfo) -> String {
    let mut s = String::new();
    for (k, v) in super::metrics::monitor(view, host) {
        let _ = writeln!(s, "zk_{k}\t{v}");
    }
    s
}

/// Digests are not kept, so the digest log is empty.
pub fn hash() -> String {
    String::new()
}

/// The block `srvr` and `stat` share (ServerStats plus the node count).
fn server_stats(s: &mut String, view: &FourLetterView) {
    let l = &view.latency;
    let _ = writeln!(
        s,
        "Latency min/avg/max: {}/{}/{}",
        l.min,
        java_double(l.avg),
        l.max
    );
    let _ = writeln!(s, "Received: {}", view.packets_received);
    let _ = writeln!(s, "Sent: {}", view.packets_sent);
    let _ = writeln!(s, "Connections: {}", view.connection_count);
    let _ = writeln!(s, "Outstanding: {}", view.outstanding_requests);
    let _ = writeln!(s, "Zxid: 0x{:x}", view.last_zxid);
    let _ = writeln!(s, "Mode: {}", server_state(view));
    let _ = writeln!(s, "Node count: {}", view.znode_count + 1);
    if view
        .member
        .as_ref()
        .is_some_and(|m| m.mode == MemberMode::Leader)
    {
        s.push_str("Proposal sizes last/min/max: -1/-1/-1\n");
    }
}

/// `standalone`, or an ensemble member's mode (`leader`, `follower`, `observer`,
/// `read-only`).
pub fn server_state(view: &FourLetterView) -> &'static str {
    view.member
        .as_ref()
        .map_or("standalone", |m| m.mode.as_str())
}

/// One connection as `stat` (brief) and `cons` (full) print it, without the newline.
fn connection_line(s: &mut String, c: &ConnectionInfo, brief: bool) {
    let interest = if c.session.is_some() { 1 } else { 0 };
    let _ = write!(
        s,
        " {}[{interest}](queued={},recved={},sent={}",
        java_socket_addr(&c.remote),
        c.queued,
        c.packets_received,
        c.packets_sent
    );
    if let (false, Some(x)) = (brief, &c.session) {
        let _ = write!(
            s,
            ",sid=0x{:x},lop={},est={},to={}",
            x.core.session_id, x.core.last_op, x.core.established_ms, x.core.timeout_ms
        );
        if x.core.last_cxid >= 0 {
            let _ = write!(s, ",lcxid=0x{:x}", x.core.last_cxid);
        }
        let _ = write!(
            s,
            ",lzxid=0x{:x},lresp={},llat={},minlat={},avglat={},maxlat={}",
            x.core.last_zxid,
            x.core.last_response_ms,
            x.last_latency_ms,
            x.min_latency_ms,
            x.avg_latency_ms,
            x.max_latency_ms
        );
    }
    s.push(')');
}

/// `(t / interval + 1) * interval`: the next interval boundary strictly after `t`.
fn round_up_to_interval(t: i64, interval: i64) -> i64 {
    (t.div_euclid(interval) + 1) * interval
}

/// A socket address as Java's `InetSocketAddress.toString()` prints an unresolved peer:
/// `/127.0.0.1:40868`, `/0:0:0:0:0:0:0:1:50356`.
pub fn java_socket_addr(addr: &SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let parts: Vec<String> = v6.segments().iter().map(|g| format!("{g:x}")).collect();
                parts.join(":")
            }
        },
        IpAddr::V4(v4) => v4.to_string(),
    };
    format!("/{ip}:{}", addr.port())
}

/// A double as Java's `Double.toString` prints it: `0.0`, `2.0`, `1.3333333333333333`,
/// `1.0E7`.
pub fn java_double(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".to_string()
        } else if v > 0.0 {
            "Infinity".to_string()
        } else {
            "-Infinity".to_string()
        };
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exp}")
    } else {
        format!("{mantissa}.0E{exp}")
    }
}

/// Epoch milliseconds as Java's `Date.toString()` prints them in UTC:
/// `Sun Nov 22 06:39:20 UTC 2026`.
pub fn java_date(epoch_ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = epoch_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    format!(
        "{weekday} {} {day:02} {:02}:{:02}:{:02} UTC {year}",
        MONTHS[(month - 1) as usize],
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::super::{render, VERSION};
    use super::*;
    use crate::core::report::ConnSessionReport;
    use crate::reports::host::ProcessUse;
    use crate::reports::report::{app_session, ConfInfo, ConnSession, ConnWatches, Latency};
    use zkd_protocol::FourLetterWord as W;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    /// Two connections like the samples in docs/protocol.md: a client with a session and the
    /// connection asking.
    fn sample() -> FourLetterView {
        let (sessions, data_watches) =
            app_session(0x100000772360001, 1_795_329_560_000, &["/nope", "/app"]);
        FourLetterView {
            last_zxid: 6,
            znode_count: 7,
            packets_received: 15,
            packets_sent: 14,
            outstanding_requests: 0,
            latency: Latency {
                min: 0,
                avg: 2.0,
                max: 7,
            },
            connection_count: 2,
            session_count: 1,
            ephemerals_count: 1,
            connections: vec![
                ConnectionInfo {
                    remote: addr("127.0.0.1:40868"),
                    queued: 0,
                    packets_received: 10,
                    packets_sent: 10,
                    last_activity_ms: 1_795_329_556_000,
                    session: Some(ConnSession {
                        core: ConnSessionReport {
                            session_id: 0x100000772360001,
                            timeout_ms: 10_000,
                            last_op: "EXIS",
                            established_ms: 1_795_329_548_768,
                            last_cxid: 9,
                            last_zxid: 6,
                            last_response_ms: 582_198,
                        },
                        last_latency_ms: 1,
                        min_latency_ms: 0,
                        avg_latency_ms: 1,
                        max_latency_ms: 7,
                    }),
                },
                ConnectionInfo {
                    remote: addr("127.0.0.1:40900"),
                    queued: 0,
                    packets_received: 1,
                    packets_sent: 0,
                    last_activity_ms: 1_795_329_556_500,
                    session: None,
                },
            ],
            sessions,
            data_watches,
            watch_count: 3,
            approximate_data_size: 62,
            uptime_ms: 94_403,
            conf: ConfInfo {
                client_port: 2181,
                secure_client_port: None,
                tick_time_ms: 2000,
                max_client_cnxns: 0,
                min_session_timeout_ms: 4000,
                max_session_timeout_ms: 40_000,
                max_frame_len: 0xFFFFF,
                ttl_enabled: true,
                zookeeper_version: crate::ZookeeperVersion::V3_9,
            },
            member: None,
            data_dir: None,
            ..FourLetterView::default()
        }
    }

    fn as_member(mode: MemberMode) -> FourLetterView {
        FourLetterView {
            member: Some(crate::engine::MemberFacts {
                id: 2,
                mode,
                observer: mode == MemberMode::Observer,
                quorum_size: 3,
                followers: 2,
                observers: 0,
                non_voting_followers: 0,
                membership: "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nversion=0"
                    .into(),
                limits: (10, 5),
                leader: Some((2, "127.0.0.1".into())),
            }),
            ..sample()
        }
    }

    #[test]
    fn ensemble_members_report_their_mode_as_zookeeper_does() {
        let leader = as_member(MemberMode::Leader);
        let text = srvr(&leader);
        assert!(
            text.contains("Mode: leader\nNode count: 8\nProposal sizes last/min/max: -1/-1/-1\n"),
            "{text}"
        );
        let m = mntr(&leader, &HostInfo::default());
        for line in [
            "zk_server_state\tleader\n",
            "zk_synced_followers\t2\n",
            "zk_learners\t2\n",
            "zk_pending_syncs\t0\n",
            "zk_quorum_size\t3\n",
            "zk_cnt_1_learner_handler_qp_size\t0\n",
            "zk_p999_1_learner_handler_qp_time_ms\t0\n",
        ] {
            assert!(m.contains(line), "{line:?} missing from {m}");
        }
        assert!(
            !m.contains("_2_learner_handler"),
            "its own id is no learner: {m}"
        );
        let follower = as_member(MemberMode::Follower);
        assert!(srvr(&follower).contains("Mode: follower\nNode count: 8\n"));
        let f = mntr(&follower, &HostInfo::default());
        assert!(!f.contains("zk_synced_followers"), "{f}");
        assert!(f.ends_with("zk_quorum_size\t3\nzk_peer_state\tfollowing - broadcast\n"));
        let ro = as_member(MemberMode::ReadOnly);
        assert!(srvr(&ro).starts_with(&format!(
            "Zookeeper version: {VERSION}\nREAD-ONLY mode; serving only read-only clients\n"
        )));
        assert!(stat(&ro).contains("READ-ONLY mode; serving only read-only clients\nClients:\n"));
        assert_eq!(
            (isro(&ro), isro(&leader), isro(&sample())),
            ("ro".into(), "rw".into(), "rw".into())
        );
        // ZooKeeper's read-only server registers no quorum gauges and prints no membership.
        let m = mntr(&ro, &HostInfo::default());
        assert!(
            m.contains("zk_server_state\tread-only\n") && !m.contains("zk_quorum_size"),
            "{m}"
        );
        assert!(conf(&ro).ends_with(
            "\nsyncLimit=5\nelectionAlg=3\nelectionPort=3889\nquorumPort=2889\npeerType=0\n"
        ));
        assert!(conf(&follower).ends_with("serverId=2\ninitLimit=10\nsyncLimit=5\nelectionAlg=3\nelectionPort=3889\nquorumPort=2889\npeerType=0\nmembership: \nserver.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nversion=0\n"));
        let observer = as_member(MemberMode::Observer);
        assert!(srvr(&observer).contains("Mode: observer\nNode count: 8\n"));
        let o = mntr(&observer, &HostInfo::default());
        assert!(o.contains("zk_server_state\tobserver\n"), "{o}");
        assert!(o.ends_with(
            "zk_quorum_size\t3\nzk_peer_state\tobserving - broadcast\nzk_observer_master_id\t2\n"
        ));
        assert!(conf(&observer).contains("\nquorumPort=2889\npeerType=1\nmembership: \n"));
        let looking = as_member(MemberMode::Looking);
        let h = HostInfo::default();
        use zkd_protocol::FourLetterWord as W;
        assert_eq!(
            super::super::render(W::Srvr, &looking, &h, 0),
            format!("{NOT_SERVING}\n")
        );
        assert_eq!(super::super::render(W::Isro, &looking, &h, 0), "null");
        assert_eq!(super::super::render(W::Ruok, &looking, &h, 0), "imok");
    }

    #[test]
    fn version_follows_the_chosen_release_line() {
        assert!(VERSION.starts_with("3.9.3-zkd-"));
        assert!(VERSION.ends_with(" UTC"));
        let digits: Vec<&str> = VERSION.split('-').next().unwrap_or("").split('.').collect();
        assert_eq!(digits, ["3", "9", "3"]);
        let mut view = sample();
        view.conf.zookeeper_version = crate::ZookeeperVersion::V3_8;
        assert!(srvr(&view).starts_with("Zookeeper version: 3.8.4-zkd-"));
        assert!(stat(&view).starts_with("Zookeeper version: 3.8.4-zkd-"));
        assert!(mntr(&view, &HostInfo::default()).contains("zk_version\t3.8.4-zkd-"));
        let envi_38 = envi(&HostInfo::default(), crate::ZookeeperVersion::V3_8);
        assert!(envi_38.contains("\nzookeeper.version=3.8.4-zkd-"));
        view.conf.zookeeper_version = crate::ZookeeperVersion::V3_9;
        assert!(srvr(&view).starts_with("Zookeeper version: 3.9.3-zkd-"));
    }

    #[test]
    fn simple_words() {
        let v = FourLetterView::default();
        let h = HostInfo::default();
        assert_eq!(render(W::Ruok, &v, &h, 306), "imok");
        assert_eq!(render(W::Isro, &v, &h, 306), "rw");
        assert_eq!(render(W::Gtmk, &v, &h, 306), "306");
        assert_eq!(render(W::Stmk, &v, &h, 42), "42");
        assert_eq!(render(W::Crst, &v, &h, 306), "Connection stats reset.\n");
        assert_eq!(render(W::Srst, &v, &h, 306), "Server stats reset.\n");
        assert_eq!(
            render(W::Dirs, &v, &h, 306),
            "datadir_size: 0\nlogdir_size: 0\n"
        );
        assert_eq!(render(W::Hash, &v, &h, 306), "");
        assert_eq!(
            not_whitelisted("ruok"),
            "ruok is not executed because it is not in the whitelist.\n"
        );
    }

    #[test]
    fn srvr_on_a_fresh_server() {
        let v = FourLetterView {
            znode_count: 4,
            packets_received: 2,
            packets_sent: 1,
            connection_count: 1,
            connections: vec![ConnectionInfo {
                remote: addr("127.0.0.1:1"),
                queued: 0,
                packets_received: 1,
                packets_sent: 0,
                last_activity_ms: 0,
                session: None,
            }],
            ..FourLetterView::default()
        };
        assert_eq!(
            srvr(&v),
            format!(
                "Zookeeper version: {VERSION}\nLatency min/avg/max: 0/0.0/0\nReceived: 2\n\
                 Sent: 1\nConnections: 1\nOutstanding: 0\nZxid: 0x0\nMode: standalone\n\
                 Node count: 5\n"
            )
        );
    }

    #[test]
    fn stat_lists_clients_briefly() {
        assert_eq!(
            stat(&sample()),
            format!(
                "Zookeeper version: {VERSION}\nClients:\n \
                 /127.0.0.1:40868[1](queued=0,recved=10,sent=10)\n \
                 /127.0.0.1:40900[0](queued=0,recved=1,sent=0)\n\n\
                 Latency min/avg/max: 0/2.0/7\nReceived: 15\nSent: 14\nConnections: 2\n\
                 Outstanding: 0\nZxid: 0x6\nMode: standalone\nNode count: 8\n"
            )
        );
    }

    #[test]
    fn cons_matches_the_sample() {
        assert_eq!(
            cons(&sample()),
            " /127.0.0.1:40868[1](queued=0,recved=10,sent=10,sid=0x100000772360001,lop=EXIS,\
             est=1795329548768,to=10000,lcxid=0x9,lzxid=0x6,lresp=582198,llat=1,minlat=0,\
             avglat=1,maxlat=7)\n /127.0.0.1:40900[0](queued=0,recved=1,sent=0)\n\n"
        );
    }

    #[test]
    fn cons_hides_a_negative_cxid_and_prints_negative_zxids_like_java() {
        let mut v = sample();
        v.connections.truncate(1);
        if let Some(x) = v.connections[0].session.as_mut() {
            x.core.last_cxid = -1;
            x.core.last_zxid = -1;
        }
        let out = cons(&v);
        assert!(!out.contains("lcxid"), "{out}");
        assert!(out.contains(",lzxid=0xffffffffffffffff,"), "{out}");
    }

    #[test]
    fn dump_matches_the_sample() {
        assert_eq!(
            dump(&sample()),
            "SessionTracker dump:\n\
             Session Sets (1)/(1):\n\
             1 expire at Sun Nov 22 06:39:20 UTC 2026:\n\
             \t0x100000772360001\n\
             ephemeral nodes dump:\n\
             Sessions with Ephemerals (1):\n\
             0x100000772360001:\n\
             \t/app/e\n\
             Connections dump:\n\
             Connections Sets (1)/(2):\n\
             2 expire at Sun Nov 22 06:39:30 UTC 2026:\n\
             \tip: /127.0.0.1:40868 sessionId: 0x100000772360001\n\
             \tip: /127.0.0.1:40900 sessionId: 0x0\n"
        );
    }

    #[test]
    fn dump_of_an_empty_server() {
        assert_eq!(
            dump(&FourLetterView::default()),
            "SessionTracker dump:\nSession Sets (0)/(0):\nephemeral nodes dump:\n\
             Sessions with Ephemerals (0):\nConnections dump:\nConnections Sets (0)/(0):\n"
        );
    }

    #[test]
    fn watch_reports() {
        let v = sample();
        assert_eq!(
            wchs(&v),
            "1 connections watching 2 paths\nTotal watches:2\n"
        );
        assert_eq!(wchc(&v), "0x100000772360001\n\t/app\n\t/nope\n\n");
        assert_eq!(
            wchp(&v),
            "/app\n\t0x100000772360001\n/nope\n\t0x100000772360001\n\n"
        );
        let empty = FourLetterView::default();
        assert_eq!(
            wchs(&empty),
            "0 connections watching 0 paths\nTotal watches:0\n"
        );
        assert_eq!(wchc(&empty), "\n");
        assert_eq!(wchp(&empty), "\n");
    }

    #[test]
    fn wchp_groups_sessions_by_path() {
        let mut v = sample();
        v.data_watches.push(ConnWatches {
            session_id: 0x2a,
            paths: vec!["/app".to_string()],
        });
        assert_eq!(
            wchs(&v),
            "2 connections watching 2 paths\nTotal watches:3\n"
        );
        assert_eq!(
            wchp(&v),
            "/app\n\t0x2a\n\t0x100000772360001\n/nope\n\t0x100000772360001\n\n"
        );
        assert_eq!(
            wchc(&v),
            "0x2a\n\t/app\n0x100000772360001\n\t/app\n\t/nope\n\n"
        );
    }

    #[test]
    fn conf_lists_the_settings() {
        assert_eq!(
            conf(&sample()),
            "clientPort=2181\nsecureClientPort=-1\ndataDir=(in-memory)\ndataDirSize=0\n\
             dataLogDir=(in-memory)\ndataLogSize=0\ntickTime=2000\nmaxClientCnxns=0\n\
             minSessionTimeout=4000\nmaxSessionTimeout=40000\nclientPortListenBacklog=-1\n\
             serverId=0\n"
        );
    }

    #[test]
    fn envi_has_the_java_keys_in_order() {
        let host = HostInfo {
            host_name: "box".into(),
            os_name: "Linux".into(),
            os_arch: "amd64".into(),
            os_version: "6.1.0".into(),
            user_name: "zk".into(),
            user_home: "/home/zk".into(),
            user_dir: "/srv".into(),
            tmp_dir: "/tmp".into(),
            process: ProcessUse {
                memory_used_mb: Some(12),
                memory_max_mb: Some(2048),
                open_fds: Some(20),
                max_fds: Some(1024),
            },
        };
        let out = envi(&host, crate::ZookeeperVersion::V3_9);
        let keys: Vec<&str> = out
            .lines()
            .skip(1)
            .map(|l| l.split_once('=').map_or(l, |(k, _)| k))
            .collect();
        assert_eq!(
            keys,
            [
                "zookeeper.version",
                "host.name",
                "java.version",
                "java.vendor",
                "java.home",
                "java.class.path",
                "java.library.path",
                "java.io.tmpdir",
                "java.compiler",
                "os.name",
                "os.arch",
                "os.version",
                "user.name",
                "user.home",
                "user.dir",
                "os.memory.free",
                "os.memory.max",
                "os.memory.total",
            ]
        );
        assert!(out.starts_with(&format!(
            "Environment:\nzookeeper.version={VERSION}\nhost.name=box\n"
        )));
        assert!(
            out.contains("\nos.memory.free=2036MB\nos.memory.max=2048MB\nos.memory.total=12MB\n")
        );
    }

    #[test]
    fn mntr_has_the_keys_tools_read() {
        let host = HostInfo::with_fds(20, 1024);
        let out = mntr(&sample(), &host);
        let map: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once('\t')).collect();
        assert_eq!(
            out.lines().count(),
            map.len(),
            "one tab per line, no duplicate keys"
        );
        let expect = [
            ("zk_version", VERSION),
            ("zk_server_state", "standalone"),
            ("zk_avg_latency", "2.0"),
            ("zk_max_latency", "7"),
            ("zk_min_latency", "0"),
            ("zk_packets_received", "15"),
            ("zk_packets_sent", "14"),
            ("zk_num_alive_connections", "2"),
            ("zk_outstanding_requests", "0"),
            ("zk_znode_count", "8"),
            ("zk_watch_count", "3"),
            ("zk_ephemerals_count", "1"),
            ("zk_approximate_data_size", "62"),
            ("zk_open_file_descriptor_count", "20"),
            ("zk_max_file_descriptor_count", "1024"),
            ("zk_global_sessions", "1"),
            ("zk_local_sessions", "0"),
            ("zk_uptime", "94403"),
        ];
        for (k, v) in expect {
            assert_eq!(map.get(k).copied(), Some(v), "{k}");
        }
        assert!(out.ends_with('\n'));
        // Every `monitor` metric, from the one list.
        let monitor = super::super::metrics::monitor(&sample(), &host);
        assert_eq!(map.len(), monitor.len());
        assert!(monitor.len() > 400, "{}", monitor.len());
        assert!(monitor
            .iter()
            .all(|(k, _)| map.contains_key(format!("zk_{k}").as_str())));
        assert!(!mntr(&sample(), &HostInfo::default()).contains("file_descriptor"));
    }

    #[test]
    fn dates_like_java() {
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_795_329_560_000), "Sun Nov 22 06:39:20 UTC 2026");
        assert_eq!(java_date(951_782_400_000), "Tue Feb 29 00:00:00 UTC 2000");
        assert_eq!(java_date(-1000), "Wed Dec 31 23:59:59 UTC 1969");
    }

    #[test]
    fn doubles_like_java() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(2.0), "2.0");
        assert_eq!(java_double(1.0 / 3.0 + 1.0), "1.3333333333333333");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(12_345_678.5), "1.23456785E7");
        assert_eq!(java_double(0.0001), "1.0E-4");
    }

    #[test]
    fn socket_addresses_like_java() {
        for (ours, java) in [
            ("127.0.0.1:40868", "/127.0.0.1:40868"),
            ("[::1]:50356", "/0:0:0:0:0:0:0:1:50356"),
            ("[::ffff:10.0.0.1]:7", "/10.0.0.1:7"),
            ("[fe80::1:2]:7", "/fe80:0:0:0:0:0:1:2:7"),
        ] {
            assert_eq!(java_socket_addr(&addr(ours)), java, "{ours}");
        }
    }
}
