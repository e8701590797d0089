//! The create request in all its flavours (create, create2, createContainer, createTTL),
//! shared by plain requests and multi sub-operations.

use bytes::BytesMut;

use crate::jute::{DecodeError, Jute, Reader};
use crate::opcode::OpCode;
use crate::records::Acl;

/// A create of any flavour: opcode 1, 15, 19 or 21 (`ttl` is -1 unless the opcode is 21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    pub op: OpCode,
    pub path: String,
    pub data: Option<bytes::Bytes>,
    pub acl: Vec<Acl>,
    pub flags: i32,
    pub ttl: i64,
}

impl Create {
    /// Decodes the body of a create with the given opcode.
    pub fn read(op: OpCode, r: &mut Reader) -> Result<Create, DecodeError> {
        let path = String::read(r)?;
        let data = Option::<bytes::Bytes>::read(r)?;
        let acl = Vec::<Acl>::read(r)?;
        let flags = r.i32()?;
        let ttl = if op == OpCode::CreateTtl {
            r.i64()?
        } else {
            -1
        };
        Ok(Create {
            op,
            path,
            data,
            acl,
            flags,
            ttl,
        })
    }

    pub fn write(&self, out: &mut BytesMut) {
        self.path.write(out);
        self.data.write(out);
        self.acl.write(out);
        self.flags.write(out);
        if self.op == OpCode::CreateTtl {
            self.ttl.write(out);
        }
    }
}
