//! What Linux's /proc tells of a running process: its resident memory.

/// The resident set size of process `pid` in bytes (`VmRSS` in /proc/PID/status); panics
/// when the process is gone.
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("process {pid} is not running: {e}"));
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib * 1024
}
