//! `zkd ctl history`: the server's history (`GET /zkd/history`, paged to the end), one line
//! per event for people and `grep` (`seq`, the session clock, the kind, then `name=value`
//! fields), or the JSON Lines as the server wrote them (`--json`).

use clap::Args;
use serde_json::Value;

use crate::ctl_client::{Client, Failure};

/// Filters of `zkd ctl history` (all optional; together they all must match).
#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Only this session's events (and its connections' opening and closing), in hex.
    #[arg(long, value_name = "0x…")]
    session: Option<String>,
    /// Only events naming a path that starts with this prefix.
    #[arg(long, value_name = "PREFIX")]
    path: Option<String>,
    /// Only these kinds, separated by commas (request, notification, session_expired, …).
    #[arg(long, value_name = "KIND,…")]
    kinds: Option<String>,
    /// Only events at or after this session-clock time (ms).
    #[arg(long, value_name = "MS")]
    since_ms: Option<i64>,
    /// Only events at or before this session-clock time (ms).
    #[arg(long, value_name = "MS")]
    until_ms: Option<i64>,
    /// Only events with a zxid at least this (hex with 0x).
    #[arg(long, value_name = "ZXID")]
    from_zxid: Option<String>,
    /// Only events with a zxid at most this.
    #[arg(long, value_name = "ZXID")]
    to_zxid: Option<String>,
    /// Only events after this seq.
    #[arg(long, value_name = "SEQ")]
    after_seq: Option<u64>,
    /// At most this many events (default: all the server holds).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

/// Events asked for per page.
const PAGE: usize = 10_000;

/// `text` made safe for a query string.
fn encoded(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/,".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The query string of the filters, without `after_seq` and `limit`.
fn query(a: &HistoryArgs) -> String {
    let mut q = String::new();
    let mut add = |k: &str, v: String| {
        q.push('&');
        q.push_str(k);
        q.push('=');
        q.push_str(&encoded(&v));
    };
    let texts = [
        ("session", &a.session),
        ("path", &a.path),
        ("kinds", &a.kinds),
        ("from_zxid", &a.from_zxid),
        ("to_zxid", &a.to_zxid),
    ];
    for (k, v) in texts {
        if let Some(v) = v {
            add(k, v.clone());
        }
    }
    if let Some(t) = a.since_ms {
        add("since_ms", t.to_string());
    }
    if let Some(t) = a.until_ms {
        add("until_ms", t.to_string());
    }
    q
}

/// Reads the history page by page and prints it.
pub fn run(client: &Client, a: &HistoryArgs, json: bool) -> Result<String, Failure> {
    let filters = query(a);
    let mut after = a.after_seq;
    let mut left = a.limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    while left > 0 {
        let page = PAGE.min(left);
        let after_q = after.map_or(String::new(), |s| format!("&after_seq={s}"));
        let text = client.get_text(&format!("/zkd/history?limit={page}{after_q}{filters}"))?;
        let mut got = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                Failure(format!(
                    "the server sent a history line that is not JSON ({e}): {line}"
                ))
            })?;
            after = v.get("seq").and_then(Value::as_u64).or(after);
            out.push(if json { line.to_string() } else { human(&v) });
            got += 1;
        }
        left = left.saturating_sub(got);
        if got < page {
            break;
        }
    }
    if out.is_empty() && !json {
        return Ok("no events".into());
    }
    Ok(out.join("\n"))
}

/// Fields a line leaves out: the ones at its start, the wall clock and the error's number
/// (its name is shown).
const SHOWN_FIRST: [&str; 6] = ["seq", "mono_ms", "wall_ms", "kind", "err", "type_code"];

/// One event as a line: `seq`, the session clock, the kind, then `name=value` fields.
fn human(v: &Value) -> String {
    let num = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or(0);
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("?");
    let mut line = format!("{:>7} {:>9}ms {:<15}", num("seq"), num("mono_ms"), kind);
    let Some(fields) = v.as_object() else {
        return line;
    };
    let mut keys: Vec<&String> = fields
        .keys()
        .filter(|k| !SHOWN_FIRST.contains(&k.as_str()))
        .collect();
    keys.sort_by_key(|k| {
        (
            FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()),
            k.as_str(),
        )
    });
    for k in keys {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(&value_text(&fields[k.as_str()]));
    }
    line
}

/// Fields shown first, in this order; the others follow by name.
const FIRST: [&str; 12] = [
    "member", "conn", "session", "op", "path", "xid", "err_name", "zxid", "version", "why",
    "outcome", "type",
];

/// A field's value as text: strings bare, lists joined with commas, a multi's sub-ops as
/// `op:path`.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match (i.get("op"), i.get("path")) {
                (Some(op), Some(path)) => format!("{}:{}", value_text(op), value_text(path)),
                _ => value_text(i),
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_reads_as_one_line_of_fields() {
        let v: Value = serde_json::from_str(
            r#"{"seq":15,"mono_ms":1046,"wall_ms":1,"kind":"request","session":"0x10","conn":3,"xid":1,"op":"create","path":"/lock/n-1","err":0,"err_name":"OK","zxid":"0x2"}"#,
        )
        .expect("json");
        assert_eq!(
            human(&v),
            "     15      1046ms request         conn=3 session=0x10 op=create path=/lock/n-1 xid=1 err_name=OK zxid=0x2"
        );
    }

    #[test]
    fn filters_are_encoded_in_the_query() {
        let a = HistoryArgs {
            session: Some("0x1f".into()),
            path: Some("/a b".into()),
            kinds: None,
            since_ms: Some(5),
            until_ms: None,
            from_zxid: None,
            to_zxid: None,
            after_seq: None,
            limit: None,
        };
        assert_eq!(query(&a), "&session=0x1f&path=/a%20b&since_ms=5");
    }
}
