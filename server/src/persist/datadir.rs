//! A data directory in ZooKeeper's layout (`DIR/version-2/snapshot.<zxid>` and
//! `log.<zxid>`): finding files, writing snapshots crash-safely, and keeping only the newest
//! ones. Loading is in [`super::load`].

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The subdirectory ZooKeeper keeps its files in.
pub const VERSION_DIR: &str = "version-2";

/// A file of the data directory with the zxid in its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZxidFile {
    pub zxid: i64,
    pub path: PathBuf,
}

/// The zxid in a `prefix.<hex>` file name.
pub fn zxid_from_name(name: &str, prefix: &str) -> Option<i64> {
    let hex = name.strip_prefix(prefix)?.strip_prefix('.')?;
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(|z| z as i64)
}

/// `prefix.<zxid in lower-case hex>`, as ZooKeeper names its files.
pub fn file_name(prefix: &str, zxid: i64) -> String {
    format!("{prefix}.{:x}", zxid as u64)
}

/// What loading a data directory did.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The snapshot the state came from, if any.
    pub snapshot: Option<PathBuf>,
    pub snapshot_zxid: i64,
    /// Transactions replayed from logs after it.
    pub replayed: u64,
    /// The zxid of the loaded state.
    pub zxid: i64,
    pub nodes: usize,
    pub sessions: usize,
}

/// One data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    dir: PathBuf,
}

impl DataDir {
    /// Opens (creating if needed) `root/version-2`.
    pub fn open(root: &Path) -> io::Result<DataDir> {
        let dir = root.join(VERSION_DIR);
        fs::create_dir_all(&dir)?;
        Ok(DataDir { dir })
    }

    /// `root/version-2`, which must exist already (nothing is created).
    pub fn existing(root: &Path) -> io::Result<DataDir> {
        let dir = root.join(VERSION_DIR);
        if !fs::metadata(&dir)?.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        Ok(DataDir { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn list(&self, prefix: &str) -> io::Result<Vec<ZxidFile>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(zxid) = zxid_from_name(name, prefix) {
                out.push(ZxidFile {
                    zxid,
                    path: entry.path(),
                });
            }
        }
        out.sort_by_key(|f| f.zxid);
        Ok(out)
    }

    /// Snapshot files, oldest first.
    pub fn snapshots(&self) -> io::Result<Vec<ZxidFile>> {
        self.list("snapshot")
    }

    /// Log files, oldest first.
    pub fn logs(&self) -> io::Result<Vec<ZxidFile>> {
        self.list("log")
    }

    /// Writes a snapshot crash-safely: a temporary file, synced, renamed into place, and the
    /// directory synced. Returns the final path.
    pub fn write_snapshot(&self, zxid: i64, bytes: &[u8]) -> io::Result<PathBuf> {
        let name = file_name("snapshot", zxid);
        // Not starting with "snapshot." so no reader takes a half-written file for one.
        let tmp = self.dir.join(format!("tmp.{name}"));
        let dest = self.dir.join(&name);
        let written = File::create(&tmp).and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
        if let Err(e) = written {
            // A partial file would only take room (a full disk is the likely cause).
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, &dest)?;
        sync_dir(&self.dir)?;
        Ok(dest)
    }

    /// Keeps the newest `keep` snapshots (at least 1) and the logs they need; deletes the
    /// rest. Returns the files removed.
    pub fn purge(&self, keep: usize) -> io::Result<Vec<PathBuf>> {
        let keep = keep.max(1);
        let snaps = self.snapshots()?;
        if snaps.len() <= keep {
            return Ok(Vec::new());
        }
        let cut = snaps.len() - keep;
        let oldest_kept = snaps[cut].zxid;
        let mut removed = Vec::new();
        for s in &snaps[..cut] {
            fs::remove_file(&s.path)?;
            removed.push(s.path.clone());
        }
        // A log is needed if it may hold a transaction after the oldest kept snapshot:
        // every log from the last one starting at or before it.
        let logs = self.logs()?;
        if let Some(needed_from) = logs.iter().rposition(|l| l.zxid <= oldest_kept) {
            for l in &logs[..needed_from] {
                fs::remove_file(&l.path)?;
                removed.push(l.path.clone());
            }
        }
        for tmp in fs::read_dir(&self.dir)? {
            let tmp = tmp?;
            if tmp
                .file_name()
                .to_string_lossy()
                .starts_with("tmp.snapshot.")
            {
                let _ = fs::remove_file(tmp.path());
            }
        }
        Ok(removed)
    }
}

/// Makes a rename or a new file in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(zxid_from_name("snapshot.1a", "snapshot"), Some(0x1a));
        assert_eq!(zxid_from_name("log.100000001", "log"), Some(0x1_0000_0001));
        assert_eq!(zxid_from_name("snapshot.1a.tmp", "snapshot"), None);
        assert_eq!(zxid_from_name("tmp.snapshot.1a", "snapshot"), None);
        assert_eq!(zxid_from_name("snapshotx.1", "snapshot"), None);
        assert_eq!(file_name("log", 0x1_0000_0001), "log.100000001");
    }
}
