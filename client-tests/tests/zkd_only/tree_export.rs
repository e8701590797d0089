//! `GET /zkd/tree` on a tree larger than one page of the export: the answer comes as a chunked
//! body produced page by page, and its bytes are those of the whole document encoded at
//! once (compact JSON, the fixture format), with parents before children, siblings in name
//! order, no ephemerals and no `/zookeeper`.
//!
//! The export shows what a client without credentials may see, as `/zkd/node` does: the data
//! of a node `world:anyone` may not read is withheld, and digest ACL entries show `user:x`
//! unless `world:anyone` has ADMIN.

use std::io::Read;
use std::net::SocketAddr;
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
    let host = admin.to_string();
    let mut s = zkd_testkit::http::send_get(admin, path, &host, Duration::from_secs(60));
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

/// A create request with `acl`.
fn create_with_acl(
    path: &str,
    data: &'static [u8],
    acl: Vec<zkd_protocol::Acl>,
) -> zkd_protocol::Request {
    zkd_protocol::Request::Create(zkd_protocol::Create {
        op: zkd_protocol::OpCode::Create,
        path: path.to_string(),
        data: Some(Bytes::from_static(data)),
        acl,
        flags: 0,
        ttl: -1,
    })
}

fn acl(perms: i32, scheme: &str, id: &str) -> zkd_protocol::Acl {
    zkd_protocol::Acl {
        perms,
        id: zkd_protocol::Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }
}

fn get_json(admin: SocketAddr, path: &str) -> (String, Value) {
    let mut r = ureq::get(&format!("http://{admin}{path}"))
        .call()
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let text = r.body_mut().read_to_string().expect("body");
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (text, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_and_the_node_view_withhold_what_world_cannot_read() {
    const HASH: &str = "smGaoVKd/cQkjm7b88GyorAUz20=";
    let digest = format!("user:{HASH}");
    let (server, admin) = zkd_with_admin(zkd_server::Config::default()).await;
    let c = RawClient::connect(server.local_addr(), 10_000)
        .await
        .expect("session");
    let nodes = [
        // Digest only: neither data nor hash shown.
        ("/secret", vec![acl(31, "digest", &digest)]),
        // World may read but not administer: data shown, hash not.
        (
            "/shared",
            vec![acl(1, "world", "anyone"), acl(31, "digest", &digest)],
        ),
        // World may administer: the ACL is shown whole, as getACL shows it.
        (
            "/open",
            vec![acl(31, "world", "anyone"), acl(31, "digest", &digest)],
        ),
    ];
    for (path, list) in nodes {
        let reply = c
            .call(&create_with_acl(path, b"s3cr3t-data", list))
            .await
            .expect("create");
        assert_eq!(reply.err, 0, "{path}");
    }

    let (text, doc) = tokio::task::spawn_blocking(move || get_json(admin, "/zkd/tree"))
        .await
        .expect("fetch");
    let node = |p: &str| {
        doc["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["path"] == p)
            .unwrap_or_else(|| panic!("{p} exported: {doc}"))
            .clone()
    };
    let secret = node("/secret");
    assert_eq!(secret["data_withheld"], true, "{secret}");
    assert_eq!(secret["acl_withheld"], true, "{secret}");
    assert!(secret.get("data").is_none() && secret.get("data_base64").is_none());
    assert_eq!(secret["acl"][0]["id"], "user:x");
    let shared = node("/shared");
    assert_eq!(shared["data"], "s3cr3t-data");
    assert_eq!(shared["acl"][1]["id"], "user:x");
    assert_eq!(shared["acl_withheld"], true, "{shared}");
    assert!(shared.get("data_withheld").is_none(), "{shared}");
    let open = node("/open");
    assert_eq!(open["acl"][1]["id"], digest.as_str());
    assert!(open.get("acl_withheld").is_none() && open.get("data_withheld").is_none());
    assert_eq!(
        text.matches(HASH).count(),
        1,
        "the hash shows on /open only: {text}"
    );
    assert_eq!(text.matches("s3cr3t-data").count(), 2, "{text}");
    // Seeding refuses a withheld node rather than creating it empty.
    let err = zkd_server::fixture::from_json(&text).expect_err("withheld data cannot be seeded");
    assert!(err.contains("/secret") && err.contains("withheld"), "{err}");

    let (_, secret) =
        tokio::task::spawn_blocking(move || get_json(admin, "/zkd/node?path=/secret"))
            .await
            .expect("fetch");
    assert_eq!(secret["data"], Value::Null);
    assert_eq!(secret["data_withheld"], true);
    assert_eq!(secret["acl"][0]["id"], "user:x");
    let (_, shared) =
        tokio::task::spawn_blocking(move || get_json(admin, "/zkd/node?path=/shared"))
            .await
            .expect("fetch");
    assert_eq!(shared["data"]["text"], "s3cr3t-data");
    assert_eq!(shared["acl"][1]["id"], "user:x");
    drop(c);
    server.shutdown().await;
}
