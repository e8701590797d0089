//! Runs one ensemble program on one side and records what its clients observe: each step's
//! outcome (errors, data, versions, zxid epochs relative to the program's first, the leader
//! after each fault, read-only probes), each session's watch events in order, each session's
//! fate, and the final tree read after recovery, checked against the writes that were
//! acknowledged.
//!
//! Program sessions are clients that accept read-only servers and know every member: when
//! their connection is gone they try the members in turn (the one they were on first),
//! resuming with their session id, password and last zxid seen, and re-register the watches
//! they hold with setWatches. After each step every connected session syncs, so each has
//! seen (and been notified of) every change before the next step runs; a background task
//! pings every connected session so none expires while the harness waits.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::timeout;
use zkd_protocol::{
    event_type, DeleteRequest, ErrorCode, GetDataResponse, PathWatchRequest, Request,
    SetDataRequest, SetWatches, StatResponse, SyncRequest,
};
use zkd_testkit::raw::{create, ClientError, Event, RawClient, Reply};

use super::fleet::{Fleet, Settled, SESSION_TIMEOUT_MS, TICK_MS};
use super::gen::{Fault, Op, Program, Read, Step, NODES, PARENTS, SESSIONS};

/// Longest wait for one reply or handshake.
const CALL_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a session surely lives past its last contact before a leader expires it: its
/// timeout, the tick its deadline is rounded up to, and a margin.
const EXPIRY_WAIT: Duration = Duration::from_millis(SESSION_TIMEOUT_MS as u64 + TICK_MS + 1_200);
/// How long a quorum loss lasts at least: longer than any session's timeout, so sessions
/// survive it only because time stands still without a quorum.
const OUTAGE: Duration = Duration::from_millis(SESSION_TIMEOUT_MS as u64 + TICK_MS + 700);

/// What the clients of one side observed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The set-up, one line per step, and the recovery.
    pub lines: Vec<String>,
    /// Each session's watch events (`type path`), in arrival order.
    pub events: Vec<Vec<String>>,
    /// Each session's fate at the end: `alive` or `expired`.
    pub fates: Vec<String>,
    /// The program's nodes after recovery.
    pub tree: Vec<String>,
    /// Acknowledged writes the final tree does not show (must be empty).
    pub lost: Vec<String>,
    /// What happened without a fault causing it (a session of a running quorum expired or
    /// found no member, an epoch no leader was seen with): signs that the machine stalled a
    /// server or the harness. Not compared.
    pub disturbed: Vec<String>,
}

struct Session {
    client: Option<Arc<RawClient>>,
    events: Option<UnboundedReceiver<Event>>,
    id: i64,
    passwd: Bytes,
    last_zxid: i64,
    /// Index of the member it was last connected to.
    at: usize,
    expired: bool,
    abandoned: bool,
    /// The harness expects it to have expired (it was abandoned).
    may_expire: bool,
    data_watches: BTreeSet<String>,
    exist_watches: BTreeSet<String>,
    child_watches: BTreeSet<String>,
    log: Vec<String>,
}

/// What the acknowledged writes say the tree holds: node -> (data, owning session).
type Model = BTreeMap<String, (Vec<u8>, Option<usize>)>;

struct Run<'a> {
    fleet: &'a mut Fleet,
    root: String,
    /// The epochs of the leaders seen at the set-up and after each fault, in order, each
    /// once: a zxid is shown as the term (`t0`, `t1`, …) its epoch belongs to.
    terms: Vec<i64>,
    sessions: Vec<Session>,
    /// The clients the heartbeat task pings.
    live: Arc<Mutex<Vec<Arc<RawClient>>>>,
    model: Model,
    /// Nodes whose last write's outcome is unknown (its connection dropped before the
    /// reply): left out of the acknowledged-write check.
    unsure: BTreeSet<String>,
    quorum_lost_at: Option<Instant>,
    /// Read-only sessions opened by probes, tried again once the quorum is back.
    ro_sessions: Vec<(i64, Bytes)>,
    disturbed: Vec<String>,
}

fn err_name(code: i32) -> String {
    match ErrorCode::from_i32(code) {
        Some(ErrorCode::Ok) => "OK".into(),
        Some(c) => format!("{c:?}"),
        None => format!("error {code}"),
    }
}

/// Runs `prog` as program `n` on `fleet`.
pub async fn run_program(fleet: &mut Fleet, prog: &Program, n: u64) -> Result<Observed, String> {
    let live = Arc::new(Mutex::new(Vec::<Arc<RawClient>>::new()));
    let beat = {
        let live = live.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(400)).await;
                let clients: Vec<Arc<RawClient>> =
                    live.lock().map(|l| l.clone()).unwrap_or_default();
                for c in clients {
                    let _ = c.send(&Request::Ping).await;
                }
            }
        })
    };
    let mut run = Run {
        fleet,
        root: format!("/e{n}"),
        terms: Vec::new(),
        sessions: Vec::new(),
        live,
        model: Model::new(),
        unsure: BTreeSet::new(),
        quorum_lost_at: None,
        ro_sessions: Vec::new(),
        disturbed: Vec::new(),
    };
    // A program that failed on this side may have left a cut or a blackhole.
    if run.fleet.cut.is_some() {
        run.fleet.heal().await?;
    }
    if run.fleet.blackholed.is_some() {
        run.fleet.clear_blackhole().await?;
    }
    let result = run.program(prog).await;
    beat.abort();
    for s in &mut run.sessions {
        if let Some(c) = s.client.take() {
            let _ = timeout(CALL_TIMEOUT, c.call(&Request::CloseSession)).await;
        }
    }
    result
}

impl Run<'_> {
    async fn program(&mut self, prog: &Program) -> Result<Observed, String> {
        let mut obs = Observed::default();
        let settled = self.fleet.settle().await?;
        let Settled::Leader(leader) = settled else {
            return Err(format!(
                "{}: the program starts without quorum",
                self.fleet.name
            ));
        };
        // The harness creates the program's root and takes the epoch it ran in as 0.
        let admin = self.harness_client().await?;
        let reply = call(&admin, &create(&self.root, None, 0)).await?;
        if reply.err != 0 {
            return Err(format!("create {}: {}", self.root, err_name(reply.err)));
        }
        let epoch = self.fleet.leader_epoch(leader).await?;
        self.terms.push(epoch);
        if reply.zxid >> 32 != epoch {
            return Err(format!(
                "{}: the root's zxid {:#x} is not in the leader's epoch {epoch}",
                self.fleet.name, reply.zxid
            ));
        }
        // Two nodes to start from, so watches and children have something to work on.
        for node in ["a", "b"] {
            let data = vec![b'0' + NODES.iter().position(|n| *n == node).unwrap_or(0) as u8];
            let r = call(
                &admin,
                &create(&self.abs(node), Some(Bytes::from(data.clone())), 0),
            )
            .await?;
            if r.err != 0 {
                return Err(format!("create ~/{node}: {}", err_name(r.err)));
            }
            self.model.insert(node.to_string(), (data, None));
        }
        let _ = call(&admin, &Request::CloseSession).await;
        obs.lines.push(format!("set-up: leader {leader}"));
        for s in 0..SESSIONS {
            let addr = self.fleet.members[s % self.fleet.members.len()];
            let c = handshake(addr, 0, Bytes::from_static(&[0; 16]), 0).await?;
            let mut session = Session {
                id: c.session_id,
                passwd: c.passwd.clone(),
                last_zxid: 0,
                at: s % self.fleet.members.len(),
                expired: false,
                abandoned: false,
                may_expire: false,
                events: c.events(),
                client: Some(Arc::new(c)),
                data_watches: BTreeSet::new(),
                exist_watches: BTreeSet::new(),
                child_watches: BTreeSet::new(),
                log: Vec::new(),
            };
            // An ephemeral of its own makes the session global on ZooKeeper, whose sessions
            // start local with localSessionsEnabled (see the module docs of the run).
            let anchor = format!("{}/s{s}", self.root);
            let client = session.client.clone().ok_or("no client")?;
            let r = call(&client, &create(&anchor, Some(Bytes::from_static(b"s")), 1)).await?;
            session.last_zxid = client.last_zxid();
            if r.err != 0 {
                return Err(format!("anchor {anchor}: {}", err_name(r.err)));
            }
            self.model.insert(format!("s{s}"), (b"s".to_vec(), Some(s)));
            self.sessions.push(session);
        }
        self.publish_live();
        self.flush().await;

        for step in &prog.steps {
            let line = match *step {
                Step::Op { session, op } => self.op(session, op).await,
                Step::Fault(f) => self.fault(f).await?,
            };
            self.flush().await;
            obs.lines.push(format!("{step} -> {line}"));
        }

        // Recovery: the cut healed, every member runs again, every session comes back.
        let mut line = String::from("recovery:");
        if self.fleet.cut.is_some() {
            line.push(' ');
            line.push_str(&self.heal().await?);
        } else if self.fleet.blackholed.is_some() {
            line.push(' ');
            line.push_str(&self.clear_blackhole().await?);
        } else if self.fleet.up().len() < self.fleet.members.len() {
            line.push(' ');
            line.push_str(&self.fault(Fault::StartAll).await?);
        } else {
            line.push_str(" nothing stopped");
        }
        self.flush().await;
        obs.lines.push(line);
        for s in 0..SESSIONS {
            let fate = if self.sessions[s].abandoned {
                // Its client comes back: the session must be gone.
                self.sessions[s].abandoned = false;
                self.sessions[s].may_expire = true;
                match self.connect(s).await {
                    Conn::Up => "came back after its timeout".to_string(),
                    Conn::Expired => "expired".to_string(),
                    Conn::Unavailable => "unavailable".to_string(),
                }
            } else if self.sessions[s].expired {
                "expired".to_string()
            } else {
                match self.connect(s).await {
                    Conn::Up => "alive".to_string(),
                    Conn::Expired => "expired".to_string(),
                    Conn::Unavailable => "unavailable".to_string(),
                }
            };
            obs.fates.push(fate);
        }
        self.flush().await;
        obs.tree = self.final_tree().await?;
        obs.lost = self.check_model(&obs.tree);
        for l in &obs.lines {
            if l.contains("of no leader seen") {
                self.disturbed
                    .push(format!("a zxid of an epoch no leader was seen with: {l}"));
            }
        }
        obs.disturbed = std::mem::take(&mut self.disturbed);
        obs.events = self
            .sessions
            .iter_mut()
            .map(|s| std::mem::take(&mut s.log))
            .collect();
        Ok(obs)
    }

    fn epoch(&self, zxid: i64) -> String {
        let e = zxid >> 32;
        match self.terms.iter().position(|t| *t == e) {
            Some(k) => format!("t{k}"),
            None => format!(
                "epoch {:+} of no leader seen",
                e - self.terms.first().copied().unwrap_or(0)
            ),
        }
    }

    fn abs(&self, node: &str) -> String {
        if node.is_empty() {
            self.root.clone()
        } else {
            format!("{}/{node}", self.root)
        }
    }

    /// A session of the harness's own, on the first member that takes it.
    async fn harness_client(&self) -> Result<RawClient, String> {
        let mut last = String::new();
        for id in self.fleet.up() {
            let addr = self.fleet.members[id as usize - 1];
            match handshake(addr, 0, Bytes::from_static(&[0; 16]), 0).await {
                Ok(c) if !c.read_only => return Ok(c),
                Ok(_) => last = format!("member {id} is read-only"),
                Err(e) => last = e,
            }
        }
        Err(format!("{}: no member serves: {last}", self.fleet.name))
    }

    fn publish_live(&self) {
        let clients: Vec<Arc<RawClient>> = self
            .sessions
            .iter()
            .filter_map(|s| s.client.clone())
            .collect();
        if let Ok(mut l) = self.live.lock() {
            *l = clients;
        }
    }

    /// Moves a session's received notifications into its log and drops the watches they
    /// fired.
    fn drain(&mut self, s: usize) {
        let root = self.root.clone();
        let session = &mut self.sessions[s];
        let Some(rx) = session.events.as_mut() else {
            return;
        };
        while let Ok(e) = rx.try_recv() {
            let p = e.path.clone();
            match e.event_type {
                event_type::NODE_CREATED => {
                    session.exist_watches.remove(&p);
                }
                event_type::NODE_DELETED => {
                    session.data_watches.remove(&p);
                    session.exist_watches.remove(&p);
                    session.child_watches.remove(&p);
                }
                event_type::NODE_DATA_CHANGED => {
                    session.data_watches.remove(&p);
                    session.exist_watches.remove(&p);
                }
                event_type::NODE_CHILDREN_CHANGED => {
                    session.child_watches.remove(&p);
                }
                _ => {}
            }
            let name = match e.event_type {
                event_type::NODE_CREATED => "created",
                event_type::NODE_DELETED => "deleted",
                event_type::NODE_DATA_CHANGED => "changed",
                event_type::NODE_CHILDREN_CHANGED => "children",
                _ => "other",
            };
            let rel = p.strip_prefix(&root).unwrap_or(&p);
            session.log.push(format!("{name} ~{rel}"));
        }
    }

    /// Drops a session's connection (it is gone), keeping what it received.
    fn disconnect(&mut self, s: usize) {
        self.drain(s);
        let session = &mut self.sessions[s];
        if let Some(c) = session.client.take() {
            session.last_zxid = session.last_zxid.max(c.last_zxid());
        }
        session.events = None;
        self.publish_live();
    }

    /// Makes sure session `s` has a connection: its member first, then the others in id
    /// order, each asked with the session's id and password, accepting read-only servers.
    async fn connect(&mut self, s: usize) -> Conn {
        if self.sessions[s].expired {
            return Conn::Expired;
        }
        if self.sessions[s].abandoned {
            return Conn::Unavailable;
        }
        if let Some(c) = self.sessions[s].client.clone() {
            match timeout(CALL_TIMEOUT, c.call(&Request::Ping)).await {
                Ok(Ok(_)) => return Conn::Up,
                _ => self.disconnect(s),
            }
        }
        let n = self.fleet.members.len();
        let at = self.sessions[s].at;
        for k in 0..n {
            let i = (at + k) % n;
            if !self.fleet.running[i] || self.fleet.blackholed == Some(i as u64 + 1) {
                continue;
            }
            let (id, passwd, zxid) = {
                let session = &self.sessions[s];
                (session.id, session.passwd.clone(), session.last_zxid)
            };
            match timeout(
                CALL_TIMEOUT,
                RawClient::handshake(
                    self.fleet.members[i],
                    id,
                    passwd,
                    SESSION_TIMEOUT_MS,
                    zxid,
                    true,
                ),
            )
            .await
            .unwrap_or(Err(ClientError::Closed))
            {
                Ok(c) => {
                    let session = &mut self.sessions[s];
                    session.at = i;
                    session.events = c.events();
                    let c = Arc::new(c);
                    session.client = Some(c.clone());
                    let watches = SetWatches {
                        relative_zxid: session.last_zxid,
                        data_watches: session.data_watches.iter().cloned().collect(),
                        exist_watches: session.exist_watches.iter().cloned().collect(),
                        child_watches: session.child_watches.iter().cloned().collect(),
                    };
                    let any = !(watches.data_watches.is_empty()
                        && watches.exist_watches.is_empty()
                        && watches.child_watches.is_empty());
                    if any {
                        match timeout(CALL_TIMEOUT, c.call(&Request::SetWatches(watches))).await {
                            Ok(Ok(_)) => {}
                            _ => {
                                self.disconnect(s);
                                continue;
                            }
                        }
                    }
                    self.publish_live();
                    return Conn::Up;
                }
                Err(ClientError::Rejected) => {
                    if !self.sessions[s].may_expire {
                        self.disturbed
                            .push(format!("s{s} expired without its client going away"));
                    }
                    self.session_ended(s);
                    return Conn::Expired;
                }
                Err(_) => continue,
            }
        }
        Conn::Unavailable
    }

    /// Session `s` is known to be gone: its ephemerals with it.
    fn session_ended(&mut self, s: usize) {
        self.sessions[s].expired = true;
        self.model.retain(|_, (_, owner)| *owner != Some(s));
    }

    /// Every connected session syncs (so it has applied, and been notified of, everything
    /// committed so far), then its notifications are taken.
    async fn flush(&mut self) {
        for s in 0..self.sessions.len() {
            let Some(c) = self.sessions[s].client.clone() else {
                continue;
            };
            let sync = Request::Sync(SyncRequest {
                path: Some(self.root.clone()),
            });
            match timeout(CALL_TIMEOUT, c.call(&sync)).await {
                Ok(Ok(_)) => self.drain(s),
                _ => self.disconnect(s),
            }
        }
    }

    async fn op(&mut self, s: usize, op: Op) -> String {
        let out = self.op_outcome(s, op).await;
        let quorum = self.fleet.up().len() * 2 > self.fleet.members.len();
        if quorum && matches!(out.as_str(), "no member serves it" | "connection lost") {
            self.disturbed
                .push(format!("s{s}: {out} while a quorum ran"));
        }
        out
    }

    async fn op_outcome(&mut self, s: usize, op: Op) -> String {
        match self.connect(s).await {
            Conn::Up => {}
            Conn::Expired => return "session expired".into(),
            Conn::Unavailable => return "no member serves it".into(),
        }
        let Some(c) = self.sessions[s].client.clone() else {
            return "no member serves it".into();
        };
        let (req, node) = match op {
            Op::Create { node, ephemeral } => (
                create(
                    &self.abs(NODES[node]),
                    Some(Bytes::from(vec![b'0' + node as u8])),
                    i32::from(ephemeral),
                ),
                NODES[node],
            ),
            Op::SetData { node, data } => (
                Request::SetData(SetDataRequest {
                    path: self.abs(NODES[node]),
                    data: Some(Bytes::from(data.to_string())),
                    version: -1,
                }),
                NODES[node],
            ),
            Op::Delete { node } => (
                Request::Delete(DeleteRequest {
                    path: self.abs(NODES[node]),
                    version: -1,
                }),
                NODES[node],
            ),
            Op::Read { read, node, watch } => {
                let (path, node) = match read {
                    Read::Children => (self.abs(PARENTS[node]), PARENTS[node]),
                    _ => (self.abs(NODES[node]), NODES[node]),
                };
                let r = PathWatchRequest { path, watch };
                let req = match read {
                    Read::Data => Request::GetData(r),
                    Read::Exists => Request::Exists(r),
                    Read::Children => Request::GetChildren(r),
                };
                (req, node)
            }
            Op::Sync => (
                Request::Sync(SyncRequest {
                    path: Some(self.root.clone()),
                }),
                "",
            ),
        };
        let reply = match timeout(CALL_TIMEOUT, c.call(&req)).await {
            Ok(Ok(r)) => r,
            _ => {
                self.disconnect(s);
                if matches!(
                    op,
                    Op::Create { .. } | Op::SetData { .. } | Op::Delete { .. }
                ) {
                    self.unsure.insert(node.to_string());
                }
                return "connection lost".into();
            }
        };
        self.sessions[s].last_zxid = self.sessions[s].last_zxid.max(c.last_zxid());
        let path = self.abs(node);
        self.outcome(s, op, node, &path, &reply)
    }

    /// The observable outcome of a reply, recorded in the model when it acknowledges a
    /// write.
    fn outcome(&mut self, s: usize, op: Op, node: &str, path: &str, reply: &Reply) -> String {
        let err = reply.err;
        if err != 0 {
            // A watch left by a failed exists is still a watch.
            if let Op::Read {
                read: Read::Exists,
                watch: true,
                ..
            } = op
            {
                if err == ErrorCode::NoNode.code() {
                    self.sessions[s].exist_watches.insert(path.to_string());
                }
            }
            return err_name(err);
        }
        match op {
            Op::Create { ephemeral, .. } => {
                let owner = ephemeral.then_some(s);
                let data = vec![b'0' + NODES.iter().position(|n| *n == node).unwrap_or(0) as u8];
                self.model.insert(node.to_string(), (data, owner));
                self.unsure.remove(node);
                format!("OK {}", self.epoch(reply.zxid))
            }
            Op::SetData { data, .. } => {
                if let Some(entry) = self.model.get_mut(node) {
                    entry.0 = data.to_string().into_bytes();
                }
                self.unsure.remove(node);
                match reply.decode::<StatResponse>() {
                    Ok(st) => format!("OK v{} m{}", st.stat.version, self.epoch(st.stat.mzxid)),
                    Err(e) => format!("undecodable Stat: {e}"),
                }
            }
            Op::Delete { .. } => {
                self.model.remove(node);
                self.unsure.remove(node);
                format!("OK {}", self.epoch(reply.zxid))
            }
            Op::Read { read, watch, .. } => {
                let session = &mut self.sessions[s];
                match read {
                    Read::Data => {
                        if watch {
                            session.data_watches.insert(path.to_string());
                        }
                        match reply.decode::<GetDataResponse>() {
                            Ok(r) => self.describe(r.data.as_deref(), &r.stat),
                            Err(e) => format!("undecodable: {e}"),
                        }
                    }
                    Read::Exists => {
                        // An exists watch on a node that exists is a data watch, as clients
                        // file it (and re-register it after a reconnect).
                        if watch {
                            session.data_watches.insert(path.to_string());
                        }
                        match reply.decode::<StatResponse>() {
                            Ok(r) => self.describe(None, &r.stat),
                            Err(e) => format!("undecodable: {e}"),
                        }
                    }
                    Read::Children => {
                        if watch {
                            session.child_watches.insert(path.to_string());
                        }
                        match reply.decode::<zkd_protocol::ChildrenResponse>() {
                            Ok(mut r) => {
                                r.children.sort();
                                format!("[{}]", r.children.join(" "))
                            }
                            Err(e) => format!("undecodable: {e}"),
                        }
                    }
                }
            }
            Op::Sync => "OK".into(),
        }
    }

    /// A node as clients see it: data, version, the epochs of its creation and last
    /// change, and its owner (a program session by index).
    fn describe(&self, data: Option<&[u8]>, stat: &zkd_protocol::Stat) -> String {
        let owner = if stat.ephemeral_owner == 0 {
            "-".to_string()
        } else {
            match self
                .sessions
                .iter()
                .position(|s| s.id == stat.ephemeral_owner)
            {
                Some(i) => format!("s{i}"),
                None => "another session".to_string(),
            }
        };
        let data = data.map_or("-".into(), |d| String::from_utf8_lossy(d).into_owned());
        format!(
            "data {data} v{} c{} m{} owner {owner}",
            stat.version,
            self.epoch(stat.czxid),
            self.epoch(stat.mzxid)
        )
    }

    async fn fault(&mut self, f: Fault) -> Result<String, String> {
        let had_quorum = self.fleet.up().len() * 2 > self.fleet.members.len();
        match f {
            Fault::CutLeader | Fault::CutFollower | Fault::CutLeaderToFollower => {
                return self.cut(f).await
            }
            Fault::Heal => return self.heal().await,
            Fault::Blackhole { leader, late } => return self.blackhole(leader, late).await,
            Fault::ClearBlackhole => return self.clear_blackhole().await,
            Fault::Stop(id) => {
                if !self.fleet.running[id as usize - 1] {
                    return Ok("not running".into());
                }
                self.fleet.stop(id).await?;
            }
            Fault::StopLeader => {
                let settled = self.fleet.settle().await?;
                let Settled::Leader(id) = settled else {
                    return Ok(format!("no leader ({settled:?})"));
                };
                self.fleet.stop(id).await?;
            }
            Fault::Start(_) | Fault::StartAll => {
                let ids: Vec<u64> = match f {
                    Fault::Start(id) => vec![id],
                    _ => (1..=self.fleet.members.len() as u64).collect(),
                };
                let ids: Vec<u64> = ids
                    .into_iter()
                    .filter(|id| !self.fleet.running[*id as usize - 1])
                    .collect();
                if ids.is_empty() {
                    return Ok("already running".into());
                }
                let regains = !had_quorum
                    && (self.fleet.up().len() + ids.len()) * 2 > self.fleet.members.len();
                if regains {
                    // The outage lasts longer than any session's timeout.
                    if let Some(lost) = self.quorum_lost_at {
                        let until = lost + OUTAGE;
                        tokio::time::sleep_until(until.into()).await;
                    }
                }
                let mut ids = ids.into_iter();
                if regains {
                    // The member that brings the quorum back starts alone and the election
                    // ends before the next one starts: started together, whichever JVM comes
                    // up first takes part in ZooKeeper's election, and a later one follows.
                    while self.fleet.up().len() * 2 <= self.fleet.members.len() {
                        let Some(id) = ids.next() else { break };
                        self.fleet.start(id).await?;
                    }
                    self.fleet.settle().await?;
                }
                for id in ids {
                    self.fleet.start(id).await?;
                }
            }
            Fault::Abandon(s) => {
                if !had_quorum || self.sessions[s].abandoned || self.sessions[s].expired {
                    return Ok("skipped".into());
                }
                self.drain(s);
                let session = &mut self.sessions[s];
                session.events = None;
                if let Some(mut c) = session.client.take() {
                    session.last_zxid = session.last_zxid.max(c.last_zxid());
                    self.publish_live();
                    // The heartbeat may hold it for a moment; dropped, it closes anyway.
                    for _ in 0..50 {
                        match Arc::try_unwrap(c) {
                            Ok(owned) => {
                                owned.abort().await;
                                break;
                            }
                            Err(shared) => c = shared,
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                self.sessions[s].abandoned = true;
                tokio::time::sleep(EXPIRY_WAIT).await;
                // Its ephemerals are gone now (the recovery checks the session is).
                self.model.retain(|_, (_, owner)| *owner != Some(s));
                return Ok("abandoned".into());
            }
        }
        let settled = self.fleet.settle().await?;
        let quorum = matches!(settled, Settled::Leader(_));
        if had_quorum && !quorum {
            self.quorum_lost_at = Some(Instant::now());
        }
        let mut line = match settled {
            Settled::Leader(id) => self.leader_line(id).await?,
            Settled::ReadOnly(id) => format!("read-only member {id}"),
            Settled::Down => "nothing runs".into(),
        };
        if let Settled::ReadOnly(id) = settled {
            line.push_str(&format!("; {}", self.probe_read_only(id).await));
        }
        if quorum && !had_quorum {
            self.quorum_lost_at = None;
            line.push_str(&self.resume_read_only_sessions().await);
        }
        line.push_str(&format!("; {}", self.reconnect_all().await));
        Ok(line)
    }

    /// Every session comes back at once where it can; what became of each.
    async fn reconnect_all(&mut self) -> String {
        let mut states = Vec::new();
        for s in 0..SESSIONS {
            let was_expired = self.sessions[s].expired;
            let st = match self.connect(s).await {
                Conn::Up => "up",
                Conn::Expired if was_expired => "expired earlier",
                Conn::Expired => "expired",
                Conn::Unavailable if self.sessions[s].abandoned => "abandoned",
                Conn::Unavailable => "waiting",
            };
            states.push(format!("s{s} {st}"));
        }
        states.join(", ")
    }

    /// The leader's line after a change: who leads, and whether its term is new.
    async fn leader_line(&mut self, id: u64) -> Result<String, String> {
        let epoch = self.fleet.leader_epoch(id).await?;
        let new = self.terms.last() != Some(&epoch);
        if new {
            self.terms.push(epoch);
        }
        let term = self.epoch(epoch << 32);
        let age = if new { "new" } else { "same" };
        Ok(format!("leader {id}, {age} term {term}"))
    }

    /// Cuts the leader or the lowest follower off from the other two (or loses what the
    /// leader sends the lowest follower, which cuts it off too). Once the two have a
    /// leader and the cut member serves no read-write client, every session comes back
    /// (those that were on the cut member move); once the cut member serves read-only
    /// clients, a read-only session probes it.
    async fn cut(&mut self, f: Fault) -> Result<String, String> {
        let settled = self.fleet.settle().await?;
        let Settled::Leader(leader) = settled else {
            return Ok(format!("no leader ({settled:?})"));
        };
        let id = match f {
            Fault::CutLeader => leader,
            _ => (1..=self.fleet.members.len() as u64)
                .find(|id| *id != leader)
                .ok_or("no follower")?,
        };
        if f == Fault::CutLeaderToFollower {
            self.fleet.cut_one_way(leader, id, id).await?;
        } else {
            self.fleet.cut(id).await?;
        }
        let mut line = format!("member {id} cut off; ");
        match self.fleet.settle_quorum().await? {
            Settled::Leader(l) => line.push_str(&self.leader_line(l).await?),
            other => line.push_str(&format!("{other:?}")),
        }
        line.push_str(&format!("; {}", self.reconnect_all().await));
        self.fleet.settle().await?;
        line.push_str(&format!(
            "; member {id}: {}",
            self.probe_read_only(id).await
        ));
        Ok(line)
    }

    /// Blackholes the clients of the leader or the lowest follower. Its sessions move at
    /// once (their client gives up on the silent connection), or only once their timeout has
    /// surely passed; then every session comes back where it can.
    async fn blackhole(&mut self, leader: bool, late: bool) -> Result<String, String> {
        let settled = self.fleet.settle().await?;
        let Settled::Leader(l) = settled else {
            return Ok(format!("no leader ({settled:?})"));
        };
        let id = if leader {
            l
        } else {
            (1..=self.fleet.members.len() as u64)
                .find(|id| *id != l)
                .ok_or("no follower")?
        };
        self.fleet.blackhole(id).await?;
        let on_it: Vec<usize> = (0..SESSIONS)
            .filter(|s| {
                let session = &self.sessions[*s];
                session.client.is_some() && session.at == id as usize - 1
            })
            .collect();
        if late {
            for s in &on_it {
                self.sessions[*s].may_expire = true;
            }
            tokio::time::sleep(EXPIRY_WAIT).await;
        }
        for s in &on_it {
            // The connection is silent: the client drops it (its close is lost too).
            self.disconnect(*s);
        }
        let on_it: Vec<String> = on_it.iter().map(|s| format!("s{s}")).collect();
        // The members' roles do not change (the blackholed member's `srvr` does not answer,
        // so its term is read once the blackhole ends).
        let mut line = format!(
            "member {id}'s clients blackholed (on it: [{}]); {:?}",
            on_it.join(" "),
            self.fleet.settle().await?
        );
        line.push_str(&format!("; {}", self.reconnect_all().await));
        Ok(line)
    }

    /// Ends the blackhole; who leads, and every session.
    async fn clear_blackhole(&mut self) -> Result<String, String> {
        if self.fleet.blackholed.is_none() {
            return Ok("nothing blackholed".into());
        }
        self.fleet.clear_blackhole().await?;
        let line = self.settled_line().await?;
        Ok(format!("{line}; {}", self.reconnect_all().await))
    }

    /// Once the members settle: who leads, and whether its term is new.
    async fn settled_line(&mut self) -> Result<String, String> {
        Ok(match self.fleet.settle().await? {
            Settled::Leader(l) => self.leader_line(l).await?,
            other => format!("{other:?}"),
        })
    }

    /// Ends the cut: once the members settle, who leads, whether the cut member's read-only
    /// session is taken, and every session.
    async fn heal(&mut self) -> Result<String, String> {
        if self.fleet.cut.is_none() {
            return Ok("nothing cut".into());
        }
        self.fleet.heal().await?;
        let mut line = self.settled_line().await?;
        line.push_str(&self.resume_read_only_sessions().await);
        line.push_str(&format!("; {}", self.reconnect_all().await));
        Ok(line)
    }

    /// Whether the members take the read-only probes' sessions now (`; read-only sessions
    /// now: …`, or nothing when there were none).
    async fn resume_read_only_sessions(&mut self) -> String {
        let mut ro = Vec::new();
        for (sid, passwd) in std::mem::take(&mut self.ro_sessions) {
            ro.push(self.resume_elsewhere(sid, passwd).await);
        }
        if ro.is_empty() {
            String::new()
        } else {
            format!("; read-only sessions now: {}", ro.join(", "))
        }
    }

    /// A new read-only session on the member without quorum: what it reads, and the answer
    /// to a write and a sync. A global session is not served there (the program's own
    /// sessions show that).
    async fn probe_read_only(&mut self, id: u64) -> String {
        let addr = self.fleet.members[id as usize - 1];
        let c = match RawClient::handshake(
            addr,
            0,
            Bytes::from_static(&[0; 16]),
            SESSION_TIMEOUT_MS,
            0,
            true,
        )
        .await
        {
            Ok(c) => c,
            Err(e) => return format!("read-only handshake: {e}"),
        };
        let mut out = vec![format!("read-only session (readOnly={})", c.read_only)];
        for node in ["a", "s0"] {
            let req = Request::GetData(PathWatchRequest {
                path: self.abs(node),
                watch: false,
            });
            out.push(match call(&c, &req).await {
                Ok(r) if r.err == 0 => match r.decode::<GetDataResponse>() {
                    Ok(d) => format!(
                        "get ~/{node}: {}",
                        self.describe(d.data.as_deref(), &d.stat)
                    ),
                    Err(e) => format!("get ~/{node}: undecodable {e}"),
                },
                Ok(r) => format!("get ~/{node}: {}", err_name(r.err)),
                Err(e) => format!("get ~/{node}: {e}"),
            });
        }
        let write = create(&self.abs("ro"), None, 0);
        let sync = Request::Sync(SyncRequest {
            path: Some(self.root.clone()),
        });
        for (name, req) in [("create", write), ("sync", sync)] {
            out.push(match call(&c, &req).await {
                Ok(r) => format!("{name}: {}", err_name(r.err)),
                Err(e) => format!("{name}: {e}"),
            });
        }
        self.ro_sessions.push((c.session_id, c.passwd.clone()));
        c.abort().await;
        // What the member reports about itself while read-only.
        out.push(match self.fleet.conf_shape(id).await {
            Ok(lines) => format!("conf: {}", lines.join(" ")),
            Err(e) => format!("conf: {e}"),
        });
        const STATE: &[&str] = &["zk_server_state", "zk_quorum_size", "zk_peer_state"];
        out.push(match self.fleet.mntr_lines(id, STATE).await {
            Ok(lines) => format!("mntr: {}", lines.join(" ")),
            Err(e) => format!("mntr: {e}"),
        });
        out.join(", ")
    }

    /// Whether a read-only member's session is taken by the members once the quorum is
    /// back.
    async fn resume_elsewhere(&mut self, sid: i64, passwd: Bytes) -> String {
        for id in self.fleet.up() {
            let addr = self.fleet.members[id as usize - 1];
            match RawClient::handshake(addr, sid, passwd.clone(), SESSION_TIMEOUT_MS, 0, true).await
            {
                Ok(c) => {
                    let _ = call(&c, &Request::CloseSession).await;
                    return "taken".into();
                }
                Err(ClientError::Rejected) => return "expired".into(),
                Err(_) => continue,
            }
        }
        "no member answers".into()
    }

    /// The program's nodes after recovery, read by a new session after a sync.
    async fn final_tree(&mut self) -> Result<Vec<String>, String> {
        let c = self.harness_client().await?;
        let sync = Request::Sync(SyncRequest {
            path: Some(self.root.clone()),
        });
        call(&c, &sync).await?;
        let mut names: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();
        names.extend((0..SESSIONS).map(|s| format!("s{s}")));
        let mut out = Vec::new();
        for node in names {
            let req = Request::GetData(PathWatchRequest {
                path: self.abs(&node),
                watch: false,
            });
            let r = call(&c, &req).await?;
            if r.err == 0 {
                let d = r
                    .decode::<GetDataResponse>()
                    .map_err(|e| format!("getData ~/{node}: {e}"))?;
                out.push(format!(
                    "~/{node}: {}",
                    self.describe(d.data.as_deref(), &d.stat)
                ));
            }
        }
        let _ = call(&c, &Request::CloseSession).await;
        Ok(out)
    }

    /// Acknowledged writes the final tree does not reflect (and nodes it has that no
    /// acknowledged write made).
    fn check_model(&self, tree: &[String]) -> Vec<String> {
        let mut seen = BTreeMap::new();
        for line in tree {
            if let Some((node, rest)) = line.strip_prefix("~/").and_then(|l| l.split_once(": ")) {
                let data = rest
                    .strip_prefix("data ")
                    .and_then(|r| r.split(' ').next())
                    .unwrap_or("");
                seen.insert(node.to_string(), data.to_string());
            }
        }
        let mut lost = Vec::new();
        for (node, (data, _)) in &self.model {
            if self.unsure.contains(node) {
                continue;
            }
            let want = String::from_utf8_lossy(data).into_owned();
            let want = if want.is_empty() { "-".into() } else { want };
            match seen.get(node) {
                None => lost.push(format!("~/{node} was written (data {want}) but is gone")),
                Some(got) if *got != want => lost.push(format!(
                    "~/{node} holds {got}, the last acknowledged write {want}"
                )),
                Some(_) => {}
            }
        }
        for node in seen.keys() {
            if !self.model.contains_key(node) && !self.unsure.contains(node) {
                lost.push(format!(
                    "~/{node} exists but its acknowledged delete (or its owner's end) says it \
                     should not"
                ));
            }
        }
        lost
    }
}

enum Conn {
    Up,
    Expired,
    Unavailable,
}

async fn handshake(
    addr: SocketAddr,
    id: i64,
    passwd: Bytes,
    zxid: i64,
) -> Result<RawClient, String> {
    match timeout(
        CALL_TIMEOUT,
        RawClient::handshake(addr, id, passwd, SESSION_TIMEOUT_MS, zxid, true),
    )
    .await
    {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("handshake with {addr}: {e}")),
        Err(_) => Err(format!("handshake with {addr}: timeout")),
    }
}

async fn call(c: &RawClient, req: &Request) -> Result<Reply, String> {
    match timeout(CALL_TIMEOUT, c.call(req)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timeout".into()),
    }
}
