//! The fan-out floor: the least a program can do to put one notification frame on W
//! already-connected sockets. A bare server on one thread speaks just enough
//! of the protocol for the fan-out client (handshake, create, getData with a watch, setData,
//! delete, ping, closeSession); on a setData it writes the pre-encoded NodeDataChanged frame
//! to every watching socket, one `write` per socket and nothing else, then answers the
//! writer. Measured with the same client as `fanout`, so the two figures differ only by what
//! the server does between reading the write and the last notification leaving.
//!
//! The server runs in a child process of its own ([`FloorProcess`]: this binary re-executed
//! with a hidden subcommand), so its W sockets do not share the client's descriptor limit,
//! exactly like zkd and ZooKeeper; [`FloorServer`] is the same server on a thread of the
//! calling process, for library users and tests without the binary.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::{Bytes, BytesMut};
use zkd_protocol::{
    encode_frame, event_type, keeper_state, reply_frame, ConnectResponse, ErrorCode, FrameCodec,
    GetDataResponse, Jute, OpCode, Reader, ReplyHeader, RequestHeader, Stat, WatcherEvent,
};

use crate::epoll::{Epoll, LISTENER};
use crate::util::BenchResult;
use crate::watchers::write_all;

/// A running floor server; stopped and joined on drop.
pub struct FloorServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FloorServer {
    /// Binds a loopback port and serves on one thread.
    pub fn start() -> BenchResult<FloorServer> {
        let (epoll, listener, addr) =
            Epoll::listening().map_err(|e| format!("floor: listening socket: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fanout-floor".into())
            .spawn(move || {
                let mut s = Floor {
                    listener,
                    epoll,
                    conns: Vec::new(),
                    codec: FrameCodec { max: 1 << 20 },
                    notification: None,
                };
                if let Err(e) = s.serve(&flag) {
                    eprintln!("zkd-bench: fan-out floor server stopped: {e}");
                }
            })
            .map_err(|e| format!("floor: thread: {e}"))?;
        Ok(FloorServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for FloorServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The hidden subcommand of `zkd-bench` that runs the floor server as a child process.
pub const CHILD_COMMAND: &str = "floor-server";

/// What the child prints once it listens, followed by the address.
const LISTENING: &str = "floor listening on ";

/// The floor server in a child process (the `zkd-bench` binary `bin` run with
/// [`CHILD_COMMAND`]); killed and reaped on drop, and killed with this process. The kernel
/// kills it when the *thread* that spawned it ends (`PR_SET_PDEATHSIG`), so spawn it from a
/// thread that lives as long as it must: a runtime worker, not a blocking-pool thread (those
/// end after ten idle seconds).
pub struct FloorProcess {
    child: Child,
    addr: SocketAddr,
}

impl FloorProcess {
    /// Starts the child with the fan-out floor and waits for the address it listens on.
    pub fn spawn(bin: &Path) -> BenchResult<FloorProcess> {
        FloorProcess::spawn_kind(bin, FloorKind::Fanout, 0)
    }

    /// Starts the child with the floor `kind` (a throughput floor's getData returns
    /// `value_size` bytes) and waits for the address it listens on.
    pub fn spawn_kind(bin: &Path, kind: FloorKind, value_size: usize) -> BenchResult<FloorProcess> {
        let mut cmd = Command::new(bin);
        cmd.arg(CHILD_COMMAND)
            .arg("--kind")
            .arg(kind.key())
            .arg("--value-size")
            .arg(value_size.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        crate::servers::kill_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("floor: cannot run {}: {e}", bin.display()))?;
        let mut line = String::new();
        let read = match child.stdout.take() {
            Some(out) => BufReader::new(out).read_line(&mut line).map(|_| ()),
            None => Err(io::Error::other("no stdout")),
        };
        let addr = read.map_err(|e| e.to_string()).and_then(|()| {
            line.trim()
                .strip_prefix(LISTENING)
                .ok_or_else(|| format!("unexpected first line {line:?}"))
                .and_then(|a| a.parse().map_err(|e| format!("address {a:?}: {e}")))
        });
        match addr {
            Ok(addr) => Ok(FloorProcess { child, addr }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("floor: the child process did not start: {e}"))
            }
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for FloorProcess {
    fn drop(&mut self) {
        // Reaped here, so its CPU time counts as this process's children's time.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bare servers the child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FloorKind {
    /// The fan-out floor (this module).
    Fanout,
    /// The throughput floor on tokio ([`crate::floor_tokio`]).
    Tokio,
    /// The throughput floor on one epoll thread ([`crate::floor_epoll`]).
    Epoll,
}

impl FloorKind {
    /// Its name on the child's command line and in item names.
    pub fn key(self) -> &'static str {
        match self {
            FloorKind::Fanout => "fanout",
            FloorKind::Tokio => "tokio",
            FloorKind::Epoll => "epoll",
        }
    }
}

/// The child's side: serves the floor `kind` until its standard input closes (the parent
/// is gone or done).
pub fn serve_for_parent(kind: FloorKind, value_size: usize) -> BenchResult<()> {
    let err = |e: io::Error| format!("floor: {e}");
    let (addr, fanout) = match kind {
        FloorKind::Fanout => {
            let server = FloorServer::start()?;
            (server.addr(), Some(server))
        }
        FloorKind::Tokio => (crate::floor_tokio::start(value_size).map_err(err)?, None),
        FloorKind::Epoll => (crate::floor_epoll::start(value_size).map_err(err)?, None),
    };
    let mut out = io::stdout().lock();
    writeln!(out, "{LISTENING}{addr}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("floor: {e}"))?;
    drop(out);
    let mut sink = Vec::new();
    let _ = io::stdin().lock().read_to_end(&mut sink);
    drop(fanout);
    Ok(())
}

/// One client socket.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    handshaken: bool,
    watching: bool,
    open: bool,
}

struct Floor {
    listener: TcpListener,
    epoll: Epoll,
    conns: Vec<Conn>,
    codec: FrameCodec,
    /// The NodeDataChanged frame for the watched node, encoded at the first getData.
    notification: Option<Bytes>,
}

impl Floor {
    fn serve(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut tmp = vec![0u8; 64 * 1024];
        while !stop.load(Ordering::Relaxed) {
            let n = self.epoll.wait(&mut events, 50)?;
            for ev in &events[..n] {
                if ev.u64 == LISTENER {
                    self.accept()?;
                } else {
                    self.read(ev.u64 as usize, &mut tmp);
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self) -> io::Result<()> {
        self.epoll
            .accept_all(&self.listener, &mut self.conns, |stream| Conn {
                stream,
                buf: BytesMut::new(),
                handshaken: false,
                watching: false,
                open: true,
            })
    }

    /// Reads what socket `i` has and answers every complete frame; a broken connection is
    /// closed alone.
    fn read(&mut self, i: usize, tmp: &mut [u8]) {
        let Some(c) = self.conns.get_mut(i).filter(|c| c.open) else {
            return;
        };
        loop {
            match c.stream.read(tmp) {
                Ok(0) => {
                    self.close(i);
                    return;
                }
                Ok(k) => c.buf.extend_from_slice(&tmp[..k]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close(i);
                    return;
                }
            }
        }
        loop {
            let c = &mut self.conns[i];
            let frame = match self.codec.next_frame(&mut c.buf) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(_) => {
                    self.close(i);
                    return;
                }
            };
            if self.answer(i, frame).is_err() {
                self.close(i);
                return;
            }
        }
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.open {
            c.open = false;
            let _ = self.epoll.delete(c.stream.as_raw_fd());
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn answer(&mut self, i: usize, frame: Bytes) -> Result<(), String> {
        if !self.conns[i].handshaken {
            self.conns[i].handshaken = true;
            let resp = ConnectResponse {
                protocol_version: 0,
                timeout: crate::pool::SESSION_TIMEOUT_MS,
                session_id: i as i64 + 1,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: Some(false),
            };
            return self.reply(i, &zkd_protocol::frame::record_frame(&resp));
        }
        let mut r = Reader::new(frame);
        let h = RequestHeader::read(&mut r).map_err(|e| e.to_string())?;
        let zxid = 1;
        let op = OpCode::from_i32(h.op);
        let out = match op {
            Some(OpCode::Create) => {
                let path = r.ustring().map_err(|e| e.to_string())?.unwrap_or_default();
                reply_frame(h.xid, zxid, 0, Some(&|o: &mut BytesMut| path.write(o)))
            }
            Some(OpCode::GetData) => {
                let path = r.ustring().map_err(|e| e.to_string())?.unwrap_or_default();
                self.conns[i].watching = true;
                self.notification.get_or_insert_with(|| {
                    encode_frame(|o| {
                        ReplyHeader {
                            xid: -1,
                            zxid: -1,
                            err: 0,
                        }
                        .write(o);
                        WatcherEvent {
                            event_type: event_type::NODE_DATA_CHANGED,
                            state: keeper_state::SYNC_CONNECTED,
                            path,
                        }
                        .write(o);
                    })
                });
                let body = GetDataResponse {
                    data: Some(Bytes::from_static(b"0")),
                    stat: Stat::default(),
                };
                reply_frame(h.xid, zxid, 0, Some(&|o: &mut BytesMut| body.write(o)))
            }
            Some(OpCode::SetData) => {
                self.fan_out(i);
                reply_frame(
                    h.xid,
                    zxid,
                    0,
                    Some(&|o: &mut BytesMut| Stat::default().write(o)),
                )
            }
            Some(OpCode::Delete | OpCode::Ping | OpCode::CloseSession) => {
                reply_frame(h.xid, zxid, 0, None)
            }
            _ => reply_frame(h.xid, zxid, ErrorCode::Unimplemented as i32, None),
        };
        self.reply(i, &out)?;
        if op == Some(OpCode::CloseSession) {
            self.close(i);
        }
        Ok(())
    }

    /// The measured part: one write of the same frame per watching socket.
    fn fan_out(&mut self, writer: usize) {
        let Some(frame) = self.notification.clone() else {
            return;
        };
        for (j, c) in self.conns.iter_mut().enumerate() {
            if j == writer || !c.watching || !c.open {
                continue;
            }
            c.watching = false;
            match c.stream.write(&frame) {
                Ok(n) if n == frame.len() => {}
                // An empty socket buffer takes 48 bytes whole; anything else is finished
                // the slow way (never expected here).
                Ok(n) => {
                    let _ = write_all(&mut c.stream, &frame[n..]);
                }
                Err(_) => {
                    let _ = write_all(&mut c.stream, &frame);
                }
            }
        }
    }

    fn reply(&mut self, i: usize, frame: &[u8]) -> Result<(), String> {
        write_all(&mut self.conns[i].stream, frame).map_err(|e| e.to_string())
    }
}
