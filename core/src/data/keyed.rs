//! Keyed aHash for the core's hash tables: keys from the system's random source, so that keys
//! a client chooses (paths) cannot be made to collide on purpose, at a fraction of SipHash's
//! cost per lookup.

use std::collections::HashMap;
use std::hash::BuildHasher;

/// aHash with keys from [`path_hasher`].
pub type PathHasher = ahash::RandomState;

/// A fresh set of random keys (once per table, not per lookup).
pub fn path_hasher() -> PathHasher {
    let mut seed = [0u8; 32];
    if getrandom::getrandom(&mut seed).is_err() {
        // No random source: fall back to the standard library's per-process keys.
        for (i, chunk) in seed.chunks_mut(8).enumerate() {
            let k = std::hash::RandomState::new().hash_one(i);
            chunk.copy_from_slice(&k.to_le_bytes());
        }
    }
    let k = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&seed[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    };
    PathHasher::with_seeds(k(0), k(1), k(2), k(3))
}

/// The hasher of [`KeyedMap`]: randomly keyed when the table is made.
#[derive(Debug, Clone)]
pub struct KeyedState(PathHasher);

impl Default for KeyedState {
    fn default() -> KeyedState {
        KeyedState(path_hasher())
    }
}

impl BuildHasher for KeyedState {
    type Hasher = <PathHasher as BuildHasher>::Hasher;

    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

/// A hash map under keyed aHash, for the tables every request reaches (made once, not per
/// connection: each one draws its keys from the system).
pub type KeyedMap<K, V> = HashMap<K, V, KeyedState>;
