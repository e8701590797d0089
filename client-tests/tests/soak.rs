//! Soak test: a bounded churn of real clients (the `zookeeper-client` crate and the raw
//! protocol client) against one server for a given duration — leader elections, a lock with a
//! guarded counter, a work queue, sessions that expire or reconnect, and a proxy that keeps
//! cutting connections — then checks that sessions, connections, ephemerals and watches are
//! back to their baseline (read with the four-letter words `mntr`, `cons`, `wchs`, `dump`) and
//! that no election ever had two leaders at once.
//!
//! `ZKD_SOAK_SECS` sets the churn duration (default 20). By default an embedded zkd with a
//! 200 ms tick serves it; `ZKD_SOAK_ADDR=host:port` drives any running server instead (it must
//! answer those four-letter words, e.g. `zkd --tick-time 200 --4lw-whitelist
//! mntr,cons,wchs,dump,srvr`, and be otherwise idle).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use zkd_client_tests::zk_rust::*;
use zkd_protocol::{Create, PathRequest, Request};
use zkd_testkit::raw::RawClient;
use zookeeper_client as zk;

/// Session timeout of the churning clients (the embedded server's bounds are 400 ms – 4 s).
const SESSION: Duration = Duration::from_millis(3000);
/// How long the end of the run may take to return to baseline (expiries included).
const SETTLE: Duration = Duration::from_secs(30);

/// Counts of what happened, printed at the end.
#[derive(Default)]
struct Stats {
    elections: AtomicU64,
    abdications_expired: AtomicU64,
    lock_grants: AtomicU64,
    produced: AtomicU64,
    consumed: AtomicU64,
    sessions: AtomicU64,
    expired_sessions: AtomicU64,
    resumed_sessions: AtomicU64,
    cuts: AtomicU64,
    cut_connections: AtomicU64,
    /// Errors of a lost connection or session that the workers absorbed by reconnecting.
    client_errors: AtomicU64,
    /// A new leader or lock holder found its predecessor still believing it held the role,
    /// but the predecessor's node was gone: its session had ended (the client had not yet
    /// noticed), which a recipe cannot prevent.
    stale_overlaps: AtomicU64,
}

impl Stats {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a worker's round ended early.
#[derive(Debug)]
enum Fault {
    /// A lost connection or session (cut by the proxy, or a client starved of CPU).
    Lost(String),
    /// Something a correct server never does.
    Bug(String),
}

/// Errors a cut connection or an expired session causes (socket errors surface as `Custom`).
fn is_transient(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::Custom(_)
            | zk::Error::NoHosts
            | zk::Error::ConnectionLoss
            | zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::Timeout
    )
}

/// Classifies a client error of the operation `what`.
fn fault(what: &'static str) -> impl Fn(zk::Error) -> Fault {
    move |e| {
        if is_transient(&e) {
            Fault::Lost(format!("{what}: {e}"))
        } else {
            Fault::Bug(format!("{what}: {e}"))
        }
    }
}

/// Who is inside a one-at-a-time section (election leader, lock holder), and the node that
/// gives them the right.
type Slot = Mutex<Option<(String, String)>>;

/// Shared state of one soak run.
struct Soak {
    /// The server itself.
    server: SocketAddr,
    /// The connection-cutting proxy in front of it.
    proxy: SocketAddr,
    root: String,
    started: Instant,
    deadline: Instant,
    stats: Stats,
    leader: Slot,
    holder: Slot,
    failures: Mutex<Vec<String>>,
    /// The lost connections and sessions absorbed, by error.
    lost: Mutex<BTreeMap<String, u64>>,
    /// Queue items created for sure, and those whose create was in doubt (connection lost).
    produced: Mutex<(BTreeSet<String>, BTreeSet<String>)>,
    /// Queue items by id: consumed once (true) or with a delete in doubt (false).
    taken: Mutex<BTreeMap<String, bool>>,
    /// Guarded counter writes whose outcome is unknown (connection cut mid-write).
    uncertain_writes: AtomicU64,
}

impl Soak {
    fn running(&self) -> bool {
        Instant::now() < self.deadline
    }

    fn fail(&self, what: String) {
        eprintln!("soak failure: {what}");
        self.failures.lock().unwrap().push(what);
    }

    /// Records the end of a round: a lost connection is counted, a bug recorded.
    /// After one session of a worker: `true` to go on with another (a lost session or
    /// connection is counted by [`Soak::absorb`]), `false` when the worker must stop.
    fn carry_on(&self, who: &str, outcome: Result<(), Fault>) -> bool {
        match outcome {
            Ok(()) => true,
            Err(f) => self.absorb(who, f),
        }
    }

    fn absorb(&self, who: &str, f: Fault) -> bool {
        match f {
            Fault::Lost(e) => {
                Stats::add(&self.stats.client_errors);
                *self.lost.lock().unwrap().entry(e).or_default() += 1;
                true
            }
            Fault::Bug(e) => {
                self.fail(format!("{who}: {e}"));
                false
            }
        }
    }

    /// Enters a one-at-a-time section. If someone is still inside, their node must be gone
    /// (their session ended): otherwise the server granted the role twice.
    async fn enter(
        &self,
        slot: &Slot,
        kind: &str,
        me: &str,
        node: &str,
        client: &zk::Client,
    ) -> Result<(), Fault> {
        let before = slot
            .lock()
            .unwrap()
            .replace((me.to_string(), node.to_string()));
        if let Some((other, other_node)) = before {
            match client.check_stat(&other_node).await {
                Ok(None) => Stats::add(&self.stats.stale_overlaps),
                Ok(Some(_)) => {
                    return Err(Fault::Bug(format!(
                        "{kind}: {me} ({node}) granted while {other} ({other_node}) still holds it"
                    )))
                }
                Err(e) => return Err(fault("checking the previous holder")(e)),
            }
        }
        Ok(())
    }

    fn leave(&self, slot: &Slot, me: &str) {
        let mut cur = slot.lock().unwrap();
        if cur.as_ref().is_some_and(|(who, _)| who == me) {
            *cur = None;
        }
    }

    fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root)
    }

    async fn connect(&self, via_proxy: bool, detached: bool) -> Result<zk::Client, Fault> {
        let mut c = zk::Client::connector().with_session_timeout(SESSION);
        if detached {
            c = c.with_detached();
        }
        let addr = if via_proxy { self.proxy } else { self.server };
        let client = tokio::time::timeout(WAIT, c.with_fail_eagerly().connect(&addr.to_string()))
            .await
            .map_err(|_| Fault::Lost("connect timed out".into()))?
            .map_err(fault("connect"))?;
        Stats::add(&self.stats.sessions);
        Ok(client)
    }
}

/// A small deterministic generator (xorshift), seeded per task.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

// ---------------------------------------------------------------------------------------------
// Elections: ephemeral-sequential candidates, each watching its predecessor.
// ---------------------------------------------------------------------------------------------

async fn candidate(soak: Arc<Soak>, who: usize, seed: u64) {
    let mut rng = Rng(seed);
    let dir = soak.path("election");
    let mut term = 0;
    while soak.running() {
        term += 1;
        let how = rng.below(3); // 0 delete, 1 close the session, 2 vanish and expire
        let me = format!("candidate {who} term {term}");
        let result = match soak.connect(false, how == 2).await {
            Ok(client) => run_for_leader(&soak, &client, &dir, &me, &mut rng, how).await,
            Err(f) => Err(f),
        };
        if let Err(f) = result {
            if !soak.absorb(&me, f) {
                return;
            }
        } else if how == 2 {
            Stats::add(&soak.stats.abdications_expired);
        }
    }
}

async fn run_for_leader(
    soak: &Soak,
    client: &zk::Client,
    dir: &str,
    me: &str,
    rng: &mut Rng,
    how: u64,
) -> Result<(), Fault> {
    let (_, seq) = client
        .create(&format!("{dir}/n-"), me.as_bytes(), &ephemeral_sequential())
        .await
        .map_err(fault("create"))?;
    let node = format!("n-{seq}");
    let path = format!("{dir}/{node}");
    loop {
        let mut children = client.list_children(dir).await.map_err(fault("list"))?;
        children.sort();
        let pos = children
            .iter()
            .position(|c| *c == node)
            .ok_or_else(|| Fault::Bug(format!("own node {node} missing from {children:?}")))?;
        if pos == 0 {
            break;
        }
        let pred = format!("{dir}/{}", children[pos - 1]);
        match client.check_and_watch_stat(&pred).await {
            Ok((Some(_), watcher)) => {
                // Bounded by the predecessor's expiry at worst.
                tokio::time::timeout(WAIT, watcher.changed())
                    .await
                    .map_err(|_| Fault::Bug(format!("no event from predecessor {pred}")))?;
            }
            Ok((None, _)) => continue,
            Err(e) => return Err(fault("watch predecessor")(e)),
        }
    }
    soak.enter(&soak.leader, "election", me, &path, client)
        .await?;
    Stats::add(&soak.stats.elections);
    tokio::time::sleep(rng.millis(10, 120)).await;
    let still = client.check_stat(&path).await;
    soak.leave(&soak.leader, me);
    match still {
        Ok(Some(s)) if s.ephemeral_owner == client.session_id().0 => {}
        Ok(other) => {
            return Err(Fault::Bug(format!(
                "leader's node {path} gone while its session lives: {other:?}"
            )))
        }
        Err(e) => return Err(fault("leader check")(e)),
    }
    if how == 0 {
        client.delete(&path, None).await.map_err(fault("delete"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Locks: the crate's lock recipe guarding a read-modify-write counter, through the proxy.
// ---------------------------------------------------------------------------------------------

async fn locker(soak: Arc<Soak>, who: usize, seed: u64) {
    let mut rng = Rng(seed);
    while soak.running() {
        let me = format!("locker {who}");
        let outcome = lock_rounds(&soak, &me, &mut rng).await;
        if !soak.carry_on(&me, outcome) {
            return;
        }
    }
}

async fn lock_rounds(soak: &Soak, me: &str, rng: &mut Rng) -> Result<(), Fault> {
    let client = &soak.connect(true, false).await?;
    let dir = soak.path("lock");
    let counter = soak.path("counter");
    for _ in 0..rng.below(6) + 1 {
        if !soak.running() {
            break;
        }
        let prefix = zk::LockPrefix::new_curator(&dir, "lock-").expect("lock prefix");
        let options = zk::LockOptions::new(zk::Acls::anyone_all());
        let lock = match tokio::time::timeout(WAIT, client.lock(prefix, b"", options)).await {
            Ok(lock) => lock.map_err(fault("lock"))?,
            Err(_) => {
                return Err(Fault::Bug(format!(
                    "lock not granted within {WAIT:?}, {:.0}s into the run; lock nodes: {}",
                    soak.started.elapsed().as_secs_f64(),
                    describe_holders(soak, client, &dir).await
                )))
            }
        };
        soak.enter(&soak.holder, "lock", me, lock.lock_path(), client)
            .await?;
        Stats::add(&soak.stats.lock_grants);
        let write = async {
            let (data, stat) = client.get_data(&counter).await?;
            let value: u64 = String::from_utf8_lossy(&data).parse().unwrap_or(u64::MAX);
            tokio::time::sleep(Duration::from_millis(2)).await;
            let next = value.wrapping_add(1).to_string();
            lock.set_data(&counter, next.as_bytes(), Some(stat.version))
                .await
        };
        let result = write.await;
        soak.leave(&soak.holder, me);
        if let Err(e) = result {
            if is_transient(&e) {
                soak.uncertain_writes.fetch_add(1, Ordering::Relaxed);
            }
            return Err(fault("guarded write")(e));
        }
        // Release explicitly: the crate's release on drop is a background delete that gives
        // up on a connection reset, which would leave this session's node blocking its own
        // next round. A release in doubt ends the session instead (the caller drops it).
        let node = lock.lock_path().to_string();
        client.delete(&node, None).await.map_err(fault("release"))?;
        drop(lock);
    }
    Ok(())
}

/// The nodes in `dir` with their owner sessions and whether the server still lists each
/// session (`dump`), for the failure message of a wait that did not end.
async fn describe_holders(soak: &Soak, client: &zk::Client, dir: &str) -> String {
    let dump = four_letter(soak.server, "dump").await;
    let mut children = client.list_children(dir).await.unwrap_or_default();
    children.sort();
    let mut out = Vec::new();
    for c in children {
        let owner = match client.check_stat(&format!("{dir}/{c}")).await {
            Ok(Some(stat)) => {
                let sid = format!("0x{:x}", stat.ephemeral_owner);
                let live = if dump.contains(&sid) {
                    "live"
                } else {
                    "not in dump"
                };
                format!(
                    "{sid} ({live}, own session {})",
                    client.session_id().0 == stat.ephemeral_owner
                )
            }
            other => format!("{other:?}"),
        };
        out.push(format!("{c} owned by {owner}"));
    }
    format!("{out:?}")
}

// ---------------------------------------------------------------------------------------------
// Queue: producers append sequential items, consumers take the oldest by deleting it.
// ---------------------------------------------------------------------------------------------

async fn producer(soak: Arc<Soak>, who: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mut n = 0u64;
    while soak.running() {
        let me = format!("producer {who}");
        let outcome = produce(&soak, who, &mut n, &mut rng).await;
        if !soak.carry_on(&me, outcome) {
            return;
        }
    }
}

async fn produce(soak: &Soak, who: usize, n: &mut u64, rng: &mut Rng) -> Result<(), Fault> {
    let client = &soak.connect(false, false).await?;
    let dir = soak.path("queue");
    while soak.running() {
        *n += 1;
        let id = format!("p{who}-{n}");
        let created = client
            .create(
                &format!("{dir}/item-"),
                id.as_bytes(),
                &persistent_sequential(),
            )
            .await;
        match created {
            Ok(_) => {
                soak.produced.lock().unwrap().0.insert(id);
                Stats::add(&soak.stats.produced);
            }
            Err(e) => {
                soak.produced.lock().unwrap().1.insert(id);
                return Err(fault("create item")(e));
            }
        }
        tokio::time::sleep(rng.millis(1, 15)).await;
    }
    Ok(())
}

/// Takes items until the deadline (`drain`: until the queue is empty).
async fn take_items(soak: &Soak, client: &zk::Client, drain: bool) -> Result<(), Fault> {
    let dir = soak.path("queue");
    loop {
        let (mut items, watcher) = client
            .list_and_watch_children(&dir)
            .await
            .map_err(fault("list queue"))?;
        if items.is_empty() {
            if drain || !soak.running() {
                return Ok(());
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), watcher.changed()).await;
            continue;
        }
        drop(watcher);
        items.sort();
        for item in items.iter().take(5) {
            let path = format!("{dir}/{item}");
            let (data, _) = match client.get_data(&path).await {
                Ok(d) => d,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(fault("read item")(e)),
            };
            let id = String::from_utf8_lossy(&data).to_string();
            match client.delete(&path, None).await {
                Ok(()) => {
                    // A delete in doubt (connection cut) that another consumer then performs
                    // did not happen; a second confirmed delete would be a bug.
                    let mut taken = soak.taken.lock().unwrap();
                    if taken.insert(id.clone(), true) == Some(true) {
                        return Err(Fault::Bug(format!("queue item {id} taken twice")));
                    }
                    Stats::add(&soak.stats.consumed);
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => {
                    soak.taken.lock().unwrap().entry(id).or_insert(false);
                    return Err(fault("take item")(e));
                }
            }
        }
        if !drain && !soak.running() {
            return Ok(());
        }
    }
}

async fn consumer(soak: Arc<Soak>, who: usize) {
    while soak.running() {
        let me = format!("consumer {who}");
        let outcome = match soak.connect(true, false).await {
            Ok(client) => take_items(&soak, &client, false).await,
            Err(f) => Err(f),
        };
        if !soak.carry_on(&me, outcome) {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Session churn: ephemerals and every kind of watch, then close, vanish (expire) or resume.
// ---------------------------------------------------------------------------------------------

async fn churner(soak: Arc<Soak>, who: usize, seed: u64) {
    let mut rng = Rng(seed);
    let dir = soak.path("sessions");
    let mut n = 0u64;
    while soak.running() {
        n += 1;
        let me = format!("churner {who} session {n}");
        let outcome = match rng.below(3) {
            0 | 1 => churn_client(&soak, &dir, &mut rng).await,
            _ => churn_raw(&soak, &dir).await,
        };
        if !soak.carry_on(&me, outcome) {
            return;
        }
    }
}

async fn churn_client(soak: &Soak, dir: &str, rng: &mut Rng) -> Result<(), Fault> {
    let vanish = rng.below(2) == 0;
    let client = soak.connect(false, vanish).await?;
    let mut watchers = Vec::new();
    for _ in 0..rng.below(3) + 1 {
        let (_, seq) = client
            .create(&format!("{dir}/e-"), b"", &ephemeral_sequential())
            .await
            .map_err(fault("create"))?;
        let path = format!("{dir}/e-{seq}");
        let (_, _, w) = client
            .get_and_watch_data(&path)
            .await
            .map_err(fault("getData"))?;
        watchers.push(w);
    }
    let missing = format!("{dir}/missing-{}", rng.below(1000));
    let (_, w) = client
        .check_and_watch_stat(&missing)
        .await
        .map_err(fault("exists"))?;
    watchers.push(w);
    let (_, w) = client
        .list_and_watch_children(dir)
        .await
        .map_err(fault("children"))?;
    watchers.push(w);
    let persistent = client
        .watch(dir, zk::AddWatchMode::PersistentRecursive)
        .await
        .map_err(fault("addWatch"))?;
    tokio::time::sleep(rng.millis(5, 200)).await;
    drop(persistent);
    drop(watchers);
    drop(client);
    if vanish {
        Stats::add(&soak.stats.expired_sessions);
    }
    Ok(())
}

/// A raw session: an ephemeral, a dropped connection, a resume within the timeout (the
/// ephemeral must still be there), then a close or a second drop left to expire.
async fn churn_raw(soak: &Soak, dir: &str) -> Result<(), Fault> {
    let lost = |what: &'static str| {
        move |e: zkd_testkit::raw::ClientError| Fault::Lost(format!("{what}: {e}"))
    };
    let c = RawClient::connect(soak.server, SESSION.as_millis() as i32)
        .await
        .map_err(lost("connect"))?;
    Stats::add(&soak.stats.sessions);
    let path = format!("{dir}/raw-{:x}", c.session_id);
    let create = Request::Create(Create {
        op: zkd_protocol::OpCode::Create,
        path: path.clone(),
        data: Some(Bytes::from_static(b"raw")),
        acl: zkd_protocol::Acl::open_unsafe(),
        flags: 1,
        ttl: -1,
    });
    let reply = c.call(&create).await.map_err(lost("create"))?;
    if reply.err != 0 {
        return Err(Fault::Bug(format!("create {path}: error {}", reply.err)));
    }
    let (sid, pw, timeout, zxid) = (c.session_id, c.passwd.clone(), c.timeout_ms, c.last_zxid());
    c.abort().await;
    let c = RawClient::resume(soak.server, sid, pw, timeout, zxid)
        .await
        .map_err(lost("resume"))?;
    Stats::add(&soak.stats.resumed_sessions);
    let eph = c
        .call(&Request::GetEphemerals(PathRequest { path: dir.into() }))
        .await
        .map_err(lost("getEphemerals"))?;
    if eph.err != 0 {
        return Err(Fault::Bug(format!("getEphemerals error {}", eph.err)));
    }
    let listed: zkd_protocol::ChildrenResponse = eph
        .decode()
        .map_err(|e| Fault::Bug(format!("getEphemerals reply: {e}")))?;
    if !listed.children.contains(&path) {
        return Err(Fault::Bug(format!(
            "ephemeral {path} lost across a resume: {listed:?}"
        )));
    }
    if sid % 2 == 0 {
        c.close().await.map_err(lost("close"))?;
    } else {
        c.abort().await;
        Stats::add(&soak.stats.expired_sessions);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A TCP proxy whose connections are all cut every so often.
// ---------------------------------------------------------------------------------------------

async fn start_proxy(
    server: SocketAddr,
    pipes: Arc<Mutex<Vec<JoinHandle<()>>>>,
) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
    let addr = listener.local_addr().expect("proxy address");
    let task = tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let pipe = tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(server).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    let _ = outbound.shutdown().await;
                }
            });
            let mut pipes = pipes.lock().unwrap();
            pipes.retain(|p| !p.is_finished());
            pipes.push(pipe);
        }
    });
    (addr, task)
}

async fn cutter(soak: Arc<Soak>, pipes: Arc<Mutex<Vec<JoinHandle<()>>>>, seed: u64) {
    let mut rng = Rng(seed);
    while soak.running() {
        tokio::time::sleep(rng.millis(500, 2500)).await;
        let cut: Vec<JoinHandle<()>> = std::mem::take(&mut *pipes.lock().unwrap());
        Stats::add(&soak.stats.cuts);
        for pipe in cut {
            if !pipe.is_finished() {
                Stats::add(&soak.stats.cut_connections);
            }
            pipe.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Baseline through the four-letter words.
// ---------------------------------------------------------------------------------------------

async fn four_letter(addr: SocketAddr, word: &str) -> String {
    let mut s = within(word, TcpStream::connect(addr))
        .await
        .unwrap_or_else(|e| panic!("{word}: connect: {e}"));
    s.write_all(word.as_bytes()).await.expect("send word");
    let mut out = String::new();
    within(word, s.read_to_string(&mut out))
        .await
        .unwrap_or_else(|e| panic!("{word}: read: {e}"));
    out
}

/// What must return to its starting value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Baseline {
    sessions: String,
    connections: String,
    ephemerals: String,
    watches: String,
    watching: String,
}

async fn baseline(addr: SocketAddr) -> Baseline {
    let mntr = four_letter(addr, "mntr").await;
    let key = |k: &str| {
        mntr.lines()
            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("mntr has no {k}: {mntr:?}"))
    };
    let dump = four_letter(addr, "dump").await;
    let sessions = dump
        .lines()
        .find(|l| l.starts_with("Session Sets"))
        .unwrap_or_else(|| panic!("dump has no session line: {dump:?}"))
        .to_string();
    let cons = four_letter(addr, "cons").await;
    let connections = cons.lines().filter(|l| l.contains("sid=0x")).count();
    let wchs = four_letter(addr, "wchs").await;
    Baseline {
        sessions,
        connections: format!(
            "{connections} connections with a session; {}",
            key("zk_num_alive_connections")
        ),
        ephemerals: key("zk_ephemerals_count"),
        watches: key("zk_watch_count"),
        watching: wchs.trim().replace('\n', " / "),
    }
}

/// `ZKD_SOAK_SECS`, default 20.
fn duration() -> Duration {
    let secs = std::env::var("ZKD_SOAK_SECS")
        .ok()
        .map(|s| {
            s.parse::<u64>()
                .unwrap_or_else(|e| panic!("ZKD_SOAK_SECS={s:?}: {e}"))
        })
        .unwrap_or(20);
    Duration::from_secs(secs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_returns_to_baseline() {
    let _embedded;
    let server = match std::env::var("ZKD_SOAK_ADDR") {
        Ok(a) => a
            .parse()
            .unwrap_or_else(|e| panic!("ZKD_SOAK_ADDR={a:?} is not host:port: {e}")),
        Err(_) => {
            let config = zkd_server::Config {
                port: 0,
                tick_time: Duration::from_millis(200),
                four_letter_whitelist: zkd_server::FourLetterWhitelist::parse(
                    "mntr,cons,wchs,dump,srvr",
                )
                .expect("whitelist"),
                ..Default::default()
            };
            let s = zkd_server::Server::start(config).await.expect("start zkd");
            let addr = s.local_addr();
            _embedded = s;
            addr
        }
    };
    let before = baseline(server).await;
    eprintln!("soak: baseline {before:?}");

    let admin = zk::Client::connector()
        .with_fail_eagerly()
        .connect(&server.to_string())
        .await
        .expect("admin session");
    let ns = Ns::create(&admin, "soak").await;
    for dir in ["election", "lock", "queue", "sessions"] {
        admin
            .create(&ns.path(dir), b"", &persistent())
            .await
            .expect("soak directory");
    }
    admin
        .create(&ns.path("counter"), b"0", &persistent())
        .await
        .expect("counter");

    let pipes = Arc::new(Mutex::new(Vec::new()));
    let (proxy, proxy_task) = start_proxy(server, pipes.clone()).await;
    let run = duration();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("soak: {run:?} of churn against {server} (proxy {proxy}), seed {seed}");
    let soak = Arc::new(Soak {
        server,
        proxy,
        root: ns.root.clone(),
        started: Instant::now(),
        deadline: Instant::now() + run,
        stats: Stats::default(),
        leader: Mutex::new(None),
        holder: Mutex::new(None),
        failures: Mutex::new(Vec::new()),
        lost: Mutex::new(BTreeMap::new()),
        produced: Mutex::new((BTreeSet::new(), BTreeSet::new())),
        taken: Mutex::new(BTreeMap::new()),
        uncertain_writes: AtomicU64::new(0),
    });
    let mut tasks: Vec<JoinHandle<()>> = Vec::new();
    for i in 0..3 {
        tasks.push(tokio::spawn(candidate(
            soak.clone(),
            i,
            seed.wrapping_mul(i as u64 + 3),
        )));
        tasks.push(tokio::spawn(locker(
            soak.clone(),
            i,
            seed.wrapping_mul(i as u64 + 7),
        )));
    }
    for i in 0..2 {
        tasks.push(tokio::spawn(producer(
            soak.clone(),
            i,
            seed.wrapping_mul(i as u64 + 11),
        )));
        tasks.push(tokio::spawn(consumer(soak.clone(), i)));
        tasks.push(tokio::spawn(churner(
            soak.clone(),
            i,
            seed.wrapping_mul(i as u64 + 13),
        )));
    }
    tasks.push(tokio::spawn(cutter(
        soak.clone(),
        pipes.clone(),
        seed.wrapping_mul(17),
    )));
    for task in tasks {
        // Every task stops by itself after the deadline (its waits are bounded).
        let limit = soak.deadline + WAIT * 3;
        tokio::time::timeout_at(limit.into(), task)
            .await
            .expect("a churn task did not stop")
            .expect("a churn task panicked");
    }
    proxy_task.abort();
    for pipe in std::mem::take(&mut *pipes.lock().unwrap()) {
        pipe.abort();
    }

    // Drain the queue and check the work: every item taken once, the counter exact.
    take_items(&soak, &admin, true)
        .await
        .expect("draining the queue");
    let taken = soak.taken.lock().unwrap().clone();
    let (sure, doubt) = soak.produced.lock().unwrap().clone();
    let produced = sure.len();
    let lost: Vec<&String> = sure.iter().filter(|id| !taken.contains_key(*id)).collect();
    assert!(lost.is_empty(), "queue items never taken: {lost:?}");
    let unknown: Vec<&String> = taken
        .keys()
        .filter(|id| !sure.contains(*id) && !doubt.contains(*id))
        .collect();
    assert!(
        unknown.is_empty(),
        "queue items nobody produced: {unknown:?}"
    );
    let (data, _) = admin.get_data(&ns.path("counter")).await.expect("counter");
    let count: u64 = String::from_utf8_lossy(&data)
        .parse()
        .expect("counter value");
    let grants = soak.stats.lock_grants.load(Ordering::Relaxed);
    let doubt = soak.uncertain_writes.load(Ordering::Relaxed);
    assert!(
        count + doubt >= grants && count <= grants,
        "lock counter {count} after {grants} grants ({doubt} writes in doubt)"
    );

    // Everything the churn made goes away: once sessions expire, only the directories remain.
    for dir in ["election", "lock", "queue", "sessions"] {
        let path = ns.path(dir);
        eventually_within(SETTLE, &format!("{path} to empty"), || async {
            admin
                .list_children(&path)
                .await
                .map(|c| c.is_empty())
                .unwrap_or(false)
        })
        .await;
        admin.delete(&path, None).await.expect("delete soak dir");
    }
    admin
        .delete(&ns.path("counter"), None)
        .await
        .expect("delete counter");
    admin
        .delete(&ns.root, None)
        .await
        .expect("delete soak root");
    drop(admin);

    let settle_start = Instant::now();
    let mut after = baseline(server).await;
    while after != before && settle_start.elapsed() < SETTLE {
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = baseline(server).await;
    }
    let s = &soak.stats;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    eprintln!(
        "soak figures: {:?} churn; elections {} ({} leaders left by expiry); lock grants {} \
         (counter {count}); queue {} produced, {} consumed; sessions opened {}, left to \
         expire {}, resumed {}; proxy cuts {} ({} connections severed); {} lost \
         connections/sessions absorbed, {} stale holders after expiry; back to baseline \
         {:.1}s after the end",
        run,
        get(&s.elections),
        get(&s.abdications_expired),
        grants,
        produced,
        get(&s.consumed),
        get(&s.sessions),
        get(&s.expired_sessions),
        get(&s.resumed_sessions),
        get(&s.cuts),
        get(&s.cut_connections),
        get(&s.client_errors),
        get(&s.stale_overlaps),
        settle_start.elapsed().as_secs_f64(),
    );
    eprintln!(
        "soak: lost connections and sessions by error: {:#?}",
        soak.lost.lock().unwrap()
    );
    let failures = soak.failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "soak failures: {failures:#?}");
    assert_eq!(after, before, "server state did not return to baseline");
    assert!(get(&s.elections) > 0, "no election completed");
    assert!(grants > 0, "no lock was granted");
    assert!(get(&s.consumed) > 0, "no queue item was consumed");
    assert!(
        get(&s.expired_sessions) > 0,
        "no session was left to expire"
    );
    assert!(get(&s.resumed_sessions) > 0, "no session was resumed");
}

/// Polls `cond` until it holds, failing after `limit`.
async fn eventually_within<F, Fut>(limit: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
