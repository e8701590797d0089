//! Request opcodes and the one table that classifies them: what kind of request each is,
//! its reply body, whether it is a transaction, how a read-only or lagging member treats it,
//! and the other facts the server decides by opcode. Every such decision in the workspace
//! reads this table; [`OpCode::info`] is one `match` with no catch-all arm, so a new opcode
//! does not compile until its row is written.

use crate::consts::xid;

/// Declares [`OpCode`] with its numbers, and derives [`OpCode::ALL`] and
/// [`OpCode::from_i32`] from the same list, so the three cannot disagree.
macro_rules! opcodes {
    ($($name:ident = $n:literal,)*) => {
        /// Request opcodes (docs/protocol.md, "Opcodes").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum OpCode {
            $($name = $n,)*
        }

        impl OpCode {
            /// Every opcode, in declaration order.
            pub const ALL: &'static [OpCode] = &[$(OpCode::$name,)*];

            /// The opcode numbered `v`, if there is one.
            pub fn from_i32(v: i32) -> Option<OpCode> {
                match v {
                    $($n => Some(OpCode::$name),)*
                    _ => None,
                }
            }
        }
    };
}

opcodes! {
    Notification = 0,
    Create = 1,
    Delete = 2,
    Exists = 3,
    GetData = 4,
    SetData = 5,
    GetAcl = 6,
    SetAcl = 7,
    GetChildren = 8,
    Sync = 9,
    Ping = 11,
    GetChildren2 = 12,
    Check = 13,
    Multi = 14,
    Create2 = 15,
    Reconfig = 16,
    CheckWatches = 17,
    RemoveWatches = 18,
    CreateContainer = 19,
    DeleteContainer = 20,
    CreateTtl = 21,
    MultiRead = 22,
    Auth = 100,
    SetWatches = 101,
    Sasl = 102,
    GetEphemerals = 103,
    GetAllChildrenNumber = 104,
    SetWatches2 = 105,
    AddWatch = 106,
    WhoAmI = 107,
    CreateSession = -10,
    CloseSession = -11,
    Error = -1,
}

/// What kind of request an opcode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// Reads the tree and changes nothing (watch flags aside).
    Read,
    /// Goes through the leader's pipeline as a change to the tree.
    Write,
    /// Opens, keeps alive, closes or describes the client's session.
    Session,
    /// Sets, checks or removes watches without reading a node.
    Watches,
    /// Adds credentials to the connection.
    Auth,
    /// Asks the ensemble rather than the tree (sync).
    Control,
    /// Not sent by a client after the handshake (notification, error).
    NotARequest,
}

/// The body of a successful reply, one kind per `Response` variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplyBody {
    /// No reply: the opcode is not a client request (notification, error, createSession).
    NotARequest,
    /// The reply header alone.
    Empty,
    Create,
    Create2,
    Stat,
    GetData,
    GetAcl,
    Children,
    Children2,
    Sync,
    Multi,
    Sasl,
    AllChildrenNumber,
    AddWatch,
    WhoAmI,
}

impl ReplyBody {
    /// Whether the body ends with the node's Stat.
    pub const fn ends_with_stat(self) -> bool {
        match self {
            ReplyBody::Stat
            | ReplyBody::GetData
            | ReplyBody::GetAcl
            | ReplyBody::Children2
            | ReplyBody::Create2 => true,
            ReplyBody::NotARequest
            | ReplyBody::Empty
            | ReplyBody::Create
            | ReplyBody::Children
            | ReplyBody::Sync
            | ReplyBody::Multi
            | ReplyBody::Sasl
            | ReplyBody::AllChildrenNumber
            | ReplyBody::AddWatch
            | ReplyBody::WhoAmI => false,
        }
    }
}

/// Where the first path a request names sits in its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathAt {
    /// The request names no path.
    Nowhere,
    /// The body starts with it.
    Body,
    /// In the first operation, after the multi header (type, done, err).
    FirstSubOp,
}

/// What a successful request does to the watches on the path it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEffect {
    /// Nothing.
    None,
    /// With its watch flag: a data watch (getData).
    Data,
    /// With its watch flag: a data watch on a node, an exist watch where there is none
    /// (exists, whose NONODE answer leaves a watch too).
    DataOrExist,
    /// With its watch flag: a child watch (getChildren in both forms).
    Child,
    /// A persistent watch, recursive or not by the request's mode (addWatch).
    Persistent,
    /// Removes the watches of the request's watcher type (removeWatches).
    Removes,
}

impl WatchEffect {
    /// A read that can leave a data or child watch on the path it names (its watch flag).
    pub const fn is_watching_read(self) -> bool {
        matches!(
            self,
            WatchEffect::Data | WatchEffect::DataOrExist | WatchEffect::Child
        )
    }
}

/// When a follower answers the request, relative to the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FollowerAnswers {
    /// At once, from its own copy of the tree.
    Locally,
    /// Once it applied the transaction the leader committed for it.
    AfterCommit,
    /// Once it applied everything the leader committed before the request.
    AfterSync,
}

/// Which processing-time figure of the monitor report the request counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LatencyGroup {
    Read,
    Update,
    /// Neither.
    Uncounted,
}

/// What committed state a successful reply shows: a reply that shows a change not yet on
/// disk waits until it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadScope {
    /// No node's state.
    Nothing,
    /// The paths the request names (each sub-operation's, for multiRead).
    Paths,
    /// Any node's (sync, counts and lists across the tree, re-registered watches).
    Everything,
}

/// One row of the opcode table: every fact the server decides by opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpInfo {
    pub class: OpClass,
    /// The name the `cons` four-letter word shows as a connection's last operation.
    pub short_name: &'static str,
    /// The opcode it is one form of (every create is a create, getChildren2 a getChildren);
    /// `None` for itself.
    pub family: Option<OpCode>,
    pub reply: ReplyBody,
    pub path_at: PathAt,
    /// A transaction: takes a zxid when it runs, even when it fails, and is logged.
    pub transaction: bool,
    pub follower: FollowerAnswers,
    /// A read-only member answers it with NOTREADONLY.
    pub refused_when_read_only: bool,
    /// Changes neither the tree nor a session nor a watch table, so answering it before
    /// another connection's pending write is as if it had arrived first.
    pub overtakes_writes: bool,
    pub latency: LatencyGroup,
    pub reads: ReadScope,
    /// What a successful request does to the watches on its path.
    pub watch: WatchEffect,
    /// The body carries node data after the path (create, setData).
    pub carries_data: bool,
    /// Sent by the client library on its own or to authenticate (ping, auth, sasl): a fault
    /// rule that names no opcode leaves it alone.
    pub background: bool,
    /// The xid a client always sends it with (`xid::PING`, `xid::AUTH`, `xid::SET_WATCHES`);
    /// `None` when it takes the connection's next xid.
    pub fixed_xid: Option<i32>,
}

/// Defaults of a read: answered locally, may overtake writes, read latency, shows its paths.
const fn read(short_name: &'static str, reply: ReplyBody) -> OpInfo {
    OpInfo {
        class: OpClass::Read,
        short_name,
        reply,
        path_at: PathAt::Body,
        transaction: false,
        follower: FollowerAnswers::Locally,
        refused_when_read_only: false,
        overtakes_writes: true,
        latency: LatencyGroup::Read,
        reads: ReadScope::Paths,
        watch: WatchEffect::None,
        carries_data: false,
        background: false,
        family: None,
        fixed_xid: None,
    }
}

/// Defaults of a write: a transaction the leader commits, refused by a read-only member,
/// update latency.
const fn write(short_name: &'static str, reply: ReplyBody) -> OpInfo {
    OpInfo {
        class: OpClass::Write,
        transaction: true,
        follower: FollowerAnswers::AfterCommit,
        refused_when_read_only: true,
        overtakes_writes: false,
        latency: LatencyGroup::Update,
        reads: ReadScope::Nothing,
        ..read(short_name, reply)
    }
}

/// Defaults of every other class: no path, answered locally, counted nowhere, shows nothing.
const fn other(class: OpClass, short_name: &'static str, reply: ReplyBody) -> OpInfo {
    OpInfo {
        class,
        path_at: PathAt::Nowhere,
        overtakes_writes: false,
        latency: LatencyGroup::Uncounted,
        reads: ReadScope::Nothing,
        ..read(short_name, reply)
    }
}

impl OpCode {
    /// The opcode table. One arm per opcode and no catch-all: a new opcode is classified here
    /// or the crate does not build. Each row names its class's defaults and what differs.
    pub const fn info(self) -> OpInfo {
        use OpClass as C;
        use OpCode::*;
        use ReplyBody as B;
        match self {
            Notification => other(C::NotARequest, "NOTI", B::NotARequest),
            Error => other(C::NotARequest, "ERR", B::NotARequest),

            Exists => OpInfo {
                watch: WatchEffect::DataOrExist,
                ..read("EXIS", B::Stat)
            },
            GetData => OpInfo {
                watch: WatchEffect::Data,
                ..read("GETD", B::GetData)
            },
            GetChildren => OpInfo {
                watch: WatchEffect::Child,
                ..read("GETC", B::Children)
            },
            GetChildren2 => OpInfo {
                watch: WatchEffect::Child,
                family: Some(GetChildren),
                ..read("GETC", B::Children2)
            },
            GetAcl => read("GETA", B::GetAcl),
            GetEphemerals => OpInfo {
                reads: ReadScope::Everything,
                ..read("GETE", B::Children)
            },
            GetAllChildrenNumber => OpInfo {
                reads: ReadScope::Everything,
                ..read("GETACN", B::AllChildrenNumber)
            },
            MultiRead => OpInfo {
                path_at: PathAt::FirstSubOp,
                overtakes_writes: false,
                ..read("MLTR", B::Multi)
            },

            Create => OpInfo {
                carries_data: true,
                ..write("CREA", B::Create)
            },
            Create2 | CreateContainer | CreateTtl => OpInfo {
                family: Some(Create),
                carries_data: true,
                ..write("CREA", B::Create2)
            },
            Delete => write("DELE", B::Empty),
            // Only the server deletes containers; a client's request fails, with a zxid.
            DeleteContainer => OpInfo {
                latency: LatencyGroup::Uncounted,
                ..write("DELE", B::Empty)
            },
            SetData => OpInfo {
                carries_data: true,
                ..write("SETD", B::Stat)
            },
            SetAcl => write("SETA", B::Stat),
            Multi => OpInfo {
                path_at: PathAt::FirstSubOp,
                ..write("MULT", B::Multi)
            },
            Reconfig => OpInfo {
                path_at: PathAt::Nowhere,
                latency: LatencyGroup::Uncounted,
                ..write("RECO", B::GetData)
            },
            // A check outside a multi is answered UNIMPLEMENTED without a zxid; a read-only
            // member still refuses it, as ZooKeeper's does.
            Check => OpInfo {
                transaction: false,
                follower: FollowerAnswers::Locally,
                latency: LatencyGroup::Uncounted,
                ..write("CHEC", B::Empty)
            },

            Ping => OpInfo {
                overtakes_writes: true,
                background: true,
                fixed_xid: Some(xid::PING),
                ..other(C::Session, "PING", B::Empty)
            },
            CreateSession => other(C::Session, "SESS", B::NotARequest),
            // Only the leader commits the end of a (global) session.
            CloseSession => OpInfo {
                follower: FollowerAnswers::AfterCommit,
                refused_when_read_only: true,
                ..other(C::Session, "CLOS", B::Empty)
            },
            WhoAmI => other(C::Session, "HOMI", B::WhoAmI),

            CheckWatches => OpInfo {
                path_at: PathAt::Body,
                ..other(C::Watches, "CHKW", B::Empty)
            },
            RemoveWatches => OpInfo {
                path_at: PathAt::Body,
                watch: WatchEffect::Removes,
                ..other(C::Watches, "REMW", B::Empty)
            },
            AddWatch => OpInfo {
                path_at: PathAt::Body,
                watch: WatchEffect::Persistent,
                ..other(C::Watches, "ADDW", B::AddWatch)
            },
            SetWatches => OpInfo {
                reads: ReadScope::Everything,
                fixed_xid: Some(xid::SET_WATCHES),
                ..other(C::Watches, "SETW", B::Empty)
            },
            SetWatches2 => OpInfo {
                reads: ReadScope::Everything,
                fixed_xid: Some(xid::SET_WATCHES),
                ..other(C::Watches, "STW2", B::Empty)
            },

            Auth => OpInfo {
                background: true,
                fixed_xid: Some(xid::AUTH),
                ..other(C::Auth, "AUTH", B::Empty)
            },
            Sasl => OpInfo {
                background: true,
                ..other(C::Auth, "SASL", B::Sasl)
            },

            Sync => OpInfo {
                path_at: PathAt::Body,
                follower: FollowerAnswers::AfterSync,
                refused_when_read_only: true,
                reads: ReadScope::Everything,
                ..other(C::Control, "SYNC", B::Sync)
            },
        }
    }

    /// The opcode of a request payload (the frame without its length prefix: the xid, then
    /// the opcode, then the body). `None` when the payload is shorter than that or the
    /// number is no opcode. The one place the opcode is read from raw header bytes.
    pub fn of_payload(payload: &[u8]) -> Option<OpCode> {
        let raw = <[u8; 4]>::try_from(payload.get(4..8)?).ok()?;
        OpCode::from_i32(i32::from_be_bytes(raw))
    }

    pub const fn class(self) -> OpClass {
        self.info().class
    }

    /// The short name the `cons` four-letter word shows as a connection's last operation.
    pub const fn short_name(self) -> &'static str {
        self.info().short_name
    }

    /// Whether a successful reply to this request has no body.
    pub fn has_empty_reply(self) -> bool {
        self.info().reply == ReplyBody::Empty
    }

    /// Whether a client sends it after the handshake (all but notification, error and
    /// createSession).
    pub fn is_request(self) -> bool {
        self.info().reply != ReplyBody::NotARequest
    }

    /// A transaction: takes a zxid when it runs, even when it fails, and is logged.
    pub const fn is_transaction(self) -> bool {
        self.info().transaction
    }

    /// Whether a read-only member answers it with NOTREADONLY.
    pub const fn refused_when_read_only(self) -> bool {
        self.info().refused_when_read_only
    }

    /// Whether receiving it keeps the session alive: every client request except the
    /// authentication exchange.
    pub fn touches_session(self) -> bool {
        self.is_request() && self.class() != OpClass::Auth
    }

    /// The opcode this one is a form of, for matching (every create is a create,
    /// getChildren2 a getChildren).
    pub fn family(self) -> OpCode {
        match self.info().family {
            Some(f) => f,
            None => self,
        }
    }
}
