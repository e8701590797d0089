//! `POST /zkd/members/{id}/lag?ms=N | ?txns=K | ?stall=true`: tells an ensemble member to
//! trail the committed history (0 = in step again), answering with its lag, the zxid it has
//! applied and how many transactions it is behind.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::Value;

use super::members::{lag_json, parse_member_id};
use super::{AdminState, ApiError, ApiResult};
use crate::control::member_lag;
use crate::core::Lag;

/// The lag a query asks for: exactly one of `ms`, `txns` and `stall`.
fn parse_lag(q: &HashMap<String, String>) -> ApiResult<Lag> {
    const USAGE: &str = "give exactly one of ms=N, txns=K or stall=true (ms=0 or txns=0: in step)";
    if let Some(k) = q
        .keys()
        .find(|k| !["ms", "txns", "stall"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown query parameter {k:?}; {USAGE}"
        )));
    }
    if q.len() != 1 {
        return Err(ApiError::bad_request(USAGE));
    }
    let number = |name: &str, text: &str| {
        text.trim().parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "{name}={text:?} is not a non-negative whole number"
            ))
        })
    };
    let (name, text) = q
        .iter()
        .next()
        .ok_or_else(|| ApiError::bad_request(USAGE))?;
    match name.as_str() {
        "ms" => number(name, text).map(Lag::Ms),
        "txns" => number(name, text).map(Lag::Txns),
        _ => match text.trim() {
            "true" | "1" => Ok(Lag::Stalled),
            "false" | "0" => Ok(Lag::Lockstep),
            _ => Err(ApiError::bad_request(format!(
                "stall={text:?} is neither true nor false"
            ))),
        },
    }
}

pub(super) async fn set_lag(
    State(st): State<AdminState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let id = parse_member_id(&id)?;
    let lag = parse_lag(&q)?;
    let report = member_lag::set(&st.shared, id, lag)?;
    Ok(Json(lag_json(&report)))
}
