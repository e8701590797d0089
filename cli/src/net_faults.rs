//! `zkd ctl net-fault`: network faults on client connections (a blackhole, lost replies,
//! added latency) by session, client address or ensemble member: add, list, remove, clear.

use clap::Subcommand;
use serde_json::Value;

use crate::ctl_client::{field_text, human_or_json, parse_duration_ms, rule_head, Client, Failure};

#[derive(Subcommand, Debug)]
pub enum NetFaultOp {
    /// Add a network fault: blackhole, drop-replies or latency. With no --session, --client
    /// or --member it holds every client connection.
    Add {
        /// blackhole (nothing read or written, no close) | drop-replies (requests applied,
        /// replies lost) | latency (each way, with --ms)
        action: String,
        /// For `latency`: time added each way, on the session clock (e.g. 200ms, 2s).
        #[arg(long, value_name = "DURATION")]
        ms: Option<String>,
        /// The connection this session has now (hex id); its reconnections are not held.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Connections from this client IP, or one connection by IP:PORT.
        #[arg(long, value_name = "IP[:PORT]")]
        client: Option<String>,
        /// Connections to this ensemble member.
        #[arg(long, value_name = "ID")]
        member: Option<u64>,
    },
    /// List the network faults and how many open connections each holds.
    List,
    /// Remove one network fault by id: the connections a blackhole or drop-replies held are
    /// closed, a latency ends.
    Remove { id: u64 },
    /// Remove every network fault.
    Clear,
}

/// The body of `POST /zkd/net-faults` for `add`.
fn add_body(
    action: &str,
    ms: Option<&str>,
    session: Option<&str>,
    client: Option<&str>,
    member: Option<u64>,
) -> Result<Value, Failure> {
    let mut body = serde_json::Map::new();
    body.insert("action".into(), Value::from(action));
    if let Some(d) = ms {
        body.insert("ms".into(), Value::from(parse_duration_ms(d)?));
    }
    if let Some(s) = session {
        body.insert("session".into(), Value::from(s));
    }
    if let Some(c) = client {
        body.insert("client".into(), Value::from(c));
    }
    if let Some(m) = member {
        body.insert("member".into(), Value::from(m));
    }
    Ok(Value::Object(body))
}

pub(crate) fn run(client: &Client, op: &NetFaultOp, json: bool) -> Result<String, Failure> {
    match op {
        NetFaultOp::Add {
            action,
            ms,
            session,
            client: addr,
            member,
        } => {
            let body = add_body(
                action,
                ms.as_deref(),
                session.as_deref(),
                addr.as_deref(),
                *member,
            )?;
            client
                .call_with("POST", "/zkd/net-faults", Some(&body))
                .map(|v| human_or_json(&v, json, || format!("added {}", line(&v))))
        }
        NetFaultOp::List => client.call("GET", "/zkd/net-faults").map(|v| {
            human_or_json(&v, json, || {
                let list: Vec<String> = v
                    .get("net_faults")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(line)
                    .collect();
                if list.is_empty() {
                    "no network faults".to_string()
                } else {
                    list.join("\n")
                }
            })
        }),
        NetFaultOp::Remove { id } => client
            .call("DELETE", &format!("/zkd/net-faults/{id}"))
            .map(|v| human_or_json(&v, json, || format!("removed network fault {id}"))),
        NetFaultOp::Clear => client.call("DELETE", "/zkd/net-faults").map(|v| {
            human_or_json(&v, json, || {
                format!(
                    "removed {} network faults",
                    v.get("removed").and_then(Value::as_u64).unwrap_or(0)
                )
            })
        }),
    }
}

/// One fault on one line: `#2 latency ms=200 member=1, holds 3 connections`.
fn line(v: &Value) -> String {
    let text = |k: &str| field_text(v, k);
    let mut out = rule_head(v);
    let mut targeted = false;
    for k in ["ms", "session", "connection", "client", "member"] {
        if let Some(x) = text(k) {
            out.push_str(&format!(" {k}={x}"));
            targeted |= k != "ms";
        }
    }
    if !targeted {
        out.push_str(" (every connection)");
    }
    let n = v.get("connections").and_then(Value::as_u64).unwrap_or(0);
    out.push_str(&format!(
        ", holds {n} connection{}",
        if n == 1 { "" } else { "s" }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sends_what_was_given() {
        let Ok(body) = add_body("latency", Some("2s"), None, Some("127.0.0.1"), Some(2)) else {
            panic!("a body");
        };
        assert_eq!(
            body,
            serde_json::json!({"action": "latency", "ms": 2000, "client": "127.0.0.1", "member": 2})
        );
        let Ok(body) = add_body("blackhole", None, Some("0x1f"), None, None) else {
            panic!("a body");
        };
        assert_eq!(
            body,
            serde_json::json!({"action": "blackhole", "session": "0x1f"})
        );
        let Err(Failure(e)) = add_body("latency", Some("soon"), None, None, None) else {
            panic!("a bad duration is refused");
        };
        assert!(e.contains("is not a duration"), "{e}");
    }

    #[test]
    fn lines_name_the_target() {
        let v = serde_json::json!({"id": 2, "action": "latency", "ms": 200, "session": null,
            "connection": null, "client": null, "member": 1, "connections": 3});
        assert_eq!(line(&v), "#2 latency ms=200 member=1, holds 3 connections");
        let v = serde_json::json!({"id": 1, "action": "blackhole", "connections": 1});
        assert_eq!(
            line(&v),
            "#1 blackhole (every connection), holds 1 connection"
        );
        let v = serde_json::json!({"id": 4, "action": "drop-replies", "session": "0x5",
            "connection": "127.0.0.1:4000", "connections": 0});
        assert_eq!(
            line(&v),
            "#4 drop-replies session=0x5 connection=127.0.0.1:4000, holds 0 connections"
        );
    }
}
