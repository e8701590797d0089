//! Fuzz target: the deterministic core fed arbitrary sequences of connection events,
//! handshakes, requests (well-formed from a small vocabulary of paths, or raw bytes), clock
//! advances, disconnects and state reports, in the order the network layer would
//! deliver them, with injected time.
//!
//! After every step: no panic, `Core::check_invariants` holds (tree shape, Stat rules,
//! ephemerals owned by live sessions, consistent session and watch tables), and everything the
//! core sent is well framed: a ConnectResponse first, then reply headers whose zxid never runs
//! ahead of the core's, notifications with valid paths, and nothing after a close.
//!
//! Input format (all integers big-endian; a short input reads as zeros), one step after
//! another, each starting with a tag byte (`tag % 8`):
//! 0 open a connection (1 byte: client address) · 1 raw frame (1 byte: connection,
//! u16: length, payload) · 2 well-formed frame (1 byte: connection, then choices) ·
//! 3 advance the session clock (u16: milliseconds ×8; top bit set: step the wall clock
//! instead, 1 byte) and tick · 4 the socket closes (1 byte:
//! connection) · 5 a state report (what the four-letter words read) or a statistics reset
//! (1 byte) · 6, 7 like 2.
//! A frame on a connection that has not shaken hands is its handshake.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::Bytes;
use zkd_core::{ConnId, Core, CoreConfig, Handshake, Now, Recorded, RecordingOutbox};
use zkd_protocol::{
    Acl, AddWatchRequest, AuthPacket, CheckVersionRequest, ConnectRequest, ConnectResponse, Create,
    DeleteRequest, Jute, MultiOp, OpClass, OpCode, PathRequest, PathWatchRequest, Reader,
    ReconfigRequest, ReplyHeader, Request, SaslToken, SetAclRequest, SetDataRequest, SetWatches,
    SetWatches2, SyncRequest, WatchTypeRequest, WatcherEvent,
};

const MAX_CONNS: usize = 6;

const PATHS: [&str; 22] = [
    "/",
    "/a",
    "/a/b",
    "/a/b/c",
    "/b",
    "/a/s0000000000",
    "/a/s0000000001",
    "/a/b/s0000000002",
    "/s0000000000",
    "/s0000000003",
    "/c",
    "/a",
    "/a/b",
    "/b",
    "/zookeeper",
    "/zookeeper/quota",
    "/zookeeper/config",
    "/a/",
    "",
    "a",
    "/a//b",
    "/a/./b",
];

/// Reads the input; past its end every read gives zeros.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.byte() as usize % from.len()]
    }
    fn path(&mut self) -> String {
        self.pick(&PATHS).to_string()
    }
    fn paths(&mut self) -> Vec<String> {
        let n = self.byte() % 4;
        (0..n).map(|_| self.path()).collect()
    }
    fn data(&mut self) -> Option<Bytes> {
        match self.byte() {
            0 => None,
            b => Some(Bytes::copy_from_slice(self.bytes((b % 9) as usize))),
        }
    }
    fn version(&mut self) -> i32 {
        self.pick(&[-1, 0, 1, 2, 3, -2, i32::MAX])
    }
    fn acl(&mut self) -> Vec<Acl> {
        match self.byte() % 9 {
            0 | 1 => Acl::open_unsafe(),
            2 => vec![Acl::new(1, "world", "anyone")],
            3 => vec![Acl::new(31, "digest", "u:Jq7wMyA/w2Vd5WIDAKdu4OIIFEQ=")],
            4 => vec![Acl::new(31, "auth", "")],
            5 => vec![Acl::new(31, "ip", "127.0.0.1")],
            6 => vec![
                Acl::new(1, "ip", "127.0.0.0/30"),
                Acl::new(30, "digest", "u:Jq7wMyA/w2Vd5WIDAKdu4OIIFEQ="),
            ],
            7 => Vec::new(),
            _ => vec![Acl::new(self.byte() as i32 - 64, "nope", "x")],
        }
    }
    fn create(&mut self, op: OpCode) -> Create {
        Create {
            op,
            path: self.path(),
            data: self.data(),
            acl: self.acl(),
            flags: self.byte() as i32 % 9 - 1,
            ttl: self.pick(&[-1, 0, 1, 500, 60_000, (1 << 40) - 1, 1 << 40]),
        }
    }
    fn create_op(&mut self) -> OpCode {
        self.pick(&[
            OpCode::Create,
            OpCode::Create2,
            OpCode::CreateContainer,
            OpCode::CreateTtl,
        ])
    }
    fn multi_op(&mut self) -> MultiOp {
        match self.byte() % 6 {
            0 => {
                let op = self.create_op();
                MultiOp::Create(self.create(op))
            }
            1 => MultiOp::Delete(DeleteRequest {
                path: self.path(),
                version: self.version(),
            }),
            2 => MultiOp::SetData(SetDataRequest {
                path: self.path(),
                data: self.data(),
                version: self.version(),
            }),
            3 => MultiOp::Check(CheckVersionRequest {
                path: self.path(),
                version: self.version(),
            }),
            4 => MultiOp::GetData(self.path_watch()),
            _ => MultiOp::GetChildren(self.path_watch()),
        }
    }
    fn path_watch(&mut self) -> PathWatchRequest {
        PathWatchRequest {
            path: self.path(),
            watch: self.byte() & 1 == 1,
        }
    }
    fn relative_zxid(&mut self, core: &Core) -> i64 {
        match self.byte() % 3 {
            0 => 0,
            1 => core.last_zxid(),
            _ => core.last_zxid() + 1000,
        }
    }

    /// A well-formed request and the xid a real client would send it with.
    fn request(&mut self, core: &Core, next_xid: &mut i32) -> (i32, Request) {
        let req = match self.byte() % 28 {
            0 | 1 => {
                let op = self.create_op();
                Request::Create(self.create(op))
            }
            2 => Request::Delete(DeleteRequest {
                path: self.path(),
                version: self.version(),
            }),
            3 => Request::Exists(self.path_watch()),
            4 => Request::GetData(self.path_watch()),
            5 => Request::SetData(SetDataRequest {
                path: self.path(),
                data: self.data(),
                version: self.version(),
            }),
            6 => Request::GetAcl(PathRequest { path: self.path() }),
            7 => Request::SetAcl(SetAclRequest {
                path: self.path(),
                acl: self.acl(),
                version: self.version(),
            }),
            8 => Request::GetChildren(self.path_watch()),
            9 => Request::GetChildren2(self.path_watch()),
            10 => Request::Sync(SyncRequest {
                path: (self.byte() & 1 == 0).then(|| self.path()),
            }),
            11 => Request::Ping,
            12 => Request::Check(CheckVersionRequest {
                path: self.path(),
                version: self.version(),
            }),
            13 | 14 => {
                let n = self.byte() % 5;
                Request::Multi((0..n).map(|_| self.multi_op()).collect())
            }
            15 => {
                let n = self.byte() % 4;
                Request::MultiRead((0..n).map(|_| self.multi_op()).collect())
            }
            16 => Request::Reconfig(ReconfigRequest {
                joining_servers: None,
                leaving_servers: Some("2".into()),
                new_members: None,
                cur_config_id: -1,
            }),
            17 => Request::CheckWatches(WatchTypeRequest {
                path: self.path(),
                watcher_type: self.byte() as i32 % 7,
            }),
            18 => Request::RemoveWatches(WatchTypeRequest {
                path: self.path(),
                watcher_type: self.byte() as i32 % 7,
            }),
            19 => Request::DeleteContainer(PathRequest { path: self.path() }),
            20 => {
                let (scheme, auth): (&str, &[u8]) = self.pick(&[
                    ("digest", b"u:p".as_slice()),
                    ("digest", b"v:q"),
                    ("digest", b"nocolon"),
                    ("digest", b"super:test"),
                    ("ip", b"127.0.0.1"),
                    ("sasl", b"x"),
                ]);
                Request::Auth(AuthPacket {
                    auth_type: 0,
                    scheme: scheme.into(),
                    auth: Bytes::from_static(auth),
                })
            }
            21 => Request::SetWatches(SetWatches {
                relative_zxid: self.relative_zxid(core),
                data_watches: self.paths(),
                exist_watches: self.paths(),
                child_watches: self.paths(),
            }),
            22 => Request::SetWatches2(SetWatches2 {
                relative_zxid: self.relative_zxid(core),
                data_watches: self.paths(),
                exist_watches: self.paths(),
                child_watches: self.paths(),
                persistent_watches: self.paths(),
                persistent_recursive_watches: self.paths(),
            }),
            23 => Request::Sasl(SaslToken { token: self.data() }),
            24 => Request::GetEphemerals(PathRequest { path: self.path() }),
            25 => Request::GetAllChildrenNumber(PathRequest { path: self.path() }),
            26 => match self.byte() % 3 {
                0 => Request::WhoAmI,
                1 => Request::CloseSession,
                _ => Request::AddWatch(AddWatchRequest {
                    path: self.path(),
                    mode: self.byte() as i32 % 4,
                }),
            },
            _ => Request::AddWatch(AddWatchRequest {
                path: self.path(),
                mode: self.byte() as i32 % 3,
            }),
        };
        let xid = match req.op().info().fixed_xid {
            Some(fixed) => fixed,
            None => {
                *next_xid = next_xid.wrapping_add(1);
                *next_xid
            }
        };
        (xid, req)
    }
}

/// What the core sent, checked frame by frame in the order it was sent.
#[derive(Default)]
struct Wire {
    /// Connections that have received their first frame (the ConnectResponse).
    greeted: HashSet<ConnId>,
    /// Connections the core asked to close.
    closed: HashSet<ConnId>,
    /// Sessions handed out: id → password.
    sessions: Vec<(i64, Bytes)>,
    /// Highest reply zxid seen per connection.
    last_zxid: HashMap<ConnId, i64>,
    /// Highest zxid any reply or notification carried.
    max_zxid: i64,
    /// Connections that sent a request with xid -1, whose reply looks like a notification.
    xid_minus_one: HashSet<ConnId>,
    /// (connection, xid) of auth and SASL requests not answered yet: their replies carry
    /// zxid 0 (and echo the request's xid), as ZooKeeper's do, so they are exempt from the
    /// zxid order.
    zxid_zero_xids: HashSet<(ConnId, i32)>,
}

impl Wire {
    /// Checks what `out` recorded during one core call, in order, and empties it.
    fn check(&mut self, out: &mut RecordingOutbox) {
        let mut frames = std::mem::take(&mut out.frames).into_iter();
        for event in std::mem::take(&mut out.log) {
            match event {
                Recorded::Sent(conn) => {
                    let (to, frame) = frames.next().expect("a frame for each send");
                    assert_eq!(to, conn, "frames recorded in the order sent");
                    self.send(conn, frame);
                }
                Recorded::Closed(conn) => self.close(conn),
                Recorded::Delayed(..) => {}
            }
        }
        out.clear();
    }

    fn send(&mut self, conn: ConnId, frame: Bytes) {
        assert!(
            !self.closed.contains(&conn),
            "frame sent to conn {conn} after its close"
        );
        assert!(frame.len() >= 4, "frame without a length");
        let len = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        assert_eq!(
            len as usize,
            frame.len() - 4,
            "length prefix of a sent frame"
        );
        let mut r = Reader::new(frame.slice(4..));
        if self.greeted.insert(conn) {
            let resp = ConnectResponse::read(&mut r).expect("first frame is a ConnectResponse");
            if resp.session_id != 0 {
                assert_eq!(resp.passwd.len(), 16, "session password length");
                self.sessions.push((resp.session_id, resp.passwd));
            }
            return;
        }
        let header = ReplyHeader::read(&mut r).expect("reply header");
        if trace() {
            eprintln!("  -> conn {conn}: {header:?} +{}B", r.remaining());
        }
        self.max_zxid = self.max_zxid.max(header.zxid);
        if header.xid == -1 && !self.xid_minus_one.contains(&conn) {
            let event = WatcherEvent::read(&mut r).expect("notification body");
            // setWatches may name any string, and ZooKeeper answers for it as given.
            assert!(
                (1..=4).contains(&event.event_type) && event.state == 3,
                "notification {event:?}"
            );
            assert!(r.is_empty(), "trailing bytes after a notification");
            return;
        }
        // Auth replies carry zxid 0, as ZooKeeper's do.
        let zxid_zero = self.zxid_zero_xids.remove(&(conn, header.xid));
        if header.zxid >= 0 && header.xid != -4 && !zxid_zero {
            let last = self.last_zxid.entry(conn).or_insert(0);
            assert!(
                header.zxid >= *last,
                "reply zxid went back from {last} to {} on conn {conn}",
                header.zxid
            );
            *last = header.zxid;
        }
        if header.err != 0 {
            // One error reply has a body: a multiRead of writes only is answered
            // MARSHALLINGERROR followed by an empty multi response (its terminating header
            // alone: type -1, done, err -1), as ZooKeeper answers it.
            const EMPTY_MULTI: [u8; 9] = [0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff];
            let empty_multi = header.err == -5 && frame.get(20..) == Some(&EMPTY_MULTI[..]);
            assert!(
                r.is_empty() || empty_multi,
                "error reply {} carries a body",
                header.err
            );
        }
    }

    fn close(&mut self, conn: ConnId) {
        self.closed.insert(conn);
    }
}

struct Harness {
    core: Core,
    /// Session clock (only moves forward).
    now: i64,
    /// How far the wall clock is from the session clock (steps both ways).
    skew: i64,
    /// Connections the network layer holds (until their socket closes).
    open: Vec<ConnId>,
    established: HashSet<ConnId>,
    /// What the core sends during a call, checked by `wire` after it.
    out: RecordingOutbox,
    wire: Wire,
    next_xid: i32,
}

impl Harness {
    fn new() -> Harness {
        let now = 1_700_000_000_000;
        let cfg = CoreConfig {
            tick_ms: 100,
            min_session_timeout_ms: 200,
            max_session_timeout_ms: 4000,
            max_client_cnxns: 4,
            super_digest: Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=".into()),
            ttl_enabled: true,
            reaper_interval_ms: 300,
            herd_warn: 2,
            zookeeper_version: Default::default(),
            auth: Default::default(),
            reconfig_enabled: true,
        };
        Harness {
            core: Core::new(cfg, now),
            now,
            skew: 0,
            open: Vec::new(),
            established: HashSet::new(),
            out: RecordingOutbox::new(),
            wire: Wire::default(),
            next_xid: 0,
        }
    }

    /// Both clocks as the core takes them.
    fn clock(&self) -> Now {
        Now {
            mono: self.now,
            wall: self.now + self.skew,
        }
    }

    fn conn(&mut self, input: &mut Input) -> Option<ConnId> {
        let b = input.byte() as usize;
        let id = *self.open.get(b % self.open.len().max(1))?;
        // After the core closed it, the network layer reads no more frames from it.
        (!self.wire.closed.contains(&id)).then_some(id)
    }

    fn frame(&mut self, conn: ConnId, payload: Bytes) {
        if self.established.contains(&conn) {
            if payload.starts_with(&[0xff; 4]) {
                self.wire.xid_minus_one.insert(conn);
            }
            if OpCode::of_payload(&payload).is_some_and(|op| op.class() == OpClass::Auth) {
                let xid = i32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                self.wire.zxid_zero_xids.insert((conn, xid));
            }
            self.core
                .request(conn, payload, self.clock(), &mut self.out);
            self.wire.check(&mut self.out);
        } else {
            let shook = self
                .core
                .handshake(conn, payload, self.clock(), &mut self.out);
            self.wire.check(&mut self.out);
            match shook {
                Handshake::Established => {
                    self.established.insert(conn);
                }
                Handshake::Closed => {
                    assert!(
                        self.wire.closed.contains(&conn),
                        "handshake refused without closing"
                    );
                }
            }
        }
    }

    fn connect_request(&mut self, input: &mut Input) -> ConnectRequest {
        let known = self.wire.sessions.len();
        let choice = input.byte() as usize;
        let (session_id, passwd) = if known == 0 || choice.is_multiple_of(3) {
            (0, Bytes::from_static(&[0; 16]))
        } else {
            let (id, pw) = self.wire.sessions[choice % known].clone();
            let pw = if choice & 0x80 != 0 {
                Bytes::from_static(&[7; 16])
            } else {
                pw
            };
            (id, pw)
        };
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: match input.byte() % 4 {
                0 => self.core.last_zxid() + 1,
                _ => self.core.last_zxid(),
            },
            timeout: input.pick(&[0, 1, 150, 250, 1000, 30_000, i32::MAX, -5]),
            session_id,
            passwd,
            read_only: input.pick(&[None, Some(false), Some(true)]),
        }
    }

    fn step(&mut self, input: &mut Input) {
        let tag = input.byte() % 8;
        if trace() {
            eprintln!("step {tag} at {} (open {:?})", self.now, self.open);
        }
        match tag {
            0 => {
                let b = input.byte();
                let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1 + b % 3));
                let remote = SocketAddr::new(ip, 40000 + b as u16);
                if self.open.len() < MAX_CONNS {
                    if let Some(id) = self.core.open_connection(remote, self.clock()) {
                        self.open.push(id);
                    }
                }
            }
            1 => {
                let conn = self.conn(input);
                let len = input.u16() as usize;
                let payload = Bytes::copy_from_slice(input.bytes(len));
                if trace() {
                    eprintln!("  conn {conn:?} raw {payload:?}");
                }
                if let Some(conn) = conn {
                    self.frame(conn, payload);
                }
            }
            3 => {
                let step = input.u16();
                // The top bit steps the wall clock instead (forward or back by up to a day).
                if step & 0x8000 != 0 {
                    self.skew = input.pick(&[-86_400_000, -3_600_000, -1000, 0, 5000, 86_400_000]);
                } else {
                    self.now += step as i64 * 8;
                }
                self.core.tick(self.clock(), &mut self.out);
                self.wire.check(&mut self.out);
            }
            4 => {
                if let Some(i) =
                    (!self.open.is_empty()).then(|| input.byte() as usize % self.open.len())
                {
                    let id = self.open.swap_remove(i);
                    self.core.connection_closed(id);
                    self.established.remove(&id);
                }
            }
            5 => match input.byte() % 11 {
                0 => {
                    let _ = self.core.summary(self.now);
                }
                1 => {
                    let _ = self.core.connection_reports();
                }
                2 => {
                    let _ = self.core.sessions_report(self.now);
                }
                3 => {
                    let _ = self.core.ephemeral_reports();
                }
                4 => {
                    let _ = self.core.data_watch_reports();
                }
                5 => {
                    let known = &self.wire.sessions;
                    let sid = known.get(input.byte() as usize % known.len().max(1));
                    let _ = self.core.session_watches(sid.map_or(0, |s| s.0));
                }
                6 => {
                    let _ = self.core.most_watched_paths(3);
                }
                7 => {
                    let path = input.path();
                    let after = input.pick(&[None, Some("a"), Some("s0000000000")]);
                    let _ = self.core.node_report(&path, after, 2);
                }
                8 => {
                    let _ = self.core.herd_report(3);
                }
                9 => self.core.reset_server_stats(),
                _ => self.core.reset_connection_stats(),
            },
            _ => {
                let Some(conn) = self.conn(input) else {
                    return;
                };
                let payload = if self.established.contains(&conn) {
                    let (xid, req) = input.request(&self.core, &mut self.next_xid);
                    if trace() {
                        eprintln!("  conn {conn} xid {xid}: {req:?}");
                    }
                    req.to_frame(xid).slice(4..)
                } else {
                    zkd_protocol::to_bytes(&self.connect_request(input))
                };
                self.frame(conn, payload);
            }
        }
    }
}

/// `ZKD_FUZZ_TRACE=1` prints every step and frame (to read a crash input).
fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("ZKD_FUZZ_TRACE").is_some())
}

/// Runs one input; panics on a finding.
pub fn run(data: &[u8]) {
    let mut h = Harness::new();
    let mut input = Input(data);
    let mut steps = 0;
    while !input.0.is_empty() && steps < 400 {
        h.step(&mut input);
        steps += 1;
        if let Err(e) = h.core.check_invariants() {
            panic!("invariant broken after step {steps}: {e}");
        }
        assert!(
            h.wire.max_zxid <= h.core.last_zxid(),
            "a frame carried zxid {} beyond the last applied {}",
            h.wire.max_zxid,
            h.core.last_zxid()
        );
    }
    // Every socket closes at the end: nothing may stay bound to a connection.
    for id in std::mem::take(&mut h.open) {
        h.core.connection_closed(id);
    }
    if let Err(e) = h.core.check_invariants() {
        panic!("invariant broken after closing every connection: {e}");
    }
    // Expiring every session leaves no ephemeral behind.
    h.now += 10_000;
    h.core.tick(h.clock(), &mut h.out);
    h.wire.check(&mut h.out);
    if let Err(e) = h.core.check_invariants() {
        panic!("invariant broken after every session expired: {e}");
    }
    assert!(
        h.core.sessions_report(h.now).is_empty(),
        "sessions outlived their timeout"
    );
}
