//! `GET /metrics`: the Prometheus text exposition, encoded by the `prometheus-client` crate
//! from one copy of the core's summary and herd record (taken under the lock, O(1) plus the
//! bounded herd table) and the engine's latency distributions (atomics, no lock).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
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
use crate::reports::metrics::{Kind, Metric, FIGURES};
use crate::reports::{summary_figures, FourLetterView, Latency};

/// The content type of the exposition `prometheus-client` writes (OpenMetrics text, which
/// Prometheus scrapes natively).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) async fn metrics(State(st): State<AdminState>) -> ApiResult<Response> {
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
        persist: st.persist.as_ref().map(|p| p.stats()),
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
    /// The data directory's timings, when there is one.
    pub persist: Option<crate::engine::PersistStats>,
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

impl Snapshot {
    /// The read and update latency histograms.
    fn latencies(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
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
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let s = &self.summary;
        let e = &mut e;
        // The plain figures from their one list (the latency histograms before the last),
        // then the herd's.
        let mut view = FourLetterView::default();
        summary_figures(&mut view, s);
        let (min, avg, max) = self.requests.ms();
        view.latency = Latency { min, avg, max };
        view.slow_steps = self.slow_steps;
        for f in &FIGURES {
            if f.name == "zkd_slow_steps" {
                self.latencies(e)?;
            }
            match ((f.value)(&view, &self.host), f.kind) {
                (None, _) => {}
                (Some(Metric::Int(v)), Kind::Gauge) => gauge(e, f.name, f.help, v)?,
                (Some(Metric::Float(v)), Kind::Gauge) => gauge_f64(e, f.name, f.help, v)?,
                (Some(Metric::Int(v)), Kind::Counter) => {
                    counter(e, f.name, f.help, u64::try_from(v).unwrap_or(0))?
                }
                // No figure of the list is text or a fractional count.
                (Some(Metric::Text(_)), _) | (Some(Metric::Float(_)), Kind::Counter) => {}
            }
        }
        if let Some(p) = &self.persist {
            // As ZooKeeper's exporter names them: each log sync's time in ms (a `_sum` and
            // a `_count`, in one bucket) and the syncs over fsync.warningthresholdms.
            let f = &p.fsync_ms;
            histogram(
                e,
                "fsynctime",
                "Milliseconds each sync of the transaction log took.",
                f.sum as f64,
                f.count,
                &[(f64::INFINITY, f.count)],
            )?;
            counter(
                e,
                "fsync_threshold_exceed_count",
                "Syncs of the transaction log over fsync.warningthresholdms.",
                p.fsync_over_threshold,
            )?;
        }
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
