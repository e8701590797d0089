//! `GET /metrics`: the Prometheus text exposition, encoded by the `prometheus-client` crate
//! from one copy of the core's summary and herd record (taken under the lock, O(1) plus the
//! bounded herd table) and the engine's latency distributions (atomics, no lock).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{AdminState, ApiError, ApiResult};
use crate::core::herd::{HerdReport, FANOUT_BUCKETS};
use crate::core::report::Summary;
use crate::engine::latency::{AvgMinMax, LatencySnapshot};
use crate::engine::now_ms;

pub(crate) fn routes() -> Router<AdminState> {
    Router::new().route("/metrics", get(metrics))
}

/// The content type of the exposition `prometheus-client` writes (OpenMetrics text, which
/// Prometheus scrapes natively).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

async fn metrics(State(st): State<AdminState>) -> ApiResult<Response> {
    let now = now_ms();
    let (summary, herd) = st
        .shared
        .inspect(|core, _| (core.summary(now), core.herd_report(0)))?;
    let snap = Snapshot {
        summary,
        herd,
        read: st.shared.latencies.read.snapshot(),
        update: st.shared.latencies.update.snapshot(),
        requests: st.shared.latencies.requests(),
        slow_steps: st.shared.slow.count(),
        host: crate::reports::host_info(),
    };
    let text = encode(snap).map_err(|_| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics",
        )
    })?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

/// Everything one scrape shows.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub summary: Summary,
    pub herd: HerdReport,
    pub read: LatencySnapshot,
    pub update: LatencySnapshot,
    /// Arrival-to-reply latency of every request (`min/avg/max_latency`).
    pub requests: AvgMinMax,
    /// Steps that held the core's lock over the slow-step threshold.
    pub slow_steps: u64,
    /// The process's descriptors (`open_fds`, `max_fds`).
    pub host: crate::reports::HostInfo,
}

/// The exposition text of one scrape.
pub fn encode(snap: Snapshot) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snap));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    let m = ConstGauge::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn gauge_f64(e: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    let m = ConstGauge::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let m = ConstCounter::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    sum: f64,
    count: u64,
    buckets: &[(f64, u64)],
) -> std::fmt::Result {
    e.encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<NoLabelSet>(sum, count, buckets, None)
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.summary;
        let e = &mut e;
        gauge(
            e,
            "znode_count",
            "Znodes in the tree.",
            signed(s.znode_count + 1),
        )?;
        gauge(
            e,
            "watch_count",
            "Watches registered.",
            signed(s.watch_count),
        )?;
        gauge(
            e,
            "ephemerals_count",
            "Ephemeral znodes.",
            signed(s.ephemeral_count),
        )?;
        gauge(
            e,
            "approximate_data_size",
            "Approximate bytes of data and paths held.",
            signed(s.approximate_data_size),
        )?;
        gauge(
            e,
            "num_alive_connections",
            "Open client connections.",
            signed(s.connection_count),
        )?;
        gauge(
            e,
            "global_sessions",
            "Live sessions.",
            signed(s.session_count),
        )?;
        gauge(
            e,
            "outstanding_requests",
            "Requests received and not answered yet.",
            0,
        )?;
        gauge(
            e,
            "uptime",
            "Milliseconds since the server started.",
            s.uptime_ms,
        )?;
        gauge(e, "last_zxid", "The last zxid applied.", s.last_zxid)?;
        let (min, avg, max) = self.requests.ms();
        let what = "request latency (arrival to reply) since start or srst, in ms.";
        gauge(e, "min_latency", &format!("Smallest {what}"), min)?;
        gauge_f64(e, "avg_latency", &format!("Average {what}"), avg)?;
        gauge(e, "max_latency", &format!("Largest {what}"), max)?;
        if let Some(n) = self.host.open_fds {
            gauge(
                e,
                "open_file_descriptor_count",
                "Open file descriptors.",
                signed(n),
            )?;
        }
        if let Some(n) = self.host.max_fds {
            gauge(
                e,
                "max_file_descriptor_count",
                "File descriptor limit.",
                signed(n),
            )?;
        }
        counter(
            e,
            "packets_received",
            "Frames received from clients.",
            s.packets_received,
        )?;
        counter(e, "packets_sent", "Frames sent to clients.", s.packets_sent)?;
        for (name, what, l) in [
            ("readlatency", "read", &self.read),
            ("updatelatency", "update", &self.update),
        ] {
            histogram(
                e,
                name,
                &format!("Seconds the server spent on each {what} request."),
                l.sum_seconds,
                l.count,
                &l.buckets,
            )?;
        }
        counter(
            e,
            "zkd_slow_steps",
            "Steps that held the core's lock longer than --slow-step-warn-ms.",
            self.slow_steps,
        )?;
        let h = &self.herd;
        counter(
            e,
            "zkd_notifications_sent",
            "Watch notifications sent to clients.",
            h.notifications,
        )?;
        counter(
            e,
            "zkd_herd_warnings",
            "Changes that notified at least --herd-warn watchers.",
            h.herd_events,
        )?;
        let buckets: Vec<(f64, u64)> = h
            .fanout_histogram
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let bound = FANOUT_BUCKETS.get(i).map_or(f64::INFINITY, |&b| b as f64);
                (bound, n)
            })
            .collect();
        histogram(
            e,
            "zkd_watchers_notified_per_change",
            "Watchers one change notified (changes that notified none are not counted).",
            h.notifications as f64,
            h.changes_notified,
            &buckets,
        )?;
        Ok(())
    }
}
