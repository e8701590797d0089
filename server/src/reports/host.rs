//! Gathers [`HostInfo`] for `envi` and `mntr` from the environment and, on Linux, `/proc`.

/// Facts about the host and process (`envi`, `mntr`), gathered by [`gather`].
#[derive(Clone, Debug, Default)]
pub struct HostInfo {
    pub host_name: String,
    pub os_name: String,
    pub os_arch: String,
    pub os_version: String,
    pub user_name: String,
    pub user_home: String,
    pub user_dir: String,
    pub tmp_dir: String,
    /// What the process uses now.
    pub process: ProcessUse,
}

/// The process's memory and descriptors: what `envi`'s memory lines and `mntr`'s descriptor
/// counts show. Each is `None` where the platform does not tell.
#[derive(Clone, Debug, Default)]
pub struct ProcessUse {
    /// Resident set size of the process, in MiB.
    pub memory_used_mb: Option<u64>,
    /// Physical memory of the host, in MiB.
    pub memory_max_mb: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
}

/// Facts about the host and process, for reports.
pub(crate) fn gather() -> HostInfo {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let env = |key: &str| std::env::var(key).unwrap_or_default();
    HostInfo {
        host_name: read("/proc/sys/kernel/hostname")
            .or_else(|| read("/etc/hostname"))
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string()),
        os_name: java_os_name(std::env::consts::OS),
        os_arch: java_arch(std::env::consts::ARCH),
        os_version: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
        user_name: std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .or_else(user_from_passwd)
            .unwrap_or_default(),
        user_home: env("HOME"),
        user_dir: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        tmp_dir: std::env::temp_dir().display().to_string(),
        process: ProcessUse {
            memory_used_mb: read("/proc/self/status")
                .and_then(|s| kib_field(&s, "VmRSS:"))
                .map(mib),
            memory_max_mb: read("/proc/meminfo")
                .and_then(|s| kib_field(&s, "MemTotal:"))
                .map(mib),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.count() as u64),
            max_fds: read("/proc/self/limits").and_then(|s| max_open_files(&s)),
        },
    }
}

/// The name of the process's real user, from `/proc/self/status` and `/etc/passwd`.
fn user_from_passwd() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))?
        .split_whitespace()
        .nth(1)?;
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)? == uid).then(|| name.to_string())
    })
}

/// The value of a `Key:   1234 kB` line.
fn kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

fn mib(kib: u64) -> u64 {
    kib / 1024
}

/// The soft limit of the `Max open files` line of `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn java_os_name(os: &str) -> String {
    match os {
        "linux" => "Linux".into(),
        "macos" => "Mac OS X".into(),
        "windows" => "Windows".into(),
        "freebsd" => "FreeBSD".into(),
        other => other.into(),
    }
}

fn java_arch(arch: &str) -> String {
    match arch {
        "x86_64" => "amd64".into(),
        "x86" => "x86".into(),
        other => other.into(),
    }
}

#[cfg(test)]
impl HostInfo {
    /// A host that tells only its descriptor counts.
    pub(crate) fn with_fds(open: u64, max: u64) -> HostInfo {
        HostInfo {
            process: ProcessUse {
                open_fds: Some(open),
                max_fds: Some(max),
                ..ProcessUse::default()
            },
            ..HostInfo::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_fields() {
        let status = "Name:\tzkd\nVmRSS:\t   20480 kB\n";
        assert_eq!(kib_field(status, "VmRSS:"), Some(20480));
        assert_eq!(kib_field(status, "VmHWM:"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(java_arch("x86_64"), "amd64");
        assert_eq!(java_os_name("linux"), "Linux");
    }

    #[test]
    fn gathers_something() {
        let h = gather();
        assert!(!h.host_name.is_empty());
        assert!(!h.os_name.is_empty());
    }
}
