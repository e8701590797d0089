//! The JSON fixture format (`zkd --seed FILE.json`, `GET /zkd/tree`, `zkd ctl export`,
//! `zkd snapshot dump/convert`):
//!
//! ```json
//! { "nodes": [
//!     { "path": "/app", "data": "text" },
//!     { "path": "/app/bin", "data_base64": "AAEC/w==", "acl": [
//!         { "perms": "cdrwa", "scheme": "digest", "id": "user:smGaoVKd/cQkjm7b88GyorAUz20=" },
//!         { "perms": "r", "scheme": "world", "id": "anyone" } ] },
//!     { "path": "/jobs", "container": true },
//!     { "path": "/cache", "ttl_ms": 60000, "data": null }
//! ] }
//! ```
//!
//! `data` is UTF-8 text (or `null` for no data), `data_base64` any bytes; neither means
//! empty. `acl` defaults to `world:anyone` with all permissions; `perms` is a string of
//! `c d r w a` or the integer mask. Missing parents are created empty. `ephemeral: true` is
//! refused (ephemeral nodes belong to sessions). Exports add each node's `stat`, which input
//! ignores. `GET /zkd/tree` leaves out the data of nodes that `world:anyone` may not read
//! (marked `"data_withheld": true`) and shows digest ids as `user:x` where `world:anyone` lacks
//! ADMIN (marked `"acl_withheld": true`); input refuses either mark.

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use zkd_protocol::{perms, Acl, Stat};

use crate::core::{FixtureKind, FixtureNode, TreeEntry};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The longest TTL a node can have, in ms: ZooKeeper keeps a TTL in the 40 low bits of the
/// node's ephemeral owner, so 2^40 - 1 ms (about 34.8 years). A manual clock moves at most
/// this far in one step, which is enough to expire any node.
pub const MAX_TTL_MS: i64 = (1 << 40) - 1;

/// Parses a fixture document.
pub fn from_json(text: &str) -> Result<Vec<FixtureNode>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let list = match &doc {
        Value::Array(a) => a,
        Value::Object(o) => match o.get("nodes") {
            Some(Value::Array(a)) => a,
            _ => return Err("expected an object with a \"nodes\" array".into()),
        },
        _ => return Err("expected an object with a \"nodes\" array".into()),
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            node_from_json(v).map_err(|e| {
                let path = v.get("path").and_then(Value::as_str).unwrap_or("?");
                format!("node {} ({path}): {e}", i + 1)
            })
        })
        .collect()
}

/// Reads and parses a fixture file.
pub fn read_file(path: &std::path::Path) -> Result<Vec<FixtureNode>, String> {
    let text = crate::files::read_capped_text(path, crate::files::FIXTURE_CAP)?;
    from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn node_from_json(v: &Value) -> Result<FixtureNode, String> {
    let o = v.as_object().ok_or("a node must be a JSON object")?;
    for key in o.keys() {
        if !matches!(
            key.as_str(),
            "path"
                | "data"
                | "data_base64"
                | "data_withheld"
                | "acl_withheld"
                | "acl"
                | "container"
                | "ttl_ms"
                | "stat"
                | "ephemeral"
        ) {
            return Err(format!("unknown field {key:?}"));
        }
    }
    let path = o
        .get("path")
        .and_then(Value::as_str)
        .ok_or("\"path\" (a string) is required")?
        .to_string();
    if o.get("ephemeral").and_then(Value::as_bool) == Some(true) {
        return Err("ephemeral nodes cannot be seeded (they belong to a session)".into());
    }
    if o.get("data_withheld").and_then(Value::as_bool) == Some(true) {
        return Err(
            "the export withheld this node's data (its ACL does not let world:anyone read \
             it), so it cannot be seeded; export with `zkd snapshot dump` instead"
                .into(),
        );
    }
    if o.get("acl_withheld").and_then(Value::as_bool) == Some(true) {
        return Err(
            "the export withheld this node's digest passwords (its ACL reads user:x), so it \
             cannot be seeded; export with `zkd snapshot dump` instead"
                .into(),
        );
    }
    let data = match (o.get("data"), o.get("data_base64")) {
        (Some(_), Some(_)) => return Err("give either \"data\" or \"data_base64\"".into()),
        (Some(Value::Null), None) => None,
        (Some(Value::String(s)), None) => Some(Bytes::from(s.clone())),
        (Some(_), None) => return Err("\"data\" must be a string or null".into()),
        (None, Some(Value::String(s))) => {
            Some(Bytes::from(B64.decode(s).map_err(|e| {
                format!("\"data_base64\" is not base64: {e}")
            })?))
        }
        (None, Some(_)) => return Err("\"data_base64\" must be a string".into()),
        (None, None) => Some(Bytes::new()),
    };
    let acl = match o.get("acl") {
        None => Vec::new(),
        Some(Value::Array(entries)) => entries
            .iter()
            .map(acl_from_json)
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("\"acl\" must be an array".into()),
    };
    let container = o.get("container").and_then(Value::as_bool) == Some(true);
    let kind = match (container, o.get("ttl_ms")) {
        (true, Some(_)) => return Err("a node cannot be both a container and a TTL node".into()),
        (true, None) => FixtureKind::Container,
        (false, Some(t)) => {
            let ttl = t
                .as_i64()
                .ok_or("\"ttl_ms\" must be an integer number of milliseconds")?;
            if !(1..=MAX_TTL_MS).contains(&ttl) {
                return Err(format!(
                    "\"ttl_ms\" {ttl} is outside 1..={MAX_TTL_MS}: a TTL is at least 1 ms and at \
                     most 2^40 - 1 ms (about 34.8 years), as in ZooKeeper"
                ));
            }
            FixtureKind::Ttl(ttl)
        }
        (false, None) => FixtureKind::Persistent,
    };
    Ok(FixtureNode {
        path,
        data,
        acl,
        kind,
    })
}

fn acl_from_json(v: &Value) -> Result<Acl, String> {
    let o = v.as_object().ok_or("an ACL entry must be an object")?;
    let field = |k: &str| -> Result<&str, String> {
        o.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("ACL entry needs a string {k:?}"))
    };
    let mask = match o.get("perms") {
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or("ACL \"perms\" must be a small integer")?,
        Some(Value::String(s)) => perms_from_letters(s)?,
        _ => return Err("ACL entry needs \"perms\" (letters of cdrwa, or a mask)".into()),
    };
    Ok(Acl::new(mask, field("scheme")?, field("id")?))
}

fn perms_from_letters(s: &str) -> Result<i32, String> {
    let mut mask = 0;
    for c in s.chars() {
        mask |= match c {
            'c' => perms::CREATE,
            'd' => perms::DELETE,
            'r' => perms::READ,
            'w' => perms::WRITE,
            'a' => perms::ADMIN,
            _ => {
                return Err(format!(
                    "unknown permission letter {c:?} (use c, d, r, w, a)"
                ))
            }
        };
    }
    Ok(mask)
}

fn perms_to_letters(mask: i32) -> String {
    [
        (perms::CREATE, 'c'),
        (perms::DELETE, 'd'),
        (perms::READ, 'r'),
        (perms::WRITE, 'w'),
        (perms::ADMIN, 'a'),
    ]
    .iter()
    .filter(|(bit, _)| mask & bit != 0)
    .map(|(_, c)| *c)
    .collect()
}

fn stat_json(s: &Stat) -> Value {
    json!({
        "czxid": s.czxid, "mzxid": s.mzxid, "ctime": s.ctime, "mtime": s.mtime,
        "version": s.version, "cversion": s.cversion, "aversion": s.aversion,
        "ephemeralOwner": s.ephemeral_owner, "dataLength": s.data_length,
        "numChildren": s.num_children, "pzxid": s.pzxid,
    })
}

/// One exported node.
pub fn entry_to_json(e: &TreeEntry) -> Value {
    let mut o = Map::new();
    o.insert("path".into(), json!(e.node.path));
    match &e.node.data {
        None => {
            o.insert("data".into(), Value::Null);
        }
        Some(d) => match std::str::from_utf8(d) {
            Ok(text) => {
                o.insert("data".into(), json!(text));
            }
            Err(_) => {
                o.insert("data_base64".into(), json!(B64.encode(d)));
            }
        },
    }
    let acl: Vec<Value> = e
        .node
        .acl
        .iter()
        .map(|a| json!({"perms": perms_to_letters(a.perms), "scheme": a.id.scheme, "id": a.id.id}))
        .collect();
    o.insert("acl".into(), Value::Array(acl));
    match e.node.kind {
        FixtureKind::Container => {
            o.insert("container".into(), json!(true));
        }
        FixtureKind::Ttl(ttl) => {
            o.insert("ttl_ms".into(), json!(ttl));
        }
        FixtureKind::Persistent => {}
    }
    if e.ephemeral_owner.is_some() {
        o.insert("ephemeral".into(), json!(true));
    }
    o.insert("stat".into(), stat_json(&e.stat));
    Value::Object(o)
}

/// A whole export: `{"nodes": [...]}`.
pub fn to_json(entries: &[TreeEntry]) -> Value {
    json!({ "nodes": entries.iter().map(entry_to_json).collect::<Vec<_>>() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let doc = r#"{ "nodes": [
            { "path": "/app", "data": "text" },
            { "path": "/app/bin", "data_base64": "AAEC/w==", "acl": [
                { "perms": "cdrwa", "scheme": "digest", "id": "user:x" },
                { "perms": 1, "scheme": "world", "id": "anyone" } ] },
            { "path": "/jobs", "container": true },
            { "path": "/cache", "ttl_ms": 60000, "data": null }
        ] }"#;
        let nodes = from_json(doc).expect("parses");
        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[1].data.as_deref(), Some(&[0u8, 1, 2, 255][..]));
        assert_eq!(nodes[1].acl[0].perms, perms::ALL);
        assert_eq!(nodes[1].acl[1].perms, perms::READ);
        assert_eq!(nodes[2].kind, FixtureKind::Container);
        assert_eq!(nodes[3].kind, FixtureKind::Ttl(60000));
        assert_eq!(nodes[3].data, None);
    }

    #[test]
    fn errors_name_the_node_and_the_problem() {
        let err = from_json(r#"{"nodes":[{"path":"/a"},{"path":"/b","ephemeral":true}]}"#)
            .expect_err("refused");
        assert!(
            err.contains("node 2 (/b)") && err.contains("ephemeral"),
            "{err}"
        );
        let err = from_json(r#"[{"path":"/a","dta":"x"}]"#).expect_err("refused");
        assert!(err.contains("unknown field \"dta\""), "{err}");
        let err =
            from_json(r#"[{"path":"/a","acl":[{"perms":"rx","scheme":"world","id":"anyone"}]}]"#)
                .expect_err("refused");
        assert!(err.contains("'x'"), "{err}");
        assert!(from_json("{").expect_err("bad").contains("not valid JSON"));
    }

    #[test]
    fn ttls_outside_zookeepers_range_are_refused_naming_the_node() {
        for ttl in ["0", "-5", "1099511627776", "9223372036854775807"] {
            let doc = format!(r#"[{{"path":"/a"}},{{"path":"/t","ttl_ms":{ttl}}}]"#);
            let err = from_json(&doc).expect_err("refused");
            assert_eq!(
                err,
                format!(
                    "node 2 (/t): \"ttl_ms\" {ttl} is outside 1..=1099511627775: a TTL is at \
                     least 1 ms and at most 2^40 - 1 ms (about 34.8 years), as in ZooKeeper"
                )
            );
        }
        for ttl in [1, MAX_TTL_MS] {
            let doc = format!(r#"[{{"path":"/t","ttl_ms":{ttl}}}]"#);
            assert_eq!(from_json(&doc).expect("ok")[0].kind, FixtureKind::Ttl(ttl));
        }
    }

    #[test]
    fn letters_round_trip() {
        for mask in 0..32 {
            assert_eq!(perms_from_letters(&perms_to_letters(mask)), Ok(mask));
        }
    }
}
