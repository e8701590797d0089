//! ZooKeeper's on-disk formats as plain Rust types: the records of snapshots and transaction
//! logs, the Adler-32 checksum both use, and encoders/decoders over byte buffers. No I/O.
//!
//! The layouts are described in the project's own words in `docs/persistence.md`.

pub mod snapshot;
pub mod txnlog;

use bytes::{BufMut, Bytes, BytesMut};

use crate::record;
use crate::{Acl, Jute};

/// `"ZKSN"` read as a big-endian int: the first field of a snapshot file.
pub const SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
/// `"ZKLG"` read as a big-endian int: the first field of a transaction log file.
pub const LOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// The format version both files carry.
pub const FORMAT_VERSION: i32 = 2;

/// Transaction types in a `TxnHeader` (the request opcodes, plus the session and error types).
pub mod txn_type {
    use crate::OpCode;

    pub const CREATE: i32 = OpCode::Create as i32;
    pub const DELETE: i32 = OpCode::Delete as i32;
    pub const SET_DATA: i32 = OpCode::SetData as i32;
    pub const SET_ACL: i32 = OpCode::SetAcl as i32;
    pub const CHECK: i32 = OpCode::Check as i32;
    pub const MULTI: i32 = OpCode::Multi as i32;
    pub const CREATE2: i32 = OpCode::Create2 as i32;
    pub const RECONFIG: i32 = OpCode::Reconfig as i32;
    pub const CREATE_CONTAINER: i32 = OpCode::CreateContainer as i32;
    pub const DELETE_CONTAINER: i32 = OpCode::DeleteContainer as i32;
    pub const CREATE_TTL: i32 = OpCode::CreateTtl as i32;
    pub const CREATE_SESSION: i32 = OpCode::CreateSession as i32;
    pub const CLOSE_SESSION: i32 = OpCode::CloseSession as i32;
    pub const ERROR: i32 = OpCode::Error as i32;
}

record! {
    /// The header of both file kinds.
    pub struct FileHeader { pub magic: i32, pub version: i32, pub dbid: i64 }
}

record! {
    /// The Stat as stored: no dataLength or numChildren, and `cversion` counts child
    /// creations (the visible cversion is derived from it and the child count).
    pub struct StatPersisted {
        pub czxid: i64,
        pub mzxid: i64,
        pub ctime: i64,
        pub mtime: i64,
        pub version: i32,
        pub cversion: i32,
        pub aversion: i32,
        pub ephemeral_owner: i64,
        pub pzxid: i64,
    }
}

record! {
    /// What every logged transaction starts with.
    pub struct TxnHeader {
        pub client_id: i64,
        pub cxid: i32,
        pub zxid: i64,
        pub time: i64,
        pub txn_type: i32,
    }
}

record! {
    /// The node a create transaction makes, as every create transaction starts.
    pub struct NewNode { pub path: String, pub data: Option<Bytes>, pub acl: Vec<Acl> }
}

record! {
    /// `create` and `create2`.
    pub struct CreateTxn { pub node: NewNode, pub ephemeral: bool, pub parent_cversion: i32 }
}

record! {
    pub struct CreateTtlTxn { pub node: NewNode, pub parent_cversion: i32, pub ttl: i64 }
}

record! {
    pub struct CreateContainerTxn { pub node: NewNode, pub parent_cversion: i32 }
}

/// The delete transaction: the path alone, laid out like the getACL request.
pub type DeleteTxn = crate::PathRequest;

/// Laid out like the setData request, but `version` is the node's version after the change.
pub type SetDataTxn = crate::SetDataRequest;

/// Laid out like the setACL request, but `version` is the node's ACL version after the change.
pub type SetAclTxn = crate::SetAclRequest;

/// The check of a multi: path and expected version, as in the check request.
pub type CheckVersionTxn = crate::CheckVersionRequest;

record! {
    pub struct CreateSessionTxn { pub timeout: i32 }
}

record! {
    /// The ephemeral nodes the close removes.
    pub struct CloseSessionTxn { pub paths: Vec<String> }
}

/// A failed transaction's error code, laid out like the error response.
pub type ErrorTxn = crate::ErrorResponse;

record! {
    /// One sub-transaction of a multi: its type and its encoded body.
    pub struct SubTxn { pub txn_type: i32, pub data: Bytes }
}

record! {
    pub struct MultiTxn { pub txns: Vec<SubTxn> }
}

/// A decoded transaction body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnBody {
    /// `create` and `create2`.
    Create(CreateTxn),
    CreateTtl(CreateTtlTxn),
    CreateContainer(CreateContainerTxn),
    /// `delete` and `deleteContainer`.
    Delete(DeleteTxn),
    SetData(SetDataTxn),
    SetAcl(SetAclTxn),
    Check(CheckVersionTxn),
    CreateSession(CreateSessionTxn),
    /// Older writers log a close without the list of paths.
    CloseSession(Option<CloseSessionTxn>),
    Error(ErrorTxn),
    /// Sub-transactions with their types.
    Multi(Vec<(i32, TxnBody)>),
    /// A reconfig: the new configuration, written to `/zookeeper/config` with version -1.
    Reconfig(SetDataTxn),
    /// A type zkd does not know; it only advances the zxid.
    Other,
}

impl TxnBody {
    /// Decodes the body of a transaction of type `txn_type`.
    pub fn read(kind: i32, r: &mut crate::Reader) -> Result<TxnBody, crate::DecodeError> {
        use crate::disk::txn_type as t;
        Ok(match kind {
            t::CREATE | t::CREATE2 => TxnBody::Create(CreateTxn::read(r)?),
            t::CREATE_TTL => TxnBody::CreateTtl(CreateTtlTxn::read(r)?),
            t::CREATE_CONTAINER => TxnBody::CreateContainer(CreateContainerTxn::read(r)?),
            t::DELETE | t::DELETE_CONTAINER => TxnBody::Delete(DeleteTxn::read(r)?),
            t::SET_DATA => TxnBody::SetData(SetDataTxn::read(r)?),
            t::SET_ACL => TxnBody::SetAcl(SetAclTxn::read(r)?),
            t::RECONFIG => TxnBody::Reconfig(SetDataTxn::read(r)?),
            t::CHECK => TxnBody::Check(CheckVersionTxn::read(r)?),
            t::CREATE_SESSION => TxnBody::CreateSession(CreateSessionTxn::read(r)?),
            t::CLOSE_SESSION if r.is_empty() => TxnBody::CloseSession(None),
            t::CLOSE_SESSION => TxnBody::CloseSession(Some(CloseSessionTxn::read(r)?)),
            t::ERROR => TxnBody::Error(ErrorTxn::read(r)?),
            t::MULTI => {
                let multi = MultiTxn::read(r)?;
                let mut subs = Vec::with_capacity(multi.txns.len());
                for sub in multi.txns {
                    let body = TxnBody::read(sub.txn_type, &mut crate::Reader::new(sub.data))?;
                    subs.push((sub.txn_type, body));
                }
                TxnBody::Multi(subs)
            }
            _ => TxnBody::Other,
        })
    }

    /// Encodes the body as [`TxnBody::read`] decodes it (a multi's sub-transactions each
    /// encoded on their own, as its `SubTxn`s hold them; `Other` as nothing).
    pub fn write(&self, out: &mut BytesMut) {
        match self {
            TxnBody::Create(c) => c.write(out),
            TxnBody::CreateTtl(c) => c.write(out),
            TxnBody::CreateContainer(c) => c.write(out),
            TxnBody::Delete(d) => d.write(out),
            TxnBody::SetData(s) | TxnBody::Reconfig(s) => s.write(out),
            TxnBody::SetAcl(s) => s.write(out),
            TxnBody::Check(c) => c.write(out),
            TxnBody::CreateSession(s) => s.write(out),
            TxnBody::CloseSession(Some(c)) => c.write(out),
            TxnBody::CloseSession(None) | TxnBody::Other => {}
            TxnBody::Error(e) => e.write(out),
            TxnBody::Multi(subs) => {
                out.put_i32(i32::try_from(subs.len()).unwrap_or(i32::MAX));
                for (txn_type, body) in subs {
                    let mut data = BytesMut::new();
                    body.write(&mut data);
                    SubTxn {
                        txn_type: *txn_type,
                        data: data.freeze(),
                    }
                    .write(out);
                }
            }
        }
    }
}

/// One logged transaction: header and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnEntry {
    pub header: TxnHeader,
    pub body: TxnBody,
}

impl TxnEntry {
    /// Decodes `TxnHeader` + body; bytes after the body (a tree digest) are ignored.
    pub fn decode(bytes: Bytes) -> Result<TxnEntry, crate::DecodeError> {
        let mut r = crate::Reader::new(bytes);
        let header = TxnHeader::read(&mut r)?;
        let body = TxnBody::read(header.txn_type, &mut r)?;
        Ok(TxnEntry { header, body })
    }
}

/// The Adler-32 checksum (RFC 1950), as `java.util.zip.Adler32` computes it. The summing is
/// `simd_adler32`'s, which picks the widest vector instructions the CPU has at run time;
/// this type only holds the running value, so it stays `Copy`.
#[derive(Debug, Clone, Copy)]
pub struct Adler32 {
    value: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32 { value: 1 }
    }
}

impl Adler32 {
    pub fn new() -> Adler32 {
        Adler32::default()
    }

    /// Adds `data` to the running sum (pieces summed in turn give the sum of the whole).
    pub fn update(&mut self, data: &[u8]) {
        let mut sum = simd_adler32::Adler32::from_checksum(self.value);
        sum.write(data);
        self.value = sum.finish();
    }

    pub fn value(&self) -> u32 {
        self.value
    }

    /// The checksum of `data` in one call.
    pub fn of(data: &[u8]) -> u32 {
        let mut a = Adler32::new();
        a.update(data);
        a.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time sum zkd computed before the vectorised one, modulo deferred every
    /// 5552 bytes (the most before `b` could overflow a u32).
    fn byte_loop(mut a: u32, mut b: u32, data: &[u8]) -> (u32, u32) {
        for chunk in data.chunks(5552) {
            for &byte in chunk {
                a += u32::from(byte);
                b += a;
            }
            a %= 65521;
            b %= 65521;
        }
        (a, b)
    }

    #[test]
    fn adler32_reference_values() {
        assert_eq!(Adler32::of(b""), 1);
        assert_eq!(Adler32::of(b"a"), 0x0062_0062);
        assert_eq!(Adler32::of(b"abc"), 0x024D_0127);
        assert_eq!(Adler32::of(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(
            Adler32::of(b"The quick brown fox jumps over the lazy dog"),
            0x5BDC_0FDA
        );
        let big = vec![0xffu8; 100_000];
        // Checked against the definition, reduced after every byte.
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &big {
            a = (a + u64::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(u64::from(Adler32::of(&big)), (b << 16) | a);
    }

    proptest::proptest! {
        /// Same sums as the byte loop, on inputs of every length up to a few vector blocks
        /// past 5552 bytes, whole and in pieces split at arbitrary points (the snapshot reader
        /// sums field by field).
        #[test]
        fn adler32_matches_the_byte_loop(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..12_000),
            cuts in proptest::collection::vec(0usize..12_000, 0..20),
        ) {
            let (a, b) = byte_loop(1, 0, &data);
            let expected = (b << 16) | a;
            proptest::prop_assert_eq!(Adler32::of(&data), expected);

            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut sum = Adler32::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([data.len()]) {
                sum.update(&data[at..cut]);
                at = cut;
                let (a, b) = byte_loop(1, 0, &data[..at]);
                proptest::prop_assert_eq!(sum.value(), (b << 16) | a);
            }
            proptest::prop_assert_eq!(sum.value(), expected);
        }
    }

    #[test]
    fn adler32_sums_all_ff_bytes_in_small_pieces() {
        // The largest byte values push the sums closest to the modulus on every step.
        let data = vec![0xffu8; 70_000];
        let mut sum = Adler32::new();
        for piece in data.chunks(7) {
            sum.update(piece);
        }
        let (a, b) = byte_loop(1, 0, &data);
        assert_eq!(sum.value(), (b << 16) | a);
        assert_eq!(Adler32::of(&data), (b << 16) | a);
    }

    #[test]
    fn magics_spell_their_names() {
        assert_eq!(SNAP_MAGIC, 0x5A4B_534E);
        assert_eq!(LOG_MAGIC, 0x5A4B_4C47);
    }

    #[test]
    fn multi_bodies_decode_their_sub_transactions() {
        let create = CreateTxn {
            node: NewNode {
                path: "/a".into(),
                data: Some(Bytes::from_static(b"x")),
                acl: Acl::open_unsafe(),
            },
            ephemeral: false,
            parent_cversion: 1,
        };
        let multi = MultiTxn {
            txns: vec![
                SubTxn {
                    txn_type: txn_type::CREATE,
                    data: crate::to_bytes(&create),
                },
                SubTxn {
                    txn_type: txn_type::DELETE,
                    data: crate::to_bytes(&DeleteTxn { path: "/b".into() }),
                },
            ],
        };
        let body = TxnBody::read(
            txn_type::MULTI,
            &mut crate::Reader::new(crate::to_bytes(&multi)),
        )
        .expect("decodes");
        assert_eq!(
            body,
            TxnBody::Multi(vec![
                (txn_type::CREATE, TxnBody::Create(create)),
                (
                    txn_type::DELETE,
                    TxnBody::Delete(DeleteTxn { path: "/b".into() })
                ),
            ])
        );
    }
}
