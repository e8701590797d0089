//! `GET /zkd/history`: the server's history as JSON Lines, filtered by session, path prefix,
//! kinds, session-clock time, zxid range and seq, at most 10 000 events per answer
//! (docs/history.md); `?format=json` answers the ring's summary instead. Beside it, what the
//! recipe checks find in the history (`GET /zkd/history/checks`), the timeline page with the
//! events embedded, to save (`GET /zkd/history/timeline`), and the live timeline page
//! (`GET /timeline`), which reads `/zkd/history` itself.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::control::{either, only, parse_session_id};
use super::{json_body, off_runtime, outgoing, AdminState, ApiError, ApiResult};
use crate::engine::history::{HistoryFilter, MAX_READ};
use crate::reports::recipe_checks::Finding;
use crate::reports::timeline::{self, Window};

const PARAMS: &[&str] = &[
    "session",
    "path",
    "kinds",
    "since_ms",
    "until_ms",
    "from_zxid",
    "to_zxid",
    "after_seq",
    "limit",
    "format",
];

/// A whole number named `name`.
fn number<T: std::str::FromStr>(name: &str, text: &str) -> ApiResult<T> {
    text.trim()
        .parse()
        .map_err(|_| ApiError::bad_request(format!("{name}={text:?} is not a whole number")))
}

/// A zxid in hex (`0x1f`, as the history writes them) or decimal.
fn zxid(name: &str, text: &str) -> ApiResult<i64> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok().map(|v| v as i64),
        None => t.parse::<i64>().ok(),
    };
    parsed.ok_or_else(|| {
        ApiError::bad_request(format!(
            "{name}={text:?} is not a zxid (hexadecimal with 0x, or decimal)"
        ))
    })
}

/// The filter a query asks for.
fn filter_of(q: &HashMap<String, String>) -> ApiResult<HistoryFilter> {
    let mut f = HistoryFilter::default();
    if let Some(s) = q.get("session") {
        f.session = Some(parse_session_id(s)?);
    }
    f.path = q.get("path").cloned();
    if let Some(k) = q.get("kinds") {
        f.kinds = Some(
            k.split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect(),
        );
    }
    if let Some(t) = q.get("since_ms") {
        f.since_ms = Some(number("since_ms", t)?);
    }
    if let Some(t) = q.get("until_ms") {
        f.until_ms = Some(number("until_ms", t)?);
    }
    if let Some(t) = q.get("from_zxid") {
        f.from_zxid = Some(zxid("from_zxid", t)?);
    }
    if let Some(t) = q.get("to_zxid") {
        f.to_zxid = Some(zxid("to_zxid", t)?);
    }
    if let Some(t) = q.get("after_seq") {
        f.after_seq = Some(number("after_seq", t)?);
    }
    if let Some(t) = q.get("limit") {
        let n: usize = number("limit", t)?;
        if n == 0 || n > MAX_READ {
            return Err(ApiError::bad_request(format!(
                "limit={n}: give 1 to {MAX_READ} (page on with after_seq)"
            )));
        }
        f.limit = Some(n);
    }
    Ok(f)
}

/// `GET /zkd/history`.
pub(super) async fn history(
    State(st): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    only(&q, PARAMS)?;
    let summary_only = either(
        &q,
        "format",
        ("jsonl", "json"),
        "jsonl (the events, the default) or json (a summary)",
    )?;
    let mut filter = filter_of(&q)?;
    if summary_only {
        filter.limit = Some(0);
    }
    let shared = st.shared.clone();
    off_runtime(move || {
        let (events, s) = shared.history(&filter)?;
        if summary_only {
            return json_body(&json!({
                "enabled": s.enabled,
                "events": s.events,
                "bytes": s.bytes,
                "dropped": s.dropped,
                "first_seq": s.seqs.map(|r| r.0),
                "last_seq": s.seqs.map(|r| r.1),
                "max_events": s.max_events,
                "max_bytes": s.max_bytes,
            }));
        }
        let body = crate::to_json_lines(&events).into_bytes();
        let body = outgoing::counted_whole(body)
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
        Ok((
            [
                (
                    axum::http::header::CONTENT_TYPE,
                    "application/x-ndjson".to_string(),
                ),
                (
                    axum::http::header::HeaderName::from_static("x-zkd-history-dropped"),
                    s.dropped.to_string(),
                ),
            ],
            body,
        )
            .into_response())
    })
    .await
}

/// The `after_seq` a checks or timeline query names (0: everything the ring holds).
fn after_seq_of(q: &HashMap<String, String>) -> ApiResult<u64> {
    only(q, &["after_seq"])?;
    q.get("after_seq").map_or(Ok(0), |t| number("after_seq", t))
}

fn findings_json(found: &[Finding]) -> serde_json::Value {
    serde_json::Value::Array(found.iter().map(Finding::to_json).collect())
}

/// Reads the window a checks or timeline query names, off the runtime, and answers what
/// `answer` makes of it.
async fn from_window(
    st: AdminState,
    q: HashMap<String, String>,
    answer: impl FnOnce(Window) -> ApiResult<Response> + Send + 'static,
) -> ApiResult<Response> {
    let after = after_seq_of(&q)?;
    let shared = st.shared.clone();
    off_runtime(move || answer(Window::read(&shared, after)?)).await
}

/// `GET /zkd/history/checks`: what the recipe checks find in the events after `after_seq`.
pub(super) async fn checks(
    State(st): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    from_window(st, q, |w| json_body(&findings_json(&w.findings()))).await
}

/// `GET /zkd/history/timeline`: the timeline page with the events after `after_seq` and
/// the checks' findings embedded, to save and open from a file.
pub(super) async fn timeline(
    State(st): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    from_window(st, q, |w| {
        let page = w.page(&w.findings());
        let body = outgoing::counted_whole(page.into_bytes())
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
        Ok(html(body))
    })
    .await
}

fn html(body: impl IntoResponse) -> Response {
    (
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (axum::http::header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// `GET /timeline`: the live timeline page.
pub(super) async fn live_timeline() -> Response {
    html(timeline::PAGE)
}
