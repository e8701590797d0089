//! Quorum and epochs of the simulated ensemble, as the core sees them: sessions expire and
//! containers and TTL nodes are reaped only while a quorum (and so a leader) is up, every new
//! leader gives each session a fresh timeout and starts a new epoch of zxids
//! (docs/protocol.md, "Ensemble members and read-only mode").

use crate::{Core, Now, Outbox};

impl Core {
    /// Whether the ensemble has a quorum (always, on a standalone server).
    pub fn has_quorum(&self) -> bool {
        self.quorum
    }

    /// The ensemble gained or lost its quorum at `now`. Without one, no global session
    /// expires and nothing is reaped (ZooKeeper expires sessions and reaps only through a
    /// leader); sessions local to a read-only member keep expiring. When the quorum comes
    /// back, every global session's deadline restarts at `now` plus its timeout.
    pub fn set_quorum(&mut self, quorum: bool, now: impl Into<Now>) {
        if self.stopped.is_some() || self.quorum == quorum {
            return;
        }
        self.quorum = quorum;
        if quorum {
            self.restart_session_deadlines(now.into());
        }
    }

    /// A newly elected leader took over at `now`: zxids continue in the next epoch
    /// (`epoch << 32 | counter`, the counter starting again from 0, so the first transaction
    /// of the epoch is `epoch << 32 | 1`), and every global session's deadline restarts at
    /// `now` plus its timeout, as the new leader's session tracker does. The transaction sink
    /// Returns the epoch (a layer that persists takes a snapshot of the state it starts from).
    pub fn new_epoch(&mut self, now: impl Into<Now>) -> i64 {
        if self.stopped.is_some() {
            return self.epoch();
        }
        let now = now.into();
        let epoch = self.epoch() + 1;
        // The epoch's zxid 0 is the leader's own NEWLEADER proposal: lagging members record
        // it like any other, so their replicas reach the new epoch too.
        self.db.zxid = (epoch << 32) - 1;
        let zxid = self.next_zxid();
        self.record_history(zxid, now.mono, None);
        if self.quorum {
            self.restart_session_deadlines(now);
        }
        epoch
    }

    /// Local sessions as ZooKeeper's `localSessionsEnabled` makes them: a session a
    /// read-write member starts is known to that member only, until its first ephemeral
    /// makes it global (with `upgrading`, ZooKeeper's `localSessionsUpgradingEnabled`;
    /// without, that create fails with EPHEMERALONLOCALSESSION). A read-only member's
    /// sessions are local either way.
    pub fn set_local_sessions(&mut self, enabled: bool, upgrading: bool) {
        self.local_mode = (enabled, upgrading);
    }

    /// Makes local session `sid` global, committing its creation; false when upgrading is
    /// off.
    pub(crate) fn upgrade_local_session(
        &mut self,
        sid: i64,
        now: Now,
        out: &mut dyn Outbox,
    ) -> bool {
        if !self.local_mode.1 {
            return false;
        }
        self.local_sessions.remove(&sid);
        let timeout = self.sessions.get(sid).map_or(0, |s| s.timeout_ms);
        let zxid = self.next_zxid();
        self.commit_session_created(sid, timeout, zxid, now, out);
        true
    }

    /// Member `member` stopped or changed how it serves: the local sessions it held end with
    /// it (no transaction: they own no ephemeral), as a restarted ZooKeeper server forgets
    /// its local sessions. Their clients, moving elsewhere, are told they expired.
    pub fn end_local_sessions(&mut self, member: u64, out: &mut dyn Outbox) {
        let ended: Vec<i64> = self
            .local_sessions
            .iter()
            .filter(|(_, owner)| **owner == member)
            .map(|(sid, _)| *sid)
            .collect();
        for sid in ended {
            self.local_sessions.remove(&sid);
            let conn = self.sessions.get(sid).and_then(|s| s.conn);
            self.sessions.remove(sid);
            out.fact(crate::Fact::SessionEnded {
                session: sid,
                conn,
                why: crate::SessionEnd::MemberStopped,
                zxid: None,
                ephemerals: &[],
            });
            if let Some(conn) = conn {
                self.finish_connection(conn, out);
            }
        }
    }

    /// The epoch of the last zxid (its high 32 bits; 0 on a standalone server).
    pub fn epoch(&self) -> i64 {
        self.db.zxid >> 32
    }

    fn restart_session_deadlines(&mut self, now: Now) {
        let global: Vec<i64> = self
            .sessions
            .iter()
            .map(|s| s.id)
            .filter(|id| !self.local_sessions.contains_key(id))
            .collect();
        for id in global {
            self.sessions.restart_deadline(id, now.mono);
        }
        self.next_reap = now.mono + self.cfg.reaper_interval_ms.max(1);
    }

    /// The sessions whose deadline has passed at `mono` and that may expire now: all of
    /// them with a quorum, only local sessions without.
    pub(crate) fn expiring_sessions(&self, mono: i64) -> Vec<i64> {
        let mut ids = self.sessions.expired(mono);
        if !self.quorum {
            ids.retain(|id| self.local_sessions.contains_key(id));
        }
        ids
    }

    /// The next session deadline that can expire a session (see
    /// [`Core::expiring_sessions`]).
    pub(crate) fn next_session_expiry(&self) -> Option<i64> {
        if self.quorum {
            self.sessions.next_expiry()
        } else {
            self.sessions
                .next_expiry_of(|id| self.local_sessions.contains_key(&id))
        }
    }
}
