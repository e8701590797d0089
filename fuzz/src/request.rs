//! Fuzz target: every request decoder. The input is a request payload as it follows the
//! length prefix on the wire (RequestHeader, then the body).
//!
//! Checks: no panic in any decoder; whatever decodes re-encodes to bytes that decode to the
//! same value (ConnectRequest, RequestHeader + every opcode's body, multi sub-operations).

use bytes::Bytes;
use zkd_protocol::{ConnectRequest, Jute, OpCode, Reader, Request, RequestHeader};

fn roundtrip_connect(payload: &Bytes) {
    if let Ok(req) = ConnectRequest::read(&mut Reader::new(payload.clone())) {
        let again = ConnectRequest::read(&mut Reader::new(zkd_protocol::to_bytes(&req)))
            .expect("a re-encoded ConnectRequest decodes");
        assert_eq!(req, again);
    }
}

fn roundtrip_request(op: OpCode, xid: i32, body: &Bytes) {
    let Ok(req) = Request::read(op, &mut Reader::new(body.clone())) else {
        return;
    };
    assert_eq!(req.op(), op, "decoded request reports another opcode");
    let frame = req.to_frame(xid);
    let len = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    assert_eq!(len as usize, frame.len() - 4, "frame length prefix");
    let mut r = Reader::new(frame.slice(4..));
    let header = RequestHeader::read(&mut r).expect("header decodes");
    assert_eq!((header.xid, header.op), (xid, op as i32));
    let again = Request::read(op, &mut r).expect("a re-encoded request decodes");
    assert_eq!(req, again);
    assert!(r.is_empty(), "re-encoded request has trailing bytes");
}

/// Runs one input; panics on a finding.
pub fn run(data: &[u8]) {
    let payload = Bytes::copy_from_slice(data);
    roundtrip_connect(&payload);
    let mut r = Reader::new(payload);
    let Ok(header) = RequestHeader::read(&mut r) else {
        return;
    };
    let body = r.rest();
    if let Some(op) = OpCode::from_i32(header.op) {
        roundtrip_request(op, header.xid, &body);
    }
}
