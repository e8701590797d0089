//! The core's durable state: the transaction record of every zxid, snapshots in ZooKeeper's
//! format and snapshots taken while the core keeps serving. No I/O: the server writes the
//! bytes.

pub(crate) mod snapshot;
pub(crate) mod snapshot_cow;
pub(crate) mod txn_record;

#[cfg(test)]
mod snapshot_tests;
