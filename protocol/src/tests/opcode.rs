//! The opcode table: every number round-trips, every opcode has a row, and the facts other
//! code derives from a row agree with the decoders.

use super::*;
use crate::opcode::{OpClass, ReplyBody};

#[test]
fn every_opcode_number_round_trips_and_all_lists_every_opcode() {
    let mut seen = std::collections::HashSet::new();
    for &op in OpCode::ALL {
        assert_eq!(OpCode::from_i32(op as i32), Some(op), "{op:?}");
        assert!(seen.insert(op as i32), "{op:?}: number used twice");
    }
    // No number outside ALL decodes: the enum, ALL and from_i32 are one list.
    assert_eq!(all_opcodes().len(), OpCode::ALL.len());
    for v in [-1000, -12, -2, 10, 23, 99, 108, 1000, i32::MIN, i32::MAX] {
        assert_eq!(OpCode::from_i32(v), None, "{v}");
    }
}

#[test]
fn every_opcode_has_a_class_and_a_short_name() {
    for &op in OpCode::ALL {
        let info = op.info();
        assert_eq!(op.class(), info.class);
        assert!(!info.short_name.is_empty(), "{op:?}");
        assert!(info.short_name.len() <= 6, "{op:?}");
        // The family of an opcode is its own family.
        assert_eq!(op.family().family(), op.family(), "{op:?}");
        // A transaction is refused by a read-only member and committed by the leader.
        if info.transaction {
            assert!(op.refused_when_read_only(), "{op:?}");
            assert_ne!(info.follower, crate::FollowerAnswers::Locally, "{op:?}");
        }
        // A fixed xid is one of the special, negative ones.
        if let Some(xid) = info.fixed_xid {
            assert!(xid < -1, "{op:?}");
        }
        // What may overtake a pending write changes nothing: no transaction, no session end.
        if info.overtakes_writes {
            assert!(!info.transaction && !info.refused_when_read_only, "{op:?}");
        }
    }
    assert_eq!(OpCode::Reconfig.class(), OpClass::Write);
    assert_eq!(OpCode::GetData.class(), OpClass::Read);
    assert_eq!(OpCode::Notification.class(), OpClass::NotARequest);
}

#[test]
fn the_table_agrees_with_the_request_decoder() {
    for &op in OpCode::ALL {
        let decoded = Request::read(op, &mut Reader::new(Bytes::new()));
        let not_a_request = matches!(decoded, Err(DecodeError::NotARequest(_)));
        assert_eq!(!not_a_request, op.is_request(), "{op:?}");
        assert_eq!(
            op.info().reply == ReplyBody::NotARequest,
            not_a_request,
            "{op:?}"
        );
        assert_eq!(response_for(op).is_none(), not_a_request, "{op:?}");
        if !op.is_request() {
            assert!(!op.touches_session(), "{op:?}");
        }
    }
    assert!(!OpCode::Auth.touches_session());
    assert!(!OpCode::Sasl.touches_session());
    assert!(OpCode::Ping.touches_session());
}

#[test]
fn the_opcode_is_read_from_bytes_four_to_eight() {
    let mut payload = vec![0, 0, 0, 7];
    payload.extend_from_slice(&(OpCode::SetData as i32).to_be_bytes());
    assert_eq!(OpCode::of_payload(&payload), Some(OpCode::SetData));
    payload.extend_from_slice(b"body");
    assert_eq!(OpCode::of_payload(&payload), Some(OpCode::SetData));
    assert_eq!(
        OpCode::of_payload(&payload[..7]),
        None,
        "shorter than a header"
    );
    assert_eq!(
        OpCode::of_payload(&[0, 0, 0, 1, 0, 0, 0, 99]),
        None,
        "no such opcode"
    );
    assert_eq!(
        OpCode::of_payload(&[0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xf5]),
        Some(OpCode::CloseSession)
    );
}
