//! Drops the process's mapped code pages once the server is up, so that the code only start-up
//! ran (argument parsing, configuration, the allocator's and runtime's set-up, loading the
//! data directory) does not stay in the server's resident set for its lifetime.
//!
//! Why: a page fault on code maps the 64 KiB around the faulting address (the kernel's
//! fault-around), and start-up runs a little code in most of the binary's 64-KiB stretches,
//! so that an idle server kept about 3.5 MiB of its 5.4 MiB of code resident, half of its
//! whole RSS. Serving clients touches far fewer stretches. Telling the kernel, once, that the
//! code mappings are not needed (`MADV_DONTNEED`) unmaps their pages from this process; the
//! next call into a dropped page maps it again from the page cache (a minor fault, no disk
//! read while the file stays cached), so only the code the server goes on to run comes back.
//!
//! Only mappings that are executable, not writable, private and backed by a file, and that
//! hold no page this process has written (a debugger's breakpoint, say), are touched: their
//! pages are the file's own (an executable mapping of a position-independent binary carries no
//! relocations), so dropping them loses nothing. Data, read-only data (relocated pages
//! included) and anonymous memory are left as they are.
#![allow(unsafe_code)] // One system call, on mappings checked as described above.

use std::io;

/// One mapping of `/proc/self/smaps`, as far as [`code_mappings`] needs it.
struct Mapping {
    start: usize,
    len: usize,
    /// Readable, executable, not writable, private, backed by a named file.
    private_file_code: bool,
    /// KiB of the mapping that are the process's own copies (pages written since they were
    /// mapped, such as a debugger's breakpoints): the mapping is left alone unless this is 0.
    anonymous: Option<u64>,
}

/// Parses a mapping's first line: `start-end perms offset device inode [path]`.
fn mapping_header(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    // offset, device, inode, then the path (absent for anonymous mappings).
    let path = fields.nth(3).unwrap_or("");
    Some(Mapping {
        start,
        len: end.checked_sub(start)?,
        private_file_code: perms == "r-xp" && path.starts_with('/'),
        anonymous: None,
    })
}

/// The code mappings of this process, from the text of `/proc/self/smaps`: `(start, length)`
/// of every mapping that is readable, executable, not writable, private and backed by a named
/// file, and none of whose pages this process has written.
fn code_mappings(smaps: &str) -> Vec<(usize, usize)> {
    let mut all: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Anonymous:") {
            if let Some(m) = all.last_mut() {
                m.anonymous = kb.trim().trim_end_matches("kB").trim().parse().ok();
            }
        } else if let Some(m) = mapping_header(line) {
            // Other field lines (`Name: value`) have no address range, so they are not taken.
            all.push(m);
        }
    }
    all.into_iter()
        .filter(|m| m.private_file_code && m.anonymous == Some(0) && m.len > 0)
        .map(|m| (m.start, m.len))
        .collect()
}

/// Drops the pages of every code mapping (see the module doc); returns how many bytes of
/// mappings it covered.
pub fn drop_code_pages() -> io::Result<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut covered = 0;
    for (start, len) in code_mappings(&smaps) {
        // SAFETY: the range is one whole mapping the kernel listed for this process as a
        // private, read-only, executable mapping of a file, with no page of it written by the
        // process. For such a mapping MADV_DONTNEED only unmaps clean file pages, which later
        // accesses map again with the same contents: no memory the process wrote is
        // discarded, and nothing read through the mapping changes. The range cannot have been
        // replaced since smaps was read: zkd never unmaps code (it unloads no library).
        // Measured reason: idle RSS of the server 6.8 -> 4.8 MiB (BENCHMARKS.md).
        let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        covered += len;
    }
    Ok(covered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One mapping's lines as smaps prints them, with `anon` KiB of the process's own pages.
    fn entry(header: &str, anon: u64) -> String {
        format!("{header}\nSize:               1024 kB\nRss:                 512 kB\nAnonymous:          {anon} kB\nVmFlags: rd ex mr mw me\n")
    }

    #[test]
    fn picks_only_unwritten_private_executable_file_mappings() {
        let smaps = [
            entry(
                "55d0c0000000-55d0c0100000 r--p 00000000 fe:01 123  /usr/bin/zkd",
                0,
            ),
            entry(
                "55d0c0100000-55d0c0600000 r-xp 00100000 fe:01 123  /usr/bin/zkd",
                0,
            ),
            entry(
                "55d0c0600000-55d0c0700000 r--p 00600000 fe:01 123  /usr/bin/zkd",
                8,
            ),
            entry(
                "55d0c0700000-55d0c0710000 rw-p 00700000 fe:01 123  /usr/bin/zkd",
                64,
            ),
            entry("7f0000000000-7f0000100000 rw-p 00000000 00:00 0 ", 1024),
            entry(
                "7f0000100000-7f0000200000 r-xp 00028000 fe:01 456  /usr/lib/libc.so.6",
                0,
            ),
            // A breakpoint written into this one: its pages are the process's own.
            entry(
                "7f0000300000-7f0000400000 r-xp 00028000 fe:01 457  /usr/lib/libx.so",
                4,
            ),
            entry(
                "7f0000500000-7f0000501000 r-xs 00000000 fe:01 789  /dev/shm/a:b",
                0,
            ),
            entry("7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0  [vdso]", 0),
            entry(
                "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]",
                0,
            ),
        ]
        .concat();
        assert_eq!(
            code_mappings(&smaps),
            vec![(0x55d0c0100000, 0x500000), (0x7f0000100000, 0x100000)]
        );
    }

    #[test]
    fn the_process_keeps_running_after_its_code_is_dropped() {
        let covered = drop_code_pages().expect("madvise");
        assert!(covered > 0, "found no code mappings");
        // Code runs again (faulted back in) and computes the same as before.
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 500_500);
        assert_eq!(format!("{:?}", &v[..3]), "[1, 2, 3]");
    }
}
