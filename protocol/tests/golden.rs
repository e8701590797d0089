//! Golden frames captured from real ZooKeeper servers (`scripts/capture-fixtures.py` writes
//! `tests/fixtures/*.hex` from 3.8.0 and `tests/fixtures/3.9.3/*.hex` from 3.9.3); every
//! fixture test runs on the captures of both releases and knows which one it reads. Every frame is decoded according to its place in the exchange,
//! re-encoded, and compared byte for byte with the capture; the values each capture is known
//! to hold are checked as well.
//!
//! File format: `#` comment lines, then one frame per line, `>` (sent by the client) or `<`
//! (received), optionally preceded by a connection label (`A>`, `B<`), a space, and the hex
//! of the whole frame including its 4-byte length.

mod common;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use common::{hex, payload_of, unhex};
use zkd_protocol::frame::record_frame;
use zkd_protocol::*;

/// The releases captured: 3.8.0's fixtures are in `tests/fixtures`, the others' in a
/// directory named after the release below it.
const RELEASES: [&str; 2] = ["3.8.0", "3.9.3"];

fn fixture_dir(release: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    match release {
        "3.8.0" => root,
        other => root.join(other),
    }
}

/// One captured frame, decoded.
#[derive(Debug, Clone)]
struct Entry {
    /// Connection label ("" when the fixture has a single connection).
    conn: String,
    /// Sent by the client (true) or received from the server.
    sent: bool,
    line: usize,
    frame: Bytes,
    decoded: Decoded,
}

#[derive(Debug, Clone)]
enum Decoded {
    ConnectRequest(ConnectRequest),
    ConnectResponse(ConnectResponse),
    /// `body` is `None` when the opcode is not a client request (the body is then kept raw).
    Request {
        header: RequestHeader,
        body: Option<Request>,
    },
    /// A reply to the request `op` of the same connection; no body when `err != 0`.
    Reply {
        header: ReplyHeader,
        op: i32,
        body: Option<Response>,
    },
    Notification {
        header: ReplyHeader,
        event: WatcherEvent,
    },
}

/// What is known about a connection while walking a fixture.
#[derive(Default)]
struct ConnState {
    connect: Option<ConnectRequest>,
    connected: bool,
    pending: VecDeque<RequestHeader>,
}

fn parse_lines(path: &Path) -> Vec<(usize, String, bool, Bytes)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (tag, data) = line
            .split_once(char::is_whitespace)
            .unwrap_or_else(|| panic!("{}:{}: no frame after the tag", path.display(), i + 1));
        let (conn, dir) = tag.split_at(tag.len() - 1);
        let sent = match dir {
            ">" => true,
            "<" => false,
            _ => panic!("{}:{}: bad tag {tag:?}", path.display(), i + 1),
        };
        out.push((i + 1, conn.to_string(), sent, unhex(data)));
    }
    out
}

fn reply_to_frame(h: &ReplyHeader, body: impl Fn(&mut BytesMut)) -> Bytes {
    reply_frame(h.xid, h.zxid, h.err, Some(&body))
}

/// Decodes every frame of a fixture, checking that each decode uses exactly the frame's bytes
/// and that re-encoding the decoded value gives the captured frame back.
fn load(release: &str, name: &str) -> Vec<Entry> {
    let path = fixture_dir(release).join(name);
    assert!(
        path.exists(),
        "fixture {} is missing: capture it from a real ZooKeeper with \
         scripts/capture-fixtures.py HOST:PORT (see tests/fixtures/README.md)",
        path.display()
    );
    decode_file(&path)
}

fn decode_file(path: &Path) -> Vec<Entry> {
    let mut conns: HashMap<String, ConnState> = HashMap::new();
    let mut entries = Vec::new();
    for (line, conn, sent, frame) in parse_lines(path) {
        let at = format!("{}:{line}", path.display());
        let state = conns.entry(conn.clone()).or_default();
        let payload = payload_of(&frame);
        let mut r = Reader::new(payload.clone());
        let (decoded, again) = if sent && state.connect.is_none() {
            let req = ConnectRequest::read(&mut r).unwrap_or_else(|e| panic!("{at}: {e}"));
            let again = record_frame(&req);
            state.connect = Some(req.clone());
            (Decoded::ConnectRequest(req), again)
        } else if !sent && !state.connected {
            let req = state
                .connect
                .as_ref()
                .unwrap_or_else(|| panic!("{at}: a reply before the ConnectRequest"));
            let resp = ConnectResponse::read(&mut r).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(
                resp.read_only.is_some(),
                req.read_only.is_some(),
                "{at}: the readOnly byte is in the response iff it is in the request"
            );
            state.connected = true;
            let again = record_frame(&resp);
            (Decoded::ConnectResponse(resp), again)
        } else if sent {
            let header = RequestHeader::read(&mut r).unwrap_or_else(|e| panic!("{at}: {e}"));
            let body = match OpCode::from_i32(header.op).map(|op| Request::read(op, &mut r)) {
                None | Some(Err(DecodeError::NotARequest(_))) => None,
                Some(Ok(req)) => Some(req),
                Some(Err(e)) => panic!("{at}: {e}"),
            };
            let again = match &body {
                Some(req) => {
                    assert_eq!(req.op() as i32, header.op, "{at}");
                    req.to_frame(header.xid)
                }
                None => {
                    // Not a request opcode: the body is kept as it is.
                    let raw = r.rest();
                    encode_frame(|out| {
                        header.write(out);
                        out.extend_from_slice(&raw);
                    })
                }
            };
            state.pending.push_back(header.clone());
            (Decoded::Request { header, body }, again)
        } else {
            let header = ReplyHeader::read(&mut r).unwrap_or_else(|e| panic!("{at}: {e}"));
            if header.xid == xid::NOTIFICATION {
                let event = WatcherEvent::read(&mut r).unwrap_or_else(|e| panic!("{at}: {e}"));
                let again = reply_to_frame(&header, |out| event.write(out));
                (Decoded::Notification { header, event }, again)
            } else {
                let request = state
                    .pending
                    .pop_front()
                    .unwrap_or_else(|| panic!("{at}: a reply with no request outstanding"));
                let expected_xid = if request.op == OpCode::Ping as i32 {
                    xid::PING
                } else {
                    request.xid
                };
                assert_eq!(header.xid, expected_xid, "{at}: reply xid");
                let body = if header.err != 0 {
                    None
                } else {
                    let op = OpCode::from_i32(request.op)
                        .unwrap_or_else(|| panic!("{at}: success reply to opcode {}", request.op));
                    let body = Response::read(op, &mut r)
                        .unwrap_or_else(|| panic!("{at}: success reply to {op:?}"));
                    Some(body.unwrap_or_else(|e| panic!("{at}: {e}")))
                };
                let again = match &body {
                    Some(body) => reply_to_frame(&header, |out| body.write(out)),
                    None => reply_frame(header.xid, header.zxid, header.err, None),
                };
                let op = request.op;
                (Decoded::Reply { header, op, body }, again)
            }
        };
        assert!(
            r.is_empty(),
            "{at}: {} bytes left after decoding {decoded:?}",
            r.remaining()
        );
        assert_eq!(hex(&again), hex(&frame), "{at}: re-encoded {decoded:?}");
        entries.push(Entry {
            conn,
            sent,
            line,
            frame,
            decoded,
        });
    }
    entries
}

/// The requests (sent) and replies (received) of one connection, in order.
fn requests(entries: &[Entry], conn: &str) -> Vec<(RequestHeader, Option<Request>)> {
    entries
        .iter()
        .filter(|e| e.conn == conn)
        .filter_map(|e| match &e.decoded {
            Decoded::Request { header, body } => Some((header.clone(), body.clone())),
            _ => None,
        })
        .collect()
}

fn replies(entries: &[Entry], conn: &str) -> Vec<(ReplyHeader, i32, Option<Response>)> {
    entries
        .iter()
        .filter(|e| e.conn == conn)
        .filter_map(|e| match &e.decoded {
            Decoded::Reply { header, op, body } => Some((header.clone(), *op, body.clone())),
            _ => None,
        })
        .collect()
}

/// The handshake every connection of the later fixtures starts with.
/// The entries of a one-connection fixture whose session starts with the standard handshake
/// (readOnly byte false), and its `count` requests.
fn one_session(
    release: &str,
    name: &str,
    count: usize,
) -> (Vec<Entry>, Vec<(RequestHeader, Option<Request>)>) {
    let entries = load(release, name);
    check_standard_handshake(&entries, "", Some(false));
    let reqs = requests(&entries, "");
    assert_eq!(reqs.len(), count, "requests in {name}");
    (entries, reqs)
}

/// An error reply: no body, the last frame only its length and the 16-byte reply header.
fn header_only(entries: &[Entry], body: &Option<Response>) {
    assert_eq!(*body, None);
    assert_eq!(entries.last().unwrap().frame.len(), 20);
}

/// Reply `index` of the `count` replies of a one-connection fixture.
fn reply_of(entries: &[Entry], count: usize, index: usize) -> (ReplyHeader, i32, Option<Response>) {
    let mut reps = replies(entries, "");
    assert_eq!(reps.len(), count);
    reps.swap_remove(index)
}

fn check_standard_handshake(entries: &[Entry], conn: &str, read_only: Option<bool>) {
    let mine: Vec<&Entry> = entries.iter().filter(|e| e.conn == conn).collect();
    assert!(mine.len() >= 2, "connection {conn:?} has no handshake");
    match &mine[0].decoded {
        Decoded::ConnectRequest(req) => {
            assert!(mine[0].sent);
            assert_eq!(
                *req,
                ConnectRequest {
                    read_only,
                    ..ConnectRequest::new_session(30000)
                }
            );
            let payload = 44 + usize::from(read_only.is_some());
            assert_eq!(mine[0].frame.len(), 4 + payload);
        }
        other => panic!(
            "line {}: expected a ConnectRequest, got {other:?}",
            mine[0].line
        ),
    }
    match &mine[1].decoded {
        Decoded::ConnectResponse(resp) => {
            assert!(!mine[1].sent);
            assert_eq!(resp.protocol_version, 0);
            // 30000 is within the default 4000..=40000 (tickTime 2000).
            assert_eq!(resp.timeout, 30000);
            assert_ne!(resp.session_id, 0);
            assert_eq!(resp.passwd.len(), 16);
            assert_eq!(resp.read_only, read_only.map(|_| false));
            let payload = 36 + usize::from(read_only.is_some());
            assert_eq!(mine[1].frame.len(), 4 + payload);
        }
        other => panic!(
            "line {}: expected a ConnectResponse, got {other:?}",
            mine[1].line
        ),
    }
}

fn world_anyone_create(op: OpCode, path: &str, data: Option<&'static [u8]>) -> Request {
    Request::Create(Create {
        op,
        path: path.into(),
        data: data.map(Bytes::from_static),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: -1,
    })
}

/// The (MultiHeader type, MultiHeader err) pairs of a multi reply, read straight off the bytes.
fn multi_result_headers(payload: Bytes) -> Vec<(i32, i32)> {
    let mut r = Reader::new(payload);
    ReplyHeader::read(&mut r).unwrap();
    let mut out = Vec::new();
    loop {
        let h = MultiHeader::read(&mut r).unwrap();
        if h.done {
            assert_eq!(
                h,
                MultiHeader {
                    op: -1,
                    done: true,
                    err: -1
                }
            );
            assert!(r.is_empty());
            return out;
        }
        assert_eq!(h.op, -1, "only error results expected");
        assert_eq!(ErrorResponse::read(&mut r).unwrap().err, h.err);
        out.push((h.op, h.err));
    }
}

#[test]
fn fixtures_present() {
    for release in RELEASES {
        let dir = fixture_dir(release);
        let files = hex_files(release);
        assert!(
            files.len() >= 9,
            "no *.hex fixtures in {}: capture them from a real ZooKeeper with \
         scripts/capture-fixtures.py HOST:PORT",
            dir.display()
        );
    }
}

fn hex_files(release: &str) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(fixture_dir(release)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "hex"))
        .collect();
    files.sort();
    files
}

/// Every fixture, known or not, decodes and re-encodes to its exact bytes.
#[test]
fn every_fixture_roundtrips() {
    for file in RELEASES.iter().flat_map(|r| hex_files(r)) {
        let entries = decode_file(&file);
        assert!(!entries.is_empty(), "{}: no frames", file.display());
    }
}

/// `#[test] fn NAME()` running `NAME_of` on the fixtures of every release.
macro_rules! on_every_release {
    ($($name:ident => $of:ident,)*) => {
        $(
            #[test]
            fn $name() {
                for release in RELEASES {
                    $of(release);
                }
            }
        )*
    };
}

on_every_release! {
    connect_v2 => connect_v2_of,
    connect_old => connect_old_of,
    create2 => create2_of,
    multi_failed => multi_failed_of,
    notification => notification_of,
    ping => ping_of,
    unknown_opcode => unknown_opcode_of,
    exists_missing => exists_missing_of,
    get_data_null => get_data_null_of,
}

fn connect_v2_of(release: &str) {
    let entries = load(release, "connect_v2.hex");
    assert_eq!(entries.len(), 2);
    check_standard_handshake(&entries, "", Some(false));
}

fn connect_old_of(release: &str) {
    let entries = load(release, "connect_old.hex");
    assert_eq!(entries.len(), 2);
    check_standard_handshake(&entries, "", None);
}

fn create2_of(release: &str) {
    let (entries, reqs) = one_session(release, "create2.hex", 1);
    let create = world_anyone_create(OpCode::Create2, "/fixture-c2", Some(b"v"));
    assert_eq!(reqs[0], (RequestHeader { xid: 1, op: 15 }, Some(create)));
    let (header, op, body) = &reply_of(&entries, 1, 0);
    assert_eq!((header.xid, header.err, *op), (1, 0, 15));
    let Some(Response::Create2(resp)) = body else {
        panic!("expected a Create2Response, got {body:?}");
    };
    assert_eq!(resp.path, "/fixture-c2");
    let stat = resp.stat;
    // A new persistent node: created by this reply's transaction, never modified.
    assert_eq!(stat.czxid, header.zxid);
    assert_eq!(stat.mzxid, header.zxid);
    assert_eq!(stat.pzxid, header.zxid);
    assert_eq!(stat.ctime, stat.mtime);
    assert_eq!((stat.version, stat.cversion, stat.aversion), (0, 0, 0));
    assert_eq!(stat.ephemeral_owner, 0);
    assert_eq!((stat.data_length, stat.num_children), (1, 0));
}

fn multi_failed_of(release: &str) {
    let (entries, reqs) = one_session(release, "multi_failed.hex", 2);
    let create = world_anyone_create(OpCode::Create, "/fixture-m", Some(b"m"));
    assert_eq!(reqs[0], (RequestHeader { xid: 1, op: 1 }, Some(create)));
    assert_eq!(reqs[1].0, RequestHeader { xid: 2, op: 14 });
    let Some(Request::Multi(ops)) = &reqs[1].1 else {
        panic!("expected a multi, got {:?}", reqs[1].1);
    };
    let Request::Create(create_x) = world_anyone_create(OpCode::Create, "/fixture-m/x", Some(b"x"))
    else {
        unreachable!()
    };
    let Request::Create(create_z) = world_anyone_create(OpCode::Create, "/fixture-m/z", Some(b"z"))
    else {
        unreachable!()
    };
    assert_eq!(
        *ops,
        vec![
            MultiOp::Create(create_x),
            MultiOp::SetData(SetDataRequest {
                path: "/fixture-m".into(),
                data: Some(Bytes::from_static(b"d")),
                version: 7,
            }),
            MultiOp::Check(CheckVersionRequest {
                path: "/fixture-m".into(),
                version: 0
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/fixture-m/y".into(),
                version: -1
            }),
            MultiOp::Create(create_z),
        ]
    );

    let reps = replies(&entries, "");
    assert_eq!(reps.len(), 2);
    assert_eq!((reps[0].0.xid, reps[0].0.err), (1, 0));
    assert_eq!(
        reps[0].2,
        Some(Response::Create(CreateResponse {
            path: "/fixture-m".into()
        }))
    );
    // The failed multi: header err 0, one zxid consumed, the failure in the results.
    let (header, op, body) = &reps[1];
    assert_eq!((header.xid, header.err, *op), (2, 0, 14));
    assert_eq!(header.zxid, reps[0].0.zxid + 1);
    let codes = [0, -103, -2, -2, -2];
    assert_eq!(
        *body,
        Some(Response::Multi(MultiResponse(
            codes.iter().map(|&c| MultiResult::Error(c)).collect()
        )))
    );
    let frame = entries.last().unwrap().frame.clone();
    assert_eq!(
        multi_result_headers(payload_of(&frame)),
        [(-1, 0), (-1, -103), (-1, -2), (-1, -2), (-1, -2)]
    );
}

fn notification_of(release: &str) {
    let entries = load(release, "notification.hex");
    check_standard_handshake(&entries, "A", Some(false));
    check_standard_handshake(&entries, "B", Some(false));
    let a = requests(&entries, "A");
    assert_eq!(
        a.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>(),
        [
            RequestHeader { xid: 1, op: 1 },
            RequestHeader { xid: 2, op: 4 }
        ]
    );
    assert_eq!(
        a[1].1,
        Some(Request::GetData(PathWatchRequest {
            path: "/fixture-n".into(),
            watch: true
        }))
    );
    let b = requests(&entries, "B");
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0].1,
        Some(Request::SetData(SetDataRequest {
            path: "/fixture-n".into(),
            data: Some(Bytes::from_static(b"n1")),
            version: -1,
        }))
    );
    let a_replies = replies(&entries, "A");
    let Some(Response::GetData(got)) = &a_replies[1].2 else {
        panic!("expected a GetDataResponse, got {:?}", a_replies[1].2);
    };
    assert_eq!(got.data.as_deref(), Some(&b"n0"[..]));
    assert_eq!(got.stat.data_length, 2);

    let last = entries.last().unwrap();
    assert_eq!((last.conn.as_str(), last.sent), ("A", false));
    let Decoded::Notification { header, event } = &last.decoded else {
        panic!("expected the notification last, got {:?}", last.decoded);
    };
    // 3.8 sends zxid -1 in notifications, 3.9 the zxid of the change.
    let b_replies = replies(&entries, "B");
    let zxid = match release {
        "3.8.0" => -1,
        _ => b_replies[0].0.zxid,
    };
    assert!(b_replies[0].0.zxid > 0);
    assert_eq!(
        *header,
        ReplyHeader {
            xid: -1,
            zxid,
            err: 0
        }
    );
    assert_eq!(
        *event,
        WatcherEvent {
            event_type: event_type::NODE_DATA_CHANGED,
            state: keeper_state::SYNC_CONNECTED,
            path: "/fixture-n".into(),
        }
    );
    let notifications = entries
        .iter()
        .filter(|e| matches!(e.decoded, Decoded::Notification { .. }))
        .count();
    assert_eq!(notifications, 1);
}

fn ping_of(release: &str) {
    let (entries, reqs) = one_session(release, "ping.hex", 2);
    assert_eq!(
        reqs,
        [
            (RequestHeader { xid: -2, op: 11 }, Some(Request::Ping)),
            (RequestHeader { xid: 7, op: 11 }, Some(Request::Ping)),
        ]
    );
    let reps = replies(&entries, "");
    assert_eq!(reps.len(), 2);
    for (header, op, body) in &reps {
        // Whatever xid the ping used, the reply carries -2 and no body.
        assert_eq!((header.xid, header.err, *op), (-2, 0, 11));
        assert_eq!(*body, Some(Response::Empty));
    }
    for e in entries.iter().filter(|e| !e.sent).skip(1) {
        assert_eq!(e.frame.len(), 20);
    }
}

fn unknown_opcode_of(release: &str) {
    let (entries, reqs) = one_session(release, "unknown_opcode.hex", 1);
    assert_eq!(reqs, [(RequestHeader { xid: 1, op: 999 }, None)]);
    assert!(OpCode::from_i32(999).is_none());
    let (header, op, body) = &reply_of(&entries, 1, 0);
    assert_eq!((header.xid, header.zxid, header.err, *op), (1, -1, -6, 999));
    assert_eq!(
        ErrorCode::from_i32(header.err),
        Some(ErrorCode::Unimplemented)
    );
    header_only(&entries, body);
}

fn exists_missing_of(release: &str) {
    let (entries, reqs) = one_session(release, "exists_missing.hex", 1);
    assert_eq!(
        reqs,
        [(
            RequestHeader { xid: 1, op: 3 },
            Some(Request::Exists(PathWatchRequest {
                path: "/fixture-missing".into(),
                watch: false,
            }))
        )]
    );
    let (header, op, body) = &reply_of(&entries, 1, 0);
    assert_eq!(
        (header.xid, header.err, *op),
        (1, ErrorCode::NoNode.code(), 3)
    );
    header_only(&entries, body);
}

fn get_data_null_of(release: &str) {
    let (entries, reqs) = one_session(release, "get_data_null.hex", 2);
    assert_eq!(
        reqs[0].1,
        Some(world_anyone_create(OpCode::Create, "/fixture-null", None))
    );
    assert_eq!(
        reqs[1],
        (
            RequestHeader { xid: 2, op: 4 },
            Some(Request::GetData(PathWatchRequest {
                path: "/fixture-null".into(),
                watch: false,
            }))
        )
    );
    let created = reply_of(&entries, 2, 0).0;
    let (header, op, body) = &reply_of(&entries, 2, 1);
    assert_eq!((header.xid, header.err, *op), (2, 0, 4));
    let Some(Response::GetData(resp)) = body else {
        panic!("expected a GetDataResponse, got {body:?}");
    };
    // Null data stays null (length -1), while the Stat says 0 bytes.
    assert_eq!(resp.data, None);
    assert_eq!(resp.stat.data_length, 0);
    assert_eq!(resp.stat.czxid, created.zxid);
    let frame = &entries.last().unwrap().frame;
    assert_eq!(hex(&frame[20..24]), "ffffffff");
}
