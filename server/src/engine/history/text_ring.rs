//! The history's byte ring: the strings of its events, one after another in a buffer of a
//! fixed bound, addressed by their position counted from the first byte ever stored. Storing
//! copies the bytes once; dropping the oldest moves a position and touches no byte.

/// A ring of at most `cap` bytes.
pub(super) struct TextRing {
    /// Grows (zeroed) up to `cap`, then is written over from its start.
    buf: Vec<u8>,
    cap: usize,
    /// The position of the oldest byte held and of the byte after the newest.
    start: u64,
    end: u64,
    /// Where `end` is in `buf` (`end` modulo `cap`, kept so that storing divides nothing).
    end_at: usize,
}

impl TextRing {
    pub(super) fn new(cap: usize) -> TextRing {
        TextRing {
            buf: Vec::new(),
            cap,
            start: 0,
            end: 0,
            end_at: 0,
        }
    }

    /// Bytes held.
    pub(super) fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// The position the next byte stored takes.
    pub(super) fn end(&self) -> u64 {
        self.end
    }

    /// Where position `at` is in `buf`.
    fn index(&self, at: u64) -> usize {
        // `cap` is not 0 when anything is stored, and the remainder is below it.
        (at % self.cap as u64) as usize
    }

    /// Stores `bytes` after the newest; the caller has made room (`len() + bytes.len() <= cap`).
    pub(super) fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        debug_assert!(self.len() + bytes.len() <= self.cap);
        let at = self.end_at;
        let first = bytes.len().min(self.cap - at);
        let need = (at + first).max(bytes.len() - first);
        if self.buf.len() < need {
            // Grows in steps of at least double, never past the bound.
            let grown = need.max(self.buf.len() * 2).min(self.cap);
            self.buf.resize(grown, 0);
        }
        self.buf[at..at + first].copy_from_slice(&bytes[..first]);
        self.buf[..bytes.len() - first].copy_from_slice(&bytes[first..]);
        self.end += bytes.len() as u64;
        self.end_at = if first < bytes.len() {
            bytes.len() - first
        } else if at + first == self.cap {
            0
        } else {
            at + first
        };
    }

    /// Forgets every byte before position `to`.
    pub(super) fn forget_to(&mut self, to: u64) {
        self.start = to.clamp(self.start, self.end);
    }

    /// Appends the `len` bytes from position `at` to `out`, as far as they are still held.
    pub(super) fn copy_out(&self, at: u64, len: usize, out: &mut Vec<u8>) {
        let from = at.max(self.start);
        let to = (at + len as u64).min(self.end);
        if from >= to {
            return;
        }
        let i = self.index(from);
        let n = (to - from) as usize;
        let first = n.min(self.cap - i);
        out.extend_from_slice(&self.buf[i..i + first]);
        out.extend_from_slice(&self.buf[..n - first]);
    }
}

#[cfg(test)]
mod tests {
    use super::TextRing;

    fn read(r: &TextRing, at: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        r.copy_out(at, len, &mut out);
        out
    }

    #[test]
    fn strings_wrap_around_the_bound_and_read_back_whole() {
        let mut r = TextRing::new(8);
        r.push(b"abcde");
        assert_eq!(read(&r, 0, 5), b"abcde");
        r.forget_to(5);
        r.push(b"fghijk");
        assert_eq!((r.len(), r.end()), (6, 11));
        assert_eq!(read(&r, 5, 6), b"fghijk");
        // What was forgotten is not read back, even where its bytes are still in the buffer.
        assert_eq!(read(&r, 0, 5), b"");
        assert_eq!(read(&r, 3, 4), b"fg");
    }

    #[test]
    fn the_buffer_never_grows_past_its_bound() {
        let mut r = TextRing::new(5);
        for i in 0..100u64 {
            r.forget_to(r.end().saturating_sub(2));
            r.push(&[i as u8; 3]);
            assert!(r.buf.len() <= 5 && r.len() <= 5);
            assert_eq!(read(&r, r.end() - 3, 3), [i as u8; 3]);
        }
    }
}
