//! Length-prefixed framing, the reply envelope, and four-letter-word detection.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::four_letter::FourLetterWord;
use crate::jute::Jute;
use crate::records::ReplyHeader;

/// Default largest payload the server accepts (jute.maxbuffer).
pub const DEFAULT_MAX_FRAME: usize = 0xFFFFF;

/// Builds a frame: reserves the length, lets `body` write the payload, patches the length.
pub fn encode_frame(body: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    append_frame(&mut out, body);
    out.freeze()
}

/// Appends a frame to `out`: reserves the length, lets `body` write the payload after it,
/// patches the length.
pub fn append_frame(out: &mut BytesMut, body: impl FnOnce(&mut BytesMut)) {
    let start = out.len();
    out.put_i32(0);
    body(out);
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// A reply frame: header plus optional body (omitted by callers when `err != 0`).
pub fn reply_frame(xid: i32, zxid: i64, err: i32, body: Option<&dyn Fn(&mut BytesMut)>) -> Bytes {
    encode_frame(|out| {
        ReplyHeader { xid, zxid, err }.write(out);
        if let Some(body) = body {
            body(out);
        }
    })
}

/// A frame whose payload is one record.
pub fn record_frame<T: Jute>(v: &T) -> Bytes {
    encode_frame(|out| v.write(out))
}

/// Why a frame stream was abandoned.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {len} outside 0..={max}")]
    BadLength { len: i32, max: usize },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Splits a byte stream into payloads. Lengths below zero or above `max` are errors.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    pub max: usize,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec {
            max: DEFAULT_MAX_FRAME,
        }
    }
}

impl FrameCodec {
    /// The payload length the frame at the front of `src` claims, once its four length bytes
    /// are there; an error if it is below zero or above `max`.
    pub fn payload_len(&self, src: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(head) = src.get(..4) else {
            return Ok(None);
        };
        let len = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if len < 0 || len as usize > self.max {
            return Err(FrameError::BadLength { len, max: self.max });
        }
        Ok(Some(len as usize))
    }

    /// Takes one payload off the front of `src` if it is complete. Nothing is reserved for
    /// a partial frame: the claimed length costs no memory until its bytes arrive.
    pub fn next_frame(&self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(len) = self.payload_len(src)? else {
            return Ok(None);
        };
        if src.len() < 4 + len {
            return Ok(None);
        }
        src.advance(4);
        Ok(Some(src.split_to(len).freeze()))
    }
}

/// The four-letter words a fresh connection may send instead of a frame length, spelt out.
pub const FOUR_LETTER_WORDS: [&str; 18] = {
    let mut out = [""; 18];
    let mut i = 0;
    while i < 18 {
        out[i] = FourLetterWord::ALL[i].as_str();
        i += 1;
    }
    out
};

/// The telnet "interrupt" sequence, treated like a four-letter word that closes.
pub const TELNET_INTERRUPT: [u8; 4] = [0xff, 0xf4, 0xff, 0xfd];

/// The four-letter word spelt by a connection's first four bytes, if any.
pub fn four_letter_word(first: [u8; 4]) -> Option<&'static str> {
    if first == TELNET_INTERRUPT {
        return Some("telnet-close");
    }
    FourLetterWord::from_bytes(first).map(FourLetterWord::as_str)
}
