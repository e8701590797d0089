//! Watch notifications need READ permission (as in ZooKeeper with the CVE-2024-23944 fix):
//! through the unmodified `zookeeper-client` crate, an anonymous persistent-recursive watcher
//! on `/` and a persistent watcher on an unreadable node receive nothing for changes they may
//! not read and everything else, while a watcher holding the owner's credentials receives
//! every event. Runs against ZooKeeper too (`ZKD_TEST_TARGET=zookeeper`).
//!
//! "Nothing arrived" is shown without timing: each watcher's next event after the hidden
//! changes must be the readable change made after them (events arrive in order).

use zkd_client_tests::zk_rust;
use zkd_client_tests::zk_rust::{add_watch, connect, persistent, within, Ns};
use zkd_testkit::target::Target;
use zookeeper_client as zk;

const USER: &[u8] = b"user:pass";

type Event = (zk::EventType, String);

/// Owned events from `(type, path)` pairs.
fn events(list: &[(zk::EventType, &String)]) -> Vec<Event> {
    list.iter().map(|(t, p)| (*t, p.to_string())).collect()
}

async fn next(w: &mut zk::PersistentWatcher, what: &str) -> Event {
    let e = within(what, w.changed()).await;
    (e.event_type, e.path)
}

async fn expect(w: &mut zk::PersistentWatcher, who: &str, want: &[Event]) {
    for (i, e) in want.iter().enumerate() {
        let got = next(w, &format!("{who}: event {} ({e:?})", i + 1)).await;
        assert_eq!(&got, e, "{who}: event {}", i + 1);
    }
}

/// Three sessions on the target: the owner (authenticated as `USER`), a stranger and one more.
async fn owner_stranger_and(target: &Target) -> (zk::Client, zk::Client, zk::Client) {
    let owner = connect(target).await;
    within("addauth", owner.auth("digest", USER)).await.unwrap();
    (owner, connect(target).await, connect(target).await)
}

/// Opens `path` to everyone.
async fn make_readable(owner: &zk::Client, path: &str) {
    let anyone = [zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())];
    owner.set_acl(path, &anyone, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn watchers_only_see_what_they_may_read() {
    use zk::EventType::*;
    let target = Target::start().await;
    let (owner, stranger, insider) = owner_stranger_and(&target).await;
    within("addauth", insider.auth("digest", USER))
        .await
        .unwrap();
    let ns = Ns::create(&owner, "watch-acl").await;
    let private = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    let secret = ns.path("secret");
    owner.create(&secret, b"s", &private).await.unwrap();
    assert_eq!(stranger.get_data(&secret).await, Err(zk::Error::NoAuth));

    let mut recursive = add_watch(&stranger, "/", zk::AddWatchMode::PersistentRecursive).await;
    let mut on_secret = add_watch(&stranger, &secret, zk::AddWatchMode::Persistent).await;
    let mut insider_recursive =
        add_watch(&insider, "/", zk::AddWatchMode::PersistentRecursive).await;

    // Changes the stranger may not read: a private child created, changed and deleted, and
    // the private node's own data (its children changes are private too).
    let hidden = format!("{secret}/hidden");
    owner.create(&hidden, b"h", &private).await.unwrap();
    owner.set_data(&hidden, b"h2", None).await.unwrap();
    owner.set_data(&secret, b"s2", None).await.unwrap();
    owner.delete(&hidden, None).await.unwrap();

    // A readable child of the private node: its own events are visible, its parent's
    // NodeChildrenChanged is not.
    let open = format!("{secret}/open");
    owner.create(&open, b"o", &persistent()).await.unwrap();
    owner.set_data(&open, b"o2", None).await.unwrap();
    owner.delete(&open, None).await.unwrap();

    // Readable changes elsewhere.
    let public = ns.path("public");
    owner.create(&public, b"p", &persistent()).await.unwrap();
    owner.set_data(&public, b"p2", None).await.unwrap();

    // The private node becomes readable: from now on the stranger sees its events.
    make_readable(&owner, &secret).await;
    owner.set_data(&secret, b"s3", None).await.unwrap();
    owner.create(&hidden, b"h", &persistent()).await.unwrap();

    // What everyone may read: the open child, the public node, the secret once readable.
    let readable = events(&[
        (NodeCreated, &open),
        (NodeDataChanged, &open),
        (NodeDeleted, &open),
        (NodeCreated, &public),
        (NodeDataChanged, &public),
        (NodeDataChanged, &secret),
        (NodeCreated, &hidden),
    ]);
    expect(
        &mut recursive,
        "recursive watcher on / without credentials",
        &readable,
    )
    .await;
    expect(
        &mut on_secret,
        "persistent watcher on the private node without credentials",
        &events(&[(NodeDataChanged, &secret), (NodeChildrenChanged, &secret)]),
    )
    .await;
    let hidden_changes = events(&[
        (NodeCreated, &hidden),
        (NodeDataChanged, &hidden),
        (NodeDataChanged, &secret),
        (NodeDeleted, &hidden),
    ]);
    expect(
        &mut insider_recursive,
        "recursive watcher on / with the owner's credentials",
        &[&hidden_changes[..], &readable[..]].concat(),
    )
    .await;
}

/// A one-shot data watch set while the node was readable fires when the node has become
/// unreadable: the event is withheld and the watch is used up.
#[tokio::test(flavor = "multi_thread")]
async fn one_shot_watch_fired_while_unreadable_is_used_up() {
    let target = Target::start().await;
    // The third, separate session observes: a client hands an event to every local watcher
    // of its path.
    let (owner, stranger, observer) = owner_stranger_and(&target).await;
    let ns = Ns::create(&owner, "watch-acl-oneshot").await;
    let node = ns.path("n");
    owner.create(&node, b"1", &persistent()).await.unwrap();
    let (_, _, data_watch) = stranger.get_and_watch_data(&node).await.unwrap();
    let mut recursive = add_watch(&observer, &ns.root, zk::AddWatchMode::PersistentRecursive).await;

    let creator_all = [zk::Acl::new(
        zk::Permission::ALL,
        zk::AuthId::new("digest", "user:smGaoVKd/cQkjm7b88GyorAUz20="),
    )];
    owner.set_acl(&node, &creator_all, None).await.unwrap();
    owner.set_data(&node, b"2", None).await.unwrap();
    make_readable(&owner, &node).await;
    owner.set_data(&node, b"3", None).await.unwrap();
    let marker = ns.path("marker");
    owner.create(&marker, b"", &persistent()).await.unwrap();

    // The recursive watcher's events: the readable change and the marker, not the hidden one.
    assert_eq!(
        next(&mut recursive, "first visible change").await,
        (zk::EventType::NodeDataChanged, node.clone())
    );
    assert_eq!(
        next(&mut recursive, "marker").await,
        (zk::EventType::NodeCreated, marker.clone())
    );
    // The one-shot watch fired on the hidden change ("2"), so the readable one ("3") has no
    // watch left to fire: a getData now shows "3" and the watch never delivers (a
    // notification would have been queued before this reply).
    let (data, _) = stranger.get_data(&node).await.unwrap();
    assert_eq!(data, b"3");
    let fired = tokio::time::timeout(zk_rust::QUIET, data_watch.changed()).await;
    assert!(
        fired.is_err(),
        "the one-shot watch delivered an event: {fired:?}"
    );
}
