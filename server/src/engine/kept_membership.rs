//! Keeps the membership a reconfig committed, so that a restart starts from it: ZooKeeper's
//! dynamic configuration file (`zoo.cfg.dynamic.<version in hex>`, its `server.N=` lines
//! sorted) in the data directory, written whole to a temporary name, synced and renamed, and
//! the older ones removed (docs/ensembles.md, "Reconfiguration across restarts").

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::config::{dynamic_file_name, DYNAMIC_FILE_PREFIX};
use crate::core::ServerSpec;

/// Writes `specs` as the membership of `version` in `dir`; returns the file's path.
pub(crate) fn keep(dir: &Path, version: i64, specs: &[ServerSpec]) -> std::io::Result<PathBuf> {
    let name = dynamic_file_name(version);
    let path = dir.join(&name);
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(ServerSpec::dynamic_file(specs).as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    fs::File::open(dir)?.sync_all()?;
    // The older memberships are superseded (a failure here leaves one behind, which a start
    // ignores: it takes the highest version).
    for entry in fs::read_dir(dir)?.flatten() {
        let other = entry.file_name();
        let other = other.to_string_lossy();
        if other.starts_with(DYNAMIC_FILE_PREFIX) && other != name {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(path)
}
