//! Reply bodies, decoded by the opcode of the request they answer (client side) or encoded
//! (server side). The `ReplyHeader` in front of them is not part of these values.

use bytes::BytesMut;

use crate::jute::{DecodeError, Jute, Reader};
use crate::multi::MultiResponse;
use crate::opcode::{OpCode, ReplyBody};
use crate::records::*;

/// The body of a successful reply (`err == 0`); replies with `err != 0` carry no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// No body: delete, check, ping, checkWatches, removeWatches, auth, setWatches,
    /// setWatches2, deleteContainer and closeSession.
    Empty,
    /// create (1): the path only.
    Create(CreateResponse),
    /// create2 (15), createContainer (19), createTTL (21): path and Stat.
    Create2(Create2Response),
    /// exists, setData and setACL.
    Stat(StatResponse),
    /// getData; also reconfig.
    GetData(GetDataResponse),
    GetAcl(GetAclResponse),
    /// getChildren; also getEphemerals.
    Children(ChildrenResponse),
    Children2(Children2Response),
    /// sync echoes the request path.
    Sync(SyncRequest),
    /// multi and multiRead.
    Multi(MultiResponse),
    Sasl(SaslToken),
    AllChildrenNumber(AllChildrenNumberResponse),
    /// addWatch answers with an ErrorResponse (normally `err = 0`).
    AddWatch(ErrorResponse),
    WhoAmI(WhoAmIResponse),
}

impl Response {
    /// Decodes the body of a successful reply to a request with the given opcode. `None` for
    /// opcodes that are not client requests (0 notification, -1 error, -10 createSession).
    pub fn read(op: OpCode, r: &mut Reader) -> Option<Result<Response, DecodeError>> {
        use ReplyBody as B;
        Some(match op.info().reply {
            B::NotARequest => return None,
            B::Empty => Ok(Response::Empty),
            B::Create => Jute::read(r).map(Response::Create),
            B::Create2 => Jute::read(r).map(Response::Create2),
            B::Stat => Jute::read(r).map(Response::Stat),
            B::GetData => Jute::read(r).map(Response::GetData),
            B::GetAcl => Jute::read(r).map(Response::GetAcl),
            B::Children => Jute::read(r).map(Response::Children),
            B::Children2 => Jute::read(r).map(Response::Children2),
            B::Sync => Jute::read(r).map(Response::Sync),
            B::Multi => Jute::read(r).map(Response::Multi),
            B::Sasl => Jute::read(r).map(Response::Sasl),
            B::AllChildrenNumber => Jute::read(r).map(Response::AllChildrenNumber),
            B::AddWatch => Jute::read(r).map(Response::AddWatch),
            B::WhoAmI => Jute::read(r).map(Response::WhoAmI),
        })
    }

    /// Encodes the body (without the reply header).
    pub fn write(&self, out: &mut BytesMut) {
        match self {
            Response::Empty => {}
            Response::Create(b) => b.write(out),
            Response::Create2(b) => b.write(out),
            Response::Stat(b) => b.write(out),
            Response::GetData(b) => b.write(out),
            Response::GetAcl(b) => b.write(out),
            Response::Children(b) => b.write(out),
            Response::Children2(b) => b.write(out),
            Response::Sync(b) => b.write(out),
            Response::Multi(b) => b.write(out),
            Response::Sasl(b) => b.write(out),
            Response::AllChildrenNumber(b) => b.write(out),
            Response::AddWatch(b) => b.write(out),
            Response::WhoAmI(b) => b.write(out),
        }
    }
}

/// Decodes a whole reply payload to a request with opcode `op`: the header, then the body if
/// `err == 0` and the opcode has one (`Some(Response::Empty)` when it has none). Notifications
/// (xid -1) are not replies: read them as `ReplyHeader` + `WatcherEvent`.
pub fn read_reply(
    op: OpCode,
    r: &mut Reader,
) -> Result<(ReplyHeader, Option<Response>), DecodeError> {
    let header = ReplyHeader::read(r)?;
    if header.err != 0 {
        return Ok((header, None));
    }
    let body = Response::read(op, r).transpose()?;
    Ok((header, body))
}
