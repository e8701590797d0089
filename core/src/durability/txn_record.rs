//! The transaction record the core emits for every zxid it uses, in ZooKeeper's log format
//! (`TxnHeader` and body), handed to the [`TxnSink`] the layer around the core provides; a
//! sink that cannot keep a record stops the core ([`StopServing`]).

use bytes::{Bytes, BytesMut};
use zkd_protocol::disk::{
    txn_type, CloseSessionTxn, CreateContainerTxn, CreateSessionTxn, CreateTtlTxn, CreateTxn,
    DeleteTxn, ErrorTxn, MultiTxn, NewNode, SetAclTxn, SetDataTxn, SubTxn, TxnHeader,
};
use zkd_protocol::Jute;

use crate::data::path;
use crate::data::tree::NodeKind;
use crate::Core;

/// Receives every transaction the core commits, in zxid order, before the reply to it is
/// queued: the encoded `TxnHeader` followed by the body, as a transaction log stores it.
pub trait TxnSink: Send {
    /// Takes one transaction. An error means it could not be made durable: the core stops
    /// serving (see [`Core::stopped`]) and queues nothing more, not even the reply to the
    /// write that was being logged.
    fn append(&mut self, zxid: i64, txn: Bytes) -> Result<(), StopServing>;

    /// A leader starts epoch `epoch` ([`Core::new_epoch`]); the state is the one the
    /// previous epoch ended with. A data directory snapshots it then, as ZooKeeper's leader
    /// does when it takes over. Nothing by default.
    fn epoch_started(&mut self, epoch: i64) {
        let _ = epoch;
    }
}

/// Why the core stopped serving: the sentence a [`TxnSink`] gave when it could not keep a
/// transaction (it names the file and what failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopServing(pub String);

impl std::fmt::Display for StopServing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StopServing {}

impl Core {
    /// Installs (or removes) the receiver of committed transactions.
    pub fn set_txn_sink(&mut self, sink: Option<Box<dyn TxnSink>>) {
        self.txn_sink = sink;
        self.log_ops.clear();
    }

    /// Whether transactions are being recorded.
    pub(crate) fn logging(&self) -> bool {
        self.txn_sink.is_some()
    }

    /// Records one sub-operation of the write being executed.
    pub(crate) fn log_op<T: Jute>(&mut self, kind: i32, body: &T) {
        if self.logging() {
            self.log_ops.push((kind, zkd_protocol::to_bytes(body)));
        }
    }

    /// Records the node just created at `p` (create of any kind, also inside multi).
    pub(crate) fn log_created(&mut self, p: &str, create2: bool) {
        if !self.logging() {
            return;
        }
        let Some(node) = self.tree.get(p) else { return };
        let kind = node.kind();
        let parent = path::canonical(path::parent(p).unwrap_or(""));
        let parent_cversion = self.tree.get(parent).map_or(0, |n| n.child_creates);
        let node = NewNode {
            path: p.to_string(),
            data: node.data_bytes(),
            acl: node.acl.to_vec(),
        };
        match kind {
            NodeKind::Container => self.log_op(
                txn_type::CREATE_CONTAINER,
                &CreateContainerTxn {
                    node,
                    parent_cversion,
                },
            ),
            NodeKind::Ttl(ttl) => self.log_op(
                txn_type::CREATE_TTL,
                &CreateTtlTxn {
                    node,
                    parent_cversion,
                    ttl,
                },
            ),
            kind => {
                let t = if create2 {
                    txn_type::CREATE2
                } else {
                    txn_type::CREATE
                };
                self.log_op(
                    t,
                    &CreateTxn {
                        node,
                        ephemeral: matches!(kind, NodeKind::Ephemeral(_)),
                        parent_cversion,
                    },
                )
            }
        }
    }

    /// Records a successful delete of `p`.
    pub(crate) fn log_deleted(&mut self, p: &str) {
        self.log_op(txn_type::DELETE, &DeleteTxn { path: p.into() });
    }

    /// Records the data or ACL change just made to `p`.
    pub(crate) fn log_changed(&mut self, p: &str, acl_change: bool) {
        if !self.logging() {
            return;
        }
        let Some(n) = self.tree.get(p) else { return };
        if acl_change {
            let t = SetAclTxn {
                path: p.into(),
                acl: n.acl.to_vec(),
                version: n.aversion,
            };
            self.log_op(txn_type::SET_ACL, &t);
        } else {
            let t = SetDataTxn {
                path: p.into(),
                data: n.data_bytes(),
                version: n.version,
            };
            self.log_op(txn_type::SET_DATA, &t);
        }
    }

    /// A multi failed: it is recorded as error sub-transactions with these codes.
    pub(crate) fn log_failed_multi(&mut self, codes: impl Iterator<Item = i32>) {
        if !self.logging() {
            return;
        }
        self.log_ops.clear();
        for err in codes {
            self.log_op(txn_type::ERROR, &ErrorTxn { err });
        }
    }

    /// Emits the transaction of a client write that used `zxid`: its recorded operation, a
    /// multi of its sub-operations, or an error transaction when it failed.
    pub(crate) fn log_write(
        &mut self,
        client_id: i64,
        cxid: i32,
        zxid: i64,
        time: i64,
        multi: bool,
        err: Option<i32>,
    ) {
        if !self.logging() {
            return;
        }
        let ops = std::mem::take(&mut self.log_ops);
        let (kind, body) = match err {
            Some(err) => (txn_type::ERROR, zkd_protocol::to_bytes(&ErrorTxn { err })),
            None if multi => {
                let txns = ops
                    .into_iter()
                    .map(|(txn_type, data)| SubTxn { txn_type, data })
                    .collect();
                (txn_type::MULTI, zkd_protocol::to_bytes(&MultiTxn { txns }))
            }
            None => match ops.into_iter().next() {
                Some(op) => op,
                None => (
                    txn_type::ERROR,
                    zkd_protocol::to_bytes(&ErrorTxn { err: 0 }),
                ),
            },
        };
        let header = TxnHeader {
            client_id,
            cxid,
            zxid,
            time,
            txn_type: kind,
        };
        self.emit(&header, &body);
    }

    /// Emits a session creation.
    pub(crate) fn log_session_created(&mut self, sid: i64, timeout_ms: i64, zxid: i64, now: i64) {
        if !self.logging() {
            return;
        }
        let header = session_header(sid, zxid, now, txn_type::CREATE_SESSION);
        let timeout = timeout_ms.clamp(0, i64::from(i32::MAX)) as i32;
        self.emit(
            &header,
            &zkd_protocol::to_bytes(&CreateSessionTxn { timeout }),
        );
    }

    /// Emits a session close (explicit or expiry) with the ephemerals it removed.
    pub(crate) fn log_session_closed(&mut self, sid: i64, zxid: i64, now: i64, paths: Vec<String>) {
        if !self.logging() {
            return;
        }
        let header = session_header(sid, zxid, now, txn_type::CLOSE_SESSION);
        self.emit(&header, &zkd_protocol::to_bytes(&CloseSessionTxn { paths }));
    }

    /// Emits the reaper's removal of an empty container or expired TTL node.
    pub(crate) fn log_reaped(&mut self, p: &str, zxid: i64, now: i64) {
        if !self.logging() {
            return;
        }
        let header = TxnHeader {
            client_id: 0,
            cxid: 0,
            zxid,
            time: now,
            txn_type: txn_type::DELETE_CONTAINER,
        };
        self.emit(
            &header,
            &zkd_protocol::to_bytes(&DeleteTxn { path: p.into() }),
        );
    }

    fn emit(&mut self, header: &TxnHeader, body: &[u8]) {
        if self.stopped.is_some() {
            return;
        }
        let mut buf = BytesMut::with_capacity(28 + body.len());
        header.write(&mut buf);
        buf.extend_from_slice(body);
        if let Some(sink) = self.txn_sink.as_mut() {
            if let Err(StopServing(reason)) = sink.append(header.zxid, buf.freeze()) {
                self.stopped = Some(reason);
            }
        }
    }
}

/// The header of a session's own transaction (creation or close): no client xid.
fn session_header(sid: i64, zxid: i64, now: i64, txn_type: i32) -> TxnHeader {
    TxnHeader {
        client_id: sid,
        cxid: 0,
        zxid,
        time: now,
        txn_type,
    }
}
