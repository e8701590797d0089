//! The distributed lock recipe, hand-written and the crate's own: mutual exclusion under contention.

use super::*;

/// Lock recipe: an ephemeral-sequential node; wait for the predecessor to go away.
async fn acquire_lock(client: &zk::Client, dir: &str) -> Result<String, String> {
    let (_, seq) = client
        .create(&format!("{dir}/lock-"), b"", &ephemeral_sequential())
        .await
        .map_err(err_text)?;
    let me = format!("lock-{seq}");
    loop {
        let mut children = client.list_children(dir).await.map_err(err_text)?;
        children.sort();
        let pos = children
            .iter()
            .position(|c| *c == me)
            .ok_or_else(|| format!("lost lock node {me}"))?;
        if pos == 0 {
            return Ok(me);
        }
        let predecessor = format!("{dir}/{}", children[pos - 1]);
        if let (Some(_), watcher) = client
            .check_and_watch_stat(&predecessor)
            .await
            .map_err(err_text)?
        {
            let event = watcher.changed().await;
            if event.event_type != zk::EventType::NodeDeleted || event.path != predecessor {
                return Err(format!(
                    "unexpected event while waiting for {predecessor}: {event:?}"
                ));
            }
        }
    }
}

/// A target, an admin session and a namespace holding a counter node at "0".
async fn start_with_counter(name: &str) -> (Target, zk::Client, Ns, String) {
    let (target, admin, ns) = start(name).await;
    let counter = ns.path("counter");
    admin.create(&counter, b"0", &persistent()).await.unwrap();
    (target, admin, ns, counter)
}

/// Reads the counter under the lock, then lingers a little so that a second holder would
/// overlap (the read-modify-write is not atomic). Returns the next value to write and the
/// version read.
async fn next_count(client: &zk::Client, counter: &str) -> Result<(Vec<u8>, i32), String> {
    let (data, stat) = client.get_data(counter).await.map_err(err_text)?;
    let value: usize = String::from_utf8(data).unwrap().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(3)).await;
    Ok(((value + 1).to_string().into_bytes(), stat.version))
}

/// Every increment arrived: the counter holds `total` and was written `total` times.
async fn assert_counter(admin: &zk::Client, counter: &str, total: usize) {
    let (data, stat) = admin.get_data(counter).await.unwrap();
    assert_eq!(String::from_utf8(data).unwrap(), total.to_string());
    assert_eq!(stat.version, total as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_lock_mutual_exclusion() {
    const WORKERS: usize = 4;
    const ROUNDS: usize = 5;
    let (target, admin, ns, counter) = start_with_counter("lock").await;
    let dir = mkdir(&admin, &ns, "lock").await;

    let holders = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..WORKERS {
        let client = connect(&target).await;
        let (dir, counter, holders, grants) = (
            dir.clone(),
            counter.clone(),
            holders.clone(),
            grants.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let me = acquire_lock(&client, &dir).await?;
                if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                    return Err(format!("{me} acquired the lock while it was held"));
                }
                grants.lock().unwrap().push(me.clone());
                // Non-atomic read-modify-write, protected only by the lock.
                let (next, version) = next_count(&client, &counter).await?;
                client
                    .set_data(&counter, &next, Some(version))
                    .await
                    .map_err(|e| format!("counter update under the lock: {e}"))?;
                holders.fetch_sub(1, Ordering::SeqCst);
                client
                    .delete(&format!("{dir}/{me}"), None)
                    .await
                    .map_err(err_text)?;
            }
            Ok::<_, String>(())
        }));
    }
    for task in tasks {
        within("lock workers", task).await.unwrap().unwrap();
    }

    let total = WORKERS * ROUNDS;
    assert_counter(&admin, &counter, total).await;
    // The recipe grants strictly in sequence order, and sequence numbers are never reused.
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), total);
    let seqs: Vec<i64> = grants.iter().map(|g| suffix(g)).collect();
    assert_eq!(seqs, (0..total as i64).collect::<Vec<_>>(), "grant order");
    let (children, stat) = admin.get_children(&dir).await.unwrap();
    assert!(children.is_empty(), "{children:?}");
    assert_eq!((stat.cversion, stat.num_children), (2 * total as i32, 0));
}

/// The crate's own lock recipe (Curator-style names, getData watch on the predecessor, writes
/// guarded by a multi with a check op, ancestor creation on demand, background release).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crate_lock_recipe() {
    const WORKERS: usize = 3;
    const ROUNDS: usize = 3;
    let (target, admin, ns, counter) = start_with_counter("crate-lock").await;
    let dir = ns.path("locks/mutex");

    let holders = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..WORKERS {
        let client = connect(&target).await;
        let (dir, counter, holders) = (dir.clone(), counter.clone(), holders.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let prefix = zk::LockPrefix::new_curator(&dir, "lock-").unwrap();
                let options = zk::LockOptions::new(zk::Acls::anyone_all())
                    .with_ancestor_options(persistent())
                    .unwrap();
                let lock = client.lock(prefix, b"", options).await.map_err(err_text)?;
                let path = lock.lock_path().to_string();
                let name = path
                    .strip_prefix(&format!("{dir}/_c_"))
                    .ok_or_else(|| format!("lock path {path}"))?;
                if !name[..name.len() - 10].ends_with("-lock-") {
                    return Err(format!("unexpected lock node name {name}"));
                }
                if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                    return Err(format!("{path} acquired the lock while it was held"));
                }
                let (next, version) = next_count(&client, &counter).await?;
                let new_stat = lock
                    .set_data(&counter, &next, Some(version))
                    .await
                    .map_err(|e| format!("guarded write: {e}"))?;
                if new_stat.version != version + 1 {
                    return Err(format!(
                        "version {} after write over {}",
                        new_stat.version, version
                    ));
                }
                holders.fetch_sub(1, Ordering::SeqCst);
                drop(lock);
            }
            Ok::<_, String>(())
        }));
    }
    for task in tasks {
        within("crate lock workers", task).await.unwrap().unwrap();
    }
    assert_counter(&admin, &counter, WORKERS * ROUNDS).await;
    eventually("released lock nodes to be deleted", || async {
        sorted_children(&admin, &dir).await.is_empty()
    })
    .await;
}
