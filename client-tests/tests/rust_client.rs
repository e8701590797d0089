#[path = "common/zk_rust.rs"]
mod support;

use support::*;
use zkd_client_tests::target::Target;
use zookeeper_client as zk;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe() {
    let target = Target::start().await;
    let c = connect(&target).await;
    let ns = Ns::create(&c, "probe").await;
    println!("session {:?} timeout {:?}", c.session_id(), c.session_timeout());
    let p = ns.path("a");
    let (st, _) = c.create(&p, b"", &persistent()).await.unwrap();
    println!("persistent {st:?}");
    let (st, _) = c.create(&ns.path("cont"), b"x", &opts(zk::CreateMode::Container)).await.unwrap();
    println!("container {st:?}");
    println!("container get {:?}", c.get_data(&ns.path("cont")).await.unwrap());
    let r = c.create(&ns.path("ttl"), b"x", &persistent().with_ttl(std::time::Duration::from_secs(100))).await;
    println!("ttl {r:?}");
    println!("ttl get {:?}", c.get_data(&ns.path("ttl")).await);
    let r = c.create(&ns.path("ttls"), b"x", &persistent_sequential().with_ttl(std::time::Duration::from_secs(100))).await;
    println!("ttl seq {r:?}");
    println!("sync {:?}", c.sync(&p).await);
    println!("sync missing {:?}", c.sync(&ns.path("missing")).await);
    c.create(&ns.path("e1"), b"", &ephemeral()).await.unwrap();
    c.create(&ns.path("e1x"), b"", &ephemeral()).await.unwrap();
    c.create(&ns.path("a/e2"), b"", &ephemeral()).await.unwrap();
    println!("ephemerals all {:?}", c.list_ephemerals("/").await);
    println!("ephemerals e1 {:?}", c.list_ephemerals(&ns.path("e1")).await);
    println!("whoami {:?}", c.list_auth_users().await);
    c.auth("digest", b"user:pass").await.unwrap();
    println!("whoami {:?}", c.list_auth_users().await);
    println!("count {:?}", c.count_descendants_number(&ns.root).await);
    println!("acl {:?}", c.get_acl(&p).await);
    println!("root {:?}", c.get_data("/").await);
    let mut mr = c.new_multi_reader();
    mr.add_get_data(&p).unwrap();
    mr.add_get_children(&ns.root).unwrap();
    mr.add_get_data(&ns.path("nope")).unwrap();
    println!("multiread {:?}", mr.commit().await);
    let mut mw = c.new_multi_writer();
    mw.add_create(&ns.path("m1"), b"1", &persistent()).unwrap();
    mw.add_create(&ns.path("m-"), b"1", &persistent_sequential()).unwrap();
    mw.add_set_data(&ns.path("m1"), b"22", None).unwrap();
    mw.add_check_version(&ns.path("m1"), 1).unwrap();
    mw.add_delete(&ns.path("m1"), None).unwrap();
    println!("multi {:?}", mw.commit().await);
    let mut mw = c.new_multi_writer();
    mw.add_create(&ns.path("m2"), b"1", &persistent()).unwrap();
    mw.add_check_version(&ns.path("a"), 5).unwrap();
    mw.add_delete(&ns.path("a"), None).unwrap();
    println!("multi fail {:?}", mw.commit().await);
}
