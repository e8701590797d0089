//! Leader election with the classic recipe: herd-style child watches against predecessor watches, leaders leaving by close and by expiry.

use super::*;

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

/// The first round: candidate 0 is elected, every other one arms its watch; the server
/// agrees that candidate 0 leads.
async fn expect_initial_election(
    rx: &mut mpsc::UnboundedReceiver<Election>,
    admin: &zk::Client,
    dir: &str,
    cands: &[Candidate],
) {
    let mut initial = vec![Election::Elected(0)];
    initial.extend((1..cands.len()).map(Election::Armed));
    expect_reports(rx, initial, "initial election").await;
    assert_eq!(leader_session(admin, dir).await, Some(cands[0].session.0));
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
    let (target, admin, ns) = start("election-herd").await;
    let dir = mkdir(&admin, &ns, "election").await;

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

    expect_initial_election(&mut rx, &admin, &dir, &cands).await;

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
    let (target, admin, ns) = start("election-pred").await;
    let dir = mkdir(&admin, &ns, "election").await;

    // Candidate 3 is detached: dropping it leaves its session to expire.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut cands = start_candidates(&target, &dir, 5, &[3], Watching::Predecessor, &tx).await;
    let node = |i: usize| format!("{dir}/n-{i:010}");
    let deleted = |who: usize, pred: usize| notified(who, "NodeDeleted", &node(pred));

    expect_initial_election(&mut rx, &admin, &dir, &cands).await;

    // A follower in the middle leaves: only its successor hears about it (and now watches the
    // node before the one that left). Then leaders close one after another: only the next in
    // line is told, and it takes over.
    let steps = [
        (2, Election::Armed(3), 3, 0, "follower 2 leaves"),
        (0, Election::Elected(1), 1, 1, "leader 0 closes"),
        (1, Election::Elected(3), 3, 3, "leader 1 closes"),
    ];
    for (gone, outcome, told, leader, what) in steps {
        stop_candidate(&mut cands[gone]).await;
        expect_reports(&mut rx, vec![deleted(told, gone), outcome], what).await;
        let expected = Some(cands[leader].session.0);
        assert_eq!(leader_session(&admin, &dir).await, expected, "{what}");
    }

    // Leader 3's session expires: its socket closes, but its node must stay until the server
    // expires the session (4 s negotiated timeout).
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
