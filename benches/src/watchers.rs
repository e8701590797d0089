//! Many watching sessions read by one thread through epoll: the cheapest way for the bench
//! to receive a notification on each of thousands of sockets, so that a fan-out measurement
//! times the server rather than the bench's own task scheduling. Sessions are opened with
//! tokio and then handed to a plain thread as non-blocking sockets.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures_util::stream::{self, StreamExt};
use zkd_protocol::{
    FrameCodec, Jute, PathWatchRequest, Reader, ReplyHeader, Request, WatcherEvent,
};

use crate::epoll::Epoll;
use crate::progress::Progress;
use crate::util::BenchResult;

/// One session's socket and what arrived on it.
struct Sock {
    stream: TcpStream,
    buf: BytesMut,
    xid: i32,
    /// Replies to requests, and notifications, received so far.
    replies: u64,
    events: u64,
    /// When the latest notification was read.
    last_event: Option<Instant>,
    bad: Option<String>,
    /// The server closed the connection after a closeSession.
    closed: bool,
}

/// Sessions read by one thread; the last one is the writer, which watches nothing.
pub struct Watchers {
    socks: Vec<Sock>,
    epoll: Epoll,
    codec: FrameCodec,
    closing: bool,
}

impl Watchers {
    /// Opens `n` watcher sessions plus one writer session.
    pub async fn connect(addr: SocketAddr, n: usize, progress: &Progress) -> BenchResult<Watchers> {
        let mut socks = Vec::with_capacity(n + 1);
        let mut opened = stream::iter(0..=n)
            .map(|_| crate::throughput::handshake(addr))
            .buffer_unordered(crate::pool::CONNECT_CONCURRENCY);
        while let Some(r) = opened.next().await {
            let s =
                r.map_err(|e| format!("opening watcher sessions ({} open): {e}", socks.len()))?;
            let stream = s.into_std().map_err(|e| e.to_string())?;
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            socks.push(Sock {
                stream,
                buf: BytesMut::with_capacity(256),
                xid: 0,
                replies: 0,
                events: 0,
                last_event: None,
                bad: None,
                closed: false,
            });
            progress.tick(|| format!("connected {}/{}", socks.len(), n + 1));
        }
        let epoll = Epoll::new().map_err(|e| format!("epoll: {e}"))?;
        for (i, s) in socks.iter().enumerate() {
            epoll
                .add(s.stream.as_raw_fd(), i as u64)
                .map_err(|e| format!("epoll_ctl: {e}"))?;
        }
        Ok(Watchers {
            socks,
            epoll,
            codec: FrameCodec { max: 1 << 24 },
            closing: false,
        })
    }

    pub fn watchers(&self) -> usize {
        self.socks.len() - 1
    }

    fn send(&mut self, i: usize, req: &Request) -> BenchResult<()> {
        let s = &mut self.socks[i];
        s.xid += 1;
        let mut out = BytesMut::with_capacity(64);
        req.write_frame(s.xid, &mut out);
        write_all(&mut s.stream, &out).map_err(|e| format!("session {i}: write: {e}"))
    }

    /// Reads everything ready until `done` holds or `limit` passes.
    fn poll_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&[Sock]) -> bool,
    ) -> BenchResult<()> {
        let deadline = Instant::now() + limit;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut tmp = vec![0u8; 64 * 1024];
        while !done(&self.socks) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("nothing more arrived within {limit:?}"));
            }
            let n = self
                .epoll
                .wait(&mut events, left.as_millis().clamp(1, 100) as i32)
                .map_err(|e| format!("epoll_wait: {e}"))?;
            for ev in &events[..n] {
                let i = ev.u64 as usize;
                self.read(i, &mut tmp)?;
            }
        }
        Ok(())
    }

    /// Drains socket `i` and accounts for the frames in it.
    fn read(&mut self, i: usize, tmp: &mut [u8]) -> BenchResult<()> {
        let s = &mut self.socks[i];
        if s.closed {
            return Ok(());
        }
        loop {
            match s.stream.read(tmp) {
                Ok(0) if self.closing => {
                    s.closed = true;
                    let _ = self.epoll.delete(s.stream.as_raw_fd());
                    break;
                }
                Ok(0) => return Err(format!("session {i}: connection closed by the server")),
                Ok(k) => s.buf.extend_from_slice(&tmp[..k]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("session {i}: read: {e}")),
            }
        }
        let now = Instant::now();
        while let Some(f) = self
            .codec
            .next_frame(&mut s.buf)
            .map_err(|e| format!("session {i}: {e}"))?
        {
            let mut r = Reader::new(f);
            let h = ReplyHeader::read(&mut r).map_err(|e| format!("session {i}: {e}"))?;
            if h.xid == -1 {
                s.events += 1;
                s.last_event = Some(now);
                match WatcherEvent::read(&mut r) {
                    Ok(ev) if ev.event_type == zkd_protocol::event_type::NODE_DATA_CHANGED => {}
                    Ok(ev) => {
                        s.bad.get_or_insert(format!(
                            "session {i}: unexpected notification type {} for {:?}",
                            ev.event_type, ev.path
                        ));
                    }
                    Err(e) => {
                        s.bad
                            .get_or_insert(format!("session {i}: bad notification: {e}"));
                    }
                }
            } else {
                s.replies += 1;
                if h.err != 0 {
                    s.bad
                        .get_or_insert(format!("session {i}: request failed with error {}", h.err));
                }
            }
        }
        Ok(())
    }

    fn check(&self) -> BenchResult<()> {
        match self.socks.iter().find_map(|s| s.bad.clone()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sets a data watch on `path` on every watcher and waits for all replies.
    pub fn arm(&mut self, path: &str, limit: Duration) -> BenchResult<()> {
        let req = Request::GetData(PathWatchRequest {
            path: path.to_string(),
            watch: true,
        });
        let w = self.watchers();
        let due: Vec<u64> = self.socks.iter().map(|s| s.replies + 1).collect();
        for i in 0..w {
            self.send(i, &req)?;
        }
        self.poll_until(limit, |socks| {
            socks[..w].iter().zip(&due).all(|(s, d)| s.replies >= *d)
        })?;
        self.check()
    }

    /// Sends `write` on the writer session and reads until every watcher has
    /// `due_each` notifications in total and the write is answered (then calls
    /// `on_all_arrived`), then `settle` more. Returns the send time and each watcher's
    /// arrival time.
    pub fn fire(
        &mut self,
        write: &Request,
        due_each: u64,
        limit: Duration,
        settle: Duration,
        on_all_arrived: impl FnOnce(),
    ) -> BenchResult<(Instant, Vec<Instant>)> {
        let w = self.watchers();
        let writer_due = self.socks[w].replies + 1;
        let t0 = Instant::now();
        self.send(w, write)?;
        let result = self.poll_until(limit, |socks| {
            socks[w].replies >= writer_due && socks[..w].iter().all(|s| s.events >= due_each)
        });
        if let Err(e) = result {
            let got = self.socks[..w]
                .iter()
                .filter(|s| s.events >= due_each)
                .count();
            return Err(format!(
                "{e}: {got} of {w} watchers notified (lost notification)"
            ));
        }
        on_all_arrived();
        // Anything more would be a duplicate.
        let _ = self.poll_until(settle, |_| false);
        self.check()?;
        let mut arrivals = Vec::with_capacity(w);
        for (i, s) in self.socks[..w].iter().enumerate() {
            if s.events != due_each {
                return Err(format!(
                    "watcher {i} received {} notifications, expected {due_each}",
                    s.events
                ));
            }
            arrivals.push(s.last_event.unwrap_or(t0));
        }
        Ok((t0, arrivals))
    }

    /// Closes every session (best effort, bounded).
    pub fn close(mut self, limit: Duration) {
        self.closing = true;
        for i in 0..self.socks.len() {
            let _ = self.send(i, &Request::CloseSession);
        }
        // The server answers and then closes each connection.
        let _ = self.poll_until(limit, |socks| socks.iter().all(|s| s.closed));
    }
}

/// `write_all` on a non-blocking socket.
pub(crate) fn write_all(s: &mut TcpStream, mut data: &[u8]) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !data.is_empty() {
        match s.write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
