//! multi (14) and multiRead (22): MultiHeader-delimited sub-requests and results
//! (docs/protocol.md, "multi and multiRead").

use bytes::{Bytes, BytesMut};

use crate::create::Create;
use crate::jute::{DecodeError, Jute, Reader};
use crate::opcode::{OpClass, OpCode};
use crate::records::*;

/// One sub-operation of a multi or multiRead request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    Create(Create),
    Delete(DeleteRequest),
    SetData(SetDataRequest),
    Check(CheckVersionRequest),
    GetData(PathWatchRequest),
    GetChildren(PathWatchRequest),
}

impl MultiOp {
    pub fn op(&self) -> OpCode {
        match self {
            MultiOp::Create(c) => c.op,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
            MultiOp::GetData(_) => OpCode::GetData,
            MultiOp::GetChildren(_) => OpCode::GetChildren,
        }
    }

    /// Whether this is a read sub-operation (allowed only in multiRead).
    pub fn is_read(&self) -> bool {
        self.op().class() == OpClass::Read
    }

    /// The path the sub-operation names.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(c) => &c.path,
            MultiOp::Delete(r) => &r.path,
            MultiOp::SetData(r) => &r.path,
            MultiOp::Check(r) => &r.path,
            MultiOp::GetData(r) | MultiOp::GetChildren(r) => &r.path,
        }
    }
}

/// Reads sub-operations up to the terminating header (done = true).
pub fn read_ops(r: &mut Reader) -> Result<Vec<MultiOp>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::read(r)?;
        if h.done {
            return Ok(ops);
        }
        let op = OpCode::from_i32(h.op).ok_or(DecodeError::BadMultiOp(h.op))?;
        ops.push(match op {
            OpCode::Create | OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => {
                MultiOp::Create(Create::read(op, r)?)
            }
            OpCode::Delete => MultiOp::Delete(Jute::read(r)?),
            OpCode::SetData => MultiOp::SetData(Jute::read(r)?),
            OpCode::Check => MultiOp::Check(Jute::read(r)?),
            OpCode::GetData => MultiOp::GetData(Jute::read(r)?),
            OpCode::GetChildren => MultiOp::GetChildren(Jute::read(r)?),
            _ => return Err(DecodeError::BadMultiOp(h.op)),
        });
    }
}

/// Writes sub-operations and the terminator.
pub fn write_ops(ops: &[MultiOp], out: &mut BytesMut) {
    for op in ops {
        MultiHeader {
            op: op.op() as i32,
            done: false,
            err: -1,
        }
        .write(out);
        match op {
            MultiOp::Create(c) => c.write(out),
            MultiOp::Delete(b) => b.write(out),
            MultiOp::SetData(b) => b.write(out),
            MultiOp::Check(b) => b.write(out),
            MultiOp::GetData(b) | MultiOp::GetChildren(b) => b.write(out),
        }
    }
    TERMINATOR.write(out);
}

const TERMINATOR: MultiHeader = MultiHeader {
    op: -1,
    done: true,
    err: -1,
};

/// One result of a multi or multiRead reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// Type 1 (path only) when `stat` is `None`, type 15 (path and Stat) otherwise.
    Create {
        path: String,
        stat: Option<Stat>,
    },
    Delete,
    SetData(Stat),
    Check,
    GetData {
        data: Option<Bytes>,
        stat: Stat,
    },
    GetChildren(Vec<String>),
    /// Type -1 with this error code (0 for ops before the failing one of a failed multi).
    Error(i32),
}

impl MultiResult {
    fn write(&self, out: &mut BytesMut) {
        let header = |op: OpCode, out: &mut BytesMut| {
            MultiHeader {
                op: op as i32,
                done: false,
                err: 0,
            }
            .write(out)
        };
        match self {
            MultiResult::Create { path, stat: None } => {
                header(OpCode::Create, out);
                path.write(out);
            }
            MultiResult::Create {
                path,
                stat: Some(stat),
            } => {
                header(OpCode::Create2, out);
                path.write(out);
                stat.write(out);
            }
            MultiResult::Delete => header(OpCode::Delete, out),
            MultiResult::SetData(stat) => {
                header(OpCode::SetData, out);
                stat.write(out);
            }
            MultiResult::Check => header(OpCode::Check, out),
            MultiResult::GetData { data, stat } => {
                header(OpCode::GetData, out);
                data.write(out);
                stat.write(out);
            }
            MultiResult::GetChildren(children) => {
                header(OpCode::GetChildren, out);
                children.write(out);
            }
            MultiResult::Error(err) => {
                MultiHeader {
                    op: -1,
                    done: false,
                    err: *err,
                }
                .write(out);
                err.write(out);
            }
        }
    }

    fn read(h: &MultiHeader, r: &mut Reader) -> Result<MultiResult, DecodeError> {
        Ok(match h.op {
            1 => MultiResult::Create {
                path: String::read(r)?,
                stat: None,
            },
            15 => MultiResult::Create {
                path: String::read(r)?,
                stat: Some(Stat::read(r)?),
            },
            2 => MultiResult::Delete,
            5 => MultiResult::SetData(Stat::read(r)?),
            13 => MultiResult::Check,
            4 => MultiResult::GetData {
                data: Jute::read(r)?,
                stat: Stat::read(r)?,
            },
            8 => MultiResult::GetChildren(Jute::read(r)?),
            -1 => MultiResult::Error(r.i32()?),
            other => return Err(DecodeError::BadMultiOp(other)),
        })
    }
}

/// The body of a multi or multiRead reply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiResponse(pub Vec<MultiResult>);

impl Jute for MultiResponse {
    fn write(&self, out: &mut BytesMut) {
        for r in &self.0 {
            r.write(out);
        }
        TERMINATOR.write(out);
    }

    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut results = Vec::new();
        loop {
            let h = MultiHeader::read(r)?;
            if h.done {
                return Ok(MultiResponse(results));
            }
            results.push(MultiResult::read(&h, r)?);
        }
    }
}
