//! A small HTTP client for zkd's admin listener, for the control-plane tests.
// Each test binary that includes this module uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

/// Status and JSON body of one admin call.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// Calls the admin API (`method` GET, POST or DELETE) with an optional raw body.
pub async fn call(admin: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Answer {
    let url = format!("http://{admin}{path}");
    let method = method.to_string();
    let body = body.map(str::to_string);
    tokio::task::spawn_blocking(move || {
        let (status, text) = zkd_testkit::http::call(&url, &method, body.as_deref())
            .unwrap_or_else(|e| panic!("{e}"));
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {url}: answer {text:?} is not JSON: {e}"));
        Answer { status, body }
    })
    .await
    .unwrap_or_else(|e| panic!("admin call panicked: {e}"))
}

/// Calls the admin API and insists on a 2xx answer.
pub async fn ok(admin: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Value {
    let a = call(admin, method, path, body).await;
    assert!(
        (200..300).contains(&a.status),
        "{method} {path} answered {}: {}",
        a.status,
        a.body
    );
    a.body
}

/// A session id as the admin API writes it (`0x…`).
pub fn hex(id: i64) -> String {
    format!("0x{id:x}")
}

/// `POST /zkd/sessions/{sid}/{action}` (`expire`, `disconnect`), insisting on a 2xx answer.
pub async fn on_session(admin: SocketAddr, sid: i64, action: &str) -> Value {
    let path = format!("/zkd/sessions/{}/{action}", hex(sid));
    ok(admin, "POST", &path, None).await
}

/// Calls the admin API without a body and insists on an error answer with `status` and an
/// error sentence; returns the sentence.
pub async fn refused(admin: SocketAddr, method: &str, path: &str, status: u16) -> String {
    let a = call(admin, method, path, None).await;
    assert_eq!(a.status, status, "{method} {path}: {}", a.body);
    let text = error_text(&a);
    assert!(!text.is_empty(), "{method} {path}: an empty error sentence");
    text.to_string()
}

/// The error sentence of an error answer.
pub fn error_text(a: &Answer) -> &str {
    a.body
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("answer without an error sentence: {}", a.body))
}

/// Sends one HTTP/1.1 request as written here (`headers` are whole lines such as
/// `"Host: evil.example"`; none is added but `Connection: close` and an empty body's length)
/// and returns the status and the body as text.
pub async fn raw(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("Connection: close\r\nContent-Length: 0\r\n\r\n");
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer in 30 s"))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: not an HTTP answer: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Runs `zkd ctl --admin ADMIN ARGS...` (the workspace's binary): its exit code and its
/// stdout followed by its stderr.
pub fn zkd_ctl(admin: &str, args: &[&str]) -> (Option<i32>, String) {
    let bin = zkd_client_tests::certs::zkd_binary().unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(bin)
        .args(["ctl", "--admin", admin])
        .args(args)
        .output()
        .expect("zkd ctl runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}
