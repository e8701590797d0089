//! The version string the server reports for the ZooKeeper release line it behaves as: the
//! release, then zkd's own version, the commit and the build date the build script recorded.

use crate::ZookeeperVersion;

/// A version string as ZooKeeper prints it (`<version>-<revision>, built on <date> UTC`).
/// Clients parse the digits before the first `-` (kazoo's `server_version()`).
macro_rules! version_string {
    ($release:literal) => {
        concat!(
            $release,
            "-zkd-",
            env!("CARGO_PKG_VERSION"),
            "-",
            env!("ZKD_BUILD_COMMIT"),
            ", built on ",
            env!("ZKD_BUILD_DATE"),
            " UTC"
        )
    };
}

/// The version string `srvr`, `stat`, `envi`, `mntr` and the AdminServer report for `version`.
pub const fn version_string(version: ZookeeperVersion) -> &'static str {
    match version {
        ZookeeperVersion::V3_8 => version_string!("3.8.4"),
        ZookeeperVersion::V3_9 => version_string!("3.9.3"),
    }
}

/// [`version_string`] as a method of [`ZookeeperVersion`].
pub trait VersionString {
    /// The version string the server reports when behaving as this release line.
    fn version_string(self) -> &'static str;
}

impl VersionString for ZookeeperVersion {
    fn version_string(self) -> &'static str {
        version_string(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings_start_with_the_release() {
        for v in ZookeeperVersion::ALL {
            let s = v.version_string();
            assert!(s.starts_with(&format!("{}-zkd-", v.release())), "{s}");
            assert!(s.ends_with(" UTC"), "{s}");
        }
        assert!(version_string(ZookeeperVersion::V3_9).starts_with("3.9.3-zkd-"));
        assert!(version_string(ZookeeperVersion::V3_8).starts_with("3.8.4-zkd-"));
    }
}
