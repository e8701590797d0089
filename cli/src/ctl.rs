//! `zkd ctl`: drives a running zkd's control plane over its admin HTTP listener and prints
//! the outcome for people (default) or as JSON (`--json`).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::ctl_client::{field_text, human_or_json, parse_duration_ms, rule_head, Client, Failure};

/// `zkd ctl --admin HOST:PORT <operation>`, or `zkd ctl gen-certs DIR` (no server needed).
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The admin listener, as printed by the server's `zkd admin on HOST:PORT` line (needed
    /// by every operation but gen-certs).
    #[arg(long, value_name = "HOST:PORT")]
    admin: Option<String>,

    /// Print the server's JSON answer instead of a human-readable summary.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    op: Op,
}

#[derive(Subcommand, Debug)]
enum Op {
    /// List every session: id, timeout, peer, ephemerals, watches, time since last heard.
    Sessions,
    /// Expire a session now, as a timeout would (ephemerals deleted, watches fired).
    Expire {
        /// Session id in hex, as ZooKeeper prints it (e.g. 0x1000a2b3c4d0000).
        id: String,
    },
    /// Print the tree (outside /zookeeper, without ephemerals) as a JSON fixture, the format
    /// `zkd --seed` reads.
    Export {
        /// Write to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
    /// Write a snapshot to the server's data directory now.
    Snapshot,
    /// Close a session's connection only; its client reconnects within its timeout.
    Disconnect {
        /// Session id in hex.
        id: String,
    },
    /// Stop reading requests and writing replies (a stop-the-world pause).
    Pause {
        /// End the pause by itself after this long (e.g. 500ms, 6s); default: until resume.
        duration: Option<String>,
        /// Stop the session clock during the pause (default: it runs on, so sessions whose
        /// clients give up expire on resume).
        #[arg(long)]
        freeze_clock: bool,
    },
    /// End a pause.
    Resume,
    /// Fault rules matched on requests.
    #[command(subcommand)]
    Fault(FaultOp),
    /// Network faults on client connections: blackhole, drop-replies, latency.
    #[command(subcommand)]
    NetFault(crate::net_faults::NetFaultOp),
    /// Delete every node except /zookeeper.
    Reset {
        /// Expire every session too.
        #[arg(long)]
        expire_sessions: bool,
    },
    /// The session clock (`--clock manual` servers can be moved).
    #[command(subcommand)]
    Clock(ClockOp),
    /// Write a throwaway CA, a server certificate (localhost, 127.0.0.1, ::1) and two client
    /// certificates (x509:CN=client1,O=zkd and x509:CN=client2,O=zkd) as PEM files into DIR,
    /// for the secure port in tests. Needs no running server.
    GenCerts {
        /// Directory to write into (created if needed).
        dir: std::path::PathBuf,
        /// Replace certificates already in DIR.
        #[arg(long)]
        force: bool,
    },
    /// What happened, in the server's order: connections, handshakes, requests and their
    /// outcomes, watches, notifications, sessions' ends, control-plane actions; one line per
    /// event (`--json`: the JSON Lines). See docs/history.md.
    History(crate::history::HistoryArgs),
    /// The members of an ensemble (`zkd --ensemble N`): list, stop, start.
    #[command(subcommand)]
    Members(crate::members::MembersOp),
    /// Split an ensemble's members into groups, as in `partition 1 / 2,3`, or cut links one
    /// way, as in `partition --one-way '3>1'`: the side with a majority of the voters keeps
    /// the quorum; every other member is cut off from it.
    Partition {
        /// Member ids separated by commas, groups by `/`.
        #[arg(num_args = 0.., required_unless_present = "one_way")]
        groups: Vec<String>,
        /// Links cut one way, FROM>TO (what member FROM sends member TO is lost), several
        /// separated by commas or given again: `--one-way '3>1,3>2'`. Quote them: `>` is
        /// the shell's redirection.
        #[arg(long, value_name = "FROM>TO")]
        one_way: Vec<String>,
    },
    /// End a partition: the cut members catch up and serve again.
    Heal,
}

#[derive(Subcommand, Debug)]
enum FaultOp {
    /// Add a rule: error, drop-before, drop-after, delay or no-response.
    Add {
        /// error | drop-before | drop-after | delay | no-response
        action: String,
        /// For `error`: the ZooKeeper error code (e.g. -4 or CONNECTIONLOSS).
        #[arg(long, allow_hyphen_values = true)]
        code: Option<String>,
        /// For `delay`: how long to hold the reply (e.g. 300ms, 2s).
        #[arg(long)]
        delay: Option<String>,
        /// Match this opcode only (a number or a name such as create, getData).
        #[arg(long)]
        opcode: Option<String>,
        /// Match requests whose path starts with this prefix.
        #[arg(long)]
        path: Option<String>,
        /// Match this session only (hex id).
        #[arg(long)]
        session: Option<String>,
        /// Fire this many times, then stop (default: until removed).
        #[arg(long)]
        count: Option<u64>,
    },
    /// List the rules and how often each fired.
    List,
    /// Remove every rule.
    Clear,
    /// Remove one rule by id.
    Remove { id: u64 },
}

#[derive(Subcommand, Debug)]
enum ClockOp {
    /// Show the clock's mode and reading.
    Show,
    /// Move a manual clock forward (e.g. 31s, 500ms, 2m) and run what fell due.
    Advance { duration: String },
}

/// Why an operation cannot run without `--admin`.
const NEEDS_ADMIN: &str = "this operation needs the server's admin listener: --admin HOST:PORT";

/// Runs one control operation; exit code 1 with a sentence on stderr if it failed (2 when
/// `--admin` is missing).
pub fn run(args: CtlArgs) -> ExitCode {
    if args.admin.is_none() && !matches!(args.op, Op::GenCerts { .. }) {
        eprintln!("zkd ctl: {NEEDS_ADMIN}");
        return ExitCode::from(2);
    }
    match execute(&args) {
        Ok(text) => {
            if !text.is_empty() {
                println!("{text}");
            }
            ExitCode::SUCCESS
        }
        Err(Failure(msg)) => {
            eprintln!("zkd ctl: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// A clock step: a duration of at most the longest TTL (2^40 - 1 ms, about 34.8 years),
/// which is far enough to expire anything; the server refuses more too.
fn clock_step_ms(text: &str) -> Result<u64, Failure> {
    let ms = parse_duration_ms(text)?;
    let max = zkd_server::fixture::MAX_TTL_MS as u64;
    if ms > max {
        return Err(Failure(format!(
            "clock advance {text:?} is {ms} ms, too far: the clock moves at most {max} ms \
             (2^40 - 1 ms, about 34.8 years, the longest TTL) in one step"
        )));
    }
    Ok(ms)
}

fn execute(args: &CtlArgs) -> Result<String, Failure> {
    let client = match (&args.op, &args.admin) {
        (Op::GenCerts { dir, force }, _) => {
            return crate::gen_certs::generate(dir, *force).map_err(Failure)
        }
        (_, Some(admin)) => Client::new(admin),
        (_, None) => return Err(Failure(NEEDS_ADMIN.into())),
    };
    let json = args.json;
    match &args.op {
        Op::Sessions => client
            .call("GET", "/zkd/sessions")
            .map(|v| human_or_json(&v, json, || sessions_table(&v))),
        Op::Expire { id } => client
            .call("POST", &format!("/zkd/sessions/{id}/expire"))
            .map(|v| human_or_json(&v, json, || format!("session {id} expired"))),
        Op::Export { out } => client.call("GET", "/zkd/tree").and_then(|v| {
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            match out {
                None => Ok(text),
                Some(path) => std::fs::write(path, text + "\n")
                    .map(|()| String::new())
                    .map_err(|e| Failure(format!("cannot write {}: {e}", path.display()))),
            }
        }),
        Op::Snapshot => client.call("POST", "/zkd/snapshot").map(|v| {
            human_or_json(&v, json, || {
                let field = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
                format!(
                    "snapshot {} written to {} ({} bytes)",
                    field("zxid").as_str().unwrap_or("?"),
                    field("path").as_str().unwrap_or("?"),
                    field("bytes")
                )
            })
        }),
        Op::Disconnect { id } => client
            .call("POST", &format!("/zkd/sessions/{id}/disconnect"))
            .map(|v| human_or_json(&v, json, || format!("session {id} disconnected"))),
        Op::Pause {
            duration,
            freeze_clock,
        } => {
            let mut q = Vec::new();
            if let Some(d) = duration {
                q.push(format!("ms={}", parse_duration_ms(d)?));
            }
            if *freeze_clock {
                q.push("clock=freeze".to_string());
            }
            let path = if q.is_empty() {
                "/zkd/pause".to_string()
            } else {
                format!("/zkd/pause?{}", q.join("&"))
            };
            client.call("POST", &path).map(|v| {
                human_or_json(&v, json, || {
                    let clock = if *freeze_clock {
                        "the session clock is stopped"
                    } else {
                        "the session clock runs on"
                    };
                    match duration {
                        Some(d) => format!("paused for {d}; {clock}"),
                        None => format!("paused until resume; {clock}"),
                    }
                })
            })
        }
        Op::Resume => client
            .call("POST", "/zkd/resume")
            .map(|v| human_or_json(&v, json, || "resumed".to_string())),
        Op::Fault(op) => fault(&client, op, json),
        Op::NetFault(op) => crate::net_faults::run(&client, op, json),
        Op::Reset { expire_sessions } => {
            let path = if *expire_sessions {
                "/zkd/reset?sessions=expire"
            } else {
                "/zkd/reset"
            };
            client.call("POST", path).map(|v| {
                human_or_json(&v, json, || {
                    let n = v.get("deleted_nodes").and_then(Value::as_u64).unwrap_or(0);
                    if *expire_sessions {
                        format!("deleted {n} nodes and expired every session")
                    } else {
                        format!("deleted {n} nodes")
                    }
                })
            })
        }
        Op::Clock(ClockOp::Show) => client
            .call("GET", "/zkd/clock")
            .map(|v| human_or_json(&v, json, || clock_line(&v))),
        Op::Members(op) => crate::members::run(&client, op, json),
        Op::History(h) => crate::history::run(&client, h, json),
        Op::Partition { groups, one_way } => {
            crate::members::partition(&client, &groups.join(" "), &one_way.join(","), json)
        }
        Op::Heal => crate::members::heal(&client, json),
        Op::Clock(ClockOp::Advance { duration }) => {
            let ms = clock_step_ms(duration)?;
            client
                .call("POST", &format!("/zkd/clock/advance?ms={ms}"))
                .map(|v| human_or_json(&v, json, || clock_line(&v)))
        }
        Op::GenCerts { .. } => Ok(String::new()),
    }
}

fn clock_line(v: &Value) -> String {
    format!(
        "{} clock, {} ms since start{}",
        v.get("mode").and_then(Value::as_str).unwrap_or("?"),
        v.get("elapsed_ms").and_then(Value::as_i64).unwrap_or(0),
        if v.get("paused").and_then(Value::as_bool) == Some(true) {
            " (paused)"
        } else {
            ""
        }
    )
}

fn fault(client: &Client, op: &FaultOp, json: bool) -> Result<String, Failure> {
    match op {
        FaultOp::Add {
            action,
            code,
            delay,
            opcode,
            path,
            session,
            count,
        } => {
            let mut body = serde_json::Map::new();
            body.insert("action".into(), Value::from(action.as_str()));
            if let Some(c) = code {
                body.insert("code".into(), number_or_name(c));
            }
            if let Some(d) = delay {
                body.insert("ms".into(), Value::from(parse_duration_ms(d)?));
            }
            if let Some(o) = opcode {
                body.insert("opcode".into(), number_or_name(o));
            }
            if let Some(p) = path {
                body.insert("path".into(), Value::from(p.as_str()));
            }
            if let Some(s) = session {
                body.insert("session".into(), Value::from(s.as_str()));
            }
            if let Some(n) = count {
                body.insert("count".into(), Value::from(*n));
            }
            client
                .call_with("POST", "/zkd/faults", Some(&Value::Object(body)))
                .map(|v| human_or_json(&v, json, || format!("added {}", fault_line(&v))))
        }
        FaultOp::List => client.call("GET", "/zkd/faults").map(|v| {
            human_or_json(&v, json, || {
                let empty = Vec::new();
                let list = v.get("faults").and_then(Value::as_array).unwrap_or(&empty);
                if list.is_empty() {
                    "no fault rules".to_string()
                } else {
                    list.iter().map(fault_line).collect::<Vec<_>>().join("\n")
                }
            })
        }),
        FaultOp::Clear => client.call("DELETE", "/zkd/faults").map(|v| {
            human_or_json(&v, json, || {
                format!(
                    "removed {} fault rules",
                    v.get("removed").and_then(Value::as_u64).unwrap_or(0)
                )
            })
        }),
        FaultOp::Remove { id } => client
            .call("DELETE", &format!("/zkd/faults/{id}"))
            .map(|v| human_or_json(&v, json, || format!("removed fault rule {id}"))),
    }
}

/// One rule on one line: `#3 drop-after opcode=1 path=/locks, fired 2, 1 left`.
fn fault_line(v: &Value) -> String {
    let text = |k: &str| field_text(v, k);
    let mut line = rule_head(v);
    for k in ["code", "ms", "opcode", "path", "session"] {
        if let Some(x) = text(k) {
            line.push_str(&format!(" {k}={x}"));
        }
    }
    line.push_str(&format!(
        ", fired {}",
        text("fired").unwrap_or_else(|| "0".into())
    ));
    match text("remaining") {
        Some(r) => line.push_str(&format!(", {r} left")),
        None => line.push_str(", until removed"),
    }
    line
}

fn sessions_table(v: &Value) -> String {
    let empty = Vec::new();
    let list = v
        .get("sessions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if list.is_empty() {
        return "no sessions".to_string();
    }
    let mut out = format!(
        "{:<20} {:>9} {:<24} {:>10} {:>7} {:>10}",
        "SESSION", "TIMEOUT", "PEER", "EPHEMERALS", "WATCHES", "LAST HEARD"
    );
    for s in list {
        let field = |k: &str| s.get(k).cloned().unwrap_or(Value::Null);
        let text = |k: &str| match field(k) {
            Value::String(s) => s,
            Value::Null => "-".to_string(),
            other => other.to_string(),
        };
        out.push_str(&format!(
            "\n{:<20} {:>7}ms {:<24} {:>10} {:>7} {:>8}ms",
            text("id"),
            text("timeout_ms"),
            text("peer"),
            text("ephemerals"),
            text("watches"),
            text("last_heard_ms_ago"),
        ));
    }
    out
}

/// A JSON number when `text` is an integer (an error code, an opcode), else its name.
fn number_or_name(text: &str) -> Value {
    text.parse::<i64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::from(text))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_fault_rule_reads_as_one_line() {
        let rule = json!({ "id": 3, "action": "drop-after", "opcode": 1, "path": "/locks",
                           "session": null, "fired": 2, "remaining": 1 });
        assert_eq!(
            fault_line(&rule),
            "#3 drop-after opcode=1 path=/locks, fired 2, 1 left"
        );
        let rule = json!({ "id": 4, "action": "delay", "ms": 50, "remaining": null });
        assert_eq!(fault_line(&rule), "#4 delay ms=50, fired 0, until removed");
    }
}
