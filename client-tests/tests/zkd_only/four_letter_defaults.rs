//! The four-letter words a server started with default settings answers: none of them names a
//! znode path, a session id or a client address, and none changes state; every other word
//! answers "not in the whitelist". A whitelisted server answers them all.

use std::net::SocketAddr;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkd_protocol::{FourLetterWord, PathWatchRequest, Request};
use zkd_testkit::raw::RawClient;

async fn four_letter(addr: SocketAddr, word: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(word.as_bytes()).await.expect("send word");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read answer");
    String::from_utf8_lossy(&out).into_owned()
}

fn create(path: &str, flags: i32) -> Request {
    zkd_testkit::raw::create(path, Some(Bytes::from_static(b"x")), flags)
}

/// A session owning an ephemeral node and watching two paths.
async fn populate(addr: SocketAddr) -> RawClient {
    let c = RawClient::connect(addr, 10_000).await.expect("session");
    assert_eq!(
        c.call(&create("/private-app", 0))
            .await
            .expect("create")
            .err,
        0
    );
    let eph = c
        .call(&create("/private-app/member", 1))
        .await
        .expect("create");
    assert_eq!(eph.err, 0);
    for path in ["/private-app", "/private-missing"] {
        let watch = Request::Exists(PathWatchRequest {
            path: path.to_string(),
            watch: true,
        });
        c.call(&watch).await.expect("exists");
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_words_disclose_no_path_session_or_address() {
    let server = zkd_server::Server::start(zkd_server::Config {
        port: 0,
        ..Default::default()
    })
    .await
    .expect("start");
    let addr = server.local_addr();
    let client = populate(addr).await;
    let session_dec = client.session_id.to_string();
    let session_hex = format!("{:x}", client.session_id);

    let mut answered = Vec::new();
    for word in FourLetterWord::ALL {
        let w = word.as_str();
        let out = four_letter(addr, w).await;
        if out == format!("{w} is not executed because it is not in the whitelist.\n") {
            continue;
        }
        answered.push(w);
        assert!(!out.contains("/private"), "{w} names a path: {out}");
        assert!(!out.contains(&session_hex), "{w} names a session: {out}");
        assert!(!out.contains(&session_dec), "{w} names a session: {out}");
        assert!(!out.contains("127.0.0.1"), "{w} names an address: {out}");
    }
    answered.sort_unstable();
    assert_eq!(
        answered,
        ["conf", "dirs", "gtmk", "hash", "isro", "mntr", "ruok", "srvr", "wchs"]
    );
    // The words that would have disclosed something do, once whitelisted (so the check above
    // can fail).
    drop(server);

    let server = zkd_server::Server::start(zkd_server::Config {
        port: 0,
        four_letter_whitelist: zkd_server::FourLetterWhitelist::parse("dump,wchc,cons")
            .expect("valid list"),
        ..Default::default()
    })
    .await
    .expect("start");
    let addr = server.local_addr();
    let client = populate(addr).await;
    let session_hex = format!("{:x}", client.session_id);
    let dump = four_letter(addr, "dump").await;
    assert!(dump.contains("/private-app/member"), "{dump}");
    assert!(four_letter(addr, "wchc").await.contains("/private-app"));
    let cons = four_letter(addr, "cons").await;
    assert!(
        cons.contains(&session_hex) && cons.contains("/127.0.0.1:"),
        "{cons}"
    );
    assert_eq!(
        four_letter(addr, "srst").await,
        "srst is not executed because it is not in the whitelist.\n"
    );
}
