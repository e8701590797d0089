//! The double barrier recipe: nobody enters before all have arrived, nobody leaves before all are done.

use super::*;

#[derive(Default)]
struct BarrierLog {
    arrived: AtomicUsize,
    leaving: AtomicUsize,
    ready_events: Mutex<Vec<(zk::EventType, String)>>,
}

async fn barrier_participant(
    idx: usize,
    n: usize,
    client: zk::Client,
    dir: String,
    log: Arc<BarrierLog>,
) -> Result<(), String> {
    let ready = format!("{dir}/ready");
    let me = format!("p-{idx}");
    // Staggered arrival.
    tokio::time::sleep(Duration::from_millis(120 * idx as u64)).await;
    log.arrived.fetch_add(1, Ordering::SeqCst);
    client
        .create(&format!("{dir}/{me}"), b"", &ephemeral())
        .await
        .map_err(err_text)?;
    loop {
        let (stat, watcher) = client
            .check_and_watch_stat(&ready)
            .await
            .map_err(err_text)?;
        if stat.is_some() {
            break;
        }
        let present = client.list_children(&dir).await.map_err(err_text)?;
        if present.iter().filter(|c| c.starts_with("p-")).count() >= n {
            match client.create(&ready, b"", &persistent()).await {
                Ok(_) | Err(zk::Error::NodeExists) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        let event = watcher.changed().await;
        log.ready_events
            .lock()
            .unwrap()
            .push((event.event_type, event.path));
    }
    let arrived = log.arrived.load(Ordering::SeqCst);
    if arrived != n {
        return Err(format!(
            "p-{idx} passed the entry barrier with only {arrived} of {n} arrived"
        ));
    }

    // Staggered departure.
    tokio::time::sleep(Duration::from_millis(120 * (n - idx) as u64)).await;
    log.leaving.fetch_add(1, Ordering::SeqCst);
    loop {
        let mut present: Vec<String> = client
            .list_children(&dir)
            .await
            .map_err(err_text)?
            .into_iter()
            .filter(|c| c.starts_with("p-"))
            .collect();
        present.sort();
        if present.is_empty() {
            break;
        }
        if present == [me.clone()] {
            client
                .delete(&format!("{dir}/{me}"), None)
                .await
                .map_err(err_text)?;
            break;
        }
        let watch_on = if present[0] == me {
            present.last().unwrap().clone()
        } else {
            if present.contains(&me) {
                client
                    .delete(&format!("{dir}/{me}"), None)
                    .await
                    .map_err(err_text)?;
            }
            present[0].clone()
        };
        if let (Some(_), watcher) = client
            .check_and_watch_stat(&format!("{dir}/{watch_on}"))
            .await
            .map_err(err_text)?
        {
            let event = watcher.changed().await;
            if event.event_type != zk::EventType::NodeDeleted {
                return Err(format!("unexpected event while leaving: {event:?}"));
            }
        }
    }
    let leaving = log.leaving.load(Ordering::SeqCst);
    if leaving != n {
        return Err(format!(
            "p-{idx} passed the exit barrier with only {leaving} of {n} leaving"
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier() {
    const N: usize = 4;
    let (target, admin, ns) = start("barrier").await;
    let dir = mkdir(&admin, &ns, "barrier").await;

    let log = Arc::new(BarrierLog::default());
    let mut tasks = Vec::new();
    for idx in 0..N {
        let client = connect(&target).await;
        tasks.push(tokio::spawn(barrier_participant(
            idx,
            N,
            client,
            dir.clone(),
            log.clone(),
        )));
    }
    for task in tasks {
        within("barrier participants", task).await.unwrap().unwrap();
    }
    // Everyone but the last to arrive waited for the ready node to be created.
    let events = log.ready_events.lock().unwrap().clone();
    let ready = format!("{dir}/ready");
    assert!(!events.is_empty() && events.len() < N, "{events:?}");
    for event in events {
        assert_eq!(event, (zk::EventType::NodeCreated, ready.clone()));
    }
    assert_eq!(sorted_children(&admin, &dir).await, ["ready"]);
    let (_, stat) = admin.get_children(&dir).await.unwrap();
    assert_eq!((stat.cversion, stat.num_children), (2 * N as i32 + 1, 1));
}
