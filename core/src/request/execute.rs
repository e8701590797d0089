//! The last stage of a request, `Core::execute`: one decoded request run against the tree
//! (reads, writes through transactions, multi, auth and watch management), its reply written
//! straight into its frame.

use bytes::{BufMut, BytesMut};
use zkd_protocol::{
    add_watch_mode, event_type, perms, xid, AllChildrenNumberResponse, ChildrenResponse,
    ClientInfo, Create2Response, CreateMode, CreateResponse, ErrorCode, ErrorResponse,
    GetAclResponse, GetDataResponse, Id, Jute, MultiOp, MultiResponse, MultiResult, OpCode,
    PathWatchRequest, Request, SetWatches2, StatResponse, WhoAmIResponse,
};

use crate::data::tree::NodeRef;
use crate::request::reply::{header_only, Reply, SHARE_MIN};
use crate::request::txn::Txn;
use crate::watch::watches::WatchKind;
use crate::{auth::acl, notification_frame, ConnId, Core, Frame, Now, Outbox};

/// The terminating MultiHeader of a multi response `{type -1, done true, err -1}`.
const MULTI_TERMINATOR: [u8; 9] = [0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff];

type OpResult = Result<(), ErrorCode>;

/// Inside a multi the flags, not the sub-op header, decide the kind of node, as ZooKeeper
/// does: header 19 with flag 0-3 makes that ordinary kind, header 21 with a non-TTL flag
/// ignores its ttl, and flag 4 makes a container under any header. `None` for a TTL flag
/// under a header that has no ttl field, and on 3.9 for a flag that names no mode.
fn multi_create(
    c: &zkd_protocol::Create,
    version: crate::ZookeeperVersion,
) -> Option<zkd_protocol::Create> {
    let op = match CreateMode::from_flags(c.flags) {
        // 3.9 refuses an unknown flag under headers 1, 15 and 19 like a TTL flag without a
        // ttl; under header 21, and on 3.8, the sub-op fails with BADARGUMENTS.
        None if version == crate::ZookeeperVersion::V3_9 && c.op != OpCode::CreateTtl => {
            return None
        }
        None => c.op,
        Some(CreateMode::Container) => OpCode::CreateContainer,
        Some(m) if m.is_ttl() => match c.op {
            OpCode::CreateTtl => OpCode::CreateTtl,
            _ => return None,
        },
        Some(_) => match c.op {
            OpCode::CreateContainer | OpCode::CreateTtl => OpCode::Create,
            other => other,
        },
    };
    let ttl = if op == OpCode::CreateTtl { c.ttl } else { -1 };
    Some(zkd_protocol::Create {
        op,
        ttl,
        ..c.clone()
    })
}

/// Encoded size of a Stat.
const STAT_LEN: usize = 68;

/// The answer to checkWatches and removeWatches from what the watch table said: `None`, a
/// watcher type it does not know; `Some(false)`, no such watcher.
fn watcher_found(found: Option<bool>) -> Result<(), ErrorCode> {
    match found {
        None => Err(ErrorCode::MarshallingError),
        Some(false) => Err(ErrorCode::NoWatcher),
        Some(true) => Ok(()),
    }
}

impl Core {
    /// Runs one decoded request. Returns (xid, zxid, reply frame), or `None` when the request
    /// already answered (or deliberately did not answer) by itself.
    pub(crate) fn execute(
        &mut self,
        conn: ConnId,
        sid: i64,
        xid: i32,
        req: Request,
        now: Now,
        out: &mut dyn Outbox,
    ) -> Option<(i32, i64, Frame)> {
        let ids = self
            .conns
            .get(&conn)
            .map(|c| c.ids.clone())
            .unwrap_or_default();
        let mut reply = Reply::new();
        let mut done: Option<Txn> = None;
        let op = req.op().info();
        let is_write = op.transaction;
        if is_write {
            self.next_zxid(now.mono);
        }
        let is_multi = matches!(req, Request::Multi(_));
        let multi_read_of_writes = matches!(&req, Request::MultiRead(ops)
            if !ops.is_empty() && ops.iter().all(|o| !o.is_read()));
        let zxid = self.zxid;
        if self.herd.watching_rereads() {
            if let Some(path) = req.paths().first().filter(|_| op.watching_read) {
                self.herd
                    .read(conn, crate::data::path::canonical(path), now.mono);
            }
        }
        let result: OpResult = match req {
            Request::Ping => {
                return Some((xid::PING, zxid, header_only(xid::PING, zxid, 0)));
            }
            Request::Auth(auth) => return self.auth(conn, xid, &auth.scheme, &auth.auth, out),
            Request::CloseSession => {
                let zxid = self.kill_session(sid, now, out);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.last_op = "CLOS";
                }
                self.send(out, conn, header_only(xid, zxid, 0));
                self.finish_connection(conn, out);
                return None;
            }
            Request::Check(_) => {
                self.send(
                    out,
                    conn,
                    header_only(xid, -1, ErrorCode::Unimplemented.code()),
                );
                self.finish_connection(conn, out);
                return None;
            }
            Request::Create(c) => {
                let mut txn = self.write_txn(zxid, now);
                match self.txn_create(&mut txn, sid, &ids, &c, false) {
                    Ok(created) => {
                        done = Some(txn);
                        if c.op == OpCode::Create {
                            CreateResponse { path: created.path }.write(reply.body());
                        } else {
                            Create2Response {
                                path: created.path,
                                stat: created.stat,
                            }
                            .write(reply.body());
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Request::Delete(d) => {
                let mut txn = self.write_txn(zxid, now);
                let r = self.txn_delete(&mut txn, &ids, &d.path, d.version);
                done = Some(txn);
                r
            }
            Request::SetData(s) => {
                let mut txn = self.write_txn(zxid, now);
                let r = self.txn_set_data(&mut txn, &ids, &s.path, &s.data, s.version);
                done = Some(txn);
                r.map(|stat| StatResponse { stat }.write(reply.body()))
            }
            Request::SetAcl(s) => {
                let mut txn = self.write_txn(zxid, now);
                let r = self.txn_set_acl(&mut txn, &ids, &s.path, &s.acl, s.version);
                done = Some(txn);
                r.map(|stat| StatResponse { stat }.write(reply.body()))
            }
            Request::Multi(ops) => {
                let resp = self.multi(sid, &ids, ops, zxid, now, &mut done);
                resp.map(|r| r.write(reply.body()))
            }
            Request::MultiRead(ops) => self.multi_read(&ids, ops).map(|r| r.write(reply.body())),
            Request::Reconfig(r) => {
                let mut txn = self.write_txn(zxid, now);
                let res = self.txn_reconfig(&mut txn, &ids, &r);
                done = Some(txn);
                res.map(|(data, stat)| {
                    GetDataResponse {
                        data: Some(data),
                        stat,
                    }
                    .write(reply.body())
                })
            }
            Request::DeleteContainer(_) => Err(ErrorCode::BadArguments),
            Request::Exists(r) => self.exists(conn, &ids, &r.path, r.watch, reply.body()),
            Request::GetData(r) => {
                let res = self.get_data(&ids, &r.path, &mut reply);
                self.watch_if_read(res, conn, &r, WatchKind::Data)
            }
            Request::GetChildren(r) => {
                let res = self.get_children(&ids, &r.path, false, &mut reply);
                self.watch_if_read(res, conn, &r, WatchKind::Child)
            }
            Request::GetChildren2(r) => {
                let res = self.get_children(&ids, &r.path, true, &mut reply);
                self.watch_if_read(res, conn, &r, WatchKind::Child)
            }
            Request::GetAcl(r) => self.get_acl(&ids, &r.path, reply.body()),
            Request::Sync(s) => {
                s.write(reply.body());
                Ok(())
            }
            Request::CheckWatches(w) => watcher_found(self.watches.check(
                conn,
                &w.path,
                w.watcher_type,
                self.cfg.zookeeper_version,
            )),
            Request::RemoveWatches(w) => watcher_found(self.watches.remove(
                conn,
                &w.path,
                w.watcher_type,
                self.cfg.zookeeper_version,
            )),
            Request::SetWatches(w) => {
                self.set_watches(conn, w.into(), out);
                Ok(())
            }
            Request::SetWatches2(w) => {
                self.set_watches(conn, w, out);
                Ok(())
            }
            Request::Sasl(t) => return self.sasl(conn, xid, t.token, out),
            Request::GetEphemerals(r) => {
                let prefix = r.path.trim();
                let all = prefix.is_empty() || prefix == "/";
                let children: Vec<String> = self
                    .sessions
                    .get(sid)
                    .map(|s| {
                        s.ephemerals
                            .iter()
                            .filter(|p| all || p.starts_with(&*r.path))
                            .map(|p| p.to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                ChildrenResponse { children }.write(reply.body());
                Ok(())
            }
            Request::GetAllChildrenNumber(r) => match self.readable(&ids, &r.path) {
                Ok(()) => {
                    let total = self.tree.descendants(&r.path);
                    AllChildrenNumberResponse { total }.write(reply.body());
                    Ok(())
                }
                Err(e) => Err(e),
            },
            Request::AddWatch(w) => {
                let kind = match w.mode {
                    add_watch_mode::PERSISTENT => Some(WatchKind::Persistent),
                    add_watch_mode::PERSISTENT_RECURSIVE => Some(WatchKind::Recursive),
                    _ => None,
                };
                match kind {
                    Some(kind) => {
                        self.watches.add(conn, &w.path, kind);
                        ErrorResponse { err: 0 }.write(reply.body());
                        Ok(())
                    }
                    None => Err(ErrorCode::MarshallingError),
                }
            }
            Request::WhoAmI => {
                let client_info = ids
                    .iter()
                    .map(|id| ClientInfo {
                        auth_scheme: id.scheme.clone(),
                        user: match id.scheme.as_str() {
                            "digest" => id.id.split(':').next().unwrap_or("").to_string(),
                            _ => id.id.clone(),
                        },
                    })
                    .collect();
                WhoAmIResponse { client_info }.write(reply.body());
                Ok(())
            }
        };
        let err = match result {
            Ok(()) => 0,
            Err(e) => e.code(),
        };
        if is_write {
            self.log_write(
                sid,
                xid,
                zxid,
                now.wall,
                is_multi,
                (err != 0).then_some(err),
            );
        }
        // Watches fire only once the change is logged: a change the log could not take
        // is never announced.
        if let Some(txn) = done {
            self.commit(txn, out);
        }
        if multi_read_of_writes && err == ErrorCode::MarshallingError.code() {
            // A multiRead of writes only: ZooKeeper follows its MARSHALLINGERROR with an
            // empty multi response (just the terminating header). With any read sub-op, and
            // for a write multi, the error has no body.
            let mut r = Reply::new();
            r.body().extend_from_slice(&MULTI_TERMINATOR);
            return Some((xid, zxid, r.finish_keeping_body(xid, zxid, err)));
        }
        Some((xid, zxid, reply.finish(xid, zxid, err)))
    }

    /// addauth: digest and ip succeed; anything else fails and closes the connection.
    fn auth(
        &mut self,
        conn: ConnId,
        xid: i32,
        scheme: &str,
        auth: &[u8],
        out: &mut dyn Outbox,
    ) -> Option<(i32, i64, Frame)> {
        let new_ids: Option<Vec<Id>> = match scheme {
            "digest" => {
                let id = acl::digest_id(&String::from_utf8_lossy(auth));
                let mut v = vec![Id {
                    scheme: "digest".into(),
                    id: id.clone(),
                }];
                if self.cfg.super_digest.as_deref() == Some(id.as_str()) {
                    v.push(Id {
                        scheme: "super".into(),
                        id: String::new(),
                    });
                }
                Some(v)
            }
            "ip" => Some(Vec::new()),
            _ => None,
        };
        match new_ids {
            Some(new_ids) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    let ids = std::sync::Arc::make_mut(&mut c.ids);
                    for id in new_ids {
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                    }
                }
                Some((xid, 0, header_only(xid, 0, 0)))
            }
            None => {
                tracing::info!(conn, scheme, "addauth with an unknown scheme; closing");
                self.counters.auth_failed += 1;
                self.send(out, conn, header_only(xid, 0, ErrorCode::AuthFailed.code()));
                self.finish_connection(conn, out);
                None
            }
        }
    }

    /// Node exists and the caller may read it.
    fn readable(&self, ids: &[Id], p: &str) -> Result<(), ErrorCode> {
        self.readable_node(ids, p).map(|_| ())
    }

    /// The node at `p` if `ids` may read it.
    fn readable_node(&self, ids: &[Id], p: &str) -> Result<NodeRef<'_>, ErrorCode> {
        let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
        if acl::allowed(node.acl, perms::READ, ids) {
            Ok(node)
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    fn exists(
        &mut self,
        conn: ConnId,
        ids: &[Id],
        p: &str,
        watch: bool,
        body: &mut BytesMut,
    ) -> OpResult {
        if p.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.tree.get(p);
        if let Some(n) = node {
            if !acl::allowed(n.acl, perms::READ, ids) {
                return Err(ErrorCode::NoAuth);
            }
        }
        let stat = node.map(|n| n.stat());
        if watch {
            self.watches
                .add(conn, crate::data::path::canonical(p), WatchKind::Data);
        }
        let stat = stat.ok_or(ErrorCode::NoNode)?;
        StatResponse { stat }.write(body);
        Ok(())
    }

    /// Leaves a watch of `kind` on the path of a read that succeeded, if the request asks for one.
    fn watch_if_read(
        &mut self,
        res: OpResult,
        conn: ConnId,
        r: &PathWatchRequest,
        kind: WatchKind,
    ) -> OpResult {
        if res.is_ok() && r.watch {
            self.watches
                .add(conn, crate::data::path::canonical(&r.path), kind);
        }
        res
    }

    fn get_data(&self, ids: &[Id], p: &str, reply: &mut Reply) -> OpResult {
        let node = self.readable_node(ids, p)?;
        // Size the frame once: grown by doubling, a large reply would hold up to twice its
        // length while it waits in an outbound queue.
        let data_len = node.data.map_or(0, <[u8]>::len);
        let body = reply.body_for(data_len + 4 + STAT_LEN);
        // As GetDataResponse encodes it (nullable data, then the Stat), without a copy of
        // the data in between.
        match node.data {
            Some(d) => zkd_protocol::jute::write_bytes(body, d),
            None => body.put_i32(-1),
        }
        node.stat().write(body);
        Ok(())
    }

    fn get_children(
        &mut self,
        ids: &[Id],
        p: &str,
        with_stat: bool,
        reply: &mut Reply,
    ) -> OpResult {
        self.readable(ids, p)?;
        let list = self.tree.encoded_children(p).ok_or(ErrorCode::NoNode)?;
        if list.len() < SHARE_MIN {
            reply.body().reserve(list.len() + STAT_LEN);
        }
        reply.append_shared(list);
        if with_stat {
            let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
            node.stat().write(reply.body());
        }
        Ok(())
    }

    fn get_acl(&self, ids: &[Id], p: &str, body: &mut BytesMut) -> OpResult {
        let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(node.acl, perms::READ | perms::ADMIN, ids) {
            return Err(ErrorCode::NoAuth);
        }
        GetAclResponse {
            acl: acl::masked(node.acl, ids),
            stat: node.stat(),
        }
        .write(body);
        Ok(())
    }

    /// A write multi: all or nothing, one zxid, events only on success.
    fn multi(
        &mut self,
        sid: i64,
        ids: &[Id],
        ops: Vec<MultiOp>,
        zxid: i64,
        now: Now,
        done: &mut Option<Txn>,
    ) -> Result<MultiResponse, ErrorCode> {
        if ops.iter().any(MultiOp::is_read) {
            return Err(ErrorCode::MarshallingError);
        }
        let version = self.cfg.zookeeper_version;
        // 3.9 checks every create sub-op's flags before running any sub-op; 3.8 only when
        // execution reaches the malformed one (an earlier failure hides it).
        if version == crate::ZookeeperVersion::V3_9
            && ops.iter().any(|op| match op {
                MultiOp::Create(c) => multi_create(c, version).is_none(),
                _ => false,
            })
        {
            return Err(ErrorCode::MarshallingError);
        }
        let mut txn = Txn::new(zxid, now, true);
        let mut results = Vec::with_capacity(ops.len());
        let mut failed = None;
        for (i, op) in ops.iter().enumerate() {
            let r = match op {
                MultiOp::Create(c) => {
                    // 3.9 answers with a Stat for headers 15 and 19 whatever the flags, 3.8
                    // by the kind of node the flags made; both for containers and TTL nodes.
                    let v39 = version == crate::ZookeeperVersion::V3_9;
                    let header_stat = matches!(c.op, OpCode::Create2 | OpCode::CreateContainer);
                    let Some(c) = multi_create(c, version) else {
                        // A TTL flag under a header without a ttl (or, on 3.9, an unknown
                        // flag): the whole multi is malformed, found when execution reaches
                        // this sub-op.
                        self.rollback(txn);
                        return Err(ErrorCode::MarshallingError);
                    };
                    self.txn_create(&mut txn, sid, ids, &c, true)
                        .map(|created| {
                            let by_kind = if v39 {
                                header_stat
                            } else {
                                c.op != OpCode::Create
                            };
                            let stat = (created.extended || by_kind).then_some(created.stat);
                            MultiResult::Create {
                                path: created.path,
                                stat,
                            }
                        })
                }
                MultiOp::Delete(d) => self
                    .txn_delete(&mut txn, ids, &d.path, d.version)
                    .map(|()| MultiResult::Delete),
                MultiOp::SetData(s) => self
                    .txn_set_data(&mut txn, ids, &s.path, &s.data, s.version)
                    .map(MultiResult::SetData),
                MultiOp::Check(c) => self.txn_check(ids, &c.path, c.version).map(|()| {
                    let t = zkd_protocol::disk::CheckVersionTxn {
                        path: c.path.clone(),
                        version: c.version,
                    };
                    self.log_op(zkd_protocol::disk::txn_type::CHECK, &t);
                    MultiResult::Check
                }),
                MultiOp::GetData(_) | MultiOp::GetChildren(_) => Err(ErrorCode::MarshallingError),
            };
            match r {
                Ok(result) => results.push(result),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        match failed {
            None => {
                *done = Some(txn);
                Ok(MultiResponse(results))
            }
            Some((at, err)) => {
                self.rollback(txn);
                let code = |i: usize| match i.cmp(&at) {
                    std::cmp::Ordering::Less => 0,
                    std::cmp::Ordering::Equal => err.code(),
                    std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
                };
                self.log_failed_multi((0..ops.len()).map(code));
                let results = (0..ops.len())
                    .map(|i| MultiResult::Error(code(i)))
                    .collect();
                Ok(MultiResponse(results))
            }
        }
    }

    /// multiRead: independent reads, no watches, no zxid.
    fn multi_read(&self, ids: &[Id], ops: Vec<MultiOp>) -> Result<MultiResponse, ErrorCode> {
        if ops.iter().any(|op| !op.is_read()) {
            return Err(ErrorCode::MarshallingError);
        }
        let results = ops
            .iter()
            .map(|op| {
                let (MultiOp::GetData(r) | MultiOp::GetChildren(r)) = op else {
                    return MultiResult::Error(ErrorCode::MarshallingError.code());
                };
                match (self.readable(ids, &r.path), self.tree.get(&r.path)) {
                    (Ok(()), Some(node)) => match op {
                        MultiOp::GetData(_) => MultiResult::GetData {
                            data: node.data_bytes(),
                            stat: node.stat(),
                        },
                        _ => MultiResult::GetChildren(
                            self.tree
                                .children(&r.path)
                                .unwrap_or_default()
                                .into_iter()
                                .map(str::to_string)
                                .collect(),
                        ),
                    },
                    (Err(e), _) => MultiResult::Error(e.code()),
                    (Ok(()), None) => MultiResult::Error(ErrorCode::NoNode.code()),
                }
            })
            .collect();
        Ok(MultiResponse(results))
    }

    /// Re-registers watches after a reconnect, firing at once what changed
    /// (docs/protocol.md, "setWatches after a reconnect").
    fn set_watches(&mut self, conn: ConnId, w: SetWatches2, out: &mut dyn Outbox) {
        let rel = w.relative_zxid;
        let data = (event_type::NODE_DATA_CHANGED, WatchKind::Data);
        self.rewatch_existing(conn, &w.data_watches, rel, |n| n.mzxid, data, out);
        for p in &w.exist_watches {
            match self.tree.get(p) {
                None => self.watches.add(conn, p, WatchKind::Data),
                Some(_) => self.send(
                    out,
                    conn,
                    notification_frame(event_type::NODE_CREATED, p, -1),
                ),
            }
        }
        let child = (event_type::NODE_CHILDREN_CHANGED, WatchKind::Child);
        self.rewatch_existing(conn, &w.child_watches, rel, |n| n.pzxid, child, out);
        for p in &w.persistent_watches {
            self.watches.add(conn, p, WatchKind::Persistent);
        }
        for p in &w.persistent_recursive_watches {
            self.watches.add(conn, p, WatchKind::Recursive);
        }
    }

    /// Re-registers data or child watches: fires `NODE_DELETED` for a path that is gone and
    /// `changed.0` for one whose zxid (`zxid_of`) is past `rel`, else watches it as `changed.1`.
    fn rewatch_existing(
        &mut self,
        conn: ConnId,
        paths: &[String],
        rel: i64,
        zxid_of: fn(NodeRef) -> i64,
        changed: (i32, WatchKind),
        out: &mut dyn Outbox,
    ) {
        for p in paths {
            let event = match self.tree.get(p).map(zxid_of) {
                None => event_type::NODE_DELETED,
                Some(z) if z > rel => changed.0,
                Some(_) => {
                    self.watches.add(conn, p, changed.1);
                    continue;
                }
            };
            self.send(out, conn, notification_frame(event, p, -1));
        }
    }
}
