//! The ACL lists nodes refer to, each held once and named by a `u32` index: most nodes share
//! the same few lists, so a node stores 4 bytes instead of a pointer to its list.

use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::Acl;

use crate::data::keyed::KeyedMap;
use crate::data::node::AclList;

/// A list and how many nodes use it.
#[derive(Debug, Clone)]
struct Entry {
    list: AclList,
    uses: u32,
}

#[derive(Debug, Clone, Default)]
pub struct AclTable {
    entries: Vec<Option<Entry>>,
    /// Index by the address of a list the table holds (the fast path: callers pass the same
    /// shared list again and again).
    by_ptr: KeyedMap<usize, u32>,
    /// Index by the encoded list, so equal lists from different allocations share an entry.
    by_content: KeyedMap<Bytes, u32>,
    free: Vec<u32>,
}

fn address(list: &AclList) -> usize {
    Arc::as_ptr(list) as *const Acl as usize
}

fn encoded(list: &[Acl]) -> Bytes {
    zkd_protocol::to_bytes(&list.to_vec())
}

impl AclTable {
    /// The index of `list`, counting one more use of it.
    pub fn acquire(&mut self, list: &AclList) -> u32 {
        let index = match self.by_ptr.get(&address(list)) {
            Some(&i) => i,
            None => {
                let key = encoded(list);
                match self.by_content.get(&key) {
                    Some(&i) => i,
                    None => {
                        let i = match self.free.pop() {
                            Some(i) => i,
                            None => {
                                self.entries.push(None);
                                (self.entries.len() - 1) as u32
                            }
                        };
                        self.entries[i as usize] = Some(Entry {
                            list: list.clone(),
                            uses: 0,
                        });
                        self.by_ptr.insert(address(list), i);
                        self.by_content.insert(key, i);
                        i
                    }
                }
            }
        };
        if let Some(e) = &mut self.entries[index as usize] {
            e.uses += 1;
        }
        index
    }

    /// One use of `index` fewer; the list is dropped with its last use.
    pub fn release(&mut self, index: u32) {
        let Some(slot) = self.entries.get_mut(index as usize) else {
            return;
        };
        let Some(e) = slot else { return };
        e.uses -= 1;
        if e.uses == 0 {
            if let Some(e) = slot.take() {
                self.by_ptr.remove(&address(&e.list));
                self.by_content.remove(&encoded(&e.list));
                self.free.push(index);
            }
        }
    }

    /// The list at `index` (an index some node holds).
    pub fn get(&self, index: u32) -> &AclList {
        match self.entries.get(index as usize) {
            Some(Some(e)) => &e.list,
            _ => panic!("ACL index {index} is not in use"),
        }
    }

    /// Lists in use (for tests).
    #[cfg(test)]
    pub fn lists_in_use(&self) -> usize {
        self.entries.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lists_share_an_entry_until_their_last_use() {
        let open: AclList = Arc::from(Acl::open_unsafe());
        let copy: AclList = Arc::from(Acl::open_unsafe());
        let read: AclList = Arc::from(vec![Acl::new(1, "world", "anyone")]);
        let mut t = AclTable::default();
        let a = t.acquire(&open);
        assert_eq!(t.acquire(&copy), a, "same content, same index");
        let r = t.acquire(&read);
        assert_ne!(r, a);
        assert_eq!(t.lists_in_use(), 2);
        t.release(r);
        assert_eq!(t.lists_in_use(), 1);
        t.release(a);
        assert_eq!(&t.get(a)[..], &open[..], "one use left");
        t.release(a);
        assert_eq!(t.lists_in_use(), 0);
        t.acquire(&read);
        assert_eq!(t.entries.len(), 2, "freed indices are reused");
    }
}
