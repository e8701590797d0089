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
/// Children removed from a cached list that are noted instead of dropping it; at the next
/// read the list is copied without them, each entry compared with at most this many names.
const MAX_REMOVED: usize = 8;

/// One cached list and the names removed from the node's children since it was encoded.
#[derive(Debug, Clone)]
struct Entry {
    list: Bytes,
    removed: Vec<Box<str>>,
}

impl Entry {
    /// Bytes of the names noted as removed.
    fn noted(&self) -> usize {
        self.removed.iter().map(|n| n.len()).sum()
    }
}

#[derive(Debug, Clone, Default)]
pub struct ChildrenCache {
    lists: KeyedMap<Box<str>, Entry>,
    /// Bytes of the cached lists and of the removed names noted with them.
    bytes: usize,
}

impl ChildrenCache {
    /// The list of `path`, if it is cached: as encoded, or copied without the children
    /// removed since (the copy is then cached in its place). Costs the list's bytes times
    /// the removed names at most [`MAX_REMOVED`]: a constant times the reply.
    pub fn cached(&mut self, path: &str) -> Option<Bytes> {
        let entry = self.lists.get_mut(path)?;
        if entry.removed.is_empty() {
            return Some(entry.list.clone());
        }
        match without(&entry.list, &entry.removed) {
            Some(shorter) => {
                self.bytes -= entry.list.len() - shorter.len() + entry.noted();
                entry.list = shorter.clone();
                entry.removed.clear();
                Some(shorter)
            }
            None => {
                // A removed name that is not in the list: the list is not trusted.
                self.invalidate(path);
                None
            }
        }
    }

    /// The list of `path` as a getChildren reply carries it (count, then each name), from
    /// the cache or encoded from `names` (and cached when long).
    pub fn encoded<'a>(
        &mut self,
        path: &str,
        count: usize,
        names: impl Iterator<Item = &'a str> + Clone,
    ) -> Bytes {
        if let Some(b) = self.cached(path) {
            return b;
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
            let entry = Entry {
                list: out.clone(),
                removed: Vec::new(),
            };
            self.lists.insert(path.into(), entry);
        }
        out
    }

    /// The children of `path` changed.
    pub fn invalidate(&mut self, path: &str) {
        if self.lists.is_empty() {
            // Nothing cached: no need to hash the path.
            return;
        }
        if let Some(e) = self.lists.remove(path) {
            self.bytes -= e.list.len() + e.noted();
        }
    }

    /// The child `name` left the children of `path`. A cached list notes the name (the next
    /// read copies the list without it) until [`MAX_REMOVED`] names are noted; then the list
    /// is dropped. Either way the delete costs its own name, not the list: cutting the name
    /// out at once would copy the whole list on every delete (a million children deleted
    /// one by one would copy terabytes).
    pub fn child_removed(&mut self, path: &str, name: &str) {
        if self.lists.is_empty() {
            return;
        }
        match self.lists.get_mut(path) {
            Some(e) if e.removed.len() < MAX_REMOVED => {
                e.removed.push(name.into());
                self.bytes += name.len();
            }
            Some(_) => self.invalidate(path),
            None => {}
        }
    }
}

/// `list` (count, then each name) without the entries named in `removed`, each of which
/// must be in it once: `None` if one is not (or the list is malformed).
fn without(list: &[u8], removed: &[Box<str>]) -> Option<Bytes> {
    let be32 = |at: usize| -> Option<usize> {
        let b: [u8; 4] = list.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(i32::from_be_bytes(b)).ok()
    };
    let count = be32(0)?.checked_sub(removed.len())?;
    let cut: usize = removed.iter().map(|n| 4 + n.len()).sum();
    let mut out = BytesMut::with_capacity(list.len().checked_sub(cut)?);
    out.put_i32(i32::try_from(count).ok()?);
    work::add(list.len());
    let (mut at, mut run, mut found) = (4, 4, 0);
    while at < list.len() {
        let end = at + 4 + be32(at)?;
        let name = list.get(at + 4..end)?;
        if removed.iter().any(|r| r.as_bytes() == name) {
            out.extend_from_slice(&list[run..at]);
            run = end;
            found += 1;
            if found == removed.len() {
                // The rest is copied whole: a list losing its first names (a leader
                // election's lowest candidate) costs one copy, not a look at every name.
                break;
            }
        }
        at = end;
    }
    out.extend_from_slice(list.get(run..)?);
    (found == removed.len()).then(|| out.freeze())
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
    fn removed_children_are_cut_out_at_the_next_read() {
        let mut names: Vec<String> = (0..40).map(|i| format!("c-{i:03}")).collect();
        let mut c = ChildrenCache::default();
        let encode = |c: &mut ChildrenCache, names: &[String]| {
            c.encoded("/p", names.len(), names.iter().map(String::as_str))
        };
        let fresh = |names: &[String]| {
            ChildrenCache::default().encoded("/x", names.len(), names.iter().map(String::as_str))
        };
        let first = encode(&mut c, &names);
        for gone in ["c-000", "c-017", "c-039"] {
            names.retain(|n| n != gone);
            c.child_removed("/p", gone);
        }
        assert_eq!(c.bytes, first.len() + 15, "the names are noted, not cut");
        let cut = c.cached("/p").expect("still cached");
        assert_eq!(cut, fresh(&names));
        assert_eq!(c.bytes, cut.len());
        assert_eq!(c.cached("/p"), Some(cut.clone()), "the cut list is cached");
        c.child_removed("/other", "c-001");
        assert_eq!(c.cached("/p"), Some(cut), "other lists stay");
    }

    #[test]
    fn too_many_removals_or_an_unknown_name_drop_the_list() {
        let names: Vec<String> = (0..40).map(|i| format!("c-{i:03}")).collect();
        let mut c = ChildrenCache::default();
        c.encoded("/p", names.len(), names.iter().map(String::as_str));
        for n in &names[..=MAX_REMOVED] {
            c.child_removed("/p", n);
        }
        assert!(c.cached("/p").is_none() && c.bytes == 0);
        c.encoded("/p", names.len(), names.iter().map(String::as_str));
        c.child_removed("/p", "absent");
        assert!(c.cached("/p").is_none(), "a name not in the list");
        assert_eq!(c.bytes, 0);
    }

    #[test]
    fn a_cut_costs_the_list_not_the_removals_times_the_list() {
        let names: Vec<String> = (0..1000).map(|i| format!("c-{i:04}")).collect();
        let mut c = ChildrenCache::default();
        let list = c.encoded("/p", names.len(), names.iter().map(String::as_str));
        work::take();
        for n in &names[..MAX_REMOVED] {
            c.child_removed("/p", n);
        }
        assert_eq!(work::take(), 0, "a removal copies nothing");
        c.cached("/p");
        assert_eq!(work::take(), list.len() as u64);
    }
}
