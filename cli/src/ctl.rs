//! `zkd ctl`: drives a running zkd's control plane over its admin HTTP listener and prints
//! the outcome for people (default) or as JSON (`--json`).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::Value;

/// `zkd ctl --admin HOST:PORT <operation>`.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The admin listener, as printed by the server's `zkd admin on HOST:PORT` line.
    #[arg(long, value_name = "HOST:PORT")]
    admin: String,

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
}

/// A failed call: the sentence to print.
struct Failure(String);

/// Runs one control operation; exit code 1 with a sentence on stderr if it failed.
pub fn run(args: CtlArgs) -> ExitCode {
    let client = Client::new(&args.admin);
    let result = match &args.op {
        Op::Sessions => client.call("GET", "/zkd/sessions").map(|v| {
            if args.json {
                v.to_string()
            } else {
                sessions_table(&v)
            }
        }),
        Op::Expire { id } => client
            .call("POST", &format!("/zkd/sessions/{id}/expire"))
            .map(|v| human_or_json(&v, args.json, || format!("session {id} expired"))),
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
            human_or_json(&v, args.json, || {
                let field = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
                format!(
                    "snapshot {} written to {} ({} bytes)",
                    field("zxid").as_str().unwrap_or("?"),
                    field("path").as_str().unwrap_or("?"),
                    field("bytes")
                )
            })
        }),
    };
    match result {
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

fn human_or_json(v: &Value, json: bool, human: impl FnOnce() -> String) -> String {
    if json {
        v.to_string()
    } else {
        human()
    }
}

/// The admin API over HTTP/1.1.
struct Client {
    base: String,
    agent: ureq::Agent,
}

impl Client {
    fn new(admin: &str) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Client {
            base: format!("http://{admin}"),
            agent,
        }
    }

    /// Sends `method path` (with an optional JSON body) and returns the JSON answer, or the
    /// server's error sentence, or why the server could not be reached.
    fn call(&self, method: &str, path: &str) -> Result<Value, Failure> {
        self.call_with(method, path, None)
    }

    fn call_with(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Failure> {
        let url = format!("{}{}", self.base, path);
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, Some(b)) => self.agent.post(&url).send_json(b),
            (_, None) => self.agent.post(&url).send_empty(),
        };
        let mut response = response.map_err(|e| {
            Failure(format!(
                "cannot reach the zkd admin listener at {}: {e}",
                self.base.trim_start_matches("http://")
            ))
        })?;
        let status = response.status();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| Failure(format!("cannot read the server's answer: {e}")))?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            Failure(format!(
                "the server answered {status} with a body that is not JSON: {}",
                text.chars().take(200).collect::<String>()
            ))
        })?;
        if !status.is_success() {
            let msg = value
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            return Err(Failure(format!(
                "the server refused ({}): {msg}",
                status.as_u16()
            )));
        }
        Ok(value)
    }
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
