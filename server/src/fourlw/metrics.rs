//! The ZooKeeper `monitor` metrics zkd has a counterpart for, computed from a
//! [`FourLetterView`]: counts of connections, sessions, authentication and watch events, the
//! sizes of requests and replies, and the read and update latency summaries. The AdminServer's
//! `monitor` command reports every other metric ZooKeeper 3.8 registers as 0 (see the admin
//! module's list); `mntr` over the client port prints these among its lines.

use super::FourLetterView;
use crate::core::Series;
use crate::net::latency::LatencySnapshot;

/// One metric's value as ZooKeeper types it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    Int(i64),
    Float(f64),
}

impl std::fmt::Display for Metric {
    /// As `mntr` prints it: a Java long, or a Java double.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Metric::Int(i) => write!(f, "{i}"),
            Metric::Float(v) => f.write_str(&super::java_double(v)),
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
    }
    latency(&mut out, "readlatency", &view.read_latency);
    latency(&mut out, "updatelatency", &view.update_latency);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
