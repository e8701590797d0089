//! An Apache ZooKeeper ensemble from the one launcher: N JVMs running `QuorumPeerMain`, each
//! with the launcher's `zoo.cfg` settings plus `server.N` lines on free loopback ports and its
//! own `data/myid`; the last members may be observers (`server.N=...:observer`, and
//! `peerType=observer` in their own file). Or each member in a network namespace of its own
//! (see [`super::netns`]), on its own address with the usual ports. Dropping an
//! [`OracleEnsemble`] kills every member and removes the directory (and the namespaces).

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use super::netns::{Cuts, Network};
use super::{four_letter_word, read_logs, tail, temp_dir, Launcher, START_ATTEMPTS, START_TIMEOUT};

/// Client, quorum and election ports of a member in its own namespace (each has its own
/// address, so all use ZooKeeper's usual ones).
const NETNS_PORTS: [u16; 3] = [2181, 2888, 3888];

/// Where a member listens: its address and its client, quorum and election ports.
struct Host {
    ip: Ipv4Addr,
    ports: [u16; 3],
}

/// The ensemble member's entry point.
pub const QUORUM_MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// One member of an ensemble.
#[derive(Debug, Clone)]
pub struct EnsembleMember {
    /// Its server id (`myid`), 1..=N.
    pub id: u64,
    /// Its client address.
    pub addr: SocketAddr,
    /// Its directory (`zoo.cfg`, `data/`, logs).
    pub dir: PathBuf,
    /// Whether it is an observer (a non-voting member).
    pub observer: bool,
}

impl Launcher {
    /// Prepares an ensemble of `n` voting members under `dir` (one `member-<id>/` each, with
    /// `zoo.cfg` and `data/myid`) on free loopback ports, and returns every member with the
    /// command that runs it (stdio left to the caller).
    pub fn ensemble_commands(
        &self,
        dir: &Path,
        n: u64,
    ) -> Result<Vec<(EnsembleMember, Command)>, String> {
        self.ensemble_commands_with_observers(dir, n, 0)
    }

    /// As [`Launcher::ensemble_commands`], with `observers` observers after the `voters`
    /// voting members: ids `voters + 1 ..= voters + observers`, marked `:observer` on their
    /// `server.N` line in every member's file and `peerType=observer` in their own.
    pub fn ensemble_commands_with_observers(
        &self,
        dir: &Path,
        voters: u64,
        observers: u64,
    ) -> Result<Vec<(EnsembleMember, Command)>, String> {
        let n = voters + observers;
        // Hold every listener until all ports are chosen, so no port is picked twice.
        let listeners = (0..3 * n)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("cannot find free loopback ports: {e}"))?;
        let ports = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("cannot read a port: {e}"))?;
        drop(listeners);
        let hosts: Vec<Host> = ports
            .chunks(3)
            .map(|p| Host {
                ip: Ipv4Addr::LOCALHOST,
                ports: [p[0], p[1], p[2]],
            })
            .collect();
        self.plan(dir, voters, &hosts, None)
    }

    /// Every member's files and command: member `id` on `hosts[id - 1]` (client, quorum and
    /// election ports), the last `hosts.len() - voters` members observers. With `net`, each
    /// member listens for clients on its own address and runs in its namespace.
    fn plan(
        &self,
        dir: &Path,
        voters: u64,
        hosts: &[Host],
        net: Option<&Network>,
    ) -> Result<Vec<(EnsembleMember, Command)>, String> {
        let kind = |id: u64| if id > voters { ":observer" } else { "" };
        let servers: String = (1..=hosts.len() as u64)
            .zip(hosts)
            .map(|(id, h)| {
                let [_, q, e] = h.ports;
                format!("server.{id}={}:{q}:{e}{}\n", h.ip, kind(id))
            })
            .collect();
        let limits: String = [("initLimit", "10"), ("syncLimit", "5")]
            .iter()
            .filter(|(k, _)| !self.cfg.iter().any(|(ck, _)| ck == k))
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        (1..=hosts.len() as u64)
            .zip(hosts)
            .map(|(id, host)| {
                let member_dir = dir.join(format!("member-{id}"));
                let client_port = host.ports[0];
                let peer_type = if id > voters {
                    "peerType=observer\n"
                } else {
                    ""
                };
                let launcher = match net {
                    Some(_) => self
                        .clone()
                        .cfg(&[("clientPortAddress", &host.ip.to_string())]),
                    None => self.clone(),
                };
                let cfg = format!(
                    "{}{limits}{peer_type}{servers}",
                    launcher.zoo_cfg(client_port, &member_dir.join("data"))
                );
                let mut cmd = launcher.command_with(&member_dir, &cfg, QUORUM_MAIN_CLASS)?;
                if let Some(net) = net {
                    cmd = net.inside(id, &cmd);
                }
                fs::write(member_dir.join("data").join("myid"), format!("{id}\n"))
                    .map_err(|e| format!("cannot write myid: {e}"))?;
                let member = EnsembleMember {
                    id,
                    addr: SocketAddr::from((host.ip, client_port)),
                    dir: member_dir,
                    observer: id > voters,
                };
                Ok((member, cmd))
            })
            .collect()
    }

    /// Starts an ensemble of `n` members in a fresh temporary directory and waits until every
    /// member serves (its `srvr` reports leader, follower or observer). A port taken between
    /// choosing and binding it is retried with fresh ports.
    ///
    /// Members start in two steps so that the first election has one outcome: first the
    /// lowest `n / 2` members and member `n` (a bare quorum, which elects member `n`, the
    /// highest id among equal zxids), then the rest, which join as followers. Started all at
    /// once, the JVMs come up at different speeds and a quorum of the first ones up may elect
    /// a lower id before member `n` is running; ZooKeeper's rule is the same either way.
    pub fn start_ensemble(&self, n: u64) -> Result<OracleEnsemble, String> {
        self.start_ensemble_with_observers(n, 0)
    }

    /// Starts an ensemble of `voters` voting members and `observers` observers (ids after
    /// the voters', see [`Launcher::ensemble_commands_with_observers`]) and waits until every
    /// member serves. The bare quorum of voters starts first, as in
    /// [`Launcher::start_ensemble`]; the observers start with the remaining voters.
    pub fn start_ensemble_with_observers(
        &self,
        voters: u64,
        observers: u64,
    ) -> Result<OracleEnsemble, String> {
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            match self.launch(voters, observers, None) {
                Ok(ensemble) => return Ok(ensemble),
                Err((collision, e)) if collision => last = e,
                Err((_, e)) => return Err(e),
            }
        }
        Err(format!(
            "the ZooKeeper ensemble could not bind free ports after {START_ATTEMPTS} attempts: \
             {last}"
        ))
    }

    /// Starts an ensemble of `n` voting members, each JVM in a network namespace of its own
    /// on a private bridge (see [`Network`]): namespaces, bridge and links named after
    /// `prefix`, whose leftovers from an earlier run are removed first. Root only; fails
    /// saying why where the namespaces cannot be made. Members start as in
    /// [`Launcher::start_ensemble`]; dropping the ensemble kills them and removes the network.
    pub fn start_netns_ensemble(&self, prefix: &str, n: u64) -> Result<OracleEnsemble, String> {
        let net = Network::create(prefix, n)?;
        self.launch(n, 0, Some(net)).map_err(|(_, e)| e)
    }

    /// One attempt at starting an ensemble in a fresh temporary directory: the bare quorum
    /// first, then the rest; `Err((true, _))` when a member could not bind its ports.
    fn launch(
        &self,
        voters: u64,
        observers: u64,
        net: Option<Network>,
    ) -> Result<OracleEnsemble, (bool, String)> {
        let dir = temp_dir("zkd-oracle-ensemble")
            .map_err(|e| (false, format!("cannot create a temporary dir: {e}")))?;
        let plan = match &net {
            Some(net) => {
                let hosts: Vec<Host> = (1..=voters + observers)
                    .map(|id| Host {
                        ip: net.member_ip(id),
                        ports: NETNS_PORTS,
                    })
                    .collect();
                self.plan(&dir, voters, &hosts, Some(net))
            }
            None => self.ensemble_commands_with_observers(&dir, voters, observers),
        };
        let mut ensemble = OracleEnsemble {
            members: Vec::new(),
            children: Vec::new(),
            dir,
            launcher: self.clone(),
            net,
        };
        let plan = plan.map_err(|e| (false, e))?;
        let mut later = Vec::new();
        for (member, cmd) in plan {
            if member.id <= voters / 2 || member.id == voters {
                let child = spawn_logged(cmd, &member.dir)
                    .map_err(|e| (false, format!("{} ({e})", super::NOT_INSTALLED)))?;
                ensemble.children.push(Some(child));
            } else {
                later.push((ensemble.children.len(), cmd));
                ensemble.children.push(None);
            }
            ensemble.members.push(member);
        }
        ensemble.wait_serving()?;
        for (i, cmd) in later {
            let child = spawn_logged(cmd, &ensemble.members[i].dir)
                .map_err(|e| (false, format!("{} ({e})", super::NOT_INSTALLED)))?;
            ensemble.children[i] = Some(child);
        }
        ensemble.wait_serving()?;
        Ok(ensemble)
    }
}

/// Runs `cmd` with stdout and stderr appended to `dir/stdout.log`.
fn spawn_logged(mut cmd: Command, dir: &Path) -> Result<Child, String> {
    let log = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join("stdout.log"))
        .and_then(|f| Ok((f.try_clone()?, f)))
        .map_err(|e| format!("cannot write stdout.log: {e}"))?;
    cmd.stdout(log.0)
        .stderr(log.1)
        .spawn()
        .map_err(|e| format!("cannot run java: {e}"))
}

/// The mode a member's `srvr` reports once it serves requests (`leader`, `follower`,
/// `observer`, `standalone`); `None` while it does not serve.
pub fn serving_mode(addr: SocketAddr) -> Option<String> {
    let srvr = four_letter_word(addr, "srvr").ok()?;
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
}

/// A running Apache ZooKeeper ensemble owned by this process.
pub struct OracleEnsemble {
    members: Vec<EnsembleMember>,
    /// Each member's JVM, in id order; `None` while it is not started.
    children: Vec<Option<Child>>,
    dir: PathBuf,
    /// The launcher that made it, to start stopped members again.
    launcher: Launcher,
    /// The namespaces the members run in, if any; removed after the members end (fields
    /// drop after [`OracleEnsemble`]'s own `drop`).
    net: Option<Network>,
}

impl OracleEnsemble {
    /// The members, in id order.
    pub fn members(&self) -> &[EnsembleMember] {
        &self.members
    }

    /// `host:port,host:port,...` of every member, for a client.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(|m| m.addr.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The cuts of the network the members run in, when they run in namespaces
    /// ([`Launcher::start_netns_ensemble`]).
    pub fn cuts(&self) -> Option<Cuts> {
        self.net.as_ref().map(Network::cuts)
    }

    /// Process ids of the member JVMs, in id order.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().flatten().map(Child::id).collect()
    }

    /// Kills member `id`'s JVM (as a crash or a stopped host would end it).
    pub fn stop_member(&mut self, id: u64) -> Result<(), String> {
        let Some(child) = self
            .children
            .get_mut(id.wrapping_sub(1) as usize)
            .ok_or_else(|| format!("no member {id}"))?
        else {
            return Ok(());
        };
        let _ = child.kill();
        child
            .wait()
            .map(|_| ())
            .map_err(|e| format!("member {id} did not end: {e}"))
    }

    /// Starts member `id` again with its configuration and data directory (it rejoins the
    /// ensemble; this does not wait until it serves).
    pub fn start_member(&mut self, id: u64) -> Result<(), String> {
        let i = id.wrapping_sub(1) as usize;
        let member = self
            .members
            .get(i)
            .ok_or_else(|| format!("no member {id}"))?;
        if let Some(Ok(None)) = self.children[i].as_mut().map(Child::try_wait) {
            return Err(format!("member {id} is running"));
        }
        let cfg = fs::read_to_string(member.dir.join("zoo.cfg"))
            .map_err(|e| format!("cannot read member {id}'s zoo.cfg: {e}"))?;
        let mut cmd = self
            .launcher
            .command_with(&member.dir, &cfg, QUORUM_MAIN_CLASS)?;
        if let Some(net) = &self.net {
            cmd = net.inside(id, &cmd);
        }
        let child =
            spawn_logged(cmd, &member.dir).map_err(|e| format!("member {id} again: {e}"))?;
        self.children[i] = Some(child);
        Ok(())
    }

    /// Waits until every started member serves; `Err((true, _))` when a member could not
    /// bind.
    fn wait_serving(&mut self) -> Result<(), (bool, String)> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            for (child, member) in self.children.iter_mut().zip(&self.members) {
                let Some(child) = child else { continue };
                if let Ok(Some(status)) = child.try_wait() {
                    let log = read_logs(&member.dir);
                    let collision =
                        log.contains("Address already in use") || log.contains("BindException");
                    let msg = format!(
                        "ZooKeeper member {} exited during start-up ({status}); log:\n{}",
                        member.id,
                        tail(&log, 40)
                    );
                    return Err((collision, msg));
                }
            }
            let started = self.children.iter().zip(&self.members);
            if started
                .filter(|(child, _)| child.is_some())
                .all(|(_, m)| serving_mode(m.addr).is_some())
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let logs: String = self
                    .members
                    .iter()
                    .map(|m| format!("member {}:\n{}\n", m.id, tail(&read_logs(&m.dir), 15)))
                    .collect();
                return Err((
                    false,
                    format!(
                        "the ZooKeeper ensemble did not serve within {}s; logs:\n{logs}",
                        START_TIMEOUT.as_secs()
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for OracleEnsemble {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
        }
        for child in self.children.iter_mut().flatten() {
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_gets_the_server_lines_and_its_myid() {
        let dir = temp_dir("zkd-ensemble-plan").expect("temp dir");
        let plan = Launcher::new()
            .ensemble_commands(&dir, 3)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.len(), 3);
        let cfgs: Vec<String> = plan
            .iter()
            .map(|(m, _)| fs::read_to_string(m.dir.join("zoo.cfg")).expect("zoo.cfg"))
            .collect();
        for ((member, cmd), cfg) in plan.iter().zip(&cfgs) {
            let myid = fs::read_to_string(member.dir.join("data/myid")).expect("myid");
            assert_eq!(myid.trim(), member.id.to_string());
            assert!(cfg.contains(&format!("clientPort={}\n", member.addr.port())));
            assert!(cfg.contains("initLimit=10\n") && cfg.contains("syncLimit=5\n"));
            for id in 1..=3 {
                assert!(cfg.contains(&format!("server.{id}=127.0.0.1:")), "{cfg}");
            }
            let args: Vec<_> = cmd
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert!(args.iter().any(|a| a == QUORUM_MAIN_CLASS), "{args:?}");
        }
        // The same server lines everywhere, as a real ensemble's files have them.
        let lines = |cfg: &str| {
            cfg.lines()
                .filter(|l| l.starts_with("server."))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(lines(&cfgs[0]), lines(&cfgs[2]));
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn observers_are_marked_on_every_members_server_line_and_in_their_own_file() {
        let dir = temp_dir("zkd-ensemble-observers").expect("temp dir");
        let plan = Launcher::new()
            .ensemble_commands_with_observers(&dir, 3, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let observers: Vec<bool> = plan.iter().map(|(m, _)| m.observer).collect();
        assert_eq!(observers, [false, false, false, true]);
        for (member, _) in &plan {
            let cfg = fs::read_to_string(member.dir.join("zoo.cfg")).expect("zoo.cfg");
            let marked: Vec<&str> = cfg.lines().filter(|l| l.ends_with(":observer")).collect();
            assert_eq!(marked.len(), 1, "{cfg}");
            assert!(marked[0].starts_with("server.4=127.0.0.1:"), "{cfg}");
            assert_eq!(
                cfg.contains("peerType=observer\n"),
                member.observer,
                "{cfg}"
            );
        }
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
