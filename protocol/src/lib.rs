//! The ZooKeeper client wire protocol (Jute) as plain Rust types: records, requests,
//! multi, framing and four-letter-word detection. No I/O.

#![forbid(unsafe_code)]

pub mod consts;
pub mod create;
pub mod disk;
pub mod four_letter;
pub mod frame;
pub mod jute;
pub mod multi;
pub mod opcode;
pub mod records;
pub mod request;
pub mod response;

#[cfg(test)]
mod tests;

/// Used by `record!` so that callers need no direct `bytes` dependency.
#[doc(hidden)]
pub use bytes as __bytes;

pub use consts::*;
pub use create::Create;
pub use four_letter::FourLetterWord;
pub use frame::{encode_frame, four_letter_word, reply_frame, FrameCodec, FrameError};
pub use jute::{from_bytes, to_bytes, DecodeError, Jute, Reader};
pub use multi::{MultiOp, MultiResponse, MultiResult};
pub use opcode::{
    FollowerAnswers, LatencyGroup, OpClass, OpCode, OpInfo, PathAt, ReadScope, ReplyBody,
    WatchEffect,
};
pub use records::*;
pub use request::Request;
pub use response::{read_reply, Response};
