//! Framing: frames split at any point come out whole and in order; bad lengths are errors.

use bytes::BufMut;

use super::*;
use crate::frame::{
    encode_frame, four_letter_word, record_frame, reply_frame, FrameCodec, FrameError,
    DEFAULT_MAX_FRAME, FOUR_LETTER_WORDS, TELNET_INTERRUPT,
};

fn frame_of(payload: &[u8]) -> Bytes {
    encode_frame(|out| out.put_slice(payload))
}

fn length_prefix(len: i32, tail: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i32(len);
    b.put_slice(tail);
    b
}

proptest! {
    #[test]
    fn frames_split_at_random_points(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..10),
        chunk_sizes in prop::collection::vec(1usize..80, 1..20),
    ) {
        let codec = FrameCodec::default();
        let stream: Vec<u8> = payloads.iter().flat_map(|p| frame_of(p).to_vec()).collect();
        // Where each frame ends in the stream: it may come out only once that byte arrived.
        let ends: Vec<usize> = payloads
            .iter()
            .scan(0, |end, p| {
                *end += 4 + p.len();
                Some(*end)
            })
            .collect();

        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        let mut fed = 0;
        for size in chunk_sizes.iter().cycle() {
            if fed == stream.len() {
                break;
            }
            let next = (fed + size).min(stream.len());
            buf.extend_from_slice(&stream[fed..next]);
            fed = next;
            while let Some(frame) = codec.next_frame(&mut buf).unwrap() {
                got.push(frame);
            }
            let complete = ends.iter().filter(|&&end| end <= fed).count();
            prop_assert_eq!(got.len(), complete);
        }
        prop_assert_eq!(got.len(), payloads.len());
        for (frame, payload) in got.iter().zip(&payloads) {
            prop_assert_eq!(&frame[..], &payload[..]);
        }
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn negative_length_is_an_error(len in i32::MIN..0, tail in prop::collection::vec(any::<u8>(), 0..16)) {
        // Refused as soon as the length is known, without waiting for a body.
        let codec = FrameCodec::default();
        let res = codec.next_frame(&mut length_prefix(len, &tail));
        prop_assert!(
            matches!(res, Err(FrameError::BadLength { len: l, max }) if l == len && max == DEFAULT_MAX_FRAME),
            "{:?}", res
        );
    }

    #[test]
    fn length_above_max_is_an_error(
        (max, len) in (0usize..5000).prop_flat_map(|max| (Just(max), (max as i32 + 1)..=i32::MAX)),
        tail in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let codec = FrameCodec { max };
        let res = codec.next_frame(&mut length_prefix(len, &tail));
        prop_assert!(matches!(res, Err(FrameError::BadLength { len: l, max: m }) if l == len && m == max), "{:?}", res);
    }

    #[test]
    fn length_of_exactly_max_is_accepted(max in 0usize..5000, byte in any::<u8>()) {
        let codec = FrameCodec { max };
        let payload = vec![byte; max];
        let mut buf = BytesMut::from(&frame_of(&payload)[..]);
        // Not yet complete: waits.
        let mut partial = buf.clone();
        partial.truncate(partial.len() - 1);
        prop_assert!(codec.next_frame(&mut partial).unwrap().is_none());
        let frame = codec.next_frame(&mut buf).unwrap().unwrap();
        prop_assert_eq!(&frame[..], &payload[..]);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn short_length_prefix_waits(bytes in prop::collection::vec(any::<u8>(), 0..4)) {
        let mut buf = BytesMut::from(&bytes[..]);
        prop_assert!(FrameCodec::default().next_frame(&mut buf).unwrap().is_none());
        prop_assert_eq!(&buf[..], &bytes[..]);
    }

    #[test]
    fn reply_frame_layout(
        header in gen::<ReplyHeader>(),
        body in prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
    ) {
        let frame = match &body {
            Some(b) => {
                let write = |out: &mut BytesMut| out.put_slice(b);
                reply_frame(header.xid, header.zxid, header.err, Some(&write))
            }
            None => reply_frame(header.xid, header.zxid, header.err, None),
        };
        let payload = FrameCodec::default()
            .next_frame(&mut BytesMut::from(&frame[..]))
            .unwrap()
            .unwrap();
        let mut r = Reader::new(payload);
        prop_assert_eq!(ReplyHeader::read(&mut r).unwrap(), header);
        prop_assert_eq!(r.rest().to_vec(), body.unwrap_or_default());
    }

    #[test]
    fn record_frame_layout(stat in gen::<Stat>()) {
        let frame = record_frame(&stat);
        prop_assert_eq!(&frame[..4], &68i32.to_be_bytes()[..]);
        prop_assert_eq!(&frame[4..], &crate::to_bytes(&stat)[..]);
    }
}

#[test]
fn default_max_is_jute_maxbuffer() {
    assert_eq!(DEFAULT_MAX_FRAME, 1_048_575);
    let codec = FrameCodec::default();
    let payload = vec![7u8; DEFAULT_MAX_FRAME];
    let mut buf = BytesMut::from(&frame_of(&payload)[..]);
    assert_eq!(
        codec.next_frame(&mut buf).unwrap().unwrap().len(),
        DEFAULT_MAX_FRAME
    );
    let mut buf = length_prefix(DEFAULT_MAX_FRAME as i32 + 1, &[]);
    assert!(matches!(
        codec.next_frame(&mut buf),
        Err(FrameError::BadLength { len: 0x100000, .. })
    ));
}

#[test]
fn zero_length_frame_is_a_frame() {
    // Length 0 is a valid frame; rejecting a payload shorter than a header is the caller's job.
    let mut buf = BytesMut::from(&[0u8, 0, 0, 0, 0, 0][..]);
    let frame = FrameCodec::default().next_frame(&mut buf).unwrap().unwrap();
    assert!(frame.is_empty());
    assert_eq!(buf.len(), 2);
}

#[test]
fn four_letter_words() {
    for word in FOUR_LETTER_WORDS {
        let first: [u8; 4] = word.as_bytes().try_into().unwrap();
        assert_eq!(four_letter_word(first), Some(word));
        // The word read as a frame length is way above the maximum.
        assert!(i32::from_be_bytes(first) as usize > DEFAULT_MAX_FRAME);
    }
    assert_eq!(four_letter_word(TELNET_INTERRUPT), Some("telnet-close"));
    assert_eq!(four_letter_word(45i32.to_be_bytes()), None);
    assert_eq!(four_letter_word(*b"RUOK"), None);
    assert_eq!(four_letter_word(*b"kill"), None);
}

#[test]
fn a_claimed_length_reserves_nothing() {
    let codec = FrameCodec {
        max: i32::MAX as usize,
    };
    let mut b = length_prefix(i32::MAX, b"abc");
    let before = b.capacity();
    assert!(codec.next_frame(&mut b).unwrap().is_none());
    assert_eq!(
        b.capacity(),
        before,
        "the partial frame's length was reserved"
    );
    assert_eq!(codec.payload_len(&b).unwrap(), Some(i32::MAX as usize));
    assert_eq!(codec.payload_len(&b[..3]).unwrap(), None);
    assert!(FrameCodec::default().payload_len(&b).is_err());
}
