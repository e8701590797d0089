//! A znode as a value ([`Node`]: what is inserted or saved for a snapshot) and
//! as the tree's slots store it ([`Meta`]: its Stat bookkeeping, its ACL as an index), what
//! kind of node an owner value denotes, and the slot indices that mean no node and the root.

use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::{Acl, Stat};

/// Owner value marking a container node.
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// Top byte marking a TTL node; the TTL sits in the low 40 bits.
pub const TTL_MARKER: i64 = 0xFF00_0000_0000_0000u64 as i64;
/// Largest TTL accepted (2^40 - 1 ms).
pub const MAX_TTL: i64 = (1 << 40) - 1;

/// What kind of node an owner value denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

pub fn kind_of(owner: i64) -> NodeKind {
    if owner == 0 {
        NodeKind::Persistent
    } else if owner == CONTAINER_OWNER {
        NodeKind::Container
    } else if owner & TTL_MARKER == TTL_MARKER {
        NodeKind::Ttl(owner & MAX_TTL)
    } else {
        NodeKind::Ephemeral(owner)
    }
}

/// A shared ACL list (most nodes share the same few lists).
pub type AclList = Arc<[Acl]>;

/// A node's Stat bookkeeping as the tree stores it (its ACL as an index into the tree's
/// table of lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub pzxid: i64,
    /// Session id, container marker or TTL encoding; 0 for persistent nodes.
    pub owner: i64,
    pub version: i32,
    pub aversion: i32,
    /// Lifetime count of child creations (the visible cversion is derived from it).
    pub child_creates: i32,
    pub(crate) acl: u32,
}

impl Meta {
    pub fn kind(&self) -> NodeKind {
        kind_of(self.owner)
    }

    pub(crate) fn stat(&self, data_len: usize, num_children: u32) -> Stat {
        let num_children = num_children as i32;
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self
                .child_creates
                .wrapping_mul(2)
                .wrapping_sub(num_children),
            aversion: self.aversion,
            ephemeral_owner: match self.kind() {
                NodeKind::Ephemeral(s) => s,
                _ => 0,
            },
            data_length: data_len as i32,
            num_children,
            pzxid: self.pzxid,
        }
    }
}

/// One znode as a value, without its children: what is inserted, and what is kept for a
/// snapshot in progress.
#[derive(Debug, Clone)]
pub struct Node {
    pub data: Option<Bytes>,
    pub acl: AclList,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub aversion: i32,
    pub pzxid: i64,
    /// Lifetime count of child creations (the visible cversion is derived from it).
    pub child_creates: i32,
    /// Session id, container marker or TTL encoding; 0 for persistent nodes.
    pub owner: i64,
}

impl Node {
    pub fn new(data: Option<Bytes>, acl: AclList, zxid: i64, time: i64, owner: i64) -> Node {
        Node {
            data,
            acl,
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            version: 0,
            aversion: 0,
            pzxid: zxid,
            child_creates: 0,
            owner,
        }
    }

    pub(crate) fn meta(&self, acl: u32) -> Meta {
        Meta {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            pzxid: self.pzxid,
            owner: self.owner,
            version: self.version,
            aversion: self.aversion,
            child_creates: self.child_creates,
            acl,
        }
    }

    /// Its bookkeeping alone (with no ACL index).
    pub fn bookkeeping(&self) -> Meta {
        self.meta(0)
    }
}

/// No node (the end of a link).
pub(crate) const NIL: u32 = u32::MAX;
/// The root's index.
pub(crate) const ROOT: u32 = 0;
