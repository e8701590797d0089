//! Client requests, decoded by opcode (server side) or encoded (client side).

use bytes::BytesMut;

use crate::create::Create;
use crate::jute::{DecodeError, Jute, Reader};
use crate::multi::MultiOp;
use crate::opcode::OpCode;
use crate::records::*;

/// Every request a client can send after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create(Create),
    Delete(DeleteRequest),
    Exists(PathWatchRequest),
    GetData(PathWatchRequest),
    SetData(SetDataRequest),
    GetAcl(PathRequest),
    SetAcl(SetAclRequest),
    GetChildren(PathWatchRequest),
    GetChildren2(PathWatchRequest),
    Sync(SyncRequest),
    Ping,
    Check(CheckVersionRequest),
    Multi(Vec<MultiOp>),
    MultiRead(Vec<MultiOp>),
    Reconfig(ReconfigRequest),
    CheckWatches(WatchTypeRequest),
    RemoveWatches(WatchTypeRequest),
    DeleteContainer(PathRequest),
    Auth(AuthPacket),
    SetWatches(SetWatches),
    SetWatches2(SetWatches2),
    Sasl(SaslToken),
    GetEphemerals(PathRequest),
    GetAllChildrenNumber(PathRequest),
    AddWatch(AddWatchRequest),
    WhoAmI,
    CloseSession,
}

/// A match on `$op` that reads each listed opcode's body as one Jute record, carried by the
/// [`Request`] variant of the same name, followed by the other arms.
macro_rules! read_request {
    ($op:ident, $r:ident, [$($plain:ident,)*], { $($arms:tt)* }) => {
        match $op {
            $(OpCode::$plain => Request::$plain(Jute::read($r)?),)*
            $($arms)*
        }
    };
}

impl Request {
    /// Decodes the body of a request with a known opcode. Opcodes that are not client
    /// requests (0 notification, -1 error, -10 createSession) give
    /// [`DecodeError::NotARequest`].
    pub fn read(op: OpCode, r: &mut Reader) -> Result<Request, DecodeError> {
        use OpCode as O;
        Ok(read_request!(op, r, [
            Delete, Exists, GetData, SetData, GetAcl, SetAcl, GetChildren, GetChildren2, Sync,
            Check, Reconfig, CheckWatches, RemoveWatches, DeleteContainer, Auth, SetWatches,
            SetWatches2, Sasl, GetEphemerals, GetAllChildrenNumber, AddWatch,
        ], {
            O::Create | O::Create2 | O::CreateContainer | O::CreateTtl => {
                Request::Create(Create::read(op, r)?)
            }
            O::Ping => Request::Ping,
            O::Multi => Request::Multi(crate::multi::read_ops(r)?),
            O::MultiRead => Request::MultiRead(crate::multi::read_ops(r)?),
            O::WhoAmI => Request::WhoAmI,
            O::CloseSession => Request::CloseSession,
            O::Notification | O::Error | O::CreateSession => {
                return Err(DecodeError::NotARequest(op as i32))
            }
        }))
    }

    /// The opcode this request is sent with.
    pub fn op(&self) -> OpCode {
        use OpCode as O;
        match self {
            Request::Create(c) => c.op,
            Request::Delete(_) => O::Delete,
            Request::Exists(_) => O::Exists,
            Request::GetData(_) => O::GetData,
            Request::SetData(_) => O::SetData,
            Request::GetAcl(_) => O::GetAcl,
            Request::SetAcl(_) => O::SetAcl,
            Request::GetChildren(_) => O::GetChildren,
            Request::GetChildren2(_) => O::GetChildren2,
            Request::Sync(_) => O::Sync,
            Request::Ping => O::Ping,
            Request::Check(_) => O::Check,
            Request::Multi(_) => O::Multi,
            Request::MultiRead(_) => O::MultiRead,
            Request::Reconfig(_) => O::Reconfig,
            Request::CheckWatches(_) => O::CheckWatches,
            Request::RemoveWatches(_) => O::RemoveWatches,
            Request::DeleteContainer(_) => O::DeleteContainer,
            Request::Auth(_) => O::Auth,
            Request::SetWatches(_) => O::SetWatches,
            Request::SetWatches2(_) => O::SetWatches2,
            Request::Sasl(_) => O::Sasl,
            Request::GetEphemerals(_) => O::GetEphemerals,
            Request::GetAllChildrenNumber(_) => O::GetAllChildrenNumber,
            Request::AddWatch(_) => O::AddWatch,
            Request::WhoAmI => O::WhoAmI,
            Request::CloseSession => O::CloseSession,
        }
    }

    /// The paths the request names, in order (each sub-operation's, for a multi).
    pub fn paths(&self) -> Vec<&str> {
        use Request as R;
        match self {
            R::Create(c) => vec![&c.path],
            R::Delete(r) => vec![&r.path],
            R::Exists(r) | R::GetData(r) | R::GetChildren(r) | R::GetChildren2(r) => {
                vec![&r.path]
            }
            R::SetData(r) => vec![&r.path],
            R::GetAcl(r)
            | R::DeleteContainer(r)
            | R::GetEphemerals(r)
            | R::GetAllChildrenNumber(r) => {
                vec![&r.path]
            }
            R::SetAcl(r) => vec![&r.path],
            R::Sync(r) => r.path.as_deref().into_iter().collect(),
            R::Check(r) => vec![&r.path],
            R::CheckWatches(r) | R::RemoveWatches(r) => vec![&r.path],
            R::AddWatch(r) => vec![&r.path],
            R::Multi(ops) | R::MultiRead(ops) => ops.iter().map(MultiOp::path).collect(),
            R::Reconfig(_)
            | R::Auth(_)
            | R::SetWatches(_)
            | R::SetWatches2(_)
            | R::Sasl(_)
            | R::Ping
            | R::WhoAmI
            | R::CloseSession => Vec::new(),
        }
    }

    /// Encodes the body (without the request header).
    pub fn write(&self, out: &mut BytesMut) {
        match self {
            Request::Create(c) => c.write(out),
            Request::Delete(b) => b.write(out),
            Request::Exists(b)
            | Request::GetData(b)
            | Request::GetChildren(b)
            | Request::GetChildren2(b) => b.write(out),
            Request::SetData(b) => b.write(out),
            Request::GetAcl(b)
            | Request::DeleteContainer(b)
            | Request::GetEphemerals(b)
            | Request::GetAllChildrenNumber(b) => b.write(out),
            Request::SetAcl(b) => b.write(out),
            Request::Sync(b) => b.write(out),
            Request::Check(b) => b.write(out),
            Request::Multi(ops) | Request::MultiRead(ops) => crate::multi::write_ops(ops, out),
            Request::Reconfig(b) => b.write(out),
            Request::CheckWatches(b) | Request::RemoveWatches(b) => b.write(out),
            Request::Auth(b) => b.write(out),
            Request::SetWatches(b) => b.write(out),
            Request::SetWatches2(b) => b.write(out),
            Request::Sasl(b) => b.write(out),
            Request::AddWatch(b) => b.write(out),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
        }
    }

    /// A complete frame (length, header, body) for this request with the given xid.
    pub fn to_frame(&self, xid: i32) -> bytes::Bytes {
        let mut out = BytesMut::with_capacity(64);
        self.write_frame(xid, &mut out);
        out.freeze()
    }

    /// Appends the frame [`Request::to_frame`] builds to `out` (for pipelined writes).
    pub fn write_frame(&self, xid: i32, out: &mut BytesMut) {
        crate::frame::append_frame(out, |out| {
            RequestHeader {
                xid,
                op: self.op() as i32,
            }
            .write(out);
            self.write(out);
        })
    }
}
