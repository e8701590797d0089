//! Recipe checks: facts about how clients used zkd that a user would otherwise infer from
//! client logs, read off the history (its JSON Lines events, in the server's order). Each
//! check names the events it stands on, so a timeline can mark them. What each proves and
//! what it does not is written in docs/history.md.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{json, Value};

/// Sessions that must re-read one parent's children after one change for it to count as a
/// herd round.
pub const HERD_MIN_SESSIONS: usize = 3;
/// Herd rounds on one parent before the herd is reported.
pub const HERD_MIN_ROUNDS: usize = 2;
/// Events one finding names at most (the timeline marks them).
const MAX_SEQS: usize = 12;

/// An event's `seq` and `mono_ms`.
type Mark = (u64, i64);

/// One fact a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The check's name: `double_holder`, `used_after_expiry`, `late_rewatch` or `herd`.
    pub check: &'static str,
    /// One sentence saying what happened, with sessions, paths, zxids and times.
    pub summary: String,
    /// The `seq` of the events it stands on, in order.
    pub seqs: Vec<u64>,
}

impl Finding {
    /// As the history's JSON: `{"check", "summary", "seqs"}`.
    pub fn to_json(&self) -> Value {
        json!({ "check": self.check, "summary": self.summary, "seqs": self.seqs })
    }
}

/// Runs every check over `events` (history events in `seq` order).
pub fn check_all(events: &[Value]) -> Vec<Finding> {
    let mut found = double_holder(events);
    found.extend(used_after_expiry(events));
    found.extend(late_rewatch(events));
    found.extend(herd(events));
    found
}

fn text<'a>(e: &'a Value, field: &str) -> Option<&'a str> {
    e.get(field).and_then(Value::as_str)
}

fn num(e: &Value, field: &str) -> Option<i64> {
    e.get(field).and_then(Value::as_i64)
}

fn seq(e: &Value) -> u64 {
    e.get("seq").and_then(Value::as_u64).unwrap_or(0)
}

fn mono(e: &Value) -> i64 {
    num(e, "mono_ms").unwrap_or(0)
}

fn kind(e: &Value) -> &str {
    text(e, "kind").unwrap_or("")
}

fn ok(e: &Value) -> bool {
    num(e, "err") == Some(0)
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) => "/",
        Some(i) => &p[..i],
        None => "",
    }
}

/// A sequential node's name ends in ten digits.
fn sequential(p: &str) -> bool {
    let name = &p[p.rfind('/').map_or(0, |i| i + 1)..];
    name.len() >= 10
        && name.as_bytes()[name.len() - 10..]
            .iter()
            .all(u8::is_ascii_digit)
}

/// The ten-digit counter of a sequential node, which orders the children of one parent.
fn counter(p: &str) -> &str {
    &p[p.len() - 10..]
}

fn capped(mut seqs: Vec<u64>) -> Vec<u64> {
    seqs.sort_unstable();
    seqs.dedup();
    seqs.truncate(MAX_SEQS);
    seqs
}

/// What one event did to the tree's nodes, as far as the checks follow it: the paths
/// created (with the creating session) and the paths deleted.
fn changes(e: &Value) -> (Vec<(String, String)>, Vec<String>) {
    let mut created = Vec::new();
    let mut deleted = Vec::new();
    let session = text(e, "session").unwrap_or("").to_string();
    match kind(e) {
        "request" if ok(e) => {
            let op = text(e, "op").unwrap_or("");
            let mut one = |op: &str, path: Option<&str>, made: Option<&str>| {
                if op.starts_with("create") {
                    if let Some(p) = made.or(path) {
                        created.push((p.to_string(), session.clone()));
                    }
                } else if op == "delete" || op == "deleteContainer" {
                    if let Some(p) = path {
                        deleted.push(p.to_string());
                    }
                }
            };
            if op == "multi" {
                for sub in e.get("ops").and_then(Value::as_array).into_iter().flatten() {
                    one(
                        text(sub, "op").unwrap_or(""),
                        text(sub, "path"),
                        text(sub, "created"),
                    );
                }
            } else {
                one(op, text(e, "path"), text(e, "created"));
            }
        }
        "session_expired" | "session_closed" => {
            for p in e
                .get("ephemerals")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(p) = p.as_str() {
                    deleted.push(p.to_string());
                }
            }
        }
        _ => {}
    }
    (created, deleted)
}

/// A sequential node's life as the history shows it.
struct SeqNode {
    counter: String,
    owner: String,
    created: i64,
    /// The zxid that deleted it, once deleted.
    deleted: Option<i64>,
}

/// The sequential children of each parent over time, by zxid.
#[derive(Default)]
struct Queues {
    nodes: HashMap<String, Vec<SeqNode>>,
    /// Path → (parent, index in its list), for deletes.
    index: HashMap<String, (String, usize)>,
}

impl Queues {
    fn created(&mut self, path: &str, owner: &str, zxid: i64) {
        let par = parent(path).to_string();
        let list = self.nodes.entry(par.clone()).or_default();
        self.index.insert(path.to_string(), (par, list.len()));
        list.push(SeqNode {
            counter: counter(path).to_string(),
            owner: owner.to_string(),
            created: zxid,
            deleted: None,
        });
    }

    fn deleted(&mut self, path: &str, zxid: i64) {
        if let Some((par, i)) = self.index.remove(path) {
            if let Some(n) = self.nodes.get_mut(&par).and_then(|l| l.get_mut(i)) {
                n.deleted = Some(zxid);
            }
        }
    }

    /// The owner of the lowest sequential child of `parent` in the state of zxid `z` (what
    /// a read served at `z` showed).
    fn lowest_owner(&self, parent: &str, z: i64) -> Option<&str> {
        self.nodes
            .get(parent)?
            .iter()
            .filter(|n| n.created <= z && n.deleted.is_none_or(|d| d > z))
            .min_by(|a, b| a.counter.cmp(&b.counter))
            .map(|n| n.owner.as_str())
    }
}

fn zxid_of(e: &Value) -> Option<i64> {
    let t = text(e, "zxid")?;
    i64::from_str_radix(t.strip_prefix("0x")?, 16).ok()
}

/// A belief that a session holds the lock a parent's lowest child stands for.
struct Belief {
    /// The read that showed its node lowest.
    since: u64,
    zxid: i64,
}

/// Two sessions that each held the lock a parent's lowest sequential child stands for at
/// once: each read the parent's children (at the zxid its member had applied) and saw its
/// own node lowest, and the first had not been told otherwise when the second read — no
/// read of its since showed another node lowest, it had not deleted its node, and the server
/// had not closed its connection (which it does when the session ends). Happens when a
/// holder's node is deleted by someone else, or a holder reads from a member that lags
/// behind the one the other reads from.
pub fn double_holder(events: &[Value]) -> Vec<Finding> {
    let mut queues = Queues::default();
    // parent → session → belief
    let mut beliefs: HashMap<String, HashMap<String, Belief>> = HashMap::new();
    let mut reported: HashSet<(String, String, String)> = HashSet::new();
    let mut found = Vec::new();
    for e in events {
        let sess = text(e, "session").unwrap_or("");
        let (created, deleted) = changes(e);
        let z = zxid_of(e).unwrap_or(0);
        for (p, owner) in created {
            if sequential(&p) {
                queues.created(&p, &owner, z);
            }
        }
        for p in &deleted {
            queues.deleted(p, z);
        }
        match kind(e) {
            "conn_close" | "session_expired" | "session_closed" => {
                for held in beliefs.values_mut() {
                    held.remove(sess);
                }
            }
            "request" if ok(e) => {
                let op = text(e, "op").unwrap_or("");
                let p = text(e, "path").unwrap_or("");
                if op == "delete" {
                    // a holder releasing: its own node gone by its own hand
                    if let Some(held) = beliefs.get_mut(parent(p)) {
                        held.remove(sess);
                    }
                }
                if op != "getChildren" && op != "getChildren2" {
                    continue;
                }
                let mine = queues.lowest_owner(p, z) == Some(sess);
                let held = beliefs.entry(p.to_string()).or_default();
                if !mine {
                    held.remove(sess);
                    continue;
                }
                for (other, b) in held.iter() {
                    if other == sess
                        || !reported.insert((p.to_string(), other.clone(), sess.to_string()))
                    {
                        continue;
                    }
                    found.push(Finding {
                        check: "double_holder",
                        summary: format!(
                            "sessions {other} and {sess} both held the lock {p}: {other} read \
                             its node lowest at zxid 0x{:x} and had not been told otherwise when \
                             {sess} read its own lowest at zxid 0x{z:x}",
                            b.zxid
                        ),
                        seqs: capped(vec![b.since, seq(e)]),
                    });
                }
                held.entry(sess.to_string()).or_insert(Belief {
                    since: seq(e),
                    zxid: z,
                });
            }
            _ => {}
        }
    }
    found
}

/// A session's client that, told its session had expired, went on using it: asked to
/// resume it again, or sent requests under it. Clients that take the answer start a new
/// session.
pub fn used_after_expiry(events: &[Value]) -> Vec<Finding> {
    // session → the handshake that told it
    let mut told: HashMap<&str, Mark> = HashMap::new();
    let mut reported: HashSet<&str> = HashSet::new();
    let mut found = Vec::new();
    for e in events {
        let (sess, again) = match kind(e) {
            "handshake" => (text(e, "session_asked").unwrap_or(""), true),
            "request" => (text(e, "session").unwrap_or(""), true),
            _ => ("", false),
        };
        if !again || sess.is_empty() || sess == "0x0" {
            continue;
        }
        if let Some(&(at, at_ms)) = told.get(sess) {
            if reported.insert(sess) {
                let what = match (kind(e), text(e, "op"), text(e, "path")) {
                    ("request", Some(op), Some(p)) => format!("sent {op} {p}"),
                    ("request", Some(op), None) => format!("sent {op}"),
                    _ => "asked to resume it again".to_string(),
                };
                found.push(Finding {
                    check: "used_after_expiry",
                    summary: format!(
                        "session {sess}'s client was told its session had expired and {} ms \
                         later {what}",
                        mono(e) - at_ms
                    ),
                    seqs: capped(vec![at, seq(e)]),
                });
            }
        }
        if kind(e) == "handshake" && text(e, "outcome") == Some("expired") {
            told.entry(sess).or_insert((seq(e), mono(e)));
        }
    }
    found
}

/// A session that set an exists watch on a sequential node (a lock's or an election's
/// predecessor) that was already gone — deleted after the session last read it or its
/// parent's children — and then read neither again, nor heard of it: it waits for a change
/// that has already happened. A waiter that watches its predecessor and does not look at
/// what `exists` answered waits so, forever.
pub fn late_rewatch(events: &[Value]) -> Vec<Finding> {
    // path → seq of its last deletion
    let mut gone: HashMap<String, u64> = HashMap::new();
    // (session, path) → seq of its last read of the path, or of the path's children
    let mut read: HashMap<(String, String), u64> = HashMap::new();
    // (session, path) → (seq of the read acted on, seq of the deletion, seq of the watch)
    let mut waiting: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    for e in events {
        let sess = text(e, "session").unwrap_or("").to_string();
        let (_, deleted) = changes(e);
        for p in deleted {
            gone.insert(p, seq(e));
        }
        match kind(e) {
            "request" if num(e, "err").is_some() => {
                let op = text(e, "op").unwrap_or("");
                let p = text(e, "path").unwrap_or("").to_string();
                if !matches!(op, "exists" | "getData" | "getChildren" | "getChildren2") {
                    continue;
                }
                let key = (sess.clone(), p.clone());
                // A read of the path, or of its parent's children, shows where it stands.
                waiting.retain(|(s, w), _| !(*s == sess && (*w == p || parent(w) == p)));
                let missing =
                    num(e, "err") == Some(i64::from(zkd_protocol::ErrorCode::NoNode.code()));
                // A sequential node: a lock's or an election's predecessor.
                let watch = e.get("watch") == Some(&Value::Bool(true));
                if op == "exists" && watch && missing && sequential(&p) {
                    let before = [p.as_str(), parent(&p)]
                        .iter()
                        .filter_map(|k| read.get(&(sess.clone(), (*k).to_string())).copied())
                        .max();
                    if let (Some(&del), Some(r)) = (gone.get(&p), before) {
                        if r < del {
                            waiting.insert(key.clone(), (r, del, seq(e)));
                        }
                    }
                }
                read.insert(key, seq(e));
            }
            "notification" => {
                let p = text(e, "path").unwrap_or("").to_string();
                waiting.remove(&(sess, p));
            }
            _ => {}
        }
    }
    waiting
        .into_iter()
        .map(|((sess, p), (r, del, watch))| Finding {
            check: "late_rewatch",
            summary: format!(
                "session {sess} set a watch on {p} after the node was deleted (it had read it \
                 before) and read neither it nor its parent again: it waits for a change that \
                 already happened"
            ),
            seqs: capped(vec![r, del, watch]),
        })
        .collect()
}

/// Clients that re-read all of a parent's children after every change to them: after one
/// change, [`HERD_MIN_SESSIONS`] or more notified sessions each list the parent again, for
/// [`HERD_MIN_ROUNDS`] or more changes. Each change then costs every watcher a full listing;
/// watching one's predecessor costs one notification.
pub fn herd(events: &[Value]) -> Vec<Finding> {
    // (session, parent) → the zxid of the children notification not yet followed by a
    // re-read.
    let mut notified: HashMap<(String, String), String> = HashMap::new();
    // (parent, zxid) → sessions that re-read after that change, and the seqs.
    let mut rounds: BTreeMap<(String, String), Vec<(String, u64)>> = BTreeMap::new();
    for e in events {
        let sess = text(e, "session").unwrap_or("").to_string();
        match kind(e) {
            "notification" if text(e, "type") == Some("NodeChildrenChanged") => {
                let p = text(e, "path").unwrap_or("").to_string();
                let z = text(e, "zxid").unwrap_or("").to_string();
                notified.insert((sess, p), z);
            }
            "request" if ok(e) => {
                let op = text(e, "op").unwrap_or("");
                if op == "getChildren" || op == "getChildren2" {
                    let p = text(e, "path").unwrap_or("").to_string();
                    if let Some(z) = notified.remove(&(sess.clone(), p.clone())) {
                        rounds.entry((p, z)).or_default().push((sess, seq(e)));
                    }
                }
            }
            _ => {}
        }
    }
    let mut by_parent: BTreeMap<String, Vec<Vec<(String, u64)>>> = BTreeMap::new();
    for ((p, _), readers) in rounds {
        if readers.len() >= HERD_MIN_SESSIONS {
            by_parent.entry(p).or_default().push(readers);
        }
    }
    let mut found = Vec::new();
    for (p, herd_rounds) in by_parent {
        if herd_rounds.len() < HERD_MIN_ROUNDS {
            continue;
        }
        let mut per_session: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &herd_rounds {
            for (s, _) in r {
                *per_session.entry(s.as_str()).or_default() += 1;
            }
        }
        let widest = herd_rounds.iter().map(Vec::len).max().unwrap_or(0);
        let mut clients: Vec<_> = per_session.into_iter().collect();
        clients.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = clients
            .iter()
            .take(5)
            .map(|(s, n)| format!("{s} ×{n}"))
            .collect();
        found.push(Finding {
            check: "herd",
            summary: format!(
                "{} sessions re-read all children of {p} after each change ({} changes, up to \
                 {widest} re-reads for one): {}{}",
                clients.len(),
                herd_rounds.len(),
                list.join(", "),
                if clients.len() > 5 { ", …" } else { "" }
            ),
            seqs: capped(herd_rounds[0].iter().map(|(_, s)| *s).collect()),
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(lines: &[Value]) -> Vec<Value> {
        lines
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut v = v.clone();
                v["seq"] = json!(i + 1);
                if v.get("mono_ms").is_none() {
                    v["mono_ms"] = json!((i as i64 + 1) * 10);
                }
                v
            })
            .collect()
    }

    fn create(s: &str, p: &str, z: &str) -> Value {
        json!({"kind": "request", "session": s, "op": "create", "path": "/lock/n-",
               "created": p, "err": 0, "zxid": z})
    }

    fn delete(s: &str, p: &str, z: &str) -> Value {
        json!({"kind": "request", "session": s, "op": "delete", "path": p, "err": 0, "zxid": z})
    }

    fn children(s: &str, p: &str, z: &str) -> Value {
        json!({"kind": "request", "session": s, "op": "getChildren", "path": p, "err": 0,
               "zxid": z})
    }

    #[test]
    fn a_holder_whose_node_someone_else_deleted_still_holds() {
        let events = ev(&[
            create("0xa", "/lock/n-0000000000", "0x2"),
            children("0xa", "/lock", "0x2"),
            create("0xb", "/lock/n-0000000001", "0x3"),
            children("0xb", "/lock", "0x3"),
            delete("0xc", "/lock/n-0000000000", "0x4"),
            children("0xb", "/lock", "0x4"),
        ]);
        let found = double_holder(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seqs, vec![2, 6]);
        assert!(found[0]
            .summary
            .starts_with("sessions 0xa and 0xb both held the lock /lock"));
    }

    #[test]
    fn a_stale_read_from_a_lagging_member_holds_too() {
        // 0xa's node went with its session's expiry at 0x4; a read 0xa's member served at
        // 0x3 still shows it lowest to a client that has not heard.
        let events = ev(&[
            create("0xb", "/lock/n-0000000001", "0x3"),
            children("0xb", "/lock", "0x3"),
            create("0xa", "/lock/n-0000000000", "0x2"),
            children("0xa", "/lock", "0x3"),
        ]);
        assert_eq!(double_holder(&events).len(), 1);
    }

    #[test]
    fn a_released_lock_or_an_ended_session_is_not() {
        let events = ev(&[
            create("0xa", "/lock/n-0000000000", "0x2"),
            children("0xa", "/lock", "0x2"),
            create("0xb", "/lock/n-0000000001", "0x3"),
            delete("0xa", "/lock/n-0000000000", "0x4"),
            children("0xb", "/lock", "0x4"),
            create("0xc", "/lock/n-0000000002", "0x5"),
            json!({"kind": "session_expired", "session": "0xb", "why": "timeout",
                   "ephemerals": ["/lock/n-0000000001"], "zxid": "0x6"}),
            json!({"kind": "conn_close", "session": "0xb", "why": "expired"}),
            children("0xc", "/lock", "0x6"),
        ]);
        assert_eq!(double_holder(&events), vec![]);
    }

    #[test]
    fn a_client_that_goes_on_with_an_expired_session_is_reported_once() {
        let back = |s: &str| json!({"kind": "handshake", "session_asked": s, "outcome": "expired"});
        let events = ev(&[back("0xa"), back("0xa"), back("0xa")]);
        let found = used_after_expiry(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seqs, vec![1, 2]);
        // Told once, then a new session: what clients do.
        let fresh = ev(&[
            back("0xa"),
            json!({"kind": "handshake", "session_asked": "0x0", "session": "0xb", "outcome": "new"}),
        ]);
        assert_eq!(used_after_expiry(&fresh), vec![]);
    }

    #[test]
    fn a_watch_on_a_node_already_deleted_waits_forever() {
        let exists = json!({"kind": "request", "session": "0xb", "op": "exists",
                            "path": "/lock/n-0000000000", "watch": true, "err": -101});
        let deleted = delete("0xa", "/lock/n-0000000000", "0x4");
        let late = ev(&[
            children("0xb", "/lock", "0x3"),
            deleted.clone(),
            exists.clone(),
        ]);
        let found = late_rewatch(&late);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seqs, vec![1, 2, 3]);
        // Looking again at the children, as correct lock recipes do, is no finding.
        let looked = ev(&[
            children("0xb", "/lock", "0x3"),
            deleted,
            exists,
            children("0xb", "/lock", "0x4"),
        ]);
        assert_eq!(late_rewatch(&looked), vec![]);
    }

    #[test]
    fn every_watcher_relisting_the_parent_each_change_is_a_herd() {
        let mut lines = Vec::new();
        for z in ["0x5", "0x6"] {
            for s in ["0xa", "0xb", "0xc"] {
                lines.push(
                    json!({"kind": "notification", "session": s, "path": "/election",
                                  "type": "NodeChildrenChanged", "zxid": z}),
                );
            }
            for s in ["0xa", "0xb", "0xc"] {
                lines.push(children(s, "/election", "0x9"));
            }
        }
        let found = herd(&ev(&lines));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0]
            .summary
            .starts_with("3 sessions re-read all children of /election"));
        // One round alone is not a herd.
        assert_eq!(herd(&ev(&lines[..6])), vec![]);
    }
}
