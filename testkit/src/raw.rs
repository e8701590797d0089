//! A minimal raw ZooKeeper client on top of `zkd-protocol`, for the differential tester and
//! the benchmarks: exact replies (header and body bytes), pipelining, notifications as they
//! arrive, reconnect with a session id, and byte counters.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use zkd_protocol::{
    from_bytes, ConnectRequest, ConnectResponse, FrameCodec, Jute, Reader, ReplyHeader, Request,
    WatcherEvent,
};

/// A create request for a node with the open ACL (`world:anyone`, every permission).
pub fn create(path: &str, data: Option<Bytes>, flags: i32) -> Request {
    Request::Create(zkd_protocol::Create {
        op: zkd_protocol::OpCode::Create,
        path: path.to_string(),
        data,
        acl: zkd_protocol::Acl::open_unsafe(),
        flags,
        ttl: -1,
    })
}

/// One reply: its header and undecoded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
    pub body: Bytes,
}

impl Reply {
    /// Decodes the body as `T` (only meaningful when `err == 0`).
    pub fn decode<T: Jute>(&self) -> Result<T, zkd_protocol::DecodeError> {
        from_bytes(self.body.clone())
    }
}

/// A watch notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub zxid: i64,
    pub event_type: i32,
    pub state: i32,
    pub path: String,
}

/// What one connection has seen, for benchmarks.
#[derive(Debug, Default)]
pub struct Counters {
    pub bytes_received: AtomicU64,
    pub frames_received: AtomicU64,
    pub events_received: AtomicU64,
    pub requests_sent: AtomicU64,
}

struct Shared {
    writer: tokio::sync::Mutex<(OwnedWriteHalf, i32)>,
    /// Waiting callers in request order; `None` once the connection is closed.
    pending: Mutex<Option<VecDeque<oneshot::Sender<Reply>>>>,
    last_zxid: AtomicI64,
    counters: Counters,
}

/// An established session on one connection.
pub struct RawClient {
    shared: Arc<Shared>,
    pub session_id: i64,
    pub passwd: Bytes,
    pub timeout_ms: i32,
    /// Whether the server said the session is served read-only (an ensemble member without
    /// quorum).
    pub read_only: bool,
    events: Mutex<Option<mpsc::UnboundedReceiver<Event>>>,
    reader: tokio::task::JoinHandle<()>,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("connection closed")]
    Closed,
    #[error("session expired or rejected")]
    Rejected,
}

impl RawClient {
    /// Opens a new session.
    pub async fn connect(addr: SocketAddr, timeout_ms: i32) -> Result<RawClient, ClientError> {
        Self::resume(addr, 0, Bytes::from_static(&[0; 16]), timeout_ms, 0).await
    }

    /// Connects with an existing session id and password (`session_id` 0 = new session).
    pub async fn resume(
        addr: SocketAddr,
        session_id: i64,
        passwd: Bytes,
        timeout_ms: i32,
        last_zxid: i64,
    ) -> Result<RawClient, ClientError> {
        Self::handshake(addr, session_id, passwd, timeout_ms, last_zxid, false).await
    }

    /// Connects with an existing session (or 0 for a new one), asking for read-only mode
    /// when `read_only` is set (as clients that accept a read-only server do).
    pub async fn handshake(
        addr: SocketAddr,
        session_id: i64,
        passwd: Bytes,
        timeout_ms: i32,
        last_zxid: i64,
        read_only: bool,
    ) -> Result<RawClient, ClientError> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: last_zxid,
            timeout: timeout_ms,
            session_id,
            passwd,
            read_only: Some(read_only),
        };
        stream
            .write_all(&zkd_protocol::frame::record_frame(&req))
            .await?;
        let mut buf = BytesMut::with_capacity(4096);
        let codec = FrameCodec {
            max: usize::MAX >> 1,
        };
        let payload = loop {
            if let Some(f) = codec
                .next_frame(&mut buf)
                .map_err(|_| ClientError::Closed)?
            {
                break f;
            }
            if stream.read_buf(&mut buf).await? == 0 {
                return Err(ClientError::Closed);
            }
        };
        let resp: ConnectResponse = from_bytes(payload).map_err(|_| ClientError::Closed)?;
        if resp.session_id == 0 || resp.timeout <= 0 {
            return Err(ClientError::Rejected);
        }
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared {
            writer: tokio::sync::Mutex::new((write, 0)),
            pending: Mutex::new(Some(VecDeque::new())),
            last_zxid: AtomicI64::new(last_zxid),
            counters: Counters::default(),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_loop(read, buf, shared.clone(), tx));
        Ok(RawClient {
            shared,
            session_id: resp.session_id,
            passwd: resp.passwd,
            timeout_ms: resp.timeout,
            read_only: resp.read_only == Some(true),
            events: Mutex::new(Some(rx)),
            reader,
        })
    }

    /// Sends a request with the next xid (or the fixed xid of pings, auth and setWatches)
    /// and returns a receiver for its reply, without waiting: calls pipeline.
    pub async fn send(&self, req: &Request) -> Result<oneshot::Receiver<Reply>, ClientError> {
        let (tx, rx) = oneshot::channel();
        let mut w = self.shared.writer.lock().await;
        let xid = match req.op().info().fixed_xid {
            Some(fixed) => fixed,
            None => {
                w.1 += 1;
                w.1
            }
        };
        self.push_pending(tx);
        self.shared
            .counters
            .requests_sent
            .fetch_add(1, Ordering::Relaxed);
        w.0.write_all(&req.to_frame(xid)).await?;
        Ok(rx)
    }

    /// Writes raw bytes (for malformed-input tests); a reply, if any, is expected in order.
    pub async fn send_raw(
        &self,
        frame: &[u8],
        expect_reply: bool,
    ) -> Result<Option<oneshot::Receiver<Reply>>, ClientError> {
        let mut w = self.shared.writer.lock().await;
        let rx = expect_reply.then(|| {
            let (tx, rx) = oneshot::channel();
            self.push_pending(tx);
            rx
        });
        w.0.write_all(frame).await?;
        Ok(rx)
    }

    /// Queues a waiter; a closed connection drops it, so the caller sees `Closed` at once.
    fn push_pending(&self, tx: oneshot::Sender<Reply>) {
        if let Ok(mut p) = self.shared.pending.lock() {
            if let Some(queue) = p.as_mut() {
                queue.push_back(tx);
            }
        }
    }

    /// Sends a request and waits for its reply.
    pub async fn call(&self, req: &Request) -> Result<Reply, ClientError> {
        self.send(req).await?.await.map_err(|_| ClientError::Closed)
    }

    /// Takes the notification stream (once).
    pub fn events(&self) -> Option<mpsc::UnboundedReceiver<Event>> {
        self.events.lock().ok().and_then(|mut e| e.take())
    }

    /// The largest zxid seen in replies.
    pub fn last_zxid(&self) -> i64 {
        self.shared.last_zxid.load(Ordering::Relaxed)
    }

    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Sends closeSession and waits for its reply.
    pub async fn close(self) -> Result<Reply, ClientError> {
        let r = self.call(&Request::CloseSession).await;
        self.reader.abort();
        r
    }

    /// Drops the connection without closing the session.
    pub async fn abort(self) {
        self.reader.abort();
        let mut w = self.shared.writer.lock().await;
        let _ = w.0.shutdown().await;
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn read_loop(
    mut read: tokio::net::tcp::OwnedReadHalf,
    mut buf: BytesMut,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
) {
    let codec = FrameCodec {
        max: usize::MAX >> 1,
    };
    loop {
        while let Ok(Some(frame)) = codec.next_frame(&mut buf) {
            let c = &shared.counters;
            c.bytes_received
                .fetch_add(frame.len() as u64 + 4, Ordering::Relaxed);
            c.frames_received.fetch_add(1, Ordering::Relaxed);
            let mut r = Reader::new(frame);
            let Ok(h) = ReplyHeader::read(&mut r) else {
                if let Ok(mut p) = shared.pending.lock() {
                    *p = None;
                }
                return;
            };
            if h.zxid > 0 {
                shared.last_zxid.fetch_max(h.zxid, Ordering::Relaxed);
            }
            if h.xid == -1 {
                c.events_received.fetch_add(1, Ordering::Relaxed);
                if let Ok(e) = WatcherEvent::read(&mut r) {
                    let _ = events.send(Event {
                        zxid: h.zxid,
                        event_type: e.event_type,
                        state: e.state,
                        path: e.path,
                    });
                }
                continue;
            }
            let waiter = shared
                .pending
                .lock()
                .ok()
                .and_then(|mut p| p.as_mut()?.pop_front());
            if let Some(w) = waiter {
                let _ = w.send(Reply {
                    xid: h.xid,
                    zxid: h.zxid,
                    err: h.err,
                    body: r.rest(),
                });
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => {
                if let Ok(mut p) = shared.pending.lock() {
                    *p = None;
                }
                return;
            }
            Ok(_) => {}
        }
    }
}
