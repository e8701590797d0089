//! ZooKeeper's test controller commands (`org.apache.zookeeper.server.controller`), in the
//! same URL form — `/command/<ACTION>[/<parameter>]`, any method, action case-insensitive —
//! mapped onto the control plane, so tooling written against that controller works with zkd.
//! As there, success is 200 and an unknown action or bad parameter is 400, each with the
//! command echoed as a text body.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::AdminState;
use crate::control::{self, ControlError, FaultAction, FaultRule, FaultStatus};
use zkd_protocol::ErrorCode;

/// ZooKeeper's default for ADDDELAY without a parameter.
const DEFAULT_DELAY_MS: u64 = 1000;

/// Java's `Long.decode`: optional sign, then `0x`/`0X`/`#` hex, a leading `0` for octal, or
/// decimal.
fn long_decode(text: &str) -> Option<i64> {
    let (neg, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))
        .or_else(|| rest.strip_prefix('#'))
    {
        (16, h)
    } else if rest.len() > 1 && rest.starts_with('0') {
        (8, &rest[1..])
    } else {
        (10, rest)
    };
    if digits.is_empty() || digits.starts_with(['-', '+']) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if neg { -magnitude } else { magnitude }).ok()
}

/// The rule a parameterless controller command of this kind installs: no criteria.
fn is_controller_rule(f: &FaultStatus, kind: fn(&FaultAction) -> bool) -> bool {
    kind(&f.rule.action)
        && f.rule.opcode.is_none()
        && f.rule.path_prefix.is_none()
        && f.rule.session.is_none()
}

/// Replaces the controller's rule of one kind: `count` < 0 = every request until RESET,
/// 0 = none, n = the next n requests (ZooKeeper's counting).
fn set_rule(
    st: &AdminState,
    action: FaultAction,
    kind: fn(&FaultAction) -> bool,
    count: i64,
) -> Result<(), ControlError> {
    st.shared
        .with_core(|core, _| core.remove_faults_where(|f| is_controller_rule(f, kind)))?;
    if count == 0 {
        return Ok(());
    }
    control::add_fault(
        &st.shared,
        FaultRule {
            action,
            opcode: None,
            path_prefix: None,
            session: None,
            count: u64::try_from(count).ok(),
        },
    )
    .map(|_| ())
}

enum Outcome {
    Done,
    BadArgument,
}

fn run(st: &AdminState, action: &str, param: Option<&str>) -> Result<Outcome, ControlError> {
    let number = match param.map(long_decode) {
        Some(None) => return Ok(Outcome::BadArgument),
        Some(Some(n)) => Some(n),
        None => None,
    };
    match action.to_ascii_uppercase().as_str() {
        "PING" => {}
        "SHUTDOWN" => st.shutdown.cancel(),
        "CLOSECONNECTION" => match number {
            None => {
                control::disconnect_all(&st.shared)?;
            }
            Some(sid) => match control::disconnect_session(&st.shared, sid) {
                Ok(()) | Err(ControlError::NoSuchSession(_) | ControlError::NotConnected(_)) => {}
                Err(e) => return Err(e),
            },
        },
        "EXPIRESESSION" => match number {
            None => {
                control::expire_all_sessions(&st.shared)?;
            }
            Some(sid) => match control::expire_session(&st.shared, sid) {
                Ok(()) | Err(ControlError::NoSuchSession(_)) => {}
                Err(e) => return Err(e),
            },
        },
        "REJECTCONNECTIONS" => control::reject_connections(&st.shared, true),
        "ADDDELAY" => {
            let ms = number.unwrap_or(DEFAULT_DELAY_MS as i64);
            let Ok(ms) = u64::try_from(ms) else {
                return Ok(Outcome::BadArgument);
            };
            let kind: fn(&FaultAction) -> bool = |a| matches!(a, FaultAction::Delay(_));
            set_rule(
                st,
                FaultAction::Delay(ms),
                kind,
                if ms == 0 { 0 } else { -1 },
            )?;
        }
        "FAILREQUESTS" => {
            let kind: fn(&FaultAction) -> bool =
                |a| *a == FaultAction::Error(ErrorCode::ApiError.code());
            set_rule(
                st,
                FaultAction::Error(ErrorCode::ApiError.code()),
                kind,
                number.unwrap_or(-1),
            )?;
        }
        "NORESPONSE" => {
            let kind: fn(&FaultAction) -> bool = |a| *a == FaultAction::NoResponse;
            set_rule(st, FaultAction::NoResponse, kind, number.unwrap_or(-1))?;
        }
        "RESET" => {
            control::clear_faults(&st.shared)?;
            control::reject_connections(&st.shared, false);
        }
        // A standalone server is always its own leader.
        "ELECTNEWLEADER" => {}
        _ => return Ok(Outcome::BadArgument),
    }
    Ok(Outcome::Done)
}

pub(super) async fn command(State(st): State<AdminState>, Path(command): Path<String>) -> Response {
    let (action, param) = match command.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (command.as_str(), None),
    };
    let echo = format!("command/{command}\n");
    // Acting on every session or connection goes a slice at a time: on a blocking thread, so
    // that it never ties up the runtime's threads meanwhile.
    let (action_owned, param_owned) = (action.to_string(), param.map(str::to_string));
    let ran = tokio::task::spawn_blocking(move || {
        run(
            &st,
            &action_owned,
            param_owned.as_deref().filter(|p| !p.is_empty()),
        )
    })
    .await
    .unwrap_or(Err(ControlError::Failed));
    let status = match ran {
        Ok(Outcome::Done) => {
            tracing::info!(command = %command, "test controller command");
            StatusCode::OK
        }
        Ok(Outcome::BadArgument) => StatusCode::BAD_REQUEST,
        Err(ControlError::Failed) => StatusCode::SERVICE_UNAVAILABLE,
        Err(e) => {
            tracing::info!(command = %command, error = %e, "test controller command refused");
            StatusCode::CONFLICT
        }
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/html;charset=utf-8")],
        echo,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::long_decode;

    #[test]
    fn long_decode_follows_java() {
        assert_eq!(long_decode("42"), Some(42));
        assert_eq!(long_decode("-1"), Some(-1));
        assert_eq!(long_decode("0x1f"), Some(31));
        assert_eq!(long_decode("#1F"), Some(31));
        assert_eq!(long_decode("010"), Some(8));
        assert_eq!(long_decode("0"), Some(0));
        assert_eq!(long_decode("0x100001a2b3c0000"), Some(0x100001a2b3c0000));
        assert_eq!(long_decode(""), None);
        assert_eq!(long_decode("x1"), None);
        assert_eq!(long_decode("--1"), None);
        assert_eq!(long_decode("0x"), None);
        assert_eq!(long_decode("99999999999999999999"), None);
    }
}
