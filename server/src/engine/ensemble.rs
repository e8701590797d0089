//! The simulated ensemble's membership as plain data: which members run, which ones vote
//! and which observe, which ones a reconfig removed, which one leads, whether a quorum (a
//! majority of the voting members) is up, each member's mode, and the membership text
//! `/zookeeper/config` and `conf` show.
//! No I/O: the engine keeps one [`Membership`] behind the core's lock and acts on the
//! [`Transition`]s it reports (see docs/architecture.md, "Ensemble"). The links a partition
//! cuts, and how long members take to notice and to elect, are in [`failover`]; how the
//! engine follows a change through is in [`follow`].

mod failover;
pub(crate) mod follow;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

pub use failover::{Flow, Timing};

use super::outbound::OutBudget;
use crate::core::{Now, ServerSpec, Serving};

/// A member's server id (ZooKeeper's `myid`, 1..=255).
pub type MemberId = u64;

/// What a member is doing, as its reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberMode {
    /// Running, and the leader of a quorum.
    Leader,
    /// Running, following the leader of a quorum.
    Follower,
    /// Running, a non-voting member observing the leader of a quorum: serves clients like a
    /// follower, never votes and is never elected.
    Observer,
    /// Running without quorum (or cut off from it by a partition), read-only mode on:
    /// serves read-only clients.
    ReadOnly,
    /// Running without quorum (or cut off from it by a partition), read-only mode off:
    /// looking for a leader, serving no client.
    Looking,
    /// Stopped: its listener is closed.
    Stopped,
}

impl MemberMode {
    /// The name `GET /zkd/members` and `srvr`'s `Mode:` line use (`looking` and `stopped`
    /// members answer no `srvr`).
    pub fn as_str(self) -> &'static str {
        match self {
            MemberMode::Leader => "leader",
            MemberMode::Follower => "follower",
            MemberMode::Observer => "observer",
            MemberMode::ReadOnly => "read-only",
            MemberMode::Looking => "looking",
            MemberMode::Stopped => "stopped",
        }
    }

    /// How a member in this mode serves client connections.
    pub fn serving(self) -> Serving {
        match self {
            MemberMode::Leader | MemberMode::Follower | MemberMode::Observer => Serving::ReadWrite,
            MemberMode::ReadOnly => Serving::ReadOnly,
            MemberMode::Looking | MemberMode::Stopped => Serving::NotServing,
        }
    }
}

/// One member as the control plane lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberReport {
    pub id: MemberId,
    /// Its client listener's address (kept while it is stopped; a start binds it again).
    pub client_addr: SocketAddr,
    pub mode: MemberMode,
    /// Whether its listener is open.
    pub running: bool,
    /// Whether it is an observer (a non-voting member).
    pub observer: bool,
    /// Whether it is in the current configuration (a reconfig may have removed it).
    pub in_config: bool,
    /// Whether a partition cuts it off from the side that holds the quorum.
    pub cut: bool,
}

/// What a stop, start or reconfig changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transition {
    /// Members whose client connections must be dropped: the one stopped, and every member
    /// whose way of serving changed (quorum lost or regained, a new leader elected after
    /// the old one stopped is not such a change for the others).
    pub drop_connections: Vec<MemberId>,
    /// The leader before and after.
    pub leader_before: Option<MemberId>,
    pub leader_after: Option<MemberId>,
}

#[derive(Clone, Debug)]
struct Member {
    id: MemberId,
    addr: SocketAddr,
    running: bool,
    /// A non-voting member: never elected, not counted for the quorum.
    observer: bool,
    /// Removed from the configuration by a reconfig: while it runs it goes on serving as a
    /// follower that does not vote (as a removed ZooKeeper server does), and it is never
    /// elected.
    removed: bool,
    /// The last zxid it had when it stopped, until it syncs with a leader again: a member
    /// that was away takes part in an election with what it had, not with what the others
    /// committed meanwhile.
    stale_zxid: Option<i64>,
    /// Cut off by a partition from the side that holds the quorum (or from every other
    /// member, when no side holds one): it runs and keeps its listener, but counts for no
    /// quorum and hears of no commit until the partition heals.
    cut: bool,
    /// Since when (session clock) it follows no leader and leads nothing: looking for a
    /// leader, or serving read-only. `None` while it leads or follows.
    looking: Option<i64>,
    /// When it will notice that it lost its leader (a follower) or its quorum (a leader),
    /// under ZooKeeper's timing; until then it goes on serving its clients.
    notice_at: Option<i64>,
    /// A leader whose followers elected another before it noticed it lost them: it still
    /// leads in its own eyes (and its clients') until its `notice_at`.
    stale_lead: bool,
}

/// One member as the membership is built from: its id, client address and whether it
/// observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    pub id: MemberId,
    pub addr: SocketAddr,
    pub observer: bool,
}

/// The members, who leads, and whether read-only mode is on.
#[derive(Clone, Debug)]
pub struct Membership {
    members: Vec<Member>,
    leader: Option<MemberId>,
    read_only: bool,
    /// The configuration text (`/zookeeper/config`'s data, which the core owns).
    config: String,
    /// `initLimit` and `syncLimit`, for `conf`.
    limits: (i32, i32),
    /// Where a reconfig's membership is kept for the next start, if anywhere.
    keep_dir: Option<std::path::PathBuf>,
    /// The links a partition cuts, each one way: `(from, to)` = what `from` sends `to` is
    /// lost.
    links: BTreeSet<(MemberId, MemberId)>,
    /// How long members take to notice a lost leader or quorum and to elect.
    timing: Timing,
    /// The session clock's time of the change or step under way.
    now: i64,
    /// When the election under way ends (ZooKeeper's timing only).
    election_at: Option<i64>,
    /// When the leader began leading (its checks come once a tick from then).
    leading_since: i64,
    /// Members that went looking during the change or step under way (their clients drop).
    went_looking: Vec<MemberId>,
    /// The flow of commits and writes last handed to the core, per member.
    flows: BTreeMap<MemberId, Flow>,
}

impl Membership {
    /// Every member running, all equally up to date: the voting member with the highest id
    /// leads, as in a fresh ZooKeeper ensemble.
    pub fn new(members: impl IntoIterator<Item = MemberSpec>, read_only: bool) -> Self {
        let mut members: Vec<Member> = members
            .into_iter()
            .map(|m| Member::new(m.id, m.addr, m.observer, true))
            .collect();
        members.sort_by_key(|m| m.id);
        let mut m = Membership {
            members,
            leader: None,
            read_only,
            config: String::new(),
            limits: crate::config::EnsembleConfig::DEFAULT_LIMITS,
            keep_dir: None,
            links: BTreeSet::new(),
            timing: Timing::default(),
            now: 0,
            election_at: None,
            leading_since: 0,
            went_looking: Vec::new(),
            flows: BTreeMap::new(),
        };
        m.settle_at_once(&|_| 0);
        m
    }

    /// Member ids in order.
    pub fn ids(&self) -> impl Iterator<Item = MemberId> + '_ {
        self.members.iter().map(|m| m.id)
    }

    pub fn contains(&self, id: MemberId) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    /// How many voting members there are (`zk_quorum_size`: observers and removed members
    /// do not count).
    pub fn voters(&self) -> usize {
        self.members.iter().filter(|m| m.votes()).count()
    }

    /// Whether `id` is in the current configuration (a reconfig may have removed it).
    pub fn in_config(&self, id: MemberId) -> bool {
        self.members.iter().any(|m| m.id == id && !m.removed)
    }

    pub fn is_running(&self, id: MemberId) -> bool {
        self.members.iter().any(|m| m.id == id && m.running)
    }

    /// Whether `id` is an observer.
    pub fn is_observer(&self, id: MemberId) -> bool {
        self.members.iter().any(|m| m.id == id && m.observer)
    }

    /// Whether a leader leads a majority of the voting members that it hears and that hear
    /// it (observers count for nothing).
    pub fn has_quorum(&self) -> bool {
        self.leader.is_some_and(|l| self.leader_has_quorum(l))
    }

    /// The members a partition cuts off.
    pub fn cut_ids(&self) -> Vec<MemberId> {
        self.members
            .iter()
            .filter(|m| m.cut)
            .map(|m| m.id)
            .collect()
    }

    /// The members running on the quorum's side (those a new configuration can count on).
    pub fn connected_ids(&self) -> Vec<MemberId> {
        self.members
            .iter()
            .filter(|m| m.running && !m.cut)
            .map(|m| m.id)
            .collect()
    }

    /// Splits the members into `groups` (members named in none form one more group
    /// together; no group at all: none) and cuts the links `one_way` names, each one way
    /// (`(from, to)`: what `from` sends `to` is lost). The members a leader hears and that
    /// hear it follow it while they are a majority of the voters; otherwise the best-placed
    /// majority elects one of its own; every member outside the quorum's side is cut off
    /// (all of them when no side has a majority). A new partition replaces the one before.
    /// `zxid_of` gives each member's last applied zxid.
    pub fn partition(
        &mut self,
        groups: &[Vec<MemberId>],
        one_way: &[(MemberId, MemberId)],
        zxid_of: &dyn Fn(MemberId) -> i64,
    ) -> Result<Transition, String> {
        for (from, to) in one_way {
            for id in [from, to] {
                if !self.contains(*id) {
                    return Err(format!("there is no member {id}"));
                }
            }
            if from == to {
                return Err(format!("a link from member {from} to itself cannot be cut"));
            }
        }
        let mut seen = Vec::new();
        for id in groups.iter().flatten() {
            if !self.contains(*id) {
                return Err(format!("there is no member {id}"));
            }
            if seen.contains(id) {
                return Err(format!("member {id} is named in two groups"));
            }
            seen.push(*id);
        }
        let rest: Vec<MemberId> = self.ids().filter(|id| !seen.contains(id)).collect();
        let mut sides: Vec<Vec<MemberId>> =
            groups.iter().filter(|g| !g.is_empty()).cloned().collect();
        if !rest.is_empty() {
            sides.push(rest);
        }
        if sides.len() < 2 && one_way.is_empty() {
            return Err("a partition needs at least two groups of members".into());
        }
        let mut links = BTreeSet::new();
        for (i, a) in sides.iter().enumerate() {
            for b in sides.iter().skip(i + 1) {
                for x in a {
                    for y in b {
                        links.insert((*x, *y));
                        links.insert((*y, *x));
                    }
                }
            }
        }
        links.extend(one_way.iter().copied());
        Ok(self.change(zxid_of, |m| m.links = links))
    }

    /// Ends a partition: every link works again; members that were cut off sync with the
    /// leader.
    pub fn heal(&mut self, zxid_of: &dyn Fn(MemberId) -> i64) -> Transition {
        self.change(zxid_of, |m| m.links.clear())
    }

    /// The links a partition cuts, each `(from, to)`: what `from` sends `to` is lost.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub fn cut_links(&self) -> Vec<(MemberId, MemberId)> {
        self.links.iter().copied().collect()
    }

    /// Applies `f`, then lets the members notice and elect (at once, or on ZooKeeper's
    /// timing from the clock's time, [`Membership::set_clock`]); the transition names the
    /// members whose way of serving changed. A member that stopped or looks for a leader
    /// keeps the zxid it had for elections.
    fn change(
        &mut self,
        zxid_of: &dyn Fn(MemberId) -> i64,
        f: impl FnOnce(&mut Self),
    ) -> Transition {
        let before = self.servings();
        let leader_before = self.leader;
        self.went_looking.clear();
        f(self);
        if self.timing.is_instant() {
            self.settle_at_once(zxid_of);
        } else {
            self.step(zxid_of);
        }
        self.transition(before, leader_before, false)
    }

    /// Each member's way of serving now.
    fn servings(&self) -> Vec<(MemberId, Serving)> {
        self.ids().map(|i| (i, self.mode(i).serving())).collect()
    }

    /// What changed since `before` (each member's way of serving then) and `leader_before`:
    /// the members whose way of serving changed, or that went looking for a leader
    /// meanwhile, lose their clients, and with `leader_change_drops_all` every member does
    /// when the leader changed.
    fn transition(
        &self,
        before: Vec<(MemberId, Serving)>,
        leader_before: Option<MemberId>,
        leader_change_drops_all: bool,
    ) -> Transition {
        let drop_all = leader_change_drops_all && self.leader != leader_before;
        let drop_connections = before
            .into_iter()
            .filter(|(i, serving)| {
                drop_all || self.mode(*i).serving() != *serving || self.went_looking.contains(i)
            })
            .map(|(i, _)| i)
            .collect();
        Transition {
            drop_connections,
            leader_before,
            leader_after: self.leader,
        }
    }

    pub fn leader(&self) -> Option<MemberId> {
        self.leader
    }

    pub fn mode(&self, id: MemberId) -> MemberMode {
        let Some(m) = self.members.iter().find(|m| m.id == id && m.running) else {
            return MemberMode::Stopped;
        };
        if m.stale_lead {
            MemberMode::Leader
        } else if self.leader.is_none() || m.looking.is_some() {
            if self.read_only && self.serves_read_only(m) {
                MemberMode::ReadOnly
            } else {
                MemberMode::Looking
            }
        } else if self.leader == Some(id) {
            MemberMode::Leader
        } else if self.is_observer(id) {
            MemberMode::Observer
        } else {
            MemberMode::Follower
        }
    }

    /// Followers of the leader (`zk_synced_followers`): running voting members other than
    /// the leader, when there is one.
    pub fn followers(&self) -> u64 {
        match self.leader {
            Some(l) => self
                .members
                .iter()
                .filter(|m| {
                    m.running && m.looking.is_none() && !m.stale_lead && !m.observer && m.id != l
                })
                .count() as u64,
            None => 0,
        }
    }

    /// Followers of the leader that do not vote (`zk_synced_non_voting_followers`): running
    /// members a reconfig removed, when there is a leader.
    pub fn non_voting_followers(&self) -> u64 {
        match self.leader {
            Some(_) => self
                .members
                .iter()
                .filter(|m| m.running && m.looking.is_none() && m.removed && !m.observer)
                .count() as u64,
            None => 0,
        }
    }

    /// Observers of the leader (`zk_synced_observers`): running observers, when there is a
    /// leader.
    pub fn observers(&self) -> u64 {
        match self.leader {
            Some(_) => self
                .members
                .iter()
                .filter(|m| m.running && m.looking.is_none() && m.observer)
                .count() as u64,
            None => 0,
        }
    }

    pub fn report(&self) -> Vec<MemberReport> {
        self.members
            .iter()
            .map(|m| MemberReport {
                id: m.id,
                client_addr: m.addr,
                mode: self.mode(m.id),
                running: m.running,
                observer: m.observer,
                in_config: !m.removed,
                cut: m.cut,
            })
            .collect()
    }

    pub fn addr(&self, id: MemberId) -> Option<SocketAddr> {
        self.members.iter().find(|m| m.id == id).map(|m| m.addr)
    }

    /// Records the address member `id` listens on (a member that joined by a reconfig with
    /// client port 0 gets a free port when it starts).
    pub fn set_addr(&mut self, id: MemberId, addr: SocketAddr) {
        if let Some(m) = self.members.iter_mut().find(|m| m.id == id) {
            m.addr = addr;
        }
    }

    /// Marks a member running or stopped and elects a leader if needed, `zxid_of` giving
    /// each running member's last applied zxid (older for a lagging member). `None` when
    /// nothing changed (unknown member, or already in that state).
    pub fn set_running(
        &mut self,
        id: MemberId,
        running: bool,
        zxid_of: &dyn Fn(MemberId) -> i64,
    ) -> Option<Transition> {
        let m = self.members.iter().find(|m| m.id == id)?;
        if m.running == running {
            return None;
        }
        let now = self.now;
        Some(self.change(zxid_of, |ms| {
            for m in ms.members.iter_mut().filter(|m| m.id == id) {
                m.running = running;
                // A member starting looks for a leader first.
                m.looking = running.then_some(now);
                m.notice_at = None;
            }
        }))
    }

    /// The members as configuration lines: each member's client address, and the quorum and
    /// election ports of the usual one-host layout (see [`quorum_ports`]), which ZooKeeper's
    /// parser accepts (it refuses equal quorum and election ports). Members talk to no one,
    /// so nothing listens on those ports: they are only names.
    pub fn specs(&self) -> Vec<ServerSpec> {
        self.members
            .iter()
            .filter(|m| !m.removed)
            .map(|m| {
                let (quorum_port, election_port) = quorum_ports(m.id);
                let host = m.addr.ip().to_string();
                ServerSpec {
                    id: m.id,
                    host: host.clone(),
                    quorum_port: u16::try_from(quorum_port).unwrap_or(u16::MAX),
                    election_port: u16::try_from(election_port).unwrap_or(u16::MAX),
                    observer: m.observer,
                    client: Some((host, m.addr.port())),
                }
            })
            .collect()
    }

    /// The configuration text `conf` shows (the data of `/zookeeper/config`).
    pub fn config_text(&self) -> &str {
        &self.config
    }

    /// Records the configuration text the core holds.
    pub fn set_config_text(&mut self, text: String) {
        self.config = text;
    }

    /// Records `initLimit` and `syncLimit`, which `conf` shows.
    pub fn set_limits(&mut self, init_limit: i32, sync_limit: i32) {
        self.limits = (init_limit, sync_limit);
    }

    /// Keeps each membership a reconfig commits in `dir` (see
    /// [`crate::config::EnsembleConfig::membership_dir`]).
    pub fn keep_in(&mut self, dir: Option<std::path::PathBuf>) {
        self.keep_dir = dir;
    }

    /// `initLimit` and `syncLimit`.
    pub fn limits(&self) -> (i32, i32) {
        self.limits
    }

    /// Applies a membership a reconfig committed: members it names vote or observe as it
    /// says (a new id joins stopped, listening on the ensemble's address with the client
    /// port its line names once started), the others are removed (still serving while they
    /// run, without a vote). A leader that no longer votes hands over to the lowest running
    /// voting member, as ZooKeeper's leader designates its successor among the new
    /// configuration's members that acknowledged the change; every member then syncs with
    /// the new leader, which drops the clients of all of them (they reconnect and keep their
    /// sessions), as on ZooKeeper.
    pub fn reconfigure(&mut self, specs: &[ServerSpec]) -> Transition {
        let before = self.servings();
        let leader_before = self.leader;
        self.went_looking.clear();
        let ip = self.members.first().map(|m| m.addr.ip());
        for m in &mut self.members {
            m.removed = true;
        }
        for spec in specs {
            match self.members.iter_mut().find(|m| m.id == spec.id) {
                Some(m) => {
                    m.removed = false;
                    m.observer = spec.observer;
                }
                None => {
                    let port = spec.client.as_ref().map_or(0, |(_, p)| *p);
                    let ip = ip.unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
                    let addr = SocketAddr::new(ip, port);
                    self.members
                        .push(Member::new(spec.id, addr, spec.observer, false));
                }
            }
        }
        self.members.sort_by_key(|m| m.id);
        if !self
            .leader
            .is_some_and(|l| self.members.iter().any(|m| m.id == l && m.votes()))
        {
            self.leader = self
                .members
                .iter()
                .find(|m| m.running && m.votes())
                .map(|m| m.id);
        }
        if self.leader != leader_before {
            self.leading_since = self.now;
        }
        if !self.has_quorum() {
            self.leader = None;
            let now = self.now;
            for m in self.members.iter_mut().filter(|m| m.running) {
                m.looking.get_or_insert(now);
            }
        }
        self.transition(before, leader_before, true)
    }
}

impl Member {
    /// A member in the configuration, with no lag, cut or election under way.
    fn new(id: MemberId, addr: SocketAddr, observer: bool, running: bool) -> Member {
        Member {
            id,
            addr,
            running,
            observer,
            removed: false,
            stale_zxid: None,
            cut: false,
            looking: None,
            notice_at: None,
            stale_lead: false,
        }
    }

    /// Whether it votes: in the configuration and not an observer.
    fn votes(&self) -> bool {
        !self.observer && !self.removed
    }
}

/// The quorum and election ports a member's configuration names: 2888 and 3888 for member 1,
/// one more for each following id (the layout of several servers on one host).
pub fn quorum_ports(id: MemberId) -> (u64, u64) {
    (2887 + id, 3887 + id)
}

/// Applies the membership a reconfig just committed (under the core's lock, right after the
/// request that made it): who votes, who observes, who was removed; a new leader when the
/// old one no longer votes (a new epoch, as on every leader change), then every member's
/// clients dropped.
pub(crate) fn apply_reconfig(state: &mut super::State, budget: &OutBudget, now: Now) {
    let Some(specs) = state.core.take_reconfig() else {
        return;
    };
    let Some(t) = state.members.as_mut().map(|m| m.reconfigure(&specs)) else {
        return;
    };
    state.apply_membership(&t, now);
    let Some(members) = state.members.as_mut() else {
        return;
    };
    let core = &mut state.core;
    members.set_config_text(core.ensemble_config_text().unwrap_or_default());
    if let (Some(dir), Some(version)) = (&members.keep_dir, core.ensemble_config_version()) {
        match super::kept_membership::keep(dir, version, &specs) {
            Ok(path) => tracing::info!(file = %path.display(), "kept the new membership"),
            Err(e) => tracing::error!(
                dir = %dir.display(),
                error = %e,
                "cannot keep the new membership: a restart starts from the one before"
            ),
        }
    }
    let voters: Vec<MemberId> = members
        .report()
        .iter()
        .filter(|m| m.in_config)
        .map(|m| m.id)
        .collect();
    let dropped = state.drop_connections_of(&t.drop_connections, budget);
    tracing::info!(
        members = ?voters,
        leader = ?t.leader_after,
        dropped_connections = dropped,
        "ensemble reconfigured"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `voters` voting members, then `observers` observers, on ports 2181 and up.
    fn members(voters: u64, observers: u64, read_only: bool) -> Membership {
        Membership::new(
            (1..=voters + observers).map(|id| MemberSpec {
                id,
                addr: SocketAddr::from(([127, 0, 0, 1], 2180 + id as u16)),
                observer: id > voters,
            }),
            read_only,
        )
    }

    fn three(read_only: bool) -> Membership {
        members(3, 0, read_only)
    }

    fn modes(m: &Membership) -> Vec<&'static str> {
        m.ids().map(|i| m.mode(i).as_str()).collect()
    }

    const SYNCED: &dyn Fn(MemberId) -> i64 = &|_| 9;

    #[test]
    fn member_three_leads_and_stopping_the_leader_elects_the_highest_running() {
        let mut m = three(true);
        assert_eq!(modes(&m), ["follower", "follower", "leader"]);
        assert_eq!(m.followers(), 2);
        let t = m.set_running(3, false, SYNCED).expect("a change");
        assert_eq!(t.drop_connections, [3], "followers keep their clients");
        assert_eq!((t.leader_before, t.leader_after), (Some(3), Some(2)));
        assert_eq!(modes(&m), ["follower", "leader", "stopped"]);
        assert_eq!(m.followers(), 1);
        assert_eq!(m.set_running(3, false, SYNCED), None, "already stopped");
        let t = m.set_running(3, true, SYNCED).expect("a change");
        assert_eq!(t.drop_connections, [3]);
        assert_eq!(
            modes(&m),
            ["follower", "leader", "follower"],
            "the leader stays"
        );
        assert_eq!(m.set_running(9, true, SYNCED), None, "unknown member");
    }

    #[test]
    fn a_member_behind_the_others_does_not_win_an_election() {
        // Member 2 lags (it applied up to zxid 4, the others 9): member 1 wins.
        let mut m = three(true);
        let t = m
            .set_running(3, false, &|id| if id == 2 { 4 } else { 9 })
            .expect("a change");
        assert_eq!(t.leader_after, Some(1));
        // Member 3 stops at zxid 5; 1 and 2 go on to 9, then 1 stops: 2 alone has no
        // quorum. When 3 comes back with what it had, 2 (newer) leads, not 3 (higher id).
        let mut m = three(true);
        m.set_running(3, false, &|_| 5);
        m.set_running(1, false, SYNCED);
        assert_eq!(m.leader(), None);
        let t = m.set_running(3, true, SYNCED).expect("a change");
        assert_eq!((t.leader_before, t.leader_after), (None, Some(2)));
    }

    #[test]
    fn losing_quorum_drops_every_client_and_serves_read_only_or_nothing() {
        for (ro, mode) in [(true, "read-only"), (false, "looking")] {
            let mut m = three(ro);
            m.set_running(2, false, SYNCED);
            let t = m.set_running(3, false, SYNCED).expect("a change");
            assert_eq!(t.drop_connections, [1, 3]);
            assert_eq!(t.leader_after, None);
            assert_eq!(modes(&m), [mode, "stopped", "stopped"]);
            assert_eq!(m.followers(), 0);
            let t = m.set_running(3, true, SYNCED).expect("a change");
            assert_eq!(t.drop_connections, [1, 3], "back to read-write");
            assert_eq!(modes(&m), ["follower", "stopped", "leader"]);
        }
    }

    /// The members' configuration lines, as `/zookeeper/config` prints them.
    fn lines(m: &Membership) -> String {
        m.specs()
            .iter()
            .map(|s| format!("server.{}={}\n", s.id, s.value()))
            .collect()
    }

    #[test]
    fn config_lines_list_every_member_with_its_client_address() {
        assert_eq!(
            lines(&three(true)),
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183\n"
        );
    }

    #[test]
    fn removing_the_leader_hands_over_to_the_lowest_voter_and_it_keeps_serving() {
        let mut m = three(true);
        let two: Vec<ServerSpec> = m.specs().into_iter().filter(|s| s.id != 3).collect();
        let t = m.reconfigure(&two);
        assert_eq!((t.leader_before, t.leader_after), (Some(3), Some(1)));
        assert_eq!(
            t.drop_connections,
            [1, 2, 3],
            "every member syncs with the new leader"
        );
        assert_eq!(modes(&m), ["leader", "follower", "follower"]);
        assert_eq!(
            (m.voters(), m.followers(), m.non_voting_followers()),
            (2, 2, 1)
        );
        assert!(!m.report()[2].in_config);
        assert_eq!(lines(&m).lines().count(), 2);
        // Member 3 stopping costs no quorum; member 2 stopping does.
        m.set_running(3, false, SYNCED);
        assert!(m.has_quorum());
        m.set_running(3, true, SYNCED);
        // Back in: it votes again and the leader stays.
        let all = three(true).specs();
        let t = m.reconfigure(&all);
        assert_eq!((t.leader_before, t.leader_after), (Some(1), Some(1)));
        assert_eq!(t.drop_connections, Vec::<MemberId>::new());
        assert_eq!((m.voters(), m.non_voting_followers()), (3, 0));
        assert_eq!(modes(&m), ["leader", "follower", "follower"]);
    }

    #[test]
    fn a_new_member_joins_stopped_on_the_ensembles_address() {
        let mut m = three(true);
        let mut specs = m.specs();
        let mut four = specs[2].clone();
        four.id = 4;
        four.client = Some(("localhost".into(), 2184));
        specs.push(four);
        let t = m.reconfigure(&specs);
        assert_eq!(t.leader_after, Some(3));
        assert_eq!(m.mode(4), MemberMode::Stopped);
        assert_eq!(m.addr(4), Some(SocketAddr::from(([127, 0, 0, 1], 2184))));
        assert_eq!(m.voters(), 4);
        // Three of four voters run: still a quorum; two of four is none.
        m.set_running(1, false, SYNCED);
        assert!(!m.has_quorum());
        m.set_running(4, true, SYNCED);
        assert!(m.has_quorum());
    }

    #[test]
    fn a_single_member_always_has_quorum() {
        let mut m = members(1, 0, true);
        assert_eq!(m.mode(1), MemberMode::Leader);
        m.set_running(1, false, SYNCED);
        assert_eq!(m.mode(1), MemberMode::Stopped);
        m.set_running(1, true, SYNCED);
        assert_eq!(m.mode(1), MemberMode::Leader);
    }

    #[test]
    fn observers_never_lead_and_do_not_count_for_the_quorum() {
        let mut m = members(3, 2, true);
        assert_eq!(
            modes(&m),
            ["follower", "follower", "leader", "observer", "observer"]
        );
        assert_eq!((m.voters(), m.followers(), m.observers()), (3, 2, 2));
        // Losing every observer loses nothing else.
        for id in [4, 5] {
            let t = m.set_running(id, false, SYNCED).expect("a change");
            assert_eq!(t.drop_connections, [id], "only the observer's clients");
            assert_eq!((t.leader_before, t.leader_after), (Some(3), Some(3)));
            assert!(m.has_quorum());
        }
        assert_eq!(m.observers(), 0);
        m.set_running(4, true, SYNCED);
        m.set_running(5, true, SYNCED);
        // The leader stops: the highest remaining voting member leads, not observer 5.
        let t = m.set_running(3, false, SYNCED).expect("a change");
        assert_eq!(t.drop_connections, [3], "observers keep their clients");
        assert_eq!(t.leader_after, Some(2));
        assert_eq!(
            modes(&m),
            ["follower", "leader", "stopped", "observer", "observer"]
        );
        // Three of five members still run, but only one of three voters: no quorum.
        let t = m.set_running(2, false, SYNCED).expect("a change");
        assert_eq!(t.leader_after, None);
        assert_eq!(t.drop_connections, [1, 2, 4, 5]);
        assert!(!m.has_quorum());
        assert_eq!(
            modes(&m),
            ["read-only", "stopped", "stopped", "read-only", "read-only"]
        );
        assert_eq!((m.followers(), m.observers()), (0, 0));
        let t = m.set_running(3, true, SYNCED).expect("a change");
        assert_eq!(t.leader_after, Some(3));
        assert_eq!(t.drop_connections, [1, 3, 4, 5], "back to read-write");
        assert_eq!(
            modes(&m),
            ["follower", "stopped", "leader", "observer", "observer"]
        );
    }

    #[test]
    fn an_up_to_date_observer_does_not_stand_in_an_election() {
        // The voters lag behind observer 4; when leader 3 stops, voter 2 still wins.
        let mut m = members(3, 1, false);
        let t = m
            .set_running(3, false, &|id| if id == 4 { 9 } else { 5 })
            .expect("a change");
        assert_eq!(t.leader_after, Some(2));
        assert_eq!(m.mode(4), MemberMode::Observer);
        // One voting member is a quorum of one, whatever the observers do.
        let mut m = members(1, 2, false);
        assert_eq!(modes(&m), ["leader", "observer", "observer"]);
        assert_eq!(m.voters(), 1);
        m.set_running(2, false, SYNCED);
        m.set_running(3, false, SYNCED);
        assert_eq!(m.mode(1), MemberMode::Leader);
        let t = m.set_running(3, true, SYNCED).expect("a change");
        assert_eq!(t.drop_connections, [3]);
        let t = m.set_running(1, false, SYNCED).expect("a change");
        assert_eq!(t.drop_connections, [1, 3]);
        assert_eq!(modes(&m), ["stopped", "stopped", "looking"]);
    }

    #[test]
    fn config_lines_mark_observers() {
        assert_eq!(
            lines(&members(2, 1, true)),
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.3=127.0.0.1:2890:3890:observer;127.0.0.1:2183\n"
        );
        let report = members(2, 1, true).report();
        let observers: Vec<bool> = report.iter().map(|r| r.observer).collect();
        assert_eq!(observers, [false, false, true]);
    }
}
