//! Operations one by one: create modes, Stat fields, sequential numbering, setData/setACL and error codes.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_modes_and_stat_fields() {
    let (target, client, ns) = start("create").await;
    let dir = ns.path("d");
    let (dir_stat, _) = client.create(&dir, b"", &persistent()).await.unwrap();
    let session = client.session_id().0;

    // Persistent.
    let (p, seq) = client
        .create(&format!("{dir}/p"), b"data", &persistent())
        .await
        .unwrap();
    assert_eq!(
        seq.into_i64(),
        -1,
        "no sequence for a non-sequential create"
    );
    assert!(p.czxid > dir_stat.czxid);
    assert_eq!((p.mzxid, p.pzxid, p.mtime), (p.czxid, p.czxid, p.ctime));
    assert_eq!(
        (p.version, p.cversion, p.aversion, p.ephemeral_owner),
        (0, 0, 0, 0)
    );
    assert_eq!((p.data_length, p.num_children), (4, 0));
    assert!(
        p.ctime > 1_500_000_000_000,
        "ctime is wall-clock milliseconds: {}",
        p.ctime
    );
    assert_eq!(
        client.get_data(&format!("{dir}/p")).await.unwrap(),
        (b"data".to_vec(), p)
    );

    // Ephemeral.
    let (e, _) = client
        .create(&format!("{dir}/e"), b"", &ephemeral())
        .await
        .unwrap();
    assert_eq!((e.ephemeral_owner, e.data_length), (session, 0));
    assert!(e.czxid > p.czxid);

    // Sequential kinds: the suffix is the parent's count of child creations so far.
    let (ps, seq) = client
        .create(&format!("{dir}/ps-"), b"", &persistent_sequential())
        .await
        .unwrap();
    assert_eq!(
        (seq.into_i64(), seq.to_string()),
        (2, "0000000002".to_string())
    );
    assert_eq!(ps.ephemeral_owner, 0);
    let (es, seq) = client
        .create(&format!("{dir}/es-"), b"", &ephemeral_sequential())
        .await
        .unwrap();
    assert_eq!(seq.into_i64(), 3);
    assert_eq!(es.ephemeral_owner, session);

    // Container: reported with ephemeralOwner 0, and it may have children.
    let (c, _) = client
        .create(&format!("{dir}/c"), b"x", &opts(zk::CreateMode::Container))
        .await
        .unwrap();
    assert_eq!((c.ephemeral_owner, c.version, c.data_length), (0, 0, 1));
    client
        .create(&format!("{dir}/c/child"), b"", &persistent())
        .await
        .unwrap();

    // TTL (persistent and persistent-sequential), also reported with ephemeralOwner 0.
    let ttl = Duration::from_secs(600);
    let (t, _) = client
        .create(&format!("{dir}/t"), b"ttl", &persistent().with_ttl(ttl))
        .await
        .unwrap();
    assert_eq!((t.ephemeral_owner, t.data_length), (0, 3));
    let (ts, seq) = client
        .create(
            &format!("{dir}/ts-"),
            b"",
            &persistent_sequential().with_ttl(ttl),
        )
        .await
        .unwrap();
    assert_eq!(seq.into_i64(), 6);
    assert_eq!(ts.ephemeral_owner, 0);
    assert!(ts.czxid > t.czxid && t.czxid > c.czxid && c.czxid > es.czxid && es.czxid > ps.czxid);

    let names = [
        "c",
        "e",
        "es-0000000003",
        "p",
        "ps-0000000002",
        "t",
        "ts-0000000006",
    ];
    assert_eq!(sorted_children(&client, &dir).await, names);
    let (children, parent) = client.get_children(&dir).await.unwrap();
    assert_eq!(children.len(), 7);
    assert_eq!((parent.num_children, parent.cversion), (7, 7));
    assert_eq!(
        parent.pzxid, ts.czxid,
        "pzxid = zxid of the last child creation"
    );
    assert_eq!(
        (parent.mzxid, parent.version),
        (dir_stat.mzxid, 0),
        "child changes leave mzxid alone"
    );
    for (name, stat) in [
        ("e", e),
        ("es-0000000003", es),
        ("c", c),
        ("t", t),
        ("ts-0000000006", ts),
    ] {
        let (_, got) = client.get_data(&format!("{dir}/{name}")).await.unwrap();
        assert_eq!(got.czxid, stat.czxid, "{name}");
        assert_eq!(got.ephemeral_owner, stat.ephemeral_owner, "{name}");
    }

    // Closing the session removes exactly its two ephemerals.
    let observer = connect(&target).await;
    drop(client);
    eventually("ephemerals to go with their session", || async {
        observer.get_children(&dir).await.unwrap().1.num_children == 5
    })
    .await;
    let (children, after) = observer.get_children(&dir).await.unwrap();
    let mut children = children;
    children.sort();
    assert_eq!(children, ["c", "p", "ps-0000000002", "t", "ts-0000000006"]);
    assert_eq!(after.cversion, 9);
    assert!(after.pzxid > parent.pzxid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_numbering_and_cversion() {
    let (_target, client, ns) = start("sequence").await;
    let dir = ns.path("d");
    let (created, _) = client.create(&dir, b"", &persistent()).await.unwrap();

    // Create + delete of one child: cversion 2, pzxid moves to the delete.
    let (x, _) = client
        .create(&format!("{dir}/x"), b"", &persistent())
        .await
        .unwrap();
    let (_, stat) = client.get_children(&dir).await.unwrap();
    assert_eq!(
        (stat.cversion, stat.num_children, stat.pzxid),
        (1, 1, x.czxid)
    );
    client.delete(&format!("{dir}/x"), Some(0)).await.unwrap();
    let (_, stat) = client.get_children(&dir).await.unwrap();
    assert_eq!((stat.cversion, stat.num_children), (2, 0));
    assert!(stat.pzxid > x.czxid, "pzxid must move to the delete");
    assert_eq!(
        (stat.czxid, stat.mzxid, stat.version),
        (created.czxid, created.mzxid, 0)
    );

    // The next sequence number counts creations only (one so far), never deletions.
    let (_, s1) = client
        .create(&format!("{dir}/q-"), b"", &persistent_sequential())
        .await
        .unwrap();
    let (_, s2) = client
        .create(&format!("{dir}/q-"), b"", &persistent_sequential())
        .await
        .unwrap();
    assert_eq!((s1.into_i64(), s2.into_i64()), (1, 2));
    client.delete(&format!("{dir}/q-{s2}"), None).await.unwrap();
    let (_, s3) = client
        .create(&format!("{dir}/q-"), b"", &persistent_sequential())
        .await
        .unwrap();
    assert_eq!(s3.into_i64(), 3, "a deleted sequence number is not reused");
    // Non-sequential creates and failed creates: the former count, the latter do not.
    client
        .create(&format!("{dir}/y"), b"", &persistent())
        .await
        .unwrap();
    let y = format!("{dir}/y");
    create_fails(&client, &y, &persistent(), zk::Error::NodeExists).await;
    let (_, s5) = client
        .create(&format!("{dir}/r-"), b"", &ephemeral_sequential())
        .await
        .unwrap();
    assert_eq!(s5.into_i64(), 5);
    // A different prefix shares the parent's counter.
    assert_eq!(
        sorted_children(&client, &dir).await,
        ["q-0000000001", "q-0000000003", "r-0000000005", "y"]
    );
    let (_, stat) = client.get_children(&dir).await.unwrap();
    // 6 creations, 2 deletions, 4 children: cversion = 2 * 6 - 4.
    assert_eq!((stat.cversion, stat.num_children), (8, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_data_set_acl_and_stat() {
    let (_target, client, ns) = start("setdata").await;
    let node = ns.path("n");
    let (created, _) = client.create(&node, b"", &persistent()).await.unwrap();

    // Empty data round-trips as empty (the crate never sends null data).
    let (data, stat) = client.get_data(&node).await.unwrap();
    assert_eq!((data.len(), stat), (0, created));

    let one = client.set_data(&node, b"one", None).await.unwrap();
    assert_eq!(
        (one.version, one.data_length, one.cversion, one.aversion),
        (1, 3, 0, 0)
    );
    assert_eq!(
        (one.czxid, one.ctime, one.pzxid),
        (created.czxid, created.ctime, created.czxid)
    );
    assert!(one.mzxid > created.mzxid && one.mtime >= created.mtime);
    // Identical data still counts as a change.
    let same = client.set_data(&node, b"one", Some(1)).await.unwrap();
    assert_eq!(same.version, 2);
    assert!(same.mzxid > one.mzxid);
    assert_eq!(
        client.set_data(&node, b"two", Some(1)).await,
        Err(zk::Error::BadVersion)
    );
    let cleared = client.set_data(&node, b"", Some(2)).await.unwrap();
    assert_eq!((cleared.version, cleared.data_length), (3, 0));
    assert_eq!(client.get_data(&node).await.unwrap(), (Vec::new(), cleared));

    // getACL / setACL with world:anyone.
    let (acl, stat) = client.get_acl(&node).await.unwrap();
    assert_eq!(acl, zk::Acls::anyone_all().to_vec());
    assert_eq!(stat, cleared);
    let after_acl = client
        .set_acl(&node, &zk::Acls::anyone_all(), Some(0))
        .await
        .unwrap();
    assert_eq!(after_acl.aversion, 1);
    assert_eq!(
        (
            after_acl.version,
            after_acl.mzxid,
            after_acl.mtime,
            after_acl.pzxid
        ),
        (cleared.version, cleared.mzxid, cleared.mtime, cleared.pzxid),
        "setACL changes only aversion"
    );
    assert_eq!(
        client
            .set_acl(&node, &zk::Acls::anyone_all(), Some(0))
            .await,
        Err(zk::Error::BadVersion)
    );

    // Read-only ACL: reads work, writes and further ACL changes are refused.
    let read_only = client
        .set_acl(&node, &zk::Acls::anyone_read(), Some(1))
        .await
        .unwrap();
    assert_eq!(read_only.aversion, 2);
    let (acl, _) = client.get_acl(&node).await.unwrap();
    assert_eq!(
        acl,
        vec![zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone())]
    );
    assert_eq!(client.get_data(&node).await.unwrap().1, read_only);
    assert_eq!(
        client.set_data(&node, b"x", None).await,
        Err(zk::Error::NoAuth)
    );
    let child = format!("{node}/child");
    create_fails(&client, &child, &persistent(), zk::Error::NoAuth).await;
    assert_eq!(
        client.set_acl(&node, &zk::Acls::anyone_all(), None).await,
        Err(zk::Error::NoAuth)
    );
    // Deleting needs DELETE on the parent, not on the node itself.
    client.delete(&node, None).await.unwrap();

    // ACLs are validated by the server.
    let bad = [zk::Acl::new(
        zk::Permission::ALL,
        zk::AuthId::new("world", "nobody"),
    )];
    assert_eq!(
        client.create(&ns.path("bad"), b"", &with_acl(&bad)).await,
        Err(zk::Error::InvalidAcl)
    );
}

/// Creating `path` (empty, with `options`) fails with `error`.
async fn create_fails(
    client: &zk::Client,
    path: &str,
    options: &zk::CreateOptions<'_>,
    error: zk::Error,
) {
    let got = client.create(path, b"", options).await;
    assert_eq!(got, Err(error), "create {path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes() {
    let (_target, client, ns) = start("errors").await;
    let node = mkdir(&client, &ns, "n").await;
    client
        .create(&format!("{node}/child"), b"", &persistent())
        .await
        .unwrap();
    let missing = ns.path("missing");

    for (path, options, error) in [
        (node.clone(), persistent(), zk::Error::NodeExists),
        (format!("{missing}/x"), persistent(), zk::Error::NoNode),
        (
            format!("{missing}/x-"),
            persistent_sequential(),
            zk::Error::NoNode,
        ),
    ] {
        create_fails(&client, &path, &options, error).await;
    }
    assert_eq!(
        client.delete(&node, Some(5)).await,
        Err(zk::Error::BadVersion)
    );
    assert_eq!(
        client.delete(&node, Some(0)).await,
        Err(zk::Error::NotEmpty)
    );
    assert_eq!(client.delete(&node, None).await, Err(zk::Error::NotEmpty));
    assert_eq!(client.delete(&missing, None).await, Err(zk::Error::NoNode));
    assert_eq!(
        client.delete(&missing, Some(3)).await,
        Err(zk::Error::NoNode)
    );
    assert_eq!(client.get_data(&missing).await, Err(zk::Error::NoNode));
    assert_eq!(
        client.set_data(&missing, b"", None).await,
        Err(zk::Error::NoNode)
    );
    assert_eq!(
        client.set_data(&node, b"", Some(1)).await,
        Err(zk::Error::BadVersion)
    );
    assert_eq!(client.list_children(&missing).await, Err(zk::Error::NoNode));
    assert_eq!(client.get_children(&missing).await, Err(zk::Error::NoNode));
    assert_eq!(client.get_acl(&missing).await, Err(zk::Error::NoNode));
    assert_eq!(
        client
            .set_acl(&missing, &zk::Acls::anyone_all(), None)
            .await,
        Err(zk::Error::NoNode)
    );
    assert_eq!(
        client
            .set_acl(&node, &zk::Acls::anyone_all(), Some(3))
            .await,
        Err(zk::Error::BadVersion)
    );
    assert_eq!(
        client.count_descendants_number(&missing).await,
        Err(zk::Error::NoNode)
    );
    assert_eq!(client.check_stat(&missing).await, Ok(None));

    let eph = ns.path("eph");
    client.create(&eph, b"", &ephemeral()).await.unwrap();
    // Neither a plain nor a sequential child under an ephemeral node.
    for (name, options) in [("x", persistent()), ("x-", ephemeral_sequential())] {
        let path = format!("{eph}/{name}");
        create_fails(&client, &path, &options, zk::Error::NoChildrenForEphemerals).await;
    }

    // Failed operations change nothing.
    let (_, stat) = client.get_data(&node).await.unwrap();
    assert_eq!((stat.version, stat.num_children, stat.cversion), (0, 1, 1));
    client
        .delete(&format!("{node}/child"), Some(0))
        .await
        .unwrap();
    client.delete(&node, Some(0)).await.unwrap();
    assert_eq!(client.check_stat(&node).await, Ok(None));
}
