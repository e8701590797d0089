//! The web view at `GET /`: one embedded HTML page (no build step, no external assets) and the
//! small JSON endpoints it polls: `GET /zkd/overview` (counts, a page of sessions, the most
//! watched paths, the herd record), `GET /zkd/node` (one node with a page of its children) and
//! `GET /zkd/sessions/{id}/watches`. Each copies only what it shows under the core's lock
//! (a page of sessions, a page of children), never a whole table.

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::control::parse_session_id;
use super::{AdminState, ApiError, ApiResult};
use crate::core::report::{NodeReport, PathWatchers};
use crate::engine::now_ms;

/// The page, embedded in the binary.
const INDEX_HTML: &str = include_str!("web/index.html");

/// Most children one node request returns.
const MAX_PAGE: usize = 1000;
/// Sessions listed in the overview (the total is always given).
const SESSION_ROWS: usize = 200;

pub(super) async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX_HTML,
    )
        .into_response()
}

pub(super) async fn overview(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    let now = now_ms();
    let (summary, mut ids, watched, herd) = st.shared.inspect(|core, _| {
        (
            core.summary(now),
            core.session_ids(),
            core.most_watched_paths(20),
            core.herd_report(10),
        )
    })?;
    // Only the first rows are reported on; the ids are ordered outside the lock.
    let total = ids.len();
    ids.sort_unstable();
    ids.truncate(SESSION_ROWS);
    let at = st.shared.now();
    let sessions = st
        .shared
        .inspect(|core, _| core.sessions_report_for(&ids, at))?;
    let herd_watchers: Vec<PathWatchers> = Vec::new();
    let mut herd_json = super::herd::render(&herd, &herd_watchers);
    if let Some(top) = herd_json.get_mut("top_paths") {
        // No held-watch counts here: the herd panel shows what fired.
        *top = Value::Array(
            herd.top_paths
                .iter()
                .map(|p| {
                    json!({
                        "path": p.path,
                        "max_fanout": p.max_fanout,
                        "notifications": p.notifications,
                        "changes": p.changes,
                        "herd_events": p.herd_events,
                    })
                })
                .collect(),
        );
    }
    Ok(Json(json!({
        "summary": {
            "znode_count": summary.znode_count,
            "session_count": summary.session_count,
            "connection_count": summary.connection_count,
            "watch_count": summary.watch_count,
            "watched_paths": summary.watched_paths,
            "ephemeral_count": summary.ephemeral_count,
            "last_zxid": format!("0x{:x}", summary.last_zxid),
            "notifications_sent": summary.notifications_sent,
            "herd_events": summary.herd_events,
            "uptime_ms": summary.uptime_ms,
        },
        "sessions_total": total,
        "sessions": sessions.iter().map(|s| json!({
            "id": session_hex(s.id),
            "peer": s.peer.map(|r| r.to_string()),
            "timeout_ms": s.timeout_ms,
            "ephemerals": s.ephemerals,
            "watched_paths": s.watched_paths,
        })).collect::<Vec<_>>(),
        "watched": watched.iter().map(|w| json!({
            "path": w.path,
            "data": w.data,
            "child": w.child,
            "persistent": w.persistent,
            "recursive": w.recursive,
        })).collect::<Vec<_>>(),
        "herd": herd_json,
    })))
}

#[derive(Deserialize)]
pub(super) struct NodeParams {
    path: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

pub(super) async fn node(
    State(st): State<AdminState>,
    Query(p): Query<NodeParams>,
) -> ApiResult<Json<Value>> {
    let path = p.path.unwrap_or_else(|| "/".to_string());
    if !crate::core::path::is_valid(&path) {
        return Err(ApiError::bad_request(format!(
            "{path:?} is not a valid znode path"
        )));
    }
    let limit = p.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let after = p.after.filter(|a| !a.is_empty());
    let report = st
        .shared
        .inspect(|core, _| core.node_report(&path, after.as_deref(), limit))?;
    match report {
        Some(r) => Ok(Json(node_json(&r))),
        None => Err(ApiError::not_found(format!("no node at {path}"))),
    }
}

/// A session id as ZooKeeper prints it: `0x` and lower-case hex of the 64-bit value.
fn session_hex(id: i64) -> String {
    format!("0x{id:x}")
}

/// One node as the page shows it.
pub fn node_json(r: &NodeReport) -> Value {
    let s = &r.stat;
    let data = r.data.as_ref().map(|d| {
        json!({
            "base64": base64::engine::general_purpose::STANDARD.encode(d),
            "text": std::str::from_utf8(d).ok(),
            "length": d.len(),
        })
    });
    json!({
        "path": r.path,
        "stat": {
            "czxid": format!("0x{:x}", s.czxid),
            "mzxid": format!("0x{:x}", s.mzxid),
            "pzxid": format!("0x{:x}", s.pzxid),
            "ctime": s.ctime,
            "mtime": s.mtime,
            "version": s.version,
            "cversion": s.cversion,
            "aversion": s.aversion,
            "ephemeralOwner": if s.ephemeral_owner == 0 { Value::Null } else { json!(session_hex(s.ephemeral_owner)) },
            "dataLength": s.data_length,
            "numChildren": s.num_children,
        },
        "data": data,
        "data_withheld": r.data_withheld,
        "acl": r.acl.iter().map(|a| json!({
            "perms": a.perms,
            "scheme": a.id.scheme,
            "id": a.id.id,
        })).collect::<Vec<_>>(),
        "children": r.children,
        "more": r.more,
        "watchers": {
            "data": r.watchers.data,
            "child": r.watchers.child,
            "persistent": r.watchers.persistent,
            "recursive": r.watchers.recursive,
            "data_on_children": r.watchers.data_on_children,
            "data_on_siblings": r.watchers.data_on_siblings,
        },
    })
}

pub(super) async fn session_watches(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let sid = parse_session_id(&id)?;
    let watches = st.shared.inspect(|core, _| core.session_watches(sid))?;
    Ok(Json(json!({
        "session": session_hex(sid),
        "watches": watches.iter().map(|w| json!({ "path": w.path, "kinds": w.kinds })).collect::<Vec<_>>(),
    })))
}
