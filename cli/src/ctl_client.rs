//! What the `zkd ctl` commands share: the client of the admin HTTP listener, the failure a
//! command reports, answers printed as text or JSON, and durations as written on the command
//! line.

use std::time::Duration;

use serde_json::Value;

/// A failed call: the sentence to print.
pub(crate) struct Failure(pub(crate) String);

/// A field of an answer as text (a string without its quotes); `None` when it is absent or
/// null.
pub(crate) fn field_text(v: &Value, key: &str) -> Option<String> {
    v.get(key).filter(|x| !x.is_null()).map(|x| match x {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// How a rule's line starts: `#<id> <action>`.
pub(crate) fn rule_head(v: &Value) -> String {
    format!(
        "#{} {}",
        field_text(v, "id").unwrap_or_default(),
        field_text(v, "action").unwrap_or_default()
    )
}

/// Parses `500ms`, `31s`, `2m`, `1h` or a bare number of milliseconds.
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, Failure> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "ms"),
    };
    let factor = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => 0,
    };
    match num.parse::<u64>() {
        Ok(n) if factor > 0 && !num.is_empty() => n
            .checked_mul(factor)
            .ok_or_else(|| Failure(format!("duration {text:?} is too long"))),
        _ => Err(Failure(format!(
            "{text:?} is not a duration; write a whole number with ms, s, m or h (e.g. 500ms, 31s)"
        ))),
    }
}

/// The answer `v` as JSON when `json` is set, else as `human` writes it for people.
pub(crate) fn human_or_json(v: &Value, json: bool, human: impl FnOnce() -> String) -> String {
    if json {
        v.to_string()
    } else {
        human()
    }
}

/// The admin API over HTTP/1.1.
pub(crate) struct Client {
    base: String,
    agent: ureq::Agent,
}

impl Client {
    pub(crate) fn new(admin: &str) -> Client {
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
    pub(crate) fn call(&self, method: &str, path: &str) -> Result<Value, Failure> {
        self.call_with(method, path, None)
    }

    pub(crate) fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let (status, text) = self.send(method, path, body)?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            Failure(format!(
                "the server answered {status} with a body that is not JSON: {}",
                text.chars().take(200).collect::<String>()
            ))
        })?;
        if !status.is_success() {
            return Err(refused(status, &value));
        }
        Ok(value)
    }

    /// `GET path` answered with text (JSON Lines): the body, or the server's error
    /// sentence, or why the server could not be reached.
    pub(crate) fn get_text(&self, path: &str) -> Result<String, Failure> {
        let (status, text) = self.send("GET", path, None)?;
        if !status.is_success() {
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Err(refused(status, &value));
        }
        Ok(text)
    }

    /// Sends `method path` and reads the whole answer.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(ureq::http::StatusCode, String), Failure> {
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
        Ok((status, text))
    }
}

/// The server's refusal as a sentence.
fn refused(status: ureq::http::StatusCode, value: &Value) -> Failure {
    let msg = value
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("no reason given");
    Failure(format!("the server refused ({}): {msg}", status.as_u16()))
}
