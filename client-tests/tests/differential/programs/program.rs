//! Random multi-session programs: what they are, how they print, how they are generated.
//!
//! A program is a list of steps, each run by one of 2–3 sessions. Every path is relative to
//! the program's own root (`~`), so programs never see each other. Any sub-list of a program
//! is again a valid program (a step of a session that is closed or disconnected is skipped),
//! which is what lets proptest shrink a failing program by dropping steps.

use std::fmt;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::Union;
use zkd_protocol::{perms, Acl, OpCode};

/// A `Display` that prints each variant of a field-less enum as a fixed text.
macro_rules! fixed_display {
    ($ty:ident { $($variant:ident => $text:expr,)* }) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $($ty::$variant => $text,)*
                })
            }
        }
    };
}

/// A path relative to the program root: `""` is the root itself.
pub type RelPath = &'static str;

/// Paths steps work on, with how often they are picked. The concrete sequential names are
/// the ones sequential creates under a fresh root produce early on (counters start at 0),
/// so later steps can read, change and delete sequential nodes.
const NODE_PATHS: &[(u32, RelPath)] = &[
    (12, "/a"),
    (6, "/b"),
    (8, "/a/b"),
    (4, "/a/c"),
    (4, "/a/b/d"),
    (3, ""),
    (2, "/s-0000000000"),
    (2, "/s-0000000001"),
    (2, "/a/s-0000000000"),
    (2, "/a/s-0000000001"),
    (1, "/a/0000000000"),
    (1, "/a/"),
    (1, "/a//b"),
    (1, "/a/."),
];

/// Extra names only creates use: sequential prefixes.
const CREATE_ONLY_PATHS: &[(u32, RelPath)] = &[(3, "/s-"), (3, "/a/s-")];

/// Data values: null and empty are different on the wire and must stay different.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    Null,
    Empty,
    X,
    Yy,
    Bin,
}

impl Data {
    pub fn bytes(self) -> Option<bytes::Bytes> {
        match self {
            Data::Null => None,
            Data::Empty => Some(bytes::Bytes::new()),
            Data::X => Some(bytes::Bytes::from_static(b"x")),
            Data::Yy => Some(bytes::Bytes::from_static(b"yy")),
            Data::Bin => Some(bytes::Bytes::from_static(&[0, 0xff, 0x80])),
        }
    }
}

fixed_display!(Data {
    Null => "null",
    Empty => "\"\"",
    X => "\"x\"",
    Yy => "\"yy\"",
    Bin => "0x00ff80",
});

/// A version argument. `Cur` is the node's current version (aversion for setACL) on the
/// server the step runs on, read just before the step; `Next` is that plus one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ver {
    Any,
    V0,
    V1,
    V2,
    Cur,
    Next,
}

fixed_display!(Ver {
    Any => "v=-1",
    V0 => "v=0",
    V1 => "v=1",
    V2 => "v=2",
    Cur => "v=current",
    Next => "v=current+1",
});

/// Identities `addauth digest` adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthUser {
    User,
    Other,
    /// An unknown scheme: AUTHFAILED, then the server closes the connection.
    BadScheme,
}

impl AuthUser {
    pub fn scheme(self) -> &'static str {
        match self {
            AuthUser::BadScheme => "bogus",
            _ => "digest",
        }
    }

    pub fn credentials(self) -> &'static str {
        match self {
            AuthUser::User => "user:pass",
            AuthUser::Other => "other:pw",
            AuthUser::BadScheme => "x",
        }
    }
}

/// `digest` id of `user:pass`.
const USER_DIGEST: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";

/// ACL lists: valid world/digest/auth/ip variants and invalid ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclSpec {
    Open,
    ReadOnly,
    ReadWrite,
    NoDelete,
    NoCreate,
    NoAdmin,
    NoRead,
    DuplicateOpen,
    DigestUser,
    DigestUserAndRead,
    Auth,
    IpLoopback,
    IpLoopbackNet,
    IpOther,
    Perms0,
    Perms255,
    Empty,
    WorldSomeone,
    DigestMalformed,
    IpV6,
    Super,
    UnknownScheme,
}

impl AclSpec {
    pub fn acl(self) -> Vec<Acl> {
        use perms::*;
        let world = |p| Acl::new(p, "world", "anyone");
        match self {
            AclSpec::Open => vec![world(ALL)],
            AclSpec::ReadOnly => vec![world(READ)],
            AclSpec::ReadWrite => vec![world(READ | WRITE)],
            AclSpec::NoDelete => vec![world(ALL & !DELETE)],
            AclSpec::NoCreate => vec![world(ALL & !CREATE)],
            AclSpec::NoAdmin => vec![world(ALL & !ADMIN)],
            AclSpec::NoRead => vec![world(ALL & !READ)],
            AclSpec::DuplicateOpen => vec![world(ALL), world(ALL)],
            AclSpec::DigestUser => vec![Acl::new(ALL, "digest", USER_DIGEST)],
            AclSpec::DigestUserAndRead => vec![Acl::new(ALL, "digest", USER_DIGEST), world(READ)],
            AclSpec::Auth => vec![Acl::new(ALL, "auth", "")],
            AclSpec::IpLoopback => vec![Acl::new(ALL, "ip", "127.0.0.1")],
            AclSpec::IpLoopbackNet => vec![Acl::new(ALL, "ip", "127.0.0.0/8")],
            AclSpec::IpOther => vec![Acl::new(ALL, "ip", "10.1.2.3"), world(READ)],
            AclSpec::Perms0 => vec![world(0)],
            AclSpec::Perms255 => vec![world(0xff)],
            AclSpec::Empty => vec![],
            AclSpec::WorldSomeone => vec![Acl::new(ALL, "world", "someone")],
            AclSpec::DigestMalformed => vec![Acl::new(ALL, "digest", "nocolon")],
            AclSpec::IpV6 => vec![Acl::new(ALL, "ip", "::1")],
            AclSpec::Super => vec![Acl::new(ALL, "super", "")],
            AclSpec::UnknownScheme => vec![Acl::new(ALL, "bogus", "x")],
        }
    }
}

impl fmt::Display for AclSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .acl()
            .iter()
            .map(|a| format!("{}:{}:{}", a.id.scheme, a.id.id, perm_string(a.perms)))
            .collect();
        write!(f, "[{}]", parts.join(", "))
    }
}

/// `cdrwa` letters, or the number when bits outside ALL are set.
pub fn perm_string(p: i32) -> String {
    if p & !perms::ALL != 0 {
        return format!("{p:#x}");
    }
    let mut s = String::new();
    for (bit, c) in [
        (perms::CREATE, 'c'),
        (perms::DELETE, 'd'),
        (perms::READ, 'r'),
        (perms::WRITE, 'w'),
        (perms::ADMIN, 'a'),
    ] {
        if p & bit != 0 {
            s.push(c);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

/// Which create request: opcode (1 create, 15 create2, 19 createContainer, 21 createTTL),
/// flags and (opcode 21 only) ttl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateKind {
    pub op: OpCode,
    pub flags: i32,
    pub ttl: i64,
}

impl fmt::Display for CreateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            OpCode::Create => "create",
            OpCode::Create2 => "create2",
            OpCode::CreateContainer => "createContainer",
            OpCode::CreateTtl => "createTTL",
            _ => "create?",
        };
        let mode = match self.flags {
            0 => "PERSISTENT".to_string(),
            1 => "EPHEMERAL".to_string(),
            2 => "PERSISTENT_SEQUENTIAL".to_string(),
            3 => "EPHEMERAL_SEQUENTIAL".to_string(),
            4 => "CONTAINER".to_string(),
            5 => "PERSISTENT_WITH_TTL".to_string(),
            6 => "PERSISTENT_SEQUENTIAL_WITH_TTL".to_string(),
            other => format!("flags={other}"),
        };
        write!(f, "{op} {mode}")?;
        if self.op == OpCode::CreateTtl {
            write!(f, " ttl={}", self.ttl)?;
        }
        Ok(())
    }
}

/// getEphemerals prefixes: a plain string prefix of the full path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    Root,
    RootA,
    Slash,
    Empty,
}

fixed_display!(Prefix {
    Root => "~",
    RootA => "~/a",
    Slash => "/",
    Empty => "\"\"",
});

/// A write: a step of its own or a sub-operation of multi.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Create {
        path: RelPath,
        data: Data,
        acl: AclSpec,
        kind: CreateKind,
    },
    Delete {
        path: RelPath,
        version: Ver,
    },
    SetData {
        path: RelPath,
        data: Data,
        version: Ver,
    },
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Write::Create {
                path,
                data,
                acl,
                kind,
            } => write!(f, "{kind} ~{path} {data} acl={acl}"),
            Write::Delete { path, version } => write!(f, "delete ~{path} {version}"),
            Write::SetData {
                path,
                data,
                version,
            } => write!(f, "setData ~{path} {data} {version}"),
        }
    }
}

/// One sub-operation of multi (writes) or multiRead (reads). Putting a read into a multi or a
/// write into a multiRead is allowed on purpose (the whole request must fail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubOp {
    Write(Write),
    Check { path: RelPath, version: Ver },
    GetData { path: RelPath },
    GetChildren { path: RelPath },
}

impl fmt::Display for SubOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubOp::Write(w) => write!(f, "{w}"),
            SubOp::Check { path, version } => write!(f, "check ~{path} {version}"),
            SubOp::GetData { path } => write!(f, "getData ~{path}"),
            SubOp::GetChildren { path } => write!(f, "getChildren ~{path}"),
        }
    }
}

/// One operation of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Write(Write),
    Exists {
        path: RelPath,
        watch: bool,
    },
    GetData {
        path: RelPath,
        watch: bool,
    },
    /// getChildren (8), or getChildren2 (12) when `with_stat`.
    GetChildren {
        path: RelPath,
        watch: bool,
        with_stat: bool,
    },
    Multi(Vec<SubOp>),
    MultiRead(Vec<SubOp>),
    SetAcl {
        path: RelPath,
        acl: AclSpec,
        version: Ver,
    },
    GetAcl {
        path: RelPath,
    },
    GetAllChildrenNumber {
        path: RelPath,
    },
    GetEphemerals {
        prefix: Prefix,
    },
    Sync {
        path: RelPath,
    },
    /// sync with a null (`None`) or empty path: the reply echoes it.
    SyncOdd {
        null: bool,
    },
    /// An operation on one of ZooKeeper's own nodes: reads, and writes that always fail (so
    /// that nothing outside the program's root changes).
    System {
        path: &'static str,
        action: SysAction,
    },
    WhoAmI,
    AddWatch {
        path: RelPath,
        recursive: bool,
    },
    /// checkWatches with WatcherType 1 (children), 2 (data) or 3 (any).
    CheckWatches {
        path: RelPath,
        watcher_type: i32,
    },
    RemoveWatches {
        path: RelPath,
        watcher_type: i32,
    },
    AddAuth {
        user: AuthUser,
    },
    /// closeSession; the session makes no further steps.
    Close,
    /// Drops the connection without closing the session. The session's next step reconnects
    /// first (like `Reconnect`), as a client library would.
    Disconnect,
    /// Drops the connection if there is one, resumes the session with its id and password
    /// (lastZxidSeen = last zxid seen in a reply), re-sends its credentials and re-registers
    /// its watches with setWatches2. `stale` sends relativeZxid 0 instead of the last zxid.
    /// On a closed session: one attempt to resume it, which must be refused.
    Reconnect {
        stale: bool,
    },
}

fn watch_str(w: bool) -> &'static str {
    if w {
        " watch"
    } else {
        ""
    }
}

fn watcher_type_name(t: i32) -> &'static str {
    match t {
        1 => "Children",
        2 => "Data",
        3 => "Any",
        4 => "Persistent",
        5 => "PersistentRecursive",
        _ => "?",
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Write(w) => write!(f, "{w}"),
            Op::Exists { path, watch } => write!(f, "exists ~{path}{}", watch_str(*watch)),
            Op::GetData { path, watch } => write!(f, "getData ~{path}{}", watch_str(*watch)),
            Op::GetChildren {
                path,
                watch,
                with_stat,
            } => {
                let name = if *with_stat {
                    "getChildren2"
                } else {
                    "getChildren"
                };
                write!(f, "{name} ~{path}{}", watch_str(*watch))
            }
            Op::Multi(ops) | Op::MultiRead(ops) => {
                let name = if matches!(self, Op::Multi(_)) {
                    "multi"
                } else {
                    "multiRead"
                };
                let parts: Vec<String> = ops.iter().map(|o| o.to_string()).collect();
                write!(f, "{name} [{}]", parts.join("; "))
            }
            Op::SetAcl { path, acl, version } => write!(f, "setACL ~{path} {acl} {version}"),
            Op::GetAcl { path } => write!(f, "getACL ~{path}"),
            Op::GetAllChildrenNumber { path } => write!(f, "getAllChildrenNumber ~{path}"),
            Op::GetEphemerals { prefix } => write!(f, "getEphemerals {prefix}"),
            Op::Sync { path } => write!(f, "sync ~{path}"),
            Op::SyncOdd { null: true } => write!(f, "sync null"),
            Op::SyncOdd { null: false } => write!(f, "sync \"\""),
            Op::System { path, action } => match action {
                SysAction::Exists => write!(f, "exists {path}"),
                SysAction::GetData => write!(f, "getData {path}"),
                SysAction::GetChildren2 => write!(f, "getChildren2 {path}"),
                SysAction::GetAcl => write!(f, "getACL {path}"),
                SysAction::GetAllChildrenNumber => write!(f, "getAllChildrenNumber {path}"),
                SysAction::Delete => write!(f, "delete {path} v=-1"),
                SysAction::SetConfig => write!(f, "setData /zookeeper/config \"x\" v=-1"),
                SysAction::CreateUnderConfig => {
                    write!(f, "create PERSISTENT /zookeeper/config/x \"x\"")
                }
            },
            Op::WhoAmI => write!(f, "whoAmI"),
            Op::AddWatch { path, recursive } => {
                let mode = if *recursive {
                    "PERSISTENT_RECURSIVE"
                } else {
                    "PERSISTENT"
                };
                write!(f, "addWatch ~{path} {mode}")
            }
            Op::CheckWatches { path, watcher_type } => {
                write!(
                    f,
                    "checkWatches ~{path} {}",
                    watcher_type_name(*watcher_type)
                )
            }
            Op::RemoveWatches { path, watcher_type } => {
                write!(
                    f,
                    "removeWatches ~{path} {}",
                    watcher_type_name(*watcher_type)
                )
            }
            Op::AddAuth { user } => {
                write!(f, "addauth {} {}", user.scheme(), user.credentials())
            }
            Op::Close => write!(f, "close"),
            Op::Disconnect => write!(f, "disconnect"),
            Op::Reconnect { stale } => {
                if *stale {
                    write!(f, "reconnect (setWatches relativeZxid=0)")
                } else {
                    write!(f, "reconnect")
                }
            }
        }
    }
}

/// System nodes the `System` operations address.
pub const SYSTEM_PATHS: &[&str] = &["/zookeeper", "/zookeeper/config", "/zookeeper/quota"];

/// What a `System` operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysAction {
    Exists,
    GetData,
    GetChildren2,
    GetAcl,
    GetAllChildrenNumber,
    /// Always BADARGUMENTS on a system node.
    Delete,
    /// setData of `/zookeeper/config`: NOAUTH (its ACL is world READ only).
    SetConfig,
    /// A create under `/zookeeper/config`: NOAUTH.
    CreateUnderConfig,
}

/// One step: which session (0-based) does what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub session: usize,
    pub op: Op,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}: {}", self.session + 1, self.op)
    }
}

/// A whole program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub sessions: usize,
    /// ACLs that deny READ to some sessions may occur.
    pub acl_variety: bool,
    pub steps: Vec<Step>,
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "# {} sessions, {} steps{}; ~ is the program's root",
            self.sessions,
            self.steps.len(),
            if self.acl_variety {
                ", ACL variety"
            } else {
                ""
            }
        )?;
        for (i, s) in self.steps.iter().enumerate() {
            writeln!(f, "{:>3}. {s}", i + 1)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Generation

fn weighted<T: Clone + fmt::Debug + 'static>(items: &[(u32, T)]) -> BoxedStrategy<T> {
    Union::new_weighted(
        items
            .iter()
            .map(|(w, t)| (*w, Just(t.clone()).boxed()))
            .collect::<Vec<_>>(),
    )
    .boxed()
}

fn node_path() -> BoxedStrategy<RelPath> {
    weighted(NODE_PATHS)
}

fn create_path() -> BoxedStrategy<RelPath> {
    let mut all: Vec<(u32, RelPath)> = NODE_PATHS.to_vec();
    all.extend_from_slice(CREATE_ONLY_PATHS);
    weighted(&all)
}

fn data() -> BoxedStrategy<Data> {
    weighted(&[
        (3, Data::X),
        (2, Data::Yy),
        (2, Data::Null),
        (2, Data::Empty),
        (1, Data::Bin),
    ])
}

fn version() -> BoxedStrategy<Ver> {
    weighted(&[
        (3, Ver::Any),
        (2, Ver::V0),
        (1, Ver::V1),
        (1, Ver::V2),
        (3, Ver::Cur),
        (1, Ver::Next),
    ])
}

impl AclSpec {
    /// Whether an ACL list, once stored, could deny READ to some session of a program (so that
    /// both servers filter the notifications of a watcher without READ).
    fn may_hide_reads(self) -> bool {
        matches!(
            self,
            AclSpec::NoRead | AclSpec::DigestUser | AclSpec::Auth | AclSpec::Perms0
        )
    }
}

/// ACL lists; without `variety`, only lists every session can read (or that are invalid).
fn acl(variety: bool) -> BoxedStrategy<AclSpec> {
    use AclSpec::*;
    let all = [
        (60, Open),
        (3, ReadOnly),
        (2, ReadWrite),
        (2, NoDelete),
        (2, NoCreate),
        (2, NoAdmin),
        (1, NoRead),
        (2, DuplicateOpen),
        (2, DigestUser),
        (2, DigestUserAndRead),
        (2, Auth),
        (1, IpLoopback),
        (1, IpLoopbackNet),
        (1, IpOther),
        (1, Perms0),
        (1, Perms255),
        (1, Empty),
        (1, WorldSomeone),
        (1, DigestMalformed),
        (1, IpV6),
        (1, Super),
        (1, UnknownScheme),
    ];
    let chosen: Vec<(u32, AclSpec)> = all
        .into_iter()
        .filter(|(_, a)| variety || !a.may_hide_reads())
        .collect();
    weighted(&chosen)
}

/// Create opcodes and flags, mostly valid. Never opcode 21 with a non-TTL flag and a
/// negative ttl: that input crashes ZooKeeper 3.8 (docs/protocol.md, "Create flags").
fn create_kind() -> BoxedStrategy<CreateKind> {
    let plain_op = weighted(&[(3, OpCode::Create), (2, OpCode::Create2)]);
    let ordinary = (
        plain_op.clone(),
        weighted(&[(4, 0), (2, 1), (2, 2), (2, 3)]),
    )
        .prop_map(|(op, flags)| CreateKind { op, flags, ttl: -1 });
    let odd_flags = (
        plain_op,
        weighted(&[(2, 4), (1, 5), (1, 6), (1, 7), (1, -1)]),
    )
        .prop_map(|(op, flags)| CreateKind { op, flags, ttl: -1 });
    let container =
        weighted(&[(6, 4), (1, 0), (1, 1), (1, 2), (1, 3)]).prop_map(|flags| CreateKind {
            op: OpCode::CreateContainer,
            flags,
            ttl: -1,
        });
    let ttl =
        (5..=6i32, weighted(&[(4, 3_600_000i64), (1, 1)])).prop_map(|(flags, ttl)| CreateKind {
            op: OpCode::CreateTtl,
            flags,
            ttl,
        });
    let bad_ttl =
        (5..=6i32, weighted(&[(1, 0i64), (1, -1), (1, 1 << 40)])).prop_map(|(flags, ttl)| {
            CreateKind {
                op: OpCode::CreateTtl,
                flags,
                ttl,
            }
        });
    let ttl_bad_flag = (
        weighted(&[(1, 0), (1, 1), (1, 4), (1, 7)]),
        weighted(&[(1, 0i64), (1, 1000)]),
    )
        .prop_map(|(flags, ttl)| CreateKind {
            op: OpCode::CreateTtl,
            flags,
            ttl,
        });
    prop_oneof![
        12 => ordinary,
        2 => odd_flags,
        3 => container,
        3 => ttl,
        1 => bad_ttl,
        1 => ttl_bad_flag,
    ]
    .boxed()
}

fn create_args(variety: bool) -> impl Strategy<Value = (RelPath, Data, AclSpec, CreateKind)> {
    (create_path(), data(), acl(variety), create_kind())
}

/// Create sub-ops of a multi where zkd and ZooKeeper 3.8.0 differ and zkd's behaviour is
/// still to be decided (D2, D3 and D5 in the test's module docs): inside a multi, 3.8.0
/// derives the node kind from the flags whatever the header (header 21 with a non-TTL flag,
/// header 19 with a flag other than 4), and rejects a TTL flag under another header only when
/// it reaches that sub-op.
fn open_divergence(k: &CreateKind) -> bool {
    let ttl_flag = (5..=6).contains(&k.flags);
    match k.op {
        OpCode::CreateTtl => !ttl_flag,
        OpCode::CreateContainer => k.flags != 4,
        _ => ttl_flag,
    }
}

fn write_sub_op(variety: bool, strict: bool) -> BoxedStrategy<SubOp> {
    prop_oneof![
        5 => create_args(variety)
            .prop_filter("open divergence", move |(_, _, _, k)| strict || !open_divergence(k))
            .prop_map(|(path, data, acl, kind)| SubOp::Write(Write::Create { path, data, acl, kind })),
        3 => (node_path(), version()).prop_map(|(path, version)| SubOp::Write(Write::Delete { path, version })),
        3 => (node_path(), data(), version())
            .prop_map(|(path, data, version)| SubOp::Write(Write::SetData { path, data, version })),
        2 => (node_path(), version()).prop_map(|(path, version)| SubOp::Check { path, version }),
        1 => node_path().prop_map(|path| SubOp::GetData { path }),
    ]
    .boxed()
}

fn read_sub_op() -> BoxedStrategy<SubOp> {
    prop_oneof![
        6 => node_path().prop_map(|path| SubOp::GetData { path }),
        6 => node_path().prop_map(|path| SubOp::GetChildren { path }),
        1 => (node_path(), version()).prop_map(|(path, version)| SubOp::Check { path, version }),
    ]
    .boxed()
}

fn system_op() -> BoxedStrategy<Op> {
    use SysAction::*;
    let read = (
        weighted(&SYSTEM_PATHS.iter().map(|p| (1, *p)).collect::<Vec<_>>()),
        weighted(&[
            (1, Exists),
            (1, GetData),
            (1, GetChildren2),
            (1, GetAcl),
            (1, GetAllChildrenNumber),
            (1, Delete),
        ]),
    )
        .prop_map(|(path, action)| Op::System { path, action });
    let config =
        weighted(&[(1, SetConfig), (1, CreateUnderConfig)]).prop_map(|action| Op::System {
            path: "/zookeeper/config",
            action,
        });
    prop_oneof![4 => read, 1 => config].boxed()
}

/// Operations of a program. With `acl_variety`, ACLs may deny READ to some sessions; watches
/// of every kind are set either way, so notifications of nodes a watcher may not read are
/// compared too (both servers withhold them).
fn op(acl_variety: bool, strict: bool) -> BoxedStrategy<Op> {
    let watch = weighted(&[(1, false), (1, true)]);
    let add_watch = (node_path(), any::<bool>())
        .prop_map(|(path, recursive)| Op::AddWatch { path, recursive })
        .boxed();
    prop_oneof![
        10 => create_args(acl_variety)
            .prop_map(|(path, data, acl, kind)| Op::Write(Write::Create { path, data, acl, kind })),
        4 => (node_path(), version()).prop_map(|(path, version)| Op::Write(Write::Delete { path, version })),
        4 => (node_path(), data(), version())
            .prop_map(|(path, data, version)| Op::Write(Write::SetData { path, data, version })),
        4 => (node_path(), watch.clone()).prop_map(|(path, watch)| Op::Exists { path, watch }),
        4 => (node_path(), watch.clone()).prop_map(|(path, watch)| Op::GetData { path, watch }),
        4 => (node_path(), watch, any::<bool>())
            .prop_map(|(path, watch, with_stat)| Op::GetChildren { path, watch, with_stat }),
        4 => vec(write_sub_op(acl_variety, strict), 1..=4).prop_map(Op::Multi),
        2 => vec(read_sub_op(), 1..=4).prop_map(Op::MultiRead),
        1 => weighted(&[(1, Op::Multi(Vec::new())), (1, Op::MultiRead(Vec::new()))]),
        2 => (node_path(), acl(acl_variety), version())
            .prop_map(|(path, acl, version)| Op::SetAcl { path, acl, version }),
        2 => node_path().prop_map(|path| Op::GetAcl { path }),
        1 => node_path().prop_map(|path| Op::GetAllChildrenNumber { path }),
        1 => weighted(&[(2, Prefix::Root), (1, Prefix::RootA), (1, Prefix::Slash), (1, Prefix::Empty)])
            .prop_map(|prefix| Op::GetEphemerals { prefix }),
        1 => node_path().prop_map(|path| Op::Sync { path }),
        1 => any::<bool>().prop_map(|null| Op::SyncOdd { null }),
        2 => system_op(),
        1 => Just(Op::WhoAmI),
        2 => add_watch,
        2 => (node_path(), 1..=5i32)
            .prop_map(|(path, watcher_type)| Op::CheckWatches { path, watcher_type }),
        2 => (node_path(), 1..=5i32)
            .prop_map(|(path, watcher_type)| Op::RemoveWatches { path, watcher_type }),
        1 => weighted(&[(4, AuthUser::User), (2, AuthUser::Other), (1, AuthUser::BadScheme)])
            .prop_map(|user| Op::AddAuth { user }),
        1 => Just(Op::Close),
        1 => Just(Op::Disconnect),
        2 => weighted(&[(3, false), (1, true)]).prop_map(|stale| Op::Reconnect { stale }),
    ]
    .boxed()
}

/// A create of a usual parent (persistent or container, open ACL), so that the steps after it
/// find a tree to work on.
fn prelude_op(path: RelPath) -> BoxedStrategy<Op> {
    let kind = weighted(&[
        (
            6,
            CreateKind {
                op: OpCode::Create,
                flags: 0,
                ttl: -1,
            },
        ),
        (
            2,
            CreateKind {
                op: OpCode::Create2,
                flags: 0,
                ttl: -1,
            },
        ),
        (
            1,
            CreateKind {
                op: OpCode::CreateContainer,
                flags: 4,
                ttl: -1,
            },
        ),
    ]);
    (weighted(&[(2, Data::X), (1, Data::Empty)]), kind)
        .prop_map(move |(data, kind)| {
            Op::Write(Write::Create {
                path,
                data,
                acl: AclSpec::Open,
                kind,
            })
        })
        .boxed()
}

/// Parents the prelude may create (in this order) and how likely each is.
const PRELUDE: &[(RelPath, f64)] = &[("/a", 0.85), ("/b", 0.5), ("/a/b", 0.6), ("/a/c", 0.3)];

/// Programs of 2–3 sessions: creates of some of the usual parents, then 5–25 random steps.
/// One program in two uses the full ACL variety (ACLs that deny READ, with watches). `strict` also generates the multi creates
/// of [`open_divergence`].
pub fn program(strict: bool) -> impl Strategy<Value = Program> {
    (2..=3usize, weighted(&[(1, false), (1, true)])).prop_flat_map(
        move |(sessions, acl_variety)| {
            // Each step is an Option that is practically always Some: shrinking turns steps into
            // None, so a failing program can shrink below the minimum length.
            let step = |op: BoxedStrategy<Op>| {
                proptest::option::weighted(
                    0.999,
                    (0..sessions, op).prop_map(|(session, op)| Step { session, op }),
                )
            };
            let prelude: Vec<_> = PRELUDE
                .iter()
                .map(|(path, p)| {
                    proptest::option::weighted(
                        *p,
                        (0..sessions, prelude_op(path))
                            .prop_map(|(session, op)| Step { session, op }),
                    )
                })
                .collect();
            (prelude, vec(step(op(acl_variety, strict)), 5..=25)).prop_map(
                move |(prelude, steps)| Program {
                    sessions,
                    acl_variety,
                    steps: prelude.into_iter().chain(steps).flatten().collect(),
                },
            )
        },
    )
}
