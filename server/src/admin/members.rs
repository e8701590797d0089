//! The ensemble's membership routes under `/zkd/members`: list the members (each with its
//! lag), stop and start one (per-member routes sit under `/zkd/members/{id}/`); and
//! `/zkd/partition` and `/zkd/heal`, which split the members (or cut links one way) and join
//! them again.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};

use super::{AdminState, ApiError, ApiResult};
use crate::control::member_lag::{self, MemberLagReport};
use crate::control::members as member;
use crate::control::partition as split;
use crate::engine::ensemble::{MemberId, MemberReport};
use crate::engine::Shared;

/// A member id from the path: a decimal server id.
pub(crate) fn parse_member_id(text: &str) -> ApiResult<MemberId> {
    text.trim().parse::<MemberId>().map_err(|_| {
        ApiError::bad_request(format!(
            "member id {text:?} is not a server id such as 1, 2 or 3"
        ))
    })
}

fn member_json(m: &MemberReport) -> Value {
    json!({
        "id": m.id,
        "client_address": m.client_addr.to_string(),
        "mode": m.mode.as_str(),
        "state": if m.running { "running" } else { "stopped" },
        "type": if m.observer { "observer" } else { "participant" },
        "in_config": m.in_config,
        "cut": m.cut,
    })
}

/// Every member, and the leader's id (null without quorum).
fn members_json(members: &[MemberReport]) -> Value {
    let leader = members
        .iter()
        .find(|m| m.mode == crate::engine::ensemble::MemberMode::Leader)
        .map(|m| m.id);
    json!({
        "members": members.iter().map(member_json).collect::<Vec<_>>(),
        "leader": leader,
    })
}

/// A member's lag as JSON.
pub(crate) fn lag_json(r: &MemberLagReport) -> Value {
    json!({
        "id": r.id,
        "lag": r.lag.to_string(),
        "zxid": format!("0x{:x}", r.zxid),
        "behind": r.behind,
    })
}

/// Adds `lag`, `zxid` and `behind` to every member of a `GET /zkd/members` answer.
fn add_lags(shared: &Shared, v: &mut Value) -> ApiResult<()> {
    let Some(members) = v.get_mut("members").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for m in members {
        let Some(id) = m.get("id").and_then(Value::as_u64) else {
            continue;
        };
        let r = member_lag::get(shared, id)?;
        if let (Value::Object(fields), Value::Object(lag)) = (m, lag_json(&r)) {
            fields.extend(lag);
        }
    }
    Ok(())
}

/// Every member with its lag and its open connections, and the ensemble's epoch (the high
/// half of its zxids), as the routes answer.
fn listing(st: &AdminState) -> ApiResult<Json<Value>> {
    let members = member::list(&st.shared)?;
    let mut v = members_json(&members);
    add_lags(&st.shared, &mut v)?;
    let ids: Vec<MemberId> = members.iter().map(|m| m.id).collect();
    let counts = st
        .shared
        .inspect(|_, net| net.connections_of(&ids))
        .map_err(crate::control::ControlError::from)?;
    if let Some(list) = v.get_mut("members").and_then(Value::as_array_mut) {
        for (m, n) in list.iter_mut().zip(counts) {
            m["connections"] = n.into();
        }
    }
    let epoch = st
        .shared
        .inspect(|core, _| core.epoch())
        .map_err(crate::control::ControlError::from)?;
    v["epoch"] = epoch.into();
    let (links, instant) = st
        .shared
        .with_members(|m| (m.cut_links(), m.timing().is_instant()))
        .map_err(crate::control::ControlError::from)?
        .unwrap_or_default();
    v["cut_links"] = json!(links);
    v["election_timing"] = if instant { "instant" } else { "zookeeper" }.into();
    Ok(Json(v))
}

pub(super) async fn list(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    listing(&st)
}

/// Stops the member the path names; answers the members as they are then.
pub(super) async fn stop(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    member::stop(&st.shared, parse_member_id(&id)?).await?;
    listing(&st)
}

/// Starts the member the path names again; answers the members as they are then.
pub(super) async fn start(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let started = member::start(&st.shared, parse_member_id(&id)?, &st.shutdown);
    started.await?;
    listing(&st)
}

/// `POST /zkd/partition?groups=1/2,3`: splits the members into the groups given;
/// `one_way=3>1,3>2` (alone or with groups) cuts links one way, FROM>TO.
pub(super) async fn partition(
    State(st): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let groups = q.get("groups");
    let one_way = q.get("one_way");
    if groups.is_none() && one_way.is_none() {
        return Err(ApiError::bad_request(
            "give the groups, as in /zkd/partition?groups=1/2,3, or one-way cuts, as in \
             /zkd/partition?one_way=3>1"
                .to_string(),
        ));
    }
    let groups = groups.map(|g| split::parse_groups(g)).transpose()?;
    let one_way = one_way.map(|c| split::parse_one_way(c)).transpose()?;
    split::partition(
        &st.shared,
        &groups.unwrap_or_default(),
        &one_way.unwrap_or_default(),
    )?;
    listing(&st)
}

/// `POST /zkd/heal`: ends a partition.
pub(super) async fn heal(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    split::heal(&st.shared)?;
    listing(&st)
}
