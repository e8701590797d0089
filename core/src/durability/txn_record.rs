//! Committing a transaction: the record the core decided (in ZooKeeper's log format,
//! `TxnHeader` and body) is applied to the state, handed over for the layer around the core
//! to store ([`Core::take_records`]; one that cannot stops the core, [`Core::stop`]), kept
//! for lagging members, and announced to watchers, which may hear of it only once it is
//! stored.

use bytes::{Bytes, BytesMut};
use zkd_protocol::disk::{txn_type, CreateSessionTxn, TxnBody, TxnHeader};
use zkd_protocol::Jute;

use crate::db::Applied;
use crate::{Core, Now, Outbox};

impl Core {
    /// Turns handing over transaction records on (persistence) or off. While on, every
    /// committed transaction's record waits for [`Core::take_records`], and whatever the
    /// core gives an outbox meanwhile is declared [`Release::AfterRecords`](crate::Release).
    pub fn set_logging(&mut self, on: bool) {
        self.logging = on;
        if !on {
            self.ready.clear();
        }
    }

    /// Whether transactions are being recorded.
    pub(crate) fn logging(&self) -> bool {
        self.logging
    }

    /// The records of the transactions committed since the last call, in zxid order: the
    /// `TxnHeader` followed by the body, as a transaction log stores them. The caller stores
    /// them (or, when it cannot, calls [`Core::stop`]) and then lets go of what was declared
    /// [`Release::AfterRecords`](crate::Release). Raft implementations call this the ready
    /// state: messages that may leave now, entries to persist, and messages that may leave
    /// only after them.
    pub fn take_records(&mut self) -> Vec<(i64, Bytes)> {
        std::mem::take(&mut self.ready)
    }

    /// A record could not be stored: the core stops serving (see [`Core::stopped`]); `reason`
    /// names the file and what failed.
    pub fn stop(&mut self, reason: String) {
        if self.stopped.is_none() {
            self.stopped = Some(reason);
        }
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

    /// Tells the rest of the world of a transaction applied: its record is handed over for
    /// storing and kept in the lagging members' history, and its watch events fire, declared
    /// to leave only once the record is stored (a change the log could not take is never
    /// announced).
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

    /// Hands a transaction's record over for storing and to the lagging members' history.
    pub(crate) fn record(&mut self, h: &TxnHeader, body: &TxnBody, mono: i64) {
        if self.stopped.is_some() {
            return;
        }
        if self.logging() || self.lagging() {
            let record = encode(h, body);
            if self.logging() {
                self.ready.push((h.zxid, record.clone()));
            }
            self.record_history(h.zxid, mono, Some(record));
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
