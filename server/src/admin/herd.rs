//! `GET /zkd/herd`: the herd detector's record as JSON — top paths by fan-out with the watch
//! kinds that fired and that are held (child watches on the path as a parent, exists/data
//! watches on the path, on its children and on its siblings), the fan-out histogram, and the
//! herd events.

use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{AdminState, ApiResult};
use crate::core::herd::{HerdReport, FANOUT_BUCKETS};
use crate::core::report::PathWatchers;

#[derive(Deserialize)]
pub(super) struct Params {
    /// How many paths to list (default 20, at most 1000).
    top: Option<usize>,
}

pub(super) async fn herd(
    State(st): State<AdminState>,
    Query(p): Query<Params>,
) -> ApiResult<Json<Value>> {
    let top = p.top.unwrap_or(20).min(1000);
    let (report, watchers) = st.shared.inspect(|core, _| {
        let report = core.herd_report(top);
        let watchers: Vec<PathWatchers> = report
            .top_paths
            .iter()
            .map(|p| core.node_watchers(&p.path))
            .collect();
        (report, watchers)
    })?;
    Ok(Json(render(&report, &watchers)))
}

/// The record as JSON; `watchers[i]` are the watches currently held on `top_paths[i]`.
pub fn render(r: &HerdReport, watchers: &[PathWatchers]) -> Value {
    let histogram: Vec<Value> = r
        .fanout_histogram
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let le = FANOUT_BUCKETS
                .get(i)
                .map_or_else(|| json!("+Inf"), |b| json!(b));
            json!({ "le": le, "changes": n })
        })
        .collect();
    let top: Vec<Value> = r
        .top_paths
        .iter()
        .zip(watchers)
        .map(|(p, w)| {
            json!({
                "path": p.path,
                "changes": p.changes,
                "notifications": p.notifications,
                "max_fanout": p.max_fanout,
                "notifications_per_change": if p.changes == 0 { 0.0 } else { p.notifications as f64 / p.changes as f64 },
                "herd_events": p.herd_events,
                "fired": {
                    "child_watches": p.child_watch_notifications,
                    "data_watches": p.data_watch_notifications,
                    "persistent_watches": p.persistent_notifications,
                },
                "held": {
                    "child_watches": w.child,
                    "data_watches": w.data,
                    "persistent_watches": w.persistent,
                    "recursive_watches": w.recursive,
                    "data_watches_on_children": w.data_on_children,
                    "data_watches_on_siblings": w.data_on_siblings,
                },
            })
        })
        .collect();
    let events: Vec<Value> = r
        .recent_events
        .iter()
        .map(|e| {
            json!({
                "path": e.path,
                "event": e.event,
                "zxid": format!("0x{:x}", e.zxid),
                "at_ms": e.at_ms,
                "sessions_woken": e.woken,
                "reread_path": e.reread_path,
                "rereads": e.rereads,
                "window_open": e.open,
            })
        })
        .collect();
    json!({
        "warn_at": r.warn_at,
        "reread_window_ms": r.window_ms,
        "herd_events": r.herd_events,
        "changes_notified": r.changes_notified,
        "notifications": r.notifications,
        "fanout_histogram": histogram,
        "top_paths": top,
        "events": events,
    })
}
