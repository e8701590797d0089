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

/// The lowest sequential child of each parent, and who owns it.
#[derive(Default)]
struct Queues {
    /// parent → counter → (path, owning session).
    children: HashMap<String, BTreeMap<String, (String, String)>>,
}

impl Queues {
    fn lowest(&self, parent: &str) -> Option<&(String, String)> {
        self.children.get(parent).and_then(|c| c.values().next())
    }
}

/// A session that took a lock (read its parent's children while its own node was the
/// lowest) and lost the node without deleting it itself: its session expired, or another
/// session deleted it. The next lowest node's session then takes the lock too. Reported when
/// the old holder's client could not have known before the new holder read the children:
/// its session expired by time (the client was silent) or a member's failure, or its node
/// was deleted by someone else while its connection stayed open.
pub fn double_holder(events: &[Value]) -> Vec<Finding> {
    let mut queues = Queues::default();
    // (parent, session) → seq of the read by which the session learned it held the lock.
    let mut took: HashMap<(String, String), u64> = HashMap::new();
    // Lost locks waiting for the next holder's read: parent → (old holder, its path, why,
    // seq of the loss, mono of the loss, seq of the old holder's taking).
    let mut lost: HashMap<String, (String, String, String, u64, i64, u64)> = HashMap::new();
    let mut found = Vec::new();
    for e in events {
        let sess = text(e, "session").unwrap_or("");
        if kind(e) == "request" && ok(e) {
            let op = text(e, "op").unwrap_or("");
            if op == "getChildren" || op == "getChildren2" {
                let p = text(e, "path").unwrap_or("");
                if let Some((_, owner)) = queues.lowest(p) {
                    if owner == sess {
                        let key = (p.to_string(), sess.to_string());
                        took.entry(key).or_insert(seq(e));
                        if let Some((old, old_path, why, at, at_ms, old_took)) = lost.remove(p) {
                            if old != sess {
                                found.push(Finding {
                                    check: "double_holder",
                                    summary: format!(
                                        "session {old} held the lock {p} ({old_path} lowest) and lost \
                                         its node without releasing it ({why}); session {sess} took \
                                         the lock {} ms later: until {old}'s client learns, both act \
                                         as holders",
                                        mono(e) - at_ms
                                    ),
                                    seqs: capped(vec![old_took, at, seq(e)]),
                                });
                            }
                        }
                    }
                }
            }
        }
        let (created, deleted) = changes(e);
        for p in deleted {
            let par = parent(&p).to_string();
            let Some(q) = queues.children.get_mut(&par) else {
                continue;
            };
            if !sequential(&p) {
                continue;
            }
            let was_lowest = q.values().next().map(|(lp, _)| lp == &p).unwrap_or(false);
            let Some((_, owner)) = q.remove(counter(&p)) else {
                continue;
            };
            let Some(&old_took) = took.get(&(par.clone(), owner.clone())) else {
                continue;
            };
            if !was_lowest {
                continue;
            }
            took.remove(&(par.clone(), owner.clone()));
            let why = match kind(e) {
                "session_expired" => match text(e, "why").unwrap_or("") {
                    "timeout" => {
                        Some("its session expired: no request or ping for its timeout".into())
                    }
                    "member_stopped" => Some("its session ended with its member".into()),
                    _ => None,
                },
                "request" if sess != owner => Some(format!("deleted by session {sess}")),
                _ => None,
            };
            if let Some(why) = why {
                lost.insert(par, (owner, p.clone(), why, seq(e), mono(e), old_took));
            }
        }
        for (p, owner) in created {
            if sequential(&p) {
                queues
                    .children
                    .entry(parent(&p).to_string())
                    .or_default()
                    .insert(counter(&p).to_string(), (p.clone(), owner));
            }
        }
    }
    found
}

/// A session the server expired by time whose client came back to it later, asking to
/// resume it, or sent requests under it: the client went silent for longer than its
/// session timeout (a long sleep, a stall, a paused process) and did not know.
pub fn used_after_expiry(events: &[Value]) -> Vec<Finding> {
    let mut last_heard: HashMap<&str, Mark> = HashMap::new();
    let mut expired: HashMap<&str, (u64, i64, Option<Mark>)> = HashMap::new();
    let mut reported: HashSet<&str> = HashSet::new();
    let mut found = Vec::new();
    for e in events {
        let sess = text(e, "session").unwrap_or("");
        match kind(e) {
            "request" => {
                if let Some(&(at, at_ms, last)) = expired.get(sess) {
                    if reported.insert(sess) {
                        found.push(late_use(sess, at, at_ms, last, e, "sent"));
                    }
                } else {
                    last_heard.insert(sess, (seq(e), mono(e)));
                }
            }
            "handshake" => {
                let asked = text(e, "session_asked").unwrap_or("");
                if let Some(&(at, at_ms, last)) = expired.get(asked) {
                    if reported.insert(asked) {
                        found.push(late_use(
                            asked,
                            at,
                            at_ms,
                            last,
                            e,
                            "asked to resume it with",
                        ));
                    }
                }
            }
            "session_expired" if text(e, "why") == Some("timeout") => {
                expired.insert(sess, (seq(e), mono(e), last_heard.get(sess).copied()));
            }
            _ => {}
        }
    }
    found
}

fn late_use(sess: &str, at: u64, at_ms: i64, last: Option<Mark>, e: &Value, how: &str) -> Finding {
    let what = match (kind(e), text(e, "op"), text(e, "path")) {
        ("request", Some(op), Some(p)) => format!("{op} {p}"),
        ("request", Some(op), None) => op.to_string(),
        _ => "a handshake".to_string(),
    };
    let silent = match last {
        Some((_, ms)) => format!(", its last request {} ms before the expiry", at_ms - ms),
        None => String::new(),
    };
    let mut seqs = vec![at, seq(e)];
    seqs.extend(last.map(|(s, _)| s));
    Finding {
        check: "used_after_expiry",
        summary: format!(
            "session {sess} expired by time{silent}; its client {how} {what} {} ms later, \
             not knowing",
            mono(e) - at_ms
        ),
        seqs: capped(seqs),
    }
}

/// Which watches a change fires, by the path it is on.
fn touches(watch: &str, watched: &str, changed: &str) -> bool {
    match watch {
        "child" => parent(changed) == watched,
        _ => changed == watched,
    }
}

/// A session whose watch on a path fired and that set it again only after further changes
/// to that path: it was not watching while they happened, so it heard of none of them (its
/// re-read shows only where they ended).
pub fn late_rewatch(events: &[Value]) -> Vec<Finding> {
    // (session, path, watch kind) → (seq of the notification, changes since: seqs)
    let mut fired: HashMap<(String, String, String), (u64, Vec<u64>)> = HashMap::new();
    let mut reported: HashSet<(String, String)> = HashSet::new();
    // Watches held: (session, path) → kinds, to know which fired.
    let mut held: HashMap<(String, String), HashSet<String>> = HashMap::new();
    let mut found = Vec::new();
    for e in events {
        let sess = text(e, "session").unwrap_or("").to_string();
        match kind(e) {
            "watch_set" => {
                let p = text(e, "path").unwrap_or("").to_string();
                let w = text(e, "watch").unwrap_or("").to_string();
                let key = (sess.clone(), p.clone(), w.clone());
                if let Some((at, missed)) = fired.remove(&key) {
                    if !missed.is_empty() && reported.insert((sess.clone(), p.clone())) {
                        let mut seqs = vec![at, seq(e)];
                        seqs.extend(missed.iter().copied());
                        found.push(Finding {
                            check: "late_rewatch",
                            summary: format!(
                                "session {sess}'s {w} watch on {p} fired and was set again only \
                                 after {} more change(s) to it, which it was not watching for",
                                missed.len()
                            ),
                            seqs: capped(seqs),
                        });
                    }
                }
                held.entry((sess, p)).or_default().insert(w);
            }
            "notification" => {
                let p = text(e, "path").unwrap_or("").to_string();
                if let Some(kinds) = held.remove(&(sess.clone(), p.clone())) {
                    for w in kinds {
                        if w == "persistent" || w == "persistent_recursive" {
                            continue;
                        }
                        fired.insert((sess.clone(), p.clone(), w), (seq(e), Vec::new()));
                    }
                }
            }
            _ => {
                let (created, deleted) = changes(e);
                let mut paths: Vec<String> = created.into_iter().map(|(p, _)| p).collect();
                paths.extend(deleted);
                if kind(e) == "request" && ok(e) && text(e, "op") == Some("setData") {
                    paths.extend(text(e, "path").map(str::to_string));
                }
                for changed in &paths {
                    for ((_, watched, w), (_, missed)) in fired.iter_mut() {
                        if touches(w, watched, changed) && missed.len() < MAX_SEQS {
                            missed.push(seq(e));
                        }
                    }
                }
            }
        }
    }
    found
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

    fn create(s: &str, p: &str) -> Value {
        json!({"kind": "request", "session": s, "op": "create", "path": p, "created": p, "err": 0})
    }

    fn children(s: &str, p: &str) -> Value {
        json!({"kind": "request", "session": s, "op": "getChildren", "path": p, "err": 0})
    }

    #[test]
    fn a_lock_lost_by_expiry_and_taken_is_a_double_holder() {
        let events = ev(&[
            create("0xa", "/lock/n-0000000000"),
            children("0xa", "/lock"),
            create("0xb", "/lock/n-0000000001"),
            children("0xb", "/lock"),
            json!({"kind": "session_expired", "session": "0xa", "why": "timeout",
                   "ephemerals": ["/lock/n-0000000000"]}),
            children("0xb", "/lock"),
        ]);
        let found = double_holder(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seqs, vec![2, 5, 6]);
        assert!(found[0].summary.contains("session 0xa held the lock /lock"));
    }

    #[test]
    fn a_released_lock_or_a_requested_expiry_is_not() {
        let events = ev(&[
            create("0xa", "/lock/n-0000000000"),
            children("0xa", "/lock"),
            create("0xb", "/lock/n-0000000001"),
            json!({"kind": "request", "session": "0xa", "op": "delete",
                   "path": "/lock/n-0000000000", "err": 0}),
            children("0xb", "/lock"),
            create("0xc", "/lock/n-0000000002"),
            json!({"kind": "session_expired", "session": "0xb", "why": "control",
                   "ephemerals": ["/lock/n-0000000001"]}),
            children("0xc", "/lock"),
        ]);
        assert_eq!(double_holder(&events), vec![]);
    }

    #[test]
    fn a_client_back_after_a_timeout_expiry_is_reported_once() {
        let events = ev(&[
            json!({"kind": "request", "session": "0xa", "op": "getData", "path": "/x", "err": 0}),
            json!({"kind": "session_expired", "session": "0xa", "why": "timeout"}),
            json!({"kind": "handshake", "session_asked": "0xa", "outcome": "expired"}),
            json!({"kind": "handshake", "session_asked": "0xa", "outcome": "expired"}),
        ]);
        let found = used_after_expiry(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seqs, vec![1, 2, 3]);
        let control = ev(&[
            json!({"kind": "session_expired", "session": "0xa", "why": "control"}),
            json!({"kind": "handshake", "session_asked": "0xa", "outcome": "expired"}),
        ]);
        assert_eq!(used_after_expiry(&control), vec![]);
    }

    #[test]
    fn changes_between_a_fired_watch_and_its_renewal_are_counted() {
        let set =
            |s: &str| json!({"kind": "watch_set", "session": s, "path": "/cfg", "watch": "data"});
        let write =
            json!({"kind": "request", "session": "0xb", "op": "setData", "path": "/cfg", "err": 0});
        let note = json!({"kind": "notification", "session": "0xa", "path": "/cfg",
                          "type": "NodeDataChanged"});
        let late = ev(&[
            set("0xa"),
            write.clone(),
            note.clone(),
            write.clone(),
            set("0xa"),
        ]);
        let found = late_rewatch(&late);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seqs, vec![3, 4, 5]);
        let prompt = ev(&[set("0xa"), write.clone(), note, set("0xa"), write]);
        assert_eq!(late_rewatch(&prompt), vec![]);
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
                lines.push(children(s, "/election"));
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
