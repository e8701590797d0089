//! [`RecordingOutbox`]: an outbox that keeps what the core gives it (frames, closes, delays) in
//! order, for the tests, fuzz programs and benchmarks that drive the core directly.

use bytes::Bytes;

use crate::{ConnId, Frame, Outbox, Release};

/// One call the core made on the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// A frame queued on the connection.
    Sent(ConnId),
    /// The connection is to be closed after what was queued.
    Closed(ConnId),
    /// What follows on the connection is to be held for this many milliseconds.
    Delayed(ConnId, u64),
}

/// What a [`RecordingOutbox`] keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Keep {
    /// Frames as one buffer each, closes, delays and the order of calls.
    #[default]
    Everything,
    /// As `Everything`, and each frame also in the parts the core gave it.
    Parts,
    /// Only the counts (a benchmark that must not grow with what it sends).
    Counts,
}

/// An [`Outbox`] that records instead of writing. Frames given in parts are joined into one
/// buffer (as a socket would receive them); [`RecordingOutbox::keeping_parts`] also keeps the
/// parts, to check which bodies replies share.
#[derive(Debug, Default)]
pub struct RecordingOutbox {
    /// Every frame queued, with its connection, in order.
    pub frames: Vec<(ConnId, Bytes)>,
    /// The frames in the parts the core gave them (only when keeping parts).
    pub parts: Vec<(ConnId, Frame)>,
    /// Connections closed, in order.
    pub closed: Vec<ConnId>,
    /// Every call, in order.
    pub log: Vec<Recorded>,
    /// When each frame in `frames` may leave, as the core declared it.
    pub releases: Vec<Release>,
    /// Frames queued, counted whatever is kept.
    pub sent: u64,
    /// Closes asked for, counted whatever is kept.
    pub closes: u64,
    keep: Keep,
}

impl RecordingOutbox {
    /// An outbox keeping every frame, close and delay.
    pub fn new() -> RecordingOutbox {
        RecordingOutbox::default()
    }

    /// An outbox that also keeps each frame in its parts ([`RecordingOutbox::parts`]).
    pub fn keeping_parts() -> RecordingOutbox {
        RecordingOutbox {
            keep: Keep::Parts,
            ..RecordingOutbox::default()
        }
    }

    /// An outbox that keeps nothing but the counts [`RecordingOutbox::sent`] and
    /// [`RecordingOutbox::closes`].
    pub fn counting() -> RecordingOutbox {
        RecordingOutbox {
            keep: Keep::Counts,
            ..RecordingOutbox::default()
        }
    }

    /// Removes and returns the frames queued on `conn`, oldest first; the others stay.
    pub fn take(&mut self, conn: ConnId) -> Vec<Bytes> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.frames)
            .into_iter()
            .partition(|(c, _)| *c == conn);
        self.frames = rest;
        mine.into_iter().map(|(_, f)| f).collect()
    }

    /// Forgets everything recorded (the counts stay).
    pub fn clear(&mut self) {
        self.frames.clear();
        self.releases.clear();
        self.parts.clear();
        self.closed.clear();
        self.log.clear();
    }
}

impl Outbox for RecordingOutbox {
    fn send(&mut self, conn: ConnId, frame: Bytes, release: Release) {
        self.send_frame(conn, Frame::from(frame), release);
    }

    fn send_frame(&mut self, conn: ConnId, frame: Frame, release: Release) {
        self.sent += 1;
        if self.keep == Keep::Counts {
            return;
        }
        self.log.push(Recorded::Sent(conn));
        if self.keep == Keep::Parts {
            self.parts.push((conn, frame.clone()));
        }
        self.frames.push((conn, frame.into_bytes()));
        self.releases.push(release);
    }

    fn close(&mut self, conn: ConnId, _release: Release) {
        self.closes += 1;
        if self.keep == Keep::Counts {
            return;
        }
        self.log.push(Recorded::Closed(conn));
        self.closed.push(conn);
    }

    fn delay(&mut self, conn: ConnId, ms: u64, _release: Release) {
        if self.keep != Keep::Counts {
            self.log.push(Recorded::Delayed(conn, ms));
        }
    }
}
