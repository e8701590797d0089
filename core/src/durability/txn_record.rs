//! Committing a transaction: the record the core decided (in ZooKeeper's log format,
//! `TxnHeader` and body) is applied to the state, handed to the [`TxnSink`] the layer around
//! the core provides (a sink that cannot keep a record stops the core: [`StopServing`]),
//! kept for lagging members, and announced to watchers.

use bytes::{Bytes, BytesMut};
use zkd_protocol::disk::{txn_type, CreateSessionTxn, TxnBody, TxnHeader};
use zkd_protocol::Jute;

use crate::db::Applied;
use crate::{Core, Now, Outbox};

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
    }

    /// Whether transactions are being recorded.
    pub(crate) fn logging(&self) -> bool {
        self.txn_sink.is_some()
    }

    /// The one way a transaction takes effect: [`Core::apply_main`], then
    /// [`Core::publish`]. Returns what applying it did (the Stats a reply carries).
    pub(crate) fn commit(
        &mut self,
        h: &TxnHeader,
        body: &TxnBody,
        now: Now,
        out: &mut dyn Outbox,
    ) -> Applied {
        let applied = self.apply_main(h, body, now.mono);
        self.publish(h, body, now.mono, &applied, out);
        applied
    }

    /// Applies a transaction to the server's state ([`Db::apply`](crate::db::Db::apply))
    /// and keeps each session's set of ephemeral nodes in step with it.
    pub(crate) fn apply_main(&mut self, h: &TxnHeader, body: &TxnBody, mono: i64) -> Applied {
        let applied = self.db.apply(h, body, mono);
        for (p, sid) in &applied.created {
            if let Some(s) = self.sessions.get_mut(*sid) {
                s.ephemerals.insert(p.as_str().into());
            }
        }
        for (p, sid) in &applied.deleted {
            if let Some(s) = self.sessions.get_mut(*sid) {
                s.ephemerals.remove(p.as_str());
            }
        }
        applied
    }

    /// Tells the rest of the world of a transaction applied: the sink takes its record, the
    /// lagging members' history keeps it for their copies, and then (only once it is logged:
    /// a change the log could not take is never announced) its watch events fire.
    pub(crate) fn publish(
        &mut self,
        h: &TxnHeader,
        body: &TxnBody,
        mono: i64,
        applied: &Applied,
        out: &mut dyn Outbox,
    ) {
        self.record(h, body, mono);
        for (event, p, acl) in &applied.events {
            self.fire(out, *event, p, h.zxid, acl);
        }
    }

    /// Commits the creation of global session `sid` with `timeout_ms` under `zxid`.
    pub(crate) fn commit_session_created(
        &mut self,
        sid: i64,
        timeout_ms: i64,
        zxid: i64,
        now: Now,
        out: &mut dyn Outbox,
    ) {
        let timeout = timeout_ms.clamp(0, i64::from(i32::MAX)) as i32;
        let h = TxnHeader {
            client_id: sid,
            cxid: 0,
            zxid,
            time: now.wall,
            txn_type: txn_type::CREATE_SESSION,
        };
        let body = TxnBody::CreateSession(CreateSessionTxn { timeout });
        self.commit(&h, &body, now, out);
    }

    /// Hands a transaction's record to the sink and to the lagging members' history.
    pub(crate) fn record(&mut self, h: &TxnHeader, body: &TxnBody, mono: i64) {
        if self.logging() || self.lagging() {
            let record = encode(h, body);
            if self.logging() {
                self.emit(h.zxid, record.clone());
            }
            self.record_history(h.zxid, mono, Some(record));
        }
    }

    fn emit(&mut self, zxid: i64, record: Bytes) {
        if self.stopped.is_some() {
            return;
        }
        if let Some(sink) = self.txn_sink.as_mut() {
            if let Err(StopServing(reason)) = sink.append(zxid, record) {
                self.stopped = Some(reason);
            }
        }
    }
}

/// A transaction record as a log stores it: the header, then the body.
pub(crate) fn encode(h: &TxnHeader, body: &TxnBody) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    h.write(&mut buf);
    body.write(&mut buf);
    buf.freeze()
}
