//! Frames built by hand for tests that send malformed or partial input; every length prefix
//! and record comes from the protocol crate's encoder.

use zkd_protocol::{encode_frame, frame::record_frame, ConnectRequest};

/// `len` deterministic pseudo-random bytes from `seed` (xorshift64; a seed of 0 gives
/// zeros): garbage to send, or data to checksum.
pub fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

/// `payload` with its 4-byte big-endian length in front.
pub fn framed(payload: &[u8]) -> Vec<u8> {
    encode_frame(|out| out.extend_from_slice(payload)).to_vec()
}

/// A ConnectRequest frame for a new session (45-byte payload, with the readOnly byte).
pub fn connect_request(timeout_ms: i32) -> Vec<u8> {
    record_frame(&ConnectRequest::new_session(timeout_ms)).to_vec()
}

/// A request frame: xid, opcode, then `body` as given (possibly not a valid record).
pub fn request(xid: i32, op: i32, body: &[u8]) -> Vec<u8> {
    encode_frame(|out| {
        out.extend_from_slice(&xid.to_be_bytes());
        out.extend_from_slice(&op.to_be_bytes());
        out.extend_from_slice(body);
    })
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_request_has_the_45_byte_payload() {
        let f = connect_request(30_000);
        assert_eq!(f.len(), 49);
        assert_eq!(&f[..4], &45i32.to_be_bytes());
        assert_eq!(&f[16..20], &30_000i32.to_be_bytes());
        assert_eq!(f[48], 0);
    }

    #[test]
    fn request_frames_xid_op_and_body() {
        assert_eq!(
            request(-2, 11, &[7]),
            vec![0, 0, 0, 9, 255, 255, 255, 254, 0, 0, 0, 11, 7]
        );
        assert_eq!(framed(&[]), vec![0, 0, 0, 0]);
    }
}
