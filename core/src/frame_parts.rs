//! A frame in up to three parts: a small head, a shared body and a small tail, written one
//! after the other. A large body that many replies carry (a cached child list) is then
//! shared by every reply instead of being copied into each.

use bytes::{BufMut, Bytes, BytesMut};

/// One complete (length-prefixed) frame: `head`, then `body`, then `tail` on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    pub head: Bytes,
    pub body: Bytes,
    pub tail: Bytes,
}

impl Frame {
    /// Bytes on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The non-empty parts, in order.
    pub fn into_parts(self) -> impl Iterator<Item = Bytes> {
        [self.head, self.body, self.tail]
            .into_iter()
            .filter(|b| !b.is_empty())
    }

    /// The frame as one buffer (copied only when it is in several parts).
    pub fn into_bytes(self) -> Bytes {
        if self.body.is_empty() && self.tail.is_empty() {
            return self.head;
        }
        let mut b = BytesMut::with_capacity(self.len());
        for part in self.into_parts() {
            b.put_slice(&part);
        }
        b.freeze()
    }
}

impl From<Bytes> for Frame {
    fn from(head: Bytes) -> Frame {
        Frame {
            head,
            ..Frame::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_join_in_order() {
        let f = Frame {
            head: Bytes::from_static(b"ab"),
            body: Bytes::from_static(b"cde"),
            tail: Bytes::from_static(b"f"),
        };
        assert_eq!(f.len(), 6);
        assert_eq!(f.clone().into_parts().count(), 3);
        assert_eq!(f.into_bytes(), Bytes::from_static(b"abcdef"));
        let one = Frame::from(Bytes::from_static(b"xy"));
        assert_eq!(one.clone().into_parts().count(), 1);
        assert_eq!(one.into_bytes(), Bytes::from_static(b"xy"));
    }
}
