//! Random multi-session programs: what they are, how they print, how they are generated.
//!
//! A program is a list of steps, each run by one of 2–3 sessions. Every path is relative to
//! the program's own root (`~`), so programs never see each other. Any sub-list of a program
//! is again a valid program (a step of a session that is closed or disconnected is skipped),
//! which is what lets proptest shrink a failing program by dropping steps.

use std::fmt;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::{Union, ValueTree};
use zkd_protocol::{perms, Acl, OpCode};

/// A path relative to the program root: `""` is the root itself.
pub type RelPath = &'static str;

/// Paths steps work on, with how often they are picked. The concrete sequential names are
/// the ones sequential creates under a fresh root produce early on (counters start at 0),
/// so later steps can read, change and delete sequential nodes.
const NODE_PATHS: &[(u32, RelPath)] = &[
    (6, "/a"),
    (3, "/b"),
    (4, "/a/b"),
    (2, "/a/c"),
    (2, "/a/b/d"),
    (2, ""),
    (1, "/s-0000000000"),
    (1, "/s-0000000001"),
    (1, "/a/s-0000000000"),
    (1, "/a/s-0000000001"),
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

impl fmt::Display for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Data::Null => write!(f, "null"),
            Data::Empty => write!(f, "\"\""),
            Data::X => write!(f, "\"x\""),
            Data::Yy => write!(f, "\"yy\""),
            Data::Bin => write!(f, "0x00ff80"),
        }
    }
}

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

impl fmt::Display for Ver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ver::Any => write!(f, "v=-1"),
            Ver::V0 => write!(f, "v=0"),
            Ver::V1 => write!(f, "v=1"),
            Ver::V2 => write!(f, "v=2"),
            Ver::Cur => write!(f, "v=current"),
            Ver::Next => write!(f, "v=current+1"),
        }
    }
}

/// Identities `addauth digest` adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthUser {
    User,
    Other,
}

impl AuthUser {
    pub fn credentials(self) -> &'static str {
        match self {
            AuthUser::User => "user:pass",
            AuthUser::Other => "other:pw",
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

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefix::Root => write!(f, "~"),
            Prefix::RootA => write!(f, "~/a"),
            Prefix::Slash => write!(f, "/"),
            Prefix::Empty => write!(f, "\"\""),
        }
    }
}

/// One sub-operation of multi (writes) or multiRead (reads). Putting a read into a multi or a
/// write into a multiRead is allowed on purpose (the whole request must fail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubOp {
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
    Check {
        path: RelPath,
        version: Ver,
    },
    GetData {
        path: RelPath,
    },
    GetChildren {
        path: RelPath,
    },
}

impl fmt::Display for SubOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubOp::Create {
                path,
                data,
                acl,
                kind,
            } => write!(f, "{kind} ~{path} {data} acl={acl}"),
            SubOp::Delete { path, version } => write!(f, "delete ~{path} {version}"),
            SubOp::SetData {
                path,
                data,
                version,
            } => write!(f, "setData ~{path} {data} {version}"),
            SubOp::Check { path, version } => write!(f, "check ~{path} {version}"),
            SubOp::GetData { path } => write!(f, "getData ~{path}"),
            SubOp::GetChildren { path } => write!(f, "getChildren ~{path}"),
        }
    }
}

/// One operation of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
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
    /// Drops the connection without closing the session; the session's steps are skipped
    /// until it reconnects.
    Disconnect,
    /// Drops the connection if there is one, resumes the session with its id and password
    /// (lastZxidSeen = last zxid seen in a reply), re-sends its credentials and re-registers
    /// its watches with setWatches2. `stale` sends relativeZxid 0 instead of the last zxid.
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
            Op::Create {
                path,
                data,
                acl,
                kind,
            } => write!(f, "{kind} ~{path} {data} acl={acl}"),
            Op::Delete { path, version } => write!(f, "delete ~{path} {version}"),
            Op::SetData {
                path,
                data,
                version,
            } => write!(f, "setData ~{path} {data} {version}"),
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
            Op::AddWatch { path, recursive } => {
                let mode = if *recursive {
                    "PERSISTENT_RECURSIVE"
                } else {
                    "PERSISTENT"
                };
                write!(f, "addWatch ~{path} {mode}")
            }
            Op::CheckWatches { path, watcher_type } => {
                write!(f, "checkWatches ~{path} {}", watcher_type_name(*watcher_type))
            }
            Op::RemoveWatches { path, watcher_type } => {
                write!(f, "removeWatches ~{path} {}", watcher_type_name(*watcher_type))
            }
            Op::AddAuth { user } => write!(f, "addauth digest {}", user.credentials()),
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
    pub steps: Vec<Step>,
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "# {} sessions, {} steps; ~ is the program's root",
            self.sessions,
            self.steps.len()
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

fn acl() -> BoxedStrategy<AclSpec> {
    use AclSpec::*;
    weighted(&[
        (30, Open),
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
    ])
}

/// Create opcodes and flags, mostly valid. Never opcode 21 with a non-TTL flag and a
/// negative ttl: that input crashes ZooKeeper 3.8 (PROTOCOL.md §4.4).
fn create_kind() -> BoxedStrategy<CreateKind> {
    let plain_op = weighted(&[(3, OpCode::Create), (2, OpCode::Create2)]);
    let ordinary = (plain_op.clone(), 0..=3i32)
        .prop_map(|(op, flags)| CreateKind { op, flags, ttl: -1 });
    let odd_flags = (plain_op, weighted(&[(2, 4), (1, 5), (1, 6), (1, 7), (1, -1)]))
        .prop_map(|(op, flags)| CreateKind { op, flags, ttl: -1 });
    let container = weighted(&[(6, 4), (1, 0), (1, 1), (1, 2), (1, 3)]).prop_map(|flags| {
        CreateKind {
            op: OpCode::CreateContainer,
            flags,
            ttl: -1,
        }
    });
    let ttl = (5..=6i32, weighted(&[(4, 3_600_000i64), (1, 1)]))
        .prop_map(|(flags, ttl)| CreateKind {
            op: OpCode::CreateTtl,
            flags,
            ttl,
        });
    let bad_ttl = (5..=6i32, weighted(&[(1, 0i64), (1, -1), (1, 1 << 40)]))
        .prop_map(|(flags, ttl)| CreateKind {
            op: OpCode::CreateTtl,
            flags,
            ttl,
        });
    let ttl_bad_flag = (weighted(&[(1, 0), (1, 1), (1, 4), (1, 7)]), weighted(&[(1, 0i64), (1, 1000)]))
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

fn create_args() -> impl Strategy<Value = (RelPath, Data, AclSpec, CreateKind)> {
    (create_path(), data(), acl(), create_kind())
}

fn write_sub_op() -> BoxedStrategy<SubOp> {
    prop_oneof![
        5 => create_args().prop_map(|(path, data, acl, kind)| SubOp::Create { path, data, acl, kind }),
        3 => (node_path(), version()).prop_map(|(path, version)| SubOp::Delete { path, version }),
        3 => (node_path(), data(), version())
            .prop_map(|(path, data, version)| SubOp::SetData { path, data, version }),
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

fn op() -> BoxedStrategy<Op> {
    let watch = weighted(&[(1, false), (1, true)]);
    prop_oneof![
        10 => create_args().prop_map(|(path, data, acl, kind)| Op::Create { path, data, acl, kind }),
        4 => (node_path(), version()).prop_map(|(path, version)| Op::Delete { path, version }),
        4 => (node_path(), data(), version())
            .prop_map(|(path, data, version)| Op::SetData { path, data, version }),
        4 => (node_path(), watch.clone()).prop_map(|(path, watch)| Op::Exists { path, watch }),
        4 => (node_path(), watch.clone()).prop_map(|(path, watch)| Op::GetData { path, watch }),
        4 => (node_path(), watch, any::<bool>())
            .prop_map(|(path, watch, with_stat)| Op::GetChildren { path, watch, with_stat }),
        4 => vec(write_sub_op(), 0..=4).prop_map(Op::Multi),
        2 => vec(read_sub_op(), 0..=4).prop_map(Op::MultiRead),
        2 => (node_path(), acl(), version())
            .prop_map(|(path, acl, version)| Op::SetAcl { path, acl, version }),
        2 => node_path().prop_map(|path| Op::GetAcl { path }),
        1 => node_path().prop_map(|path| Op::GetAllChildrenNumber { path }),
        1 => weighted(&[(2, Prefix::Root), (1, Prefix::RootA), (1, Prefix::Slash), (1, Prefix::Empty)])
            .prop_map(|prefix| Op::GetEphemerals { prefix }),
        1 => node_path().prop_map(|path| Op::Sync { path }),
        1 => (node_path(), any::<bool>()).prop_map(|(path, recursive)| Op::AddWatch { path, recursive }),
        1 => (node_path(), 1..=3i32)
            .prop_map(|(path, watcher_type)| Op::CheckWatches { path, watcher_type }),
        1 => (node_path(), 1..=3i32)
            .prop_map(|(path, watcher_type)| Op::RemoveWatches { path, watcher_type }),
        1 => weighted(&[(2, AuthUser::User), (1, AuthUser::Other)])
            .prop_map(|user| Op::AddAuth { user }),
        1 => Just(Op::Close),
        1 => Just(Op::Disconnect),
        2 => weighted(&[(3, false), (1, true)]).prop_map(|stale| Op::Reconnect { stale }),
    ]
    .boxed()
}

/// Programs of 2–3 sessions and 5–25 steps.
pub fn program() -> impl Strategy<Value = Program> {
    (2..=3usize).prop_flat_map(|sessions| {
        vec((0..sessions, op()), 5..=25).prop_map(move |steps| Program {
            sessions,
            steps: steps
                .into_iter()
                .map(|(session, op)| Step { session, op })
                .collect(),
        })
    })
}

/// Draws one program outside a test runner (used to print examples).
#[allow(dead_code)]
pub fn sample(runner: &mut proptest::test_runner::TestRunner) -> Program {
    program()
        .new_tree(runner)
        .expect("program strategy never rejects")
        .current()
}
