//! The test pattern shown in server/README.md, verbatim, so the documented example compiles
//! and works.

use zkd_server::{Config, Server};

#[tokio::test]
async fn creates_a_node() {
    // Port 0: a free port per test, so tests run in parallel without clashing.
    let server = Server::start(Config {
        port: 0,
        ..Config::default()
    })
    .await
    .unwrap();
    let addr = server.local_addr().to_string();

    let client = zookeeper_client::Client::connect(&addr).await.unwrap();
    client
        .create(
            "/app",
            b"hello",
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    assert_eq!(client.get_data("/app").await.unwrap().0, b"hello");

    server.shutdown().await; // or just let `server` drop at the end of the test
}
