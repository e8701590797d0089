//! What the kernel knows about a process: CPU time, resident memory, file-descriptor limits.

use std::io;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of utime/stime.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// User plus system CPU time of a process (all its threads), in seconds.
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_stat_cpu_ticks(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc/PID/stat"))?;
    Ok(ticks as f64 / clock_ticks_per_sec() as f64)
}

/// A reading of a process's CPU time: the kernel's per-process total in clock ticks (which
/// also counts threads that have exited) and the sum of its live threads' on-CPU
/// nanoseconds from `schedstat` (precise, but blind to threads that exit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    pub coarse: f64,
    pub precise: Option<f64>,
    pub threads: usize,
}

impl CpuSample {
    pub fn take(pid: u32) -> io::Result<CpuSample> {
        let coarse = cpu_seconds(pid)?;
        let mut precise = 0u64;
        let mut threads = 0;
        let mut ok = true;
        match std::fs::read_dir(format!("/proc/{pid}/task")) {
            Ok(dir) => {
                for t in dir.flatten() {
                    let path = t.path().join("schedstat");
                    match std::fs::read_to_string(path)
                        .ok()
                        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    {
                        Some(ns) => {
                            precise += ns;
                            threads += 1;
                        }
                        None => ok = false,
                    }
                }
            }
            Err(_) => ok = false,
        }
        Ok(CpuSample {
            coarse,
            precise: ok.then_some(precise as f64 / 1e9),
            threads,
        })
    }

    /// CPU time between two samples, when both were taken.
    pub fn between(from: Option<CpuSample>, to: Option<CpuSample>) -> Option<std::time::Duration> {
        from.zip(to)
            .map(|(a, b)| std::time::Duration::from_secs_f64(a.until(&b)))
    }

    /// CPU seconds from `self` to `later`: the precise figure when the same threads were
    /// there at both ends and it agrees with the coarse one, else the coarse one.
    pub fn until(&self, later: &CpuSample) -> f64 {
        let coarse = (later.coarse - self.coarse).max(0.0);
        match (self.precise, later.precise) {
            (Some(a), Some(b)) if self.threads == later.threads && b >= a => {
                let precise = b - a;
                let tick = 1.0 / clock_ticks_per_sec() as f64;
                if (precise - coarse).abs() <= 2.0 * tick + 0.1 * coarse {
                    precise
                } else {
                    coarse
                }
            }
            _ => coarse,
        }
    }
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line. The command name in
/// parentheses may contain spaces, so fields are counted after the last `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')': field 3 (state) is the first.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// Field `n` (1-based, as in proc(5)) of `/proc/PID/stat`, in seconds.
fn stat_field_seconds(pid: &str, n: usize) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let v: u64 = rest.split_whitespace().nth(n - 3)?.parse().ok()?;
    Some(v as f64 / clock_ticks_per_sec() as f64)
}

/// User-mode CPU seconds of every process on the machine (`user + nice` of /proc/stat).
pub fn machine_user_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    (f.len() == 2).then(|| (f[0] + f[1]) as f64 / clock_ticks_per_sec() as f64)
}

/// User-mode CPU seconds of this process, its waited-for children, and `others`.
pub fn our_user_seconds(others: &[u32]) -> f64 {
    let own = stat_field_seconds("self", 14).unwrap_or(0.0)
        + stat_field_seconds("self", 16).unwrap_or(0.0);
    own + others
        .iter()
        .filter_map(|p| stat_field_seconds(&p.to_string(), 14))
        .sum::<f64>()
}

/// Watches how much CPU processes other than the bench and its servers take, to tell a
/// measurement disturbed by someone else's work on the same machine.
#[derive(Debug, Clone, Copy)]
pub struct Bystanders {
    machine: f64,
    ours: f64,
    at: std::time::Instant,
}

impl Bystanders {
    pub fn start(servers: &[u32]) -> Option<Bystanders> {
        Some(Bystanders {
            machine: machine_user_seconds()?,
            ours: our_user_seconds(servers),
            at: std::time::Instant::now(),
        })
    }

    /// Average number of cores other processes kept busy (user mode) since `start`.
    pub fn cores(&self, servers: &[u32]) -> f64 {
        let (Some(machine), ours) = (machine_user_seconds(), our_user_seconds(servers)) else {
            return 0.0;
        };
        let secs = self.at.elapsed().as_secs_f64().max(1e-3);
        (((machine - self.machine) - (ours - self.ours)) / secs).max(0.0)
    }
}

/// Resident set size (`VmRSS`) of a process, in bytes.
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_status_kb(&status, "VmRSS:")
        .map(|kb| kb * 1024)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS in /proc/PID/status"))
}

/// The first number after `key` on its line: a `kB` value of `/proc/PID/status`, or the
/// soft limit of a `/proc/PID/limits` line.
pub fn parse_status_kb(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The "Max open files" soft limit of another process, from `/proc/PID/limits`.
pub fn process_nofile_limit(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    parse_status_kb(&limits, "Max open files")
}

/// File-descriptor limits of this process, before and after raising the soft limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimits {
    pub soft_before: u64,
    pub hard: u64,
    pub soft: u64,
}

/// Raises this process's RLIMIT_NOFILE soft limit to the hard limit (servers spawned later
/// inherit it).
pub fn raise_nofile_limit() -> FdLimits {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit to fill in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return FdLimits {
            soft_before: 0,
            hard: 0,
            soft: 0,
        };
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: a valid rlimit; raising the soft limit up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    FdLimits {
        soft_before: before,
        hard: lim.rlim_max,
        soft: lim.rlim_cur,
    }
}

/// Number of file descriptors this process has open.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Number of file descriptors another process has open.
pub fn open_fds_of(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|d| d.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_in_name() {
        let stat =
            "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 500 0 0 0 77 23 0 0 20 0 4 0 100 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(100));
    }

    #[test]
    fn status_value() {
        let s = "Name:\tzkd\nVmPeak:\t  10000 kB\nVmRSS:\t    4321 kB\n";
        assert_eq!(parse_status_kb(s, "VmRSS:"), Some(4321));
        assert_eq!(parse_status_kb(s, "VmHWM:"), None);
    }

    #[test]
    fn cpu_samples_agree() {
        let pid = std::process::id();
        let a = CpuSample::take(pid).unwrap();
        // Burn CPU until the coarse clock has moved by 60 ms (other test threads may come and
        // go meanwhile, which makes `until` fall back to it); measured in CPU time, not in
        // wall-clock time, so a loaded machine only makes it take longer.
        let mut x = 0u64;
        while cpu_seconds(pid).unwrap() - a.coarse < 0.06 {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        assert!(x != 1);
        let b = CpuSample::take(pid).unwrap();
        let d = a.until(&b);
        assert!(d > 0.02 && d < 10.0, "{d}");
        assert!(a.precise.is_some());
    }

    #[test]
    fn bystanders_are_measurable() {
        let b = Bystanders::start(&[]).unwrap();
        let c = b.cores(&[]);
        assert!((0.0..=256.0).contains(&c));
        assert!(machine_user_seconds().unwrap() > 0.0);
        assert!(our_user_seconds(&[]) >= 0.0);
    }

    #[test]
    fn own_process_is_readable() {
        let pid = std::process::id();
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(cpu_seconds(pid).unwrap() >= 0.0);
        assert!(process_nofile_limit(pid).unwrap() > 0);
    }
}
