//! What the engine does with the transaction records the core hands over: a
//! [`RecordStore`] (the transaction log) stores each, and what the core declared to wait
//! for them ([`Held`]) is let go of only once they are stored, or dropped with the server
//! when one cannot be.

use bytes::Bytes;

use crate::core::{ConnId, Frame};

/// Keeps committed transaction records, in zxid order (the data directory's log).
pub trait RecordStore: Send {
    /// Stores one record (`TxnHeader` and body as a log holds them). An error names the
    /// file and what failed; the server then stops serving.
    fn store(&mut self, zxid: i64, record: Bytes) -> Result<(), String>;

    /// A leader starts epoch `epoch` from the state the previous one ended with; a data
    /// directory snapshots it then, as ZooKeeper's leader does when it takes over.
    fn epoch_started(&mut self, epoch: i64) {
        let _ = epoch;
    }

    /// The syncs that took longer than the store's warning threshold since the last call:
    /// each one's milliseconds and the size of the file synced (a bounded number).
    fn take_slow_syncs(&mut self) -> Vec<(u64, u64)> {
        Vec::new()
    }
}

/// What the core gave an outbox to leave only after the records it handed over are stored.
#[derive(Debug)]
pub(crate) enum Held {
    Frame(Frame),
    Close,
    Delay(u64),
}

/// Everything held in one core call, in the order given.
pub(crate) type HeldOut = Vec<(ConnId, Held)>;
