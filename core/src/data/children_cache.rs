//! Encoded child lists of nodes with many children, kept until the list changes: in a herd
//! every watcher re-reads the same list after each change, and encoding it once per change
//! instead of once per reader is most of the work saved.

use bytes::{BufMut, Bytes, BytesMut};

use crate::data::keyed::KeyedMap;
use crate::data::work;

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
        work::add(out.len());
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

    /// A child left the children of `path`: the cached list, if any, is dropped, in constant
    /// time. (Cutting the name out of the list would copy the whole list on every delete:
    /// with a million children cached, deleting them one by one would copy terabytes. The
    /// next getChildren encodes the list again, which costs what its reply holds.)
    pub fn child_removed(&mut self, path: &str) {
        self.invalidate(path);
    }
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
    fn a_removed_child_drops_the_cached_list() {
        let mut names: Vec<String> = (0..40).map(|i| format!("c-{i:03}")).collect();
        let mut c = ChildrenCache::default();
        let encode = |c: &mut ChildrenCache, names: &[String]| {
            c.encoded("/p", names.len(), names.iter().map(String::as_str))
        };
        encode(&mut c, &names);
        assert!(c.cached("/p").is_some());
        names.remove(17);
        c.child_removed("/p");
        assert!(c.cached("/p").is_none() && c.bytes == 0);
        let fresh = encode(&mut c, &names);
        assert_eq!(&fresh[..4], &39i32.to_be_bytes());
        assert_eq!(c.cached("/p"), Some(fresh.clone()), "cached again");
        assert_eq!(c.bytes, fresh.len());
        c.child_removed("/other");
        assert_eq!(c.cached("/p"), Some(fresh), "other lists stay");
    }
}
