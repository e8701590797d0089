//! The harness of the core's own tests: a core with an injected clock and a
//! [`RecordingOutbox`], sessions opened on it, requests sent and their replies decoded, and
//! builders of the requests the tests send.

use std::net::SocketAddr;

use bytes::Bytes;
use zkd_protocol::*;

use crate::*;

/// A decoded server frame.
#[derive(Debug, Clone)]
pub(crate) struct Decoded {
    pub(crate) xid: i32,
    pub(crate) zxid: i64,
    pub(crate) err: i32,
    pub(crate) body: Bytes,
}

impl Decoded {
    pub(crate) fn parse(frame: &Bytes) -> Decoded {
        let mut r = Reader::new(frame.slice(4..));
        let h = ReplyHeader::read(&mut r).expect("reply header");
        Decoded {
            xid: h.xid,
            zxid: h.zxid,
            err: h.err,
            body: r.rest(),
        }
    }
    pub(crate) fn decode<T: Jute>(&self) -> T {
        from_bytes(self.body.clone()).expect("reply body")
    }
    pub(crate) fn event(&self) -> (i32, String) {
        assert_eq!(self.xid, -1, "not a notification: {self:?}");
        let e: WatcherEvent = self.decode();
        assert_eq!(e.state, 3);
        (e.event_type, e.path)
    }
}

pub(crate) struct Harness {
    pub(crate) core: Core,
    pub(crate) now: i64,
    pub(crate) out: RecordingOutbox,
    pub(crate) xid: i32,
}

/// The configuration the core's own tests run with.
pub(crate) fn tests_config() -> CoreConfig {
    CoreConfig {
        super_digest: Some("super:lK75jTNcA+U9vtVEw5vB51mj/w4=".into()),
        herd_warn: 100,
        ..CoreConfig::default()
    }
}

/// Sessions the core's property tests run with.
pub(crate) const TEST_SESSIONS: usize = 3;

/// What the core's property tests draw an operation from: a session index (below
/// [`TEST_SESSIONS`]), an index into their `paths` paths, and node data (null or up to 3
/// bytes).
pub(crate) fn op_inputs(
    paths: usize,
) -> (
    std::ops::Range<usize>,
    std::ops::Range<usize>,
    impl proptest::strategy::Strategy<Value = Option<Vec<u8>>> + Clone,
) {
    use proptest::prelude::any;
    let data = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4));
    (0..TEST_SESSIONS, 0..paths, data)
}

pub(crate) fn config() -> CoreConfig {
    tests_config()
}

pub(crate) const T0: i64 = 1_700_000_000_000;

impl Harness {
    pub(crate) fn new() -> Harness {
        Self::with_config(config())
    }

    /// A harness behaving as the given ZooKeeper release line.
    pub(crate) fn release(version: crate::ZookeeperVersion) -> Harness {
        Self::with_config(CoreConfig {
            zookeeper_version: version,
            ..config()
        })
    }

    pub(crate) fn with_config(cfg: CoreConfig) -> Harness {
        Harness {
            core: Core::new(cfg, T0),
            now: T0,
            out: RecordingOutbox::default(),
            xid: 0,
        }
    }

    pub(crate) fn open(&mut self) -> ConnId {
        self.open_on(0)
    }

    /// A new connection accepted by ensemble member `member`.
    pub(crate) fn open_on(&mut self, member: MemberId) -> ConnId {
        let addr: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        self.core
            .open_member_connection(addr, self.now, member, Serving::ReadWrite)
            .unwrap()
    }

    /// Sends `req` as the first frame of `conn`.
    pub(crate) fn handshake(&mut self, conn: ConnId, req: &ConnectRequest) -> Handshake {
        let frame = jute::to_bytes(req);
        self.core.handshake(conn, frame, self.now, &mut self.out)
    }

    /// A session (`owner_timeout`) owning the ephemeral `/eph`, and a second one
    /// (`watcher_timeout`) with an exists watch on it; returns (owner conn, its session id and
    /// password, watcher conn).
    pub(crate) fn watched_ephemeral(
        &mut self,
        owner_timeout: i32,
        watcher_timeout: i32,
    ) -> (ConnId, i64, Bytes, ConnId) {
        let (a, sid, pw) = self.session(owner_timeout);
        let (w, _, _) = self.session(watcher_timeout);
        self.create(a, "/eph", 1);
        self.reply(w, &exists("/eph", true));
        (a, sid, pw, w)
    }

    /// Creates each `(path, flags)` from `conn`, in order.
    pub(crate) fn create_all(&mut self, conn: ConnId, nodes: &[(&str, i32)]) {
        for &(path, flags) in nodes {
            self.create(conn, path, flags);
        }
    }

    /// A harness with `N` sessions (30 s timeout) connected; returns their connections.
    pub(crate) fn with_sessions<const N: usize>() -> (Harness, [ConnId; N]) {
        let mut h = Harness::new();
        let conns = std::array::from_fn(|_| h.session(30000).0);
        (h, conns)
    }

    /// A new connection with a new session; returns (conn, session id, password).
    pub(crate) fn session(&mut self, timeout: i32) -> (ConnId, i64, Bytes) {
        self.session_on(0, timeout)
    }

    /// [`Harness::session`] through ensemble member `member`.
    pub(crate) fn session_on(&mut self, member: MemberId, timeout: i32) -> (ConnId, i64, Bytes) {
        let conn = self.open_on(member);
        let req = connect_request(0, timeout, &[0; 16]);
        assert_eq!(self.handshake(conn, &req), Handshake::Established);
        let frames = self.take(conn);
        let resp: ConnectResponse = from_bytes(frames[0].slice(4..)).unwrap();
        (conn, resp.session_id, resp.passwd)
    }

    pub(crate) fn take(&mut self, conn: ConnId) -> Vec<Bytes> {
        self.out.take(conn)
    }

    /// Sends a request; returns every frame the connection got (events first, reply last).
    pub(crate) fn call(&mut self, conn: ConnId, req: &Request) -> Vec<Decoded> {
        self.xid += 1;
        let frame = req.to_frame(self.xid);
        self.core
            .request(conn, frame.slice(4..), self.now, &mut self.out);
        self.take(conn).iter().map(Decoded::parse).collect()
    }

    /// The reply (last frame) of a request.
    pub(crate) fn reply(&mut self, conn: ConnId, req: &Request) -> Decoded {
        let mut frames = self.call(conn, req);
        frames.pop().expect("a reply")
    }

    pub(crate) fn create(&mut self, conn: ConnId, path: &str, flags: i32) -> Decoded {
        self.reply(conn, &create_req(OpCode::Create2, path, flags))
    }

    pub(crate) fn events(&mut self, conn: ConnId) -> Vec<(i32, String)> {
        self.take(conn)
            .iter()
            .map(|f| Decoded::parse(f).event())
            .collect()
    }
}

pub(crate) fn create_req(op: OpCode, path: &str, flags: i32) -> Request {
    Request::Create(Create {
        op,
        path: path.into(),
        data: Some(Bytes::from_static(b"v")),
        acl: Acl::open_unsafe(),
        flags,
        ttl: -1,
    })
}

/// A persistent TTL node (flags 5), no data, expiring `ttl` ms after its last change.
pub(crate) fn ttl_req(path: &str, ttl: i64) -> Request {
    Request::Create(Create {
        op: OpCode::CreateTtl,
        path: path.into(),
        data: None,
        acl: Acl::open_unsafe(),
        flags: 5,
        ttl,
    })
}

/// A ConnectRequest (client protocol 0, read-only byte false) for `session_id` (0: new).
pub(crate) fn connect_request(session_id: i64, timeout: i32, passwd: &[u8]) -> ConnectRequest {
    ConnectRequest {
        session_id,
        timeout,
        passwd: Bytes::copy_from_slice(passwd),
        read_only: Some(false),
        ..Default::default()
    }
}

pub(crate) fn path_watch(path: &str, watch: bool) -> PathWatchRequest {
    PathWatchRequest {
        path: path.into(),
        watch,
    }
}

pub(crate) fn get_data(path: &str, watch: bool) -> Request {
    Request::GetData(path_watch(path, watch))
}

pub(crate) fn exists(path: &str, watch: bool) -> Request {
    Request::Exists(path_watch(path, watch))
}

pub(crate) fn children(path: &str, watch: bool) -> Request {
    Request::GetChildren2(path_watch(path, watch))
}

pub(crate) fn delete(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version,
    })
}

pub(crate) fn set_data(path: &str, version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"w")),
        version,
    })
}

pub(crate) fn stat_of(h: &mut Harness, conn: ConnId, path: &str) -> Stat {
    let f = h.reply(conn, &exists(path, false));
    assert_eq!(f.err, 0, "exists {path}");
    f.decode::<StatResponse>().stat
}
