//! A minimal HTTP endpoint answering `POST /zkd/members/{id}/stop|start` the way zkd's
//! control plane does, over an Apache ZooKeeper ensemble, so the ensemble client suites can
//! stop and start real members with the same calls (the client suites and the differential
//! ensemble programs both use it). Over an ensemble in network namespaces it also answers
//! `POST /zkd/partition?groups=1/2,3` (members named in no group form one more group),
//! `POST /zkd/partition?one_way=3>1` (alone or with groups) and `POST /zkd/heal`, cutting the
//! namespaces' links as zkd's routes cut its members.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::oracle::OracleEnsemble;

/// Serves member stop/start for `ensemble` until dropped.
pub struct MemberControl {
    addr: SocketAddr,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MemberControl {
    pub fn start(ensemble: Arc<Mutex<OracleEnsemble>>) -> MemberControl {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the control port");
        let addr = listener.local_addr().expect("control address");
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().expect("clone the socket"));
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                // Skip the headers; the requests carry no body.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let (status, body) = answer(&ensemble, &line);
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        MemberControl {
            addr,
            done,
            thread: Some(thread),
        }
    }

    /// `http://HOST:PORT`, for `ZKD_CONTROL_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn answer(ensemble: &Mutex<OracleEnsemble>, request_line: &str) -> (&'static str, String) {
    let target = request_line.split_whitespace().nth(1).unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if matches!(path, "/zkd/partition" | "/zkd/heal") {
        let cuts = ensemble
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .cuts();
        let Some(cuts) = cuts else {
            return (
                "409 Conflict",
                r#"{"error":"the members do not run in network namespaces"}"#.into(),
            );
        };
        let done = if path == "/zkd/heal" {
            cuts.heal()
        } else {
            parse_partition(query).and_then(|(groups, one_way)| cuts.partition(&groups, &one_way))
        };
        return match done {
            Ok(()) => ("200 OK", "{}".into()),
            Err(msg) => ("400 Bad Request", format!("{{\"error\":{msg:?}}}")),
        };
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (id, op) = match parts.as_slice() {
        ["zkd", "members", id, op] => match id.parse::<u64>() {
            Ok(id) => (id, *op),
            Err(_) => return ("400 Bad Request", r#"{"error":"bad member id"}"#.into()),
        },
        _ => return ("404 Not Found", r#"{"error":"no such route"}"#.into()),
    };
    let mut e = ensemble
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let done = match op {
        "stop" => e.stop_member(id),
        "start" => e.start_member(id),
        _ => return ("404 Not Found", r#"{"error":"no such route"}"#.into()),
    };
    match done {
        Ok(()) => ("200 OK", "{}".into()),
        Err(msg) => ("409 Conflict", format!("{{\"error\":{msg:?}}}")),
    }
}

/// The value of `key=` in `query`, percent-escapes of `/`, `,`, `>` and spaces undone.
fn param(query: &str, key: &str) -> Option<String> {
    let value = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?;
    let mut text = value.replace('+', "");
    for (escaped, plain) in [("%2F", "/"), ("%2C", ","), ("%3E", ">"), ("%20", "")] {
        text = text
            .replace(escaped, plain)
            .replace(&escaped.to_lowercase(), plain);
    }
    Some(text)
}

fn member_id(id: &str, text: &str) -> Result<u64, String> {
    id.trim()
        .parse::<u64>()
        .map_err(|_| format!("{id:?} in {text:?} is not a member id"))
}

/// The groups of `groups=1/2,3` and the links of `one_way=3>1,3>2` (either may be missing,
/// not both).
type Partition = (Vec<Vec<u64>>, Vec<(u64, u64)>);

fn parse_partition(query: &str) -> Result<Partition, String> {
    let (groups, one_way) = (param(query, "groups"), param(query, "one_way"));
    if groups.is_none() && one_way.is_none() {
        return Err("give the groups as groups=1/2,3 or one-way cuts as one_way=3>1".into());
    }
    let groups = match groups {
        Some(text) => text
            .split('/')
            .map(|g| g.split(',').map(|id| member_id(id, &text)).collect())
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let one_way = match one_way {
        Some(text) => text
            .split(',')
            .map(|link| {
                let (from, to) = link
                    .split_once('>')
                    .ok_or_else(|| format!("{link:?} in {text:?} is not FROM>TO"))?;
                Ok((member_id(from, &text)?, member_id(to, &text)?))
            })
            .collect::<Result<_, String>>()?,
        None => Vec::new(),
    };
    Ok((groups, one_way))
}

impl Drop for MemberControl {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_partition;

    #[test]
    fn groups_and_one_way_links_are_read_as_zkd_reads_them() {
        assert_eq!(
            parse_partition("groups=1/2,3"),
            Ok((vec![vec![1], vec![2, 3]], vec![]))
        );
        assert_eq!(
            parse_partition("one_way=3%3E1,3>2&groups=1%2F2"),
            Ok((vec![vec![1], vec![2]], vec![(3, 1), (3, 2)]))
        );
        assert!(parse_partition("").is_err());
        assert!(parse_partition("one_way=3-1").is_err());
        assert!(parse_partition("groups=1/x").is_err());
    }
}
