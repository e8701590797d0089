//! `zkd ctl members`: list, stop and start the members of a simulated ensemble, and make one
//! lag behind the others; `zkd ctl partition` and `zkd ctl heal` split and join them.

use clap::Subcommand;
use serde_json::Value;

use crate::ctl_client::{human_or_json, parse_duration_ms, Client, Failure};

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
    /// Make a member trail the committed history: its clients read older data until they
    /// sync(), and their watches fire when it catches up.
    #[command(group(clap::ArgGroup::new("how").required(true)))]
    Lag {
        /// The member's server id.
        id: u64,
        /// Apply each transaction this long after it committed (e.g. 500ms, 5s; 0 = in step).
        #[arg(long, group = "how", value_name = "DURATION")]
        ms: Option<String>,
        /// Stay this many transactions behind (0 = in step).
        #[arg(long, group = "how", value_name = "K")]
        txns: Option<u64>,
        /// Apply nothing until the lag is changed.
        #[arg(long, group = "how")]
        stall: bool,
        /// In step with the others again.
        #[arg(long, group = "how")]
        lockstep: bool,
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
        MembersOp::Lag {
            id,
            ms,
            txns,
            stall,
            lockstep: _,
        } => {
            let query = match (ms, txns, stall) {
                (Some(d), _, _) => format!("ms={}", parse_duration_ms(d)?),
                (_, Some(k), _) => format!("txns={k}"),
                (_, _, true) => "stall=true".to_string(),
                _ => "stall=false".to_string(),
            };
            let v = client.call("POST", &format!("/zkd/members/{id}/lag?{query}"))?;
            return Ok(human_or_json(&v, json, || {
                let field = |k: &str| v.get(k).map_or("?".into(), text);
                format!(
                    "member {id} lag {} (applied zxid {}, {} transactions behind)",
                    field("lag"),
                    field("zxid"),
                    field("behind")
                )
            }));
        }
    };
    client.call(method, &path).map(|v| {
        human_or_json(&v, json, || match done {
            Some(line) => format!("{line}\n{}", table(&v)),
            None => table(&v),
        })
    })
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line per member: `ID  ADDRESS  MODE  STATE  LAG`, and `cut off` for a member a
/// partition cuts off.
fn table(v: &Value) -> String {
    let mut lines = vec![format!(
        "{:<4} {:<22} {:<10} {:<8} {}",
        "ID", "ADDRESS", "MODE", "STATE", "LAG"
    )];
    for m in v
        .get("members")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| m.get(k).map_or("?".into(), text);
        let cut = if m.get("cut").and_then(Value::as_bool) == Some(true) {
            "  cut off"
        } else {
            ""
        };
        lines.push(format!(
            "{:<4} {:<22} {:<10} {:<8} {}{cut}",
            field("id"),
            field("client_address"),
            field("mode"),
            field("state"),
            field("lag")
        ));
    }
    lines.join("\n")
}

/// `zkd ctl partition 1 / 2,3` and `zkd ctl partition --one-way '3>1'`: the groups and the
/// one-way cuts go to the server as written (it reads them).
pub(crate) fn partition(
    client: &Client,
    groups: &str,
    one_way: &str,
    json: bool,
) -> Result<String, Failure> {
    let escape = |text: &str| -> String {
        text.chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| match c {
                '/' => "%2F".to_string(),
                ',' => "%2C".to_string(),
                '>' => "%3E".to_string(),
                c => c.to_string(),
            })
            .collect()
    };
    let mut query = Vec::new();
    if !groups.trim().is_empty() {
        query.push(format!("groups={}", escape(groups)));
    }
    if !one_way.trim().is_empty() {
        query.push(format!("one_way={}", escape(one_way)));
    }
    let v = client.call("POST", &format!("/zkd/partition?{}", query.join("&")))?;
    let what = match (groups.trim(), one_way.trim()) {
        (g, "") => g.to_string(),
        ("", c) => format!("one way {c}"),
        (g, c) => format!("{g}, one way {c}"),
    };
    Ok(human_or_json(&v, json, || {
        format!("partitioned: {what}\n{}", table(&v))
    }))
}

/// `zkd ctl heal`.
pub(crate) fn heal(client: &Client, json: bool) -> Result<String, Failure> {
    let v = client.call("POST", "/zkd/heal")?;
    Ok(human_or_json(&v, json, || format!("healed\n{}", table(&v))))
}
