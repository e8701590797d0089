//! The throughput floor without a runtime: one thread, epoll, non-blocking sockets. On a
//! readable socket it reads what is there, answers every complete frame with
//! [`crate::floor_reply`] into one output buffer and writes it with one `write`; what the
//! socket does not take waits for it to become writable. It shows what tokio itself costs
//! next to [`crate::floor_tokio`], which answers the same way.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use bytes::{Buf, BytesMut};
use zkd_protocol::FrameCodec;

use crate::epoll::{Epoll, LISTENER};
use crate::floor_reply::{After, Replies, Session};

/// The largest frame accepted (zkd's default `jute.maxbuffer`).
const MAX_FRAME: usize = 0xfffff;

/// Binds `127.0.0.1:0` and serves on a thread of its own until the process ends. Returns
/// the address.
pub fn start(value_size: usize) -> io::Result<SocketAddr> {
    let (epoll, listener, addr) = Epoll::listening()?;
    std::thread::Builder::new()
        .name("floor-epoll".into())
        .spawn(move || {
            let mut floor = Floor {
                listener,
                epoll,
                conns: Vec::new(),
                replies: Replies::new(value_size),
                codec: FrameCodec { max: MAX_FRAME },
            };
            if let Err(e) = floor.serve() {
                eprintln!("zkd-bench: epoll floor stopped: {e}");
            }
        })?;
    Ok(addr)
}

/// One connection: unread input, unwritten output.
struct Conn {
    stream: TcpStream,
    input: BytesMut,
    output: BytesMut,
    session: Session,
    /// A closeSession was answered: close once the output is written.
    closing: bool,
    /// Registered for writability (output is waiting).
    want_write: bool,
}

struct Floor {
    listener: TcpListener,
    epoll: Epoll,
    /// By token; `None` once closed (tokens are not reused).
    conns: Vec<Option<Conn>>,
    replies: Replies,
    codec: FrameCodec,
}

impl Floor {
    fn serve(&mut self) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut tmp = vec![0u8; 64 * 1024];
        loop {
            let n = self.epoll.wait(&mut events, -1)?;
            for ev in &events[..n] {
                let (token, flags) = (ev.u64, ev.events);
                if token == LISTENER {
                    self.accept()?;
                } else if self.step(token as usize, flags, &mut tmp).is_err() {
                    self.close(token as usize);
                }
            }
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        self.epoll
            .accept_all(&self.listener, &mut self.conns, |stream| {
                Some(Conn {
                    stream,
                    input: BytesMut::with_capacity(4096),
                    output: BytesMut::with_capacity(4096),
                    session: Session::default(),
                    closing: false,
                    want_write: false,
                })
            })
    }

    /// Reads and answers what socket `i` has, then writes; an error closes the connection.
    fn step(&mut self, i: usize, flags: u32, tmp: &mut [u8]) -> Result<(), ()> {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Ok(());
        };
        let readable = flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
        if readable && !c.closing {
            loop {
                match c.stream.read(tmp) {
                    Ok(0) => return Err(()),
                    Ok(k) => {
                        c.input.extend_from_slice(&tmp[..k]);
                        if k < tmp.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Err(()),
                }
            }
            while !c.closing {
                let Some(payload) = self.codec.next_frame(&mut c.input).map_err(|_| ())? else {
                    break;
                };
                let after = self
                    .replies
                    .answer(&mut c.session, payload, &mut c.output)
                    .map_err(|_| ())?;
                c.closing = after == After::Close;
            }
        }
        while !c.output.is_empty() {
            match c.stream.write(&c.output) {
                Ok(0) => return Err(()),
                Ok(k) => c.output.advance(k),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        let want_write = !c.output.is_empty();
        if want_write != c.want_write {
            c.want_write = want_write;
            self.epoll
                .modify(c.stream.as_raw_fd(), i as u64, want_write)
                .map_err(|_| ())?;
        }
        if c.closing && !want_write {
            return Err(());
        }
        Ok(())
    }

    fn close(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i).and_then(Option::take) {
            let _ = self.epoll.delete(c.stream.as_raw_fd());
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
        }
    }
}
