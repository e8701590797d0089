//! End-to-end tests driving the server through the unmodified `zookeeper-client` crate: the
//! classic ZooKeeper recipes (leader election, locks, configuration, membership, barriers,
//! queues) with several sessions each, and an op-by-op check of errors, Stat fields and watches.
//!
//! Every test starts its own server through [`Target::start`] and keeps its nodes under a
//! private namespace, so the file also runs against one shared external server.

#[path = "common/zk_rust.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use support::*;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkd_testkit::target::Target;
use zookeeper_client as zk;

/// Sequence number of a sequential node name (`prefix` followed by ten digits).
fn suffix(name: &str) -> i64 {
    let digits = &name[name.len() - 10..];
    assert!(
        digits.bytes().all(|b| b.is_ascii_digit()),
        "{name:?} does not end in ten digits"
    );
    digits.parse().unwrap()
}

fn err_text(e: zk::Error) -> String {
    e.to_string()
}

// ---------------------------------------------------------------------------------------------
// 1. Leader election
// ---------------------------------------------------------------------------------------------

/// What election candidates report to the test.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Election {
    Elected(usize),
    /// The candidate registered a watch (reported again each time it re-arms).
    Armed(usize),
    Notified {
        who: usize,
        event: String,
        path: String,
    },
    Failed {
        who: usize,
        error: String,
    },
}

#[derive(Clone, Copy, Debug)]
enum Watching {
    /// Herd style: every follower keeps a child watch on the election directory.
    Children,
    /// Each follower watches (exists + watch) only the node just before its own.
    Predecessor,
}

struct Candidate {
    node: String,
    session: zk::SessionId,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

async fn candidate_loop(
    who: usize,
    client: &zk::Client,
    dir: &str,
    me: &str,
    watching: Watching,
    tx: &mpsc::UnboundedSender<Election>,
    stop: &mut oneshot::Receiver<()>,
) -> Result<(), String> {
    loop {
        let (mut children, child_watch) = match watching {
            Watching::Children => {
                let (children, watcher) = client
                    .list_and_watch_children(dir)
                    .await
                    .map_err(err_text)?;
                (children, Some(watcher))
            }
            Watching::Predecessor => (client.list_children(dir).await.map_err(err_text)?, None),
        };
        children.sort();
        let pos = children
            .iter()
            .position(|c| c == me)
            .ok_or_else(|| format!("own node {me} missing from {children:?}"))?;
        if pos == 0 {
            drop(child_watch);
            let _ = tx.send(Election::Elected(who));
            let _ = stop.await;
            return Ok(());
        }
        let watcher = match child_watch {
            Some(watcher) => watcher,
            None => {
                let predecessor = format!("{dir}/{}", children[pos - 1]);
                match client
                    .check_and_watch_stat(&predecessor)
                    .await
                    .map_err(err_text)?
                {
                    (Some(_), watcher) => watcher,
                    // The predecessor vanished in between: look again.
                    (None, _) => continue,
                }
            }
        };
        let _ = tx.send(Election::Armed(who));
        tokio::select! {
            event = watcher.changed() => {
                let _ = tx.send(Election::Notified {
                    who,
                    event: format!("{:?}", event.event_type),
                    path: event.path,
                });
            },
            _ = &mut *stop => return Ok(()),
        }
    }
}

/// Creates the candidates' nodes in order (candidate `i` gets sequence `i`), then starts them.
async fn start_candidates(
    target: &Target,
    dir: &str,
    count: usize,
    detached: &[usize],
    watching: Watching,
    tx: &mpsc::UnboundedSender<Election>,
) -> Vec<Candidate> {
    let mut clients = Vec::new();
    for i in 0..count {
        let client = if detached.contains(&i) {
            connect_detached(target).await
        } else {
            connect(target).await
        };
        let (stat, seq) = client
            .create(
                &format!("{dir}/n-"),
                i.to_string().as_bytes(),
                &ephemeral_sequential(),
            )
            .await
            .unwrap();
        assert_eq!(
            seq.into_i64(),
            i as i64,
            "sequence numbers start at 0 in a fresh directory"
        );
        assert_eq!(stat.ephemeral_owner, client.session_id().0);
        clients.push((client, format!("n-{seq}")));
    }
    let expected: Vec<String> = (0..count).map(|i| format!("n-{i:010}")).collect();
    assert_eq!(sorted_children(&clients[0].0, dir).await, expected);

    let mut candidates = Vec::new();
    for (who, (client, name)) in clients.into_iter().enumerate() {
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let session = client.session_id();
        let (dir, me, tx) = (dir.to_string(), name.clone(), tx.clone());
        let task = tokio::spawn(async move {
            let result = candidate_loop(who, &client, &dir, &me, watching, &tx, &mut stop_rx).await;
            if let Err(error) = result {
                let _ = tx.send(Election::Failed { who, error });
            }
            // Dropping the last handle closes the session (or, if detached, only the socket).
            drop(client);
        });
        candidates.push(Candidate {
            node: name,
            session,
            stop: Some(stop_tx),
            task,
        });
    }
    candidates
}

/// Stops a candidate: its client is dropped, which closes its session unless it is detached.
async fn stop_candidate(candidate: &mut Candidate) {
    if let Some(stop) = candidate.stop.take() {
        let _ = stop.send(());
    }
    within("candidate task to finish", &mut candidate.task)
        .await
        .unwrap();
}

/// Waits for exactly `expected` reports (in any order) and then for silence.
async fn expect_reports(
    rx: &mut mpsc::UnboundedReceiver<Election>,
    mut expected: Vec<Election>,
    step: &str,
) {
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let report = recv(rx, step).await;
        if let Election::Failed { .. } = report {
            panic!("{step}: {report:?}");
        }
        got.push(report);
    }
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "{step}");
    assert_quiet(rx, step).await;
}

/// The server's view: the owner of the smallest election node.
async fn leader_session(admin: &zk::Client, dir: &str) -> Option<i64> {
    let children = sorted_children(admin, dir).await;
    let first = children.first()?;
    let (_, stat) = admin.get_data(&format!("{dir}/{first}")).await.unwrap();
    Some(stat.ephemeral_owner)
}

fn notified(who: usize, event: &str, path: &str) -> Election {
    Election::Notified {
        who,
        event: event.to_string(),
        path: path.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_herd_child_watches() {
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "election-herd").await;
    let dir = ns.path("election");
    admin.create(&dir, b"", &persistent()).await.unwrap();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut cands = start_candidates(&target, &dir, 5, &[], Watching::Children, &tx).await;
    let changed = |who: usize| notified(who, "NodeChildrenChanged", &dir);
    // Every notified follower looks again and re-arms, except the one that becomes leader.
    let step = |followers: &[usize], next: Option<usize>| -> Vec<Election> {
        let mut expected = Vec::new();
        for &f in followers {
            expected.push(changed(f));
            expected.push(if Some(f) == next {
                Election::Elected(f)
            } else {
                Election::Armed(f)
            });
        }
        expected
    };

    let initial = vec![
        Election::Elected(0),
        Election::Armed(1),
        Election::Armed(2),
        Election::Armed(3),
        Election::Armed(4),
    ];
    expect_reports(&mut rx, initial, "initial election").await;
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[0].session.0));

    // A follower leaves: every other follower is told, nobody takes over.
    stop_candidate(&mut cands[2]).await;
    expect_reports(&mut rx, step(&[1, 3, 4], None), "follower 2 leaves").await;
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[0].session.0));

    // Leaders close their sessions one after another; leadership passes in creation order.
    for (leader, next, followers) in [(0, 1, vec![1, 3, 4]), (1, 3, vec![3, 4]), (3, 4, vec![4])] {
        stop_candidate(&mut cands[leader]).await;
        let expected = step(&followers, Some(next));
        expect_reports(&mut rx, expected, &format!("leader {leader} closes")).await;
        assert_eq!(
            leader_session(&admin, &dir).await,
            Some(cands[next].session.0)
        );
        let gone = format!("{dir}/{}", cands[leader].node);
        assert_eq!(
            admin.check_stat(&gone).await.unwrap(),
            None,
            "{gone} outlived its session"
        );
    }

    stop_candidate(&mut cands[4]).await;
    eventually("the last election node to go", || async {
        sorted_children(&admin, &dir).await.is_empty()
    })
    .await;
    let (children, stat) = admin.get_children(&dir).await.unwrap();
    assert!(children.is_empty());
    assert_eq!(
        (stat.num_children, stat.cversion),
        (0, 10),
        "5 creates + 5 deletes"
    );
    assert_quiet(&mut rx, "after the election").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_predecessor_watches_with_expiry() {
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "election-pred").await;
    let dir = ns.path("election");
    admin.create(&dir, b"", &persistent()).await.unwrap();

    // Candidate 3 is detached: dropping it leaves its session to expire.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut cands = start_candidates(&target, &dir, 5, &[3], Watching::Predecessor, &tx).await;
    let node = |i: usize| format!("{dir}/n-{i:010}");
    let deleted = |who: usize, pred: usize| notified(who, "NodeDeleted", &node(pred));

    let initial = vec![
        Election::Elected(0),
        Election::Armed(1),
        Election::Armed(2),
        Election::Armed(3),
        Election::Armed(4),
    ];
    expect_reports(&mut rx, initial, "initial election").await;
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[0].session.0));

    // A follower in the middle leaves: only its successor hears about it (and now watches the
    // node before the one that left).
    stop_candidate(&mut cands[2]).await;
    expect_reports(
        &mut rx,
        vec![deleted(3, 2), Election::Armed(3)],
        "follower 2 leaves",
    )
    .await;
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[0].session.0));

    stop_candidate(&mut cands[0]).await;
    expect_reports(
        &mut rx,
        vec![deleted(1, 0), Election::Elected(1)],
        "leader 0 closes",
    )
    .await;
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[1].session.0));

    stop_candidate(&mut cands[1]).await;
    expect_reports(
        &mut rx,
        vec![deleted(3, 1), Election::Elected(3)],
        "leader 1 closes",
    )
    .await;
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[3].session.0));

    // Leader 3's session expires: its socket closes, but its node must stay until the server
    // expires the session (4 s negotiated timeout).
    let dropped_at = Instant::now();
    stop_candidate(&mut cands[3]).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let stat = admin
        .check_stat(&node(3))
        .await
        .unwrap()
        .expect("ephemeral must outlive the connection");
    assert_eq!(stat.ephemeral_owner, cands[3].session.0);
    assert_quiet(&mut rx, "before the expiry").await;
    expect_reports(
        &mut rx,
        vec![deleted(4, 3), Election::Elected(4)],
        "leader 3 expires",
    )
    .await;
    let elapsed = dropped_at.elapsed();
    assert!(
        elapsed >= Duration::from_millis(2500),
        "session expired after only {elapsed:?}"
    );
    assert_eq!(leader_session(&admin, &dir).await, Some(cands[4].session.0));

    stop_candidate(&mut cands[4]).await;
    eventually("the last election node to go", || async {
        sorted_children(&admin, &dir).await.is_empty()
    })
    .await;
    let (_, stat) = admin.get_children(&dir).await.unwrap();
    assert_eq!(
        (stat.num_children, stat.cversion),
        (0, 10),
        "5 creates + 5 deletes"
    );
    assert_quiet(&mut rx, "after the election").await;
}

// ---------------------------------------------------------------------------------------------
// 2. Distributed lock
// ---------------------------------------------------------------------------------------------

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_lock_mutual_exclusion() {
    const WORKERS: usize = 4;
    const ROUNDS: usize = 5;
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "lock").await;
    let dir = ns.path("lock");
    let counter = ns.path("counter");
    admin.create(&dir, b"", &persistent()).await.unwrap();
    admin.create(&counter, b"0", &persistent()).await.unwrap();

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
                let (data, stat) = client.get_data(&counter).await.map_err(err_text)?;
                let value: usize = String::from_utf8(data).unwrap().parse().unwrap();
                tokio::time::sleep(Duration::from_millis(3)).await;
                client
                    .set_data(
                        &counter,
                        (value + 1).to_string().as_bytes(),
                        Some(stat.version),
                    )
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
    let (data, stat) = admin.get_data(&counter).await.unwrap();
    assert_eq!(String::from_utf8(data).unwrap(), total.to_string());
    assert_eq!(stat.version, total as i32);
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
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "crate-lock").await;
    let dir = ns.path("locks/mutex");
    let counter = ns.path("counter");
    admin.create(&counter, b"0", &persistent()).await.unwrap();

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
                let (data, stat) = client.get_data(&counter).await.map_err(err_text)?;
                let value: usize = String::from_utf8(data).unwrap().parse().unwrap();
                tokio::time::sleep(Duration::from_millis(3)).await;
                let new_stat = lock
                    .set_data(
                        &counter,
                        (value + 1).to_string().as_bytes(),
                        Some(stat.version),
                    )
                    .await
                    .map_err(|e| format!("guarded write: {e}"))?;
                if new_stat.version != stat.version + 1 {
                    return Err(format!(
                        "version {} after write over {}",
                        new_stat.version, stat.version
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
    let (data, stat) = admin.get_data(&counter).await.unwrap();
    assert_eq!(
        String::from_utf8(data).unwrap(),
        (WORKERS * ROUNDS).to_string()
    );
    assert_eq!(stat.version, (WORKERS * ROUNDS) as i32);
    eventually("released lock nodes to be deleted", || async {
        sorted_children(&admin, &dir).await.is_empty()
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 3. Configuration publish / subscribe
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Sub {
    Seen { data: Vec<u8>, stat: zk::Stat },
    Event { event: zk::EventType, path: String },
    Gone,
    Failed(String),
}

async fn subscriber(client: zk::Client, path: String, tx: mpsc::UnboundedSender<Sub>) {
    loop {
        match client.get_and_watch_data(&path).await {
            Ok((data, stat, watcher)) => {
                let _ = tx.send(Sub::Seen { data, stat });
                let event = watcher.changed().await;
                let _ = tx.send(Sub::Event {
                    event: event.event_type,
                    path: event.path,
                });
            }
            Err(zk::Error::NoNode) => {
                let _ = tx.send(Sub::Gone);
                return;
            }
            Err(e) => {
                let _ = tx.send(Sub::Failed(e.to_string()));
                return;
            }
        }
    }
}

async fn expect_seen(rx: &mut mpsc::UnboundedReceiver<Sub>, what: &str) -> (Vec<u8>, zk::Stat) {
    match recv(rx, what).await {
        Sub::Seen { data, stat } => (data, stat),
        Sub::Failed(error) => panic!("{what}: subscriber failed: {error}"),
        other => panic!("{what}: expected a read, got {other:?}"),
    }
}

async fn expect_sub_event(
    rx: &mut mpsc::UnboundedReceiver<Sub>,
    event: zk::EventType,
    path: &str,
    what: &str,
) {
    match recv(rx, what).await {
        Sub::Event {
            event: got,
            path: got_path,
        } => {
            assert_eq!((got, got_path.as_str()), (event, path), "{what}");
        }
        Sub::Failed(error) => panic!("{what}: subscriber failed: {error}"),
        other => panic!("{what}: expected {event:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_publish_subscribe() {
    const SUBSCRIBERS: usize = 3;
    let target = Target::start().await;
    let publisher = connect(&target).await;
    let ns = Ns::create(&publisher, "config").await;
    let path = ns.path("config");
    let (created, _) = publisher.create(&path, b"v0", &persistent()).await.unwrap();
    assert_eq!((created.version, created.data_length), (0, 2));

    let mut subs = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(subscriber(connect(&target).await, path.clone(), tx));
        let (data, stat) = expect_seen(&mut rx, "initial read").await;
        assert_eq!((data.as_slice(), stat), (&b"v0"[..], created));
        subs.push(rx);
    }

    // Lock step: every subscriber sees every version, in order.
    let mut last = created;
    for version in 1..=5 {
        let data = format!("v{version}");
        let stat = publisher
            .set_data(&path, data.as_bytes(), Some(version - 1))
            .await
            .unwrap();
        assert_eq!(stat.version, version);
        assert_eq!(
            (stat.czxid, stat.ctime, stat.pzxid),
            (created.czxid, created.ctime, created.pzxid)
        );
        assert!(
            stat.mzxid > last.mzxid && stat.mtime >= last.mtime,
            "{stat:?} after {last:?}"
        );
        assert_eq!(stat.data_length, data.len() as i32);
        for rx in subs.iter_mut() {
            expect_sub_event(rx, zk::EventType::NodeDataChanged, &path, "data change").await;
            let (seen, seen_stat) = expect_seen(rx, "re-read after the event").await;
            assert_eq!((seen, seen_stat), (data.clone().into_bytes(), stat));
        }
        last = stat;
    }
    assert_eq!(
        publisher.set_data(&path, b"stale", Some(3)).await,
        Err(zk::Error::BadVersion),
        "a publisher with a stale version must be refused"
    );

    // Burst: subscribers may skip versions but must end on the latest, never going backwards.
    let final_version = 25;
    for version in 6..=final_version {
        publisher
            .set_data(&path, format!("v{version}").as_bytes(), Some(version - 1))
            .await
            .unwrap();
    }
    for rx in subs.iter_mut() {
        let mut seen_version = 5;
        let mut last_mzxid = last.mzxid;
        while seen_version < final_version {
            expect_sub_event(rx, zk::EventType::NodeDataChanged, &path, "burst change").await;
            let (data, stat) = expect_seen(rx, "burst re-read").await;
            assert!(
                stat.version > seen_version,
                "version went from {seen_version} to {}",
                stat.version
            );
            assert!(stat.mzxid > last_mzxid);
            assert_eq!(data, format!("v{}", stat.version).into_bytes());
            seen_version = stat.version;
            last_mzxid = stat.mzxid;
        }
        assert_quiet(rx, "after the latest version").await;
    }

    // Removing the configuration ends every subscription.
    publisher.delete(&path, Some(final_version)).await.unwrap();
    for rx in subs.iter_mut() {
        expect_sub_event(rx, zk::EventType::NodeDeleted, &path, "deletion").await;
        assert!(matches!(recv(rx, "end of subscription").await, Sub::Gone));
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Group membership
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Obs {
    View {
        members: Vec<String>,
        stat: zk::Stat,
    },
    Event {
        event: zk::EventType,
        path: String,
    },
    Failed(String),
}

async fn observer(client: zk::Client, path: String, tx: mpsc::UnboundedSender<Obs>) {
    loop {
        match client.get_and_watch_children(&path).await {
            Ok((mut members, stat, watcher)) => {
                members.sort();
                let _ = tx.send(Obs::View { members, stat });
                let event = watcher.changed().await;
                let _ = tx.send(Obs::Event {
                    event: event.event_type,
                    path: event.path,
                });
            }
            Err(zk::Error::NoNode) => return,
            Err(e) => {
                let _ = tx.send(Obs::Failed(e.to_string()));
                return;
            }
        }
    }
}

async fn expect_view(
    rx: &mut mpsc::UnboundedReceiver<Obs>,
    members: &[&str],
    cversion: i32,
    what: &str,
) -> zk::Stat {
    match recv(rx, what).await {
        Obs::View { members: got, stat } => {
            assert_eq!(got, members, "{what}");
            assert_eq!(
                (stat.cversion, stat.num_children),
                (cversion, members.len() as i32),
                "{what}"
            );
            stat
        }
        Obs::Failed(error) => panic!("{what}: observer failed: {error}"),
        other => panic!("{what}: expected a view, got {other:?}"),
    }
}

async fn expect_obs_event(
    rx: &mut mpsc::UnboundedReceiver<Obs>,
    event: zk::EventType,
    path: &str,
    what: &str,
) {
    match recv(rx, what).await {
        Obs::Event {
            event: got,
            path: got_path,
        } => assert_eq!((got, got_path.as_str()), (event, path), "{what}"),
        Obs::Failed(error) => panic!("{what}: observer failed: {error}"),
        other => panic!("{what}: expected {event:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_membership() {
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "members").await;
    let group = ns.path("members");
    admin.create(&group, b"", &persistent()).await.unwrap();

    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(observer(connect(&target).await, group.clone(), tx));
    let mut pzxid = expect_view(&mut rx, &[], 0, "empty group").await.pzxid;

    // Four members join one by one; m3 is detached so that it can expire later.
    let names = ["m0", "m1", "m2", "m3"];
    let mut members = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let member = if i == 3 {
            connect_detached(&target).await
        } else {
            connect(&target).await
        };
        let (stat, _) = member
            .create(
                &format!("{group}/{name}"),
                format!("host-{i}:2181").as_bytes(),
                &ephemeral(),
            )
            .await
            .unwrap();
        assert_eq!(stat.ephemeral_owner, member.session_id().0);
        expect_obs_event(&mut rx, zk::EventType::NodeChildrenChanged, &group, "join").await;
        let view = expect_view(&mut rx, &names[..=i], i as i32 + 1, "after a join").await;
        assert_eq!(
            view.pzxid, stat.czxid,
            "pzxid is the zxid of the last child change"
        );
        pzxid = view.pzxid;
        members.push(Some(member));
    }
    for (i, member) in members.iter().enumerate() {
        let (data, stat) = admin
            .get_data(&format!("{group}/{}", names[i]))
            .await
            .unwrap();
        assert_eq!(data, format!("host-{i}:2181").into_bytes());
        assert_eq!(
            stat.ephemeral_owner,
            member.as_ref().unwrap().session_id().0
        );
    }

    // m1 closes its session: its node goes at once, not after the session timeout.
    let closed_at = Instant::now();
    drop(members[1].take());
    expect_obs_event(
        &mut rx,
        zk::EventType::NodeChildrenChanged,
        &group,
        "m1 leaves",
    )
    .await;
    let view = expect_view(&mut rx, &["m0", "m2", "m3"], 5, "after m1 closed").await;
    assert!(
        closed_at.elapsed() < Duration::from_secs(3),
        "close took {:?}",
        closed_at.elapsed()
    );
    assert!(view.pzxid > pzxid);
    pzxid = view.pzxid;

    // m2 leaves explicitly but keeps its session.
    members[2]
        .as_ref()
        .unwrap()
        .delete(&format!("{group}/m2"), Some(0))
        .await
        .unwrap();
    expect_obs_event(
        &mut rx,
        zk::EventType::NodeChildrenChanged,
        &group,
        "m2 leaves",
    )
    .await;
    let view = expect_view(&mut rx, &["m0", "m3"], 6, "after m2 deleted its node").await;
    assert!(view.pzxid > pzxid);

    // m3 disappears without closing: the server must expire it.
    let dropped_at = Instant::now();
    drop(members[3].take());
    expect_obs_event(
        &mut rx,
        zk::EventType::NodeChildrenChanged,
        &group,
        "m3 expires",
    )
    .await;
    expect_view(&mut rx, &["m0"], 7, "after m3 expired").await;
    let elapsed = dropped_at.elapsed();
    assert!(
        elapsed >= Duration::from_millis(2500),
        "session expired after only {elapsed:?}"
    );

    drop(members[0].take());
    expect_obs_event(
        &mut rx,
        zk::EventType::NodeChildrenChanged,
        &group,
        "m0 leaves",
    )
    .await;
    expect_view(&mut rx, &[], 8, "after everyone left").await;

    admin.delete(&group, Some(0)).await.unwrap();
    expect_obs_event(&mut rx, zk::EventType::NodeDeleted, &group, "group removed").await;
    assert_eq!(
        members[2]
            .as_ref()
            .unwrap()
            .check_stat(&group)
            .await
            .unwrap(),
        None
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Double barrier
// ---------------------------------------------------------------------------------------------

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
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "barrier").await;
    let dir = ns.path("barrier");
    admin.create(&dir, b"", &persistent()).await.unwrap();

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

// ---------------------------------------------------------------------------------------------
// 6. FIFO queue
// ---------------------------------------------------------------------------------------------

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_queue() {
    const PRODUCERS: usize = 3;
    const CONSUMERS: usize = 3;
    const ITEMS: usize = 10;
    let target = Target::start().await;
    let admin = connect(&target).await;
    let ns = Ns::create(&admin, "queue").await;
    let dir = ns.path("queue");
    admin.create(&dir, b"", &persistent()).await.unwrap();

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
        let seqs: Vec<i64> = sent.iter().map(|(name, _)| suffix(name)).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "one producer's items got decreasing sequence numbers: {seqs:?}"
        );
        for (name, data) in sent {
            assert!(
                produced.insert(name.clone(), data).is_none(),
                "sequence number of {name} handed out twice"
            );
        }
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
        let seqs: Vec<i64> = taken.iter().map(|(name, _)| suffix(name)).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "a consumer went backwards: {seqs:?}"
        );
        for (name, data) in taken {
            assert!(
                consumed.insert(name.clone(), data).is_none(),
                "{name} was consumed twice"
            );
        }
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

// ---------------------------------------------------------------------------------------------
// 7. Operations one by one
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_modes_and_stat_fields() {
    let target = Target::start().await;
    let client = connect(&target).await;
    let ns = Ns::create(&client, "create").await;
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
    let target = Target::start().await;
    let client = connect(&target).await;
    let ns = Ns::create(&client, "sequence").await;
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
    assert_eq!(
        client.create(&format!("{dir}/y"), b"", &persistent()).await,
        Err(zk::Error::NodeExists)
    );
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
    let target = Target::start().await;
    let client = connect(&target).await;
    let ns = Ns::create(&client, "setdata").await;
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
    assert_eq!(
        client
            .create(&format!("{node}/child"), b"", &persistent())
            .await,
        Err(zk::Error::NoAuth)
    );
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
        client
            .create(
                &ns.path("bad"),
                b"",
                &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&bad))
            )
            .await,
        Err(zk::Error::InvalidAcl)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes() {
    let target = Target::start().await;
    let client = connect(&target).await;
    let ns = Ns::create(&client, "errors").await;
    let node = ns.path("n");
    client.create(&node, b"", &persistent()).await.unwrap();
    client
        .create(&format!("{node}/child"), b"", &persistent())
        .await
        .unwrap();
    let missing = ns.path("missing");

    assert_eq!(
        client.create(&node, b"", &persistent()).await,
        Err(zk::Error::NodeExists)
    );
    assert_eq!(
        client
            .create(&format!("{missing}/x"), b"", &persistent())
            .await,
        Err(zk::Error::NoNode)
    );
    assert_eq!(
        client
            .create(&format!("{missing}/x-"), b"", &persistent_sequential())
            .await,
        Err(zk::Error::NoNode)
    );
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
    assert_eq!(
        client.create(&format!("{eph}/x"), b"", &persistent()).await,
        Err(zk::Error::NoChildrenForEphemerals)
    );
    assert_eq!(
        client
            .create(&format!("{eph}/x-"), b"", &ephemeral_sequential())
            .await,
        Err(zk::Error::NoChildrenForEphemerals)
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_and_multi_read() {
    let target = Target::start().await;
    let client = connect(&target).await;
    let watcher_client = connect(&target).await;
    let ns = Ns::create(&client, "multi").await;
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
    assert_eq!(
        writer.commit().await,
        Err(zk::MultiWriteError::OperationFailed {
            index: 1,
            source: zk::Error::BadVersion
        })
    );
    let mut writer = client.new_multi_writer();
    writer.add_create(&x, b"", &persistent()).unwrap();
    writer.add_set_data(&m, b"zz", None).unwrap();
    writer.add_create(&m, b"", &persistent()).unwrap();
    assert_eq!(
        writer.commit().await,
        Err(zk::MultiWriteError::OperationFailed {
            index: 2,
            source: zk::Error::NodeExists
        })
    );
    let mut writer = client.new_multi_writer();
    writer.add_delete(&ns.path("nope"), None).unwrap();
    writer.add_create(&x, b"", &persistent()).unwrap();
    assert_eq!(
        writer.commit().await,
        Err(zk::MultiWriteError::OperationFailed {
            index: 0,
            source: zk::Error::NoNode
        })
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_sync_ephemerals_counts_and_whoami() {
    let target = Target::start().await;
    let a = connect(&target).await;
    let b = connect(&target).await;
    let ns = Ns::create(&a, "misc").await;
    let dir = ns.path("d");
    a.create(&dir, b"dir", &persistent()).await.unwrap();
    a.create(&format!("{dir}/sub"), b"", &persistent())
        .await
        .unwrap();
    for path in ["e1", "e1x", "sub/e2"] {
        a.create(&format!("{dir}/{path}"), b"", &ephemeral())
            .await
            .unwrap();
    }
    b.create(&format!("{dir}/e1b"), b"", &ephemeral())
        .await
        .unwrap();

    // getChildren2 returns the same Stat as getData.
    let (mut children, stat) = a.get_children(&dir).await.unwrap();
    children.sort();
    assert_eq!(children, ["e1", "e1b", "e1x", "sub"]);
    assert_eq!(a.get_data(&dir).await.unwrap(), (b"dir".to_vec(), stat));
    let (leaf_children, leaf) = a.get_children(&format!("{dir}/e1")).await.unwrap();
    assert!(leaf_children.is_empty());
    assert_eq!(
        (leaf.num_children, leaf.ephemeral_owner),
        (0, a.session_id().0)
    );

    // sync (on existing and missing paths; sync does not check existence).
    a.sync(&dir).await.unwrap();
    a.sync(&ns.path("missing")).await.unwrap();

    // getEphemerals: the caller's own, filtered by plain string prefix.
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let mine: Vec<String> = ["e1", "e1x", "sub/e2"]
        .iter()
        .map(|p| format!("{dir}/{p}"))
        .collect();
    assert_eq!(sorted(a.list_ephemerals("/").await.unwrap()), mine);
    assert_eq!(sorted(a.list_ephemerals(&dir).await.unwrap()), mine);
    assert_eq!(
        sorted(a.list_ephemerals(&format!("{dir}/e1")).await.unwrap()),
        mine[..2]
    );
    assert_eq!(
        a.list_ephemerals(&format!("{dir}/sub/e2")).await.unwrap(),
        [format!("{dir}/sub/e2")]
    );
    assert_eq!(
        a.list_ephemerals(&ns.path("nothing")).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        b.list_ephemerals("/").await.unwrap(),
        [format!("{dir}/e1b")]
    );

    // getAllChildrenNumber counts all descendants.
    assert_eq!(a.count_descendants_number(&dir).await.unwrap(), 5);
    assert_eq!(a.count_descendants_number(&ns.root).await.unwrap(), 6);
    assert_eq!(
        a.count_descendants_number(&format!("{dir}/sub/e2"))
            .await
            .unwrap(),
        0
    );

    // whoAmI: the connection's ip identity, plus digest users after addauth.
    let who = |users: Vec<zk::AuthUser>| {
        let mut v: Vec<(String, String)> = users
            .iter()
            .map(|u| (u.scheme().to_string(), u.user().to_string()))
            .collect();
        v.sort();
        v
    };
    let ip = ("ip".to_string(), target.addr().ip().to_string());
    assert_eq!(who(a.list_auth_users().await.unwrap()), vec![ip.clone()]);
    a.auth("digest", b"user:pass").await.unwrap();
    assert_eq!(
        who(a.list_auth_users().await.unwrap()),
        [("digest".to_string(), "user".to_string()), ip.clone()]
    );
    assert_eq!(who(b.list_auth_users().await.unwrap()), [ip]);

    // The system nodes exist and the config node is readable.
    assert!(a.check_stat("/zookeeper").await.unwrap().is_some());
    a.get_config().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneshot_watches() {
    let target = Target::start().await;
    let watcher = connect(&target).await;
    let writer = connect(&target).await;
    let ns = Ns::create(&writer, "watches").await;
    let n = ns.path("n");
    let expect = |event: zk::WatchedEvent, kind: zk::EventType, path: &str| {
        assert_eq!((event.event_type, event.path.as_str()), (kind, path));
        assert_eq!(event.session_state, zk::SessionState::SyncConnected);
    };

    // exists-watch on a missing node fires NodeCreated.
    let (stat, w) = watcher.check_and_watch_stat(&n).await.unwrap();
    assert_eq!(stat, None);
    writer.create(&n, b"", &persistent()).await.unwrap();
    expect(
        within("NodeCreated", w.changed()).await,
        zk::EventType::NodeCreated,
        &n,
    );

    // exists-watch on an existing node: NodeDataChanged, then NodeDeleted on a fresh one.
    let (_, w) = watcher.check_and_watch_stat(&n).await.unwrap();
    writer.set_data(&n, b"1", None).await.unwrap();
    expect(
        within("NodeDataChanged", w.changed()).await,
        zk::EventType::NodeDataChanged,
        &n,
    );

    // Data watch: setACL, sync, reads and failed writes do not fire it.
    let (_, _, w) = watcher.get_and_watch_data(&n).await.unwrap();
    writer
        .set_acl(&n, &zk::Acls::anyone_all(), None)
        .await
        .unwrap();
    writer.sync(&n).await.unwrap();
    writer.get_data(&n).await.unwrap();
    assert_eq!(
        writer.set_data(&n, b"x", Some(9)).await,
        Err(zk::Error::BadVersion)
    );
    assert_eq!(
        writer.create(&n, b"", &persistent()).await,
        Err(zk::Error::NodeExists)
    );
    let w = match tokio::time::timeout(QUIET, w.changed()).await {
        Ok(event) => panic!("watch fired without a data change: {event:?}"),
        Err(_) => watcher.get_and_watch_data(&n).await.unwrap().2,
    };
    writer.set_data(&n, b"2", None).await.unwrap();
    expect(
        within("NodeDataChanged", w.changed()).await,
        zk::EventType::NodeDataChanged,
        &n,
    );

    // Child watch: child create and delete fire NodeChildrenChanged on the parent, a child's
    // data change does not.
    let child = format!("{n}/c");
    let (_, _, w) = watcher.get_and_watch_children(&n).await.unwrap();
    writer.create(&child, b"", &persistent()).await.unwrap();
    expect(
        within("NodeChildrenChanged", w.changed()).await,
        zk::EventType::NodeChildrenChanged,
        &n,
    );
    let (_, w) = watcher.list_and_watch_children(&n).await.unwrap();
    writer.set_data(&child, b"x", None).await.unwrap();
    writer.set_data(&n, b"x", None).await.unwrap();
    let w = match tokio::time::timeout(QUIET, w.changed()).await {
        Ok(event) => panic!("child watch fired without a child change: {event:?}"),
        Err(_) => watcher.list_and_watch_children(&n).await.unwrap().1,
    };
    writer.delete(&child, None).await.unwrap();
    expect(
        within("NodeChildrenChanged", w.changed()).await,
        zk::EventType::NodeChildrenChanged,
        &n,
    );

    // Deleting the node fires NodeDeleted on its exists, data and child watches alike.
    let (_, exists_w) = watcher.check_and_watch_stat(&n).await.unwrap();
    let (_, _, data_w) = watcher.get_and_watch_data(&n).await.unwrap();
    let (_, child_w) = watcher.list_and_watch_children(&n).await.unwrap();
    writer.delete(&n, None).await.unwrap();
    expect(
        within("NodeDeleted (exists)", exists_w.changed()).await,
        zk::EventType::NodeDeleted,
        &n,
    );
    expect(
        within("NodeDeleted (data)", data_w.changed()).await,
        zk::EventType::NodeDeleted,
        &n,
    );
    expect(
        within("NodeDeleted (child)", child_w.changed()).await,
        zk::EventType::NodeDeleted,
        &n,
    );

    // Reads with a watch on a missing node fail without leaving a watch behind.
    assert_eq!(
        watcher.get_and_watch_data(&n).await.err(),
        Some(zk::Error::NoNode)
    );
    assert_eq!(
        watcher.get_and_watch_children(&n).await.err(),
        Some(zk::Error::NoNode)
    );
}

/// A notification reaches the client before the reply to the write that caused it (same
/// connection), and before the reply to any later request of the watching connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_events_precede_replies() {
    let target = Target::start().await;
    let a = connect(&target).await;
    let b = connect(&target).await;
    let ns = Ns::create(&a, "ordering").await;
    let n = ns.path("n");
    a.create(&n, b"0", &persistent()).await.unwrap();

    for round in 1..=5 {
        let (_, _, w) = a.get_and_watch_data(&n).await.unwrap();
        a.set_data(&n, round.to_string().as_bytes(), None)
            .await
            .unwrap();
        let event = w
            .changed()
            .now_or_never()
            .expect("event must arrive before the reply of its own write");
        assert_eq!(event.event_type, zk::EventType::NodeDataChanged);

        let (_, _, w) = a.get_and_watch_data(&n).await.unwrap();
        let (_, _, child_w) = a.get_and_watch_children(&ns.root).await.unwrap();
        b.set_data(&n, format!("b{round}").as_bytes(), None)
            .await
            .unwrap();
        b.create(&ns.path(&format!("c{round}")), b"", &persistent())
            .await
            .unwrap();
        let (data, _) = a.get_data(&n).await.unwrap();
        assert_eq!(data, format!("b{round}").into_bytes());
        let event = w
            .changed()
            .now_or_never()
            .expect("event must arrive before a later read reply");
        assert_eq!(event.event_type, zk::EventType::NodeDataChanged);
        let event = child_w
            .changed()
            .now_or_never()
            .expect("child event must arrive before a later read reply");
        assert_eq!(
            (event.event_type, event.path),
            (zk::EventType::NodeChildrenChanged, ns.root.clone())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_and_recursive_watches() {
    let target = Target::start().await;
    let watcher = connect(&target).await;
    let recursive_watcher = connect(&target).await;
    let writer = connect(&target).await;
    let ns = Ns::create(&writer, "persistent").await;
    let p = ns.path("p");
    let child = format!("{p}/c");
    let grandchild = format!("{child}/g");

    // Both registered before the node exists.
    let mut pw = watcher
        .watch(&p, zk::AddWatchMode::Persistent)
        .await
        .unwrap();
    let mut rw = recursive_watcher
        .watch(&p, zk::AddWatchMode::PersistentRecursive)
        .await
        .unwrap();

    writer.create(&p, b"", &persistent()).await.unwrap();
    writer.create(&child, b"", &persistent()).await.unwrap();
    writer.set_data(&child, b"1", None).await.unwrap();
    writer
        .create(&grandchild, b"", &persistent())
        .await
        .unwrap();
    writer.set_data(&grandchild, b"1", None).await.unwrap();
    writer.set_data(&p, b"1", None).await.unwrap();
    writer.delete(&grandchild, None).await.unwrap();
    writer.delete(&child, None).await.unwrap();
    writer.delete(&p, None).await.unwrap();
    // Persistent watches survive the deletion of their node.
    writer.create(&p, b"", &persistent()).await.unwrap();
    writer.set_data(&p, b"2", None).await.unwrap();

    use zk::EventType::*;
    let expected_persistent = [
        (NodeCreated, &p),
        (NodeChildrenChanged, &p),
        (NodeDataChanged, &p),
        (NodeChildrenChanged, &p),
        (NodeDeleted, &p),
        (NodeCreated, &p),
        (NodeDataChanged, &p),
    ];
    for (i, (kind, path)) in expected_persistent.iter().enumerate() {
        let event = within("persistent watch event", pw.changed()).await;
        assert_eq!(
            (event.event_type, &event.path),
            (*kind, *path),
            "persistent event #{i}"
        );
    }
    let expected_recursive = [
        (NodeCreated, &p),
        (NodeCreated, &child),
        (NodeDataChanged, &child),
        (NodeCreated, &grandchild),
        (NodeDataChanged, &grandchild),
        (NodeDataChanged, &p),
        (NodeDeleted, &grandchild),
        (NodeDeleted, &child),
        (NodeDeleted, &p),
        (NodeCreated, &p),
        (NodeDataChanged, &p),
    ];
    for (i, (kind, path)) in expected_recursive.iter().enumerate() {
        let event = within("recursive watch event", rw.changed()).await;
        assert_eq!(
            (event.event_type, &event.path),
            (*kind, *path),
            "recursive event #{i}"
        );
    }
    if let Ok(event) = tokio::time::timeout(QUIET, pw.changed()).await {
        panic!("extra persistent event {event:?}");
    }
    if let Ok(event) = tokio::time::timeout(QUIET, rw.changed()).await {
        panic!("extra recursive event {event:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_timeout_negotiation() {
    let target = Target::start().await;
    let mut ids = BTreeSet::new();
    // Default tickTime 2000: bounds are 4 s and 40 s.
    for (requested, negotiated) in [(1, 4), (4, 4), (10, 10), (100, 40)] {
        let client = connect_with(
            &target,
            zk::Client::connector().with_session_timeout(Duration::from_secs(requested)),
        )
        .await;
        assert_eq!(
            client.session_timeout(),
            Duration::from_secs(negotiated),
            "requested {requested}s"
        );
        assert_eq!(client.state(), zk::SessionState::SyncConnected);
        assert_ne!(client.session_id().0, 0);
        assert!(ids.insert(client.session_id().0), "session id reused");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_resume_close_and_expiry() {
    let target = Target::start().await;
    let observer = connect(&target).await;
    let ns = Ns::create(&observer, "session").await;
    let e1 = ns.path("e1");
    let e2 = ns.path("e2");

    // A detached session survives the loss of its connection and can be resumed.
    let first = connect_detached(&target).await;
    assert_eq!(first.session_timeout(), SHORT_SESSION);
    first.create(&e1, b"", &ephemeral()).await.unwrap();
    let info = first.session().clone();
    let id = first.session_id();
    drop(first);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let resumed = zk::Client::connector()
        .with_session(info.clone())
        .with_session_timeout(SHORT_SESSION)
        .with_detached();
    let second = connect_with(&target, resumed).await;
    assert_eq!(second.session_id(), id, "same session after reconnecting");
    assert_eq!(
        second.list_ephemerals(&ns.root).await.unwrap(),
        vec![e1.clone()]
    );
    let (stat, _) = second.create(&e2, b"", &ephemeral()).await.unwrap();
    assert_eq!(stat.ephemeral_owner, id.0);

    // Then the session expires: both ephemerals vanish, in one transaction.
    let (_, _, dir_watch) = observer.get_and_watch_children(&ns.root).await.unwrap();
    let (_, e1_watch) = observer.check_and_watch_stat(&e1).await.unwrap();
    let dropped_at = Instant::now();
    drop(second);
    let event = within("expiry of the detached session", e1_watch.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeDeleted, e1.as_str())
    );
    let elapsed = dropped_at.elapsed();
    assert!(
        elapsed >= Duration::from_millis(2500),
        "session expired after only {elapsed:?}"
    );
    let event = within("parent notification", dir_watch.changed()).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeChildrenChanged, ns.root.as_str())
    );
    assert_eq!(observer.check_stat(&e2).await.unwrap(), None);
    let (_, root_stat) = observer.get_children(&ns.root).await.unwrap();
    assert_eq!((root_stat.num_children, root_stat.cversion), (0, 4));

    // An expired session cannot be resumed.
    let result = zk::Client::connector()
        .with_session(info)
        .with_fail_eagerly()
        .connect(&target.connect_string())
        .await
        .map(|c| c.session_id());
    assert_eq!(result, Err(zk::Error::SessionExpired));

    // A closed session is gone at once, and cannot be resumed either.
    let third = connect(&target).await;
    third.create(&e1, b"", &ephemeral()).await.unwrap();
    let info = third.session().clone();
    let closed_at = Instant::now();
    drop(third);
    eventually("ephemeral of a closed session to go", || async {
        observer.check_stat(&e1).await.unwrap().is_none()
    })
    .await;
    assert!(
        closed_at.elapsed() < Duration::from_secs(3),
        "close took {:?}",
        closed_at.elapsed()
    );
    let result = zk::Client::connector()
        .with_session(info)
        .with_fail_eagerly()
        .connect(&target.connect_string())
        .await
        .map(|c| c.session_id());
    assert_eq!(result, Err(zk::Error::SessionExpired));
}
