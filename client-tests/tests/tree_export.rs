//! `GET /zkd/tree` on a tree larger than one page of the export: the answer comes as a chunked
//! body produced page by page, and its bytes are those of the whole document encoded at
//! once (compact JSON, the fixture format), with parents before children, siblings in name
//! order, no ephemerals and no `/zookeeper`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use zkd_testkit::raw::{create, RawClient};
use zkd_testkit::target::zkd_with_admin;

/// Sends every request pipelined and checks each answer.
async fn all_ok(c: &RawClient, paths: &[String], flags: i32, data: &[u8]) {
    let mut pending = Vec::new();
    for p in paths {
        let req = create(p, Some(Bytes::copy_from_slice(data)), flags);
        pending.push(c.send(&req).await.expect("send"));
    }
    for rx in pending {
        assert_eq!(rx.await.expect("reply").err, 0);
    }
}

/// One GET over HTTP/1.1: the response head and the de-chunked body.
fn get_chunked(admin: SocketAddr, path: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(admin).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response");
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let mut rest = &raw[end + 4..];
    let mut body = Vec::new();
    let mut chunks = 0;
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = usize::from_str_radix(
            std::str::from_utf8(&rest[..line_end]).expect("hex size"),
            16,
        )
        .expect("chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        assert_eq!(&rest[size..size + 2], b"\r\n", "chunk end");
        rest = &rest[size + 2..];
        chunks += 1;
    }
    assert!(chunks > 1, "one chunk only: the export was not paged");
    (head, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_export_streams_the_same_bytes_in_pages() {
    let (server, admin) = zkd_with_admin(zkd_server::Config::default()).await;
    let c = RawClient::connect(server.local_addr(), 10_000)
        .await
        .expect("session");
    // 700 children under one parent, ephemerals among them, deep and binary nodes.
    let mut persistent: Vec<String> = vec!["/big".into(), "/deep".into(), "/deep/a".into()];
    persistent.extend((0..700).map(|i| format!("/big/n{i:04}")));
    persistent.extend(["/deep/a/b", "/deep/a/b/c", "/deep/a-b", "/zz"].map(String::from));
    all_ok(&c, &persistent, 0, b"text").await;
    let ephemeral: Vec<String> = (0..300).map(|i| format!("/big/e{i:04}")).collect();
    all_ok(&c, &ephemeral, 1, b"").await;
    all_ok(&c, &["/bin".to_string()], 0, &[0, 1, 2, 255]).await;

    let (head, body) = tokio::task::spawn_blocking(move || get_chunked(admin, "/zkd/tree"))
        .await
        .expect("fetch");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");

    // The bytes are the compact encoding of the whole document at once.
    let doc: Value = serde_json::from_slice(&body).expect("valid JSON");
    assert_eq!(serde_json::to_vec(&doc).expect("encode"), body);
    let nodes = doc["nodes"].as_array().expect("nodes");
    let paths: Vec<&str> = nodes.iter().filter_map(|n| n["path"].as_str()).collect();
    let mut expected: Vec<String> = persistent.clone();
    expected.push("/bin".into());
    // Parents before children and siblings in name order: sorting by path components.
    expected.sort_by(|a, b| a.split('/').cmp(b.split('/')));
    assert_eq!(paths, expected);
    assert!(nodes.iter().all(|n| n.get("ephemeral").is_none()));
    let bin = nodes.iter().find(|n| n["path"] == "/bin").expect("/bin");
    assert_eq!(bin["data_base64"], "AAEC/w==");
    assert_eq!(bin["stat"]["dataLength"], 4);
    drop(c);
    server.shutdown().await;
}
