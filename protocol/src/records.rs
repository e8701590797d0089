//! Every Jute record on the client wire (docs/protocol.md, "Framing and encoding",
//! "Handshake"), field order as sent.

use bytes::{BufMut, Bytes, BytesMut};

use crate::jute::{DecodeError, Jute, Reader};
use crate::record;

record! {
    /// An identity: `scheme:id`.
    pub struct Id { pub scheme: String, pub id: String }
}

record! {
    /// One ACL entry.
    pub struct Acl { pub perms: i32, pub id: Id }
}

impl Acl {
    pub fn new(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    /// `world:anyone` with every permission.
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl::new(crate::perms::ALL, "world", "anyone")]
    }
}

record! {
    /// Znode metadata (68 bytes).
    #[derive(Copy, Hash)]
    pub struct Stat {
        pub czxid: i64,
        pub mzxid: i64,
        pub ctime: i64,
        pub mtime: i64,
        pub version: i32,
        pub cversion: i32,
        pub aversion: i32,
        pub ephemeral_owner: i64,
        pub data_length: i32,
        pub num_children: i32,
        pub pzxid: i64,
    }
}

record! {
    /// One identity reported by whoAmI.
    pub struct ClientInfo { pub auth_scheme: String, pub user: String }
}

record! {
    pub struct RequestHeader { pub xid: i32, pub op: i32 }
}

record! {
    pub struct ReplyHeader { pub xid: i32, pub zxid: i64, pub err: i32 }
}

record! {
    pub struct MultiHeader { pub op: i32, pub done: bool, pub err: i32 }
}

record! {
    pub struct AuthPacket { pub auth_type: i32, pub scheme: String, pub auth: Bytes }
}

record! {
    /// A watch notification body (sent with xid -1).
    pub struct WatcherEvent { pub event_type: i32, pub state: i32, pub path: String }
}

record! {
    pub struct ErrorResponse { pub err: i32 }
}

record! {
    pub struct CreateRequest { pub path: String, pub data: Option<Bytes>, pub acl: Vec<Acl>, pub flags: i32 }
}

record! {
    pub struct CreateTtlRequest {
        pub path: String,
        pub data: Option<Bytes>,
        pub acl: Vec<Acl>,
        pub flags: i32,
        pub ttl: i64,
    }
}

record! {
    pub struct CreateResponse { pub path: String }
}

record! {
    pub struct Create2Response { pub path: String, pub stat: Stat }
}

record! {
    pub struct DeleteRequest { pub path: String, pub version: i32 }
}

record! {
    /// exists, getData, getChildren and getChildren2 requests.
    pub struct PathWatchRequest { pub path: String, pub watch: bool }
}

record! {
    /// getACL, getEphemerals (prefix) and getAllChildrenNumber requests.
    pub struct PathRequest { pub path: String }
}

record! {
    /// sync request and response: the path is echoed verbatim, null included.
    pub struct SyncRequest { pub path: Option<String> }
}

record! {
    /// exists, setData and setACL responses.
    pub struct StatResponse { pub stat: Stat }
}

record! {
    pub struct GetDataResponse { pub data: Option<Bytes>, pub stat: Stat }
}

record! {
    pub struct SetDataRequest { pub path: String, pub data: Option<Bytes>, pub version: i32 }
}

record! {
    pub struct GetAclResponse { pub acl: Vec<Acl>, pub stat: Stat }
}

record! {
    pub struct SetAclRequest { pub path: String, pub acl: Vec<Acl>, pub version: i32 }
}

record! {
    /// getChildren response; also getEphemerals response.
    pub struct ChildrenResponse { pub children: Vec<String> }
}

record! {
    pub struct Children2Response { pub children: Vec<String>, pub stat: Stat }
}

record! {
    pub struct CheckVersionRequest { pub path: String, pub version: i32 }
}

record! {
    pub struct SetWatches {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
    }
}

record! {
    pub struct SetWatches2 {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
        pub persistent_watches: Vec<String>,
        pub persistent_recursive_watches: Vec<String>,
    }
}

impl From<SetWatches> for SetWatches2 {
    fn from(w: SetWatches) -> SetWatches2 {
        SetWatches2 {
            relative_zxid: w.relative_zxid,
            data_watches: w.data_watches,
            exist_watches: w.exist_watches,
            child_watches: w.child_watches,
            persistent_watches: Vec::new(),
            persistent_recursive_watches: Vec::new(),
        }
    }
}

record! {
    pub struct AddWatchRequest { pub path: String, pub mode: i32 }
}

record! {
    /// checkWatches and removeWatches requests.
    pub struct WatchTypeRequest { pub path: String, pub watcher_type: i32 }
}

record! {
    pub struct AllChildrenNumberResponse { pub total: i32 }
}

record! {
    pub struct WhoAmIResponse { pub client_info: Vec<ClientInfo> }
}

record! {
    pub struct ReconfigRequest {
        pub joining_servers: Option<String>,
        pub leaving_servers: Option<String>,
        pub new_members: Option<String>,
        pub cur_config_id: i64,
    }
}

record! {
    /// GetSASLRequest and SetSASLResponse.
    pub struct SaslToken { pub token: Option<Bytes> }
}

/// The first frame of a connection. `read_only` is `None` for old clients that omit the byte.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout: i32,
    pub session_id: i64,
    pub passwd: Bytes,
    pub read_only: Option<bool>,
}

impl ConnectRequest {
    /// What a client sends to open a new session with `timeout` ms: protocol version 0, no
    /// zxid seen, no session id, 16 zero password bytes, and the read-only byte (false).
    pub fn new_session(timeout: i32) -> ConnectRequest {
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
        }
    }
}

// Written by hand below (the readOnly byte is optional on the wire); the test strategy is the
// one `record!` would make.
crate::__record_strategy!(ConnectRequest {
    protocol_version: i32, last_zxid_seen: i64, timeout: i32, session_id: i64, passwd: Bytes,
    read_only: Option<bool>
});

impl Jute for ConnectRequest {
    fn write(&self, out: &mut BytesMut) {
        self.protocol_version.write(out);
        self.last_zxid_seen.write(out);
        self.timeout.write(out);
        self.session_id.write(out);
        self.passwd.write(out);
        if let Some(ro) = self.read_only {
            ro.write(out);
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: r.i32()?,
            last_zxid_seen: r.i64()?,
            timeout: r.i32()?,
            session_id: r.i64()?,
            passwd: Bytes::read(r)?,
            read_only: if r.is_empty() { None } else { Some(r.bool()?) },
        })
    }
}

/// The server's first frame. `read_only` is present iff the request carried it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout: i32,
    pub session_id: i64,
    pub passwd: Bytes,
    pub read_only: Option<bool>,
}

impl ConnectResponse {
    /// The reply to an unknown, expired or wrongly authenticated session.
    pub fn invalid(read_only: Option<bool>) -> ConnectResponse {
        ConnectResponse {
            protocol_version: 0,
            timeout: 0,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: read_only.map(|_| false),
        }
    }
}

crate::__record_strategy!(ConnectResponse {
    protocol_version: i32, timeout: i32, session_id: i64, passwd: Bytes, read_only: Option<bool>
});

impl Jute for ConnectResponse {
    fn write(&self, out: &mut BytesMut) {
        self.protocol_version.write(out);
        self.timeout.write(out);
        self.session_id.write(out);
        self.passwd.write(out);
        if let Some(ro) = self.read_only {
            out.put_u8(ro as u8);
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: r.i32()?,
            timeout: r.i32()?,
            session_id: r.i64()?,
            passwd: Bytes::read(r)?,
            read_only: if r.is_empty() { None } else { Some(r.bool()?) },
        })
    }
}
