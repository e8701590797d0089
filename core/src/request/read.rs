//! The reads of a request, run against one copy of the state ([`Db`]): the server's, or a
//! lagging member's for its clients. Reads that leave a watch set it on that copy.

use bytes::{BufMut, Bytes, BytesMut};
use zkd_protocol::{
    event_type, perms, ErrorCode, GetAclResponse, Id, Jute, MultiOp, MultiResponse, MultiResult,
    PathWatchRequest, SetWatches2, StatResponse,
};

use crate::data::tree::NodeRef;
use crate::db::Db;
use crate::request::reply::{Reply, SHARE_MIN, STAT_LEN};
use crate::watch::watches::WatchKind;
use crate::{auth::acl, notification_frame, ConnId};

type OpResult = Result<(), ErrorCode>;

impl Db {
    /// Node exists and the caller may read it.
    pub(crate) fn readable(&self, ids: &[Id], p: &str) -> Result<(), ErrorCode> {
        self.readable_node(ids, p).map(|_| ())
    }

    /// The node at `p` if `ids` may read it.
    pub(crate) fn readable_node(&self, ids: &[Id], p: &str) -> Result<NodeRef<'_>, ErrorCode> {
        let node = self.tree.get(p).ok_or(ErrorCode::NoNode)?;
        if acl::allowed(node.acl, perms::READ, ids) {
            Ok(node)
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    pub(crate) fn exists(
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
    pub(crate) fn watch_if_read(
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

    pub(crate) fn get_data(&self, ids: &[Id], p: &str, reply: &mut Reply) -> OpResult {
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

    pub(crate) fn get_children(
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

    pub(crate) fn get_acl(&self, ids: &[Id], p: &str, body: &mut BytesMut) -> OpResult {
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

    /// multiRead: independent reads, no watches, no zxid.
    pub(crate) fn multi_read(
        &self,
        ids: &[Id],
        ops: Vec<MultiOp>,
    ) -> Result<MultiResponse, ErrorCode> {
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
    /// Gives the notifications to send at once, in order.
    pub(crate) fn set_watches(&mut self, conn: ConnId, w: SetWatches2) -> Vec<Bytes> {
        let mut out = Vec::new();
        let rel = w.relative_zxid;
        let data = (event_type::NODE_DATA_CHANGED, WatchKind::Data);
        self.rewatch_existing(conn, &w.data_watches, rel, |n| n.mzxid, data, &mut out);
        for p in &w.exist_watches {
            match self.tree.get(p) {
                None => self.watches.add(conn, p, WatchKind::Data),
                Some(_) => out.push(notification_frame(event_type::NODE_CREATED, p, -1)),
            }
        }
        let child = (event_type::NODE_CHILDREN_CHANGED, WatchKind::Child);
        self.rewatch_existing(conn, &w.child_watches, rel, |n| n.pzxid, child, &mut out);
        for p in &w.persistent_watches {
            self.watches.add(conn, p, WatchKind::Persistent);
        }
        for p in &w.persistent_recursive_watches {
            self.watches.add(conn, p, WatchKind::Recursive);
        }
        out
    }

    /// Re-registers data or child watches: fires `NODE_DELETED` for a path that is gone and
    /// `changed.0` for one whose zxid (`zxid_of`) is past `rel`, else watches it as `changed.1`.
    pub(crate) fn rewatch_existing(
        &mut self,
        conn: ConnId,
        paths: &[String],
        rel: i64,
        zxid_of: fn(NodeRef) -> i64,
        changed: (i32, WatchKind),
        out: &mut Vec<Bytes>,
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
            out.push(notification_frame(event, p, -1));
        }
    }
}
