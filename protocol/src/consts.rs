//! Protocol enumerations: opcodes, error codes, event types, states, watch kinds, create modes.

/// Request opcodes (docs/protocol.md, "Opcodes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum OpCode {
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

impl OpCode {
    pub fn from_i32(v: i32) -> Option<OpCode> {
        use OpCode::*;
        Some(match v {
            0 => Notification,
            1 => Create,
            2 => Delete,
            3 => Exists,
            4 => GetData,
            5 => SetData,
            6 => GetAcl,
            7 => SetAcl,
            8 => GetChildren,
            9 => Sync,
            11 => Ping,
            12 => GetChildren2,
            13 => Check,
            14 => Multi,
            15 => Create2,
            16 => Reconfig,
            17 => CheckWatches,
            18 => RemoveWatches,
            19 => CreateContainer,
            20 => DeleteContainer,
            21 => CreateTtl,
            22 => MultiRead,
            100 => Auth,
            101 => SetWatches,
            102 => Sasl,
            103 => GetEphemerals,
            104 => GetAllChildrenNumber,
            105 => SetWatches2,
            106 => AddWatch,
            107 => WhoAmI,
            -10 => CreateSession,
            -11 => CloseSession,
            -1 => Error,
            _ => return None,
        })
    }

    /// The short name the `cons` four-letter word shows as a connection's last operation.
    pub fn short_name(self) -> &'static str {
        use OpCode::*;
        match self {
            Notification => "NOTI",
            Create | Create2 | CreateContainer | CreateTtl => "CREA",
            Delete | DeleteContainer => "DELE",
            Exists => "EXIS",
            GetData => "GETD",
            SetData => "SETD",
            GetAcl => "GETA",
            SetAcl => "SETA",
            GetChildren | GetChildren2 => "GETC",
            Sync => "SYNC",
            Ping => "PING",
            Check => "CHEC",
            Multi => "MULT",
            MultiRead => "MLTR",
            Reconfig => "RECO",
            CheckWatches => "CHKW",
            RemoveWatches => "REMW",
            Auth => "AUTH",
            SetWatches => "SETW",
            SetWatches2 => "STW2",
            Sasl => "SASL",
            GetEphemerals => "GETE",
            GetAllChildrenNumber => "GETACN",
            AddWatch => "ADDW",
            WhoAmI => "HOMI",
            CreateSession => "SESS",
            CloseSession => "CLOS",
            Error => "ERR",
        }
    }

    /// Whether a successful reply to this request has no body (delete, check, ping,
    /// checkWatches, removeWatches, deleteContainer, auth, setWatches, setWatches2,
    /// closeSession).
    pub fn has_empty_reply(self) -> bool {
        use OpCode::*;
        matches!(
            self,
            Delete
                | Check
                | Ping
                | CheckWatches
                | RemoveWatches
                | DeleteContainer
                | Auth
                | SetWatches
                | SetWatches2
                | CloseSession
        )
    }
}

/// Error codes carried in `ReplyHeader.err` (docs/protocol.md, "Error codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorCode {
    Ok = 0,
    SystemError = -1,
    RuntimeInconsistency = -2,
    DataInconsistency = -3,
    ConnectionLoss = -4,
    MarshallingError = -5,
    Unimplemented = -6,
    OperationTimeout = -7,
    BadArguments = -8,
    UnknownSession = -12,
    NewConfigNoQuorum = -13,
    ReconfigInProgress = -14,
    ApiError = -100,
    NoNode = -101,
    NoAuth = -102,
    BadVersion = -103,
    NoChildrenForEphemerals = -108,
    NodeExists = -110,
    NotEmpty = -111,
    SessionExpired = -112,
    InvalidCallback = -113,
    InvalidAcl = -114,
    AuthFailed = -115,
    SessionMoved = -118,
    NotReadOnly = -119,
    EphemeralOnLocalSession = -120,
    NoWatcher = -121,
    RequestTimeout = -122,
    ReconfigDisabled = -123,
    SessionClosedRequireSaslAuth = -124,
    QuotaExceeded = -125,
    ThrottledOp = -127,
}

impl ErrorCode {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_i32(v: i32) -> Option<ErrorCode> {
        use ErrorCode::*;
        const ALL: [ErrorCode; 32] = [
            Ok,
            SystemError,
            RuntimeInconsistency,
            DataInconsistency,
            ConnectionLoss,
            MarshallingError,
            Unimplemented,
            OperationTimeout,
            BadArguments,
            UnknownSession,
            NewConfigNoQuorum,
            ReconfigInProgress,
            ApiError,
            NoNode,
            NoAuth,
            BadVersion,
            NoChildrenForEphemerals,
            NodeExists,
            NotEmpty,
            SessionExpired,
            InvalidCallback,
            InvalidAcl,
            AuthFailed,
            SessionMoved,
            NotReadOnly,
            EphemeralOnLocalSession,
            NoWatcher,
            RequestTimeout,
            ReconfigDisabled,
            SessionClosedRequireSaslAuth,
            QuotaExceeded,
            ThrottledOp,
        ];
        ALL.into_iter().find(|c| *c as i32 == v)
    }
}

/// Special xids (docs/protocol.md, "Special xids").
pub mod xid {
    pub const NOTIFICATION: i32 = -1;
    pub const PING: i32 = -2;
    pub const AUTH: i32 = -4;
    pub const SET_WATCHES: i32 = -8;
}

/// Watch event types.
pub mod event_type {
    pub const NONE: i32 = -1;
    pub const NODE_CREATED: i32 = 1;
    pub const NODE_DELETED: i32 = 2;
    pub const NODE_DATA_CHANGED: i32 = 3;
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
}

/// Keeper states; server notifications always carry `SYNC_CONNECTED`.
pub mod keeper_state {
    pub const SYNC_CONNECTED: i32 = 3;
}

/// Watcher types for checkWatches/removeWatches.
pub mod watcher_type {
    pub const CHILDREN: i32 = 1;
    pub const DATA: i32 = 2;
    pub const ANY: i32 = 3;
    pub const PERSISTENT: i32 = 4;
    pub const PERSISTENT_RECURSIVE: i32 = 5;
}

/// addWatch modes.
pub mod add_watch_mode {
    pub const PERSISTENT: i32 = 0;
    pub const PERSISTENT_RECURSIVE: i32 = 1;
}

/// ACL permission bits.
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = 31;
}

/// The `flags` field of create requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
    Container,
    PersistentWithTtl,
    PersistentSequentialWithTtl,
}

impl CreateMode {
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        use CreateMode::*;
        Some(match flags {
            0 => Persistent,
            1 => Ephemeral,
            2 => PersistentSequential,
            3 => EphemeralSequential,
            4 => Container,
            5 => PersistentWithTtl,
            6 => PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    pub fn flags(self) -> i32 {
        self as i32
    }

    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}
