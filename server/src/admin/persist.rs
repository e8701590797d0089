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

/// Nodes copied per turn of the core's lock while exporting the tree.
const TREE_CHUNK: usize = 256;

/// Every node outside `/zookeeper` except ephemerals: the format `--seed` reads. The tree is
/// walked a chunk of nodes per turn of the core's lock, and the JSON is built off the async
/// runtime, so a large tree does not stall clients. With writes going on meanwhile the
/// export is not one point in time (a node created under a part already walked is missed);
/// `POST /zkd/snapshot` is.
async fn tree(State(st): State<AdminState>) -> ApiResult<axum::response::Response> {
    let shared = st.shared.clone();
    super::off_runtime(move || {
        let mut walk = crate::core::TreeWalk::new(false);
        let mut entries = Vec::new();
        while !walk.done() {
            shared.inspect(|core, _| core.export_some(&mut walk, TREE_CHUNK, &mut entries))?;
        }
        super::json_body(&crate::fixture::to_json(&entries))
    })
    .await
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
