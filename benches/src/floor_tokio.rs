//! The throughput floor on tokio: a bare server with zkd's runtime (tokio, multi-threaded,
//! one worker per CPU), zkd's connection shape and flush policy, and no tree. One task per
//! connection reads what the socket has, cuts the complete frames off its buffer as zkd's
//! input buffer does (the length checked by the protocol crate's `FrameCodec`, each payload
//! copied into an allocation of its own), answers each with [`crate::floor_reply`] into a
//! queue of reply frames, and writes the queue with vectored writes (at most 1024 frames a
//! call, as zkd). What zkd does beyond this is its own work: the tree, sessions, watches,
//! the core and the handing of requests to it.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zkd_protocol::FrameCodec;

use crate::floor_reply::{After, Replies, Session};

/// Most frames handed to one vectored write (zkd's limit, Linux's IOV_MAX).
const MAX_IOV: usize = 1024;
/// Up to this many frames, a vectored write's list is on the stack (as zkd's).
const STACK_IOV: usize = 64;
/// A connection's input buffer: initial capacity and growth step (zkd's).
const READ_MIN: usize = 1024;
const READ_CHUNK: usize = 8 * 1024;
/// The largest frame accepted (zkd's default `jute.maxbuffer`).
const MAX_FRAME: usize = 0xfffff;

/// Binds `127.0.0.1:0` and serves on a multi-threaded runtime of its own (on a thread of its
/// own) until the process ends. Returns the address.
pub fn start(value_size: usize) -> io::Result<SocketAddr> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    let replies = Arc::new(Replies::new(value_size));
    std::thread::Builder::new()
        .name("floor-tokio".into())
        .spawn(move || runtime.block_on(accept_loop(listener, replies)))?;
    Ok(addr)
}

async fn accept_loop(listener: TcpListener, replies: Arc<Replies>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, replies.clone()));
            }
            Err(e) => {
                eprintln!("zkd-bench: tokio floor: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// One connection: read, answer every complete frame, write the replies; until EOF, an
/// error, a frame that does not decode, or a closeSession.
async fn serve(mut stream: TcpStream, replies: Arc<Replies>) {
    let codec = FrameCodec { max: MAX_FRAME };
    let mut input: Vec<u8> = Vec::with_capacity(READ_MIN);
    let mut start = 0;
    let mut session = Session::default();
    let mut encoded = BytesMut::new();
    let mut queue: VecDeque<Bytes> = VecDeque::new();
    loop {
        make_room(&mut input, &mut start);
        match stream.read_buf(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut after = After::Continue;
        while after == After::Continue {
            let Some(payload) = next_frame(&codec, &mut input, &mut start) else {
                break;
            };
            let Ok(payload) = payload else { return };
            match replies.answer(&mut session, payload, &mut encoded) {
                Ok(a) => after = a,
                Err(_) => return,
            }
            queue.push_back(encoded.split().freeze());
        }
        if write_queue(&mut stream, &mut queue).await.is_err() {
            return;
        }
        if after == After::Close {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// Takes the next complete frame's payload off `input[*start..]`, copied into its own
/// allocation (as zkd's input buffer does); `Some(Err)` for a bad length.
fn next_frame(
    codec: &FrameCodec,
    input: &mut Vec<u8>,
    start: &mut usize,
) -> Option<Result<Bytes, ()>> {
    let unread = &input[*start..];
    let len = match codec.payload_len(unread) {
        Ok(Some(len)) => len,
        Ok(None) => return None,
        Err(_) => return Some(Err(())),
    };
    if unread.len() < 4 + len {
        return None;
    }
    let payload = Bytes::copy_from_slice(&unread[4..4 + len]);
    *start += 4 + len;
    if *start == input.len() {
        input.clear();
        *start = 0;
    }
    Some(Ok(payload))
}

/// Room for the next read: the consumed prefix dropped, the buffer grown when full.
fn make_room(input: &mut Vec<u8>, start: &mut usize) {
    if *start > 0 && input.capacity() - input.len() < READ_MIN / 4 {
        input.drain(..*start);
        *start = 0;
    }
    if input.capacity() - input.len() < READ_MIN / 4 {
        let grow = input.capacity().max(READ_CHUNK);
        input.reserve(grow);
    }
}

/// Writes every queued frame, at most [`MAX_IOV`] per vectored write.
async fn write_queue(stream: &mut TcpStream, queue: &mut VecDeque<Bytes>) -> io::Result<()> {
    while !queue.is_empty() {
        // Up to STACK_IOV frames the list is on the stack, as zkd's.
        let mut n = if queue.len() <= STACK_IOV {
            let mut slices = [IoSlice::new(&[]); STACK_IOV];
            for (s, b) in slices.iter_mut().zip(queue.iter()) {
                *s = IoSlice::new(b);
            }
            stream.write_vectored(&slices[..queue.len()]).await?
        } else {
            let slices: Vec<IoSlice<'_>> = queue
                .iter()
                .take(MAX_IOV)
                .map(|b| IoSlice::new(b))
                .collect();
            stream.write_vectored(&slices).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let Some(front) = queue.front_mut() else {
                break;
            };
            if n >= front.len() {
                n -= front.len();
                queue.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
    Ok(())
}
