//! The web view in a real headless browser: Debian's chromium driven through chromium-driver
//! (WebDriver over HTTP). The page is opened once; a node created by a client shows up in the
//! tree, the client's session appears in the sessions table, its watch appears under watches
//! by path, and a data change made by the client arrives in the open node pane without a
//! reload. A screenshot is saved to `target/tmp/web-view.png` (or `$ZKD_WEBVIEW_SCREENSHOT`).
//! Then the control actions, each answered in the browser's own confirmation dialog: a
//! dismissed expiry changes nothing; disconnect closes a session's connection and the client
//! resumes it; expire ends a session (it leaves the table, its ephemeral goes, its client is
//! told it expired when it comes back); reset empties the tree. On an ensemble, the member
//! cards: cutting the leader off and healing, from the page.
//!
//! And the attacker's side: a page on another origin tries every state-changing route and
//! the test controller with `<img>` GETs, text/plain form POSTs and `no-cors` fetches, and
//! tries to read the tree and the sessions; a name of the attacker's that resolves to
//! 127.0.0.1 (DNS rebinding) opens the admin routes directly. Nothing changes, nothing is
//! read.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use zkd_protocol::{PathWatchRequest, Request, SetDataRequest};
use zkd_testkit::raw::RawClient;

use crate::ensemble::cut_flags;

const NOT_INSTALLED: &str =
    "chromium and chromium-driver are not installed: run scripts/install-test-deps.sh";

/// How long the page may take to show any one change.
const WAIT: Duration = Duration::from_secs(20);
/// How long one WebDriver call may take.
const WD_TIMEOUT: Duration = Duration::from_secs(60);

/// chromedriver, killed on drop, with its own browser profile directory.
struct Driver {
    child: Child,
    url: String,
    profile: std::path::PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn wd(method: &str, url: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string());
    let (_, text) = zkd_testkit::http::call_within(url, method, body.as_deref(), WD_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: {e}: {text}"))
}

fn start_driver() -> Driver {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{NOT_INSTALLED} (cannot run chromedriver: {e})"));
    let profile =
        std::env::temp_dir().join(format!("zkd-webview-profile-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        profile,
    };
    let deadline = Instant::now() + WAIT;
    loop {
        let status = format!("{}/status", driver.url);
        let ready = zkd_testkit::http::call_within(&status, "GET", None, WD_TIMEOUT)
            .is_ok_and(|(_, t)| t.contains("\"ready\":true"));
        if ready {
            return driver;
        }
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One browser session.
struct Browser<'a> {
    driver: &'a Driver,
    session: String,
}

impl Browser<'_> {
    fn open(driver: &Driver) -> Browser<'_> {
        let caps = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                // Leave confirmation dialogs open for the test to read and answer.
                "unhandledPromptBehavior": "ignore",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": [
                        "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", "--window-size=1500,1000",
                        // A name of the attacker's that resolves to this machine.
                        "--host-resolver-rules=MAP evil.example 127.0.0.1",
                        format!("--user-data-dir={}", driver.profile.display()),
                    ],
                },
            }},
        });
        let r = wd("POST", &format!("{}/session", driver.url), Some(caps));
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_string();
        Browser { driver, session }
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/session/{}{tail}", self.driver.url, self.session)
    }

    fn go(&self, url: &str) {
        wd("POST", &self.url("/url"), Some(json!({ "url": url })));
    }

    /// Runs a script in the page and returns its value.
    fn eval(&self, script: &str) -> Value {
        wd(
            "POST",
            &self.url("/execute/sync"),
            Some(json!({ "script": script, "args": [] })),
        )["value"]
            .clone()
    }

    /// Waits until `script` returns true.
    fn wait_for(&self, what: &str, script: &str) {
        let deadline = Instant::now() + WAIT;
        while self.eval(script) != Value::Bool(true) {
            assert!(
                Instant::now() < deadline,
                "the page never showed {what}; page text:\n{}",
                self.eval("return document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Clicks the element `css` selects. The live page redraws its tables, so an element
    /// found may be replaced before the click reaches it (a stale element): then it is looked
    /// up again and clicked again.
    fn click(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let r = wd(
                "POST",
                &self.url("/element"),
                Some(json!({ "using": "css selector", "value": css })),
            );
            let id = r["value"]
                .as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no element {css}: {r}"))
                .to_string();
            let clicked = wd(
                "POST",
                &self.url(&format!("/element/{id}/click")),
                Some(json!({})),
            );
            let Some(error) = clicked["value"]["error"].as_str() else {
                return;
            };
            assert!(
                error == "stale element reference" && Instant::now() < deadline,
                "clicking {css}: {clicked}"
            );
        }
    }

    /// Waits for the page's confirmation dialog, checks its text, and accepts or dismisses it.
    fn answer_dialog(&self, expect: &str, accept: bool) {
        let deadline = Instant::now() + WAIT;
        let text = loop {
            let r = wd("GET", &self.url("/alert/text"), None);
            if let Some(t) = r["value"].as_str() {
                break t.to_string();
            }
            assert!(Instant::now() < deadline, "no confirmation dialog: {r}");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(text.contains(expect), "dialog {text:?} lacks {expect:?}");
        let verb = if accept { "accept" } else { "dismiss" };
        wd(
            "POST",
            &self.url(&format!("/alert/{verb}")),
            Some(json!({})),
        );
    }

    fn screenshot(&self) -> Vec<u8> {
        let r = wd("GET", &self.url("/screenshot"), None);
        let b64 = r["value"].as_str().expect("screenshot data");
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("screenshot base64")
    }
}

impl Drop for Browser<'_> {
    fn drop(&mut self) {
        let _ = zkd_testkit::http::call_within(&self.url(""), "DELETE", None, WD_TIMEOUT);
    }
}

fn create(path: &str, data: &'static [u8], flags: i32) -> Request {
    zkd_testkit::raw::create(path, Some(Bytes::from_static(data)), flags)
}

/// Starts a browser, opens `page` in it and runs `f` on it, off the runtime; the browser and
/// its driver end with `f`.
async fn in_browser<T: Send + 'static>(
    page: String,
    f: impl FnOnce(&Browser) -> T + Send + 'static,
) -> T {
    let driver = tokio::task::spawn_blocking(start_driver)
        .await
        .expect("driver");
    tokio::task::spawn_blocking(move || {
        let b = Browser::open(&driver);
        b.go(&page);
        f(&b)
    })
    .await
    .expect("browser")
}

/// A raw client with a new 30 s session.
async fn new_session(at: SocketAddr) -> RawClient {
    RawClient::connect(at, 30_000).await.expect("session")
}

async fn call(c: &RawClient, r: Request) {
    let reply = c.call(&r).await.expect("call");
    assert_eq!(reply.err, 0, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_view_shows_live_state_in_a_real_browser() {
    let (server, admin) = zkd_testkit::target::zkd_with_admin(Default::default()).await;
    let page = format!("http://{admin}/");

    let driver = tokio::task::spawn_blocking(start_driver)
        .await
        .expect("driver");
    let driver = std::sync::Arc::new(driver);

    // Open the page first, so everything after arrives live.
    let d = driver.clone();
    let p = page.clone();
    let session = tokio::task::spawn_blocking(move || {
        let b = Browser::open(&d);
        b.go(&p);
        b.wait_for(
            "the tree root",
            r#"return !!document.querySelector('.node[data-path="/zookeeper"]')"#,
        );
        let s = b.session.clone();
        std::mem::forget(b);
        s
    })
    .await
    .expect("browser");

    let client = new_session(server.local_addr()).await;
    call(&client, create("/app", b"", 0)).await;
    call(&client, create("/app/config", b"{\"color\":\"blue\"}", 0)).await;
    call(&client, create("/app/member-", b"m", 3)).await;
    call(
        &client,
        Request::GetData(PathWatchRequest {
            path: "/app/config".into(),
            watch: true,
        }),
    )
    .await;
    call(
        &client,
        Request::GetChildren(PathWatchRequest {
            path: "/app".into(),
            watch: true,
        }),
    )
    .await;
    let sid = format!("0x{:x}", client.session_id);

    let d = driver.clone();
    let s = session.clone();
    let sid2 = sid.clone();
    tokio::task::spawn_blocking(move || {
        let b = Browser {
            driver: &d,
            session: s,
        };
        b.wait_for(
            "the node created by the client",
            r#"return !!document.querySelector('.node[data-path="/app"]')"#,
        );
        b.wait_for(
            "the client's session",
            &format!("return !!document.querySelector('#sessions tr[data-session=\"{sid2}\"]')"),
        );
        b.wait_for(
            "the client's watch",
            r#"return !!document.querySelector('#watched tr[data-watched="/app/config"]')"#,
        );
        // Open /app and select its config node.
        b.eval(r#"document.querySelector('li[data-path="/app"] > .toggle').click(); return true"#);
        b.wait_for(
            "the children of /app",
            r#"return !!document.querySelector('.node[data-path="/app/config"]')"#,
        );
        b.click(r#".node[data-path="/app/config"]"#);
        b.wait_for(
            "the node's data",
            r#"return document.getElementById('nodeData').textContent.includes('blue')"#,
        );
        std::mem::forget(b);
    })
    .await
    .expect("browser checks");

    // A data change made by the client arrives without a reload.
    call(
        &client,
        Request::SetData(SetDataRequest {
            path: "/app/config".into(),
            data: Some(Bytes::from_static(b"{\"color\":\"green\"}")),
            version: -1,
        }),
    )
    .await;
    let d = driver.clone();
    let png = tokio::task::spawn_blocking(move || {
        let b = Browser {
            driver: &d,
            session,
        };
        b.wait_for(
            "the data change",
            r#"return document.getElementById('nodeData').textContent.includes('green')"#,
        );
        b.wait_for(
            "the notification count",
            r#"return document.getElementById('sNotif').textContent !== '0'"#,
        );
        let png = b.screenshot();
        drop(b);
        png
    })
    .await
    .expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let out = std::env::var_os("ZKD_WEBVIEW_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-view.png"));
    std::fs::write(&out, &png).expect("save screenshot");

    control_actions(&server, &page, driver, &client).await;
    drop(client);
}

/// The CSS selector of session `sid`'s row in the sessions table, followed by `tail`.
fn row(sid: &str, tail: &str) -> String {
    format!("#sessions tr[data-session=\"{sid}\"]{tail}")
}

fn page_has(css: &str) -> String {
    format!("return !!document.querySelector('{css}')")
}

/// Clicks a session row's action button and answers its confirmation, which must name the
/// action and the session.
fn session_action(b: &Browser, sid: &str, button: &str, verb: &str, accept: bool) {
    b.click(&row(sid, &format!(" .{button}")));
    b.answer_dialog(&format!("{verb} session {sid}?"), accept);
}

/// Opens the page in a fresh browser session, waits until it shows `css`, then runs `steps`.
async fn on_page(
    driver: &std::sync::Arc<Driver>,
    page: &str,
    css: String,
    steps: impl FnOnce(&Browser) + Send + 'static,
) {
    let (d, p) = (driver.clone(), page.to_string());
    tokio::task::spawn_blocking(move || {
        let b = Browser::open(&d);
        b.go(&p);
        b.wait_for(&format!("{css} on the page"), &page_has(&css));
        steps(&b);
    })
    .await
    .expect("browser steps");
}

async fn control_actions(
    server: &zkd_server::Server,
    page: &str,
    driver: std::sync::Arc<Driver>,
    watcher: &RawClient,
) {
    // A second session with an ephemeral node, to disconnect and then expire.
    let addr = server.local_addr();
    let other = RawClient::connect(addr, 30_000).await.expect("session");
    call(&other, create("/app/worker", b"w", 1)).await;
    let sid = format!("0x{:x}", other.session_id);
    let (id, passwd) = (other.session_id, other.passwd.clone());
    let mut events = watcher.events();

    let s2 = sid.clone();
    on_page(&driver, page, row(&sid, ""), move |b| {
        // Dismissed: nothing happens.
        session_action(b, &s2, "expire", "Expire", false);
        b.wait_for(
            "the cancel message",
            "return document.getElementById('actionMsg').textContent.includes('cancelled')",
        );
        // Disconnect, confirmed.
        session_action(b, &s2, "disconnect", "Disconnect", true);
        b.wait_for(
            "the disconnect message",
            &format!(
                "return document.getElementById('actionMsg').textContent === 'session {s2} disconnected'"
            ),
        );
    })
    .await;
    // The session lived on: its client resumes it on a new connection.
    assert!(
        within(other.call(&Request::Ping)).await.is_err(),
        "the old connection is closed"
    );
    let resumed = RawClient::resume(addr, id, passwd.clone(), 30_000, 0)
        .await
        .expect("the session survives a disconnect");
    drop(resumed);

    let s2 = sid.clone();
    on_page(&driver, page, row(&sid, ""), move |b| {
        session_action(b, &s2, "expire", "Expire", true);
        b.wait_for(
            "the session to leave the table",
            &format!("return !document.querySelector('{}')", row(&s2, "")),
        );
    })
    .await;
    // Expired: its ephemeral is gone and its client is told so when it comes back.
    let gone = watcher
        .call(&Request::Exists(PathWatchRequest {
            path: "/app/worker".into(),
            watch: false,
        }))
        .await
        .expect("exists");
    assert_eq!(gone.err, zkd_protocol::ErrorCode::NoNode as i32);
    assert!(matches!(
        RawClient::resume(addr, id, passwd, 30_000, 0).await,
        Err(zkd_testkit::raw::ClientError::Rejected)
    ));

    // Reset, confirmed: the tree loses /app, and a client watching a node sees it deleted.
    call(
        watcher,
        Request::Exists(PathWatchRequest {
            path: "/app/config".into(),
            watch: true,
        }),
    )
    .await;
    on_page(&driver, page, ".node[data-path=\"/app\"]".into(), |b| {
        b.click("#reset");
        b.answer_dialog("Reset the tree?", true);
        b.wait_for(
            "/app to leave the tree",
            "return !document.querySelector('.node[data-path=\"/app\"]')",
        );
    })
    .await;
    let events = events.as_mut().expect("event stream");
    loop {
        let e = within(events.recv()).await.expect("a notification");
        if e.path == "/app/config" && e.event_type == zkd_protocol::event_type::NODE_DELETED {
            break;
        }
    }
}

async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut).await.expect("in time")
}

/// Serves `html` to every request on a free loopback port (another origin than the admin
/// listener's); returns the page's address.
async fn serve_page(html: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("page listener");
    let url = format!("http://{}/", listener.local_addr().expect("page address"));
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let html = html.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

/// The attacker's page: every state-changing route of `admin` and the test controller's
/// commands, each as an `<img>` GET, a text/plain form POST (its body a valid fault rule) and
/// `no-cors` fetches; then CORS reads of the tree, the sessions, a node and a report. Sets
/// the title to `done` once every attempt has ended, and `window.reads` to what each read
/// got.
fn attack_page(admin: SocketAddr, sid: &str) -> String {
    let changes = [
        format!("/zkd/sessions/{sid}/expire"),
        format!("/zkd/sessions/{sid}/disconnect"),
        "/zkd/pause".into(),
        "/zkd/faults".into(),
        "/zkd/reset?sessions=expire".into(),
        "/zkd/clock/advance?ms=100000".into(),
        "/zkd/snapshot".into(),
        "/zkd/members/1/stop".into(),
        "/zkd/members/1/lag?ms=1000".into(),
        "/zkd/partition?groups=1".into(),
        "/zkd/heal".into(),
        "/command/shutdown".into(),
        "/command/expiresession".into(),
        "/command/closeconnection".into(),
        "/command/rejectconnections".into(),
        "/command/failrequests".into(),
        "/command/noresponse".into(),
        "/command/adddelay/5000".into(),
    ];
    let changes = serde_json::to_string(&changes).expect("json");
    format!(
        r#"<!doctype html><html><head><title>attack</title></head><body><script>
const A = "http://{admin}";
const changes = {changes};
const reads = ["/zkd/tree", "/zkd/sessions", "/zkd/node?path=/app", "/commands/dump", "/zkd/overview"];
const pending = [];
const ended = (p) => pending.push(p.catch(() => {{}}));
const fault = JSON.stringify({{ action: "error", code: "CONNECTIONLOSS" }});
for (const p of changes) {{
  ended(new Promise((r) => {{
    const i = new Image(); i.onload = r; i.onerror = r; i.src = A + p; document.body.appendChild(i);
  }}));
}}
changes.forEach((p, n) => {{
  const frame = document.createElement("iframe");
  frame.name = "f" + n; frame.style.display = "none"; document.body.appendChild(frame);
  const form = document.createElement("form");
  form.method = "POST"; form.enctype = "text/plain"; form.action = A + p; form.target = "f" + n;
  const field = document.createElement("input");
  field.name = '{{"action":"error","code":"CONNECTIONLOSS","x":"'; field.value = '"}}';
  form.appendChild(field); document.body.appendChild(form);
  ended(new Promise((r) => {{ frame.onload = r; setTimeout(r, 5000); }}));
  form.submit();
}});
for (const p of changes) {{
  ended(fetch(A + p, {{ method: "POST", mode: "no-cors", body: fault, headers: {{ "Content-Type": "text/plain" }} }}));
  ended(fetch(A + p, {{ mode: "no-cors" }}));
}}
window.reads = {{}};
for (const p of reads) {{
  ended(fetch(A + p).then((r) => r.text()).then(
    (t) => {{ window.reads[p] = "read: " + t; }},
    (e) => {{ window.reads[p] = "failed: " + e; }}));
}}
Promise.all(pending).then(() => {{ document.title = "done"; }});
</script></body></html>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_origin_changes_nothing_and_reads_nothing() {
    let (server, admin) = zkd_testkit::target::zkd_with_admin(zkd_server::Config {
        clock: zkd_server::ClockMode::Manual,
        ..Default::default()
    })
    .await;
    let client = new_session(server.local_addr()).await;
    call(&client, create("/app", b"secret", 0)).await;
    call(&client, create("/app/worker", b"w", 1)).await;
    let sid = format!("0x{:x}", client.session_id);
    let evil = serve_page(attack_page(admin, &sid)).await;
    let rebound: Vec<String> = ["/zkd/tree", "/zkd/node?path=/app", "/command/shutdown"]
        .iter()
        .map(|p| format!("http://evil.example:{}{p}", admin.port()))
        .collect();

    let (reads, rebound_pages) = in_browser(evil, move |b| {
        b.wait_for("the end of the attack", "return document.title === 'done'");
        let reads = b.eval("return window.reads");
        let pages: Vec<String> = rebound
            .iter()
            .map(|url| {
                b.go(url);
                b.eval("return document.body.innerText")
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        (reads, pages)
    })
    .await;

    // Nothing was read.
    let reads = reads.as_object().expect("the page's reads");
    assert_eq!(reads.len(), 5, "{reads:?}");
    for (path, got) in reads {
        let got = got.as_str().unwrap_or_default();
        assert!(got.starts_with("failed: "), "the page read {path}: {got}");
    }
    for page in &rebound_pages {
        assert!(page.contains("is not this server"), "{page}");
        assert!(
            !page.contains("secret") && !page.contains("c2VjcmV0"),
            "{page}"
        );
    }

    // Nothing changed: the server answers, the session and its ephemeral live, the tree is
    // whole, no fault rule, no pause, the clock did not move, new clients are accepted.
    let addr = server.local_addr();
    let ruok = tokio::task::spawn_blocking(move || {
        zkd_testkit::oracle::four_letter_word(addr, "ruok").expect("ruok")
    })
    .await
    .expect("ruok");
    assert_eq!(ruok, "imok");
    let unwatched = |path: &str| PathWatchRequest {
        path: path.into(),
        watch: false,
    };
    for (request, what) in [
        (
            Request::GetData(unwatched("/app")),
            "the session is alive and answered",
        ),
        (
            Request::Exists(unwatched("/app/worker")),
            "the ephemeral node is still there",
        ),
    ] {
        let reply = within(client.call(&request)).await.expect(what);
        assert_eq!(reply.err, 0, "{what}");
    }
    let (faults, clock, sessions) = tokio::task::spawn_blocking(move || {
        let get = |path: &str| wd("GET", &format!("http://{admin}{path}"), None);
        (get("/zkd/faults"), get("/zkd/clock"), get("/zkd/sessions"))
    })
    .await
    .expect("admin reads");
    assert_eq!(faults["faults"], json!([]), "no fault rule");
    assert_eq!(clock["paused"], json!(false), "{clock}");
    assert_eq!(clock["elapsed_ms"], json!(0), "{clock}");
    assert!(sessions.to_string().contains(&sid), "{sessions}");
    let other = RawClient::connect(addr, 30_000)
        .await
        .expect("a new client is accepted");
    drop(other);
    drop(client);
}

/// On `zkd --ensemble 3` the page shows a card per member and draws a partition: cutting the
/// leader off from the page moves it to a side of its own (read-only), another member leads,
/// and healing joins them again. A screenshot of the split is saved to
/// `target/tmp/web-view-members.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_view_shows_the_members_and_cuts_and_heals_a_partition() {
    let config = zkd_server::Config {
        ensemble: Some(zkd_server::EnsembleConfig::numbered(3, 0).expect("three members")),
        ..Default::default()
    };
    let (server, admin) = zkd_testkit::target::zkd_with_admin(config).await;
    let page = format!("http://{admin}/");
    let first = server.members().expect("members")[0].client_addr;
    let _client = RawClient::connect(first, 30_000)
        .await
        .expect("a session on 1");
    let driver = tokio::task::spawn_blocking(start_driver)
        .await
        .expect("driver");
    let driver = std::sync::Arc::new(driver);
    let (tx, rx) = std::sync::mpsc::channel();
    on_page(&driver, &page, ".card[data-member=\"3\"]".into(), move |b| {
        b.wait_for(
            "member 3 leading and member 1's connection",
            r#"const c = document.querySelector('.card[data-member="3"] .role');
               const one = document.querySelector('.card[data-member="1"]');
               return !!c && c.textContent === 'leader' && one.textContent.includes('1 connection')"#,
        );
        b.click(".card[data-member=\"3\"] .cut");
        b.answer_dialog("Cut member 3 off from the others?", true);
        b.wait_for(
            "member 3 on a side of its own, member 2 leading",
            r#"const cut = document.querySelector('.side.cut .card[data-member="3"] .role');
               const two = document.querySelector('.card[data-member="2"] .role');
               return !!cut && cut.textContent === 'read-only' && two.textContent === 'leader'"#,
        );
        let _ = tx.send(b.screenshot());
        b.click("#heal");
        b.answer_dialog("Heal the partition?", true);
        b.wait_for(
            "no member cut off",
            r#"return !document.querySelector('.side.cut') && document.getElementById('heal').hidden"#,
        );
    })
    .await;
    let png = rx.recv().expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-view-members.png");
    std::fs::write(&out, &png).expect("save screenshot");
    assert_eq!(cut_flags(&server), [false, false, false], "healed");
}

/// The timeline page (`GET /timeline`) in the browser: it reads the history, draws a lane per
/// session, and a click on a session's expiry shows the event; with the checks' findings
/// listed. A screenshot goes to `target/tmp/timeline.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_page_draws_the_history_and_shows_an_event_on_click() {
    let (server, admin) = zkd_testkit::target::zkd_with_admin(Default::default()).await;
    let a = new_session(server.local_addr()).await;
    let b = new_session(server.local_addr()).await;
    call(&a, create("/timeline", b"x", 0)).await;
    call(&b, create("/timeline/b", b"y", 1)).await;
    let expired = format!("0x{:x}", b.session_id);
    // Apart from the requests on the time axis, so that a click finds the expiry alone.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    server.expire_session(b.session_id).expect("expire");
    let page = format!("http://{admin}/timeline");
    let (detail, png) = in_browser(page, move |b| {
        b.wait_for(
            "the lanes of both sessions",
            &format!(
                "return typeof lanes !== 'undefined' && lanes.includes('session {expired}') \
                 && lanes.length >= 2"
            ),
        );
        let detail = b.eval(&format!(
            r#"const e = events.find(x => x.kind === 'session_expired' && x.session === '{expired}');
               const r = canvas.getBoundingClientRect();
               const x = xOf(e.mono_ms, r.width), y = AXIS_H + laneOf.get(e._lane) * ROW_H + ROW_H / 2;
               canvas.dispatchEvent(new MouseEvent('click', {{ clientX: r.left + x, clientY: r.top + y }}));
               return document.getElementById('detail').textContent"#
        ));
        let png = b.screenshot();
        (detail, png)
    })
    .await;
    let detail = detail.as_str().unwrap_or_default().to_string();
    assert!(detail.contains("\"kind\": \"session_expired\""), "{detail}");
    assert!(detail.contains("/timeline/b"), "its ephemeral: {detail}");
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("timeline.png");
    std::fs::write(&out, &png).expect("save screenshot");
}
