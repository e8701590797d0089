//! ZooKeeper AdminServer compatibility: `GET /commands` lists the commands and
//! `GET /commands/<name>` (or a four-letter alias) answers with the JSON a standalone
//! ZooKeeper of the release the server behaves as gives: the same keys, value types and
//! nesting, with `command` and `error`. 3.9 adds `snapshot` and `restore`, which need the
//! AdminServer's authentication; zkd has none, so it answers them with 3.9's 401 refusals.
//! The JSON is built by pure functions over a [`FourLetterView`] gathered from the core's
//! read-only reports; the core's lock is held only while gathering.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use zkd_protocol::FourLetterWord;

use super::{AdminState, ApiResult};
use crate::core::Serving;
use crate::engine::ensemble::MemberMode;
use crate::engine::now_ms;
use crate::reports::metrics::Metric;
use crate::reports::{self, FourLetterView, HostInfo, Needs};
use crate::VersionString;
use crate::ZookeeperVersion;

/// Every command a standalone ZooKeeper 3.8 registers, with its aliases (primary name first).
pub const COMMANDS: [&[&str]; 26] = [
    &["configuration", "conf", "config"],
    &["connection_stat_reset", "crst"],
    &["connections", "cons"],
    &["dirs"],
    &["dump"],
    &["environment", "env", "envi"],
    &["get_trace_mask", "gtmk"],
    &["hash"],
    &["initial_configuration", "icfg"],
    &["is_read_only", "isro"],
    &["last_snapshot", "lsnp"],
    &["leader", "lead"],
    &["monitor", "mntr"],
    &["observer_connection_stat_reset", "orst"],
    &["observers", "obsr"],
    &["ruok"],
    &["server_stats", "srvr"],
    &["set_trace_mask", "stmk"],
    &["stat_reset", "srst"],
    &["stats", "stat"],
    &["system_properties", "sysp"],
    &["voting_view"],
    &["watch_summary", "wchs"],
    &["watches", "wchc"],
    &["watches_by_path", "wchp"],
    &["zabstate"],
];

/// The commands that change something (counters, the trace mask): refused on the read-only
/// AdminServer listener.
pub const CHANGES_STATE: [&str; 3] = ["connection_stat_reset", "stat_reset", "set_trace_mask"];

/// The commands ZooKeeper 3.9 registers on top of [`COMMANDS`]; both need an authenticated
/// request (`Authorization` header) whose identity holds ALL on `/`.
pub const COMMANDS_ADDED_IN_3_9: [&[&str]; 2] = [&["restore", "rest"], &["snapshot", "snap"]];

/// The commands of a release line, with their aliases.
pub fn commands(version: ZookeeperVersion) -> impl Iterator<Item = &'static [&'static str]> {
    let added: &[&[&str]] = match version {
        ZookeeperVersion::V3_8 => &[],
        ZookeeperVersion::V3_9 => &COMMANDS_ADDED_IN_3_9,
    };
    COMMANDS.iter().chain(added).copied()
}

/// The primary name of a command of `version` given by any of its names.
pub fn primary_name_in(name: &str, version: ZookeeperVersion) -> Option<&'static str> {
    commands(version)
        .find(|names| names.contains(&name))
        .map(|names| names[0])
}

/// `GET /commands`: links to every command, like ZooKeeper's listing.
pub(super) async fn list(State(st): State<AdminState>) -> Response {
    let version = st.shared.cfg.zookeeper_version;
    let mut names: Vec<&str> = commands(version).map(|n| n[0]).collect();
    names.sort_unstable();
    let mut body = String::new();
    for n in names {
        body.push_str(&format!("<a href=\"/commands/{n}\">{n}</a>\n<br/>\n"));
    }
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// What a command needs gathered from the core.
fn needs(command: &str) -> Needs {
    let word = match command {
        "configuration" | "initial_configuration" => FourLetterWord::Conf,
        "connections" => FourLetterWord::Cons,
        "dump" => FourLetterWord::Dump,
        "monitor" => FourLetterWord::Mntr,
        "server_stats" => FourLetterWord::Srvr,
        "stats" => FourLetterWord::Stat,
        "watch_summary" => FourLetterWord::Wchs,
        "watches" | "watches_by_path" => FourLetterWord::Wchc,
        "environment" | "system_properties" => FourLetterWord::Envi,
        "last_snapshot" => FourLetterWord::Srvr,
        _ => FourLetterWord::Ruok,
    };
    reports::needs(word)
}

/// Whether a command shows the data directory (read from the file system, not the core).
fn needs_data_dir(command: &str) -> bool {
    matches!(
        command,
        "configuration" | "dirs" | "last_snapshot" | "server_stats" | "stats" | "monitor"
    )
}

/// `GET /commands/<name>`. Runs off the async runtime: a large report (thousands of
/// connections or sessions) is built on the reports' worker without holding up the tasks
/// that serve clients; the health checks (`ruok`, `is_read_only`, `server_stats`, `monitor`)
/// on the request's own task, and the other commands that read only counters and settings
/// (`watch_summary`, `configuration`, ...) on a blocking thread of their own, so none of them
/// waits behind such a report.
pub(super) async fn command(
    State(st): State<AdminState>,
    Path(name): Path<String>,
    Query(params): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    if let Some(refusal) = auth_refusal(&st, &name, &headers) {
        return Ok(refusal);
    }
    let version = st.shared.cfg.zookeeper_version;
    if let Some(cmd) =
        primary_name_in(&name, version).filter(|c| st.read_only && CHANGES_STATE.contains(c))
    {
        let body = json!({
            "command": cmd,
            "error": format!(
                "{cmd} changes the server's state and this listener (the AdminServer port) \
                 changes nothing; run it on the admin listener (--admin-port) or as a \
                 four-letter word"
            ),
        });
        return Ok((StatusCode::FORBIDDEN, axum::Json(body)).into_response());
    }
    let heavy = primary_name_in(&name, version).is_some_and(|cmd| needs(cmd).is_heavy());
    let health = primary_name_in(&name, version)
        .is_some_and(|cmd| matches!(cmd, "ruok" | "is_read_only" | "server_stats" | "monitor"));
    let name_for_error = name.clone();
    let job = move || super::json_body(&run(&st, &name, &params)?);
    if heavy {
        return super::off_runtime(job).await;
    }
    if health {
        // As the four-letter words: counters and a few reads of /proc, done here.
        return job();
    }
    crate::reports::worker::run_light(job)
        .await
        .unwrap_or_else(|| {
            Err(super::ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("the {name_for_error} report failed"),
            ))
        })
}

/// `POST /commands/<name>`: 3.9's `snapshot` and `restore` take POST too (and are refused the
/// same way); every other command is GET only.
pub(super) async fn command_post(
    State(st): State<AdminState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    auth_refusal(&st, &name, &headers)
        .unwrap_or_else(|| StatusCode::METHOD_NOT_ALLOWED.into_response())
}

/// 3.9's answer to `snapshot` and `restore` without valid authentication: 401 with the
/// error ZooKeeper names (no `Authorization` header: "Auth info is missing for the command";
/// one zkd cannot verify, which is any: "Not authenticated"). `None` for other commands.
fn auth_refusal(st: &AdminState, name: &str, headers: &HeaderMap) -> Option<Response> {
    let cmd = primary_name_in(name, st.shared.cfg.zookeeper_version)?;
    if !COMMANDS_ADDED_IN_3_9.iter().any(|names| names[0] == cmd) {
        return None;
    }
    let error = if headers.contains_key(header::AUTHORIZATION) {
        "Not authenticated"
    } else {
        "Auth info is missing for the command"
    };
    let body = json!({ "command": name, "error": error });
    Some(
        super::json_body(&body)
            .map(|mut r| {
                *r.status_mut() = StatusCode::UNAUTHORIZED;
                r
            })
            .unwrap_or_else(IntoResponse::into_response),
    )
}

/// The answer of command `name` (any of its names).
fn run(st: &AdminState, name: &str, params: &BTreeMap<String, String>) -> ApiResult<Value> {
    let Some(cmd) = primary_name_in(name, st.shared.cfg.zookeeper_version) else {
        return Ok(json!({
            "command": name,
            "error": format!("Unknown command: {name}"),
        }));
    };
    match cmd {
        "connection_stat_reset" | "stat_reset" => {
            st.shared.reset_stats(cmd == "stat_reset")?;
        }
        "set_trace_mask" => {
            let Some(mask) = params.get("traceMask").and_then(|m| m.parse::<i64>().ok()) else {
                return Ok(json!({
                    "error": "setTraceMask requires long traceMask argument",
                    "command": cmd,
                }));
            };
            st.shared
                .trace_mask
                .store(mask, std::sync::atomic::Ordering::Relaxed);
        }
        _ => {}
    }
    let needs = Needs {
        data_dir: needs_data_dir(cmd),
        ..needs(cmd)
    };
    let now = now_ms();
    // On an ensemble, `?member=ID` picks the member answering (default: the first).
    let member = match params.get("member") {
        Some(id) => super::members::parse_member_id(id)?,
        None => st.shared.first_member(),
    };
    let view = reports::gather(&st.shared, member, needs, now)?;
    if let (Some(_), None) = (params.get("member"), &view.member) {
        return Err(super::ApiError::not_found(format!(
            "no member {member}: this server is not an ensemble or has no such member"
        )));
    }
    let host = if needs.host {
        crate::reports::host_info()
    } else {
        HostInfo::default()
    };
    let trace_mask = st
        .shared
        .trace_mask
        .load(std::sync::atomic::Ordering::Relaxed);
    let mut body = render(cmd, &view, &host, trace_mask);
    if cmd == "observers" {
        let observers = observers_of(st, &view, now)?;
        if let Value::Object(m) = &mut body {
            m.extend(observers);
        }
    }
    Ok(body)
}

/// `observers` as ZooKeeper's leader answers it: `synced_observers`, the observers following
/// it, and `observers`, one object per such observer with the keys of ZooKeeper's learner
/// handler report (`remote_socket_address`, `sid`, `established`, `queued_packets`,
/// `queued_packets_size`, `packets_received`, `packets_sent`, `requests`, `last_zxid`), by
/// id. The simulated members exchange no packets: the address is the observer's quorum
/// address, `established` when the server started (ms since the epoch), the packet counts
/// 0 and `last_zxid` the last zxid the observer applied. Any other member (and a standalone
/// server) answers 0 and an empty list, as a ZooKeeper follower without an observer master
/// does.
fn observers_of(st: &AdminState, view: &FourLetterView, now: i64) -> ApiResult<Map<String, Value>> {
    let mut list = Vec::new();
    if let Some(m) = view
        .member
        .as_ref()
        .filter(|m| m.mode == MemberMode::Leader)
    {
        for (sid, quorum_addr) in observer_lines(&m.membership) {
            let summary = Needs {
                summary: true,
                ..Needs::default()
            };
            let their = reports::gather(&st.shared, sid, summary, now)?;
            if !their
                .member
                .as_ref()
                .is_some_and(|o| o.mode == MemberMode::Observer)
            {
                continue;
            }
            let mut o = Map::new();
            o.insert(
                "remote_socket_address".into(),
                json!(format!("/{quorum_addr}")),
            );
            o.insert("sid".into(), json!(sid));
            o.insert("established".into(), json!(now - their.uptime_ms));
            for k in [
                "queued_packets",
                "queued_packets_size",
                "packets_received",
                "packets_sent",
                "requests",
            ] {
                o.insert(k.into(), json!(0));
            }
            o.insert("last_zxid".into(), json!(their.last_zxid));
            list.push(Value::Object(o));
        }
    }
    Ok(obj(
        json!({ "synced_observers": list.len(), "observers": list }),
    ))
}

/// The observers of a membership text (`server.N=host:quorum:election:observer;...` lines):
/// each one's id and quorum address (`host:quorum`).
fn observer_lines(membership: &str) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = membership
        .lines()
        .filter_map(|l| {
            let (id, spec) = l.strip_prefix("server.")?.split_once('=')?;
            let servers = spec.split(';').next()?;
            let mut parts = servers.rsplitn(4, ':');
            let role = parts.next()?;
            let _election = parts.next()?;
            let quorum = parts.next()?;
            let host = parts.next()?;
            (role == "observer").then(|| Some((id.parse().ok()?, format!("{host}:{quorum}"))))?
        })
        .collect();
    v.sort_unstable();
    v
}

/// The JSON answer of command `cmd` (a primary name).
pub fn render(cmd: &str, view: &FourLetterView, host: &HostInfo, trace_mask: i64) -> Value {
    let mut body = match cmd {
        "configuration" => configuration(view),
        "connections" => connections(view),
        "dirs" => {
            let (_, size) = reports::data_dir(view);
            obj(json!({ "datadir_size": size, "logdir_size": size }))
        }
        "dump" => dump(view),
        "environment" => environment(view, host),
        "get_trace_mask" | "set_trace_mask" => obj(json!({ "tracemask": trace_mask })),
        "hash" => obj(json!({ "digests": [] })),
        "initial_configuration" => initial_configuration(view),
        "is_read_only" => obj(json!({ "read_only": is_read_only(view) })),
        "last_snapshot" => last_snapshot(view),
        "leader" => match view.member.as_ref() {
            Some(m) if m.mode.serving() == Serving::ReadWrite => obj(json!({
                "is_leader": m.mode == MemberMode::Leader,
                "leader_id": m.leader.as_ref().map(|l| l.0),
                "leader_ip": m.leader.as_ref().map(|l| &l.1),
            })),
            _ => return json!({ "error": "server is not initialized", "command": cmd }),
        },
        "monitor" => monitor(view, host),
        "observers" => obj(json!({ "synced_observers": 0, "observers": [] })),
        "server_stats" => server_stats(view),
        "stats" => {
            let mut m = server_stats(view);
            m.insert("connections".into(), brief_connections(view));
            m.insert("secure_connections".into(), json!([]));
            m
        }
        "system_properties" => system_properties(view, host),
        "voting_view" => obj(json!({ "current_config": {} })),
        "watch_summary" => watch_summary(view),
        "watches" => watches(view),
        "watches_by_path" => watches_by_path(view),
        "zabstate" => obj(json!({ "voting": false, "zabstate": "" })),
        _ => Map::new(),
    };
    body.insert("command".into(), json!(cmd));
    body.insert("error".into(), Value::Null);
    Value::Object(body)
}

/// Whether the member answering serves read-only.
fn is_read_only(view: &FourLetterView) -> bool {
    view.member
        .as_ref()
        .is_some_and(|m| m.mode == MemberMode::ReadOnly)
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The newest snapshot as ZooKeeper reports it: its zxid in hex without `0x` and its file's
/// modification time in seconds; a server without one (in memory, or none written yet)
/// answers ZooKeeper's "none": zxid -1 in hex and timestamp -1.
fn last_snapshot(view: &FourLetterView) -> Map<String, Value> {
    let (zxid, timestamp) = view
        .data_dir
        .as_ref()
        .and_then(|d| d.last_snapshot)
        .unwrap_or((-1, -1));
    obj(json!({
        "zxid": format!("{:x}", zxid as u64),
        "timestamp": timestamp,
    }))
}

fn configuration(view: &FourLetterView) -> Map<String, Value> {
    let c = &view.conf;
    let (dir, _) = reports::data_dir(view);
    obj(json!({
        "client_port": reports::port_or_none(Some(c.client_port)),
        "data_dir": dir,
        "data_log_dir": dir,
        "tick_time": c.tick_time_ms,
        "max_client_cnxns": c.max_client_cnxns,
        "min_session_timeout": c.min_session_timeout_ms,
        "max_session_timeout": c.max_session_timeout_ms,
        "server_id": 0,
        "client_port_listen_backlog": -1,
    }))
}

/// The settings as the `zoo.cfg` lines that would give them.
fn initial_configuration(view: &FourLetterView) -> Map<String, Value> {
    let c = &view.conf;
    let text = format!(
        "clientPort={}\ntickTime={}\nmaxClientCnxns={}\nminSessionTimeout={}\n\
         maxSessionTimeout={}\njute.maxbuffer={}\nextendedTypesEnabled={}\n",
        c.client_port,
        c.tick_time_ms,
        c.max_client_cnxns,
        c.min_session_timeout_ms,
        c.max_session_timeout_ms,
        c.max_frame_len,
        c.ttl_enabled
    );
    obj(json!({ "initial_configuration": text }))
}

fn connections(view: &FourLetterView) -> Map<String, Value> {
    let list: Vec<Value> = view
        .connections
        .iter()
        .map(|c| {
            let mut m = obj(json!({
                "remote_socket_address": c.remote.to_string(),
                "interest_ops": if c.session.is_some() { 1 } else { 0 },
                "outstanding_requests": c.queued,
                "packets_received": c.packets_received,
                "packets_sent": c.packets_sent,
            }));
            if let Some(x) = &c.session {
                m.extend(obj(json!({
                    "session_id": x.core.session_id,
                    "last_operation": x.core.last_op,
                    "established": x.core.established_ms,
                    "session_timeout": x.core.timeout_ms,
                    "last_cxid": x.core.last_cxid,
                    "last_zxid": x.core.last_zxid,
                    "last_response_time": x.core.last_response_ms,
                    "last_latency": x.last_latency_ms,
                    "min_latency": x.min_latency_ms,
                    "avg_latency": x.avg_latency_ms,
                    "max_latency": x.max_latency_ms,
                })));
            }
            Value::Object(m)
        })
        .collect();
    obj(json!({ "connections": list, "secure_connections": [] }))
}

fn brief_connections(view: &FourLetterView) -> Value {
    Value::Array(
        view.connections
            .iter()
            .map(|c| {
                json!({
                    "remote_socket_address": c.remote.to_string(),
                    "interest_ops": if c.session.is_some() { 1 } else { 0 },
                    "outstanding_requests": c.queued,
                    "packets_received": c.packets_received,
                    "packets_sent": c.packets_sent,
                })
            })
            .collect(),
    )
}

fn dump(view: &FourLetterView) -> Map<String, Value> {
    let mut buckets: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut ephemerals = Map::new();
    for s in &view.sessions {
        buckets.entry(s.expires_at_ms).or_default().push(s.id);
        if !s.ephemerals.is_empty() {
            let mut paths = s.ephemerals.clone();
            paths.sort();
            ephemerals.insert(s.id.to_string(), json!(paths));
        }
    }
    let expiry = sorted_ids_by_key(buckets);
    obj(json!({
        "expiry_time_to_session_ids": expiry,
        "session_id_to_ephemeral_paths": ephemerals,
    }))
}

fn environment(view: &FourLetterView, host: &HostInfo) -> Map<String, Value> {
    let text = reports::envi(host, view.conf.zookeeper_version);
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

fn system_properties(view: &FourLetterView, host: &HostInfo) -> Map<String, Value> {
    obj(json!({
        "file.separator": "/",
        "line.separator": "\n",
        "path.separator": ":",
        "java.io.tmpdir": host.tmp_dir,
        "os.arch": host.os_arch,
        "os.name": host.os_name,
        "os.version": host.os_version,
        "user.dir": host.user_dir,
        "user.home": host.user_home,
        "user.name": host.user_name,
        "zookeeper.version": view.conf.zookeeper_version.version_string(),
    }))
}

fn server_stats(view: &FourLetterView) -> Map<String, Value> {
    let client_response = json!({
        "last_buffer_size": -1,
        "min_buffer_size": -1,
        "max_buffer_size": -1,
    });
    obj(json!({
        "version": view.conf.zookeeper_version.version_string(),
        "read_only": is_read_only(view),
        "server_stats": {
            "packets_sent": view.packets_sent,
            "packets_received": view.packets_received,
            "fsync_threshold_exceed_count": view
                .data_dir
                .as_ref()
                .map_or(0, |d| d.stats.fsync_over_threshold),
            "client_response_stats": client_response,
            "data_dir_size": reports::data_dir(view).1,
            "log_dir_size": reports::data_dir(view).1,
            "provider_null": false,
            "server_state": reports::server_state(view),
            "last_processed_zxid": view.last_zxid,
            "outstanding_requests": view.outstanding_requests,
            "avg_latency": view.latency.avg,
            "max_latency": view.latency.max,
            "min_latency": view.latency.min,
            "num_alive_client_connections": view.connection_count,
            "uptime": view.uptime_ms,
            "auth_failed_count": 0,
            "non_mtlsremote_conn_count": 0,
            "non_mtlslocal_conn_count": 0,
        },
        "client_response": client_response,
        "node_count": view.znode_count + 1,
    }))
}

fn monitor(view: &FourLetterView, host: &HostInfo) -> Map<String, Value> {
    reports::metrics::monitor(view, host)
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Metric::Int(i) => json!(i),
                Metric::Float(f) => json!(f),
                Metric::Text(t) => json!(t),
            };
            (k, v)
        })
        .collect()
}

fn watch_summary(view: &FourLetterView) -> Map<String, Value> {
    let w = view.watch_summary();
    obj(json!({
        "num_connections": w.connections,
        "num_paths": w.paths,
        "num_total_watches": w.watches,
    }))
}

fn watches(view: &FourLetterView) -> Map<String, Value> {
    let by_session: Map<String, Value> = view
        .data_watches
        .iter()
        .filter(|w| !w.paths.is_empty())
        .map(|w| (w.session_id.to_string(), json!(w.paths)))
        .collect();
    obj(json!({ "session_id_to_watched_paths": by_session }))
}

fn watches_by_path(view: &FourLetterView) -> Map<String, Value> {
    let mut by_path: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for w in &view.data_watches {
        for p in &w.paths {
            by_path.entry(p).or_default().push(w.session_id);
        }
    }
    obj(json!({ "path_to_session_ids": sorted_ids_by_key(by_path) }))
}

/// A JSON object of session id lists, each sorted, keyed by the map's keys.
fn sorted_ids_by_key<K: ToString>(m: BTreeMap<K, Vec<i64>>) -> Map<String, Value> {
    m.into_iter()
        .map(|(k, mut ids)| {
            ids.sort_unstable();
            (k.to_string(), json!(ids))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::app_session;

    #[test]
    fn every_name_and_alias_resolves() {
        for names in COMMANDS {
            for n in names.iter() {
                assert_eq!(primary_name_in(n, ZookeeperVersion::V3_8), Some(names[0]));
            }
        }
        let v3_9 = [
            ("mntr", Some("monitor")),
            ("wchp", Some("watches_by_path")),
            ("bogus", None),
            ("snap", Some("snapshot")),
            ("rest", Some("restore")),
        ];
        for (name, primary) in v3_9 {
            assert_eq!(
                primary_name_in(name, ZookeeperVersion::V3_9),
                primary,
                "{name}"
            );
        }
        assert_eq!(primary_name_in("snapshot", ZookeeperVersion::V3_8), None);
        assert_eq!(commands(ZookeeperVersion::V3_8).count(), 26);
        assert_eq!(commands(ZookeeperVersion::V3_9).count(), 28);
    }

    #[test]
    fn shapes_of_the_session_reports() {
        let (sessions, data_watches) = app_session(72057628197388288, 544_000, &["/app", "/nope"]);
        let view = FourLetterView {
            sessions,
            data_watches,
            ..FourLetterView::default()
        };
        let h = HostInfo::default();
        assert_eq!(
            render("dump", &view, &h, 0),
            json!({
                "expiry_time_to_session_ids": { "544000": [72057628197388288i64] },
                "session_id_to_ephemeral_paths": { "72057628197388288": ["/app/e"] },
                "command": "dump",
                "error": null,
            })
        );
        assert_eq!(
            render("watches_by_path", &view, &h, 0)["path_to_session_ids"]["/nope"],
            json!([72057628197388288i64])
        );
        assert_eq!(
            render("watch_summary", &view, &h, 0),
            json!({
                "num_connections": 1, "num_paths": 2, "num_total_watches": 2,
                "command": "watch_summary", "error": null,
            })
        );
        assert_eq!(
            render("last_snapshot", &view, &h, 0),
            json!({
                "zxid": "ffffffffffffffff", "timestamp": -1,
                "command": "last_snapshot", "error": null,
            })
        );
        assert_eq!(
            render("configuration", &view, &h, 0)["data_dir"],
            json!("(in-memory)")
        );
        let on_disk = FourLetterView {
            data_dir: Some(crate::engine::DataDirInfo {
                path: "/var/zkd/version-2".into(),
                size_bytes: 4096,
                last_snapshot: Some((0x1f, 1_700_000_000)),
                ..Default::default()
            }),
            ..view.clone()
        };
        assert_eq!(
            render("last_snapshot", &on_disk, &h, 0)["zxid"],
            json!("1f")
        );
        assert_eq!(
            render("configuration", &on_disk, &h, 0)["data_log_dir"],
            json!("/var/zkd/version-2")
        );
        assert_eq!(render("dirs", &on_disk, &h, 0)["logdir_size"], json!(4096));
        assert_eq!(
            render("leader", &view, &h, 0),
            json!({ "error": "server is not initialized", "command": "leader" })
        );
    }
}
