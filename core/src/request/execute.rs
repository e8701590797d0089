//! The last stage of a request, `Core::execute`: one decoded request run against the tree
//! (reads, writes through transactions, multi, auth and watch management), its reply written
//! straight into its frame.

use zkd_protocol::disk::{txn_type, ErrorTxn, TxnBody};
use zkd_protocol::{
    add_watch_mode, xid, AllChildrenNumberResponse, ChildrenResponse, ClientInfo, Create2Response,
    CreateMode, CreateResponse, ErrorCode, ErrorResponse, GetDataResponse, Id, Jute, MultiOp,
    MultiResponse, MultiResult, OpCode, Request, StatResponse, WhoAmIResponse,
};

use crate::request::reply::{header_only, Reply, STAT_LEN};
use crate::request::txn::{created_path, header, Pending};
use crate::watch::watches::WatchKind;
use crate::{auth::acl, ConnId, Core, Frame, Now, Outbox};

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

/// What a write multi's result for one sub-op needs besides the Stat applying it gives.
enum Shape {
    /// Whether the result carries the created node's Stat.
    Create(bool),
    Delete,
    SetData,
    Check,
}

/// Whether `req` creates an ephemeral node (alone or in a multi).
pub(crate) fn creates_ephemeral(req: &Request) -> bool {
    let ephemeral = |c: &zkd_protocol::Create| {
        CreateMode::from_flags(c.flags).is_some_and(|m| m.is_ephemeral())
    };
    match req {
        Request::Create(c) => ephemeral(c),
        Request::Multi(ops) => ops.iter().any(|op| match op {
            MultiOp::Create(c) => ephemeral(c),
            _ => false,
        }),
        _ => false,
    }
}

/// The answer to checkWatches and removeWatches from what the watch table said: `None`, a
/// watcher type it does not know; `Some(false)`, no such watcher.
fn watcher_found(found: Option<bool>) -> Result<(), ErrorCode> {
    match found {
        None => Err(ErrorCode::MarshallingError),
        Some(false) => Err(ErrorCode::NoWatcher),
        Some(true) => Ok(()),
    }
}

/// Who sent a request: its connection, that connection's session, and the request's xid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    pub(crate) conn: ConnId,
    pub(crate) sid: i64,
    pub(crate) xid: i32,
}

impl Core {
    /// Runs one decoded request. Returns (xid, zxid, reply frame), or `None` when the request
    /// already answered (or deliberately did not answer) by itself. Reads run on the copy of
    /// lagging member `view` when one is given, else (and writes always) on the main state.
    pub(crate) fn execute(
        &mut self,
        call: Call,
        req: Request,
        now: Now,
        view: Option<u64>,
        out: &mut dyn Outbox,
    ) -> Option<(i32, i64, Frame)> {
        let Call { conn, sid, xid } = call;
        let ids = self
            .conns
            .get(&conn)
            .map(|c| c.ids.clone())
            .unwrap_or_default();
        let mut reply = Reply::new();
        // Whether the write's transaction was committed (a write that fails its checks
        // commits an error transaction below).
        let mut committed = false;
        let op = req.op().info();
        let is_write = op.transaction;
        if is_write {
            self.next_zxid();
        }
        let multi_read_of_writes = matches!(&req, Request::MultiRead(ops)
            if !ops.is_empty() && ops.iter().all(|o| !o.is_read()));
        let zxid = match view {
            Some(m) if !is_write => self.member_zxid(m),
            _ => self.db.zxid,
        };
        if self.herd.watching_rereads() {
            if let Some(path) = req.paths().first().filter(|_| op.watch.is_watching_read()) {
                self.herd
                    .read(conn, crate::data::path::canonical(path), now.mono);
            }
        }
        let result: OpResult = match req {
            // The most common write first: decided, then committed (applied, logged, its
            // events fired).
            Request::SetData(s) => {
                let mut pending = Pending::default();
                let decided = self.decide_set_data(&mut pending, &ids, s.path, s.data, s.version);
                decided.map(|(t, body)| {
                    let h = header(sid, xid, zxid, now.wall, t);
                    let applied = self.commit(&h, &body, now, out);
                    committed = true;
                    let stat = applied.stats.first().unwrap_or_default();
                    StatResponse { stat }.write(reply.body_for(STAT_LEN))
                })
            }
            Request::Ping => {
                return Some((xid::PING, zxid, header_only(xid::PING, zxid, 0)));
            }
            Request::Auth(auth) => return self.auth(conn, xid, &auth.scheme, &auth.auth, out),
            Request::CloseSession => {
                let zxid = self.kill_session(sid, crate::SessionEnd::Closed, now, out);
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
                let plain = c.op == OpCode::Create;
                match self.decide_create(&mut Pending::default(), sid, &ids, c, false) {
                    Ok(((t, body), _)) => {
                        let applied =
                            self.commit(&header(sid, xid, zxid, now.wall, t), &body, now, out);
                        committed = true;
                        let path = created_path(body);
                        if plain {
                            CreateResponse { path }.write(reply.body());
                        } else {
                            let stat = applied.stats.first().unwrap_or_default();
                            Create2Response { path, stat }.write(reply.body());
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Request::Delete(d) => self
                .decide_delete(&mut Pending::default(), &ids, d.path, d.version)
                .map(|(t, body)| {
                    self.commit(&header(sid, xid, zxid, now.wall, t), &body, now, out);
                    committed = true;
                }),
            Request::SetAcl(s) => {
                self.decide_set_acl(&ids, &s.path, &s.acl, s.version)
                    .map(|(t, body)| {
                        let applied =
                            self.commit(&header(sid, xid, zxid, now.wall, t), &body, now, out);
                        committed = true;
                        let stat = applied.stats.first().unwrap_or_default();
                        StatResponse { stat }.write(reply.body_for(STAT_LEN))
                    })
            }
            Request::Multi(ops) => {
                committed = true;
                let resp = self.multi(sid, xid, &ids, ops, zxid, now, out);
                resp.map(|r| r.write(reply.body()))
            }
            Request::MultiRead(ops) => self
                .view_or_main(view)
                .multi_read(&ids, ops)
                .map(|r| r.write(reply.body())),
            Request::Reconfig(r) => {
                self.reconfig(sid, xid, &ids, &r, now, out)
                    .map(|(data, stat)| {
                        committed = true;
                        GetDataResponse {
                            data: Some(data),
                            stat,
                        }
                        .write(reply.body())
                    })
            }
            Request::DeleteContainer(_) => Err(ErrorCode::BadArguments),
            Request::Exists(r) => {
                let db = self.view_or_main(view);
                db.exists(conn, &ids, &r.path, r.watch, reply.body_for(STAT_LEN))
            }
            Request::GetData(r) => {
                let db = self.view_or_main(view);
                let res = db.get_data(&ids, &r.path, &mut reply);
                db.watch_if_read(res, conn, &r, WatchKind::Data)
            }
            Request::GetChildren(r) => {
                let db = self.view_or_main(view);
                let res = db.get_children(&ids, &r.path, false, &mut reply);
                db.watch_if_read(res, conn, &r, WatchKind::Child)
            }
            Request::GetChildren2(r) => {
                let db = self.view_or_main(view);
                let res = db.get_children(&ids, &r.path, true, &mut reply);
                db.watch_if_read(res, conn, &r, WatchKind::Child)
            }
            Request::GetAcl(r) => self.view_or_main(view).get_acl(&ids, &r.path, reply.body()),
            Request::Sync(s) => {
                s.write(reply.body());
                Ok(())
            }
            Request::CheckWatches(w) => {
                let version = self.cfg.zookeeper_version;
                let db = self.view_or_main(view);
                watcher_found(db.watches.check(conn, &w.path, w.watcher_type, version))
            }
            Request::RemoveWatches(w) => {
                let version = self.cfg.zookeeper_version;
                let db = self.view_or_main(view);
                watcher_found(db.watches.remove(conn, &w.path, w.watcher_type, version))
            }
            Request::SetWatches(w) => {
                let fired = self.view_or_main(view).set_watches(conn, w.into());
                for frame in fired {
                    self.send(out, conn, frame);
                }
                Ok(())
            }
            Request::SetWatches2(w) => {
                let fired = self.view_or_main(view).set_watches(conn, w);
                for frame in fired {
                    self.send(out, conn, frame);
                }
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
            Request::GetAllChildrenNumber(r) => {
                match self.view_or_main(view).readable(&ids, &r.path) {
                    Ok(()) => {
                        let total = self.view_or_main(view).tree.descendants(&r.path);
                        AllChildrenNumberResponse { total }.write(reply.body());
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Request::AddWatch(w) => {
                let kind = match w.mode {
                    add_watch_mode::PERSISTENT => Some(WatchKind::Persistent),
                    add_watch_mode::PERSISTENT_RECURSIVE => Some(WatchKind::Recursive),
                    _ => None,
                };
                match kind {
                    Some(kind) => {
                        self.view_or_main(view).watches.add(conn, &w.path, kind);
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
        if is_write && !committed {
            let body = TxnBody::Error(ErrorTxn { err });
            self.commit(
                &header(sid, xid, zxid, now.wall, txn_type::ERROR),
                &body,
                now,
                out,
            );
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

    /// A write multi: all or nothing, one zxid, events only on success. Every sub-op is
    /// checked against what the ones before it would change; only when all pass is the
    /// multi applied. A multi that fails is committed as error sub-transactions.
    #[allow(clippy::too_many_arguments)]
    fn multi(
        &mut self,
        sid: i64,
        xid: i32,
        ids: &[Id],
        ops: Vec<MultiOp>,
        zxid: i64,
        now: Now,
        out: &mut dyn Outbox,
    ) -> Result<MultiResponse, ErrorCode> {
        let fail = |core: &mut Core, err: ErrorCode, out: &mut dyn Outbox| {
            let body = TxnBody::Error(ErrorTxn { err: err.code() });
            core.commit(
                &header(sid, xid, zxid, now.wall, txn_type::ERROR),
                &body,
                now,
                out,
            );
            Err(err)
        };
        if ops.iter().any(MultiOp::is_read) {
            return fail(self, ErrorCode::MarshallingError, out);
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
            return fail(self, ErrorCode::MarshallingError, out);
        }
        let mut pending = Pending::multi();
        let count = ops.len();
        let mut subs = Vec::with_capacity(count);
        // Per sub-op: what its result needs besides the Stat applying it gives.
        let mut shapes = Vec::with_capacity(count);
        let mut failed = None;
        for (i, op) in ops.into_iter().enumerate() {
            let r = match op {
                MultiOp::Create(c) => {
                    // 3.9 answers with a Stat for headers 15 and 19 whatever the flags, 3.8
                    // by the kind of node the flags made; both for containers and TTL nodes.
                    let v39 = version == crate::ZookeeperVersion::V3_9;
                    let header_stat = matches!(c.op, OpCode::Create2 | OpCode::CreateContainer);
                    let Some(c) = multi_create(&c, version) else {
                        // A TTL flag under a header without a ttl (or, on 3.9, an unknown
                        // flag): the whole multi is malformed, found when execution reaches
                        // this sub-op.
                        return fail(self, ErrorCode::MarshallingError, out);
                    };
                    let by_kind = if v39 {
                        header_stat
                    } else {
                        c.op != OpCode::Create
                    };
                    self.decide_create(&mut pending, sid, ids, c, true)
                        .map(|(decided, created)| {
                            (decided, Shape::Create(created.extended || by_kind))
                        })
                }
                MultiOp::Delete(d) => self
                    .decide_delete(&mut pending, ids, d.path, d.version)
                    .map(|decided| (decided, Shape::Delete)),
                MultiOp::SetData(s) => self
                    .decide_set_data(&mut pending, ids, s.path, s.data, s.version)
                    .map(|decided| (decided, Shape::SetData)),
                MultiOp::Check(c) => self
                    .decide_check(&pending, ids, &c.path, c.version)
                    .map(|decided| (decided, Shape::Check)),
                MultiOp::GetData(_) | MultiOp::GetChildren(_) => Err(ErrorCode::MarshallingError),
            };
            match r {
                Ok((decided, shape)) => {
                    subs.push(decided);
                    shapes.push(shape);
                }
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let h = header(sid, xid, zxid, now.wall, txn_type::MULTI);
        match failed {
            None => {
                let body = TxnBody::Multi(subs);
                let applied = self.commit(&h, &body, now, out);
                let subs = match body {
                    TxnBody::Multi(subs) => subs,
                    _ => Vec::new(),
                };
                let mut stats = applied.stats.into_iter();
                let results = shapes
                    .into_iter()
                    .zip(subs)
                    .map(|(shape, (_, sub))| match shape {
                        Shape::Create(with_stat) => {
                            let stat = stats.next();
                            MultiResult::Create {
                                path: created_path(sub),
                                stat: stat.filter(|_| with_stat),
                            }
                        }
                        Shape::SetData => MultiResult::SetData(stats.next().unwrap_or_default()),
                        Shape::Delete => MultiResult::Delete,
                        Shape::Check => MultiResult::Check,
                    })
                    .collect();
                Ok(MultiResponse(results))
            }
            Some((at, err)) => {
                let code = |i: usize| match i.cmp(&at) {
                    std::cmp::Ordering::Less => 0,
                    std::cmp::Ordering::Equal => err.code(),
                    std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
                };
                let errors = (0..count)
                    .map(|i| (txn_type::ERROR, TxnBody::Error(ErrorTxn { err: code(i) })))
                    .collect();
                self.commit(&h, &TxnBody::Multi(errors), now, out);
                let results = (0..count).map(|i| MultiResult::Error(code(i))).collect();
                Ok(MultiResponse(results))
            }
        }
    }
}
