//! The Apache ZooKeeper release line zkd behaves as (`--zookeeper-version 3.8|3.9`) and every
//! behaviour that differs between the two (docs/protocol.md, "ZooKeeper versions").

use std::fmt;

/// The ZooKeeper release line a server behaves as. The two differ on the wire in the
/// reported version, the notification header zxid, the WatcherType values removeWatches and
/// checkWatches accept, and the AdminServer commands there are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ZookeeperVersion {
    /// ZooKeeper 3.8 (compared with 3.8.0).
    V3_8,
    /// ZooKeeper 3.9, the current release line (compared with 3.9.3).
    #[default]
    V3_9,
}

impl ZookeeperVersion {
    /// Both, oldest first.
    pub const ALL: [ZookeeperVersion; 2] = [ZookeeperVersion::V3_8, ZookeeperVersion::V3_9];

    /// `3.8` or `3.9`, as the flag takes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ZookeeperVersion::V3_8 => "3.8",
            ZookeeperVersion::V3_9 => "3.9",
        }
    }

    /// The release whose wire behaviour this line follows (`3.8.4` or `3.9.3`): the first
    /// part of the version string the server reports.
    pub const fn release(self) -> &'static str {
        match self {
            ZookeeperVersion::V3_8 => "3.8.4",
            ZookeeperVersion::V3_9 => "3.9.3",
        }
    }

    /// The zxid in a notification's reply header for a change made with `zxid`: 3.9 sends the
    /// change's zxid, 3.8 always -1.
    pub fn notification_zxid(self, zxid: i64) -> i64 {
        match self {
            ZookeeperVersion::V3_8 => -1,
            ZookeeperVersion::V3_9 => zxid,
        }
    }

    /// Whether removeWatches and checkWatches take WatcherType Persistent (4) and
    /// PersistentRecursive (5); 3.8 refuses them with MARSHALLINGERROR, and there its Any (3)
    /// also removes persistent watches.
    pub fn persistent_watcher_types(self) -> bool {
        self == ZookeeperVersion::V3_9
    }
}

impl fmt::Display for ZookeeperVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ZookeeperVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "3.8" => Ok(ZookeeperVersion::V3_8),
            "3.9" => Ok(ZookeeperVersion::V3_9),
            other => Err(format!(
                "{other:?} is not a ZooKeeper version zkd behaves as; expected 3.8 or 3.9"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_and_refuses_others() {
        assert_eq!("3.8".parse(), Ok(ZookeeperVersion::V3_8));
        assert_eq!("3.9".parse(), Ok(ZookeeperVersion::V3_9));
        assert!("3.7".parse::<ZookeeperVersion>().is_err());
        assert!("3.9.3".parse::<ZookeeperVersion>().is_err());
        assert_eq!(ZookeeperVersion::default(), ZookeeperVersion::V3_9);
    }

    #[test]
    fn releases_are_of_their_line() {
        for v in ZookeeperVersion::ALL {
            assert!(v.release().starts_with(&format!("{v}.")), "{v}");
        }
    }

    #[test]
    fn notification_zxid_is_minus_one_on_3_8() {
        assert_eq!(ZookeeperVersion::V3_8.notification_zxid(7), -1);
        assert_eq!(ZookeeperVersion::V3_9.notification_zxid(7), 7);
    }
}
