//! Whom the HTTP listeners obey: every request passes [`check`] before its route.
//!
//! A browser on this machine can reach loopback ports, so every web page is treated as a
//! possible attacker. The rules, in order:
//!
//! 1. **Host.** The `Host` header (and an absolute request target) must name `localhost`, a
//!    loopback address, the address the request came in on, or a host named in
//!    `Config::admin_allow_hosts`; anything else is refused with 403. A page that points its
//!    own name at 127.0.0.1 (DNS rebinding) sends its own name here. The read-only
//!    AdminServer listener bound to a non-loopback address (a container's, reached by
//!    monitoring under the container's name) takes any host: whoever could rebind a name to
//!    it can reach it directly.
//! 2. **Origin.** A request with an `Origin` header is served only when the origin is this
//!    listener (`http://` and the request's `Host`); `Origin: null` is refused.
//! 3. **Fetch metadata.** A request with `Sec-Fetch-Site` other than `same-origin` or `none`
//!    (typed into the address bar) is refused, except a top-level navigation to the web
//!    view's page `/` (which holds no data; its own requests are then same-origin).
//! 4. **Browsers changing state.** A request that is not GET/HEAD from a browser (`Mozilla/`
//!    user agent) must carry an `Origin` (all current browsers send one), so a form on a page
//!    of an old browser cannot post here either.
//! 5. **The test controller** (`/command/...`), which changes state on GET as ZooKeeper's does,
//!    refuses any request with a browser's marks: `Origin`, `Referer`, `Cookie`, a
//!    `Sec-Fetch-*` header or a `Mozilla/` user agent. Programs (ZooKeeper's `CommandClient`,
//!    curl, the project's helpers) send none of these and keep the plain GET.
//!
//! A served request's body is then read whole, at most [`MAX_BODY`] bytes within
//! [`BODY_DEADLINE`], so a half-sent body cannot hold a handler. Every answer carries
//! `X-Content-Type-Options: nosniff` and `X-Frame-Options: DENY`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::listen::ConnInfo;
use super::ApiError;

/// Longest time a request body may take to arrive once its headers are in.
pub(crate) const BODY_DEADLINE: Duration = Duration::from_secs(10);
/// Largest request body taken (the admin API's bodies are small JSON documents).
pub(crate) const MAX_BODY: usize = 1 << 20;

/// The hosts a listener answers to besides loopback names and its own address.
#[derive(Debug, Default, Clone)]
pub(crate) struct Policy {
    /// `Config::admin_allow_hosts`, lower case, without a trailing dot.
    allow_hosts: Vec<String>,
    /// Whether any `Host` is taken (rule 1 off): the AdminServer listener bound to a
    /// non-loopback address, which the network reaches directly under any name.
    any_host: bool,
}

impl Policy {
    pub(crate) fn new(allow_hosts: &[String]) -> Policy {
        Policy {
            allow_hosts: allow_hosts.iter().map(|h| normalize(h)).collect(),
            any_host: false,
        }
    }

    /// The same policy taking requests under any host name (rules 2 to 5 still apply).
    pub(crate) fn any_host(&self) -> Policy {
        Policy {
            any_host: true,
            ..self.clone()
        }
    }

    /// Whether `host` (a `Host` header's host, without port) names this listener for a
    /// request that came in on `local`.
    fn host_allowed(&self, host: &str, local: Option<IpAddr>) -> bool {
        let host = normalize(host.trim_start_matches('[').trim_end_matches(']'));
        if host == "localhost" || self.allow_hosts.contains(&host) {
            return true;
        }
        let Ok(ip) = host.parse::<IpAddr>() else {
            return false;
        };
        let same = |other: IpAddr| other.to_canonical() == ip.to_canonical();
        ip.to_canonical().is_loopback()
            || local.is_some_and(same)
            || self
                .allow_hosts
                .iter()
                .filter_map(|h| h.parse::<IpAddr>().ok())
                .any(same)
    }

    /// Rules 1 to 5 of the module's documentation: `Err` is the refusal to send.
    pub(crate) fn admit(
        &self,
        method: &Method,
        path: &str,
        authority: Option<&str>,
        headers: &HeaderMap,
        local: Option<IpAddr>,
    ) -> Result<(), ApiError> {
        let text = |name: header::HeaderName| -> Result<Option<&str>, ApiError> {
            match headers.get(&name) {
                None => Ok(None),
                Some(v) => v
                    .to_str()
                    .map(Some)
                    .map_err(|_| forbidden(format!("the {name} header is not printable text"))),
            }
        };
        let host = text(header::HOST)?;
        for name in host.into_iter().chain(authority) {
            let host_only = split_host_port(name)
                .map_err(|why| forbidden(format!("Host {name:?} is not a host name: {why}")))?;
            if !self.any_host && !self.host_allowed(host_only, local) {
                return Err(forbidden(format!(
                    "Host {name:?} is not this server: this listener answers requests addressed \
                     to localhost, a loopback address or the address it is reached on (name \
                     other hosts with --admin-allow-host)"
                )));
            }
        }

        let origin = text(header::ORIGIN)?;
        if let Some(origin) = origin {
            let same = host.is_some_and(|h| {
                origin
                    .strip_prefix("http://")
                    .is_some_and(|o| o.eq_ignore_ascii_case(h))
            });
            if !same {
                return Err(forbidden(format!(
                    "cross-origin request refused: it comes from a page of {origin}, not from \
                     this listener's own page"
                )));
            }
        }

        let fetch_site = text(header::HeaderName::from_static("sec-fetch-site"))?;
        if let Some(site) = fetch_site {
            let own = site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none");
            if !own && !opens_the_page(method, path, headers) {
                return Err(forbidden(format!(
                    "cross-site request refused: the browser marks it {site} (only this \
                     listener's own page may use it)"
                )));
            }
        }

        let browser_agent = text(header::USER_AGENT)?.is_some_and(|ua| ua.starts_with("Mozilla/"));
        if !matches!(*method, Method::GET | Method::HEAD) && browser_agent && origin.is_none() {
            return Err(forbidden(
                "a browser's request that changes state must carry an Origin header",
            ));
        }

        if path.starts_with("/command/") {
            let marks = [
                header::ORIGIN,
                header::REFERER,
                header::COOKIE,
                header::HeaderName::from_static("sec-fetch-site"),
                header::HeaderName::from_static("sec-fetch-mode"),
                header::HeaderName::from_static("sec-fetch-dest"),
                header::HeaderName::from_static("sec-fetch-user"),
            ];
            let mark = marks
                .iter()
                .find(|m| headers.contains_key(*m))
                .map(|m| m.to_string())
                .or_else(|| browser_agent.then(|| "a browser's User-Agent".to_string()));
            if let Some(mark) = mark {
                return Err(forbidden(format!(
                    "the test controller's commands are not taken from a browser (the request \
                     carries {mark}); send them from a program such as curl or ZooKeeper's \
                     CommandClient"
                )));
            }
        }
        Ok(())
    }
}

/// A top-level navigation to the web view's page: it holds no data, and whatever it then
/// fetches is same-origin.
fn opens_the_page(method: &Method, path: &str, headers: &HeaderMap) -> bool {
    let is = |name: &'static str, value: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case(value))
    };
    matches!(*method, Method::GET | Method::HEAD)
        && path == "/"
        && is("sec-fetch-mode", "navigate")
        && is("sec-fetch-dest", "document")
}

/// The host part of a `Host` header or a request target's authority, `host[:port]`, read
/// strictly: the host is a name (letters, digits, `-`, `_` and dots), an IPv4 address or an
/// IPv6 address in brackets; the port, when a colon follows, is one to five digits naming a
/// port from 1 to 65535, with nothing after it. `Err` says what is wrong.
pub(crate) fn split_host_port(text: &str) -> Result<&str, &'static str> {
    let (host, rest) = if let Some(inner) = text.strip_prefix('[') {
        let Some((addr, rest)) = inner.split_once(']') else {
            return Err("an IPv6 address opens a bracket it does not close");
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("the text in brackets is not an IPv6 address");
        }
        (&text[..addr.len() + 2], rest)
    } else {
        let end = text.find(':').unwrap_or(text.len());
        let (host, rest) = text.split_at(end);
        let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if host.is_empty() || !host.chars().all(name_char) {
            return Err("the host is not a name or an address (an IPv6 address goes in brackets)");
        }
        (host, rest)
    };
    if rest.is_empty() {
        return Ok(host);
    }
    let Some(port) = rest.strip_prefix(':') else {
        return Err("something other than a port follows the host");
    };
    let digits = !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    match port.parse::<u32>() {
        Ok(n) if digits && (1..=65535).contains(&n) => Ok(host),
        _ => Err("the port is not a number from 1 to 65535 with nothing after it"),
    }
}

/// Lower case, without a trailing dot (`LocalHost.` is `localhost`).
fn normalize(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, message)
}

/// The middleware: refuses what [`Policy::admit`] refuses, reads the body within its
/// deadline, and adds the answer's protective headers.
pub(crate) async fn check(State(policy): State<Arc<Policy>>, req: Request, next: Next) -> Response {
    let conn = req.extensions().get::<ConnInfo>().copied();
    let verdict = policy.admit(
        req.method(),
        req.uri().path(),
        req.uri().authority().map(|a| a.as_str()),
        req.headers(),
        conn.map(|c| c.local.ip()),
    );
    let mut response = match verdict {
        Err(refusal) => {
            super::listen::log_refusal(
                super::listen::Refusal::Request,
                conn.map(|c| c.peer),
                &format!("{} {}: {}", req.method(), req.uri().path(), refusal.message),
            );
            refusal.into_response()
        }
        Ok(()) => {
            let (parts, body) = req.into_parts();
            match tokio::time::timeout(BODY_DEADLINE, axum::body::to_bytes(body, MAX_BODY)).await
            {
                Err(_) => ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request body did not arrive within {} s",
                        BODY_DEADLINE.as_secs()
                    ),
                )
                .into_response(),
                Ok(Err(e)) => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request body could not be taken ({e}); bodies are at most {MAX_BODY} bytes"
                    ),
                )
                .into_response(),
                Ok(Ok(bytes)) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
            }
        }
    };
    let h = response.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    fn admit(policy: &Policy, method: Method, path: &str, pairs: &[(&'static str, &str)]) -> bool {
        let local = Some(IpAddr::from([10, 1, 2, 3]));
        policy
            .admit(&method, path, None, &headers(pairs), local)
            .is_ok()
    }

    #[test]
    fn hosts() {
        let p = Policy::new(&["Zk1.Example.".to_string(), "192.0.2.7".to_string()]);
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:80",
            "[::ffff:127.0.0.1]",
            "10.1.2.3:5",
            "zk1.example",
            "zk1.example.:9",
            "192.0.2.7",
        ] {
            assert!(admit(&p, Method::GET, "/", &[("host", ok)]), "{ok}");
        }
        for bad in [
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.1.2.4",
            "0.0.0.0",
            "zk2.example",
            "",
            "a b",
            "localhost:1.evil.example",
            "127.0.0.1:1x",
            "[::1]:80.evil.example",
            "localhost:",
            "localhost:0",
            "localhost:65536",
            "localhost:+80",
            "localhost:80:80",
            "user@localhost",
            "[::1",
            "[localhost]",
            "::1",
            "[::1]x",
        ] {
            assert!(!admit(&p, Method::GET, "/", &[("host", bad)]), "{bad}");
        }
        // Any host, for a listener the network reaches directly; the other rules still hold.
        let open = p.any_host();
        assert!(admit(
            &open,
            Method::GET,
            "/",
            &[("host", "zk-container:8080")]
        ));
        assert!(!admit(
            &open,
            Method::GET,
            "/",
            &[
                ("host", "zk-container:8080"),
                ("origin", "http://evil.example")
            ]
        ));
        // No Host at all (HTTP/1.0 from a program): nothing to check.
        assert!(admit(&p, Method::GET, "/", &[]));
        assert!(admit(&p, Method::GET, "/", &[("host", "localhost:65535")]));
        assert!(admit(&p, Method::GET, "/", &[("host", "[::1]")]));
        // Parsed strictly on a listener taking any host too.
        assert!(!admit(
            &open,
            Method::GET,
            "/",
            &[("host", "zk:1.evil.example")]
        ));
        // An absolute request target is checked too.
        let h = headers(&[("host", "localhost")]);
        assert!(p
            .admit(&Method::GET, "/", Some("evil.example:80"), &h, None)
            .is_err());
    }

    #[test]
    fn origins_and_fetch_metadata() {
        let p = Policy::default();
        let host = ("host", "127.0.0.1:9000");
        let own = ("origin", "http://127.0.0.1:9000");
        assert!(admit(&p, Method::POST, "/zkd/reset", &[host, own]));
        for other in [
            "http://127.0.0.1:9001",
            "null",
            "https://127.0.0.1:9000",
            "http://evil.example",
        ] {
            assert!(
                !admit(&p, Method::POST, "/zkd/reset", &[host, ("origin", other)]),
                "{other}"
            );
            assert!(
                !admit(&p, Method::GET, "/zkd/sessions", &[host, ("origin", other)]),
                "{other}"
            );
        }
        for site in ["same-site", "cross-site", "bogus"] {
            assert!(!admit(
                &p,
                Method::GET,
                "/zkd/tree",
                &[host, ("sec-fetch-site", site)]
            ));
        }
        for site in ["same-origin", "none"] {
            assert!(admit(
                &p,
                Method::GET,
                "/zkd/tree",
                &[host, ("sec-fetch-site", site)]
            ));
        }
        // A link from another site may open the page itself, nothing else.
        let nav = [
            host,
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
        ];
        assert!(admit(&p, Method::GET, "/", &nav));
        assert!(!admit(&p, Method::GET, "/zkd/tree", &nav));
        assert!(!admit(&p, Method::POST, "/", &nav));
        let framed = [
            host,
            ("sec-fetch-site", "same-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "iframe"),
        ];
        assert!(!admit(&p, Method::GET, "/", &framed));
        // An old browser's form post: no Origin, no fetch metadata.
        let ua = ("user-agent", "Mozilla/5.0 (X11; Linux x86_64)");
        assert!(!admit(&p, Method::POST, "/zkd/reset", &[host, ua]));
        assert!(admit(&p, Method::POST, "/zkd/reset", &[host, ua, own]));
        assert!(admit(&p, Method::GET, "/zkd/sessions", &[host, ua]));
        assert!(admit(
            &p,
            Method::POST,
            "/zkd/reset",
            &[host, ("user-agent", "curl/8.0")]
        ));
    }

    #[test]
    fn the_test_controller_takes_programs_only() {
        let p = Policy::default();
        let host = ("host", "localhost:9000");
        // What ZooKeeper's CommandClient (Jetty's HttpClient) sends.
        let jetty = [
            host,
            ("user-agent", "Jetty/9.4.43"),
            ("accept-encoding", "gzip"),
        ];
        assert!(admit(&p, Method::GET, "/command/shutdown", &jetty));
        assert!(admit(&p, Method::GET, "/command/ping", &[host]));
        for mark in [
            ("origin", "http://localhost:9000"),
            ("referer", "http://localhost:9000/"),
            ("cookie", "a=b"),
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-mode", "no-cors"),
            ("sec-fetch-dest", "image"),
            ("sec-fetch-user", "?1"),
            ("user-agent", "Mozilla/5.0"),
        ] {
            assert!(
                !admit(&p, Method::GET, "/command/shutdown", &[host, mark]),
                "{mark:?}"
            );
            assert!(
                !admit(&p, Method::POST, "/command/reset", &[host, mark]),
                "{mark:?}"
            );
        }
    }
}
