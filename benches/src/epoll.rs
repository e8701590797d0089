//! A minimal epoll wrapper: register sockets by token and wait for readable (or writable)
//! ones.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

/// An epoll instance.
pub(crate) struct Epoll(RawFd);

/// Token of the listening socket in the set [`Epoll::listening`] makes.
pub(crate) const LISTENER: u64 = u64::MAX;

impl Epoll {
    /// A non-blocking listener on a free loopback port, a set holding it (as [`LISTENER`]),
    /// and its address.
    pub(crate) fn listening() -> io::Result<(Epoll, TcpListener, SocketAddr)> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let epoll = Epoll::new()?;
        epoll.add(listener.as_raw_fd(), LISTENER)?;
        Ok((epoll, listener, addr))
    }

    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll(fd))
    }

    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both fds are open; `ev` is a valid event.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Changes what `fd` is watched for: readable, and writable too when `writable`.
    pub(crate) fn modify(&self, fd: RawFd, token: u64, writable: bool) -> io::Result<()> {
        let mut events = libc::EPOLLIN as u32;
        if writable {
            events |= libc::EPOLLOUT as u32;
        }
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both fds are open; `ev` is a valid event.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_MOD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: both fds are open.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_DEL, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Accepts every connection `listener` has waiting: each non-blocking, without Nagle,
    /// added to the set with its index in `conns` as token and pushed as `conn(stream)`.
    pub(crate) fn accept_all<C>(
        &self,
        listener: &TcpListener,
        conns: &mut Vec<C>,
        conn: impl Fn(TcpStream) -> C,
    ) -> io::Result<()> {
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(true)?;
                    stream.set_nodelay(true)?;
                    self.add(stream.as_raw_fd(), conns.len() as u64)?;
                    conns.push(conn(stream));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Tokens of ready sockets (at most `out.len()`), waiting at most `timeout_ms`.
    pub(crate) fn wait(&self, out: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: `out` is a valid buffer of `out.len()` events.
        let n = unsafe { libc::epoll_wait(self.0, out.as_mut_ptr(), out.len() as i32, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe {
            libc::close(self.0);
        }
    }
}
