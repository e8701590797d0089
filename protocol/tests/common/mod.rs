//! Helpers shared by the byte-level tests.

#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use zkd_protocol::FrameCodec;

/// Parses hex, ignoring whitespace and `|` separators.
pub fn unhex(s: &str) -> Bytes {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'|')
        .collect();
    let pairs = digits.chunks_exact(2);
    assert!(
        pairs.remainder().is_empty(),
        "odd number of hex digits in {s:?}"
    );
    pairs
        .map(|pair| {
            let pair = std::str::from_utf8(pair).expect("ascii");
            u8::from_str_radix(pair, 16).unwrap_or_else(|_| panic!("bad hex {pair:?} in {s:?}"))
        })
        .collect::<Vec<u8>>()
        .into()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The payload of a byte string that must be exactly one whole frame.
pub fn payload_of(frame: &[u8]) -> Bytes {
    let mut buf = BytesMut::from(frame);
    let payload = FrameCodec::default()
        .next_frame(&mut buf)
        .expect("a valid frame length")
        .expect("a complete frame");
    assert!(
        buf.is_empty(),
        "{} bytes after the frame {}",
        buf.len(),
        hex(frame)
    );
    payload
}
