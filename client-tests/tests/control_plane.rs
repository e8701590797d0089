//! The test control plane driven over the admin HTTP listener, observed through the
//! unmodified `zookeeper-client` crate.

#[path = "common/admin.rs"]
mod admin;
#[path = "common/zk_rust.rs"]
mod common;

use std::time::Duration;

use common::{ephemeral, persistent, within};
use zkd_server::{Config, Server};
use zookeeper_client as zk;

async fn start(config: Config) -> Server {
    Server::start(Config {
        port: 0,
        admin_port: Some(0),
        ..config
    })
    .await
    .expect("embedded zkd with an admin listener")
}

async fn client(server: &Server, timeout: Duration) -> zk::Client {
    within(
        "session establishment",
        zk::Client::connector()
            .with_session_timeout(timeout)
            .with_fail_eagerly()
            .connect(&server.local_addr().to_string()),
    )
    .await
    .expect("connect")
}

fn hex(id: i64) -> String {
    format!("0x{id:x}")
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_listener_is_off_unless_asked_and_loopback_by_default() {
    let plain = Server::start(Config {
        port: 0,
        ..Config::default()
    })
    .await
    .unwrap();
    assert_eq!(plain.admin_addr(), None);
    let with = start(Config::default()).await;
    let addr = with.admin_addr().expect("admin address");
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_ne!(addr.port(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_listed_and_expire_ends_one() {
    let server = start(Config::default()).await;
    let admin = server.admin_addr().unwrap();
    let owner = client(&server, Duration::from_secs(30)).await;
    let observer = client(&server, Duration::from_secs(30)).await;
    owner.create("/e", b"", &ephemeral()).await.unwrap();
    observer.create("/p", b"", &persistent()).await.unwrap();
    let (_, _, watch) = observer.get_and_watch_data("/e").await.unwrap();
    let mut owner_state = owner.state_watcher();

    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{list}");
    let sid = hex(owner.session_id().0);
    let row = sessions.iter().find(|s| s["id"] == sid.as_str()).unwrap();
    assert_eq!(row["timeout_ms"], 30000);
    assert_eq!(row["ephemerals"], 1);
    assert!(row["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    let watcher_row = sessions.iter().find(|s| s["id"] != sid.as_str()).unwrap();
    assert_eq!(watcher_row["watches"], 1, "{watcher_row}");

    admin::ok(admin, "POST", &format!("/zkd/sessions/{sid}/expire"), None).await;
    let event = within(
        "NodeDeleted for the expired session's ephemeral",
        watch.changed(),
    )
    .await;
    assert_eq!(event.event_type, zk::EventType::NodeDeleted);
    let state = within("the owner sees its session expire", async {
        loop {
            let s = owner_state.changed().await;
            if s.is_terminated() {
                return s;
            }
        }
    })
    .await;
    assert_eq!(state, zk::SessionState::Expired);
    assert!(observer.check_stat("/e").await.unwrap().is_none());
    let list = admin::ok(admin, "GET", "/zkd/sessions", None).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_json_errors_and_the_server_keeps_serving() {
    let server = start(Config::default()).await;
    let admin = server.admin_addr().unwrap();
    let a = admin::call(admin, "POST", "/zkd/sessions/0x77/expire", None).await;
    assert_eq!(a.status, 404);
    assert_eq!(admin::error_text(&a), "no session 0x77");
    let a = admin::call(admin, "POST", "/zkd/sessions/xyz/expire", None).await;
    assert_eq!(a.status, 400);
    assert!(admin::error_text(&a).contains("not a hexadecimal"));
    let a = admin::call(admin, "GET", "/no/such/route", None).await;
    assert_eq!(a.status, 404);
    assert!(admin::error_text(&a).contains("/no/such/route"));
    let c = client(&server, Duration::from_secs(10)).await;
    c.create("/still", b"", &persistent()).await.unwrap();
}
