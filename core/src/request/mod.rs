//! Request handling, one name per stage: [`Core::request`] (here: the connection's turn and
//! the lagging member, chosen once) → `Core::decode` (`core/src/decode.rs`: header, opcode,
//! body and the checks before running it) → `Core::route` (ensemble/lag.rs: a lagging
//! member's copy of the state or the main one) → `Core::execute` (execute.rs: the request
//! run). Reads run on one `Db` (`read.rs`); writes are decided in `txn.rs` as transaction
//! records and committed through `Db::apply`; replies are built in `reply.rs` as a
//! [`Frame`](crate::Frame) in parts (`core/src/frame_parts.rs`).

use bytes::Bytes;

use crate::{ConnId, Core, Now, Outbox};

pub(crate) mod execute;
pub(crate) mod read;
pub(crate) mod reply;
pub(crate) mod txn;

#[cfg(test)]
mod conformance_tests;

impl Core {
    /// Every frame after the handshake: the first stage of a request. A connection waiting
    /// for its lagging member to apply an earlier write or sync keeps later requests until
    /// then (per-session FIFO); a write or sync through a member that cannot reach a leader
    /// with a quorum is held unexecuted; otherwise the request is decoded, routed and executed now,
    /// with its member's lag (if it lags) looked up here, once.
    pub fn request(
        &mut self,
        conn: ConnId,
        payload: Bytes,
        now: impl Into<Now>,
        out: &mut dyn Outbox,
    ) {
        if self.stopped.is_some() {
            return;
        }
        let now = now.into();
        if self.lag.idle() {
            self.decode(conn, payload, now, None, out);
            return;
        }
        self.advance_members(now, out);
        let Some(payload) = self.wait_turn(conn, payload, now, out) else {
            return;
        };
        let Some(payload) = self.hold_if_unreachable(conn, payload) else {
            return;
        };
        let lagging = self.lagging_member(conn);
        self.decode(conn, payload, now, lagging, out);
        self.advance_members(now, out);
    }
}
