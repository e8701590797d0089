//! The plain data the engine hands the layers above for their reports: [`NetView`] (the
//! connections and the ensemble, read under the core's lock), [`MemberFacts`], and what the
//! server adds once started ([`ServerExtras`]: the secure port, the data directory's
//! [`DataDirInfo`] and [`PersistStats`]).

use super::ensemble::{MemberId, MemberMode, Membership};
use super::latency::{AvgMinMax, Latencies};
use super::{Conns, NetConfig};
use crate::core::{ConnId, Series};

/// What the engine knows about the connections and the ensemble, read under the core's lock
/// for the reports (as ensemble member `member` sees it when one is set).
pub(crate) struct NetView<'a> {
    pub(super) cfg: &'a NetConfig,
    pub(super) conns: &'a Conns,
    pub(super) members: Option<&'a Membership>,
    pub(super) member: MemberId,
    pub(super) latencies: &'a Latencies,
}

impl NetView<'_> {
    /// The port clients connect to (the member's own on an ensemble).
    pub(crate) fn client_port(&self) -> u16 {
        self.members
            .and_then(|m| m.addr(self.member))
            .map_or(self.cfg.client_port, |a| a.port())
    }

    /// The ensemble member reporting, on a simulated ensemble.
    pub(crate) fn member(&self) -> Option<MemberFacts> {
        let m = self.members?;
        m.contains(self.member).then(|| MemberFacts {
            id: self.member,
            mode: m.mode(self.member),
            observer: m.is_observer(self.member),
            quorum_size: m.voters() as u64,
            followers: m.followers(),
            observers: m.observers(),
            membership: m.config_text().to_string(),
            limits: m.limits(),
            non_voting_followers: m.non_voting_followers(),
            leader: m.leader().map(|l| {
                let ip = m.addr(l).map(|a| a.ip().to_string());
                (l, ip.unwrap_or_default())
            }),
        })
    }

    /// Open client connections of each of `members`, in their order, counted in one pass
    /// over the connections.
    pub(crate) fn connections_of(&self, members: &[MemberId]) -> Vec<usize> {
        let mut counts = vec![0; members.len()];
        for h in self.conns.values().filter(|h| !h.closing) {
            if let Some(i) = members.iter().position(|m| *m == h.member) {
                counts[i] += 1;
            }
        }
        counts
    }

    /// The largest request frame accepted.
    pub(crate) fn max_frame_len(&self) -> usize {
        self.cfg.max_frame_len
    }

    /// Request latency, server-wide.
    pub(crate) fn latency(&self) -> AvgMinMax {
        self.latencies.requests()
    }

    /// Request latency of one connection.
    pub(crate) fn conn_latency(&self, conn: ConnId) -> AvgMinMax {
        self.conns.get(&conn).map(|h| h.latency).unwrap_or_default()
    }
}

/// What an ensemble member reports about its place in the ensemble.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberFacts {
    /// Its server id.
    pub id: u64,
    pub mode: MemberMode,
    /// Whether it is an observer (`peerType=1` in `conf`), whatever its mode.
    pub observer: bool,
    /// Voting members in the ensemble (`zk_quorum_size`).
    pub quorum_size: u64,
    /// Followers of the leader (`zk_synced_followers`), shown by the leader.
    pub followers: u64,
    /// Observers of the leader (`zk_synced_observers`), shown by the leader; `zk_learners`
    /// counts both.
    pub observers: u64,
    /// The membership text of `/zookeeper/config`.
    pub membership: String,
    /// `initLimit` and `syncLimit`, in ticks (`conf`).
    pub limits: (i32, i32),
    /// Followers that do not vote (`zk_synced_non_voting_followers`): members a reconfig
    /// removed that still run.
    pub non_voting_followers: u64,
    /// The leader's id and client host, while there is one.
    pub leader: Option<(u64, String)>,
}

impl MemberFacts {
    /// The ids of the other members, voting or observing (`server.N=` lines of the
    /// membership but its own): the leader's learners.
    pub fn learner_ids(&self) -> Vec<u64> {
        self.membership
            .lines()
            .filter_map(|l| l.strip_prefix("server.")?.split_once('=')?.0.parse().ok())
            .filter(|&id| id != self.id)
            .collect()
    }
}

/// What the server adds to the reports once its listeners are bound and its data directory
/// is open: the layers above the engine own them.
#[derive(Default)]
pub struct ServerExtras {
    /// The secure client port as bound.
    pub secure_port: Option<u16>,
    /// Reads the data directory's report (path, size, newest snapshot) when asked.
    #[allow(clippy::type_complexity)]
    pub data_dir: Option<Box<dyn Fn() -> DataDirInfo + Send + Sync>>,
}

/// A persisting server's data directory, as the reports show it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataDirInfo {
    /// Absolute path of the directory holding snapshots and logs (`DIR/version-2`).
    pub path: String,
    /// Bytes its files hold.
    pub size_bytes: u64,
    /// The newest snapshot: its zxid and its file's modification time (epoch seconds).
    pub last_snapshot: Option<(i64, i64)>,
    /// Load and snapshot timings.
    pub stats: PersistStats,
}

/// What the `monitor` metrics show of the data directory's work (ms and counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersistStats {
    /// Loading the directory at start (`dbinittime`).
    pub db_init_ms: Series,
    /// Transactions replayed from the logs at start (`startup_txns_loaded`).
    pub txns_loaded: Series,
    /// Each snapshot, from start to its file synced and renamed (`snapshottime`).
    pub snapshot_ms: Series,
    /// Each sync of the transaction log (`fsynctime`).
    pub fsync_ms: Series,
    /// Syncs over `fsync.warningthresholdms` (`fsync_threshold_exceed_count`).
    pub fsync_over_threshold: u64,
}
