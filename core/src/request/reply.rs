//! Reply frames under construction: the header is written last, the body straight into the
//! frame's buffer, and a long shared body (a cached child list) is kept as a part of its own.

use bytes::{BufMut, Bytes, BytesMut};

use crate::Frame;

/// Bytes before a reply body: frame length (4) and ReplyHeader (16).
const HEADER_LEN: usize = 20;

/// Room made for a body of unknown size (most fit: a Stat, a path).
const BODY_HINT: usize = 108;

/// Bytes of an encoded Stat. A reply of a Stat alone is made with exactly this room, so
/// the frame fills its buffer and is handed on without a second allocation.
pub(crate) const STAT_LEN: usize = 68;

/// A reply under construction.
pub(crate) struct Reply {
    buf: BytesMut,
    /// A shared body after `buf` (a cached child list), not copied into the frame.
    shared: Bytes,
    /// What is written after `shared`.
    tail: BytesMut,
}

/// A shared body at least this long is sent as its own part; a shorter one is copied.
pub(crate) const SHARE_MIN: usize = 1024;

impl Reply {
    /// An empty reply: the buffer is made by the first write, sized for it.
    pub(crate) fn new() -> Reply {
        Reply {
            buf: BytesMut::new(),
            shared: Bytes::new(),
            tail: BytesMut::new(),
        }
    }

    /// Makes room for the header (once), with room for `extra` body bytes after it.
    pub(crate) fn head(&mut self, extra: usize) {
        if self.buf.is_empty() {
            // Made at its size at once: growing an empty buffer takes a slower path.
            self.buf = BytesMut::with_capacity(HEADER_LEN + extra);
            self.buf.put_bytes(0, HEADER_LEN);
        }
    }

    /// Where the body is written next.
    pub(crate) fn body(&mut self) -> &mut BytesMut {
        self.body_for(BODY_HINT)
    }

    /// Where the body is written next, made with room for `extra` bytes if not made yet (a
    /// reply whose size is known is allocated once, not grown).
    pub(crate) fn body_for(&mut self, extra: usize) -> &mut BytesMut {
        self.head(extra);
        if self.shared.is_empty() {
            &mut self.buf
        } else {
            &mut self.tail
        }
    }

    /// Appends `b` to the body: as a shared part when long, else copied.
    pub(crate) fn append_shared(&mut self, b: Bytes) {
        if b.len() < SHARE_MIN || !self.shared.is_empty() {
            self.body().extend_from_slice(&b);
        } else {
            self.head(0);
            self.shared = b;
        }
    }

    /// Finishes the frame; an error reply carries the header only.
    pub(crate) fn finish(mut self, xid: i32, zxid: i64, err: i32) -> Frame {
        self.head(0);
        if err != 0 {
            self.buf.truncate(HEADER_LEN);
            self.shared = Bytes::new();
            self.tail.clear();
        }
        self.finish_keeping_body(xid, zxid, err)
    }

    /// Finishes the frame with the body written so far, whatever `err` is.
    pub(crate) fn finish_keeping_body(mut self, xid: i32, zxid: i64, err: i32) -> Frame {
        self.head(0);
        let len = (self.buf.len() + self.shared.len() + self.tail.len() - 4) as i32;
        self.buf[0..4].copy_from_slice(&len.to_be_bytes());
        self.buf[4..8].copy_from_slice(&xid.to_be_bytes());
        self.buf[8..16].copy_from_slice(&zxid.to_be_bytes());
        self.buf[16..20].copy_from_slice(&err.to_be_bytes());
        Frame {
            head: self.buf.freeze(),
            body: self.shared,
            tail: if self.tail.is_empty() {
                Bytes::new()
            } else {
                self.tail.freeze()
            },
        }
    }
}

/// A reply of the header alone (an error, or a request without a body).
pub(crate) fn header_only(xid: i32, zxid: i64, err: i32) -> Frame {
    Reply::new().finish(xid, zxid, err)
}
