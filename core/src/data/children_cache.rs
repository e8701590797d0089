//! Encoded child lists of nodes with many children, kept until the list changes: in a herd
//! every watcher re-reads the same list after each change, and encoding it once per change
//! instead of once per reader is most of the work saved.

use bytes::{BufMut, Bytes, BytesMut};

use crate::data::keyed::KeyedMap;

/// Lists shorter than this are encoded for each reply (cheap, and not worth an entry).
const MIN_CHILDREN: usize = 32;
/// Bytes all cached lists may hold; past it the cache starts over.
const MAX_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, Default)]
pub struct ChildrenCache {
    lists: KeyedMap<Box<str>, Bytes>,
    bytes: usize,
}

impl ChildrenCache {
    /// The cached list of `path`, if any.
    pub fn cached(&self, path: &str) -> Option<Bytes> {
        self.lists.get(path).cloned()
    }

    /// The list of `path` as a getChildren reply carries it (count, then each name), from
    /// the cache or encoded from `names` (and cached when long).
    pub fn encoded<'a>(
        &mut self,
        path: &str,
        count: usize,
        names: impl Iterator<Item = &'a str> + Clone,
    ) -> Bytes {
        if let Some(b) = self.lists.get(path) {
            return b.clone();
        }
        let len = 4 + names.clone().map(|n| 4 + n.len()).sum::<usize>();
        let mut out = BytesMut::with_capacity(len);
        out.put_i32(count as i32);
        for n in names {
            zkd_protocol::jute::write_bytes(&mut out, n.as_bytes());
        }
        let out = out.freeze();
        if count >= MIN_CHILDREN && out.len() <= MAX_BYTES {
            if self.bytes + out.len() > MAX_BYTES {
                self.lists.clear();
                self.bytes = 0;
            }
            self.bytes += out.len();
            self.lists.insert(path.into(), out.clone());
        }
        out
    }

    /// The children of `path` changed.
    pub fn invalidate(&mut self, path: &str) {
        if self.lists.is_empty() {
            // Nothing cached: no need to hash the path.
            return;
        }
        if let Some(b) = self.lists.remove(path) {
            self.bytes -= b.len();
        }
    }

    /// `name` left the children of `path`: a cached list loses that entry, the others keep
    /// their order (a copy of the bytes instead of encoding every name again).
    pub fn child_removed(&mut self, path: &str, name: &str) {
        let Some(list) = self.lists.get_mut(path) else {
            return;
        };
        match without(list, name) {
            Some((count, shorter)) if count >= MIN_CHILDREN => {
                self.bytes -= list.len() - shorter.len();
                *list = shorter;
            }
            _ => self.invalidate(path),
        }
    }
}

/// `list` (count, then each name) without the entry `name`, and its new count; `None` if
/// `name` is not in it.
fn without(list: &[u8], name: &str) -> Option<(usize, Bytes)> {
    let be32 = |at: usize| -> Option<usize> {
        let b: [u8; 4] = list.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(i32::from_be_bytes(b)).ok()
    };
    let count = be32(0)?.checked_sub(1)?;
    let mut at = 4;
    while at < list.len() {
        let end = at + 4 + be32(at)?;
        if list.get(at + 4..end)? == name.as_bytes() {
            let mut out = BytesMut::with_capacity(list.len() - (end - at));
            out.put_i32(count as i32);
            out.extend_from_slice(&list[4..at]);
            out.extend_from_slice(&list[end..]);
            return Some((count, out.freeze()));
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_are_cached_until_invalidated() {
        let names: Vec<String> = (0..40).map(|i| format!("c-{i:03}")).collect();
        let mut c = ChildrenCache::default();
        let a = c.encoded("/p", names.len(), names.iter().map(String::as_str));
        assert_eq!(a.len(), 4 + 40 * (4 + 5));
        assert_eq!(&a[..4], &40i32.to_be_bytes());
        assert_eq!(&a[4..13], b"\0\0\0\x05c-000");
        let stale = c.encoded("/p", 0, std::iter::empty());
        assert_eq!(stale, a, "served from the cache");
        c.invalidate("/p");
        let fresh = c.encoded("/p", 0, std::iter::empty());
        assert_eq!(&fresh[..], &0i32.to_be_bytes());
        assert_eq!(c.bytes, 0, "short lists are not kept");
    }

    #[test]
    fn a_removed_child_is_cut_out_of_the_cached_list() {
        let mut names: Vec<String> = (0..40).map(|i| format!("c-{i:03}")).collect();
        let mut c = ChildrenCache::default();
        let encode = |c: &mut ChildrenCache, names: &[String]| {
            c.encoded("/p", names.len(), names.iter().map(String::as_str))
        };
        encode(&mut c, &names);
        for gone in ["c-000", "c-017", "c-039"] {
            names.retain(|n| n != gone);
            c.child_removed("/p", gone);
            let cached = c.encoded("/p", 0, std::iter::empty());
            assert_eq!(
                cached,
                ChildrenCache::default().encoded(
                    "/x",
                    names.len(),
                    names.iter().map(String::as_str)
                ),
                "after removing {gone}"
            );
            assert_eq!(c.bytes, cached.len());
        }
        c.child_removed("/p", "absent");
        assert_eq!(c.bytes, 0, "an unknown name drops the entry");
        encode(&mut c, &names[..32]);
        c.child_removed("/p", "c-001");
        assert_eq!(c.bytes, 0, "a list that becomes short is dropped");
    }
}
