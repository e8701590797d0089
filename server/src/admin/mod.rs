//! The admin HTTP listener: one axum router over the server's shared state, off unless
//! `Config::admin_port` asks for it.
//!
//! Composition: every route is in one table, [`routes`], naming a handler in the sibling module
//! that serves it; that table is the one place routes are added. Handlers reach
//! the core only through [`crate::engine::Shared`]'s entry points (`with_core` and friends), so
//! admin operations are ordered with client requests and fall under the same failure policy.
//! Every request first passes [`guard`] (whom the listeners obey: Host, Origin, fetch
//! metadata), and every connection is taken by [`listen`] (header deadline, connection caps,
//! descriptors left to the client port). The HTTP stack lives only here (behind the `admin`
//! cargo feature); the core knows nothing of it.

mod commands;
mod control;
mod error;
mod guard;
mod herd;
mod history;
mod listen;
mod member_lag;
mod members;
mod metrics;
mod net_faults;
mod outgoing;
mod persist;
mod web;
mod zk_controller;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::{StatusCode, Uri};
use axum::routing::{any, delete, get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::engine::Shared;

pub(crate) use error::{ApiError, ApiResult};

/// What every admin handler gets: the server's shared state.
#[derive(Clone)]
pub(crate) struct AdminState {
    /// The core and the connection registry, behind their one lock.
    pub(crate) shared: Arc<Shared>,
    /// The client port's address, for reports.
    #[allow(dead_code)]
    pub(crate) client_addr: SocketAddr,
    /// The data directory's persistence, when one is configured.
    pub(crate) persist: Option<Arc<crate::persist::Persistence>>,
    /// Cancelling it stops the whole server (the test controller's SHUTDOWN).
    pub(crate) shutdown: CancellationToken,
    /// Whom the listeners obey (see [`guard`]).
    pub(crate) policy: Arc<guard::Policy>,
    /// Set on the AdminServer listener, which changes nothing: the commands that reset
    /// counters or set the trace mask are refused there.
    pub(crate) read_only: bool,
}

impl AdminState {
    pub(crate) fn new(
        shared: Arc<Shared>,
        client_addr: SocketAddr,
        persist: Option<Arc<crate::persist::Persistence>>,
        shutdown: CancellationToken,
        allow_hosts: &[String],
    ) -> AdminState {
        AdminState {
            shared,
            client_addr,
            persist,
            shutdown,
            policy: Arc::new(guard::Policy::new(allow_hosts)),
            read_only: false,
        }
    }
}

/// Every route the admin listener serves, in one table: a new route is added here and nowhere
/// else. The handlers live in the module named after what they serve.
fn routes() -> Router<AdminState> {
    Router::new()
        .merge(command_routes())
        // the control plane: sessions, pausing, request faults, reset, the clock
        .route("/zkd/sessions", get(control::sessions))
        .route("/zkd/sessions/{id}/expire", post(control::expire))
        .route("/zkd/sessions/{id}/disconnect", post(control::disconnect))
        .route("/zkd/pause", post(control::pause))
        .route("/zkd/resume", post(control::resume))
        .route("/zkd/stall", post(control::stall))
        .route(
            "/zkd/faults",
            get(control::list_faults)
                .post(control::add_fault)
                .delete(control::clear_faults),
        )
        .route("/zkd/faults/{id}", delete(control::remove_fault))
        .route("/zkd/reset", post(control::reset))
        .route("/zkd/clock", get(control::clock))
        .route("/zkd/clock/advance", post(control::advance))
        // network faults on connections
        .route(
            "/zkd/net-faults",
            get(net_faults::list)
                .post(net_faults::add)
                .delete(net_faults::clear),
        )
        .route("/zkd/net-faults/{id}", delete(net_faults::remove))
        // the ensemble's members
        .route("/zkd/members", get(members::list))
        .route("/zkd/members/{id}/stop", post(members::stop))
        .route("/zkd/members/{id}/start", post(members::start))
        .route("/zkd/members/{id}/lag", post(member_lag::set_lag))
        .route("/zkd/partition", post(members::partition))
        .route("/zkd/heal", post(members::heal))
        // persistence, reports and the history
        .route("/zkd/tree", get(persist::tree))
        .route("/zkd/snapshot", post(persist::snapshot))
        .route("/metrics", get(metrics::metrics))
        .route("/zkd/herd", get(herd::herd))
        .route("/zkd/history", get(history::history))
        .route("/zkd/history/checks", get(history::checks))
        .route("/zkd/history/timeline", get(history::timeline))
        .route("/timeline", get(history::live_timeline))
        // ZooKeeper's own admin paths and the web view
        .route("/command/{*command}", any(zk_controller::command))
        .route("/", get(web::index))
        .route("/zkd/overview", get(web::overview))
        .route("/zkd/node", get(web::node))
        .route("/zkd/sessions/{id}/watches", get(web::session_watches))
}

/// ZooKeeper's AdminServer paths, `/commands/…`.
fn command_routes() -> Router<AdminState> {
    Router::new()
        .route("/commands", get(commands::list))
        .route("/commands/", get(commands::list))
        .route(
            "/commands/{name}",
            get(commands::command).post(commands::command_post),
        )
}

/// The complete admin router.
pub(crate) fn router(state: AdminState) -> Router {
    guarded(routes(), state)
}

/// The read-only AdminServer router (`Config::admin_server_port`): ZooKeeper's `/commands`
/// only, none of the routes that show the tree or can end sessions, and none of the commands
/// that change anything.
/// Bound to a non-loopback address, it answers to any host name (see [`guard`]).
pub(crate) fn commands_router(state: AdminState, bound: std::net::IpAddr) -> Router {
    let policy = if bound.is_loopback() {
        state.policy.clone()
    } else {
        Arc::new(state.policy.any_host())
    };
    let state = AdminState {
        read_only: true,
        policy,
        ..state
    };
    guarded(command_routes(), state)
}

/// Finishes a router: unknown paths get the JSON 404, every request passes the host and
/// origin guard first, and handlers see `state`.
fn guarded(routes: Router<AdminState>, state: AdminState) -> Router {
    routes
        .fallback(unknown_route)
        .layer(axum::middleware::from_fn_with_state(
            state.shared.clone(),
            after_sync,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.policy.clone(),
            guard::check,
        ))
        .with_state(state)
}

/// With group commit (`--fsync always`), an answer is sent only once every transaction
/// written when its handler finished is synced, so no route (the tree, sessions, the
/// AdminServer's commands, metrics) shows a change a crash could still undo. Without it, or
/// with nothing unsynced, nothing waits. A streamed answer waits again before each later
/// page (`GET /zkd/tree`).
async fn after_sync(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let res = next.run(req).await;
    shared.synced_now().await;
    res
}

/// Runs `f` on the reports' worker (a thread at lowered priority), for handlers that copy or
/// format a lot (thousands of sessions, connections or nodes): the async runtime's threads
/// keep serving clients and win the CPU over the report.
pub(crate) async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    crate::reports::worker::run(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?
}

/// A JSON answer serialized by the caller: handlers that run [`off_runtime`] serialize there,
/// so neither the encoding of a large answer nor the freeing of its value runs on the async
/// runtime's threads.
/// The bytes count in the listeners' unsent total until written ([`outgoing`]); an answer
/// that would take that total past its limit is refused with 503.
pub(crate) fn json_body(v: &serde_json::Value) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let bytes = serde_json::to_vec(v)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let bytes = outgoing::counted_whole(bytes)
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}

/// A request body read as JSON whatever its content type (`curl -d` sends a form type with
/// a JSON body); 400 with serde's reason when it is not.
pub(crate) fn json_of<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// 201 with the rule a POST added as `show` shows it in the listing read after adding it
/// (or only its id, when it is already gone again).
pub(crate) fn created<T>(
    id: u64,
    listing: &[T],
    id_of: impl Fn(&T) -> u64,
    show: impl Fn(&T) -> serde_json::Value,
) -> (StatusCode, axum::Json<serde_json::Value>) {
    let shown = listing.iter().find(|r| id_of(r) == id).map(show);
    let shown = shown.unwrap_or_else(|| serde_json::json!({ "id": id }));
    (StatusCode::CREATED, axum::Json(shown))
}

/// The answer of a GET of a list of rules: `{ key: [each as show shows it] }`.
pub(crate) fn listed<T>(
    key: &str,
    listing: &[T],
    show: impl Fn(&T) -> serde_json::Value,
) -> axum::Json<serde_json::Value> {
    let shown: Vec<serde_json::Value> = listing.iter().map(show).collect();
    axum::Json(serde_json::json!({ key: shown }))
}

/// The id of a rule named in a route's path (`DELETE /zkd/faults/{id}`); 400 naming `what`
/// when it is not a number.
pub(crate) fn rule_id(id: &str, what: &str) -> ApiResult<u64> {
    id.parse()
        .map_err(|_| ApiError::bad_request(format!("{what} id {id:?} is not a number")))
}

/// The answer of a route that removed rules: how many.
pub(crate) fn removed(n: usize) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "removed": n }))
}

/// 404 for any route nobody serves.
async fn unknown_route(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such admin route: {}", uri.path()))
}

/// Turns axum's body rejection into our 400 JSON error.
#[allow(dead_code)]
pub(crate) fn json_rejection(e: JsonRejection) -> ApiError {
    ApiError::new(
        match e.status() {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => StatusCode::BAD_REQUEST,
            s if s.is_client_error() => StatusCode::BAD_REQUEST,
            s => s,
        },
        format!("malformed JSON body: {}", e.body_text()),
    )
}

/// Turns axum's query-string rejection into our 400 JSON error.
#[allow(dead_code)]
pub(crate) fn query_rejection(e: QueryRejection) -> ApiError {
    ApiError::bad_request(format!("malformed query parameter: {}", e.body_text()))
}

/// Binds the admin listener. Warns when the address is not loopback: this API can end
/// sessions and shows session ids.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    if !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "admin listener bound to a non-loopback address: anyone who can reach it can \
             list, expire and disconnect sessions and change the tree"
        );
    }
    TcpListener::bind(addr).await
}

/// Serves `app` (one of the routers above) on `listener` until `shutdown`, within the
/// connection limits of [`listen`]; `name` names the listener in logs.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
    name: &'static str,
) {
    listen::serve(listener, app, shutdown, listen::Limits::for_process(), name).await;
}
