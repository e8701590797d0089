//! The FIFO queue recipe with sequential nodes and competing consumers.

use super::*;

/// Takes items in sequence order until the queue is empty and `done` was set before looking.
async fn consume(
    client: zk::Client,
    dir: String,
    done: Arc<AtomicBool>,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut taken = Vec::new();
    loop {
        let finished = done.load(Ordering::SeqCst);
        let (mut items, watcher) = client
            .list_and_watch_children(&dir)
            .await
            .map_err(err_text)?;
        if items.is_empty() {
            if finished {
                return Ok(taken);
            }
            let _ = tokio::time::timeout(Duration::from_millis(250), watcher.changed()).await;
            continue;
        }
        drop(watcher);
        items.sort();
        for item in items {
            let path = format!("{dir}/{item}");
            let data = match client.get_data(&path).await {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(e.to_string()),
            };
            match client.delete(&path, None).await {
                Ok(()) => taken.push((item, data)),
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Adds one worker's items to `all`: the worker saw them in increasing sequence order, and
/// none of them was there already (`verb` says what twice would mean).
fn add_in_order(
    all: &mut BTreeMap<String, Vec<u8>>,
    items: Vec<(String, Vec<u8>)>,
    who: &str,
    verb: &str,
) {
    let seqs: Vec<i64> = items.iter().map(|(name, _)| suffix(name)).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "{who} are not in increasing sequence order: {seqs:?}"
    );
    for (name, data) in items {
        assert!(
            all.insert(name.clone(), data).is_none(),
            "{name} {verb} twice"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_queue() {
    const PRODUCERS: usize = 3;
    const CONSUMERS: usize = 3;
    const ITEMS: usize = 10;
    let (target, admin, ns) = start("queue").await;
    let dir = mkdir(&admin, &ns, "queue").await;

    let done = Arc::new(AtomicBool::new(false));
    let mut consumers = Vec::new();
    for _ in 0..CONSUMERS {
        consumers.push(tokio::spawn(consume(
            connect(&target).await,
            dir.clone(),
            done.clone(),
        )));
    }
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let client = connect(&target).await;
        let dir = dir.clone();
        producers.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            for i in 0..ITEMS {
                let data = format!("p{p}-{i}");
                let (stat, seq) = client
                    .create(
                        &format!("{dir}/q-"),
                        data.as_bytes(),
                        &persistent_sequential(),
                    )
                    .await
                    .unwrap();
                assert_eq!(stat.data_length, data.len() as i32);
                sent.push((format!("q-{seq}"), data.into_bytes()));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            sent
        }));
    }
    let mut produced = BTreeMap::new();
    for producer in producers {
        let sent = within("producers", producer).await.unwrap();
        add_in_order(&mut produced, sent, "one producer's items", "handed out");
    }
    done.store(true, Ordering::SeqCst);
    let total = PRODUCERS * ITEMS;
    let expected_names: BTreeSet<String> = (0..total).map(|i| format!("q-{i:010}")).collect();
    assert_eq!(
        produced.keys().cloned().collect::<BTreeSet<_>>(),
        expected_names
    );

    let mut consumed = BTreeMap::new();
    for consumer in consumers {
        let taken = within("consumers", consumer).await.unwrap().unwrap();
        add_in_order(&mut consumed, taken, "one consumer's items", "consumed");
    }
    assert_eq!(
        consumed, produced,
        "every item consumed exactly once with its data"
    );

    // Sequence numbers keep counting after the deletions; one consumer sees exact FIFO order.
    let (children, stat) = admin.get_children(&dir).await.unwrap();
    assert!(children.is_empty());
    assert_eq!((stat.cversion, stat.num_children), (2 * total as i32, 0));
    let mut order = Vec::new();
    for i in 0..ITEMS {
        let (_, seq) = admin
            .create(
                &format!("{dir}/q-"),
                format!("s{i}").as_bytes(),
                &persistent_sequential(),
            )
            .await
            .unwrap();
        assert_eq!(
            seq.into_i64(),
            (total + i) as i64,
            "sequence numbers are never reused"
        );
        order.push(format!("s{i}").into_bytes());
    }
    let done = Arc::new(AtomicBool::new(true));
    let taken = within(
        "single consumer",
        consume(connect(&target).await, dir.clone(), done),
    )
    .await
    .unwrap();
    let data: Vec<Vec<u8>> = taken.into_iter().map(|(_, data)| data).collect();
    assert_eq!(data, order);
}
