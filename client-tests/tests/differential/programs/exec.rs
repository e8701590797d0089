//! Runs a program on two servers in lock-step and compares every step.
//!
//! For each step: run it on server A, wait until every notification it caused has arrived
//! (a ping round trip on every connected session of the program: replies and notifications
//! are FIFO per connection and the ping is processed after the step), then the same on server
//! B, then compare the normalised outcomes. The first difference ends the program.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::timeout;
use zkd_protocol::{
    event_type, AddWatchRequest, AuthPacket, CheckVersionRequest, ChildrenResponse, Create,
    DeleteRequest, MultiOp, OpCode, PathRequest, PathWatchRequest, Request, SetAclRequest,
    SetDataRequest, SetWatches, SetWatches2, StatResponse, SyncRequest, WatchTypeRequest,
};
use zkd_testkit::raw::{ClientError, Event, RawClient, Reply};

use super::normalize::{Ctx, NEvent, NReply};
use super::program::{
    AclSpec, AuthUser, CreateKind, Data, Op, Prefix, Program, RelPath, Step, SubOp, SysAction, Ver,
    Write,
};
use zkd_testkit::oracle::ZookeeperVersion;

/// Session timeout the program's sessions ask for (both servers grant it: 2 s tick, 40 s max).
const SESSION_TIMEOUT_MS: i32 = 30_000;
/// Longest wait for one reply before the harness gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the harness waits for a connection the server should close to be closed.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Credentials of the super user both servers are configured with (digest of `super:secret`).
pub const SUPER_CREDENTIALS: &str = "super:secret";
pub const SUPER_DIGEST: &str = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=";

/// One server and the harness's own super-user session on it (creates and removes program
/// roots, reads current versions).
pub struct Side {
    pub name: &'static str,
    pub addr: SocketAddr,
    /// The release line the server is (or behaves as).
    pub version: ZookeeperVersion,
    admin: tokio::sync::Mutex<Option<RawClient>>,
}

impl Side {
    pub fn new(name: &'static str, addr: SocketAddr, version: ZookeeperVersion) -> Side {
        Side {
            name,
            addr,
            version,
            admin: tokio::sync::Mutex::new(None),
        }
    }

    /// A call on the admin session, reconnecting it if it was lost.
    async fn admin_call(&self, req: &Request) -> Result<Reply, String> {
        let mut admin = self.admin.lock().await;
        let mut last = String::new();
        for _ in 0..2 {
            if admin.is_none() {
                *admin = Some(connect_admin(self.addr).await?);
            }
            let Some(client) = admin.as_ref() else {
                continue;
            };
            match timeout(CALL_TIMEOUT, client.call(req)).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timeout".to_string(),
            }
            *admin = None;
        }
        Err(format!(
            "{}: admin request {:?} failed: {last}",
            self.name,
            req.op()
        ))
    }

    /// Current version (or aversion) of a node, 0 if it is missing.
    async fn current_version(&self, path: &str, aversion: bool) -> Result<i32, String> {
        let r = self
            .admin_call(&Request::Exists(PathWatchRequest {
                path: path.to_string(),
                watch: false,
            }))
            .await?;
        Ok(match r.decode::<StatResponse>() {
            Ok(s) if r.err == 0 && aversion => s.stat.aversion,
            Ok(s) if r.err == 0 => s.stat.version,
            _ => 0,
        })
    }

    /// Removes a program's root and everything below it.
    async fn remove_tree(&self, path: &str) -> Result<(), String> {
        let r = self
            .admin_call(&Request::GetChildren(PathWatchRequest {
                path: path.to_string(),
                watch: false,
            }))
            .await?;
        if r.err != 0 {
            return Ok(());
        }
        let children = r
            .decode::<ChildrenResponse>()
            .map_err(|e| format!("{}: getChildren {path}: {e:?}", self.name))?;
        for c in children.children {
            Box::pin(self.remove_tree(&format!("{path}/{c}"))).await?;
        }
        let r = self
            .admin_call(&Request::Delete(DeleteRequest {
                path: path.to_string(),
                version: -1,
            }))
            .await?;
        if r.err != 0 && r.err != -101 {
            return Err(format!(
                "{}: cleanup delete {path}: error {}",
                self.name, r.err
            ));
        }
        Ok(())
    }
}

async fn connect_admin(addr: SocketAddr) -> Result<RawClient, String> {
    let client = timeout(CALL_TIMEOUT, RawClient::connect(addr, 40_000))
        .await
        .map_err(|_| format!("admin connect to {addr}: timeout"))?
        .map_err(|e| format!("admin connect to {addr}: {e}"))?;
    let r = client
        .call(&auth_request(SUPER_CREDENTIALS))
        .await
        .map_err(|e| format!("admin addauth: {e}"))?;
    if r.err != 0 {
        return Err(format!("admin addauth super: error {}", r.err));
    }
    Ok(client)
}

fn auth_request(credentials: &str) -> Request {
    Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".to_string(),
        auth: Bytes::copy_from_slice(credentials.as_bytes()),
    })
}

/// Watches a session holds as a client sees them (like the Java client's watch manager):
/// added when a watching read succeeds, removed when an event consumes them. Reconnects
/// re-register exactly these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watches {
    data: BTreeSet<String>,
    exist: BTreeSet<String>,
    child: BTreeSet<String>,
    persistent: BTreeSet<String>,
    recursive: BTreeSet<String>,
}

impl Watches {
    fn on_event(&mut self, e: &Event) {
        let p = &e.path;
        match e.event_type {
            event_type::NODE_CREATED | event_type::NODE_DATA_CHANGED => {
                self.data.remove(p);
                self.exist.remove(p);
            }
            event_type::NODE_DELETED => {
                self.data.remove(p);
                self.exist.remove(p);
                self.child.remove(p);
            }
            event_type::NODE_CHILDREN_CHANGED => {
                self.child.remove(p);
            }
            _ => {}
        }
    }

    fn has_standard(&self, p: &str) -> bool {
        self.data.contains(p) || self.exist.contains(p) || self.child.contains(p)
    }

    fn has_persistent(&self, p: &str) -> bool {
        self.persistent.contains(p) || self.recursive.contains(p)
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.exist.is_empty()
            && self.child.is_empty()
            && self.persistent.is_empty()
            && self.recursive.is_empty()
    }

    fn set_watches(&self, relative_zxid: i64) -> SetWatches2 {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        SetWatches2 {
            relative_zxid,
            data_watches: list(&self.data),
            exist_watches: list(&self.exist),
            child_watches: list(&self.child),
            persistent_watches: list(&self.persistent),
            persistent_recursive_watches: list(&self.recursive),
        }
    }
}

/// One session of a program on one server.
struct Sess {
    client: Option<RawClient>,
    events: Option<UnboundedReceiver<Event>>,
    /// Events taken off `events` early, not yet drained.
    stash: Vec<Event>,
    id: i64,
    passwd: Bytes,
    /// Largest zxid seen in a reply (pings excluded), sent as lastZxidSeen and relativeZxid.
    last_zxid: i64,
    closed: bool,
    auths: Vec<AuthUser>,
    watches: Watches,
}

impl Sess {
    fn attach(&mut self, client: RawClient) {
        self.events = client.events();
        self.client = Some(client);
    }

    fn drain(&mut self, out: &mut Vec<Event>) {
        for e in self.stash.drain(..) {
            self.watches.on_event(&e);
            out.push(e);
        }
        if let Some(rx) = self.events.as_mut() {
            while let Ok(e) = rx.try_recv() {
                self.watches.on_event(&e);
                out.push(e);
            }
        }
    }

    /// Waits up to `limit` for the server to close the connection (the client's reader ends
    /// and drops its event sender). Events arriving meanwhile are kept for `drain`.
    async fn wait_closed(&mut self, limit: Duration) -> bool {
        let Some(rx) = self.events.as_mut() else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(e)) => self.stash.push(e),
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    fn saw(&mut self, r: &Reply) {
        if r.zxid > 0 {
            self.last_zxid = self.last_zxid.max(r.zxid);
        }
    }
}

/// What one step did on one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Replies of the acting session, each with the notifications that arrived on its
    /// connection before it.
    pub replies: Vec<(Vec<NEvent>, NReply)>,
    /// Notifications that arrived after the last reply (until the ping round trips), per
    /// session.
    pub events: Vec<Vec<NEvent>>,
    /// The replies to those pings (xid -2, zxid = last zxid), per session; `None` where no
    /// connection was open or the ping got no reply.
    pub pings: Vec<Option<NReply>>,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (before, reply) in &self.replies {
            if !first {
                write!(f, "; ")?;
            }
            first = false;
            for e in before {
                write!(f, "event {e}, ")?;
            }
            write!(f, "{reply}")?;
        }
        for (i, evs) in self.events.iter().enumerate() {
            if !evs.is_empty() {
                let parts: Vec<String> = evs.iter().map(|e| e.to_string()).collect();
                write!(f, " | s{} events: {}", i + 1, parts.join(", "))?;
            }
        }
        Ok(())
    }
}

/// A program's state on one server.
struct Run<'a> {
    side: &'a Side,
    /// The program's area (`/p<N>`), removed at the end.
    area: String,
    /// The program's root (`/p<N>/r`), `~` in scripts.
    root: String,
    baseline: i64,
    sess: Vec<Sess>,
}

impl<'a> Run<'a> {
    /// Opens the sessions (in order), then creates `area` and the root `area/r` in it (so
    /// that a sequential create of the root's own path stays inside `area`); the root's zxid
    /// is the baseline.
    async fn start(side: &'a Side, area: &str, sessions: usize) -> Result<Run<'a>, String> {
        let mut sess = Vec::new();
        for i in 0..sessions {
            let client = timeout(
                CALL_TIMEOUT,
                RawClient::connect(side.addr, SESSION_TIMEOUT_MS),
            )
            .await
            .map_err(|_| format!("{}: connect s{}: timeout", side.name, i + 1))?
            .map_err(|e| format!("{}: connect s{}: {e}", side.name, i + 1))?;
            let mut s = Sess {
                client: None,
                events: None,
                stash: Vec::new(),
                id: client.session_id,
                passwd: client.passwd.clone(),
                last_zxid: 0,
                closed: false,
                auths: Vec::new(),
                watches: Watches::default(),
            };
            s.attach(client);
            sess.push(s);
        }
        let root = format!("{area}/r");
        let mut baseline = 0;
        for path in [area, &root] {
            let r = side
                .admin_call(&Request::Create(Create {
                    op: OpCode::Create,
                    path: path.to_string(),
                    data: Some(Bytes::new()),
                    acl: zkd_protocol::Acl::open_unsafe(),
                    flags: 0,
                    ttl: -1,
                }))
                .await?;
            if r.err != 0 {
                return Err(format!("{}: create {path}: error {}", side.name, r.err));
            }
            baseline = r.zxid;
        }
        Ok(Run {
            side,
            area: area.to_string(),
            root,
            baseline,
            sess,
        })
    }

    /// Closes every session still open and removes the program's area.
    async fn finish(mut self) -> Result<(), String> {
        for s in &mut self.sess {
            if s.closed {
                continue;
            }
            let client = match s.client.take() {
                Some(c) => Some(c),
                None => timeout(
                    CALL_TIMEOUT,
                    RawClient::resume(
                        self.side.addr,
                        s.id,
                        s.passwd.clone(),
                        SESSION_TIMEOUT_MS,
                        s.last_zxid,
                    ),
                )
                .await
                .ok()
                .and_then(Result::ok),
            };
            if let Some(c) = client {
                let _ = timeout(CALL_TIMEOUT, c.close()).await;
            }
        }
        self.side.remove_tree(&self.area).await
    }

    fn ctx(&self) -> (Vec<i64>, &str, i64) {
        (
            self.sess.iter().map(|s| s.id).collect(),
            &self.root,
            self.baseline,
        )
    }

    fn full(&self, p: RelPath) -> String {
        format!("{}{p}", self.root)
    }

    async fn version(&self, p: RelPath, v: Ver, aversion: bool) -> Result<i32, String> {
        Ok(match v {
            Ver::Any => -1,
            Ver::V0 => 0,
            Ver::V1 => 1,
            Ver::V2 => 2,
            Ver::Cur => self.side.current_version(&self.full(p), aversion).await?,
            Ver::Next => self.side.current_version(&self.full(p), aversion).await? + 1,
        })
    }

    fn create(&self, path: RelPath, data: &Data, acl: &AclSpec, kind: &CreateKind) -> Create {
        Create {
            op: kind.op,
            path: self.full(path),
            data: data.bytes(),
            acl: acl.acl(),
            flags: kind.flags,
            ttl: kind.ttl,
        }
    }

    async fn delete(&self, path: RelPath, version: Ver) -> Result<DeleteRequest, String> {
        Ok(DeleteRequest {
            path: self.full(path),
            version: self.version(path, version, false).await?,
        })
    }

    async fn set_data(&self, path: RelPath, data: &Data, v: Ver) -> Result<SetDataRequest, String> {
        Ok(SetDataRequest {
            path: self.full(path),
            data: data.bytes(),
            version: self.version(path, v, false).await?,
        })
    }

    /// The wire record of a write, as a multi's sub-op (a step's request is the same record).
    async fn write(&self, w: &Write) -> Result<MultiOp, String> {
        Ok(match w {
            Write::Create {
                path,
                data,
                acl,
                kind,
            } => MultiOp::Create(self.create(path, data, acl, kind)),
            Write::Delete { path, version } => MultiOp::Delete(self.delete(path, *version).await?),
            Write::SetData {
                path,
                data,
                version,
            } => MultiOp::SetData(self.set_data(path, data, *version).await?),
        })
    }

    async fn sub_op(&self, op: &SubOp) -> Result<MultiOp, String> {
        Ok(match op {
            SubOp::Write(w) => self.write(w).await?,
            SubOp::Check { path, version } => MultiOp::Check(CheckVersionRequest {
                path: self.full(path),
                version: self.version(path, *version, false).await?,
            }),
            SubOp::GetData { path } => MultiOp::GetData(PathWatchRequest {
                path: self.full(path),
                watch: false,
            }),
            SubOp::GetChildren { path } => MultiOp::GetChildren(PathWatchRequest {
                path: self.full(path),
                watch: false,
            }),
        })
    }

    /// The wire request of an ordinary (single-request) step.
    async fn request(&self, op: &Op) -> Result<Request, String> {
        let pw = |p: RelPath, watch: bool| PathWatchRequest {
            path: self.full(p),
            watch,
        };
        Ok(match op {
            Op::Write(w) => match self.write(w).await? {
                MultiOp::Create(c) => Request::Create(c),
                MultiOp::Delete(d) => Request::Delete(d),
                MultiOp::SetData(s) => Request::SetData(s),
                other => unreachable!("a write is a create, delete or setData, not {other:?}"),
            },
            Op::Exists { path, watch } => Request::Exists(pw(path, *watch)),
            Op::GetData { path, watch } => Request::GetData(pw(path, *watch)),
            Op::GetChildren {
                path,
                watch,
                with_stat,
            } => {
                if *with_stat {
                    Request::GetChildren2(pw(path, *watch))
                } else {
                    Request::GetChildren(pw(path, *watch))
                }
            }
            Op::Multi(ops) | Op::MultiRead(ops) => {
                let mut wire = Vec::new();
                for o in ops {
                    wire.push(self.sub_op(o).await?);
                }
                if matches!(op, Op::Multi(_)) {
                    Request::Multi(wire)
                } else {
                    Request::MultiRead(wire)
                }
            }
            Op::SetAcl { path, acl, version } => Request::SetAcl(SetAclRequest {
                path: self.full(path),
                acl: acl.acl(),
                version: self.version(path, *version, true).await?,
            }),
            Op::GetAcl { path } => Request::GetAcl(PathRequest {
                path: self.full(path),
            }),
            Op::GetAllChildrenNumber { path } => Request::GetAllChildrenNumber(PathRequest {
                path: self.full(path),
            }),
            Op::GetEphemerals { prefix } => Request::GetEphemerals(PathRequest {
                path: match prefix {
                    Prefix::Root => self.root.clone(),
                    Prefix::RootA => self.full("/a"),
                    Prefix::Slash => "/".to_string(),
                    Prefix::Empty => String::new(),
                },
            }),
            Op::Sync { path } => Request::Sync(SyncRequest {
                path: Some(self.full(path)),
            }),
            Op::AddWatch { path, recursive } => Request::AddWatch(AddWatchRequest {
                path: self.full(path),
                mode: i32::from(*recursive),
            }),
            Op::CheckWatches { path, watcher_type } => Request::CheckWatches(WatchTypeRequest {
                path: self.full(path),
                watcher_type: *watcher_type,
            }),
            Op::RemoveWatches { path, watcher_type } => Request::RemoveWatches(WatchTypeRequest {
                path: self.full(path),
                watcher_type: *watcher_type,
            }),
            Op::AddAuth { user } => Request::Auth(AuthPacket {
                auth_type: 0,
                scheme: user.scheme().to_string(),
                auth: Bytes::copy_from_slice(user.credentials().as_bytes()),
            }),
            Op::SyncOdd { null } => Request::Sync(SyncRequest {
                path: (!null).then(String::new),
            }),
            Op::WhoAmI => Request::WhoAmI,
            Op::System { path, action } => {
                let path = path.to_string();
                match action {
                    SysAction::Exists => Request::Exists(PathWatchRequest { path, watch: false }),
                    SysAction::GetData => Request::GetData(PathWatchRequest { path, watch: false }),
                    SysAction::GetChildren2 => {
                        Request::GetChildren2(PathWatchRequest { path, watch: false })
                    }
                    SysAction::GetAcl => Request::GetAcl(PathRequest { path }),
                    SysAction::GetAllChildrenNumber => {
                        Request::GetAllChildrenNumber(PathRequest { path })
                    }
                    SysAction::Delete => Request::Delete(DeleteRequest { path, version: -1 }),
                    SysAction::SetConfig => Request::SetData(SetDataRequest {
                        path: "/zookeeper/config".to_string(),
                        data: Some(Bytes::from_static(b"x")),
                        version: -1,
                    }),
                    SysAction::CreateUnderConfig => Request::Create(Create {
                        op: OpCode::Create,
                        path: "/zookeeper/config/x".to_string(),
                        data: Some(Bytes::from_static(b"x")),
                        acl: zkd_protocol::Acl::open_unsafe(),
                        flags: 0,
                        ttl: -1,
                    }),
                }
            }
            Op::Close | Op::Disconnect | Op::Reconnect { .. } => {
                unreachable!("not a single request")
            }
        })
    }

    /// Sends one request on session `s` and waits for the reply; a lost connection or a
    /// timeout leaves the session disconnected.
    async fn call(&mut self, s: usize, req: &Request) -> Result<Reply, NReply> {
        let Some(client) = self.sess[s].client.as_ref() else {
            return Err(NReply::Skipped("disconnected"));
        };
        let result = match timeout(CALL_TIMEOUT, client.call(req)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(_)) => Err(NReply::ConnectionLost),
            Err(_) => Err(NReply::NoReply),
        };
        match &result {
            Ok(r) => self.sess[s].saw(r),
            Err(_) => {
                if let Some(c) = self.sess[s].client.take() {
                    c.abort().await;
                }
            }
        }
        result
    }

    /// Notifications of session `s` that have arrived so far, normalised.
    fn take_events(&mut self, s: usize) -> Vec<NEvent> {
        let mut raw = Vec::new();
        self.sess[s].drain(&mut raw);
        let (ids, root, baseline) = self.ctx();
        let ctx = Ctx {
            root,
            baseline,
            sessions: &ids,
        };
        raw.iter().map(|e| ctx.event(e)).collect()
    }

    fn normalise(&self, op: OpCode, r: &Reply, create2_in_multi: &[bool]) -> NReply {
        let (ids, root, baseline) = self.ctx();
        Ctx {
            root,
            baseline,
            sessions: &ids,
        }
        .reply(op, r, create2_in_multi)
    }

    /// Runs one step and collects its outcome (including the notifications it caused on every
    /// session of the program).
    async fn step(&mut self, step: &Step) -> Result<Outcome, String> {
        let s = step.session;
        let mut replies = Vec::new();
        let mut auth_failed = false;
        if self.sess[s].closed {
            if let Op::Reconnect { .. } = step.op {
                // Resuming a closed session must be refused.
                replies.push((Vec::new(), self.resume_closed(s).await));
            } else {
                replies.push((Vec::new(), NReply::Skipped("session closed")));
            }
        } else {
            let reconnects = matches!(step.op, Op::Reconnect { .. } | Op::Disconnect);
            if self.sess[s].client.is_none() && !reconnects {
                // A disconnected session reconnects before its next request.
                self.reconnect(s, false, &mut replies).await;
            }
            match &step.op {
                Op::Close => {
                    if self.sess[s].client.is_none() {
                        replies.push((Vec::new(), NReply::Skipped("disconnected")));
                    } else {
                        let reply = match self.call(s, &Request::CloseSession).await {
                            Ok(r) => self.normalise(OpCode::CloseSession, &r, &[]),
                            Err(n) => n,
                        };
                        self.sess[s].closed = true;
                        let before = self.take_events(s);
                        replies.push((before, reply));
                        if let Some(c) = self.sess[s].client.take() {
                            c.abort().await;
                        }
                    }
                }
                Op::Disconnect => match self.sess[s].client.take() {
                    Some(c) => {
                        let before = self.take_events(s);
                        c.abort().await;
                        replies.push((before, NReply::Skipped("connection dropped")));
                    }
                    None => replies.push((Vec::new(), NReply::Skipped("disconnected"))),
                },
                Op::Reconnect { stale } => self.reconnect(s, *stale, &mut replies).await,
                op => {
                    let req = self.request(op).await?;
                    match self.call(s, &req).await {
                        Ok(r) => {
                            auth_failed = matches!(op, Op::AddAuth { .. }) && r.err == -115;
                            let before = self.take_events(s);
                            self.track(s, op, &r);
                            // Only 3.8.0 answers an ordinary create2 sub-op with a type-1
                            // result: its Stat is dropped on both sides then.
                            let flags = match self.side.version {
                                ZookeeperVersion::V3_8 => create2_flags(op),
                                ZookeeperVersion::V3_9 => Vec::new(),
                            };
                            replies.push((before, self.normalise(req.op(), &r, &flags)));
                        }
                        Err(n) => {
                            let before = self.take_events(s);
                            replies.push((before, n));
                        }
                    }
                }
            }
        }
        // Every notification the step caused precedes the reply to a later request on the
        // same connection: one ping per connected session flushes them all.
        let mut pings = Vec::new();
        for i in 0..self.sess.len() {
            let mut ping = None;
            // After AUTHFAILED the server closes the connection. (A request sent after the
            // client saw the close would never be answered: wait for the close instead.)
            if i == s && auth_failed && self.sess[i].wait_closed(CLOSE_WAIT).await {
                if let Some(c) = self.sess[i].client.take() {
                    c.abort().await;
                }
            }
            if let Some(c) = self.sess[i].client.as_ref() {
                match timeout(CALL_TIMEOUT, c.call(&Request::Ping)).await {
                    Ok(Ok(r)) => ping = Some(self.normalise(OpCode::Ping, &r, &[])),
                    _ => {
                        // The server closed the connection (e.g. after AUTHFAILED).
                        if let Some(c) = self.sess[i].client.take() {
                            c.abort().await;
                        }
                    }
                }
            }
            pings.push(ping);
        }
        let events = (0..self.sess.len()).map(|i| self.take_events(i)).collect();
        Ok(Outcome {
            replies,
            events,
            pings,
        })
    }

    /// Tries to resume a closed session; an accepted connection is dropped again at once.
    async fn resume_closed(&self, s: usize) -> NReply {
        match self.resume(s).await {
            Ok(c) => {
                let negotiated = c.timeout_ms;
                c.abort().await;
                NReply::Connected {
                    timeout: negotiated,
                }
            }
            Err(failed) => failed,
        }
    }

    /// Resumes session `s` on a new connection; a failure as the reply it shows as.
    async fn resume(&self, s: usize) -> Result<RawClient, NReply> {
        let sess = &self.sess[s];
        let resumed = timeout(
            CALL_TIMEOUT,
            RawClient::resume(
                self.side.addr,
                sess.id,
                sess.passwd.clone(),
                SESSION_TIMEOUT_MS,
                sess.last_zxid,
            ),
        )
        .await;
        match resumed {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(ClientError::Rejected)) => Err(NReply::ConnectFailed("session rejected".into())),
            Ok(Err(e)) => Err(NReply::ConnectFailed(e.to_string())),
            Err(_) => Err(NReply::NoReply),
        }
    }

    async fn reconnect(&mut self, s: usize, stale: bool, replies: &mut Vec<(Vec<NEvent>, NReply)>) {
        if let Some(c) = self.sess[s].client.take() {
            let mut dropped = Vec::new();
            self.sess[s].drain(&mut dropped);
            c.abort().await;
        }
        let client = match self.resume(s).await {
            Ok(c) => c,
            Err(failed) => {
                replies.push((Vec::new(), failed));
                return;
            }
        };
        replies.push((
            Vec::new(),
            NReply::Connected {
                timeout: client.timeout_ms,
            },
        ));
        self.sess[s].attach(client);
        for user in self.sess[s].auths.clone() {
            let r = self.call(s, &auth_request(user.credentials())).await;
            let before = self.take_events(s);
            replies.push((
                before,
                match r {
                    Ok(r) => self.normalise(OpCode::Auth, &r, &[]),
                    Err(n) => n,
                },
            ));
        }
        if self.sess[s].client.is_some() && !self.sess[s].watches.is_empty() {
            let rel = if stale { 0 } else { self.sess[s].last_zxid };
            let w = self.sess[s].watches.set_watches(rel);
            // Like the Java client: setWatches (101) unless persistent watches are held.
            let req =
                if w.persistent_watches.is_empty() && w.persistent_recursive_watches.is_empty() {
                    Request::SetWatches(SetWatches {
                        relative_zxid: w.relative_zxid,
                        data_watches: w.data_watches,
                        exist_watches: w.exist_watches,
                        child_watches: w.child_watches,
                    })
                } else {
                    Request::SetWatches2(w)
                };
            let r = self.call(s, &req).await;
            let before = self.take_events(s);
            replies.push((
                before,
                match r {
                    Ok(r) => self.normalise(req.op(), &r, &[]),
                    Err(n) => n,
                },
            ));
        }
    }

    /// Client-side bookkeeping after a reply: watches the session now holds, credentials to
    /// re-send after a reconnect.
    fn track(&mut self, s: usize, op: &Op, r: &Reply) {
        let full = |p: RelPath| format!("{}{p}", self.root);
        let w = &mut self.sess[s].watches;
        match op {
            Op::Exists { path, watch: true } if r.err == 0 => {
                w.data.insert(full(path));
            }
            Op::Exists { path, watch: true } if r.err == -101 => {
                w.exist.insert(full(path));
            }
            Op::GetData { path, watch: true } if r.err == 0 => {
                w.data.insert(full(path));
            }
            Op::GetChildren {
                path, watch: true, ..
            } if r.err == 0 => {
                w.child.insert(full(path));
            }
            Op::AddWatch { path, recursive } if r.err == 0 => {
                if *recursive {
                    w.recursive.insert(full(path));
                } else {
                    w.persistent.insert(full(path));
                }
            }
            Op::RemoveWatches { path, watcher_type } if r.err == 0 => {
                let p = full(path);
                if matches!(watcher_type, 1 | 3) {
                    w.child.remove(&p);
                }
                if matches!(watcher_type, 2 | 3) {
                    w.data.remove(&p);
                    w.exist.remove(&p);
                }
                if matches!(watcher_type, 3 | 4) {
                    w.persistent.remove(&p);
                }
                if matches!(watcher_type, 3 | 5) {
                    w.recursive.remove(&p);
                }
            }
            Op::AddAuth { user } if r.err == 0 => {
                self.sess[s].auths.push(*user);
            }
            _ => {}
        }
    }

    /// Whether another connected session holds a watch at the path of a checkWatches step
    /// in the table its WatcherType looks at, as ZooKeeper 3.8.0 keeps them (addWatch puts
    /// both persistent modes into both tables).
    fn other_connection_watches(&self, step: &Step) -> bool {
        let Op::CheckWatches { path, watcher_type } = &step.op else {
            return false;
        };
        let p = self.full(path);
        self.sess.iter().enumerate().any(|(i, sess)| {
            let w = &sess.watches;
            let data = w.data.contains(&p)
                || w.exist.contains(&p)
                || w.persistent.contains(&p)
                || w.recursive.contains(&p);
            let child =
                w.child.contains(&p) || w.persistent.contains(&p) || w.recursive.contains(&p);
            i != step.session
                && !sess.closed
                && sess.client.is_some()
                && match watcher_type {
                    1 => child,
                    2 => data,
                    _ => data || child,
                }
        })
    }

    /// Whether the step would hit a behaviour where ZooKeeper 3.8.0 and zkd differ on
    /// purpose (see the module docs of the test): several watch modes of one session on one
    /// path, or check/removeWatches on a path with a persistent watch.
    fn known_difference_ahead(&self, step: &Step) -> Option<&'static str> {
        let sess = &self.sess[step.session];
        if sess.closed {
            return None;
        }
        let w = &sess.watches;
        let full = |p: RelPath| format!("{}{p}", self.root);
        match &step.op {
            Op::Exists { path, watch: true }
            | Op::GetData { path, watch: true }
            | Op::GetChildren {
                path, watch: true, ..
            } if w.has_persistent(&full(path)) => {
                Some("standard watch on a path with a persistent watch (3.8.0 overwrites modes)")
            }
            Op::AddWatch { path, recursive } => {
                let p = full(path);
                let other = if *recursive {
                    &w.persistent
                } else {
                    &w.recursive
                };
                if w.has_standard(&p) || other.contains(&p) {
                    Some("second watch mode on one path (3.8.0 overwrites modes)")
                } else {
                    None
                }
            }
            Op::CheckWatches { path, .. } | Op::RemoveWatches { path, .. }
                if w.has_persistent(&full(path)) =>
            {
                Some("check/removeWatches on a path with a persistent watch (3.8.0 semantics)")
            }
            _ => None,
        }
    }
}

/// For a multi: which sub-ops are create2 (header 15) of ordinary nodes (flags 0–3).
fn create2_flags(op: &Op) -> Vec<bool> {
    match op {
        Op::Multi(ops) => ops
            .iter()
            .map(|o| {
                matches!(o, SubOp::Write(Write::Create { kind, .. })
                    if kind.op == OpCode::Create2 && (0..=3).contains(&kind.flags))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A step's outcomes on both servers.
#[derive(Clone, Debug)]
pub struct StepRecord {
    pub a: Outcome,
    pub b: Outcome,
    /// A known difference that was accepted for this step.
    pub note: Option<&'static str>,
}

/// How a program ended.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Every step agreed.
    Agreed,
    /// Stopped before step `index` (0-based): it would hit a known, deliberate difference.
    Stopped { index: usize, why: &'static str },
    /// Step `index` differs.
    Differs { index: usize },
}

/// Everything a program run produced.
pub struct Report {
    pub names: [&'static str; 2],
    pub records: Vec<StepRecord>,
    pub verdict: Verdict,
}

impl Report {
    /// The program as a script with each step's outcome (both when they differ).
    pub fn script(&self, program: &Program) -> String {
        let mut out = format!(
            "# {} sessions{}; ~ is the program's root; zxids are offsets from the root's creation\n",
            program.sessions,
            if program.acl_variety { ", ACL variety" } else { "" }
        );
        for (i, step) in program.steps.iter().enumerate() {
            out.push_str(&format!("{:>3}. {step}\n", i + 1));
            match self.records.get(i) {
                Some(rec) if rec.a == rec.b => {
                    out.push_str(&format!("       -> {}\n", rec.a));
                }
                Some(rec) => {
                    out.push_str(&format!("       -> {:<9} {}\n", self.names[0], rec.a));
                    out.push_str(&format!("       -> {:<9} {}\n", self.names[1], rec.b));
                    if let Some(note) = rec.note {
                        out.push_str(&format!("          (known difference: {note})\n"));
                    }
                }
                None => out.push_str("       (not run)\n"),
            }
        }
        match &self.verdict {
            Verdict::Agreed => out.push_str("# all steps agree\n"),
            Verdict::Stopped { index, why } => out.push_str(&format!(
                "# stopped before step {}: known difference ({why})\n",
                index + 1
            )),
            Verdict::Differs { index } => {
                out.push_str(&format!("# FIRST DIFFERENCE at step {}\n", index + 1))
            }
        }
        out
    }

    /// The first differing step, spelled out.
    pub fn difference(&self, program: &Program) -> Option<String> {
        let Verdict::Differs { index } = self.verdict else {
            return None;
        };
        let rec = &self.records[index];
        let mut out = format!("step {}: {}\n", index + 1, program.steps[index]);
        let names = self.names;
        let mut both = |title: String, a: String, b: String| {
            out.push_str(&format!("  {title}:\n"));
            out.push_str(&format!("    {:<9} {a}\n", names[0]));
            out.push_str(&format!("    {:<9} {b}\n", names[1]));
        };
        let n = rec.a.replies.len().max(rec.b.replies.len());
        for i in 0..n {
            let a = rec.a.replies.get(i);
            let b = rec.b.replies.get(i);
            if a != b {
                both(format!("reply {}", i + 1), show_reply(a), show_reply(b));
            }
        }
        for i in 0..rec.a.pings.len().max(rec.b.pings.len()) {
            let a = rec.a.pings.get(i);
            let b = rec.b.pings.get(i);
            if a != b {
                let show = |p: Option<&Option<NReply>>| match p {
                    Some(Some(r)) => r.to_string(),
                    _ => "-".to_string(),
                };
                both(
                    format!("ping of s{} after the step", i + 1),
                    show(a),
                    show(b),
                );
            }
        }
        for i in 0..rec.a.events.len().max(rec.b.events.len()) {
            let a = rec.a.events.get(i);
            let b = rec.b.events.get(i);
            if a != b {
                let show = |e: Option<&Vec<NEvent>>| match e {
                    Some(e) => format!(
                        "[{}]",
                        e.iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None => "-".to_string(),
                };
                both(format!("events of s{}", i + 1), show(a), show(b));
            }
        }
        Some(out)
    }
}

fn show_reply(r: Option<&(Vec<NEvent>, NReply)>) -> String {
    match r {
        None => "-".to_string(),
        Some((before, reply)) => {
            let mut s = String::new();
            for e in before {
                s.push_str(&format!("event {e}, "));
            }
            s.push_str(&reply.to_string());
            s
        }
    }
}

/// Known differences a pair of outcomes shows after the fact. Returns why, and whether the
/// program can go on (false when the servers' watch state now differs).
fn accepted_difference(
    step: &Step,
    a: &Outcome,
    b: &Outcome,
    zkd_is_a: bool,
    other_connection_watches: bool,
    version: ZookeeperVersion,
) -> Option<(&'static str, bool)> {
    // Every difference left is one of 3.8.0's; against 3.9.3 everything is compared.
    if !zkd_is_a || version != ZookeeperVersion::V3_8 {
        return None;
    }
    let (zkd, zk) = (a, b);
    // The step's own request is answered last (an implicit reconnect may come first).
    let own_err = |o: &Outcome| match o.replies.last() {
        Some((_, NReply::Reply { err, .. })) => Some(*err),
        _ => None,
    };
    // exists: zkd checks READ (3.8.4+), 3.8.0 does not.
    if let Op::Exists { watch, .. } = step.op {
        if own_err(zkd) == Some(-102) && own_err(zk) == Some(0) {
            return Some(("exists checks READ in zkd (3.8.4+), not in 3.8.0", !watch));
        }
    }
    // checkWatches: 3.8.0 answers OK when any connection has a watch in the table at the
    // path (its containsWatcher does not look at the caller); zkd only looks at the caller's.
    if matches!(step.op, Op::CheckWatches { .. })
        && other_connection_watches
        && own_err(zkd) == Some(-121)
        && own_err(zk) == Some(0)
    {
        let mut zk = zk.clone();
        if let Some((_, NReply::Reply { err, .. })) = zk.replies.last_mut() {
            *err = -121;
        }
        if zk == *zkd {
            return Some(("3.8.0 checkWatches sees other connections' watches", true));
        }
    }
    None
}

/// Runs `program` in area `area` (a fresh top-level path) on both servers (past the first difference if
/// `keep_going`). `Err` is a harness failure (a server
/// could not be reached at all), not a difference.
pub async fn run_program(
    sides: [&Side; 2],
    zkd_is_a: bool,
    version: ZookeeperVersion,
    program: &Program,
    area: &str,
    keep_going: bool,
) -> Result<Report, String> {
    let mut a = Run::start(sides[0], area, program.sessions).await?;
    let mut b = Run::start(sides[1], area, program.sessions).await?;
    let mut records = Vec::new();
    let mut verdict = Verdict::Agreed;
    for (index, step) in program.steps.iter().enumerate() {
        let ahead = match version {
            ZookeeperVersion::V3_8 if zkd_is_a => a.known_difference_ahead(step),
            _ => None,
        };
        if let Some(why) = ahead {
            verdict = Verdict::Stopped { index, why };
            break;
        }
        let other_watches = a.other_connection_watches(step);
        let oa = a.step(step).await?;
        let ob = b.step(step).await?;
        if oa == ob {
            records.push(StepRecord {
                a: oa,
                b: ob,
                note: None,
            });
            continue;
        }
        match accepted_difference(step, &oa, &ob, zkd_is_a, other_watches, version) {
            Some((why, go_on)) => {
                records.push(StepRecord {
                    a: oa,
                    b: ob,
                    note: Some(why),
                });
                if !go_on {
                    verdict = Verdict::Stopped {
                        index: index + 1,
                        why,
                    };
                    break;
                }
            }
            None => {
                records.push(StepRecord {
                    a: oa,
                    b: ob,
                    note: None,
                });
                if !matches!(verdict, Verdict::Differs { .. }) {
                    verdict = Verdict::Differs { index };
                }
                if !keep_going {
                    break;
                }
            }
        }
    }
    let fa = a.finish().await;
    let fb = b.finish().await;
    fa?;
    fb?;
    Ok(Report {
        names: [sides[0].name, sides[1].name],
        records,
        verdict,
    })
}
