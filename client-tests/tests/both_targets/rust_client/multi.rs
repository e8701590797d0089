//! multi and multiRead through the client: all-or-nothing writes, per-op results, reads.

use super::*;

/// Committing `writer` fails at operation `index` with `source`.
async fn assert_fails_at(mut writer: zk::MultiWriter<'_>, index: usize, source: zk::Error) {
    let got = writer.commit().await;
    assert_eq!(
        got,
        Err(zk::MultiWriteError::OperationFailed { index, source })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_and_multi_read() {
    let (_target, client, watcher_client, ns) = start_pair("multi").await;
    let m = ns.path("m");
    let (m_created, _) = client.create(&m, b"a", &persistent()).await.unwrap();
    let (_, _, data_watch) = watcher_client.get_and_watch_data(&m).await.unwrap();

    // Success: every op applies under one zxid, results come back per op.
    let mut writer = client.new_multi_writer();
    writer.add_set_data(&m, b"bb", Some(0)).unwrap();
    writer.add_check_version(&m, 1).unwrap();
    writer
        .add_create(&format!("{m}/child"), b"c", &persistent())
        .unwrap();
    writer
        .add_create(&ns.path("s-"), b"", &persistent_sequential())
        .unwrap();
    writer
        .add_create(&ns.path("s-"), b"", &persistent_sequential())
        .unwrap();
    writer.add_delete(&format!("{m}/child"), Some(0)).unwrap();
    let results = writer.commit().await.unwrap();
    assert_eq!(results.len(), 6, "{results:?}");
    let set_stat = match &results[0] {
        zk::MultiWriteResult::SetData { stat } => *stat,
        other => panic!("expected SetData, got {other:?}"),
    };
    assert_eq!(
        (set_stat.version, set_stat.data_length, set_stat.czxid),
        (1, 2, m_created.czxid)
    );
    assert!(set_stat.mzxid > m_created.mzxid);
    assert_eq!(results[1], zk::MultiWriteResult::Check);
    let mut created = Vec::new();
    for result in &results[2..5] {
        match result {
            zk::MultiWriteResult::Create { path, stat } => {
                // Servers up to 3.8 answer a create2 sub-op without a Stat (the crate then reports
                // an invalid one); if there is one it must carry the multi's zxid.
                assert!(
                    stat.is_invalid() || stat.czxid == set_stat.mzxid,
                    "{stat:?}"
                );
                created.push(path.clone());
            }
            other => panic!("expected Create, got {other:?}"),
        }
    }
    // Consecutive sequential creates in one multi see each other (the root's counter was 1).
    assert_eq!(
        created,
        [
            format!("{m}/child"),
            ns.path("s-0000000001"),
            ns.path("s-0000000002")
        ]
    );
    assert_eq!(results[5], zk::MultiWriteResult::Delete);
    let event = within("data watch fired by a multi", data_watch.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeDataChanged, m.as_str())
    );
    let (data, stat) = client.get_data(&m).await.unwrap();
    assert_eq!(data, b"bb");
    assert_eq!(
        (stat.cversion, stat.num_children, stat.pzxid),
        (2, 0, set_stat.mzxid),
        "one zxid for the whole multi"
    );
    let (_, s_stat) = client.get_data(&ns.path("s-0000000002")).await.unwrap();
    assert_eq!(s_stat.czxid, set_stat.mzxid);

    // Failure: nothing applies, no watch fires, the failing op is reported with its index.
    let x = ns.path("x");
    let (_, exists_watch) = watcher_client.check_and_watch_stat(&x).await.unwrap();
    let mut writer = client.new_multi_writer();
    writer.add_create(&x, b"", &persistent()).unwrap();
    writer.add_check_version(&m, 7).unwrap();
    writer.add_delete(&m, None).unwrap();
    assert_fails_at(writer, 1, zk::Error::BadVersion).await;
    let mut writer = client.new_multi_writer();
    writer.add_create(&x, b"", &persistent()).unwrap();
    writer.add_set_data(&m, b"zz", None).unwrap();
    writer.add_create(&m, b"", &persistent()).unwrap();
    assert_fails_at(writer, 2, zk::Error::NodeExists).await;
    let mut writer = client.new_multi_writer();
    writer.add_delete(&ns.path("nope"), None).unwrap();
    writer.add_create(&x, b"", &persistent()).unwrap();
    assert_fails_at(writer, 0, zk::Error::NoNode).await;
    assert_eq!(client.check_stat(&x).await.unwrap(), None);
    assert_eq!(client.get_data(&m).await.unwrap(), (b"bb".to_vec(), stat));
    assert!(
        tokio::time::timeout(QUIET, exists_watch.changed())
            .await
            .is_err(),
        "a failed multi must not fire watches"
    );

    // CheckWriter: a multi guarded by a version check on another node.
    let mut guarded = client.new_check_writer(&m, Some(1)).unwrap();
    guarded
        .add_set_data(&ns.path("s-0000000001"), b"g", None)
        .unwrap();
    let results = guarded.commit().await.unwrap();
    assert!(
        matches!(results.as_slice(), [zk::MultiWriteResult::SetData { stat }] if stat.version == 1)
    );
    let mut guarded = client.new_check_writer(&m, Some(0)).unwrap();
    guarded
        .add_set_data(&ns.path("s-0000000001"), b"h", None)
        .unwrap();
    assert_eq!(
        guarded.commit().await,
        Err(zk::CheckWriteError::CheckFailed {
            source: zk::Error::BadVersion
        })
    );

    // multiRead: independent results, errors reported per op.
    let mut reader = client.new_multi_reader();
    reader.add_get_data(&m).unwrap();
    reader.add_get_children(&ns.root).unwrap();
    reader.add_get_data(&ns.path("nope")).unwrap();
    reader.add_get_children(&ns.path("nope")).unwrap();
    let results = reader.commit().await.unwrap();
    assert_eq!(results.len(), 4);
    match &results[0] {
        zk::MultiReadResult::Data { data, stat: got } => {
            assert_eq!((data.as_slice(), *got), (&b"bb"[..], stat))
        }
        other => panic!("expected data, got {other:?}"),
    }
    match &results[1] {
        zk::MultiReadResult::Children { children } => {
            let mut children = children.clone();
            children.sort();
            assert_eq!(children, ["m", "s-0000000001", "s-0000000002"]);
        }
        other => panic!("expected children, got {other:?}"),
    }
    for result in &results[2..] {
        assert!(
            matches!(
                result,
                zk::MultiReadResult::Error {
                    err: zk::Error::NoNode
                }
            ),
            "{result:?}"
        );
    }
}
