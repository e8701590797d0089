//! The node storage under the tree: a slab of fixed-size chunks of node records addressed by
//! `u32` index, each record holding its name and data in one allocation, and the walks over
//! names and parent links that hash and check a path.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use crate::data::keyed::PathHasher;
use crate::data::node::{Meta, NIL, ROOT};
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
        let name_len = (self.name_len & !HAS_DATA) as usize;
        let d = data.unwrap_or_default();
        if self.blob.len() == name_len + d.len() {
            // The same size as before (the usual setData): written over in place, no
            // allocation.
            self.blob[name_len..].copy_from_slice(d);
        } else {
            self.blob = blob(self.name_bytes(), data);
        }
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
///
/// A freed slot is reused before a new one is made, from the lowest chunk with room, so the
/// nodes gather in the low chunks. A chunk whose last node goes gives back its memory at
/// once (the chunk stays as an empty record of a few words, made again when needed), so
/// after a mass deletion the slab holds only the chunks that still have a live node: at
/// most [`CHUNK`] slots per live node in the worst case of one survivor per chunk, and in
/// the usual cases (a wide parent emptied, a reset) next to nothing.
///
/// Chunks are shared between a slab and its clones (a lagging member's replica starts as
/// one): cloning copies one pointer per chunk, and the first change to a shared chunk on
/// either side copies that chunk alone ([`CHUNK`] slots at most).
#[derive(Debug, Clone, Default)]
pub(crate) struct Slab {
    chunks: Vec<Arc<Chunk>>,
    /// Chunks with a free slot, made or not.
    room: BTreeSet<u32>,
}

#[derive(Debug, Default)]
struct Chunk {
    /// Up to [`CHUNK`] slots, made as needed; no allocation while the chunk is empty.
    slots: Vec<Option<Slot>>,
    /// Free slots below `slots.len()`.
    holes: Vec<u16>,
    live: u32,
}

impl Clone for Chunk {
    /// A copy of the chunk's slots: made only when a chunk shared with a clone of the slab
    /// is changed.
    fn clone(&self) -> Chunk {
        work::add(self.slots.len());
        let mut slots = Vec::with_capacity(if self.slots.is_empty() { 0 } else { CHUNK });
        slots.extend(self.slots.iter().cloned());
        Chunk {
            slots,
            holes: self.holes.clone(),
            live: self.live,
        }
    }
}

impl Chunk {
    fn has_room(&self) -> bool {
        !self.holes.is_empty() || self.slots.len() < CHUNK
    }
}

impl Slab {
    pub(crate) fn alloc(&mut self, slot: Slot) -> u32 {
        let c = match self.room.first() {
            Some(&c) => c as usize,
            None => {
                self.chunks.push(Arc::default());
                let c = self.chunks.len() - 1;
                self.room.insert(c as u32);
                c
            }
        };
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        let j = match chunk.holes.pop() {
            Some(j) => {
                chunk.slots[j as usize] = Some(slot);
                j as usize
            }
            None => {
                if chunk.slots.capacity() == 0 {
                    chunk.slots.reserve_exact(CHUNK);
                }
                chunk.slots.push(Some(slot));
                chunk.slots.len() - 1
            }
        };
        chunk.live += 1;
        if !chunk.has_room() {
            self.room.remove(&(c as u32));
        }
        ((c << CHUNK_BITS) + j) as u32
    }

    pub(crate) fn release(&mut self, i: u32) -> Option<Slot> {
        let c = (i >> CHUNK_BITS) as usize;
        let j = i as usize & (CHUNK - 1);
        let chunk = Arc::make_mut(self.chunks.get_mut(c)?);
        let slot = chunk.slots.get_mut(j)?.take()?;
        let had_room = chunk.has_room();
        chunk.live -= 1;
        if chunk.live == 0 {
            // The chunk's memory goes back (a constant: one chunk of slots).
            chunk.slots = Vec::new();
            chunk.holes = Vec::new();
        } else {
            chunk.holes.push(j as u16);
        }
        if !had_room {
            self.room.insert(c as u32);
        }
        Some(slot)
    }

    pub(crate) fn entry(&mut self, i: u32) -> &mut Option<Slot> {
        &mut Arc::make_mut(&mut self.chunks[(i >> CHUNK_BITS) as usize]).slots
            [i as usize & (CHUNK - 1)]
    }

    pub(crate) fn at(&self, i: u32) -> &Slot {
        self.chunks[(i >> CHUNK_BITS) as usize].slots[i as usize & (CHUNK - 1)]
            .as_ref()
            .expect("a linked node index is live")
    }

    pub(crate) fn at_mut(&mut self, i: u32) -> &mut Slot {
        self.entry(i).as_mut().expect("a linked node index is live")
    }

    pub(crate) fn live(&self) -> impl Iterator<Item = (u32, &Slot)> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .slots
                .iter()
                .enumerate()
                .filter_map(move |(j, s)| s.as_ref().map(|s| (((c << CHUNK_BITS) + j) as u32, s)))
        })
    }

    /// Slots made in chunks that hold memory (live nodes and free slots among them).
    #[cfg(test)]
    pub(crate) fn slots_made(&self) -> usize {
        self.chunks.iter().map(|c| c.slots.len()).sum()
    }

    /// Bytes the slab holds for its slots (not counting each node's name and data).
    #[cfg(test)]
    pub(crate) fn bytes_held(&self) -> usize {
        let slots: usize = self.chunks.iter().map(|c| c.slots.capacity()).sum();
        let holes: usize = self.chunks.iter().map(|c| c.holes.capacity()).sum();
        slots * std::mem::size_of::<Option<Slot>>()
            + holes * 2
            + self.chunks.capacity() * std::mem::size_of::<Arc<Chunk>>()
            + self.chunks.len() * (std::mem::size_of::<Chunk>() + 16)
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

/// The hash of a path (starting with `/`) as the node index uses it: the path's bytes hashed
/// in one piece, folded to a 32-bit key that the index stores beside each node, and spread
/// back over 64 bits by [`spread`]. Keeping the key makes a growing index rehash its entries
/// from what it holds (no path is walked again), so the one insert that grows it costs a
/// copy of the index, not a walk of every node's path.
pub(crate) fn hash_path(state: &PathHasher, path: &str) -> u64 {
    let mut h = state.build_hasher();
    h.write(path.as_bytes());
    let full = h.finish();
    spread((full >> 32) as u32 ^ full as u32)
}

/// The index hash of a stored key: the key in the high half (whose top bits the table uses
/// as tags) and an odd multiple of it in the low half (whose low bits pick the bucket).
pub(crate) fn spread(key: u32) -> u64 {
    (u64::from(key) << 32) | u64::from(key.wrapping_mul(0x9E37_79B9))
}

/// The key [`spread`] made `h` from.
pub(crate) fn key_of(h: u64) -> u32 {
    (h >> 32) as u32
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
