//! The ZooKeeper `monitor` metrics zkd has a counterpart for, computed from a
//! [`FourLetterView`]: counts of connections, sessions, authentication and watch events, the
//! sizes of requests and replies, and the read and update latency summaries. The AdminServer's
//! `monitor` command and `mntr` over the client port both print [`monitor`]: every metric
//! ZooKeeper 3.8 reports, those zkd has no counterpart for as 0 (see `monitor_keys`).

use std::collections::HashMap;

use super::monitor_keys::{ADDED_IN_3_9, ZERO_AVERAGES, ZERO_COUNTS};
use super::{FourLetterView, HostInfo};
use crate::core::Series;
use crate::engine::ensemble::MemberMode;
use crate::engine::latency::LatencySnapshot;
use crate::VersionString;

/// One metric's value as ZooKeeper types it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    Int(i64),
    Float(f64),
    Text(&'static str),
}

impl std::fmt::Display for Metric {
    /// As `mntr` prints it: a Java long, or a Java double.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Metric::Int(i) => write!(f, "{i}"),
            Metric::Float(v) => f.write_str(&super::java_double(v)),
            Metric::Text(t) => f.write_str(t),
        }
    }
}

fn int(v: u64) -> Metric {
    Metric::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

/// The fields of a ZooKeeper summary metric `name`: `cnt_`, `sum_`, `min_`, `max_` and `avg_`.
fn summary(out: &mut Vec<(String, Metric)>, name: &str, s: &Series) {
    out.push((format!("cnt_{name}"), int(s.count)));
    out.push((format!("sum_{name}"), int(s.sum)));
    out.push((format!("min_{name}"), int(s.min)));
    out.push((format!("max_{name}"), int(s.max)));
    out.push((format!("avg_{name}"), Metric::Float(s.avg())));
}

/// A latency summary in ms, as ZooKeeper reports `readlatency` and `updatelatency`: whole
/// ms for the count fields, the average with its fraction, and the percentiles as the upper
/// bound of the histogram bucket that holds them (the last, unbounded bucket reports the
/// greatest value).
fn latency(out: &mut Vec<(String, Metric)>, name: &str, l: &LatencySnapshot) {
    let ms = |us: u64| int(us / 1000);
    out.push((format!("cnt_{name}"), int(l.count)));
    out.push((format!("sum_{name}"), int((l.sum_seconds * 1000.0) as u64)));
    out.push((format!("min_{name}"), ms(l.min_us)));
    out.push((format!("max_{name}"), ms(l.max_us)));
    let avg = if l.count == 0 {
        0.0
    } else {
        l.sum_seconds * 1000.0 / l.count as f64
    };
    out.push((format!("avg_{name}"), Metric::Float(avg)));
    for (label, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)] {
        out.push((format!("{label}_{name}"), ms(percentile_us(l, q))));
    }
}

/// The upper bound (µs) of the bucket holding quantile `q`; 0 with no values.
fn percentile_us(l: &LatencySnapshot, q: f64) -> u64 {
    if l.count == 0 {
        return 0;
    }
    let rank = (q * l.count as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for &(bound, n) in &l.buckets {
        seen += n;
        if seen >= rank {
            return if bound.is_finite() {
                (bound * 1e6).round() as u64
            } else {
                l.max_us
            };
        }
    }
    l.max_us
}

/// ZooKeeper's names of the watch summaries, by event type (NodeCreated first).
const WATCH_SUMMARIES: [&str; 4] = [
    "node_created_watch_count",
    "node_deleted_watch_count",
    "node_changed_watch_count",
    "node_children_watch_count",
];

/// Every metric zkd fills, by ZooKeeper's name (without the `zk_` prefix of `mntr`).
pub fn filled(view: &FourLetterView) -> Vec<(String, Metric)> {
    let c = &view.counters;
    let size = |v: Option<u64>| v.map_or(Metric::Int(-1), int);
    let seen = c.last_response_size.is_some();
    let mut out: Vec<(String, Metric)> = vec![
        ("auth_failed_count".into(), int(c.auth_failed)),
        (
            "connection_request_count".into(),
            int(c.connection_requests),
        ),
        ("connection_rejected".into(), int(c.connections_rejected)),
        ("connection_revalidate_count".into(), int(c.revalidations)),
        ("stale_sessions_expired".into(), int(c.sessions_expired)),
        ("bytes_received_count".into(), int(c.bytes_received)),
        (
            "last_client_response_size".into(),
            size(c.last_response_size),
        ),
        (
            "min_client_response_size".into(),
            size(seen.then_some(c.response_sizes.min)),
        ),
        (
            "max_client_response_size".into(),
            size(seen.then_some(c.response_sizes.max)),
        ),
    ];
    for (name, s) in WATCH_SUMMARIES.iter().zip(&c.watchers_fired) {
        summary(&mut out, name, s);
    }
    if let Some(d) = &view.data_dir {
        summary(&mut out, "dbinittime", &d.stats.db_init_ms);
        summary(&mut out, "startup_txns_loaded", &d.stats.txns_loaded);
        summary(&mut out, "snapshottime", &d.stats.snapshot_ms);
        summary(&mut out, "fsynctime", &d.stats.fsync_ms);
    }
    latency(&mut out, "readlatency", &view.read_latency);
    latency(&mut out, "updatelatency", &view.update_latency);
    // zkd's own: the `zkd_` prefix keeps it apart from ZooKeeper's keys.
    if let Some(v) = figure("zkd_slow_steps", view, &HostInfo::default()) {
        out.push(("zkd_slow_steps".into(), v));
    }
    out
}

/// How Prometheus' exposition (`GET /metrics`) types a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// A server-wide figure of `GET /metrics` (shown in [`FIGURES`]' order, with `help` and
/// `kind`), which `monitor`/`mntr` takes from there when it shows it too (under the same
/// name, where ZooKeeper places it).
pub struct Figure {
    pub name: &'static str,
    /// Read by `/metrics` only (the admin feature).
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub kind: Kind,
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub help: &'static str,
    /// Its value; `None` when the host does not report it (the descriptor counts).
    pub value: fn(&FourLetterView, &HostInfo) -> Option<Metric>,
}

/// The figures `GET /metrics` shows as plain values; the one list of them (all but
/// `last_zxid` are `monitor`'s too).
pub const FIGURES: [Figure; 17] = [
    Figure {
        name: "znode_count",
        kind: Kind::Gauge,
        help: "Znodes in the tree.",
        value: |v, _| Some(int(v.znode_count + 1)),
    },
    Figure {
        name: "watch_count",
        kind: Kind::Gauge,
        help: "Watches registered.",
        value: |v, _| Some(int(v.watch_count)),
    },
    Figure {
        name: "ephemerals_count",
        kind: Kind::Gauge,
        help: "Ephemeral znodes.",
        value: |v, _| Some(int(v.ephemerals_count)),
    },
    Figure {
        name: "approximate_data_size",
        kind: Kind::Gauge,
        help: "Approximate bytes of data and paths held.",
        value: |v, _| Some(int(v.approximate_data_size)),
    },
    Figure {
        name: "num_alive_connections",
        kind: Kind::Gauge,
        help: "Open client connections.",
        value: |v, _| Some(int(v.connection_count)),
    },
    Figure {
        name: "global_sessions",
        kind: Kind::Gauge,
        help: "Live sessions.",
        value: |v, _| Some(int(v.session_count)),
    },
    Figure {
        name: "outstanding_requests",
        kind: Kind::Gauge,
        help: "Requests received and not answered yet.",
        value: |v, _| Some(int(v.outstanding_requests)),
    },
    Figure {
        name: "uptime",
        kind: Kind::Gauge,
        help: "Milliseconds since the server started.",
        value: |v, _| Some(Metric::Int(v.uptime_ms)),
    },
    Figure {
        name: "last_zxid",
        kind: Kind::Gauge,
        help: "The last zxid applied.",
        value: |v, _| Some(Metric::Int(v.last_zxid)),
    },
    Figure {
        name: "min_latency",
        kind: Kind::Gauge,
        help: "Smallest request latency (arrival to reply) since start or srst, in ms.",
        value: |v, _| Some(Metric::Int(v.latency.min)),
    },
    Figure {
        name: "avg_latency",
        kind: Kind::Gauge,
        help: "Average request latency (arrival to reply) since start or srst, in ms.",
        value: |v, _| Some(Metric::Float(v.latency.avg)),
    },
    Figure {
        name: "max_latency",
        kind: Kind::Gauge,
        help: "Largest request latency (arrival to reply) since start or srst, in ms.",
        value: |v, _| Some(Metric::Int(v.latency.max)),
    },
    Figure {
        name: "open_file_descriptor_count",
        kind: Kind::Gauge,
        help: "Open file descriptors.",
        value: |_, h| h.process.open_fds.map(int),
    },
    Figure {
        name: "max_file_descriptor_count",
        kind: Kind::Gauge,
        help: "File descriptor limit.",
        value: |_, h| h.process.max_fds.map(int),
    },
    Figure {
        name: "packets_received",
        kind: Kind::Counter,
        help: "Frames received from clients.",
        value: |v, _| Some(int(v.packets_received)),
    },
    Figure {
        name: "packets_sent",
        kind: Kind::Counter,
        help: "Frames sent to clients.",
        value: |v, _| Some(int(v.packets_sent)),
    },
    Figure {
        name: "zkd_slow_steps",
        kind: Kind::Counter,
        help: "Steps that held the core's lock longer than --slow-step-warn-ms.",
        value: |v, _| Some(int(v.slow_steps)),
    },
];

/// The value of the figure `name` of [`FIGURES`].
fn figure(name: &str, view: &FourLetterView, host: &HostInfo) -> Option<Metric> {
    FIGURES
        .iter()
        .find(|f| f.name == name)
        .and_then(|f| (f.value)(view, host))
}

/// Every metric of ZooKeeper 3.8's `monitor` command (and `mntr`), in the order ZooKeeper
/// prints them: the server's own values first, then the registered counters and the summaries
/// field by field (`avg_`, `min_`, `max_`, `cnt_`, `sum_`, then any percentiles), then what an
/// ensemble member adds. The file descriptor counts appear when the host reports them.
pub fn monitor(view: &FourLetterView, host: &HostInfo) -> Vec<(String, Metric)> {
    // `None`: a counted metric of [`filled`] (0 until counted), placed where ZooKeeper shows it.
    let fig = |name| figure(name, view, host);
    let own: [(&str, Option<Metric>); 26] = [
        (
            "version",
            Some(Metric::Text(view.conf.zookeeper_version.version_string())),
        ),
        (
            "server_state",
            Some(Metric::Text(super::server_state(view))),
        ),
        ("ephemerals_count", fig("ephemerals_count")),
        ("num_alive_connections", fig("num_alive_connections")),
        ("avg_latency", fig("avg_latency")),
        ("outstanding_requests", fig("outstanding_requests")),
        ("znode_count", fig("znode_count")),
        ("global_sessions", fig("global_sessions")),
        ("non_mtls_remote_conn_count", None),
        ("last_client_response_size", None),
        ("packets_sent", fig("packets_sent")),
        ("packets_received", fig("packets_received")),
        ("max_client_response_size", None),
        ("connection_drop_probability", Some(Metric::Float(0.0))),
        ("watch_count", fig("watch_count")),
        ("auth_failed_count", None),
        ("min_latency", fig("min_latency")),
        (
            "max_file_descriptor_count",
            fig("max_file_descriptor_count"),
        ),
        ("approximate_data_size", fig("approximate_data_size")),
        (
            "open_file_descriptor_count",
            fig("open_file_descriptor_count"),
        ),
        ("local_sessions", Some(Metric::Int(0))),
        ("uptime", fig("uptime")),
        ("max_latency", fig("max_latency")),
        ("outstanding_tls_handshake", None),
        ("min_client_response_size", None),
        ("non_mtls_local_conn_count", None),
    ];
    let counted = filled(view);
    let filled: HashMap<String, Metric> = counted.iter().cloned().collect();
    let mut out: Vec<(String, Metric)> = Vec::with_capacity(own.len() + ZERO_COUNTS.len() + 80);
    let mut seen = std::collections::HashSet::new();
    let mut push = |out: &mut Vec<(String, Metric)>, name: &str, default: Metric| {
        if seen.insert(name.to_string()) {
            let v = filled.get(name).copied().unwrap_or(default);
            out.push((name.to_string(), v));
        }
    };
    for (name, value) in own {
        let fd = name.ends_with("_file_descriptor_count");
        match value {
            Some(v) => push(&mut out, name, v),
            None if !fd => push(&mut out, name, Metric::Int(0)),
            // The host does not report it: ZooKeeper leaves it out too.
            None => {}
        }
    }
    for name in ZERO_COUNTS {
        if let Some(base) = name.strip_prefix("min_") {
            let avg = format!("avg_{base}");
            if ZERO_AVERAGES.contains(&avg.as_str()) {
                push(&mut out, &avg, Metric::Float(0.0));
            }
        }
        push(&mut out, name, Metric::Int(0));
    }
    for name in ZERO_AVERAGES {
        push(&mut out, name, Metric::Float(0.0));
    }
    if view.conf.zookeeper_version == crate::ZookeeperVersion::V3_9 {
        for (name, average) in ADDED_IN_3_9 {
            let zero = if average {
                Metric::Float(0.0)
            } else {
                Metric::Int(0)
            };
            push(&mut out, name, zero);
        }
    }
    for (name, v) in &counted {
        push(&mut out, name, *v);
    }
    if let Some(m) = &view.member {
        member(&mut out, view, m);
    }
    out
}

/// The gauges ZooKeeper registers for an ensemble member: the quorum size (voting members)
/// and peer state, on the leader its learners (followers and observers), proposal sizes and
/// per-learner queue summaries, on an observer the member it observes through. A read-only
/// member runs ZooKeeper's plain server, which registers none of them.
fn member(out: &mut Vec<(String, Metric)>, view: &FourLetterView, m: &crate::engine::MemberFacts) {
    if m.mode == MemberMode::ReadOnly {
        return;
    }
    out.push(("quorum_size".into(), int(m.quorum_size)));
    match m.mode {
        MemberMode::Leader => {
            out.extend([
                ("peer_state".into(), Metric::Text("leading - broadcast")),
                ("learners".into(), int(m.followers + m.observers)),
                ("synced_followers".into(), int(m.followers)),
                (
                    "synced_non_voting_followers".into(),
                    int(m.non_voting_followers),
                ),
                ("synced_observers".into(), int(m.observers)),
                ("pending_syncs".into(), Metric::Int(0)),
                ("leader_uptime".into(), Metric::Int(view.uptime_ms)),
                ("last_proposal_size".into(), Metric::Int(-1)),
                ("min_proposal_size".into(), Metric::Int(-1)),
                ("max_proposal_size".into(), Metric::Int(-1)),
            ]);
            // Each learner handler queue (followers and observers): no queue here, so empty
            // summaries.
            for id in m.learner_ids() {
                let size = format!("{id}_learner_handler_qp_size");
                let time = format!("{id}_learner_handler_qp_time_ms");
                summary(out, &size, &Series::default());
                summary(out, &time, &Series::default());
                for p in ["p50", "p95", "p99", "p999"] {
                    out.push((format!("{p}_{time}"), Metric::Int(0)));
                }
            }
        }
        MemberMode::Follower => {
            out.push(("peer_state".into(), Metric::Text("following - broadcast")));
        }
        MemberMode::Observer => {
            out.push(("peer_state".into(), Metric::Text("observing - broadcast")));
            // The member it observes through: the leader (no observer master here).
            if let Some((l, _)) = m.leader {
                out.push(("observer_master_id".into(), int(l)));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_takes_the_shared_figures_from_their_list() {
        let view = FourLetterView {
            znode_count: 3,
            watch_count: 8,
            packets_sent: 5,
            slow_steps: 2,
            uptime_ms: 700,
            ..FourLetterView::default()
        };
        let host = HostInfo::with_fds(11, 1024);
        let shown: HashMap<String, Metric> = monitor(&view, &host).into_iter().collect();
        for f in &FIGURES {
            let expected = (f.name != "last_zxid").then(|| (f.value)(&view, &host));
            assert_eq!(shown.get(f.name).copied().map(Some), expected, "{}", f.name);
        }
        assert_eq!(shown.get("znode_count"), Some(&Metric::Int(4)));
    }

    #[test]
    fn percentiles_come_from_the_buckets() {
        let l = LatencySnapshot {
            buckets: vec![(0.001, 90), (0.01, 9), (f64::INFINITY, 1)],
            count: 100,
            sum_seconds: 0.5,
            min_us: 200,
            max_us: 42_000,
        };
        assert_eq!(percentile_us(&l, 0.5), 1000);
        assert_eq!(percentile_us(&l, 0.95), 10_000);
        assert_eq!(percentile_us(&l, 0.999), 42_000);
        let mut out = Vec::new();
        latency(&mut out, "readlatency", &l);
        let get = |k: &str| out.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        assert_eq!(get("avg_readlatency"), Some(Metric::Float(5.0)));
        assert_eq!(get("max_readlatency"), Some(Metric::Int(42)));
        assert_eq!(get("p99_readlatency"), Some(Metric::Int(10)));
    }
}
