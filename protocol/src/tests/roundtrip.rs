//! encode → decode is the identity, consumes every byte, and every cut is a truncation.

use std::collections::BTreeSet;

use proptest::test_runner::{Config, TestRunner};

use super::*;
use crate::multi::{read_ops, write_ops};

/// One round-trip property test per `record!` type, in a module named after the type.
macro_rules! record_roundtrips {
    ($($ty:ident),* $(,)?) => {
        /// The record types covered below.
        pub(super) const RECORDS_TESTED: &[&str] = &[$(stringify!($ty)),*];

        $(
            #[allow(non_snake_case)]
            mod $ty {
                use super::*;

                proptest! {
                    #[test]
                    fn roundtrip(v in <crate::records::$ty as Generate>::strategy()) {
                        check_jute(&v)?;
                    }
                }
            }
        )*
    };
}

/// One module per record type (apart from the types themselves, whose names they take).
mod record {
    use super::*;

    record_roundtrips!(
        Id,
        Acl,
        Stat,
        ClientInfo,
        RequestHeader,
        ReplyHeader,
        MultiHeader,
        AuthPacket,
        WatcherEvent,
        ErrorResponse,
        CreateRequest,
        CreateTtlRequest,
        CreateResponse,
        Create2Response,
        DeleteRequest,
        PathWatchRequest,
        PathRequest,
        SyncRequest,
        StatResponse,
        GetDataResponse,
        SetDataRequest,
        GetAclResponse,
        SetAclRequest,
        ChildrenResponse,
        Children2Response,
        CheckVersionRequest,
        SetWatches,
        SetWatches2,
        AddWatchRequest,
        WatchTypeRequest,
        AllChildrenNumberResponse,
        WhoAmIResponse,
        ReconfigRequest,
        SaslToken,
    );
}

/// Every struct declared in records.rs is covered: by the list above or, for the two
/// hand-written handshake records, by the connect tests below.
#[test]
fn every_record_type_is_tested() {
    let source = include_str!("../records.rs");
    let declared: BTreeSet<&str> = source
        .split("pub struct ")
        .skip(1)
        .map(|rest| {
            rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap()
        })
        .collect();
    let mut tested: BTreeSet<&str> = record::RECORDS_TESTED.iter().copied().collect();
    assert_eq!(
        tested.len(),
        record::RECORDS_TESTED.len(),
        "a record is listed twice"
    );
    tested.insert("ConnectRequest");
    tested.insert("ConnectResponse");
    assert_eq!(declared, tested);
}

#[test]
fn fixed_record_sizes() {
    assert_eq!(crate::to_bytes(&Stat::default()).len(), 68);
    assert_eq!(crate::to_bytes(&RequestHeader::default()).len(), 8);
    assert_eq!(crate::to_bytes(&ReplyHeader::default()).len(), 16);
    assert_eq!(crate::to_bytes(&MultiHeader::default()).len(), 9);
}

/// Every opcode `strategy_for` has a strategy for, with that strategy.
fn with_strategy<T>(
    strategy_for: fn(OpCode) -> Option<BoxedStrategy<T>>,
) -> impl Iterator<Item = (OpCode, BoxedStrategy<T>)> {
    all_opcodes()
        .into_iter()
        .filter_map(move |op| strategy_for(op).map(|s| (op, s)))
}

/// Runs `check` on `cases` values of `strategy`, failing the test with the shrunk input.
fn run<T: Debug>(
    name: &str,
    cases: u32,
    strategy: BoxedStrategy<T>,
    check: impl Fn(T) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, check) {
        panic!("{name}: {e}");
    }
}

#[test]
fn request_opcode_partition() {
    // Every opcode either has a request strategy or is one of the three non-requests, and
    // `Request::read` agrees about which.
    for op in all_opcodes() {
        let empty = || Reader::new(Bytes::new());
        match request_for(op) {
            Some(_) => assert!(
                !matches!(
                    Request::read(op, &mut empty()),
                    Err(DecodeError::NotARequest(_))
                ),
                "{op:?}"
            ),
            None => {
                assert!(NON_REQUEST_OPS.contains(&op), "{op:?}");
                assert_eq!(
                    Request::read(op, &mut empty()).err(),
                    Some(DecodeError::NotARequest(op as i32)),
                    "{op:?}"
                );
            }
        }
        assert_eq!(
            request_for(op).is_some(),
            response_for(op).is_some(),
            "{op:?}"
        );
    }
    assert_eq!(all_opcodes().len(), 33);
}

/// `Request::write` / `Request::read(op, ..)` round trip, run separately for every opcode.
#[test]
fn request_roundtrip_every_opcode() {
    for (op, strategy) in with_strategy(request_for) {
        run(&format!("{op:?}"), 128, strategy, |req| {
            prop_assert_eq!(req.op(), op);
            check_request(&req)
        });
    }
}

/// A full request frame (length, header, body) comes apart into the same request.
#[test]
fn request_frame_roundtrip_every_opcode() {
    for (op, strategy) in with_strategy(request_for) {
        let strategy = (any::<i32>(), strategy).boxed();
        run(&format!("{op:?}"), 32, strategy, |(xid, req)| {
            let frame = req.to_frame(xid);
            let payload = crate::FrameCodec::default()
                .next_frame(&mut BytesMut::from(&frame[..]))
                .unwrap()
                .expect("a whole frame");
            prop_assert_eq!(payload.len() + 4, frame.len());
            let mut r = Reader::new(payload);
            let header = RequestHeader::read(&mut r).unwrap();
            prop_assert_eq!(header.clone(), RequestHeader { xid, op: op as i32 });
            let op = OpCode::from_i32(header.op).unwrap();
            prop_assert_eq!(Request::read(op, &mut r).unwrap(), req);
            prop_assert_eq!(r.remaining(), 0);
            Ok(())
        });
    }
}

/// `Response::write` / `Response::read(op, ..)` round trip for every opcode, and
/// `read_reply` on whole reply payloads.
#[test]
fn response_roundtrip_every_opcode() {
    for (op, strategy) in with_strategy(response_for) {
        let strategy = (gen::<ReplyHeader>(), strategy).boxed();
        run(&format!("{op:?}"), 128, strategy, |(header, resp)| {
            check_response(op, &resp)?;
            let mut out = BytesMut::new();
            header.write(&mut out);
            if header.err == 0 {
                resp.write(&mut out);
            }
            let mut r = Reader::new(out.freeze());
            let (h, body) = crate::read_reply(op, &mut r).unwrap();
            prop_assert_eq!(h, header.clone());
            prop_assert_eq!(body, (header.err == 0).then_some(resp));
            prop_assert_eq!(r.remaining(), 0);
            Ok(())
        });
    }
}

proptest! {
    #[test]
    fn create_roundtrip(c in any_create()) {
        let op = c.op;
        check_encoding(&c, |v, out| v.write(out), |r| Create::read(op, r))?;
    }

    #[test]
    fn create_matches_its_records(c in any_create()) {
        // Opcode 21 is a CreateTTLRequest on the wire, the others a CreateRequest.
        let bytes = encode(&c, |v, out| v.write(out));
        let expected = if c.op == OpCode::CreateTtl {
            crate::to_bytes(&CreateTtlRequest {
                path: c.path.clone(),
                data: c.data.clone(),
                acl: c.acl.clone(),
                flags: c.flags,
                ttl: c.ttl,
            })
        } else {
            crate::to_bytes(&CreateRequest {
                path: c.path.clone(),
                data: c.data.clone(),
                acl: c.acl.clone(),
                flags: c.flags,
            })
        };
        prop_assert_eq!(hex(&bytes), hex(&expected));
    }

    #[test]
    fn multi_ops_roundtrip(ops in multi_ops()) {
        check_encoding(&ops, |v, out| write_ops(v, out), read_ops)?;
    }

    #[test]
    fn multi_ops_are_header_delimited(ops in multi_ops()) {
        // Each sub-op starts with MultiHeader{type, false, -1}; the list ends with
        // MultiHeader{-1, true, -1}.
        let bytes = encode(&ops, |v, out| write_ops(v, out));
        let mut r = Reader::new(bytes);
        for op in &ops {
            let h = MultiHeader::read(&mut r).unwrap();
            prop_assert_eq!(h, MultiHeader { op: op.op() as i32, done: false, err: -1 });
            let mut one = BytesMut::new();
            write_ops(std::slice::from_ref(op), &mut one);
            let body_len = one.len() - 9 - 9;
            r.rest_prefix_skip(body_len);
        }
        prop_assert_eq!(MultiHeader::read(&mut r).unwrap(), MultiHeader { op: -1, done: true, err: -1 });
        prop_assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn multi_response_roundtrip(resp in multi_response()) {
        check_jute(&resp)?;
    }

    #[test]
    fn multi_result_headers(resp in multi_response()) {
        // Results carry MultiHeader{type, false, err}: type -1 and err = the code for errors,
        // the sub-op type and err 0 otherwise; then the terminator.
        let bytes = crate::to_bytes(&resp);
        let mut r = Reader::new(bytes);
        for result in &resp.0 {
            let h = MultiHeader::read(&mut r).unwrap();
            let (op, err) = match result {
                MultiResult::Create { stat: None, .. } => (1, 0),
                MultiResult::Create { stat: Some(_), .. } => (15, 0),
                MultiResult::Delete => (2, 0),
                MultiResult::SetData(_) => (5, 0),
                MultiResult::Check => (13, 0),
                MultiResult::GetData { .. } => (4, 0),
                MultiResult::GetChildren(_) => (8, 0),
                MultiResult::Error(e) => (-1, *e),
            };
            prop_assert_eq!(h, MultiHeader { op, done: false, err });
            let body_len = match result {
                MultiResult::Create { path, stat } => {
                    4 + path.len() + if stat.is_some() { 68 } else { 0 }
                }
                MultiResult::Delete | MultiResult::Check => 0,
                MultiResult::SetData(_) => 68,
                MultiResult::GetData { data, .. } => {
                    4 + data.as_ref().map_or(0, |d| d.len()) + 68
                }
                MultiResult::GetChildren(c) => crate::to_bytes(c).len(),
                MultiResult::Error(_) => 4,
            };
            r.rest_prefix_skip(body_len);
        }
        prop_assert_eq!(MultiHeader::read(&mut r).unwrap(), MultiHeader { op: -1, done: true, err: -1 });
        prop_assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn connect_request_roundtrip(v in gen::<ConnectRequest>()) {
        check_connect(&v, v.read_only.is_some())?;
    }

    #[test]
    fn connect_response_roundtrip(v in gen::<ConnectResponse>()) {
        check_connect(&v, v.read_only.is_some())?;
    }

    #[test]
    fn connect_request_lengths(v in gen::<ConnectRequest>()) {
        // 44-byte payload for an old client, 45 with the readOnly byte (16-byte password).
        let len = crate::to_bytes(&v).len();
        prop_assert_eq!(len, 4 + 8 + 4 + 8 + 4 + v.passwd.len() + v.read_only.map_or(0, |_| 1));
    }
}

/// The handshake records end with an optional byte, so they are checked by hand: the value
/// comes back, all bytes are used, a cut before the last mandatory byte is a truncation, and
/// cutting off the readOnly byte gives the same record without it. A byte beyond the
/// readOnly byte is ignored.
fn check_connect<T>(v: &T, has_read_only: bool) -> Result<(), TestCaseError>
where
    T: Jute + PartialEq + Debug + Clone + WithReadOnly,
{
    let bytes = crate::to_bytes(v);
    let mut r = Reader::new(bytes.clone());
    prop_assert_eq!(&T::read(&mut r).unwrap(), v);
    prop_assert_eq!(r.remaining(), 0);
    prop_assert_eq!(
        crate::to_bytes(&T::read(&mut Reader::new(bytes.clone())).unwrap()),
        bytes.clone()
    );

    let mandatory = bytes.len() - usize::from(has_read_only);
    for cut in 0..mandatory {
        let res = T::read(&mut Reader::new(bytes.slice(..cut)));
        prop_assert!(
            matches!(res, Err(DecodeError::Truncated { .. })),
            "cut {}: {:?}",
            cut,
            res
        );
    }
    let old = T::read(&mut Reader::new(bytes.slice(..mandatory))).unwrap();
    prop_assert_eq!(old, v.clone().with_read_only(None));

    // A byte of 2 still reads as true; more bytes after the flag are ignored.
    let mut extra = BytesMut::from(&bytes[..mandatory]);
    extra.extend_from_slice(&[2, 9, 9]);
    let mut r = Reader::new(extra.freeze());
    prop_assert_eq!(
        T::read(&mut r).unwrap(),
        v.clone().with_read_only(Some(true))
    );
    prop_assert_eq!(r.remaining(), 2);
    Ok(())
}

trait WithReadOnly {
    fn with_read_only(self, read_only: Option<bool>) -> Self;
}

impl WithReadOnly for ConnectRequest {
    fn with_read_only(self, read_only: Option<bool>) -> Self {
        ConnectRequest { read_only, ..self }
    }
}

impl WithReadOnly for ConnectResponse {
    fn with_read_only(self, read_only: Option<bool>) -> Self {
        ConnectResponse { read_only, ..self }
    }
}

#[test]
fn invalid_connect_response_shape() {
    // timeout 0, id 0, 16 zero bytes (length 16, not -1), readOnly iff the request had it.
    let zeros = "00".repeat(16);
    let without = format!("00000000 00000000 0000000000000000 00000010 {zeros}");
    let without = without.replace(' ', "");
    let old = crate::to_bytes(&ConnectResponse::invalid(None));
    assert_eq!(hex(&old), without);
    let new = crate::to_bytes(&ConnectResponse::invalid(Some(true)));
    assert_eq!(hex(&new), format!("{without}00"));
}

/// Skips bytes the test knows the length of.
trait SkipExt {
    fn rest_prefix_skip(&mut self, n: usize);
}

impl SkipExt for Reader {
    fn rest_prefix_skip(&mut self, n: usize) {
        let rest = self.rest();
        assert!(rest.len() >= n, "skip past the end");
        *self = Reader::new(rest.slice(n..));
    }
}
