//! Property and negative tests of the wire encodings. Shared strategies and checks live here.

mod frame;
mod negative;
mod opcode;
mod roundtrip;

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::create::Create;
use crate::jute::strategy::Generate;
use crate::jute::{DecodeError, Jute, Reader};
use crate::multi::{MultiOp, MultiResponse, MultiResult};
use crate::opcode::OpCode;
use crate::records::*;
use crate::request::Request;
use crate::response::Response;

/// Every opcode the enum knows, found by asking `OpCode::from_i32` over a wide range.
fn all_opcodes() -> Vec<OpCode> {
    (-1000..=1000).filter_map(OpCode::from_i32).collect()
}

/// The opcodes that are not client requests.
const NON_REQUEST_OPS: [OpCode; 3] = [OpCode::Notification, OpCode::Error, OpCode::CreateSession];

const CREATE_OPS: [OpCode; 4] = [
    OpCode::Create,
    OpCode::Create2,
    OpCode::CreateContainer,
    OpCode::CreateTtl,
];

fn gen<T: Generate + 'static>() -> BoxedStrategy<T> {
    T::strategy()
}

/// A create with the given opcode; `ttl` is only on the wire for opcode 21, so it is -1 for
/// the others (that is what decoding yields).
fn create(op: OpCode) -> BoxedStrategy<Create> {
    gen::<CreateTtlRequest>()
        .prop_map(move |r| Create {
            op,
            ttl: if op == OpCode::CreateTtl { r.ttl } else { -1 },
            path: r.path,
            data: r.data,
            acl: r.acl,
            flags: r.flags,
        })
        .boxed()
}

fn any_create() -> BoxedStrategy<Create> {
    prop::sample::select(CREATE_OPS.to_vec())
        .prop_flat_map(create)
        .boxed()
}

fn multi_op() -> BoxedStrategy<MultiOp> {
    prop_oneof![
        any_create().prop_map(MultiOp::Create),
        gen::<DeleteRequest>().prop_map(MultiOp::Delete),
        gen::<SetDataRequest>().prop_map(MultiOp::SetData),
        gen::<CheckVersionRequest>().prop_map(MultiOp::Check),
        gen::<PathWatchRequest>().prop_map(MultiOp::GetData),
        gen::<PathWatchRequest>().prop_map(MultiOp::GetChildren),
    ]
    .boxed()
}

fn multi_ops() -> BoxedStrategy<Vec<MultiOp>> {
    prop::collection::vec(multi_op(), 0..6).boxed()
}

fn multi_result() -> BoxedStrategy<MultiResult> {
    prop_oneof![
        (gen::<String>(), prop::option::of(gen::<Stat>()))
            .prop_map(|(path, stat)| MultiResult::Create { path, stat }),
        Just(MultiResult::Delete),
        gen::<Stat>().prop_map(MultiResult::SetData),
        Just(MultiResult::Check),
        (gen::<Option<Bytes>>(), gen::<Stat>())
            .prop_map(|(data, stat)| MultiResult::GetData { data, stat }),
        gen::<Vec<String>>().prop_map(MultiResult::GetChildren),
        any::<i32>().prop_map(MultiResult::Error),
    ]
    .boxed()
}

fn multi_response() -> BoxedStrategy<MultiResponse> {
    prop::collection::vec(multi_result(), 0..8)
        .prop_map(MultiResponse)
        .boxed()
}

/// A match on `$op` that generates each listed opcode's request from its record's strategy,
/// carried by the [`Request`] variant of the same name, followed by the other arms.
macro_rules! any_request {
    ($op:ident, [$($plain:ident,)*], { $($arms:tt)* }) => {
        match $op {
            $(OpCode::$plain => gen().prop_map(Request::$plain).boxed(),)*
            $($arms)*
        }
    };
}

/// Requests sent with `op`; `None` for opcodes that are not client requests. The match is
/// exhaustive so that a new opcode cannot be left out of the tests.
fn request_for(op: OpCode) -> Option<BoxedStrategy<Request>> {
    use OpCode as O;
    Some(any_request!(op, [
        Delete, Exists, GetData, SetData, GetAcl, SetAcl, GetChildren, GetChildren2, Sync,
        Check, Reconfig, CheckWatches, RemoveWatches, DeleteContainer, Auth, SetWatches,
        SetWatches2, Sasl, GetEphemerals, GetAllChildrenNumber, AddWatch,
    ], {
        O::Create | O::Create2 | O::CreateContainer | O::CreateTtl => {
            create(op).prop_map(Request::Create).boxed()
        }
        O::Ping => Just(Request::Ping).boxed(),
        O::Multi => multi_ops().prop_map(Request::Multi).boxed(),
        O::MultiRead => multi_ops().prop_map(Request::MultiRead).boxed(),
        O::WhoAmI => Just(Request::WhoAmI).boxed(),
        O::CloseSession => Just(Request::CloseSession).boxed(),
        O::Notification | O::Error | O::CreateSession => return None,
    }))
}

/// Successful reply bodies to requests sent with `op`; exhaustive like `request_for`.
fn response_for(op: OpCode) -> Option<BoxedStrategy<Response>> {
    use OpCode as O;
    Some(match op {
        O::Create => gen().prop_map(Response::Create).boxed(),
        O::Create2 | O::CreateContainer | O::CreateTtl => gen().prop_map(Response::Create2).boxed(),
        O::Exists | O::SetData | O::SetAcl => gen().prop_map(Response::Stat).boxed(),
        O::GetData | O::Reconfig => gen().prop_map(Response::GetData).boxed(),
        O::GetAcl => gen().prop_map(Response::GetAcl).boxed(),
        O::GetChildren | O::GetEphemerals => gen().prop_map(Response::Children).boxed(),
        O::GetChildren2 => gen().prop_map(Response::Children2).boxed(),
        O::Sync => gen().prop_map(Response::Sync).boxed(),
        O::Multi | O::MultiRead => multi_response().prop_map(Response::Multi).boxed(),
        O::Sasl => gen().prop_map(Response::Sasl).boxed(),
        O::GetAllChildrenNumber => gen().prop_map(Response::AllChildrenNumber).boxed(),
        O::AddWatch => gen().prop_map(Response::AddWatch).boxed(),
        O::WhoAmI => gen().prop_map(Response::WhoAmI).boxed(),
        _ if op.has_empty_reply() => Just(Response::Empty).boxed(),
        O::Notification | O::Error | O::CreateSession => return None,
        _ => unreachable!("{op:?} is a request with a reply body"),
    })
}

fn encode<T>(v: &T, write: impl Fn(&T, &mut BytesMut)) -> Bytes {
    let mut out = BytesMut::new();
    write(v, &mut out);
    out.freeze()
}

/// The core property of an encoding: decoding the encoding gives the value back and consumes
/// exactly all of it; re-encoding gives the same bytes; every strict prefix is reported as
/// truncated (no panic, no other error); trailing bytes are left unread.
fn check_encoding<T: PartialEq + Debug>(
    v: &T,
    write: impl Fn(&T, &mut BytesMut),
    read: impl Fn(&mut Reader) -> Result<T, DecodeError>,
) -> Result<(), TestCaseError> {
    let bytes = encode(v, &write);

    let mut r = Reader::new(bytes.clone());
    let back = read(&mut r).map_err(|e| TestCaseError::fail(format!("decode failed: {e}")))?;
    prop_assert_eq!(&back, v);
    prop_assert_eq!(r.remaining(), 0, "decode left bytes unread");
    prop_assert_eq!(encode(&back, &write), bytes.clone(), "re-encoding differs");

    for cut in 0..bytes.len() {
        let res = read(&mut Reader::new(bytes.slice(..cut)));
        prop_assert!(
            matches!(res, Err(DecodeError::Truncated { .. })),
            "prefix of {} of {} bytes gave {:?}",
            cut,
            bytes.len(),
            res
        );
    }

    let mut padded = BytesMut::from(&bytes[..]);
    padded.extend_from_slice(&[0xAB, 0xCD, 0xEF]);
    let mut r = Reader::new(padded.freeze());
    prop_assert_eq!(&read(&mut r).expect("decode with trailing bytes"), v);
    prop_assert_eq!(r.remaining(), 3, "trailing bytes were consumed");
    Ok(())
}

fn check_jute<T: Jute + PartialEq + Debug>(v: &T) -> Result<(), TestCaseError> {
    check_encoding(v, |v, out| v.write(out), T::read)
}

fn check_request(req: &Request) -> Result<(), TestCaseError> {
    let op = req.op();
    check_encoding(req, |v, out| v.write(out), |r| Request::read(op, r))
}

fn check_response(op: OpCode, resp: &Response) -> Result<(), TestCaseError> {
    check_encoding(
        resp,
        |v, out| v.write(out),
        |r| Response::read(op, r).expect("a request opcode"),
    )
}

/// Hex of a byte string, for readable assertion messages.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
