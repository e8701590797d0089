//! The network fault routes under `/zkd/net-faults`: add a blackhole, lost replies or added
//! latency on client connections (by session, client address, member), list, remove and
//! clear them. Each handler parses its input into a [`crate::control::net_faults`] call and
//! renders the answer as JSON.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::control::{json_u64, needed_u64, only_with_action, parse_session_id};
use super::{AdminState, ApiError, ApiResult};
use crate::control::hex;
use crate::control::net_faults::{
    self, ClientAddr, NetFault, NetFaultRule, NetFaultStatus, MAX_LATENCY_MS,
};

/// The body of `POST /zkd/net-faults`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Body {
    /// `blackhole`, `drop-replies` or `latency`.
    action: String,
    /// `latency`: ms added each way.
    ms: Option<Value>,
    /// The session whose connection (as it is now) the rule holds, in hex.
    session: Option<String>,
    /// A client IP, or IP:port for one connection.
    client: Option<String>,
    /// An ensemble member's id.
    member: Option<Value>,
}

fn rule(body: Body) -> ApiResult<NetFaultRule> {
    let fault = match body.action.as_str() {
        "blackhole" => NetFault::Blackhole,
        "drop-replies" => NetFault::DropReplies,
        "latency" => NetFault::Latency(needed_u64(
            "ms",
            body.ms.as_ref(),
            &format!(
                "action \"latency\" needs \"ms\", the milliseconds added each way (1 to \
                 {MAX_LATENCY_MS})"
            ),
        )?),
        other => {
            return Err(ApiError::unknown(
                "network fault",
                other,
                "blackhole, drop-replies or latency",
            ))
        }
    };
    let is_latency = matches!(fault, NetFault::Latency(_));
    only_with_action("ms", body.ms.is_some(), "latency", is_latency)?;
    let client = body
        .client
        .as_deref()
        .map(str::parse::<ClientAddr>)
        .transpose()
        .map_err(ApiError::bad_request)?;
    Ok(NetFaultRule {
        fault,
        session: body.session.as_deref().map(parse_session_id).transpose()?,
        client,
        member: body
            .member
            .as_ref()
            .map(|m| json_u64("member", m))
            .transpose()?,
    })
}

fn status_json(s: &NetFaultStatus) -> Value {
    let mut v = json!({
        "id": s.id,
        "action": s.rule.fault.name(),
        "session": s.rule.session.map(hex),
        "connection": s.connection.map(|c| c.to_string()),
        "client": s.rule.client.map(|c| c.to_string()),
        "member": s.rule.member,
        "connections": s.connections,
    });
    if let (NetFault::Latency(ms), Value::Object(m)) = (s.rule.fault, &mut v) {
        m.insert("ms".into(), json!(ms));
    }
    v
}

pub(super) async fn add(
    State(st): State<AdminState>,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let body: Body = super::json_of(&body)?;
    let id = net_faults::add(&st.shared, rule(body)?)?;
    let list = net_faults::list(&st.shared)?;
    Ok(super::created(id, &list, |f| f.id, status_json))
}

pub(super) async fn list(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    let list = net_faults::list(&st.shared)?;
    Ok(super::listed("net_faults", &list, status_json))
}

pub(super) async fn clear(State(st): State<AdminState>) -> ApiResult<Json<Value>> {
    Ok(super::removed(net_faults::clear(&st.shared)?))
}

pub(super) async fn remove(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    net_faults::remove(&st.shared, super::rule_id(&id, "network fault")?)?;
    Ok(super::removed(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<NetFaultRule, String> {
        let body: Body = serde_json::from_str(text).map_err(|e| e.to_string())?;
        rule(body).map_err(|e| e.message)
    }

    #[test]
    fn bodies_become_rules() {
        assert_eq!(
            parsed(r#"{"action":"blackhole","session":"0x1f"}"#),
            Ok(NetFaultRule {
                fault: NetFault::Blackhole,
                session: Some(0x1f),
                client: None,
                member: None,
            })
        );
        let r = parsed(r#"{"action":"latency","ms":"250","client":"127.0.0.1","member":2}"#)
            .expect("a rule");
        assert_eq!(r.fault, NetFault::Latency(250));
        assert_eq!(r.client.map(|c| c.to_string()), Some("127.0.0.1".into()));
        assert_eq!(r.member, Some(2));
        let r = parsed(r#"{"action":"drop-replies","client":"[::1]:4000"}"#).expect("a rule");
        assert_eq!(r.client.map(|c| c.to_string()), Some("[::1]:4000".into()));
    }

    #[test]
    fn bad_bodies_are_refused_with_a_reason() {
        for (body, says) in [
            (r#"{"action":"partition"}"#, "unknown network fault"),
            (r#"{"action":"latency"}"#, "needs \"ms\""),
            (r#"{"action":"latency","ms":-5}"#, "not a non-negative"),
            (r#"{"action":"blackhole","ms":5}"#, "only goes with"),
            (
                r#"{"action":"blackhole","client":"example.com"}"#,
                "is not an IP",
            ),
            (
                r#"{"action":"blackhole","session":"zz"}"#,
                "not a hexadecimal",
            ),
            (r#"{"action":"blackhole","member":"one"}"#, "member \"one\""),
            (r#"{"action":"blackhole","colour":"red"}"#, "unknown field"),
            (r#"{"session":"0x1"}"#, "missing field"),
        ] {
            let e = parsed(body).expect_err(body);
            assert!(e.contains(says), "{body}: {e}");
        }
    }
}
