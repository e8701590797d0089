//! The control-plane routes under `/zkd/`: sessions, expire, disconnect, pause, faults, reset
//! and the virtual clock.

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{AdminState, ApiError, ApiResult};
use crate::core::SessionInfo;
use crate::net::now_ms;

pub(crate) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/zkd/sessions", get(sessions))
        .route("/zkd/sessions/{id}/expire", post(expire))
}

/// A session id as ZooKeeper prints it: `0x` and lower-case hex of the 64-bit value.
pub(crate) fn session_hex(id: i64) -> String {
    format!("0x{id:x}")
}

fn session_json(s: &SessionInfo) -> Value {
    json!({
        "id": session_hex(s.id),
        "timeout_ms": s.timeout_ms,
        "peer": s.peer.map(|p| p.to_string()),
        "ephemerals": s.ephemerals,
        "watches": s.watches,
        "last_heard_ms_ago": s.idle_ms,
    })
}

async fn sessions(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    let list = st
        .shared
        .with_core(|core, _| core.sessions_report(now_ms()))?;
    Ok(Json(
        json!({ "sessions": list.iter().map(session_json).collect::<Vec<_>>() }),
    ))
}

/// Parses a session id given as hex, with or without `0x` (as ZooKeeper prints it).
pub(crate) fn parse_session_id(text: &str) -> ApiResult<i64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || digits.len() > 16 {
        return Err(ApiError::bad_request(format!(
            "session id {text:?} is not a hexadecimal number such as 0x1000a2b3c4d0000"
        )));
    }
    u64::from_str_radix(digits, 16)
        .map(|v| v as i64)
        .map_err(|_| {
            ApiError::bad_request(format!(
                "session id {text:?} is not a hexadecimal number such as 0x1000a2b3c4d0000"
            ))
        })
}

fn no_session(id: i64) -> ApiError {
    ApiError::not_found(format!("no session {}", session_hex(id)))
}

async fn expire(State(st): State<AdminState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let sid = parse_session_id(&id)?;
    let done = st
        .shared
        .with_core(|core, out| core.expire_session(sid, now_ms(), out))?;
    if !done {
        return Err(no_session(sid));
    }
    Ok(Json(json!({ "expired": session_hex(sid) })))
}
