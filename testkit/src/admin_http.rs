//! Calls to zkd's admin HTTP listener (or a stand-in serving the same routes), for tests: one
//! request, answered with its status and body text whatever the status.

use std::time::Duration;

/// How long a call may take before it is given up.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `method` (GET, DELETE or POST) to `url`; a POST carries `json` as its body when
/// given (as `application/json`), else none. Returns the status and the body's text (empty
/// when it cannot be read), or `"{method} {url}: {why}"` when no answer came. Blocks: call it
/// from `tokio::task::spawn_blocking` in async tests.
pub fn call(url: &str, method: &str, json: Option<&str>) -> Result<(u16, String), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .build()
        .into();
    let response = match (method, json) {
        ("GET", _) => agent.get(url).call(),
        ("DELETE", _) => agent.delete(url).call(),
        (_, Some(body)) => agent
            .post(url)
            .header("content-type", "application/json")
            .send(body.as_bytes()),
        (_, None) => agent.post(url).send_empty(),
    };
    let mut response = response.map_err(|e| format!("{method} {url}: {e}"))?;
    let status = response.status().as_u16();
    Ok((
        status,
        response.body_mut().read_to_string().unwrap_or_default(),
    ))
}
