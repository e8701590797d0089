//! A private network for an Apache ZooKeeper ensemble, and the cuts a test makes in it: each
//! member in a network namespace of its own (loopback up, one veth whose other end is on a
//! bridge the test makes), the test's own namespace on the bridge too (its address is the
//! clients' address), all on a private `10.x.y.0/24` that no interface or route of the
//! machine uses. Cuts are what iproute2 and nftables offer: drop rules in each member's
//! namespace (`inet` table `zkdcut`: an input and an output chain), a link set down, and
//! netem delay where the kernel has it.
//!
//! Everything is named after a prefix (`PREFIX-mN` namespaces, `PREFIX-br` bridge,
//! `PREFIX-vN` veths): leftovers of an earlier run with the same prefix (a test that
//! crashed) are removed before the network is made, processes still in its namespaces
//! killed, and dropping the [`Network`] removes all it made. Needs root, `ip` (iproute2)
//! and `nft` (nftables); [`Network::create`] says which is missing.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// The nftables table every member's namespace holds.
const TABLE: &str = "zkdcut";
/// The last octet of the test's (the clients') address on the bridge.
const CLIENT_OCTET: u8 = 254;
/// The longest prefix: interface names have at most 15 bytes (`PREFIX-vNN`).
const MAX_PREFIX: usize = 9;

/// A private network of namespaced members; removed on drop.
pub struct Network {
    cuts: Cuts,
}

/// The cuts in a [`Network`]: a handle that can be cloned and used from any thread. A cut
/// made after the network is gone fails.
#[derive(Clone)]
pub struct Cuts {
    prefix: String,
    /// `10.x.y` of the network's /24.
    net: [u8; 3],
    members: u64,
    state: Arc<Mutex<CutState>>,
}

#[derive(Default)]
struct CutState {
    /// Directed drops between members: packets from the first to the second are lost.
    between: BTreeSet<(u64, u64)>,
    /// Members whose traffic with the test's address is lost both ways.
    blackholed: BTreeSet<u64>,
    /// Members whose link is down.
    down: BTreeSet<u64>,
    /// Members whose links carry netem delay.
    delayed: BTreeSet<u64>,
}

/// Runs a command, its stdin fed from `input`; its stdout, or an error naming the command
/// and holding its stderr.
fn run(args: &[&str], input: Option<&str>) -> Result<String, String> {
    let (prog, rest) = args.split_first().ok_or("an empty command")?;
    let mut cmd = Command::new(prog);
    cmd.args(rest)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{}`: {e}", args.join(" ")))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("`{}`: cannot write its input: {e}", args.join(" ")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{}` did not end: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why namespaces cannot be made here, if they cannot: not root, or a tool missing.
pub fn unavailable() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("");
    if euid != "0" {
        return Some(format!(
            "the ZooKeeper ensemble in network namespaces needs root (effective uid {euid:?}): \
             run this test as root"
        ));
    }
    for (tool, package) in [("ip", "iproute2"), ("nft", "nftables"), ("tc", "iproute2")] {
        let version = if tool == "nft" { "-v" } else { "-V" };
        if let Err(e) = run(&[tool, version], None) {
            return Some(format!(
                "the ZooKeeper ensemble in network namespaces needs `{tool}` (Debian package \
                 {package}; scripts/install-test-deps.sh installs it): {e}"
            ));
        }
    }
    None
}

/// Removes what an earlier run with `prefix` left: its namespaces (killing what still runs
/// in them), its bridge and veths.
fn remove_leftovers(prefix: &str) {
    let mine = |name: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('-'))
    };
    let spaces = run(&["ip", "netns", "list"], None).unwrap_or_default();
    for ns in spaces.lines().filter_map(|l| l.split_whitespace().next()) {
        if !mine(ns) {
            continue;
        }
        let pids = run(&["ip", "netns", "pids", ns], None).unwrap_or_default();
        for pid in pids.split_whitespace() {
            let _ = run(&["kill", "-KILL", pid], None);
        }
        let _ = run(&["ip", "netns", "del", ns], None);
    }
    let links = run(&["ip", "-o", "link", "show"], None).unwrap_or_default();
    for link in links.lines() {
        // `7: NAME@peer: <...` or `7: NAME: <...`
        let Some(name) = link.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        if mine(name) {
            let _ = run(&["ip", "link", "del", name], None);
        }
    }
}

/// A `10.x.y` whose /24 no address or route of this namespace touches.
fn free_subnet(prefix: &str) -> Result<[u8; 3], String> {
    let addrs = run(&["ip", "-4", "-o", "addr", "show"], None)?;
    let routes = run(&["ip", "-4", "route", "show", "table", "all"], None)?;
    let used = format!("{addrs}\n{routes}");
    // Start where the prefix points, so runs with different prefixes rarely meet.
    let start = prefix
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
        % 200;
    for k in 0..200u32 {
        let n = 20 + (start + k) % 200;
        let x = 200 + (n / 256) as u8;
        let y = (n % 256) as u8;
        let net = format!("10.{x}.{y}.");
        if !used.contains(&net) && !used.contains(&format!("10.{x}.0.0/16")) {
            return Ok([10, x, y]);
        }
    }
    Err("no free 10.x.y.0/24 for the namespaced ensemble".into())
}

impl Network {
    /// Makes the network for `members` members named after `prefix` (at most 9 bytes, ASCII
    /// letters and digits), after removing an earlier run's leftovers. Fails, saying why,
    /// where namespaces cannot be made (not root, a tool missing, the kernel refusing).
    pub fn create(prefix: &str, members: u64) -> Result<Network, String> {
        if prefix.is_empty()
            || prefix.len() > MAX_PREFIX
            || !prefix.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(format!(
                "namespace prefix {prefix:?}: give 1 to {MAX_PREFIX} ASCII letters or digits"
            ));
        }
        if !(1..=9).contains(&members) {
            return Err(format!(
                "{members} members: a namespaced ensemble has 1 to 9"
            ));
        }
        if let Some(why) = unavailable() {
            return Err(why);
        }
        remove_leftovers(prefix);
        let net = free_subnet(prefix)?;
        let network = Network {
            cuts: Cuts {
                prefix: prefix.to_string(),
                net,
                members,
                state: Arc::default(),
            },
        };
        network
            .build()
            .map_err(|e| format!("cannot make the network namespaces of {prefix:?}: {e}"))?;
        Ok(network)
    }

    fn build(&self) -> Result<(), String> {
        let c = &self.cuts;
        let bridge = c.bridge();
        let client = format!("{}/24", c.client_ip());
        run(&["ip", "link", "add", &bridge, "type", "bridge"], None)?;
        run(&["ip", "addr", "add", &client, "dev", &bridge], None)?;
        run(&["ip", "link", "set", &bridge, "up"], None)?;
        for id in 1..=c.members {
            let ns = c.namespace(id);
            let outer = c.veth(id);
            let inner = format!("{}-p{id}", c.prefix);
            let addr = format!("{}/24", c.member_ip(id));
            run(&["ip", "netns", "add", &ns], None)?;
            run(
                &[
                    "ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner,
                ],
                None,
            )?;
            run(&["ip", "link", "set", &inner, "netns", &ns], None)?;
            let inside = |args: &[&str]| {
                let mut all = vec!["ip", "netns", "exec", &ns];
                all.extend_from_slice(args);
                run(&all, None)
            };
            inside(&["ip", "link", "set", &inner, "name", "eth0"])?;
            inside(&["ip", "addr", "add", &addr, "dev", "eth0"])?;
            inside(&["ip", "link", "set", "eth0", "up"])?;
            inside(&["ip", "link", "set", "lo", "up"])?;
            run(
                &["ip", "link", "set", &outer, "master", &bridge, "up"],
                None,
            )?;
        }
        c.apply()
    }

    /// The handle that cuts this network's links.
    pub fn cuts(&self) -> Cuts {
        self.cuts.clone()
    }

    /// Member `id`'s address.
    pub fn member_ip(&self, id: u64) -> Ipv4Addr {
        self.cuts.member_ip(id)
    }

    /// `cmd` run inside member `id`'s namespace (`ip netns exec`, which then runs the
    /// program itself, so the child's pid is the program's).
    pub fn inside(&self, id: u64, cmd: &Command) -> Command {
        let ns = self.cuts.namespace(id);
        let mut wrapped = crate::under::under("ip", &["netns", "exec", &ns], cmd);
        wrapped.stdin(Stdio::null());
        wrapped
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        remove_leftovers(&self.cuts.prefix);
    }
}

impl Cuts {
    fn namespace(&self, id: u64) -> String {
        format!("{}-m{id}", self.prefix)
    }

    fn bridge(&self) -> String {
        format!("{}-br", self.prefix)
    }

    fn veth(&self, id: u64) -> String {
        format!("{}-v{id}", self.prefix)
    }

    /// Member `id`'s address: `10.x.y.id`.
    pub fn member_ip(&self, id: u64) -> Ipv4Addr {
        let [a, b, c] = self.net;
        Ipv4Addr::new(a, b, c, id as u8)
    }

    /// The test's own address on the bridge, which its clients connect from.
    pub fn client_ip(&self) -> Ipv4Addr {
        let [a, b, c] = self.net;
        Ipv4Addr::new(a, b, c, CLIENT_OCTET)
    }

    fn check(&self, id: u64) -> Result<(), String> {
        if (1..=self.members).contains(&id) {
            Ok(())
        } else {
            Err(format!("no member {id} (members 1..={})", self.members))
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut CutState) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut state)
    }

    /// Splits the members into `groups` (members named in no group form one more group):
    /// everything between members of different groups is dropped, both ways, while the test
    /// still reaches every member. Replaces the member-to-member cuts made before.
    pub fn split(&self, groups: &[Vec<u64>]) -> Result<(), String> {
        self.partition(groups, &[])
    }

    /// As [`Cuts::split`], and besides what each `(from, to)` of `one_way` sends the other is
    /// lost (as zkd's `POST /zkd/partition?groups=…&one_way=FROM>TO`).
    pub fn partition(&self, groups: &[Vec<u64>], one_way: &[(u64, u64)]) -> Result<(), String> {
        let mut group_of = vec![groups.len(); self.members as usize];
        for (g, ids) in groups.iter().enumerate() {
            for id in ids {
                self.check(*id)?;
                group_of[*id as usize - 1] = g;
            }
        }
        for (from, to) in one_way {
            self.check(*from)?;
            self.check(*to)?;
        }
        self.with(|s| {
            s.between.clear();
            for a in 1..=self.members {
                for b in 1..=self.members {
                    if group_of[a as usize - 1] != group_of[b as usize - 1] {
                        s.between.insert((a, b));
                    }
                }
            }
            s.between.extend(one_way.iter().copied());
        });
        self.apply()
    }

    /// Cuts member `id` off from the other members; the test's clients still reach it.
    pub fn isolate(&self, id: u64) -> Result<(), String> {
        self.split(&[vec![id]])
    }

    /// Loses what member `from` sends member `to` (the other way still works), besides the
    /// cuts already made.
    pub fn drop_one_way(&self, from: u64, to: u64) -> Result<(), String> {
        self.check(from)?;
        self.check(to)?;
        self.with(|s| s.between.insert((from, to)));
        self.apply()
    }

    /// Loses everything between the test's address and member `id`, both ways, without a
    /// reset: a client there hears nothing, and notices only by its own timeout.
    pub fn blackhole_client(&self, id: u64) -> Result<(), String> {
        self.check(id)?;
        self.with(|s| s.blackholed.insert(id));
        self.apply()
    }

    /// Sets member `id`'s link down: nothing reaches it, neither members nor clients.
    pub fn link_down(&self, id: u64) -> Result<(), String> {
        self.check(id)?;
        run(&["ip", "link", "set", &self.veth(id), "down"], None)?;
        self.with(|s| s.down.insert(id));
        Ok(())
    }

    /// Adds `ms` milliseconds each way on member `id`'s link (netem on both ends). Fails
    /// where the kernel has no netem (`Specified qdisc kind is unknown`).
    pub fn delay(&self, id: u64, ms: u32) -> Result<(), String> {
        self.check(id)?;
        let delay = format!("{ms}ms");
        let ns = self.namespace(id);
        let veth = self.veth(id);
        let netem = |prefix: &[&str], dev: &str| {
            let mut args = prefix.to_vec();
            args.extend_from_slice(&[
                "tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", &delay,
            ]);
            run(&args, None).map_err(|e| {
                format!("added latency needs the kernel's netem queueing discipline: {e}")
            })
        };
        netem(&["ip", "netns", "exec", &ns], "eth0")?;
        self.with(|s| s.delayed.insert(id));
        netem(&[], &veth)?;
        Ok(())
    }

    /// Ends every cut: no drop rule, every link up, no delay.
    pub fn heal(&self) -> Result<(), String> {
        let (down, delayed) = self.with(|s| {
            s.between.clear();
            s.blackholed.clear();
            (std::mem::take(&mut s.down), std::mem::take(&mut s.delayed))
        });
        for id in down {
            run(&["ip", "link", "set", &self.veth(id), "up"], None)?;
        }
        for id in delayed {
            let ns = self.namespace(id);
            let _ = run(
                &[
                    "ip", "netns", "exec", &ns, "tc", "qdisc", "del", "dev", "eth0", "root",
                ],
                None,
            );
            let _ = run(&["tc", "qdisc", "del", "dev", &self.veth(id), "root"], None);
        }
        self.apply()
    }

    /// Member `id`'s rules as an nft script: the table emptied and filled again.
    fn rules(&self, id: u64) -> String {
        let (between, blackholed) = self.with(|s| (s.between.clone(), s.blackholed.contains(&id)));
        let mut input = String::new();
        let mut output = String::new();
        for (a, b) in between {
            if b == id {
                input.push_str(&format!("    ip saddr {} drop\n", self.member_ip(a)));
            }
            if a == id {
                output.push_str(&format!("    ip daddr {} drop\n", self.member_ip(b)));
            }
        }
        if blackholed {
            input.push_str(&format!("    ip saddr {} drop\n", self.client_ip()));
            output.push_str(&format!("    ip daddr {} drop\n", self.client_ip()));
        }
        format!(
            "table inet {TABLE} {{}}\nflush table inet {TABLE}\ntable inet {TABLE} {{\n  \
             chain input {{\n    type filter hook input priority 0; policy accept;\n{input}  \
             }}\n  chain output {{\n    type filter hook output priority 0; policy accept;\n\
             {output}  }}\n}}\n"
        )
    }

    /// Writes every member's rules (each namespace's table replaced at once).
    fn apply(&self) -> Result<(), String> {
        for id in 1..=self.members {
            let ns = self.namespace(id);
            run(
                &["ip", "netns", "exec", &ns, "nft", "-f", "-"],
                Some(&self.rules(id)),
            )?;
        }
        Ok(())
    }

    /// Member `id`'s rules as nftables lists them (for reports).
    pub fn ruleset(&self, id: u64) -> Result<String, String> {
        self.check(id)?;
        let ns = self.namespace(id);
        run(
            &[
                "ip", "netns", "exec", &ns, "nft", "list", "table", "inet", TABLE,
            ],
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuts(members: u64) -> Cuts {
        Cuts {
            prefix: "zkdunit".into(),
            net: [10, 201, 7],
            members,
            state: Arc::default(),
        }
    }

    #[test]
    fn a_split_drops_both_ways_between_groups_only() {
        let c = cuts(3);
        c.with(|s| {
            s.between.extend([(1, 2), (2, 1), (1, 3), (3, 1)]);
        });
        let one = c.rules(1);
        assert!(one.contains("ip saddr 10.201.7.2 drop"), "{one}");
        assert!(one.contains("ip daddr 10.201.7.3 drop"), "{one}");
        let two = c.rules(2);
        assert!(two.contains("ip saddr 10.201.7.1 drop"), "{two}");
        assert!(!two.contains("10.201.7.3"), "{two}");
        assert!(!two.contains("10.201.7.254"), "{two}");
    }

    #[test]
    fn a_blackholed_member_drops_the_clients_address_both_ways() {
        let c = cuts(3);
        c.with(|s| s.blackholed.insert(2));
        let two = c.rules(2);
        assert!(two.contains("ip saddr 10.201.7.254 drop"), "{two}");
        assert!(two.contains("ip daddr 10.201.7.254 drop"), "{two}");
        assert!(!c.rules(1).contains("drop"));
    }

    #[test]
    fn bad_prefixes_and_members_are_refused() {
        assert!(Network::create("has-dash", 3).is_err());
        assert!(Network::create("waytoolongprefix", 3).is_err());
        assert!(cuts(3).check(4).is_err());
    }
}
