//! The node storage under the tree: a slab of fixed-size chunks of node records addressed by
//! `u32` index, each record holding its name and data in one allocation, and the walks over
//! names and parent links that hash and check a path.

use std::hash::{BuildHasher, Hasher};

use crate::data::keyed::PathHasher;
use crate::data::tree::{Meta, NIL, ROOT};
use crate::data::work;

/// Set in [`Slot::name_len`] when the node has data (possibly empty) rather than none.
const HAS_DATA: u32 = 1 << 31;
const CHUNK_BITS: u32 = 10;
pub(crate) const CHUNK: usize = 1 << CHUNK_BITS;

/// A stored node.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) meta: Meta,
    /// The node's name, then its data.
    pub(crate) blob: Box<[u8]>,
    /// Length of the name in `blob`, with [`HAS_DATA`].
    pub(crate) name_len: u32,
    pub(crate) parent: u32,
    pub(crate) first_child: u32,
    pub(crate) next: u32,
    pub(crate) prev: u32,
    pub(crate) num_children: u32,
    /// Nodes strictly below this one (kept along the ancestors on every insert and removal,
    /// so getAllChildrenNumber reads it instead of walking the subtree).
    pub(crate) descendants: u32,
}

impl Slot {
    pub(crate) fn new(meta: Meta, name: &str, data: Option<&[u8]>, parent: u32) -> Slot {
        let mut slot = Slot {
            meta,
            blob: Box::default(),
            name_len: 0,
            parent,
            first_child: NIL,
            next: NIL,
            prev: NIL,
            num_children: 0,
            descendants: 0,
        };
        slot.blob = blob(name.as_bytes(), data);
        slot.name_len = name.len() as u32 | if data.is_some() { HAS_DATA } else { 0 };
        slot
    }

    pub(crate) fn name_bytes(&self) -> &[u8] {
        &self.blob[..(self.name_len & !HAS_DATA) as usize]
    }

    pub(crate) fn name(&self) -> &str {
        std::str::from_utf8(self.name_bytes()).unwrap_or_default()
    }

    pub(crate) fn data(&self) -> Option<&[u8]> {
        (self.name_len & HAS_DATA != 0).then(|| &self.blob[(self.name_len & !HAS_DATA) as usize..])
    }

    pub(crate) fn data_len(&self) -> usize {
        self.blob.len() - (self.name_len & !HAS_DATA) as usize
    }

    pub(crate) fn set_data(&mut self, data: Option<&[u8]>) {
        self.blob = blob(self.name_bytes(), data);
        self.name_len = self.name_len & !HAS_DATA | if data.is_some() { HAS_DATA } else { 0 };
    }
}

/// A name and data in one allocation of exactly their size.
fn blob(name: &[u8], data: Option<&[u8]>) -> Box<[u8]> {
    let d = data.unwrap_or_default();
    let mut blob = Vec::with_capacity(name.len() + d.len());
    blob.extend_from_slice(name);
    blob.extend_from_slice(d);
    blob.into_boxed_slice()
}

/// Nodes by index, in chunks that are never moved (growing never copies what is there).
#[derive(Debug, Clone, Default)]
pub(crate) struct Slab {
    pub(crate) chunks: Vec<Vec<Option<Slot>>>,
    pub(crate) free: Vec<u32>,
}

impl Slab {
    pub(crate) fn alloc(&mut self, slot: Slot) -> u32 {
        if let Some(i) = self.free.pop() {
            *self.entry(i) = Some(slot);
            return i;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let n = self.chunks.len() - 1;
        let chunk = &mut self.chunks[n];
        chunk.push(Some(slot));
        ((n << CHUNK_BITS) + chunk.len() - 1) as u32
    }

    pub(crate) fn release(&mut self, i: u32) -> Option<Slot> {
        let slot = self.entry(i).take();
        self.free.push(i);
        slot
    }

    pub(crate) fn entry(&mut self, i: u32) -> &mut Option<Slot> {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    pub(crate) fn at(&self, i: u32) -> &Slot {
        self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
            .as_ref()
            .expect("a linked node index is live")
    }

    pub(crate) fn at_mut(&mut self, i: u32) -> &mut Slot {
        self.entry(i).as_mut().expect("a linked node index is live")
    }

    pub(crate) fn live(&self) -> impl Iterator<Item = (u32, &Slot)> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter()
                .enumerate()
                .filter_map(move |(j, s)| s.as_ref().map(|s| (((c << CHUNK_BITS) + j) as u32, s)))
        })
    }
}

/// A path's components, innermost first (none for the root), found in one backward scan of
/// its bytes.
fn components_rev(path: &str) -> impl Iterator<Item = &[u8]> {
    let body = &path.as_bytes()[1..];
    let mut end = (!body.is_empty()).then_some(body.len());
    std::iter::from_fn(move || {
        let e = end?;
        let start = body[..e]
            .iter()
            .rposition(|&b| b == b'/')
            .map_or(0, |k| k + 1);
        end = start.checked_sub(1);
        Some(&body[start..e])
    })
}

/// The hash of a path (starting with `/`): its bytes in one piece.
pub(crate) fn hash_path(state: &PathHasher, path: &str) -> u64 {
    let mut h = state.build_hasher();
    h.write(path.as_bytes());
    h.finish()
}

/// The hash of the path of the node at `i`, the same as [`hash_path`] of that path (which
/// is spelled out in `scratch`; only a growing table hashes its entries again).
pub(crate) fn hash_slot(slab: &Slab, state: &PathHasher, i: u32, scratch: &mut Vec<u8>) -> u64 {
    scratch.clear();
    let mut j = i;
    while j != ROOT {
        let s = slab.at(j);
        let name = s.name_bytes();
        // Written backwards, then turned around once.
        scratch.extend(name.iter().rev());
        scratch.push(b'/');
        j = s.parent;
    }
    if scratch.is_empty() {
        scratch.push(b'/');
    }
    scratch.reverse();
    let mut h = state.build_hasher();
    h.write(scratch);
    h.finish()
}

/// Whether the node at `i` has the path `path` (starting with `/`).
pub(crate) fn has_path(slab: &Slab, mut i: u32, path: &str) -> bool {
    for c in components_rev(path) {
        if i == ROOT {
            return false;
        }
        let s = slab.at(i);
        if s.name_bytes() != c {
            return false;
        }
        i = s.parent;
    }
    i == ROOT
}

/// Indices of the children of the node at `i`, in no particular order.
pub(crate) fn child_indices(slab: &Slab, i: u32) -> impl Iterator<Item = u32> + '_ {
    let mut next = slab.at(i).first_child;
    std::iter::from_fn(move || {
        (next != NIL).then(|| {
            work::add(1);
            let cur = next;
            next = slab.at(cur).next;
            cur
        })
    })
}

/// The names of the children of the node at `i`, sorted (as getChildren lists them).
pub(crate) fn sorted_children(slab: &Slab, i: u32) -> Vec<&str> {
    let mut names: Vec<&str> = child_indices(slab, i).map(|c| slab.at(c).name()).collect();
    names.sort_unstable();
    names
}
