//! How the members of a simulated ensemble notice a lost leader or quorum and elect, at once
//! or on ZooKeeper's timing: which links a partition cuts (each one way), the side a leader
//! can lead, the deadlines at which members notice and elections end, and the flow of
//! commits and writes each member has meanwhile (docs/ensembles.md, "Failover timing").

use super::{MemberId, Membership};

/// ZooKeeper's fast leader election waits this long (ms) after a quorum agrees on a leader,
/// for a better vote, before it decides.
pub const FINALIZE_WAIT_MS: i64 = 200;

/// A ZooKeeper follower whose first attempt to reach its new leader finds it not yet
/// listening tries again after this long (ms).
const LEADER_CONNECT_RETRY_MS: i64 = 100;

/// The new leader's synchronization with its followers (epoch, history, going live), as
/// measured on one host with ZooKeeper 3.9.3: the rest of the time from a leader's death to
/// its successor serving (about 370 ms whatever the tick) besides the two waits above.
const SYNC_ROUND_MS: i64 = 70;

/// A looking ZooKeeper server with read-only mode on starts serving read-only clients
/// after this long (ms) or a tick, whichever is longer.
const READ_ONLY_DELAY_MS: i64 = 2000;

/// How long members take to notice and to elect: nothing at all (instant elections), or
/// ZooKeeper's times for one `tickTime` and `syncLimit`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// How long (ms) a follower goes on without hearing its leader, and a leader without
    /// hearing a quorum, before it notices: `syncLimit × tickTime`. 0: instant.
    pub sync_ms: i64,
    /// `tickTime` (ms): a leader checks its followers once a tick, so it notices within a
    /// tick a quorum lost through followers whose connections closed (stopped, or gone
    /// looking).
    pub tick_ms: i64,
    /// How long (ms) an election takes once every member of a majority looks for a leader.
    pub election_ms: i64,
    /// How long (ms) a looking member waits before it serves read-only clients.
    pub read_only_ms: i64,
}

impl Timing {
    /// ZooKeeper's timing for `tick_ms` and `sync_limit` ticks.
    pub fn zookeeper(tick_ms: i64, sync_limit: i32) -> Timing {
        Timing {
            sync_ms: tick_ms.saturating_mul(i64::from(sync_limit.max(1))),
            tick_ms,
            election_ms: FINALIZE_WAIT_MS + LEADER_CONNECT_RETRY_MS + SYNC_ROUND_MS,
            read_only_ms: READ_ONLY_DELAY_MS.max(tick_ms),
        }
    }

    /// Whether changes take effect at once.
    pub fn is_instant(&self) -> bool {
        *self == Timing::default()
    }
}

/// What reaches a member while it serves: whether it applies the commits (`stall`: it
/// applies none, its clients read what it had) and whether its clients' writes reach a
/// leader that can commit them (`hold`: they wait, unexecuted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    pub stall: bool,
    pub hold: bool,
}

impl Membership {
    /// Sets how long members take to notice and to elect.
    pub fn set_timing(&mut self, timing: Timing) {
        self.timing = timing;
    }

    /// The timing in force.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The session clock's time (ms) at the change about to be made.
    pub fn set_clock(&mut self, now: i64) {
        self.now = self.now.max(now);
    }

    /// Whether `a` hears what `b` sends.
    fn hears(&self, a: MemberId, b: MemberId) -> bool {
        !self.links.contains(&(b, a))
    }

    /// Whether `a` and `b` hear each other.
    fn linked(&self, a: MemberId, b: MemberId) -> bool {
        a == b || (self.hears(a, b) && self.hears(b, a))
    }

    /// Whether leader `l` leads a majority of the voters: itself and the running members
    /// that follow it and that it hears and that hear it.
    pub(super) fn leader_has_quorum(&self, l: MemberId) -> bool {
        let synced = self
            .members
            .iter()
            .filter(|m| m.running && m.looking.is_none() && m.votes() && self.linked(m.id, l))
            .count();
        self.members
            .iter()
            .any(|m| m.id == l && m.running && m.looking.is_none())
            && 2 * synced > self.voters()
    }

    /// The leader the links allow and the members on its side: the current leader while
    /// the running members linked to it are a majority of the voters, otherwise the voter
    /// ZooKeeper's election puts first (newest zxid, then highest id) among those whose
    /// linked running members are a majority. `None`: no side has a majority.
    fn target(&self, zxid_of: &dyn Fn(MemberId) -> i64) -> Option<(MemberId, Vec<MemberId>)> {
        let side_of = |c: MemberId| -> Vec<MemberId> {
            self.members
                .iter()
                .filter(|m| m.running && self.linked(m.id, c))
                .map(|m| m.id)
                .collect()
        };
        let majority = |side: &[MemberId]| {
            let voters = self
                .members
                .iter()
                .filter(|m| side.contains(&m.id) && m.votes())
                .count();
            2 * voters > self.voters()
        };
        if let Some(l) = self.leader.filter(|l| {
            self.members
                .iter()
                .any(|m| m.id == *l && m.running && m.votes())
        }) {
            let side = side_of(l);
            if majority(&side) {
                return Some((l, side));
            }
        }
        let mut candidates: Vec<(i64, MemberId)> = self
            .members
            .iter()
            .filter(|m| m.running && m.votes())
            .map(|m| (m.stale_zxid.unwrap_or_else(|| zxid_of(m.id)), m.id))
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        candidates.into_iter().find_map(|(_, c)| {
            let side = side_of(c);
            majority(&side).then_some((c, side))
        })
    }

    /// Marks the members the links cut off from the quorum's side, and keeps the zxid of
    /// each member that stopped or looks for a leader for elections.
    fn mark(&mut self, zxid_of: &dyn Fn(MemberId) -> i64) {
        let side = self.target(zxid_of).map(|(_, s)| s);
        let touched: Vec<MemberId> = self.links.iter().flat_map(|(a, b)| [*a, *b]).collect();
        for m in &mut self.members {
            m.cut = touched.contains(&m.id) && !side.as_ref().is_some_and(|s| s.contains(&m.id));
            if !m.running || m.looking.is_some() {
                if m.stale_zxid.is_none() {
                    m.stale_zxid = Some(zxid_of(m.id));
                }
            } else {
                m.stale_zxid = None;
            }
        }
    }

    /// Instant elections: the side the links allow is the quorum's at once, the members
    /// outside it look for a leader.
    pub(super) fn settle_at_once(&mut self, zxid_of: &dyn Fn(MemberId) -> i64) {
        let target = self.target(zxid_of);
        let now = self.now;
        let leader = target.as_ref().map(|(l, _)| *l);
        if leader != self.leader {
            self.leading_since = now;
        }
        self.leader = leader;
        for m in &mut self.members {
            m.notice_at = None;
            m.stale_lead = false;
            if !m.running || target.as_ref().is_some_and(|(_, s)| s.contains(&m.id)) {
                m.looking = None;
            } else if m.looking.is_none() {
                m.looking = Some(now);
                self.went_looking.push(m.id);
            }
        }
        self.election_at = None;
        self.mark(zxid_of);
    }

    /// When leader `l`'s check (once a tick since it began leading) first finds it without
    /// a quorum lost at `now`: through followers it no longer hears (`silent`), once
    /// `syncLimit` ticks passed since the tick of their last acknowledgement; through
    /// connections that closed, at the next check.
    fn leader_check(&self, now: i64, silent: bool) -> i64 {
        let tick = self.timing.tick_ms.max(1);
        let ticks = (now - self.leading_since).max(0) / tick;
        let wait = if silent { self.timing.sync_ms } else { 0 };
        self.leading_since + (ticks + 1) * tick + wait
    }

    /// Whether the running members `l` is linked to are a majority of the voters (so it can
    /// keep or regain a quorum without an election).
    fn linked_to_majority(&self, l: MemberId) -> bool {
        let voters = self
            .members
            .iter()
            .filter(|m| m.running && m.votes() && self.linked(m.id, l))
            .count();
        2 * voters > self.voters()
    }

    /// Member `i` (by index) notices it has no leader at the clock's time.
    fn start_looking(&mut self, i: usize) {
        let now = self.now;
        let m = &mut self.members[i];
        m.notice_at = None;
        m.stale_lead = false;
        if m.running && m.looking.is_none() {
            m.looking = Some(now);
            self.went_looking.push(m.id);
        }
    }

    /// One step of ZooKeeper's timing at the clock's time: a stopped leader's followers
    /// that hear it notice at once; a leader without a quorum it hears and that hears it
    /// steps down `syncLimit × tickTime` after it lost it, and a follower that does not
    /// hear its leader or is not heard by it notices after as long (then a leader that
    /// stepped down drops the followers still linked to it); a looking member linked to a
    /// leader with a quorum follows it; with no leader, once every running voter of the side
    /// the links allow looks for one, they elect after [`Timing::election_ms`].
    pub(super) fn step(&mut self, zxid_of: &dyn Fn(MemberId) -> i64) {
        let now = self.now;
        let sync = self.timing.sync_ms;
        if let Some(l) = self.leader {
            let li = self.members.iter().position(|m| m.id == l);
            let running = li.is_some_and(|i| self.members[i].running);
            let step_down = match li {
                Some(i) if running => {
                    if self.leader_has_quorum(l) {
                        self.members[i].notice_at = None;
                        false
                    } else {
                        // Followers it cannot hear time out; closed connections it sees
                        // at its next check.
                        let silent = self.members.iter().any(|m| {
                            m.running && m.looking.is_none() && m.votes() && !self.linked(m.id, l)
                        });
                        let check = self.leader_check(now, silent);
                        let at = *self.members[i].notice_at.get_or_insert(check);
                        if now >= at {
                            self.start_looking(i);
                        }
                        now >= at
                    }
                }
                _ => true,
            };
            if step_down {
                self.leader = None;
                // The followers it is linked to see their connection to it close.
                for i in 0..self.members.len() {
                    let m = &self.members[i];
                    if m.running && m.looking.is_none() && self.linked(m.id, l) {
                        self.start_looking(i);
                    }
                }
            }
        }
        for i in 0..self.members.len() {
            let m = &self.members[i];
            if !m.running || m.looking.is_some() || Some(m.id) == self.leader {
                continue;
            }
            // A deposed leader steps down at its check, healed or not: its followers left.
            let ok = !m.stale_lead && self.leader.is_some_and(|l| self.linked(m.id, l));
            if ok {
                self.members[i].notice_at = None;
            } else {
                let at = *self.members[i].notice_at.get_or_insert(now + sync);
                if now >= at {
                    self.start_looking(i);
                }
            }
        }
        if let Some(l) = self.leader.filter(|l| self.leader_has_quorum(*l)) {
            for i in 0..self.members.len() {
                let m = &self.members[i];
                if m.running && m.looking.is_some() && self.linked(m.id, l) {
                    self.members[i].looking = None;
                }
            }
        }
        // A majority elects once all its voters look for a leader, whether or not a leader
        // that lost them has noticed yet.
        let deposed = self
            .leader
            .filter(|l| !self.leader_has_quorum(*l) && !self.linked_to_majority(*l));
        if self.leader.is_none() || deposed.is_some() {
            let ready = self.target(zxid_of).filter(|(_, side)| {
                self.members
                    .iter()
                    .filter(|m| side.contains(&m.id) && m.votes())
                    .all(|m| m.looking.is_some())
            });
            match ready {
                None => self.election_at = None,
                Some((l, side)) => {
                    let at = *self
                        .election_at
                        .get_or_insert(now + self.timing.election_ms);
                    if now >= at {
                        self.election_at = None;
                        // A deposed leader that has not noticed goes on as one until it does.
                        if let Some(old) = deposed {
                            for m in self.members.iter_mut().filter(|m| m.id == old) {
                                m.stale_lead = true;
                            }
                        }
                        self.leader = Some(l);
                        self.leading_since = now;
                        for m in self.members.iter_mut().filter(|m| side.contains(&m.id)) {
                            m.looking = None;
                            m.notice_at = None;
                        }
                    }
                }
            }
        }
        self.mark(zxid_of);
    }

    /// When the next step of ZooKeeper's timing falls due (session clock), if any.
    pub fn next_deadline(&self) -> Option<i64> {
        if self.timing.is_instant() {
            return None;
        }
        let read_only = self
            .members
            .iter()
            .filter(|m| self.read_only && m.running)
            .filter_map(|m| m.looking.map(|s| s + self.timing.read_only_ms))
            .filter(|at| *at > self.now);
        self.members
            .iter()
            .filter(|m| m.running)
            .filter_map(|m| m.notice_at)
            .chain(self.election_at)
            .chain(read_only)
            .min()
    }

    /// Runs every step of ZooKeeper's timing that fell due by `now`, each at its own time;
    /// `None` when none did.
    pub fn advance(
        &mut self,
        now: i64,
        zxid_of: &dyn Fn(MemberId) -> i64,
    ) -> Option<super::Transition> {
        let due = self.next_deadline().filter(|d| *d <= now)?;
        let before = self.servings();
        let leader_before = self.leader;
        self.went_looking.clear();
        let mut at = Some(due);
        // Each step clears the deadline it ran for; the bound only guards against a loop.
        for _ in 0..256 {
            let Some(d) = at else { break };
            self.now = self.now.max(d);
            self.step(zxid_of);
            at = self.next_deadline().filter(|d| *d <= now);
        }
        self.now = self.now.max(now);
        Some(self.transition(before, leader_before, false))
    }

    /// Whether looking member `m` serves read-only clients yet (with read-only mode on).
    pub(super) fn serves_read_only(&self, m: &super::Member) -> bool {
        m.looking
            .is_none_or(|since| self.now >= since + self.timing.read_only_ms)
    }

    /// What reaches member `id` now (see [`Flow`]).
    pub fn flow(&self, id: MemberId) -> Flow {
        let Some(m) = self.members.iter().find(|m| m.id == id) else {
            return Flow::default();
        };
        match self.leader {
            _ if m.stale_lead => Flow {
                stall: true,
                hold: true,
            },
            Some(l) if m.running && m.looking.is_none() => {
                let quorum = self.leader_has_quorum(l);
                Flow {
                    stall: !quorum || !self.hears(id, l),
                    hold: !quorum || !self.hears(l, id),
                }
            }
            _ => Flow {
                stall: m.cut,
                hold: false,
            },
        }
    }

    /// The members whose flow changed since the last call, with the flow before and now.
    pub fn take_flow_changes(&mut self) -> Vec<(MemberId, Flow, Flow)> {
        let ids: Vec<MemberId> = self.ids().collect();
        let mut changed = Vec::new();
        for id in ids {
            let now = self.flow(id);
            let before = self.flows.insert(id, now).unwrap_or_default();
            if before != now {
                changed.push((id, before, now));
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::engine::ensemble::{MemberSpec, Transition};

    const SYNCED: &dyn Fn(MemberId) -> i64 = &|_| 9;

    /// Three voters with read-only mode on, on ZooKeeper's timing for a 100 ms tick and a
    /// `syncLimit` of 5 (a member notices after 500 ms), at time 1000.
    fn timed() -> Membership {
        let mut m = Membership::new(
            (1..=3).map(|id| MemberSpec {
                id,
                addr: SocketAddr::from(([127, 0, 0, 1], 2180 + id as u16)),
                observer: false,
            }),
            true,
        );
        m.set_timing(Timing::zookeeper(100, 5));
        m.set_clock(1000);
        m
    }

    fn modes(m: &Membership) -> Vec<&'static str> {
        m.ids().map(|i| m.mode(i).as_str()).collect()
    }

    fn drops(t: &Transition) -> &[MemberId] {
        &t.drop_connections
    }

    const BOTH: Flow = Flow {
        stall: true,
        hold: true,
    };

    #[test]
    fn a_leader_cut_off_serves_until_sync_limit_then_the_majority_elects() {
        let mut m = timed();
        let t = m.partition(&[vec![3]], &[], SYNCED).expect("a partition");
        assert_eq!(drops(&t), [] as [MemberId; 0], "nobody noticed yet");
        assert_eq!(modes(&m), ["follower", "follower", "leader"]);
        assert!(!m.has_quorum(), "nothing commits meanwhile");
        assert_eq!(m.cut_ids(), [3]);
        for id in 1..=3 {
            assert_eq!(m.flow(id), BOTH, "member {id} commits nothing");
        }
        assert_eq!(m.next_deadline(), Some(1500));
        assert_eq!(m.advance(1499, SYNCED), None);
        // syncLimit × tickTime later the followers notice, drop their clients and elect.
        let t = m.advance(1500, SYNCED).expect("a step");
        assert_eq!(drops(&t), [1, 2]);
        assert_eq!(modes(&m), ["looking", "looking", "leader"]);
        // The leader checks once a tick from when it began leading (time 0 here): the first
        // check syncLimit ticks after the tick of the last acknowledgement finds it alone.
        assert_eq!(m.next_deadline(), Some(1600));
        let t = m.advance(1600, SYNCED).expect("a step");
        assert_eq!(drops(&t), [3]);
        assert_eq!((t.leader_before, t.leader_after), (Some(3), None));
        assert_eq!(modes(&m), ["looking", "looking", "looking"]);
        // The election ends 370 ms after the followers began it.
        assert_eq!(m.next_deadline(), Some(1870), "the election's end");
        let t = m.advance(1870, SYNCED).expect("the election");
        assert_eq!(t.leader_after, Some(2));
        assert_eq!(modes(&m), ["follower", "leader", "looking"]);
        assert!(m.has_quorum());
        assert_eq!(m.flow(1), Flow::default());
        // The cut member serves read-only clients once it has looked for max(2 s, a tick).
        let t = m.advance(3600, SYNCED).expect("read-only");
        assert_eq!(drops(&t), [3]);
        assert_eq!(modes(&m), ["follower", "leader", "read-only"]);
        // Healed, it follows the new leader.
        m.set_clock(4000);
        let t = m.heal(SYNCED);
        assert_eq!(drops(&t), [3]);
        assert_eq!(modes(&m), ["follower", "leader", "follower"]);
        assert_eq!(m.next_deadline(), None);
    }

    #[test]
    fn one_advance_past_every_deadline_runs_each_step_in_order() {
        let mut m = timed();
        m.partition(&[vec![3]], &[], SYNCED).expect("a partition");
        let t = m.advance(10_000, SYNCED).expect("steps");
        assert_eq!((t.leader_before, t.leader_after), (Some(3), Some(2)));
        assert_eq!(drops(&t), [1, 2, 3], "all went looking on the way");
        assert_eq!(modes(&m), ["follower", "leader", "read-only"]);
    }

    #[test]
    fn a_partition_healed_before_anyone_noticed_changes_nothing() {
        let mut m = timed();
        m.partition(&[vec![3]], &[], SYNCED).expect("a partition");
        m.set_clock(1400);
        let t = m.heal(SYNCED);
        assert_eq!(drops(&t), [] as [MemberId; 0]);
        assert_eq!(m.next_deadline(), None);
        assert_eq!(m.flow(1), Flow::default(), "held writes go on");
        assert_eq!(m.advance(5000, SYNCED), None);
        assert_eq!(modes(&m), ["follower", "follower", "leader"]);
    }

    #[test]
    fn a_stopped_leaders_followers_drop_their_clients_and_elect_after_an_elections_time() {
        let mut m = timed();
        let t = m.set_running(3, false, SYNCED).expect("a change");
        assert_eq!(drops(&t), [1, 2, 3]);
        assert_eq!(modes(&m), ["looking", "looking", "stopped"]);
        assert_eq!(m.advance(1369, SYNCED), None);
        let t = m.advance(1370, SYNCED).expect("the election");
        assert_eq!((t.leader_before, t.leader_after), (None, Some(2)));
        assert_eq!(modes(&m), ["follower", "leader", "stopped"]);
        // A follower stopping changes nothing for the others.
        m.set_clock(2000);
        let t = m.set_running(1, false, SYNCED).expect("a change");
        assert_eq!(drops(&t), [1]);
        assert_eq!(modes(&m), ["stopped", "leader", "stopped"]);
        // That lost the quorum: the leader notices at its next check, a tick later at most.
        assert!(!m.has_quorum());
        assert_eq!(
            m.next_deadline(),
            Some(2070),
            "its next check, on its ticks from 1370"
        );
        let t = m.advance(2070, SYNCED).expect("step down");
        assert_eq!(t.leader_after, None);
        assert_eq!(modes(&m), ["stopped", "looking", "stopped"]);
    }

    #[test]
    fn with_long_ticks_the_majority_elects_before_the_old_leader_notices() {
        // tickTime 2 s, syncLimit 5: the followers notice 10 s after the cut, elect 370 ms
        // later; the old leader checks on its ticks and steps down at 12 s. Meanwhile two
        // members lead, as on ZooKeeper; the old one commits nothing.
        let mut m = timed();
        m.set_timing(Timing::zookeeper(2000, 5));
        m.partition(&[vec![3]], &[], SYNCED).expect("a partition");
        m.advance(11_370, SYNCED).expect("steps");
        assert_eq!(modes(&m), ["follower", "leader", "leader"]);
        assert_eq!(m.leader(), Some(2));
        assert_eq!(m.flow(3), BOTH);
        assert_eq!(m.followers(), 1, "the old leader follows nobody");
        // Healed before its check, it still steps down then (its followers left), and then
        // follows the new leader.
        m.set_clock(11_500);
        m.heal(SYNCED);
        assert_eq!(modes(&m), ["follower", "leader", "leader"]);
        assert_eq!(m.flow(3), BOTH);
        let t = m.advance(12_000, SYNCED).expect("the old leader notices");
        assert_eq!(drops(&t), [3]);
        assert_eq!(modes(&m), ["follower", "leader", "follower"]);
    }

    #[test]
    fn one_way_cuts_lose_a_follower_or_the_leaders_quorum() {
        // Member 1 does not hear leader 3: it applies no commit, its writes still reach
        // the leader; after syncLimit × tickTime it looks for a leader, cut off.
        let mut m = timed();
        m.partition(&[], &[(3, 1)], SYNCED).expect("a cut");
        assert_eq!(m.cut_links(), [(3, 1)]);
        assert_eq!(
            m.flow(1),
            Flow {
                stall: true,
                hold: false
            }
        );
        assert!(m.has_quorum(), "3 and 2 are a majority");
        let t = m.advance(1500, SYNCED).expect("a step");
        assert_eq!(drops(&t), [1]);
        assert_eq!(modes(&m), ["looking", "follower", "leader"]);
        assert_eq!(m.cut_ids(), [1]);
        // Leader 3 does not hear member 1: member 1 reads every commit, its writes wait.
        let mut m = timed();
        m.partition(&[], &[(1, 3)], SYNCED).expect("a cut");
        assert_eq!(
            m.flow(1),
            Flow {
                stall: false,
                hold: true
            }
        );
        // Neither follower heard by leader 3: it steps down, and 1 and 2 elect.
        let mut m = timed();
        m.partition(&[], &[(1, 3), (2, 3)], SYNCED).expect("cuts");
        assert!(!m.has_quorum());
        let t = m.advance(1870, SYNCED).expect("steps");
        assert_eq!((t.leader_before, t.leader_after), (Some(3), Some(2)));
        assert_eq!(m.cut_ids(), [3]);
        // With instant elections a one-way cut takes effect at once.
        let mut m = timed();
        m.set_timing(Timing::default());
        let t = m.partition(&[], &[(3, 1)], SYNCED).expect("a cut");
        assert_eq!(drops(&t), [1]);
        assert_eq!(modes(&m), ["read-only", "follower", "leader"]);
        assert!(m.partition(&[], &[(1, 1)], SYNCED).is_err());
        assert!(m.partition(&[], &[(1, 9)], SYNCED).is_err());
    }
}
