//! Persistence routes: `GET /zkd/tree` (the tree in the JSON fixture format) and
//! `POST /zkd/snapshot` (write a snapshot to the data directory now).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{AdminState, ApiError, ApiResult};

pub(crate) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/zkd/tree", get(tree))
        .route("/zkd/snapshot", post(snapshot))
}

/// Every node outside `/zookeeper` except ephemerals: the format `--seed` reads.
async fn tree(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    let entries = st.shared.with_core(|core, _| core.export_tree(false))?;
    Ok(Json(crate::fixture::to_json(&entries)))
}

async fn snapshot(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    let Some(p) = st.persist.clone() else {
        return Err(ApiError::conflict(
            "this server has no data directory (start it with --data-dir), so there is \
             nowhere to write a snapshot",
        ));
    };
    let shared = st.shared.clone();
    let info = tokio::task::spawn_blocking(move || p.snapshot(&shared))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    Ok(Json(json!({
        "zxid": format!("0x{:x}", info.zxid),
        "path": info.path.display().to_string(),
        "bytes": info.bytes,
        "core_held_ms": info.core_held.as_secs_f64() * 1000.0,
        "slices": info.slices,
        "copies": info.copies,
        "total_ms": info.total.as_secs_f64() * 1000.0,
    })))
}
