//! Control operations of the test control plane, applied in the core's one request order:
//! session reports, forced expiry and disconnects, fault rules, and reset.

use crate::testing::fault::{FaultRule, FaultStatus};
use zkd_protocol::disk::{txn_type, DeleteTxn, TxnBody};

use crate::db::Applied;
use crate::request::txn::header;
use crate::{ConnId, Core, Now, Outbox};

/// Why a control operation on a session did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionOpError {
    /// No live session has this id.
    NoSuchSession,
    /// The session exists but has no connection to close.
    NotConnected,
}

/// Nodes one slice of [`Core::reset`] deletes.
pub const RESET_SLICE: usize = 256;

impl Core {
    /// Expires session `sid` now, exactly as a timeout would: its ephemerals are deleted (and
    /// their watches fire), then its connection is closed; a client that comes back with
    /// the id is told the session expired.
    pub fn expire_session(
        &mut self,
        sid: i64,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) -> Result<(), SessionOpError> {
        let Some(conn) = self.sessions.get(sid).map(|s| s.conn) else {
            return Err(SessionOpError::NoSuchSession);
        };
        tracing::debug!(
            session = format_args!("0x{sid:x}"),
            "session expired by control"
        );
        self.kill_session(sid, crate::SessionEnd::Control, now.into(), out);
        if let Some(conn) = conn {
            self.finish_connection(conn, out);
        }
        Ok(())
    }

    /// Expires every session (in id order); returns how many. Takes as long as expiring
    /// them all; the server expires them a slice at a time ([`Core::expire_sessions`]).
    pub fn expire_all_sessions(&mut self, now: impl Into<Now>, out: &mut dyn Outbox) -> usize {
        let mut ids: Vec<i64> = self.sessions.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        self.expire_sessions(&ids, now, out)
    }

    /// Expires the sessions of `ids` still live, in the order given (a slice of an
    /// "expire every session"); returns how many.
    pub fn expire_sessions(
        &mut self,
        ids: &[i64],
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) -> usize {
        let now = now.into();
        ids.iter()
            .filter(|&&sid| self.expire_session(sid, now, out).is_ok())
            .count()
    }

    /// Closes the connection of session `sid` (after what is queued on it is written); the
    /// session lives on and its client may reconnect within its timeout.
    pub fn disconnect_session(
        &mut self,
        sid: i64,
        out: &mut dyn Outbox,
    ) -> Result<(), SessionOpError> {
        let Some(s) = self.sessions.get(sid) else {
            return Err(SessionOpError::NoSuchSession);
        };
        let conn = s
            .conn
            .filter(|c| self.conns.get(c).is_some_and(|c| !c.closing));
        let Some(conn) = conn else {
            return Err(SessionOpError::NotConnected);
        };
        tracing::debug!(
            session = format_args!("0x{sid:x}"),
            conn,
            "disconnected by control"
        );
        self.finish_connection(conn, out);
        Ok(())
    }

    /// Closes every client connection; sessions live on. Returns how many were closed.
    /// The server closes them a slice at a time ([`Core::disconnect_connections`]).
    pub fn disconnect_all(&mut self, out: &mut dyn Outbox) -> usize {
        let mut conns = self.connection_ids();
        conns.sort_unstable();
        self.disconnect_connections(&conns, out)
    }

    /// Closes the connections of `conns` still open, in the order given (sessions live
    /// on); returns how many were closed.
    pub fn disconnect_connections(&mut self, conns: &[ConnId], out: &mut dyn Outbox) -> usize {
        let mut closed = 0;
        for &c in conns {
            if self.conns.get(&c).is_some_and(|c| !c.closing) {
                self.finish_connection(c, out);
                closed += 1;
            }
        }
        closed
    }

    /// Nodes a reset would delete: every one but `/` and the `/zookeeper` subtree (read
    /// from the tree's counts, without a walk).
    pub fn reset_pending(&self) -> usize {
        let all = self.db.tree.descendants("/");
        let kept = self.db.tree.descendants("/zookeeper") + 1;
        usize::try_from(all - kept).unwrap_or(0)
    }

    /// Deletes every node except `/` and the `/zookeeper` subtree, a slice of
    /// [`RESET_SLICE`] nodes at a time (see [`Core::reset_slice`]); watches fire as for any
    /// delete. With `expire_sessions`, every session is expired first. Returns how many
    /// nodes were deleted. The server does the same with its lock released between slices.
    pub fn reset(
        &mut self,
        expire_sessions: bool,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) -> usize {
        let now = now.into();
        if expire_sessions {
            self.expire_all_sessions(now, out);
        }
        let mut deleted = 0;
        loop {
            match self.reset_slice(RESET_SLICE, now, out) {
                0 => return deleted,
                n => deleted += n,
            }
        }
    }

    /// One slice of a reset: deletes up to `max_nodes` nodes outside `/zookeeper`, deepest
    /// first (every node after its children), as one transaction of its own (one zxid,
    /// logged as a multi of deletes by no session); watches fire as for any delete. Returns
    /// how many were deleted: 0 when nothing is left. The work is the length of the deleted
    /// paths, whatever the size of the tree.
    pub fn reset_slice(
        &mut self,
        max_nodes: usize,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) -> usize {
        let now = now.into();
        if self.db.tree.leaf_outside("zookeeper").is_none() {
            return 0;
        }
        let zxid = self.next_zxid();
        let h = header(0, 0, zxid, now.wall, txn_type::MULTI);
        // Each leaf is found once the one before it is gone, so the deletes are applied one
        // by one as sub-transactions of the slice's multi, which is published whole.
        let mut subs = Vec::new();
        let mut applied = Applied::default();
        while subs.len() < max_nodes.max(1) {
            let Some(p) = self.db.tree.leaf_outside("zookeeper") else {
                break;
            };
            let before = self.db.tree.len();
            let body = TxnBody::Delete(DeleteTxn { path: p });
            let one = self.apply_main(&h, &body, now.mono);
            applied.events.extend(one.events);
            subs.push((txn_type::DELETE, body));
            if self.db.tree.len() == before {
                // Never expected; stops a slice that would find the same leaf forever.
                break;
            }
        }
        let deleted = subs.len();
        self.publish(&h, &TxnBody::Multi(subs), now.mono, &applied, out);
        deleted
    }

    /// Makes sessions expire exactly `timeout` after they were last heard from (+1 ms)
    /// instead of on the next tick boundary. Used with the manual clock, where there is no
    /// real time to save by batching expiries. Only effective before the first session.
    pub fn use_exact_session_expiry(&mut self) {
        self.sessions.set_granularity(1);
    }

    /// Adds a fault rule; its id, or why not (too many rules).
    pub fn add_fault(&mut self, rule: FaultRule) -> Result<u64, String> {
        self.faults.add(rule)
    }

    /// Every fault rule with its firing counts.
    pub fn faults(&self) -> Vec<FaultStatus> {
        self.faults.list()
    }

    /// Removes every fault rule; returns how many there were.
    pub fn clear_faults(&mut self) -> usize {
        self.faults.clear()
    }

    /// Removes one fault rule; false if there is none with that id.
    pub fn remove_fault(&mut self, id: u64) -> bool {
        self.faults.remove(id)
    }

    /// Removes the fault rules `pred` selects.
    pub fn remove_faults_where(&mut self, pred: impl Fn(&FaultStatus) -> bool) {
        self.faults.remove_where(pred)
    }
}
