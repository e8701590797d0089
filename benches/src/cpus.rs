//! CPU sets for pinned runs: `--server-cpus` lists in taskset's syntax (`0`, `0,1`, `0-3`,
//! `0,2-3`), checked against the CPUs the host has online; the server is started under
//! `taskset -c LIST` and the bench process (every thread) is moved to the other CPUs.

use std::collections::BTreeSet;
use std::fmt;
use std::process::Command;

use crate::util::BenchResult;

/// A non-empty set of CPU numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<usize>);

/// The most CPU numbers a list may name (a typo such as `0-99999999` is refused, not
/// expanded).
const MAX_CPU: usize = 1 << 16;

impl CpuSet {
    /// Parses a taskset-style list: numbers and ranges `A-B` separated by commas.
    pub fn parse(list: &str) -> Result<CpuSet, String> {
        let mut set = BTreeSet::new();
        for part in list.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(format!("CPU list {list:?} has an empty entry"));
            }
            let num = |s: &str| {
                s.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n < MAX_CPU)
                    .ok_or_else(|| format!("CPU list {list:?}: {s:?} is not a CPU number"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("CPU list {list:?}: range {part} runs backwards"));
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(num(part)?);
                }
            }
        }
        Ok(CpuSet(set))
    }

    /// The CPUs the host has online (`/sys/devices/system/cpu/online`), else `0..nproc`.
    pub fn online() -> CpuSet {
        std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| CpuSet::parse(s.trim()).ok())
            .unwrap_or_else(|| {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                CpuSet((0..n).collect())
            })
    }

    /// Parses `list` and checks that every CPU it names is online on this host.
    pub fn parse_present(list: &str) -> Result<CpuSet, String> {
        let set = CpuSet::parse(list).map_err(|e| format!("--server-cpus: {e}"))?;
        let online = CpuSet::online();
        let missing: Vec<String> = set.0.difference(&online.0).map(|c| c.to_string()).collect();
        if !missing.is_empty() {
            return Err(format!(
                "--server-cpus {list}: this host has no CPU {} (CPUs online: {online}, nproc {})",
                missing.join(", "),
                online.len()
            ));
        }
        Ok(set)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `online` without these CPUs (`None` when nothing is left).
    pub fn others(&self, online: &CpuSet) -> Option<CpuSet> {
        let rest: BTreeSet<usize> = online.0.difference(&self.0).copied().collect();
        (!rest.is_empty()).then_some(CpuSet(rest))
    }

    /// Where the load generator runs when the server has these CPUs: the other online
    /// CPUs, or all of them when none are left; with a sentence saying which.
    pub fn load_cpus(&self) -> (CpuSet, String) {
        let online = CpuSet::online();
        match self.others(&online) {
            Some(rest) => {
                let text = format!("load on the other CPUs ({rest})");
                (rest, text)
            }
            None => {
                let text = format!("load on all CPUs ({online}: none left over)");
                (online, text)
            }
        }
    }
}

impl fmt::Display for CpuSet {
    /// Canonical list: runs of three or more as ranges (`0-3`), others by comma (`0,1`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus: Vec<usize> = self.0.iter().copied().collect();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            if j >= i + 2 {
                parts.push(format!("{}-{}", cpus[i], cpus[j]));
            } else {
                parts.extend(cpus[i..=j].iter().map(|c| c.to_string()));
            }
            i = j + 1;
        }
        f.write_str(&parts.join(","))
    }
}

/// Every `--server-cpus` value (repeatable; one value may also hold several sets separated
/// by `;`), parsed and checked against the host.
pub fn parse_flag_values(values: &[String]) -> Result<Vec<CpuSet>, String> {
    let mut sets: Vec<CpuSet> = Vec::new();
    for v in values {
        for list in v.split(';').map(str::trim).filter(|l| !l.is_empty()) {
            let set = CpuSet::parse_present(list)?;
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
    }
    Ok(sets)
}

/// `cmd` run under `taskset -c CPUS` (taskset sets the affinity and execs the program, so
/// the process id stays the program's).
pub fn pinned(cmd: &Command, cpus: &CpuSet) -> Command {
    zkd_testkit::under::under("taskset", &["-c", &cpus.to_string()], cmd)
}

/// Moves every thread of this process to `cpus` (threads started later inherit it).
pub fn pin_self(cpus: &CpuSet) -> BenchResult<()> {
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c"])
        .arg(cpus.to_string())
        .arg(std::process::id().to_string())
        .output()
        .map_err(|e| format!("cannot run taskset (util-linux) to pin the load generator: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "taskset could not pin the load generator to CPUs {cpus}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Whether `taskset` can be run (util-linux).
pub fn taskset_available() -> BenchResult<()> {
    match Command::new("taskset").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "taskset -V failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "--server-cpus needs taskset (package util-linux): {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_render_canonically() {
        let s = |l: &str| CpuSet::parse(l).unwrap().to_string();
        assert_eq!(s("0"), "0");
        assert_eq!(s("1,0"), "0,1");
        assert_eq!(s("0-3"), "0-3");
        assert_eq!(s("0,2-4,7,8"), "0,2-4,7,8");
        assert_eq!(CpuSet::parse("0-1").unwrap().len(), 2);
        for bad in ["", "a", "1-0", "0,,1", "-1", "99999999"] {
            assert!(CpuSet::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn absent_cpus_are_refused_and_the_load_gets_the_rest() {
        let online = CpuSet::online();
        let err = CpuSet::parse_present(&format!("0,{}", MAX_CPU - 1)).unwrap_err();
        assert!(err.contains("this host has no CPU 65535"), "{err}");
        let zero = CpuSet::parse_present("0").unwrap();
        let (load, text) = zero.load_cpus();
        if online.len() > 1 {
            assert!(!load.0.contains(&0));
            assert!(text.contains("other CPUs"), "{text}");
        } else {
            assert_eq!(load, online);
            assert!(text.contains("none left over"), "{text}");
        }
        let (all, text) = online.load_cpus();
        assert_eq!(all, online);
        assert!(text.contains("all CPUs"), "{text}");
        let sets = parse_flag_values(&["0".into(), "0; 0".into()]).unwrap();
        assert_eq!(sets, vec![zero]);
    }
}
