//! `zkd ctl members`: list, stop and start the members of a simulated ensemble.

use clap::Subcommand;
use serde_json::Value;

use crate::ctl::{human_or_json, Client, Failure};

#[derive(Subcommand, Debug)]
pub enum MembersOp {
    /// List every member: id, client address, mode, state.
    List,
    /// Stop a member: its listener closes, its clients fail over to the others.
    Stop {
        /// The member's server id.
        id: u64,
    },
    /// Start a stopped member again on its old address.
    Start {
        /// The member's server id.
        id: u64,
    },
}

pub(crate) fn run(client: &Client, op: &MembersOp, json: bool) -> Result<String, Failure> {
    let (method, path, done) = match op {
        MembersOp::List => ("GET", "/zkd/members".to_string(), None),
        MembersOp::Stop { id } => (
            "POST",
            format!("/zkd/members/{id}/stop"),
            Some(format!("member {id} stopped")),
        ),
        MembersOp::Start { id } => (
            "POST",
            format!("/zkd/members/{id}/start"),
            Some(format!("member {id} started")),
        ),
    };
    client.call(method, &path).map(|v| {
        human_or_json(&v, json, || match done {
            Some(line) => format!("{line}\n{}", table(&v)),
            None => table(&v),
        })
    })
}

/// One line per member: `ID  ADDRESS  MODE  STATE`.
fn table(v: &Value) -> String {
    let mut lines = vec![format!(
        "{:<4} {:<22} {:<10} {}",
        "ID", "ADDRESS", "MODE", "STATE"
    )];
    for m in v
        .get("members")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| match m.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "?".to_string(),
        };
        lines.push(format!(
            "{:<4} {:<22} {:<10} {}",
            field("id"),
            field("client_address"),
            field("mode"),
            field("state")
        ));
    }
    lines.join("\n")
}
