//! Fuzz target: the frame splitter and four-letter-word detection fed an arbitrary byte
//! stream, delivered in arbitrary chunk sizes.
//!
//! Input: byte 0 picks the frame size cap, byte 1 the chunk size, the rest is the stream.
//! Checks: no panic; every frame returned is within the cap; the frames returned, with their
//! length prefixes, are exactly the start of the stream; an error is returned only for a
//! length prefix outside `0..=cap`.

use bytes::BytesMut;
use zkd_protocol::{four_letter_word, FrameCodec, FrameError};

const CAPS: [usize; 6] = [0, 1, 4, 16, 1000, 0xFFFFF];

/// Runs one input; panics on a finding.
pub fn run(data: &[u8]) {
    let (Some(&cap), Some(&chunk)) = (data.first(), data.get(1)) else {
        return;
    };
    let stream = &data[2..];
    if stream.len() >= 4 {
        let _ = four_letter_word([stream[0], stream[1], stream[2], stream[3]]);
    }
    let codec = FrameCodec {
        max: CAPS[cap as usize % CAPS.len()],
    };
    let chunk = if chunk == 0 {
        stream.len().max(1)
    } else {
        chunk as usize
    };
    let mut src = BytesMut::new();
    let mut consumed = 0usize;
    'feed: for piece in stream.chunks(chunk) {
        src.extend_from_slice(piece);
        loop {
            match codec.next_frame(&mut src) {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= codec.max, "frame over the cap");
                    let prefix = (frame.len() as u32).to_be_bytes();
                    assert_eq!(&stream[consumed..consumed + 4], &prefix, "length prefix");
                    consumed += 4;
                    assert_eq!(&stream[consumed..consumed + frame.len()], &frame[..]);
                    consumed += frame.len();
                }
                Ok(None) => {
                    assert!(
                        src.len() < 4
                            || (i32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize)
                                > src.len() - 4,
                        "a complete frame was not returned"
                    );
                    break;
                }
                Err(FrameError::BadLength { len, max }) => {
                    assert!(len < 0 || len as usize > max, "valid length {len} rejected");
                    break 'feed;
                }
                Err(e) => panic!("unexpected frame error {e}"),
            }
        }
    }
    assert_eq!(consumed + src.len(), stream.len().min(consumed + src.len()));
}
