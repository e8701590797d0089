//! The history's event ring: fixed-size events, oldest first, in a buffer that doubles up to
//! its bound and is then written over in place, so storing an event moves no other.

/// A ring of at most `cap` values of `T`.
pub(super) struct Slots<T> {
    /// Its length is the ring's current size; `len` of them, from `head` on (wrapping), are
    /// held.
    buf: Vec<T>,
    head: usize,
    len: usize,
    cap: usize,
}

impl<T: Copy> Slots<T> {
    pub(super) fn new(cap: usize) -> Slots<T> {
        Slots {
            buf: Vec::new(),
            head: 0,
            len: 0,
            cap,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Where the `i`-th held value is in `buf`.
    #[inline]
    fn index(&self, i: usize) -> usize {
        let j = self.head + i;
        if j >= self.buf.len() {
            j - self.buf.len()
        } else {
            j
        }
    }

    /// The `i`-th held value, oldest first.
    pub(super) fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.buf[self.index(i)])
    }

    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        let at = self.index(i);
        (i < self.len).then(|| &mut self.buf[at])
    }

    pub(super) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub(super) fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Forgets the oldest value.
    pub(super) fn pop_front(&mut self) {
        if self.len > 0 {
            self.head = self.index(1);
            self.len -= 1;
        }
    }

    /// The slot the next value goes to, and whether it still holds the oldest value (the
    /// ring is full: that value is dropped, and the slot is returned with it for the caller
    /// to read before writing over it). Otherwise the slot holds `fill()`.
    #[inline]
    pub(super) fn next_slot(&mut self, fill: impl FnOnce() -> T) -> (&mut T, bool) {
        if self.len == self.cap && self.len > 0 {
            let at = self.head;
            self.head = if at + 1 == self.buf.len() { 0 } else { at + 1 };
            return (&mut self.buf[at], true);
        }
        (self.push_back(fill()), false)
    }

    /// Stores `v` after the newest and returns it in place; the caller has made room
    /// (`len() < cap`).
    #[inline]
    pub(super) fn push_back(&mut self, v: T) -> &mut T {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        let at = self.index(self.len);
        self.len += 1;
        let slot = &mut self.buf[at];
        *slot = v;
        slot
    }

    /// Doubles the buffer (up to `cap`), the held values first in order; the rest are
    /// `fill`. Done once per doubling, so each value is moved a bounded number of times.
    #[cold]
    fn grow(&mut self, fill: T) {
        let size = (self.buf.len() * 2).max(16).min(self.cap.max(1));
        let mut buf = Vec::with_capacity(size);
        buf.extend(self.iter().copied());
        buf.resize(size.max(self.len + 1), fill);
        self.buf = buf;
        self.head = 0;
    }

    /// The held values, oldest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).map(move |i| &self.buf[self.index(i)])
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    fn held(s: &Slots<u32>) -> Vec<u32> {
        s.iter().copied().collect()
    }

    #[test]
    fn values_wrap_around_in_order_and_the_buffer_stays_within_its_bound() {
        let mut s = Slots::new(20);
        for v in 0..100u32 {
            if s.len() == 20 || v % 7 == 0 {
                s.pop_front();
            }
            *s.push_back(v) += 0;
            assert!(s.buf.len() <= 20);
            let h = held(&s);
            assert!(h.windows(2).all(|w| w[1] == w[0] + 1), "{h:?}");
            assert_eq!((s.back(), s.get(s.len())), (Some(&v), None));
        }
        assert_eq!(s.front(), Some(&80));
        *s.get_mut(0).expect("held") = 7;
        assert_eq!(s.front(), Some(&7));
    }
}
