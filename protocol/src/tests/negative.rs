//! Malformed input: bad lengths, bad multi framing, non-request opcodes, and decoding
//! arbitrary or mutated bytes without panicking.

use super::*;
use crate::multi::{read_ops, write_ops};

fn int(v: i32) -> [u8; 4] {
    v.to_be_bytes()
}

fn reader(parts: &[&[u8]]) -> Reader {
    Reader::new(Bytes::from(parts.concat()))
}

#[test]
fn null_values_decode_as_documented() {
    let null = int(-1);
    // Non-null field types read null as empty; nullable ones keep it.
    assert_eq!(String::read(&mut reader(&[&null])).unwrap(), "");
    assert_eq!(Bytes::read(&mut reader(&[&null])).unwrap(), Bytes::new());
    assert_eq!(
        Vec::<String>::read(&mut reader(&[&null])).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(Option::<String>::read(&mut reader(&[&null])).unwrap(), None);
    assert_eq!(Option::<Bytes>::read(&mut reader(&[&null])).unwrap(), None);
    // Null and empty data are different encodings.
    assert_eq!(hex(&crate::to_bytes(&None::<Bytes>)), "ffffffff");
    assert_eq!(hex(&crate::to_bytes(&Some(Bytes::new()))), "00000000");
    // A null ACL vector in a create is legal on the wire.
    let mut r = reader(&[&int(2), b"/a", &null, &null, &int(0)]);
    let c = CreateRequest::read(&mut r).unwrap();
    assert_eq!(
        c,
        CreateRequest {
            path: "/a".into(),
            data: None,
            acl: vec![],
            flags: 0
        }
    );
    assert!(r.is_empty());
}

#[test]
fn invalid_utf8_is_replaced() {
    let mut r = reader(&[&int(3), &[b'/', 0xff, b'a']]);
    assert_eq!(String::read(&mut r).unwrap(), "/\u{fffd}a");
}

#[test]
fn non_zero_bool_is_true() {
    for b in 1..=255u8 {
        assert!(bool::read(&mut reader(&[&[b]])).unwrap());
    }
    assert!(!bool::read(&mut reader(&[&[0]])).unwrap());
}

proptest! {
    #[test]
    fn buffer_length_below_minus_one(n in i32::MIN..-1, tail in prop::collection::vec(any::<u8>(), 0..8)) {
        let bad = Some(DecodeError::BadLength(n));
        let parts: &[&[u8]] = &[&int(n), &tail];
        prop_assert_eq!(String::read(&mut reader(parts)).err(), bad.clone());
        prop_assert_eq!(Option::<String>::read(&mut reader(parts)).err(), bad.clone());
        prop_assert_eq!(Bytes::read(&mut reader(parts)).err(), bad.clone());
        prop_assert_eq!(Option::<Bytes>::read(&mut reader(parts)).err(), bad.clone());
        // Also as a field: the data of a create, the path of a request.
        let mut r = reader(&[&int(2), b"/a", &int(n), &tail]);
        prop_assert_eq!(CreateRequest::read(&mut r).err(), bad.clone());
        prop_assert_eq!(Request::read(OpCode::GetData, &mut reader(parts)).err(), bad);
    }

    #[test]
    fn vector_count_below_minus_one(n in i32::MIN..-1, tail in prop::collection::vec(any::<u8>(), 0..8)) {
        let bad = Some(DecodeError::BadLength(n));
        let parts: &[&[u8]] = &[&int(n), &tail];
        prop_assert_eq!(Vec::<String>::read(&mut reader(parts)).err(), bad.clone());
        prop_assert_eq!(Vec::<Acl>::read(&mut reader(parts)).err(), bad.clone());
        prop_assert_eq!(ChildrenResponse::read(&mut reader(parts)).err(), bad);
    }

    #[test]
    fn vector_count_beyond_payload(
        tail in prop::collection::vec(any::<u8>(), 0..64),
        extra in 1usize..=i32::MAX as usize,
    ) {
        // A count that cannot fit in what is left is refused before anything is allocated.
        truncated::<Vec<Acl>>(&tail, extra)?;
        truncated::<Vec<String>>(&tail, extra)?;
    }

    #[test]
    fn buffer_length_beyond_payload(
        tail in prop::collection::vec(any::<u8>(), 0..64),
        extra in 1usize..=i32::MAX as usize,
    ) {
        truncated::<Option<Bytes>>(&tail, extra)?;
    }
}

/// A `T` whose length prefix claims `extra` bytes more than the `tail` after it is refused
/// as truncated.
fn truncated<T: Jute + std::fmt::Debug>(tail: &[u8], extra: usize) -> Result<(), TestCaseError> {
    let n = (tail.len() + extra).min(i32::MAX as usize) as i32;
    let res = T::read(&mut reader(&[&int(n), tail]));
    prop_assert!(
        matches!(res, Err(DecodeError::Truncated { .. })),
        "{:?}",
        res
    );
    Ok(())
}

#[test]
fn absurd_vector_counts() {
    for n in [i32::MAX, 0x7fff_0000, 0x0010_0000, 1000] {
        // Plenty of bytes but far fewer than the count needs.
        let body = vec![0u8; 512];
        let res = Vec::<Acl>::read(&mut reader(&[&int(n), &body]));
        assert!(res.is_err(), "{n}: {res:?}");
        let res = Request::read(OpCode::SetWatches, &mut reader(&[&[0; 8], &int(n), &body]));
        assert!(res.is_err(), "{n}");
    }
}

/// The sub-operation types allowed in a multi request.
const MULTI_SUB_OPS: [i32; 9] = [1, 2, 4, 5, 8, 13, 15, 19, 21];
/// The result types allowed in a multi response.
const MULTI_RESULTS: [i32; 8] = [-1, 1, 2, 4, 5, 8, 13, 15];

fn multi_header(op: i32, done: bool, err: i32) -> Vec<u8> {
    crate::to_bytes(&MultiHeader { op, done, err }).to_vec()
}

#[test]
fn unknown_multi_sub_op_known_opcodes() {
    // Real opcodes that are not multi sub-operations, including exists, setACL, multi itself.
    for op in [
        0, 3, 6, 7, 9, 11, 12, 14, 16, 20, 22, 100, 101, 107, -1, -10, -11,
    ] {
        let body = [multi_header(op, false, -1), vec![0; 32]].concat();
        let res = read_ops(&mut Reader::new(body.clone().into()));
        assert_eq!(res, Err(DecodeError::BadMultiOp(op)), "{op}");
        for multi in [OpCode::Multi, OpCode::MultiRead] {
            let res = Request::read(multi, &mut Reader::new(body.clone().into()));
            assert_eq!(res, Err(DecodeError::BadMultiOp(op)), "{op}");
        }
    }
}

proptest! {
    #[test]
    fn unknown_multi_sub_op(
        good in multi_ops(),
        op in any::<i32>().prop_filter("a valid sub-op", |op| !MULTI_SUB_OPS.contains(op)),
        err in any::<i32>(),
    ) {
        // Valid ops first, then an unknown one: the whole list is refused.
        let mut body = BytesMut::new();
        write_ops(&good, &mut body);
        body.truncate(body.len() - 9);
        body.extend_from_slice(&multi_header(op, false, err));
        body.extend_from_slice(&[0; 16]);
        prop_assert_eq!(read_ops(&mut Reader::new(body.freeze())), Err(DecodeError::BadMultiOp(op)));
    }

    #[test]
    fn unknown_multi_result_type(
        good in multi_response(),
        op in any::<i32>().prop_filter("a valid result", |op| !MULTI_RESULTS.contains(op)),
    ) {
        let mut body = BytesMut::from(&crate::to_bytes(&good)[..]);
        body.truncate(body.len() - 9);
        body.extend_from_slice(&multi_header(op, false, 0));
        body.extend_from_slice(&[0; 16]);
        prop_assert_eq!(MultiResponse::read(&mut Reader::new(body.freeze())), Err(DecodeError::BadMultiOp(op)));
    }

    #[test]
    fn multi_without_terminator(ops in multi_ops(), resp in multi_response()) {
        let mut body = BytesMut::new();
        write_ops(&ops, &mut body);
        body.truncate(body.len() - 9);
        let res = read_ops(&mut Reader::new(body.freeze()));
        prop_assert!(matches!(res, Err(DecodeError::Truncated { .. })), "{:?}", res);

        let mut body = BytesMut::from(&crate::to_bytes(&resp)[..]);
        body.truncate(body.len() - 9);
        let res = MultiResponse::read(&mut Reader::new(body.freeze()));
        prop_assert!(matches!(res, Err(DecodeError::Truncated { .. })), "{:?}", res);
    }

    #[test]
    fn multi_terminator_fields_are_not_checked(op in any::<i32>(), err in any::<i32>()) {
        // The reader stops at the first header with done = true, whatever its type and err.
        let body = [multi_header(op, true, err), vec![7; 5]].concat();
        let mut r = Reader::new(body.into());
        prop_assert_eq!(read_ops(&mut r), Ok(vec![]));
        prop_assert_eq!(r.remaining(), 5);
    }
}

#[test]
fn empty_multi() {
    let mut body = BytesMut::new();
    write_ops(&[], &mut body);
    assert_eq!(hex(&body), "ffffffff01ffffffff");
    assert_eq!(read_ops(&mut Reader::new(body.freeze())), Ok(vec![]));
    assert_eq!(
        hex(&crate::to_bytes(&MultiResponse::default())),
        "ffffffff01ffffffff"
    );
}

#[test]
fn non_request_opcodes_are_not_requests() {
    for op in [0, -1, -10] {
        let op = OpCode::from_i32(op).unwrap();
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 1, b'/', 1]));
        assert_eq!(
            Request::read(op, &mut r).err(),
            Some(DecodeError::NotARequest(op as i32)),
            "{op:?}"
        );
        assert_eq!(r.remaining(), 6, "{op:?} consumed bytes");
        assert!(Response::read(op, &mut r).is_none(), "{op:?}");
        assert_eq!(r.remaining(), 6, "{op:?} consumed bytes");
    }
    assert_eq!(NON_REQUEST_OPS.map(|op| op as i32), [0, -1, -10]);
}

/// Bytes that look a little like Jute: small ints (plausible lengths, counts, opcodes), multi
/// headers, and raw bytes.
fn jute_like_bytes() -> BoxedStrategy<Vec<u8>> {
    let token = prop_oneof![
        (-3i32..10).prop_map(|v| v.to_be_bytes().to_vec()),
        prop::sample::select(MULTI_SUB_OPS.to_vec())
            .prop_flat_map(|op| (Just(op), any::<bool>(), -3i32..1))
            .prop_map(|(op, done, err)| multi_header(op, done, err)),
        prop::collection::vec(any::<u8>(), 0..6),
        any::<i32>().prop_map(|v| v.to_be_bytes().to_vec()),
    ];
    prop::collection::vec(token, 0..24)
        .prop_map(|t| t.concat())
        .boxed()
}

/// Decodes `bytes` as every record type; only the absence of panics is checked.
macro_rules! decode_as_all {
    ($bytes:expr; $($ty:ty),* $(,)?) => {
        $( let _ = <$ty as Jute>::read(&mut Reader::new($bytes.clone())); )*
    };
}

fn decode_everything(bytes: Bytes) {
    for op in all_opcodes() {
        let _ = Request::read(op, &mut Reader::new(bytes.clone()));
        let _ = Response::read(op, &mut Reader::new(bytes.clone()));
        let _ = crate::read_reply(op, &mut Reader::new(bytes.clone()));
    }
    let _ = read_ops(&mut Reader::new(bytes.clone()));
    decode_as_all!(bytes;
        Id, Acl, Stat, ClientInfo, RequestHeader, ReplyHeader, MultiHeader, AuthPacket,
        WatcherEvent, ErrorResponse, CreateRequest, CreateTtlRequest, CreateResponse,
        Create2Response, DeleteRequest, PathWatchRequest, PathRequest, SyncRequest,
        StatResponse, GetDataResponse, SetDataRequest, GetAclResponse, SetAclRequest,
        ChildrenResponse, Children2Response, CheckVersionRequest, SetWatches, SetWatches2,
        AddWatchRequest, WatchTypeRequest, AllChildrenNumberResponse, WhoAmIResponse,
        ReconfigRequest, SaslToken, ConnectRequest, ConnectResponse, MultiResponse,
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        decode_everything(bytes.into());
    }

    #[test]
    fn jute_like_bytes_never_panic(bytes in jute_like_bytes()) {
        decode_everything(bytes.into());
    }

    #[test]
    fn random_bytes_as_each_request_never_panic(
        op in prop::sample::select(all_opcodes()),
        bytes in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        match Request::read(op, &mut Reader::new(bytes.into())) {
            Err(DecodeError::NotARequest(_)) => prop_assert!(NON_REQUEST_OPS.contains(&op)),
            Ok(req) => prop_assert_eq!(req.op(), op),
            Err(_) => {}
        }
    }

    #[test]
    fn mutated_requests_never_panic(
        (op, req) in prop::sample::select(all_opcodes())
            .prop_filter_map("a request opcode", |op| request_for(op).map(|s| (op, s)))
            .prop_flat_map(|(op, s)| (Just(op), s)),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = BytesMut::new();
        req.write(&mut bytes);
        if !bytes.is_empty() {
            for (at, b) in edits {
                let at = at.index(bytes.len());
                bytes[at] = b;
            }
            let cut = cut.index(bytes.len() + 1);
            bytes.truncate(cut);
        }
        let bytes = bytes.freeze();
        if let Ok(again) = Request::read(op, &mut Reader::new(bytes.clone())) {
            // Whatever decodes must encode to something that decodes.
            let mut out = BytesMut::new();
            again.write(&mut out);
            prop_assert!(Request::read(op, &mut Reader::new(out.freeze())).is_ok());
        }
        decode_everything(bytes);
    }
}
