//! The byte examples observed on a real server and quoted in docs/protocol.md ("Byte examples"):
//! decoded, checked field by field, and re-encoded to the identical bytes.

mod common;

use bytes::{Bytes, BytesMut};
use common::{hex, payload_of, unhex};
use zkd_protocol::frame::record_frame;
use zkd_protocol::*;

const CONNECT_REQUEST: &str = "0000002d 00000000 0000000000000000 00007530 0000000000000000 \
     00000010 00000000000000000000000000000000 00";
const CONNECT_RESPONSE: &str =
    "00000025 00000000 00007530 010000124fae000a 00000010 02fe800d9dff67dbae8ef9dee4023893 00";
const CREATE_REQUEST: &str = "00000033 00000001 00000001 | 00000003 2f6878 | 00000001 76 | \
     00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65 | 00000001";
const CREATE_REPLY: &str = "00000017 00000001 000000000000002b 00000000 | 00000003 2f6878";
const GET_DATA_REQUEST: &str = "00000010 00000002 00000004 00000003 2f6878 01";
const NOTIFICATION: &str =
    "0000001f ffffffff ffffffffffffffff 00000000 | 00000003 00000003 00000003 2f6878";
const PING: &str = "00000008 fffffffe 0000000b";
const PING_REPLY: &str = "00000010 fffffffe 000000000000002c 00000000";

/// Decodes a whole request frame: header, then the body by opcode; checks every byte is used.
/// The request frame `text` (hex) decodes to `header` and `req`, and encodes back to itself.
fn request_round_trip(text: &str, header: RequestHeader, req: Request) {
    let frame = unhex(text);
    assert_eq!(read_request(&frame), (header.clone(), req.clone()));
    assert_eq!(hex(&req.to_frame(header.xid)), hex(&frame));
}

fn read_request(frame: &[u8]) -> (RequestHeader, Request) {
    let mut r = Reader::new(payload_of(frame));
    let header = RequestHeader::read(&mut r).unwrap();
    let op = OpCode::from_i32(header.op).expect("known opcode");
    let req = Request::read(op, &mut r).expect("a request");
    assert!(
        r.is_empty(),
        "request body has {} bytes left",
        r.remaining()
    );
    (header, req)
}

/// Decodes a whole reply frame to a request with opcode `op`.
fn read_reply_frame(frame: &[u8], op: OpCode) -> (ReplyHeader, Option<Response>) {
    let mut r = Reader::new(payload_of(frame));
    let reply = read_reply(op, &mut r).unwrap();
    assert!(r.is_empty(), "reply body has {} bytes left", r.remaining());
    reply
}

fn reply_to_frame(h: &ReplyHeader, body: Option<&Response>) -> Bytes {
    match body {
        Some(body) => {
            let write = |out: &mut BytesMut| body.write(out);
            reply_frame(h.xid, h.zxid, h.err, Some(&write))
        }
        None => reply_frame(h.xid, h.zxid, h.err, None),
    }
}

#[test]
fn handshake_request() {
    let frame = unhex(CONNECT_REQUEST);
    let req = ConnectRequest::read(&mut Reader::new(payload_of(&frame))).unwrap();
    assert_eq!(req, ConnectRequest::new_session(30000));
    assert_eq!(hex(&record_frame(&req)), hex(&frame));
}

#[test]
fn handshake_response() {
    let frame = unhex(CONNECT_RESPONSE);
    let resp = ConnectResponse::read(&mut Reader::new(payload_of(&frame))).unwrap();
    assert_eq!(
        resp,
        ConnectResponse {
            protocol_version: 0,
            timeout: 30000,
            session_id: 0x0100_0012_4fae_000a,
            passwd: unhex("02fe800d9dff67dbae8ef9dee4023893"),
            read_only: Some(false),
        }
    );
    assert_eq!(hex(&record_frame(&resp)), hex(&frame));
}

#[test]
fn handshake_without_read_only_byte() {
    // An old client omits the flag (44-byte payload); the reply then omits it too (36 bytes).
    let request = payload_of(&unhex(CONNECT_REQUEST));
    let old_request = request.slice(..request.len() - 1);
    let req = ConnectRequest::read(&mut Reader::new(old_request.clone())).unwrap();
    assert_eq!(req.read_only, None);
    assert_eq!(hex(&to_bytes(&req)), hex(&old_request));

    let response = payload_of(&unhex(CONNECT_RESPONSE));
    let resp = ConnectResponse::read(&mut Reader::new(response.clone())).unwrap();
    let old_resp = ConnectResponse {
        read_only: req.read_only,
        ..resp
    };
    let old_response = to_bytes(&old_resp);
    assert_eq!(old_response.len(), 36);
    assert_eq!(hex(&old_response), hex(&response[..36]));
}

#[test]
fn create_request() {
    let create = Request::Create(Create {
        op: OpCode::Create,
        path: "/hx".into(),
        data: Some(Bytes::from_static(b"v")),
        acl: Acl::open_unsafe(),
        flags: CreateMode::Ephemeral.flags(),
        ttl: -1,
    });
    request_round_trip(CREATE_REQUEST, RequestHeader { xid: 1, op: 1 }, create);
}

#[test]
fn create_reply() {
    let frame = unhex(CREATE_REPLY);
    let (header, body) = read_reply_frame(&frame, OpCode::Create);
    assert_eq!(
        header,
        ReplyHeader {
            xid: 1,
            zxid: 0x2b,
            err: 0
        }
    );
    let body = body.expect("a body");
    assert_eq!(
        body,
        Response::Create(CreateResponse { path: "/hx".into() })
    );
    assert_eq!(hex(&reply_to_frame(&header, Some(&body))), hex(&frame));
}

#[test]
fn get_data_request() {
    let get = Request::GetData(PathWatchRequest {
        path: "/hx".into(),
        watch: true,
    });
    request_round_trip(GET_DATA_REQUEST, RequestHeader { xid: 2, op: 4 }, get);
}

#[test]
fn notification() {
    let frame = unhex(NOTIFICATION);
    let mut r = Reader::new(payload_of(&frame));
    let header = ReplyHeader::read(&mut r).unwrap();
    let event = WatcherEvent::read(&mut r).unwrap();
    assert!(r.is_empty());
    assert_eq!(
        header,
        ReplyHeader {
            xid: xid::NOTIFICATION,
            zxid: -1,
            err: 0
        }
    );
    assert_eq!(
        event,
        WatcherEvent {
            event_type: event_type::NODE_DATA_CHANGED,
            state: keeper_state::SYNC_CONNECTED,
            path: "/hx".into(),
        }
    );
    let write = |out: &mut BytesMut| event.write(out);
    let again = reply_frame(header.xid, header.zxid, header.err, Some(&write));
    assert_eq!(hex(&again), hex(&frame));
}

#[test]
fn ping_and_reply() {
    let frame = unhex(PING);
    let (header, req) = read_request(&frame);
    assert_eq!(
        header,
        RequestHeader {
            xid: xid::PING,
            op: 11
        }
    );
    assert_eq!(req, Request::Ping);
    assert_eq!(hex(&req.to_frame(xid::PING)), hex(&frame));

    let frame = unhex(PING_REPLY);
    let (header, body) = read_reply_frame(&frame, OpCode::Ping);
    assert_eq!(
        header,
        ReplyHeader {
            xid: xid::PING,
            zxid: 0x2c,
            err: 0
        }
    );
    assert_eq!(body, Some(Response::Empty));
    assert_eq!(
        hex(&reply_frame(header.xid, header.zxid, header.err, None)),
        hex(&frame)
    );
}

#[test]
fn client_stream_in_one_read() {
    // The client's frames back to back, as they may arrive in one segment.
    let stream: Vec<u8> = [CONNECT_REQUEST, CREATE_REQUEST, GET_DATA_REQUEST, PING]
        .iter()
        .flat_map(|s| unhex(s).to_vec())
        .collect();
    let mut buf = BytesMut::from(&stream[..]);
    let codec = FrameCodec::default();
    let mut lengths = Vec::new();
    while let Some(frame) = codec.next_frame(&mut buf).unwrap() {
        lengths.push(frame.len());
    }
    assert_eq!(lengths, [45, 51, 16, 8]);
    assert!(buf.is_empty());
}
