//! One client connection: a four-letter word, or the handshake followed by the established
//! connection, one hand-written future ([`Conn`]) that reads requests and writes replies
//! from the same poll.
//!
//! What an idle connection costs is what its task holds while it waits, so the established
//! connection is a small struct: the socket (owned whole, not split), the outbound queue,
//! an input buffer that holds no storage unless a partial frame is in it, and a few flags.
//! Whatever runs only for a while (the handshake, a four-letter word, a pause, a delay, the
//! linger timer, the final drain, a round of writes) lives in an allocation of its own that
//! is freed when it is over. On each poll the connection reads what is ready and hands the
//! complete frames to the core in order, then writes what its queue holds (vectored); it
//! registers its waker with the queue (woken by a kill, and by the next push when it has
//! nothing to write) before it waits.
//!
//! Close semantics:
//! * The core asks for a close ([`Out::Close`]): everything queued before it is written,
//!   then our side of the socket is shut down. Reading stops feeding the core as soon as
//!   the close is requested and, once writing is done, the connection waits briefly for the
//!   client's EOF (so unread input does not turn the close into a reset that could destroy
//!   the last replies in flight).
//! * The client closes, the socket fails, or the frame stream is corrupt (bad length,
//!   payload shorter than a request header): reading asks for a close the same way, so
//!   replies already queued are still flushed, within [`LINGER`].
//! * The outbound queue overflows: the connection is dropped without flushing.
//! * In every case [`Shared::closed`] (and so `Core::connection_closed`) runs once our side
//!   of the socket is shut down and nothing more will be read or written (before the
//!   courtesy wait for the client's EOF), or when the task ends, however it ends.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io::{self, IoSlice};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout, timeout_at, Instant, Sleep};
use zkd_protocol::frame::TELNET_INTERRUPT;
use zkd_protocol::{FourLetterWord, FrameCodec};

use super::input::InputBuf;
use super::stream::Stream;
use crate::core::{ConnId, Handshake};
use crate::engine::feed::Handed;
use crate::engine::outbound::HeldBody;
use crate::engine::queue::{ConnQueue, Parked, Taken};
use crate::engine::{ConnChannels, Out, Shared};
use crate::reports;

/// Smallest valid payload after the handshake: a RequestHeader.
const REQUEST_HEADER_LEN: usize = 8;
/// Most buffers handed to one vectored write (Linux's IOV_MAX).
const MAX_IOV: usize = 1024;
/// Up to this many buffers, a vectored write's list is on the stack.
const STACK_IOV: usize = 64;
/// Most frames / bytes taken off the queue for one round of writes.
const MAX_BATCH_FRAMES: usize = 4096;
const MAX_BATCH_BYTES: usize = 4 << 20;
/// How long queued replies may take to drain after the client stopped sending.
const LINGER: Duration = Duration::from_secs(5);
/// After our side is shut down, how long to wait for the client's EOF.
const DRAIN: Duration = Duration::from_secs(1);
/// Bytes of requests in one batch from which feeding them may be a long step (see
/// [`Conn::feed`]).
const BIG_BATCH: usize = 64 << 10;
/// Time a four-letter word's reply may go without the client taking a piece of it.
const FOUR_LETTER_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Tells the core the connection is gone, once: explicitly once the socket is shut down,
/// or when the task ends, however it ends. Its queue is closed first (later pushes fail,
/// what is queued is freed); the queue's close is what marks the connection gone.
struct Registered {
    shared: Arc<Shared>,
    q: Arc<ConnQueue>,
    id: ConnId,
}

impl Registered {
    fn finish(&self) {
        if !self.q.close_receiver() {
            return;
        }
        // While a long step holds the core, the core hears of the close from a blocking
        // thread, so that no runtime thread waits for the step (the accept loop needs one).
        if self.shared.core_busy() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let (shared, id) = (self.shared.clone(), self.id);
                rt.spawn_blocking(move || shared.closed(id));
                return;
            }
        }
        self.shared.closed(self.id);
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The client's address, for log lines: a `SocketAddr` without the IPv6 flow and scope
/// fields, in fewer bytes.
#[derive(Clone, Copy)]
struct Peer {
    ip: IpAddr,
    port: u16,
}

impl From<SocketAddr> for Peer {
    fn from(a: SocketAddr) -> Peer {
        Peer {
            ip: a.ip(),
            port: a.port(),
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        SocketAddr::new(self.ip, self.port).fmt(f)
    }
}

/// How the part of a connection before its session ended.
enum Opened<S: Stream> {
    /// The handshake went through (or was answered with a close by the core): serve it.
    Session {
        stream: S,
        buf: InputBuf,
        established: bool,
    },
    /// Nothing more to serve (a four-letter word, a failed handshake); the stream to drain,
    /// if our side closed first.
    Done(Option<S>),
}

/// Serves one accepted, registered connection until it is closed.
///
/// The task's future is what an idle connection costs: while the connection is
/// established it is a [`Conn`] and a tag; the handshake and the final drain run in
/// allocations of their own.
pub(crate) fn run<S: Stream>(
    shared: Arc<Shared>,
    id: ConnId,
    stream: S,
    remote: SocketAddr,
    channels: ConnChannels,
) -> impl Future<Output = ()> + Send {
    let ConnChannels { q, member } = channels;
    let registered = Registered { shared, q, id };
    Task::Starting(Box::pin(start(registered, stream, remote, member)))
}

/// A connection accepted while a step holds the core's lock: `ruok` is answered at once,
/// without registering the connection (its answer needs nothing of the core), so a health
/// check is not held behind a long step. Anything else is handed back to be registered and
/// served as usual. Waits at most the handshake timeout for the first four bytes, and closes
/// the connection when they do not come in that time.
pub(crate) async fn answer_ruok_unregistered(
    shared: &Arc<Shared>,
    mut stream: tokio::net::TcpStream,
    remote: SocketAddr,
) -> Option<tokio::net::TcpStream> {
    let deadline = Instant::now() + shared.cfg.handshake_timeout;
    let mut first = [0u8; 4];
    loop {
        match timeout_at(deadline, stream.peek(&mut first)).await {
            Ok(Ok(n)) if n >= first.len() => break,
            // End of input or an error: the usual path judges the connection.
            Ok(Ok(0)) | Ok(Err(_)) => return Some(stream),
            // The handshake timeout passed here already: closed now, as the usual path
            // would close it (handing it on would give it a second timeout).
            Err(_) => {
                tracing::debug!(%remote, "closing a connection that sent no handshake in time");
                return None;
            }
            Ok(Ok(_)) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    let word = FourLetterWord::from_bytes(first);
    if word != Some(FourLetterWord::Ruok) || !shared.cfg.whitelist.allows(FourLetterWord::Ruok) {
        return Some(stream);
    }
    tracing::debug!(%remote, "ruok answered while a step holds the core");
    let answered = timeout(FOUR_LETTER_WRITE_TIMEOUT, async {
        stream.read_exact(&mut first).await?;
        stream.write_all(reports::ruok().as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if matches!(answered, Ok(Ok(()))) {
        drain(stream).await;
    }
    None
}

/// What the part before the session hands on.
enum Next<S> {
    /// Serve the established connection.
    Serve(Conn<S>),
    /// Nothing more to serve; the stream to drain, if our side closed first.
    Drain(Option<S>),
}

/// A connection's task, one phase at a time.
enum Task<S> {
    /// The first frame (a four-letter word or the handshake).
    Starting(Pin<Box<dyn Future<Output = Next<S>> + Send>>),
    Serving(Conn<S>),
    /// Waiting for the client's EOF after our side closed.
    Draining(Pin<Box<dyn Future<Output = ()> + Send>>),
    Done,
}

impl<S: Stream> Future for Task<S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let task = self.get_mut();
        loop {
            let rest = match task {
                Task::Starting(starting) => match ready!(starting.as_mut().poll(cx)) {
                    Next::Serve(conn) => {
                        *task = Task::Serving(conn);
                        continue;
                    }
                    Next::Drain(rest) => rest,
                },
                Task::Serving(conn) => {
                    let drain = ready!(conn.poll_serve(cx));
                    match std::mem::replace(task, Task::Done) {
                        Task::Serving(conn) if drain => Some(conn.stream),
                        _ => None,
                    }
                }
                Task::Draining(draining) => {
                    ready!(draining.as_mut().poll(cx));
                    None
                }
                Task::Done => return Poll::Ready(()),
            };
            *task = match rest {
                Some(stream) => Task::Draining(Box::pin(drain(stream))),
                None => Task::Done,
            };
        }
    }
}

/// The part before the session: the connection to serve, or (once the core was told the
/// connection is gone) the stream to drain.
async fn start<S: Stream>(
    registered: Registered,
    stream: S,
    remote: SocketAddr,
    member: u64,
) -> Next<S> {
    let opened = open(
        &registered.shared,
        &registered.q,
        registered.id,
        stream,
        remote,
        member,
    )
    .await;
    match opened {
        Opened::Session {
            stream,
            buf,
            established,
        } => Next::Serve(Conn::new(registered, stream, buf, established, remote)),
        Opened::Done(rest) => {
            drop(registered);
            Next::Drain(rest)
        }
    }
}

/// The first frame: a four-letter word (answered here), or the handshake.
async fn open<S: Stream>(
    shared: &Arc<Shared>,
    q: &ConnQueue,
    id: ConnId,
    mut stream: S,
    remote: SocketAddr,
    member: u64,
) -> Opened<S> {
    let deadline = Instant::now() + shared.cfg.handshake_timeout;
    if q.net_fault().blackhole {
        // Nothing arrives: the connection ends when the server gives up waiting for its
        // handshake, or when the blackhole is removed (as every connection it held does).
        let _ = timeout_at(deadline, blackhole_lifted(q)).await;
        tracing::debug!(conn = id, %remote, "closing a blackholed connection before its handshake");
        return Opened::Done(None);
    }
    let mut buf = match InputBuf::new(shared.input.clone(), shared.cfg.max_frame_len) {
        Ok(b) => b,
        Err(reason) => {
            tracing::warn!(conn = id, %remote, "closing connection: {reason}");
            return Opened::Done(None);
        }
    };

    // The first four bytes: a four-letter word, or the ConnectRequest's length.
    let read = read_at_least(&mut stream, &mut buf, 4, deadline).await;
    if !got_bytes(read, id, remote, None) {
        return Opened::Done(None);
    }
    let b = buf.bytes();
    let first = [b[0], b[1], b[2], b[3]];
    if first == TELNET_INTERRUPT {
        // The telnet interrupt sequence: just close.
        return Opened::Done(None);
    }
    if let Some(word) = FourLetterWord::from_bytes(first) {
        let rd =
            answer_four_letter_word(shared, id, remote, stream, buf, word, deadline, member).await;
        return Opened::Done(rd);
    }

    let codec = FrameCodec {
        max: shared.cfg.max_frame_len,
    };
    let connect = loop {
        match buf.next_frame(&codec) {
            Ok(Some(payload)) => break payload,
            Ok(None) => {
                let want = buf.len() + 1;
                let read = read_at_least(&mut stream, &mut buf, want, deadline).await;
                if !got_bytes(read, id, remote, Some("the connect request")) {
                    return Opened::Done(None);
                }
            }
            Err(e) => {
                tracing::info!(conn = id, %remote, "closing connection: {e}");
                return Opened::Done(None);
            }
        }
    };

    let latency = q.net_fault().latency_ms;
    if latency > 0 {
        let at = shared.clock.mono().saturating_add(latency as i64);
        shared.clock.reached(at).await;
    }
    shared.gate.wait().await;
    let now = shared.now();
    let established = match shared.handshake(id, connect, now) {
        Ok(Handshake::Established) => true,
        Ok(Handshake::Closed) => false,
        // The server failed closed; this connection is being dropped.
        Err(_) => return Opened::Done(None),
    };
    Opened::Session {
        stream,
        buf,
        established,
    }
}

/// Resolves once the connection is no longer blackholed (or was killed).
pub(crate) fn blackhole_lifted(q: &ConnQueue) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |cx| {
        if !q.net_fault().blackhole {
            return Poll::Ready(());
        }
        if q.park(cx.waker(), false) == Parked::Killed || !q.net_fault().blackhole {
            return Poll::Ready(());
        }
        Poll::Pending
    })
}

/// A future that resolves when the session clock reads `ms` later than now (a network
/// fault's latency).
fn latency_end(shared: &Arc<Shared>, ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let shared = shared.clone();
    let at = shared
        .clock
        .mono()
        .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
    Box::pin(async move { shared.clock.reached(at).await })
}

/// Reads until `buf` holds at least `n` bytes. Ok(false) = EOF first.
async fn read_at_least(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut InputBuf,
    n: usize,
    deadline: Instant,
) -> Result<bool, String> {
    while buf.len() < n {
        match timeout_at(deadline, buf.read_from(stream)).await {
            Err(_) => return Err("no complete first frame within the handshake timeout".into()),
            Ok(Ok(Ok(0))) => return Ok(false),
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(reason))) => return Err(reason.to_string()),
            Ok(Err(e)) => return Err(format!("read failed: {e}")),
        }
    }
    Ok(true)
}

/// Whether a [`read_at_least`] got its bytes. When not, logs why the connection closes: the
/// read's error, or the client's EOF `inside` a frame (`None`: before any handshake byte,
/// which is routine and logged at debug level).
fn got_bytes(
    read: Result<bool, String>,
    id: ConnId,
    remote: SocketAddr,
    inside: Option<&str>,
) -> bool {
    match (read, inside) {
        (Ok(true), _) => true,
        (Ok(false), None) => {
            tracing::debug!(conn = id, %remote, "client closed the connection before a handshake");
            false
        }
        (Ok(false), Some(frame)) => {
            tracing::info!(conn = id, %remote, "closing connection: EOF inside {frame}");
            false
        }
        (Err(reason), _) => {
            tracing::info!(conn = id, %remote, "closing connection: {reason}");
            false
        }
    }
}

/// Writes a four-letter word's reply and shuts down the sending side. Returns the stream to
/// drain, if the reply went out.
#[allow(clippy::too_many_arguments)]
async fn answer_four_letter_word<S: Stream>(
    shared: &Arc<Shared>,
    id: ConnId,
    remote: SocketAddr,
    mut stream: S,
    mut buf: InputBuf,
    word: FourLetterWord,
    deadline: Instant,
    member: u64,
) -> Option<S> {
    tracing::debug!(conn = id, %remote, %word, "four-letter word");
    let text = if !shared.cfg.whitelist.allows(word) {
        reports::not_whitelisted(word.as_str())
    } else {
        if word == FourLetterWord::Stmk {
            // The new trace mask follows as a big-endian long.
            if !matches!(
                read_at_least(&mut stream, &mut buf, 12, deadline).await,
                Ok(true)
            ) {
                return None;
            }
            let mut mask = [0u8; 8];
            mask.copy_from_slice(&buf.bytes()[4..12]);
            shared
                .trace_mask
                .store(i64::from_be_bytes(mask), Ordering::Relaxed);
        }
        if matches!(word, FourLetterWord::Crst | FourLetterWord::Srst)
            && shared.reset_stats(word == FourLetterWord::Srst).is_err()
        {
            return None;
        }
        reports::answer(shared.clone(), word, member, remote.ip()).await?
    };
    let mut held = hold_answer(shared, text)
        .map_err(|why| tracing::warn!(conn = id, %remote, %word, "not answered: {why}"))
        .ok()?;
    // Written a piece at a time, each piece let go of (and off the outbound total) once
    // written; a client that takes nothing for the write timeout is closed.
    while let Some(piece) = held.pop_front() {
        match timeout(FOUR_LETTER_WRITE_TIMEOUT, stream.write_all(&piece.body)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(conn = id, %remote, %word, error = %e, "could not deliver the four-letter reply");
                return None;
            }
            Err(_) => {
                tracing::info!(
                    conn = id,
                    %remote,
                    %word,
                    unsent = piece.body.len() + held.iter().map(|h| h.body.len()).sum::<usize>(),
                    "closing connection: the client read none of its four-letter answer for {} s",
                    FOUR_LETTER_WRITE_TIMEOUT.as_secs()
                );
                return None;
            }
        }
    }
    if !matches!(
        timeout(FOUR_LETTER_WRITE_TIMEOUT, stream.shutdown()).await,
        Ok(Ok(()))
    ) {
        return None;
    }
    Some(stream)
}

/// Bytes of a four-letter answer written at once (and counted apart in the outbound total).
const FOUR_LETTER_PIECE: usize = 64 << 10;

/// A four-letter answer cut into pieces, each counted in the server-wide outbound total
/// until written (see [`crate::engine::outbound`]). Refused, with the reason, when the answer
/// is longer than one connection may hold unwritten (`--max-outbound-bytes`) or would take
/// the total past half its limit (`--max-total-outbound-bytes`): answers to words never take
/// more than half of what the clients' queues may hold together.
fn hold_answer(shared: &Shared, text: String) -> Result<VecDeque<HeldBody>, String> {
    let budget = &shared.outbound;
    let len = text.len();
    if len > budget.per_conn {
        return Err(format!(
            "the answer is {len} bytes, more than one connection may hold unwritten \
             (--max-outbound-bytes {})",
            budget.per_conn
        ));
    }
    let total = budget.total();
    if total.saturating_add(len) > budget.limit / 2 {
        return Err(format!(
            "the server holds {total} unwritten bytes; this {len}-byte answer would take \
             that past half the server-wide limit (--max-total-outbound-bytes {})",
            budget.limit
        ));
    }
    let text = Bytes::from(text);
    Ok((0..len)
        .step_by(FOUR_LETTER_PIECE)
        .map(|at| budget.hold(text.slice(at..(at + FOUR_LETTER_PIECE).min(len))))
        .collect())
}

/// Frames read while a pause started, with the time they arrived: fed when it ends.
type PausedInput =
    Pin<Box<dyn Future<Output = (Vec<Bytes>, Option<String>, std::time::Instant)> + Send>>;

/// An established connection: reads requests, feeds them to the core and writes what the
/// core queued, from one poll ([`Conn::poll_serve`]). While idle it holds the socket, its
/// registration (the server and the queue), a released input buffer, the client's address
/// and three flags: about 150 bytes.
struct Conn<S> {
    registered: Registered,
    stream: S,
    buf: InputBuf,
    /// Whatever is under way besides waiting; `None` while idle.
    busy: Option<Box<Busy>>,
    remote: Peer,
    /// Input is still read (until EOF, a read error, or the end of writing).
    reading: bool,
    /// Complete frames are fed to the core (until a close is requested).
    feeding: bool,
    /// Everything before the core's close was written: shut our side down.
    shutting_down: bool,
    /// As the core's feeder, this task woke tasks waiting for reads: once its own replies
    /// are written it yields, so that they run before it reads and feeds more.
    step_aside: bool,
}

/// What a connection holds only while something is under way: a round of writes, a pause,
/// a delay, the linger time. Freed once none of it is left.
#[derive(Default)]
struct Busy {
    /// Frames taken off the queue and not written yet.
    round: Option<Round>,
    /// A pause holds frames read but not fed.
    paused_input: Option<PausedInput>,
    /// A pause holds the next write.
    paused_output: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// A `delay` fault rule holds what follows.
    hold: Option<Pin<Box<Sleep>>>,
    /// A network fault's latency holds the round taken.
    latency: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Group commit holds what follows until a transaction is synced.
    durable: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// How long writing may still take once reading is over ([`LINGER`]).
    linger: Option<Pin<Box<Sleep>>>,
}

impl Busy {
    fn is_idle(&self) -> bool {
        self.round.is_none()
            && self.paused_input.is_none()
            && self.paused_output.is_none()
            && self.hold.is_none()
            && self.latency.is_none()
            && self.durable.is_none()
            && self.linger.is_none()
    }
}

/// One round of writes: frames taken off the queue, in order, up to a delay, a close or the
/// batch limits.
#[derive(Default)]
struct Round {
    batch: VecDeque<Bytes>,
    /// The shared bodies in `batch`: let go of once written (or when the connection ends).
    held: Vec<HeldBody>,
    bytes: usize,
    /// Bytes of `bytes` in shared bodies.
    shared: usize,
    then: Then,
}

/// What follows a round of writes.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Then {
    #[default]
    Next,
    /// Hold what follows for this many ms.
    Hold(u64),
    /// Hold what follows until this many transactions are synced.
    Durable(u64),
    /// Shut down our side and stop writing.
    Close,
}

impl Round {
    /// The round's frames vanish (a network fault): nothing is written, what they held is
    /// let go of, and only a close still follows.
    fn discard(&mut self) {
        self.batch.clear();
        self.held.clear();
        if self.then != Then::Close {
            self.then = Then::Next;
        }
    }

    /// Adds `out`; whether the round takes more. `synced`: the transactions synced so far
    /// (a barrier they cover is passed over).
    fn add(&mut self, out: Out, synced: u64) -> bool {
        match out {
            Out::Frame(f) => {
                self.bytes += f.len();
                self.batch.push_back(f);
            }
            Out::Shared(b) => {
                self.bytes += b.body.len();
                self.shared += b.body.len();
                self.batch.push_back(b.body.clone());
                self.held.push(b);
            }
            Out::Delay(ms) => self.then = Then::Hold(ms),
            Out::Durable(n) if n > synced => self.then = Then::Durable(n),
            Out::Durable(_) => {}
            Out::Close => self.then = Then::Close,
        }
        self.then == Then::Next
            && self.batch.len() < MAX_BATCH_FRAMES
            && self.bytes < MAX_BATCH_BYTES
    }
}

/// What one step of reading did.
enum ReadStep {
    /// Bytes arrived (and complete frames went to the core): read again after writing.
    More,
    /// Reading is over (EOF or a failed read) and a close was requested.
    Ended,
}

/// Polls the wait in `slot`, if there is one: true while it is pending; a finished wait is
/// dropped, so it is not polled again.
fn still_waiting<F: Future + ?Sized>(slot: &mut Option<Pin<Box<F>>>, cx: &mut Context<'_>) -> bool {
    if let Some(wait) = slot {
        if wait.as_mut().poll(cx).is_pending() {
            return true;
        }
        *slot = None;
    }
    false
}

/// Registers `cx` with the queue (woken by a kill, and with `want` by the next push):
/// ready if the connection was killed.
fn park(q: &ConnQueue, cx: &mut Context<'_>, want: bool) -> Poll<()> {
    match q.park(cx.waker(), want) {
        Parked::Killed => Poll::Ready(()),
        Parked::Waiting | Parked::Queued => Poll::Pending,
    }
}

/// A future that resolves when the server's pause ends.
fn pause_end(shared: &Arc<Shared>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let shared = shared.clone();
    Box::pin(async move { shared.gate.wait().await })
}

impl<S: Stream> Conn<S> {
    fn new(
        registered: Registered,
        stream: S,
        buf: InputBuf,
        established: bool,
        remote: SocketAddr,
    ) -> Conn<S> {
        Conn {
            registered,
            stream,
            buf,
            busy: None,
            remote: remote.into(),
            reading: true,
            feeding: established,
            shutting_down: false,
            step_aside: false,
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.registered.shared
    }

    fn id(&self) -> ConnId {
        self.registered.id
    }

    fn busy(&mut self) -> &mut Busy {
        self.busy.get_or_insert_with(Box::default)
    }

    /// Serves the connection; ready once nothing more will be written, with whether the
    /// client's EOF is still to be awaited (writing ended while input was still read).
    fn poll_serve(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        loop {
            let mut again = false;
            if self.reading {
                match self.poll_read(cx) {
                    Poll::Ready(ReadStep::More) => again = true,
                    Poll::Ready(ReadStep::Ended) => {
                        self.reading = false;
                        self.busy().linger = Some(Box::pin(tokio::time::sleep(LINGER)));
                        again = true;
                    }
                    Poll::Pending => {}
                }
            }
            if self.poll_write(cx).is_ready() {
                // Nothing more is written or fed to the core: reading stops too.
                self.busy = None;
                self.stream.stop_writing(cx);
                self.registered.finish();
                return Poll::Ready(self.reading);
            }
            if self.step_aside && again {
                // The readers this task woke as the feeder run first (the last one woken is
                // next on this thread); this task goes to the back of the thread's queue.
                self.step_aside = false;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.step_aside = false;
            if !again {
                if self.busy.as_ref().is_some_and(|b| b.is_idle()) {
                    self.busy = None;
                }
                return Poll::Pending;
            }
        }
    }

    /// Feeds the complete frames in the buffer to the core, then reads once.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<ReadStep> {
        loop {
            let fault = self.registered.q.net_fault();
            if fault.blackhole {
                // Nothing is read (the client's sends fill the socket's buffers and stop);
                // a change of the fault wakes the task through its queue.
                return Poll::Pending;
            }
            let paused = self.busy.as_mut().and_then(|b| b.paused_input.as_mut());
            if let Some(paused) = paused {
                let (frames, bad, arrived) = ready!(paused.as_mut().poll(cx));
                self.busy().paused_input = None;
                self.feed(frames, bad, arrived);
            } else if self.feeding {
                let (frames, bad) = self.complete_frames();
                let arrived = std::time::Instant::now();
                if !frames.is_empty() && self.shared().gate.is_paused() {
                    // Stop-the-world pause: no more reading until it ends.
                    let end = pause_end(self.shared());
                    self.busy().paused_input = Some(Box::pin(async move {
                        end.await;
                        (frames, bad, arrived)
                    }));
                    continue;
                }
                if fault.latency_ms > 0 && (!frames.is_empty() || bad.is_some()) {
                    // Network latency: the frames reach the server that much later on the
                    // session clock; nothing more is read meanwhile.
                    let end = latency_end(self.shared(), fault.latency_ms);
                    self.busy().paused_input = Some(Box::pin(async move {
                        end.await;
                        (frames, bad, arrived)
                    }));
                    continue;
                }
                self.feed(frames, bad, arrived);
            }
            if self.registered.q.park_fed(cx.waker()) {
                // The batch handed over is not fed yet (another thread feeds the core): read
                // no more (nor the client's EOF) until it is; `fed` wakes this task.
                return Poll::Pending;
            }
            if !self.feeding {
                self.buf.clear();
            }
            self.buf.shrink_if_idle();
            if self.buf.len() == 0 {
                // Nothing partial: while no input is ready, wait without holding a buffer
                // (one that input keeps busy is kept).
                match self.stream.poll_read_ready(cx) {
                    Poll::Pending => {
                        self.buf.release();
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(self.read_failed(e)),
                    Poll::Ready(Ok(())) => {}
                }
            }
            let read = match self.buf.poll_read_from(&mut self.stream, cx) {
                Poll::Pending => {
                    self.buf.release();
                    return Poll::Pending;
                }
                Poll::Ready(read) => read,
            };
            match read {
                Ok(Ok(0)) => {
                    tracing::debug!(conn = self.id(), remote = %self.remote, "client closed the connection");
                    self.shared().client_gone(self.id());
                    return Poll::Ready(ReadStep::Ended);
                }
                Ok(Ok(_)) => return Poll::Ready(ReadStep::More),
                Ok(Err(reason)) => {
                    tracing::warn!(conn = self.id(), remote = %self.remote, "closing connection: {reason}");
                    self.shared().close(self.id());
                    self.feeding = false;
                }
                Err(e) => return Poll::Ready(self.read_failed(e)),
            }
        }
    }

    fn read_failed(&self, e: io::Error) -> ReadStep {
        tracing::debug!(conn = self.id(), remote = %self.remote, error = %e, "read failed");
        self.shared().client_gone(self.id());
        ReadStep::Ended
    }

    /// Takes the complete frames off the buffer, up to a corrupt one (the reason is
    /// returned with them).
    fn complete_frames(&mut self) -> (Vec<Bytes>, Option<String>) {
        let codec = FrameCodec {
            max: self.shared().cfg.max_frame_len,
        };
        let mut frames = Vec::new();
        loop {
            match self.buf.next_frame(&codec) {
                Ok(Some(f)) if f.len() < REQUEST_HEADER_LEN => {
                    let reason =
                        format!("{}-byte payload is shorter than a request header", f.len());
                    return (frames, Some(reason));
                }
                Ok(Some(f)) => frames.push(f),
                Ok(None) => return (frames, None),
                Err(e) => return (frames, Some(e.to_string())),
            }
        }
    }

    /// Hands `frames` over to the core, to be fed in order; a corrupt frame that followed
    /// them closes the connection once they are fed.
    fn feed(&mut self, frames: Vec<Bytes>, bad: Option<String>, arrived: std::time::Instant) {
        if frames.is_empty() && bad.is_none() {
            return;
        }
        if let Some(reason) = &bad {
            tracing::info!(conn = self.id(), remote = %self.remote, "closing connection: {reason}");
        }
        let q = self.registered.q.clone();
        let bytes: usize = frames.iter().map(Bytes::len).sum();
        let batch = Handed::new(self.id(), q, frames, arrived, bad.is_some());
        let handover = if bytes >= BIG_BATCH && on_multi_thread_runtime() {
            // A big batch (a multi of thousands of operations) can hold the core for a long
            // step: the runtime hands this thread's other work, and its turn at watching the
            // sockets, to another thread meanwhile, so that `ruok` and other connections are
            // not held behind it.
            let shared = self.shared().clone();
            tokio::task::block_in_place(move || shared.requests(batch))
        } else {
            self.shared().requests(batch)
        };
        if !handover.open || bad.is_some() {
            self.feeding = false;
        }
        self.step_aside |= handover.step_aside;
    }

    /// Writes queued frames, many per system call; ready once writing is over (a close, an
    /// error, a kill, or the linger time after reading ended).
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let q = &self.registered.q;
        loop {
            if let Some(busy) = &mut self.busy {
                // Stop-the-world pause: nothing is written until it ends.
                if still_waiting(&mut busy.paused_output, cx) {
                    return park(q, cx, false);
                }
                if let Some(linger) = &mut busy.linger {
                    if linger.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(());
                    }
                }
                if still_waiting(&mut busy.hold, cx)
                    || still_waiting(&mut busy.latency, cx)
                    || still_waiting(&mut busy.durable, cx)
                {
                    return park(q, cx, false);
                }
            }
            if self.shutting_down {
                return match Pin::new(&mut self.stream).poll_shutdown(cx) {
                    Poll::Ready(_) => Poll::Ready(()),
                    Poll::Pending => park(q, cx, false),
                };
            }
            let Some(round) = self.busy.as_mut().and_then(|b| b.round.as_mut()) else {
                let mut round: Option<Round> = None;
                let synced = self.registered.shared.synced();
                match q.take_while(|out| round.get_or_insert_with(Round::default).add(out, synced))
                {
                    Taken::Killed => return Poll::Ready(()),
                    Taken::Empty => match q.park(cx.waker(), true) {
                        Parked::Waiting => return Poll::Pending,
                        Parked::Queued => continue,
                        Parked::Killed => return Poll::Ready(()),
                    },
                    Taken::Some => {}
                }
                let shared = &self.registered.shared;
                let busy = self.busy.get_or_insert_with(Box::default);
                let fault = q.net_fault();
                if fault.silences() {
                    // A blackhole or lost replies: what the server sends vanishes.
                    if let Some(round) = round.as_mut() {
                        round.discard();
                    }
                } else if fault.latency_ms > 0 {
                    busy.latency = Some(latency_end(shared, fault.latency_ms));
                }
                busy.round = round;
                if shared.gate.is_paused() {
                    busy.paused_output = Some(pause_end(shared));
                }
                continue;
            };
            while !round.batch.is_empty() {
                match poll_write_some(&mut self.stream, &mut round.batch, cx) {
                    Poll::Pending => return park(q, cx, false),
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(e)) => {
                        tracing::debug!(conn = self.registered.id, error = %e, "write failed");
                        return Poll::Ready(());
                    }
                }
            }
            let Some(busy) = &mut self.busy else {
                continue;
            };
            let Some(round) = busy.round.take() else {
                continue;
            };
            let budget = &self.registered.shared.outbound;
            q.queued
                .written(round.bytes, round.bytes - round.shared, budget);
            let then = round.then;
            drop(round);
            match then {
                Then::Next => {}
                Then::Hold(ms) => {
                    busy.hold = Some(Box::pin(tokio::time::sleep(Duration::from_millis(ms))));
                }
                Then::Durable(n) => {
                    let shared = &self.registered.shared;
                    busy.durable = shared.wait_synced(n);
                }
                Then::Close => self.shutting_down = true,
            }
        }
    }
}

/// One vectored write from the front of `batch`, dropping what was written.
fn poll_write_some(
    wr: &mut (impl AsyncWrite + Unpin),
    batch: &mut VecDeque<Bytes>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    let n = if batch.len() <= STACK_IOV {
        let mut slices = [IoSlice::new(&[]); STACK_IOV];
        ready!(poll_write_from(wr, batch, &mut slices, cx))?
    } else {
        let mut slices = vec![IoSlice::new(&[]); batch.len().min(MAX_IOV)];
        ready!(poll_write_from(wr, batch, &mut slices, cx))?
    };
    if n == 0 {
        return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
    }
    advance(batch, n);
    Poll::Ready(Ok(()))
}

/// Writes the front of `batch` through `slices` (as many buffers as it has room for).
fn poll_write_from<'a>(
    wr: &mut (impl AsyncWrite + Unpin),
    batch: &'a VecDeque<Bytes>,
    slices: &mut [IoSlice<'a>],
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    let mut k = 0;
    for (slot, b) in slices.iter_mut().zip(batch) {
        *slot = IoSlice::new(b);
        k += 1;
    }
    Pin::new(wr).poll_write_vectored(cx, &slices[..k])
}

/// Reads and discards input until EOF, for at most [`DRAIN`]. (The sink is on the heap and
/// only while draining, so that it does not take room in every connection's task.)
async fn drain(mut rd: impl AsyncRead + Unpin) {
    let mut sink = vec![0u8; 4096];
    let _ = timeout(DRAIN, async {
        loop {
            match rd.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Drops the first `n` bytes of `batch`.
fn advance(batch: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = batch.front_mut() else {
            return;
        };
        if front.len() <= n {
            n -= front.len();
            batch.pop_front();
        } else {
            front.advance(n);
            n = 0;
        }
    }
}

/// Whether the calling task runs on a multi-threaded runtime (where a blocking section can
/// hand the thread's other work over to another thread).
fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

#[cfg(test)]
mod tests {
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// What an idle connection's task holds: the future of [`run`] is no larger than the
    /// [`Conn`] it serves, and that stays small.
    #[tokio::test]
    async fn a_connection_task_is_a_few_hundred_bytes() {
        let config = crate::config::Config::default();
        let core = crate::core::Core::new(config.core_config(), 0);
        let shared = Arc::new(Shared::new(&config, 0, core, None));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (stream, remote) = listener.accept().await.expect("accept");
        let q = Arc::new(ConnQueue::default());
        let task = run(shared, 1, stream, remote, ConnChannels { q, member: 0 });
        let (task, conn) = (
            std::mem::size_of_val(&task),
            std::mem::size_of::<Conn<TcpStream>>(),
        );
        eprintln!("connection task future: {task} B, established connection: {conn} B");
        // With the runtime's task header and trailer (about 100 B, the whole aligned to
        // 128 B) this keeps an idle connection's task in one 256 B block.
        assert!(conn <= 152, "an established connection takes {conn} B");
        assert!(task <= conn + 8, "the task's future takes {task} B");
    }

    #[test]
    fn advance_drops_whole_and_partial_frames() {
        let mut b: VecDeque<Bytes> = [&b"abc"[..], b"de", b"fghij"]
            .into_iter()
            .map(Bytes::from_static)
            .collect();
        advance(&mut b, 4);
        assert_eq!(b, [Bytes::from_static(b"e"), Bytes::from_static(b"fghij")]);
        advance(&mut b, 3);
        assert_eq!(b, [Bytes::from_static(b"hij")]);
        advance(&mut b, 3);
        assert!(b.is_empty());
        advance(&mut b, 1);
    }
}
