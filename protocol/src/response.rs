//! Reply bodies, decoded by the opcode of the request they answer (client side) or encoded
//! (server side). The `ReplyHeader` in front of them is not part of these values.

use bytes::BytesMut;

use crate::jute::{DecodeError, Jute, Reader};
use crate::multi::MultiResponse;
use crate::opcode::{OpCode, ReplyBody};
use crate::records::*;

/// Declares [`Response`] with `Empty` and the listed variants, each carrying one Jute
/// record and named like its [`ReplyBody`], and the matches that read and write them.
macro_rules! responses {
    ($($(#[$doc:meta])* $name:ident($record:ty),)*) => {
        /// The body of a successful reply (`err == 0`); replies with `err != 0` carry no body.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Response {
            /// No body: delete, check, ping, checkWatches, removeWatches, auth, setWatches,
            /// setWatches2, deleteContainer and closeSession.
            Empty,
            $($(#[$doc])* $name($record),)*
        }

        impl Response {
            /// Decodes the body of a successful reply to a request with the given opcode.
            /// `None` for opcodes that are not client requests (0 notification, -1 error, -10
            /// createSession).
            pub fn read(op: OpCode, r: &mut Reader) -> Option<Result<Response, DecodeError>> {
                Some(match op.info().reply {
                    ReplyBody::NotARequest => return None,
                    ReplyBody::Empty => Ok(Response::Empty),
                    $(ReplyBody::$name => Jute::read(r).map(Response::$name),)*
                })
            }

            /// Encodes the body (without the reply header).
            pub fn write(&self, out: &mut BytesMut) {
                match self {
                    Response::Empty => {}
                    $(Response::$name(b) => b.write(out),)*
                }
            }
        }
    };
}

responses! {
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
