//! One side of the ensemble run: three members (zkd `--ensemble 3`, or three ZooKeeper 3.8
//! JVMs, each in a network namespace of its own), stopped and started through
//! `POST /zkd/members/{id}/stop|start` and cut off and healed through
//! `POST /zkd/partition?groups=ID` and `POST /zkd/heal` (zkd's admin listener, or the small
//! endpoint of the client suites over the JVMs, which cuts the namespaces' links), and the
//! wait until the members settle after a change (a leader and followers, or a read-only
//! member; a cut-off member read-only).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zkd_server::ZookeeperVersion;
use zkd_testkit::oracle::ensemble::serving_mode;
use zkd_testkit::oracle::member_control::MemberControl;
use zkd_testkit::oracle::netns::Cuts;
use zkd_testkit::oracle::{four_letter_word, Launcher, OracleEnsemble};

use super::gen::MEMBERS;

/// The tick both sides run with: ZooKeeper's `tickTime`, zkd's `tick_time`. Sessions get
/// 2–20 ticks.
pub const TICK_MS: u64 = 500;
/// The session timeout every program session asks for (and gets on both sides).
pub const SESSION_TIMEOUT_MS: i32 = 3_000;
/// How long the members may take to settle after a change (a JVM start included).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// `syncLimit` on both sides: a ZooKeeper member cut off from its leader (or a leader from
/// its followers) notices within `SYNC_LIMIT × TICK_MS`, well inside a session's timeout,
/// so the sessions it drops reach the other side before they expire.
pub const SYNC_LIMIT: u32 = 2;

/// What the members show once settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// A quorum runs, led by this member.
    Leader(u64),
    /// One member runs, without quorum, serving read-only clients.
    ReadOnly(u64),
    /// Nothing runs.
    Down,
}

enum Keep {
    Zkd {
        _server: zkd_server::Server,
    },
    ZooKeeper {
        _control: MemberControl,
        _ensemble: Arc<Mutex<OracleEnsemble>>,
    },
}

pub struct Fleet {
    pub name: &'static str,
    /// Client addresses, in member id order.
    pub members: Vec<SocketAddr>,
    control: String,
    pub running: [bool; MEMBERS as usize],
    /// The member cut off from the others, if any.
    pub cut: Option<u64>,
    /// The member whose clients are blackholed, if any.
    pub blackholed: Option<u64>,
    /// The namespaces' cuts (the ZooKeeper side); zkd blackholes through its admin listener.
    cuts: Option<Cuts>,
    _keep: Keep,
}

impl Fleet {
    /// zkd `--ensemble 3` (read-only mode on, as the flag has it) behaving as 3.8, with the
    /// admin listener for the member routes.
    pub async fn zkd(version: ZookeeperVersion) -> Fleet {
        let mut members = zkd_server::EnsembleConfig::numbered(MEMBERS, 0).expect("three members");
        // As the ZooKeeper side runs (see `Fleet::zookeeper`).
        members.local_sessions = true;
        members.local_sessions_upgrading = true;
        members.sync_limit = SYNC_LIMIT as i32;
        // Instant elections unless asked for ZooKeeper's failover timing.
        match std::env::var("ZKD_ENSEMBLE_DIFF_TIMING").as_deref() {
            Ok("zookeeper") => members.election_timing = zkd_server::ElectionTiming::ZooKeeper,
            Ok("instant") | Err(_) => {}
            Ok(other) => {
                panic!("ZKD_ENSEMBLE_DIFF_TIMING={other:?}: expected instant or zookeeper")
            }
        }
        let (server, admin) = zkd_testkit::target::zkd_with_admin(zkd_server::Config {
            ensemble: Some(members),
            tick_time: Duration::from_millis(TICK_MS),
            zookeeper_version: version,
            ..zkd_server::Config::default()
        })
        .await;
        let addrs = server
            .members()
            .expect("an ensemble")
            .iter()
            .map(|m| m.client_addr)
            .collect();
        Fleet {
            name: "zkd",
            members: addrs,
            control: format!("http://{admin}"),
            running: [true; MEMBERS as usize],
            cut: None,
            blackholed: None,
            cuts: None,
            _keep: Keep::Zkd { _server: server },
        }
    }

    /// Three ZooKeeper 3.8.0 servers with read-only mode and local sessions on (3.8 serves
    /// read-only clients only with local sessions) and a short tick, each in a network
    /// namespace named after `prefix` (root only: fails saying why elsewhere). Connecting to
    /// a member that is cut off gives up after a second (`zookeeper.cnxTimeout`) instead of
    /// five, so the majority's election does not wait on it.
    pub async fn zookeeper(version: ZookeeperVersion, prefix: &'static str) -> Fleet {
        let ensemble = tokio::task::spawn_blocking(move || {
            Launcher::new()
                .version(version)
                .jvm_opt("-Dreadonlymode.enabled=true")
                .jvm_opt("-Dzookeeper.cnxTimeout=1000")
                .log_level(
                    &std::env::var("ZKD_ENSEMBLE_DIFF_ZK_LOG").unwrap_or_else(|_| "warn".into()),
                )
                .cfg(&[
                    ("tickTime", &TICK_MS.to_string()),
                    ("initLimit", "10"),
                    ("syncLimit", &SYNC_LIMIT.to_string()),
                    ("localSessionsEnabled", "true"),
                    ("localSessionsUpgradingEnabled", "true"),
                ])
                .start_netns_ensemble(prefix, MEMBERS)
        })
        .await
        .expect("launcher thread")
        .unwrap_or_else(|e| panic!("{e}"));
        let addrs = ensemble.members().iter().map(|m| m.addr).collect();
        let cuts = ensemble.cuts();
        let ensemble = Arc::new(Mutex::new(ensemble));
        let control = MemberControl::start(ensemble.clone());
        Fleet {
            name: "zookeeper",
            members: addrs,
            control: control.url(),
            running: [true; MEMBERS as usize],
            cut: None,
            blackholed: None,
            cuts,
            _keep: Keep::ZooKeeper {
                _control: control,
                _ensemble: ensemble,
            },
        }
    }

    /// `POST /zkd/members/{id}/{op}`.
    async fn member_route(&self, id: u64, op: &str) -> Result<(), String> {
        self.post(format!("{}/zkd/members/{id}/{op}", self.control))
            .await
    }

    /// Cuts member `id` off from the others (`POST /zkd/partition?groups=ID`).
    pub async fn cut(&mut self, id: u64) -> Result<(), String> {
        self.post(format!("{}/zkd/partition?groups={id}", self.control))
            .await?;
        self.cut = Some(id);
        Ok(())
    }

    /// Loses what member `from` sends member `to`
    /// (`POST /zkd/partition?one_way=FROM>TO`); `cut` is the member that leaves the others.
    pub async fn cut_one_way(&mut self, from: u64, to: u64, cut: u64) -> Result<(), String> {
        let url = format!("{}/zkd/partition?one_way={from}%3E{to}", self.control);
        self.post(url).await?;
        self.cut = Some(cut);
        Ok(())
    }

    /// Ends the cut (`POST /zkd/heal`).
    pub async fn heal(&mut self) -> Result<(), String> {
        self.post(format!("{}/zkd/heal", self.control)).await?;
        self.cut = None;
        Ok(())
    }

    /// Loses everything between the clients and member `id`, without a reset: zkd's
    /// blackhole on the member's connections (`POST /zkd/net-faults`), or nft drop rules for
    /// the test's address in the member's namespace.
    pub async fn blackhole(&mut self, id: u64) -> Result<(), String> {
        match self.cuts.clone() {
            Some(cuts) => blocking(move || cuts.blackhole_client(id)).await?,
            None => {
                let url = format!("{}/zkd/net-faults", self.control);
                let body = format!(r#"{{"action":"blackhole","member":{id}}}"#);
                self.call(url, "POST", Some(body)).await?
            }
        }
        self.blackholed = Some(id);
        Ok(())
    }

    /// Ends the blackhole (`DELETE /zkd/net-faults`, or the drop rules removed).
    pub async fn clear_blackhole(&mut self) -> Result<(), String> {
        match self.cuts.clone() {
            Some(cuts) => blocking(move || cuts.heal()).await?,
            None => {
                let url = format!("{}/zkd/net-faults", self.control);
                self.call(url, "DELETE", None).await?
            }
        }
        self.blackholed = None;
        Ok(())
    }

    async fn post(&self, url: String) -> Result<(), String> {
        self.call(url, "POST", None).await
    }

    async fn call(
        &self,
        url: String,
        method: &'static str,
        body: Option<String>,
    ) -> Result<(), String> {
        blocking(
            move || match zkd_testkit::http::call(&url, method, body.as_deref())? {
                (status, _) if (200..300).contains(&status) => Ok(()),
                (status, body) => Err(format!("{method} {url} answered {status}: {body}")),
            },
        )
        .await
    }
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("blocking thread: {e}"))?
}

impl Fleet {
    pub async fn stop(&mut self, id: u64) -> Result<(), String> {
        self.member_route(id, "stop").await?;
        self.running[id as usize - 1] = false;
        Ok(())
    }

    pub async fn start(&mut self, id: u64) -> Result<(), String> {
        self.member_route(id, "start").await?;
        self.running[id as usize - 1] = true;
        Ok(())
    }

    /// Member `id`'s answer to the four-letter word `w`.
    async fn word(&self, id: u64, w: &'static str) -> Result<String, String> {
        let addr = self.members[id as usize - 1];
        tokio::task::spawn_blocking(move || four_letter_word(addr, w))
            .await
            .map_err(|e| format!("{w} thread: {e}"))?
            .map_err(|e| format!("{}: {w} on member {id}: {e}", self.name))
    }

    /// Member `id`'s `conf` as the sides can agree on it: every line's key in order (the
    /// membership lines' too), with the value where it does not depend on ports or
    /// directories.
    pub async fn conf_shape(&self, id: u64) -> Result<Vec<String>, String> {
        let conf = self.word(id, "conf").await?;
        const SAME: [&str; 6] = [
            "tickTime",
            "serverId",
            "initLimit",
            "syncLimit",
            "electionAlg",
            "peerType",
        ];
        Ok(conf
            .lines()
            .map(|l| match l.split_once('=') {
                Some((k, _)) if SAME.contains(&k) => l.to_string(),
                Some((k, _)) => k.to_string(),
                None => l.to_string(),
            })
            .collect())
    }

    /// The lines of member `id`'s `mntr` that start with one of `keys`, in order.
    pub async fn mntr_lines(&self, id: u64, keys: &'static [&str]) -> Result<Vec<String>, String> {
        let mntr = self.word(id, "mntr").await?;
        Ok(mntr
            .lines()
            .filter(|l| keys.iter().any(|k| l.starts_with(k)))
            .map(str::to_string)
            .collect())
    }

    /// The epoch in the `Zxid:` line of member `id`'s `srvr` (a leader's is its own).
    pub async fn leader_epoch(&self, id: u64) -> Result<i64, String> {
        let srvr = self.word(id, "srvr").await?;
        srvr.lines()
            .find_map(|l| l.strip_prefix("Zxid: 0x"))
            .and_then(|z| i64::from_str_radix(z.trim(), 16).ok())
            .map(|z| z >> 32)
            .ok_or_else(|| {
                format!(
                    "{}: no Zxid line in member {id}'s srvr: {srvr:?}",
                    self.name
                )
            })
    }

    /// Member ids that run, in id order.
    pub fn up(&self) -> Vec<u64> {
        (1..=MEMBERS)
            .filter(|id| self.running[*id as usize - 1])
            .collect()
    }

    /// Waits until the running members settle: with a quorum, one leader and followers;
    /// without, the one running member in read-only mode; a member cut off from the others
    /// serves read-only clients.
    pub async fn settle(&self) -> Result<Settled, String> {
        self.settle_until(true).await
    }

    /// As [`Fleet::settle`], but a member cut off from the others need only have stopped
    /// serving read-write clients (ZooKeeper's starts serving read-only ones a few seconds
    /// later; sessions that were on it move in the meantime).
    pub async fn settle_quorum(&self) -> Result<Settled, String> {
        self.settle_until(false).await
    }

    async fn settle_until(&self, cut_read_only: bool) -> Result<Settled, String> {
        let cut_mode_ok = |mode: Option<&str>| match mode {
            Some("read-only") => true,
            None => !cut_read_only,
            Some(_) => false,
        };
        let mut up = self.up();
        let cut = self.cut.filter(|c| up.contains(c));
        up.retain(|id| Some(*id) != cut);
        // A member whose clients are blackholed does not answer `srvr` either: the others
        // settle without it (it still counts, as it still takes part).
        let blackholed = self.blackholed.filter(|b| up.contains(b));
        up.retain(|id| Some(*id) != blackholed);
        let hidden = usize::from(blackholed.is_some());
        let addrs: Vec<(u64, SocketAddr)> = up
            .iter()
            .map(|id| (*id, self.members[*id as usize - 1]))
            .collect();
        if addrs.is_empty() {
            return Ok(Settled::Down);
        }
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let mut probe = addrs.clone();
            probe.extend(cut.map(|c| (c, self.members[c as usize - 1])));
            let mut modes: Vec<(u64, Option<String>)> = tokio::task::spawn_blocking(move || {
                probe
                    .into_iter()
                    .map(|(id, a)| (id, serving_mode(a)))
                    .collect()
            })
            .await
            .map_err(|e| format!("srvr thread: {e}"))?;
            let cut_mode = cut.and_then(|_| modes.pop()).map(|(_, m)| m);
            let cut_ok = cut_mode.as_ref().is_none_or(|m| cut_mode_ok(m.as_deref()));
            let leaders: Vec<u64> = modes
                .iter()
                .filter(|(_, m)| m.as_deref() == Some("leader"))
                .map(|(id, _)| *id)
                .collect();
            let followers = modes
                .iter()
                .filter(|(_, m)| m.as_deref() == Some("follower"))
                .count();
            if !cut_ok {
                // The cut-off member is not there yet.
            } else if (modes.len() + hidden) * 2 > MEMBERS as usize {
                if leaders.len() == 1 && followers + 1 == modes.len() {
                    return Ok(Settled::Leader(leaders[0]));
                }
                // Everyone seen follows: the blackholed member leads.
                if let (Some(b), true) =
                    (blackholed, leaders.is_empty() && followers == modes.len())
                {
                    return Ok(Settled::Leader(b));
                }
            } else if modes.len() == 1 && modes[0].1.as_deref() == Some("read-only") {
                return Ok(Settled::ReadOnly(modes[0].0));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{}: the members did not settle within {}s: {modes:?}, cut-off member \
                     {cut:?}: {cut_mode:?}",
                    self.name,
                    SETTLE_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }
}
