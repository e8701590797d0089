//! The data the core holds: the znode tree, its node slab, the shared ACL lists, the cache of
//! encoded child lists, path rules, the keyed hashing of its tables, and the count of work
//! done that the tests keep.

pub(crate) mod acl_table;
pub(crate) mod children_cache;
pub(crate) mod counted;
pub(crate) mod cow_slot;
pub mod keyed;
pub(crate) mod node;
pub mod path;
pub(crate) mod tree;
pub(crate) mod tree_slab;
pub(crate) mod work;
