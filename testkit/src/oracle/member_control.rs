//! A minimal HTTP endpoint answering `POST /zkd/members/{id}/stop|start` the way zkd's
//! control plane does, over an Apache ZooKeeper ensemble, so the ensemble client suites can
//! stop and start real members with the same calls (the client suites and the differential
//! ensemble programs both use it). Over an ensemble in network namespaces it also answers
//! `POST /zkd/partition?groups=1/2,3` (members named in no group form one more group) and
//! `POST /zkd/heal`, cutting the namespaces' links as zkd's routes cut its members.

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
            parse_groups(query).and_then(|groups| cuts.split(&groups))
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

/// The groups of `groups=1/2,3` (`%2F`, `%2C` and spaces allowed).
fn parse_groups(query: &str) -> Result<Vec<Vec<u64>>, String> {
    let text = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("groups="))
        .ok_or("give the groups as groups=1/2,3")?;
    let text = text
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%2C", ",")
        .replace("%2c", ",")
        .replace("%20", "")
        .replace('+', "");
    text.split('/')
        .map(|group| {
            group
                .split(',')
                .map(|id| {
                    id.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{id:?} in {text:?} is not a member id"))
                })
                .collect()
        })
        .collect()
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
