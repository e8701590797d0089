//! The control-plane routes under `/zkd/`: sessions, expire, disconnect, pause/resume, fault
//! rules, reset and the virtual clock. Each handler parses its input into a
//! [`crate::control`] call and renders the answer as JSON.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use zkd_protocol::{ErrorCode, OpCode};

use super::{AdminState, ApiError, ApiResult};
use crate::control::{
    self, hex, ClockReport, ControlError, FaultAction, FaultRule, FaultStatus, PauseClock,
    PauseOptions, SessionReport,
};
use crate::ClockMode;

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> ApiError {
        let status = match e {
            ControlError::NoSuchSession(_)
            | ControlError::NoSuchFault(_)
            | ControlError::NoSuchNetFault(_)
            | ControlError::NoSuchMember(_) => StatusCode::NOT_FOUND,
            ControlError::BadNetFault(_) | ControlError::BadPartition(_) => StatusCode::BAD_REQUEST,
            ControlError::Bind(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ControlError::NotAnEnsemble
            | ControlError::MemberRunning(_)
            | ControlError::MemberStopped(_)
            | ControlError::MemberRemoved(_)
            | ControlError::NotConnected(_)
            | ControlError::AlreadyPaused
            | ControlError::NotPaused
            | ControlError::ClockNotManual
            | ControlError::TooManyFaults(_) => StatusCode::CONFLICT,
            ControlError::Failed => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, e.to_string())
    }
}

type Params = Query<HashMap<String, String>>;

/// Query parameter `name` as one of two words: `false` for the first (also when it is
/// absent), `true` for the second; 400 saying `expected` for anything else.
pub(crate) fn either(
    params: &HashMap<String, String>,
    name: &str,
    (default, other): (&str, &str),
    expected: &str,
) -> ApiResult<bool> {
    match params.get(name).map(String::as_str) {
        None => Ok(false),
        Some(v) if v == default => Ok(false),
        Some(v) if v == other => Ok(true),
        Some(v) => Err(ApiError::bad_request(format!("{name}={v:?}: {expected}"))),
    }
}

/// Refuses query parameters other than `allowed`.
pub(crate) fn only(params: &HashMap<String, String>, allowed: &[&str]) -> ApiResult<()> {
    let mut unknown: Vec<&str> = params
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    unknown.sort_unstable();
    match unknown.first() {
        None => Ok(()),
        Some(k) if allowed.is_empty() => Err(ApiError::bad_request(format!(
            "unknown query parameter {k:?}: this route takes none"
        ))),
        Some(k) => Err(ApiError::bad_request(format!(
            "unknown query parameter {k:?}; expected {}",
            allowed.join(", ")
        ))),
    }
}

/// A non-negative number of milliseconds.
pub(crate) fn parse_ms(name: &str, text: &str) -> ApiResult<u64> {
    text.trim().parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "{name}={text:?} is not a non-negative whole number of milliseconds"
        ))
    })
}

/// Parses a session id given as hex, with or without `0x` (as ZooKeeper prints it).
pub(crate) fn parse_session_id(text: &str) -> ApiResult<i64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let bad = || {
        ApiError::bad_request(format!(
            "session id {text:?} is not a hexadecimal number such as 0x1000a2b3c4d0000"
        ))
    };
    if digits.is_empty() || digits.len() > 16 {
        return Err(bad());
    }
    u64::from_str_radix(digits, 16)
        .map(|v| v as i64)
        .map_err(|_| bad())
}

fn session_json(s: &SessionReport) -> Value {
    json!({
        "id": hex(s.id),
        "timeout_ms": s.timeout_ms,
        "peer": s.peer.map(|p| p.to_string()),
        "ephemerals": s.ephemerals,
        "watches": s.watches,
        "last_heard_ms_ago": s.idle_ms,
    })
}

/// Sessions listed per page of `/zkd/sessions` (one short hold of the core's lock each).
const SESSIONS_PER_PAGE: usize = 256;

/// Where a `/zkd/sessions` answer stands between pages.
struct SessionPages {
    /// Every session id when the listing began, sorted.
    ids: Vec<i64>,
    /// The first id of the next page.
    next: usize,
    /// Sessions written so far.
    written: usize,
    /// `ids`' bytes, counted with the listeners' unsent answers while the listing lives.
    _held: super::outgoing::Reserved,
}

/// `GET /zkd/sessions`: `{"sessions":[...]}`, as a chunked body made a page at a time as the
/// client reads it (see [`super::outgoing::paged`]): the ids are copied once (and counted
/// with the listeners' unsent answers: 503 when there is no room), then each page's
/// sessions in one short hold of the core's lock, and encoded on the reports' worker. A
/// session that ends during the listing is left out; one that starts is not seen.
pub(super) async fn sessions(State(st): State<AdminState>) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let shared = st.shared.clone();
    let ids = super::off_runtime(move || {
        let mut ids = shared.inspect(|core, _| core.session_ids())?;
        ids.sort_unstable();
        Ok(ids)
    })
    .await?;
    let shared = st.shared.clone();
    let next: super::outgoing::NextPage<SessionPages> = std::sync::Arc::new(move |p| {
        let shared = shared.clone();
        Box::pin(async move {
            crate::reports::worker::run(move || sessions_page(&shared, p))
                .await?
                .map_err(|e| e.message)
        })
    });
    let held = super::outgoing::reserve(ids.len() * std::mem::size_of::<i64>())
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
    let first = SessionPages {
        ids,
        next: 0,
        written: 0,
        _held: held,
    };
    let body = super::outgoing::paged("GET /zkd/sessions", first, next);
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// The next page of a `/zkd/sessions` answer: the opening with the first, the closing with
/// the last.
fn sessions_page(
    shared: &crate::engine::Shared,
    mut p: SessionPages,
) -> ApiResult<(Vec<u8>, Option<SessionPages>)> {
    let mut bytes = Vec::new();
    if p.next == 0 {
        bytes.extend_from_slice(b"{\"sessions\":[");
    }
    let end = (p.next + SESSIONS_PER_PAGE).min(p.ids.len());
    let now = shared.now();
    let chunk = &p.ids[p.next..end];
    let list = shared.inspect(|core, _| core.sessions_report_for(chunk, now))?;
    for s in &list {
        if p.written > 0 {
            bytes.push(b',');
        }
        serde_json::to_writer(&mut bytes, &session_json(s))
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        p.written += 1;
    }
    p.next = end;
    if p.next == p.ids.len() {
        bytes.extend_from_slice(b"]}");
        return Ok((bytes, None));
    }
    Ok((bytes, Some(p)))
}

pub(super) async fn expire(st: State<AdminState>, id: Path<String>) -> ApiResult<Json<Value>> {
    on_session(st, id, control::expire_session, "expired")
}

pub(super) async fn disconnect(st: State<AdminState>, id: Path<String>) -> ApiResult<Json<Value>> {
    on_session(st, id, control::disconnect_session, "disconnected")
}

/// Runs a control operation on the session the path names; answers `{done: "0x…"}`.
fn on_session(
    State(st): State<AdminState>,
    Path(id): Path<String>,
    op: fn(&crate::engine::Shared, i64) -> Result<(), ControlError>,
    done: &str,
) -> ApiResult<Json<Value>> {
    let sid = parse_session_id(&id)?;
    op(&st.shared, sid)?;
    Ok(Json(json!({ done: hex(sid) })))
}

pub(super) async fn pause(
    State(st): State<AdminState>,
    Query(q): Params,
) -> ApiResult<Json<Value>> {
    only(&q, &["ms", "clock"])?;
    let duration = q
        .get("ms")
        .map(|t| parse_ms("ms", t))
        .transpose()?
        .map(Duration::from_millis);
    let frozen = either(
        &q,
        "clock",
        ("run", "freeze"),
        "expected \"run\" (the session clock runs on, the default) or \"freeze\"",
    )?;
    let clock = if frozen {
        PauseClock::Frozen
    } else {
        PauseClock::Runs
    };
    control::pause(&st.shared, PauseOptions { duration, clock })?;
    Ok(Json(json!({
        "paused": true,
        "ms": duration.map(|d| d.as_millis() as u64),
        "clock": match clock { PauseClock::Runs => "run", PauseClock::Frozen => "freeze" },
    })))
}

pub(super) async fn resume(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    control::resume(&st.shared)?;
    Ok(Json(json!({ "paused": false })))
}

/// `POST /zkd/stall?ms=N`: hold the core's lock for N ms, as a stuck step would; answered
/// once the lock is held (the stall goes on in the background).
pub(super) async fn stall(
    State(st): State<AdminState>,
    Query(q): Params,
) -> ApiResult<Json<Value>> {
    only(&q, &["ms"])?;
    let max = crate::engine::slow_step::MAX_STALL.as_millis() as u64;
    let ms = match q.get("ms") {
        Some(t) => parse_ms("ms", t)?,
        None => return Err(ApiError::bad_request("ms=N is required")),
    };
    if ms > max {
        return Err(ApiError::bad_request(format!(
            "ms={ms} is longer than the longest stall, {max} ms"
        )));
    }
    st.shared.record_control("stall", 0, &format!("ms={ms}"));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared = st.shared.clone();
    tokio::task::spawn_blocking(move || {
        let _ = shared.stall(Duration::from_millis(ms), move || {
            let _ = tx.send(());
        });
    });
    rx.await
        .map_err(|_| ApiError::from(crate::engine::CoreFailed))?;
    Ok(Json(json!({ "stalled_ms": ms })))
}

/// The body of `POST /zkd/faults`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultBody {
    action: String,
    /// `error`: the ZooKeeper error code, as a number (-101) or a name (`NONODE`).
    code: Option<Value>,
    /// `delay`: how long to hold the reply.
    ms: Option<Value>,
    /// An opcode number (1) or name (`create`, `getData`, ...).
    opcode: Option<Value>,
    /// Path prefix.
    path: Option<String>,
    /// Session id in hex.
    session: Option<String>,
    /// How many times the rule fires.
    count: Option<Value>,
}

fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// An error code from a number or a name (`NONODE`, `NoNode`, `no-node`).
pub(crate) fn parse_error_code(v: &Value) -> ApiResult<i32> {
    let code = match v {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.trim().parse::<i32>().ok().or_else(|| {
            (-200..0)
                .filter_map(ErrorCode::from_i32)
                .find(|c| squash(&format!("{c:?}")) == squash(s))
                .map(ErrorCode::code)
        }),
        _ => None,
    };
    match code.and_then(ErrorCode::from_i32) {
        Some(c) if c != ErrorCode::Ok => Ok(c.code()),
        _ => Err(ApiError::bad_request(format!(
            "code {v} is not a ZooKeeper error code (a negative number such as -101, or a name such as NONODE)"
        ))),
    }
}

/// An opcode from a number or a name (`create`, `getData`, `multi`).
pub(crate) fn parse_opcode(v: &Value) -> ApiResult<i32> {
    let code = match v {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.trim().parse::<i32>().ok().or_else(|| {
            OpCode::ALL
                .iter()
                .find(|o| squash(&format!("{o:?}")) == squash(s))
                .map(|&o| o as i32)
        }),
        _ => None,
    };
    code.and_then(OpCode::from_i32)
        .map(|o| o as i32)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "opcode {v} is not a ZooKeeper request opcode (a number such as 1, or a name such as create or getData)"
            ))
        })
}

/// A non-negative whole number given as a JSON number or a string; 400 naming `name` when
/// it is not one.
pub(crate) fn json_u64(name: &str, v: &Value) -> ApiResult<u64> {
    let parsed = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        ApiError::bad_request(format!("{name} {v} is not a non-negative whole number"))
    })
}

/// The number `field` an action needs (see [`json_u64`]); 400 saying `missing` when the body
/// does not give it.
pub(crate) fn needed_u64(field: &str, v: Option<&Value>, missing: &str) -> ApiResult<u64> {
    json_u64(field, v.ok_or_else(|| ApiError::bad_request(missing))?)
}

/// 400 when the body gives `field` (`given`) but its action is not `action` (`is_action`
/// false): the field only goes with that action.
pub(crate) fn only_with_action(
    field: &str,
    given: bool,
    action: &str,
    is_action: bool,
) -> ApiResult<()> {
    if given && !is_action {
        return Err(ApiError::bad_request(format!(
            "\"{field}\" only goes with action \"{action}\""
        )));
    }
    Ok(())
}

fn fault_rule(body: FaultBody) -> ApiResult<FaultRule> {
    let action = match body.action.as_str() {
        "error" => {
            let code = body.code.as_ref().ok_or_else(|| {
                ApiError::bad_request(
                    "action \"error\" needs a \"code\" (e.g. -4 or CONNECTIONLOSS)",
                )
            })?;
            FaultAction::Error(parse_error_code(code)?)
        }
        "drop-before" => FaultAction::DropBefore,
        "drop-after" => FaultAction::DropAfter,
        "no-response" => FaultAction::NoResponse,
        "delay" => FaultAction::Delay(needed_u64(
            "ms",
            body.ms.as_ref(),
            "action \"delay\" needs \"ms\", the time to hold the reply",
        )?),
        other => {
            return Err(ApiError::unknown(
                "fault action",
                other,
                "error, drop-before, drop-after, delay or no-response",
            ))
        }
    };
    let is_error = matches!(action, FaultAction::Error(_));
    only_with_action("code", body.code.is_some(), "error", is_error)?;
    let is_delay = matches!(action, FaultAction::Delay(_));
    only_with_action("ms", body.ms.is_some(), "delay", is_delay)?;
    if let Some(p) = &body.path {
        if !p.starts_with('/') {
            return Err(ApiError::bad_request(format!(
                "path prefix {p:?} must start with /"
            )));
        }
    }
    let count = body
        .count
        .as_ref()
        .map(|c| json_u64("count", c))
        .transpose()?;
    if count == Some(0) {
        return Err(ApiError::bad_request(
            "count 0 would never fire; leave it out for a rule that fires until removed",
        ));
    }
    Ok(FaultRule {
        action,
        opcode: body.opcode.as_ref().map(parse_opcode).transpose()?,
        path_prefix: body.path,
        session: body.session.as_deref().map(parse_session_id).transpose()?,
        count,
    })
}

pub(crate) fn action_json(a: &FaultAction) -> Value {
    match *a {
        FaultAction::Error(code) => json!({ "action": "error", "code": code }),
        FaultAction::DropBefore => json!({ "action": "drop-before" }),
        FaultAction::DropAfter => json!({ "action": "drop-after" }),
        FaultAction::Delay(ms) => json!({ "action": "delay", "ms": ms }),
        FaultAction::NoResponse => json!({ "action": "no-response" }),
    }
}

fn fault_json(f: &FaultStatus) -> Value {
    let mut v = action_json(&f.rule.action);
    if let Value::Object(m) = &mut v {
        m.insert("id".into(), json!(f.id));
        m.insert("opcode".into(), json!(f.rule.opcode));
        m.insert("path".into(), json!(f.rule.path_prefix));
        m.insert("session".into(), json!(f.rule.session.map(hex)));
        m.insert("count".into(), json!(f.rule.count));
        m.insert("fired".into(), json!(f.fired));
        m.insert("remaining".into(), json!(f.remaining));
    }
    v
}

pub(super) async fn add_fault(
    State(st): State<AdminState>,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let rule = fault_rule(super::json_of(&body)?)?;
    let id = control::add_fault(&st.shared, rule)?;
    let list = control::faults(&st.shared)?;
    Ok(super::created(id, &list, |f| f.id, fault_json))
}

pub(super) async fn list_faults(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    let list = control::faults(&st.shared)?;
    Ok(super::listed("faults", &list, fault_json))
}

pub(super) async fn clear_faults(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    Ok(super::removed(control::clear_faults(&st.shared)?))
}

pub(super) async fn remove_fault(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    control::remove_fault(&st.shared, super::rule_id(&id, "fault")?)?;
    Ok(super::removed(1))
}

pub(super) async fn reset(
    State(st): State<AdminState>,
    Query(q): Params,
) -> ApiResult<Json<Value>> {
    only(&q, &["sessions"])?;
    let expire = either(
        &q,
        "sessions",
        ("keep", "expire"),
        "expected \"expire\" (expire every session too) or \"keep\"",
    )?;
    // Slices of the reset take turns with other requests for the core; the loop runs on a
    // blocking thread so that it never ties up the runtime's threads meanwhile.
    let shared = st.shared.clone();
    let deleted = tokio::task::spawn_blocking(move || control::reset(&shared, expire))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the reset stopped: {e}"),
            )
        })??;
    Ok(Json(
        json!({ "deleted_nodes": deleted, "sessions_expired": expire }),
    ))
}

pub(crate) fn clock_json(c: &ClockReport) -> Value {
    json!({
        "mode": match c.mode { ClockMode::Real => "real", ClockMode::Manual => "manual" },
        "now_ms": c.now_ms,
        "elapsed_ms": c.elapsed_ms,
        "paused": c.paused,
    })
}

pub(super) async fn clock(State(st): State<AdminState>) -> Json<Value> {
    Json(clock_json(&control::clock(&st.shared)))
}

pub(super) async fn advance(
    State(st): State<AdminState>,
    Query(q): Params,
) -> ApiResult<Json<Value>> {
    only(&q, &["ms"])?;
    let ms = q
        .get("ms")
        .ok_or_else(|| ApiError::bad_request("missing ms: how far to move the clock"))?;
    let ms = parse_ms("ms", ms)?;
    let max = crate::fixture::MAX_TTL_MS as u64;
    if ms > max {
        return Err(ApiError::bad_request(format!(
            "ms={ms} is too far: the clock moves at most {max} ms (2^40 - 1 ms, about 34.8 \
             years, the longest TTL) in one step"
        )));
    }
    let report = control::advance_clock(&st.shared, Duration::from_millis(ms))?;
    Ok(Json(clock_json(&report)))
}
