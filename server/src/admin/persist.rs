//! Persistence routes: `GET /zkd/tree` (the tree in the JSON fixture format, as a client
//! without credentials may see it) and `POST /zkd/snapshot` (write a snapshot to the data
//! directory now).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{outgoing, AdminState, ApiError, ApiResult};
use crate::engine::Shared;
use crate::reports::worker;

/// Most nodes of one page of the answer.
const TREE_CHUNK: usize = 256;
/// Nodes looked at per turn of the core's lock while exporting the tree.
const NODES_PER_TURN: usize = 16;
/// A page ends once its nodes' data passes this many bytes (nodes hold up to a megabyte).
const PAGE_DATA: usize = 64 << 10;

/// Every node outside `/zookeeper` except ephemerals: the format `--seed` reads, as a chunked
/// HTTP body produced a page at a time. Each page is copied from the core in one short hold
/// of its lock and encoded on the reports' worker; the next page is made only when the
/// socket has taken the previous ones (and the listeners' unsent answers have room), so an
/// export never holds the whole answer, and a client that reads nothing for the write
/// deadline is closed ([`outgoing`]). The bytes
/// are those of the whole document encoded at once. With writes going on meanwhile the
/// export is not one point in time (a node created under a part already walked is missed);
/// `POST /zkd/snapshot` is. Should the server stop serving midway, the body ends early
/// (the client sees an incomplete chunked answer, never a shorter valid document).
pub(super) async fn tree(State(st): State<AdminState>) -> ApiResult<Response> {
    let first = next_page(&st.shared, TreeState::default()).await?;
    let shared = st.shared.clone();
    let next: outgoing::NextPage<TreePage> = Arc::new(move |page: TreePage| {
        let shared = shared.clone();
        Box::pin(async move {
            // A page made ahead (the first) goes out as it is; the others are made now.
            let page = if page.made {
                page
            } else {
                let next = next_page(&shared, page.state)
                    .await
                    .map_err(|e| e.message)?;
                // What the page shows is on disk before it is sent (group commit).
                shared.synced_now().await;
                next
            };
            let rest = (!page.state.walk.done()).then_some(TreePage {
                bytes: Vec::new(),
                state: page.state,
                made: false,
            });
            Ok((page.bytes, rest))
        })
    });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        outgoing::paged("GET /zkd/tree", first, next),
    )
        .into_response())
}

/// Where a streamed export stands between pages.
#[derive(Default)]
struct TreeState {
    /// Exports persistent nodes only (a default walk leaves ephemerals out).
    walk: crate::core::TreeWalk,
    /// Whether the document's opening was written.
    opened: bool,
    /// Nodes written so far.
    written: usize,
}

/// One page of the export's body and the state after it.
struct TreePage {
    bytes: Vec<u8>,
    state: TreeState,
    /// Whether `bytes` holds the page (`false`: the page after `state` is still to make).
    made: bool,
}

/// Copies and encodes the next page on the reports' worker: the document's opening with the
/// first page, its closing with the last.
async fn next_page(shared: &Arc<Shared>, mut state: TreeState) -> ApiResult<TreePage> {
    let shared = shared.clone();
    let page = worker::run(move || -> ApiResult<TreePage> {
        let mut bytes = Vec::new();
        if !state.opened {
            bytes.extend_from_slice(b"{\"nodes\":[");
            state.opened = true;
        }
        let mut entries: Vec<crate::core::TreeEntry> = Vec::new();
        let mut data = 0;
        // Skipped ephemerals can make a turn of the lock yield nothing.
        while entries.len() < TREE_CHUNK && data < PAGE_DATA && !state.walk.done() {
            let before = entries.len();
            shared.inspect(|core, _| {
                core.export_some(&mut state.walk, NODES_PER_TURN, &mut entries)
            })?;
            data += entries[before..]
                .iter()
                .map(|e| e.node.data.as_ref().map_or(0, |d| d.len()))
                .sum::<usize>();
        }
        for e in &mut entries {
            if state.written > 0 {
                bytes.push(b',');
            }
            serde_json::to_writer(&mut bytes, &as_world_sees(e))
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
            state.written += 1;
        }
        if state.walk.done() {
            bytes.extend_from_slice(b"]}");
        }
        Ok(TreePage {
            bytes,
            state,
            made: true,
        })
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))??;
    Ok(page)
}

/// One exported node as a client without credentials may see it (the rule of `/zkd/node`):
/// data the node's ACL does not let `world:anyone` read is left out and the entry says
/// `"data_withheld": true`; digest ACL entries show `user:x` unless `world:anyone` has ADMIN,
/// and the entry then says `"acl_withheld": true`. Seeding refuses either mark.
fn as_world_sees(e: &mut crate::core::TreeEntry) -> Value {
    let data_withheld = !crate::core::report::world_readable(&e.node.acl);
    if data_withheld {
        e.node.data = None;
    }
    let shown = crate::core::report::acl_for_world(&e.node.acl);
    let acl_withheld = shown != e.node.acl;
    e.node.acl = shown;
    let mut v = crate::fixture::entry_to_json(e);
    if let Value::Object(o) = &mut v {
        if data_withheld {
            o.remove("data");
            o.insert("data_withheld".into(), Value::Bool(true));
        }
        if acl_withheld {
            o.insert("acl_withheld".into(), Value::Bool(true));
        }
    }
    v
}

pub(super) async fn snapshot(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
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
