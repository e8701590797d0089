//! `reconfig` on the core: the checks in ZooKeeper's order and their error codes, the
//! configuration's version (the reconfig's zxid) and `/zookeeper/config` changed in the same
//! transaction, its watch, the logged record, and the membership left for the engine.

use bytes::Bytes;
use zkd_protocol::*;

use crate::testing::harness::*;
use crate::*;

fn three() -> Vec<ServerSpec> {
    (1..=3u16)
        .map(|id| {
            ServerSpec::parse(
                u64::from(id),
                &format!(
                    "127.0.0.1:{}:{};127.0.0.1:{}",
                    2887 + id,
                    3887 + id,
                    2180 + id
                ),
            )
            .expect("a spec")
        })
        .collect()
}

/// An ensemble of three at epoch 1, reconfiguration on or off.
fn ensemble(enabled: bool) -> Harness {
    let mut h = Harness::with_config(CoreConfig {
        reconfig_enabled: enabled,
        ..config()
    });
    h.core.new_epoch(h.now);
    h.core.install_ensemble(three(), h.now);
    h
}

fn reconfig(joining: Option<&str>, leaving: Option<&str>, from: i64) -> Request {
    Request::Reconfig(ReconfigRequest {
        joining_servers: joining.map(str::to_string),
        leaving_servers: leaving.map(str::to_string),
        new_members: None,
        cur_config_id: from,
    })
}

fn whole(members: &str) -> Request {
    Request::Reconfig(ReconfigRequest {
        joining_servers: None,
        leaving_servers: None,
        new_members: Some(members.to_string()),
        cur_config_id: -1,
    })
}

/// A session authenticated as the superuser (`super:secret`).
fn super_session(h: &mut Harness) -> ConnId {
    let (c, _, _) = h.session(30000);
    let auth = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: Bytes::from_static(b"super:secret"),
    });
    assert_eq!(h.reply(c, &auth).err, 0);
    c
}

fn config_data(h: &mut Harness, c: ConnId) -> (String, Stat) {
    let r: GetDataResponse = h.reply(c, &get_data("/zookeeper/config", false)).decode();
    (
        String::from_utf8(r.data.unwrap_or_default().to_vec()).expect("utf-8"),
        r.stat,
    )
}

const LINES: [&str; 3] = [
    "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n",
    "server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n",
    "server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183\n",
];

#[test]
fn the_first_leader_versions_the_static_configuration_only_with_reconfig_on() {
    let mut h = ensemble(true);
    let c = super_session(&mut h);
    let (text, stat) = config_data(&mut h, c);
    assert_eq!(text, format!("{}version=100000000", LINES.concat()));
    assert_eq!(
        (stat.version, stat.mzxid, stat.czxid),
        (-1, 0x1_0000_0000, 0)
    );
    let mut h = ensemble(false);
    let c = super_session(&mut h);
    let (text, stat) = config_data(&mut h, c);
    assert_eq!(text, format!("{}version=0", LINES.concat()));
    assert_eq!((stat.version, stat.mzxid), (-1, 0));
}

#[test]
fn removing_and_adding_a_member_versions_the_config_with_the_reconfig_zxid() {
    let mut h = ensemble(true);
    let c = super_session(&mut h);
    let r = h.reply(c, &reconfig(None, Some("3"), 0x1_0000_0000));
    assert_eq!(r.err, 0);
    let zxid = r.zxid;
    let body: GetDataResponse = r.decode();
    let text = format!("{}{}version={zxid:x}", LINES[0], LINES[1]);
    assert_eq!(body.data.as_deref(), Some(text.as_bytes()));
    assert_eq!((body.stat.version, body.stat.mzxid), (-1, zxid));
    assert_eq!(body.stat.data_length as usize, text.len());
    assert_eq!(config_data(&mut h, c), (text, body.stat));
    let applied = h.core.take_reconfig().expect("a membership to apply");
    assert_eq!(applied.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 2]);
    assert!(h.core.take_reconfig().is_none(), "handed over once");
    // The old version no longer matches; the new one does.
    let stale = h.reply(
        c,
        &reconfig(Some(&LINES[2][..LINES[2].len() - 1]), None, 0x1_0000_0000),
    );
    assert_eq!(stale.err, ErrorCode::BadVersion.code());
    let back = h.reply(
        c,
        &reconfig(Some(&LINES[2][..LINES[2].len() - 1]), None, zxid),
    );
    assert_eq!(back.err, 0);
    let body: GetDataResponse = back.decode();
    let text = format!("{}version={:x}", LINES.concat(), back.zxid);
    assert_eq!(body.data.as_deref(), Some(text.as_bytes()));
    assert_eq!(h.core.ensemble_config_text(), Some(text));
}

#[test]
fn the_config_watch_fires_on_a_reconfig() {
    let mut h = ensemble(true);
    let c = super_session(&mut h);
    let (w, _, _) = h.session(30000);
    assert_eq!(h.reply(w, &get_data("/zookeeper/config", true)).err, 0);
    assert_eq!(h.reply(c, &reconfig(None, Some("2"), -1)).err, 0);
    assert_eq!(
        h.events(w),
        [(event_type::NODE_DATA_CHANGED, "/zookeeper/config".into())]
    );
}

#[test]
fn refusals_follow_zookeepers_order_and_each_uses_a_zxid() {
    // Off: RECONFIGDISABLED before anything else, even for the superuser.
    let mut h = ensemble(false);
    let c = super_session(&mut h);
    let before = h.core.last_zxid();
    let r = h.reply(c, &reconfig(None, Some("3"), 12345));
    assert_eq!(r.err, ErrorCode::ReconfigDisabled.code());
    assert_eq!(r.zxid, before + 1, "a failed write still takes a zxid");

    let mut h = ensemble(true);
    let c = super_session(&mut h);
    let (anyone, _, _) = h.session(30000);
    let cases: [(Request, ErrorCode); 9] = [
        (reconfig(None, Some("3"), 12345), ErrorCode::BadVersion),
        (reconfig(None, Some("2,3"), -1), ErrorCode::BadArguments),
        (reconfig(None, Some("abc"), -1), ErrorCode::MarshallingError),
        (
            reconfig(Some("server.4=127.0.0.1:1"), None, -1),
            ErrorCode::BadArguments,
        ),
        (
            reconfig(Some("server.4=127.0.0.1:2888:3999;2184"), None, -1),
            ErrorCode::BadArguments,
        ),
        (
            whole("server.1=127.0.0.1:2888:3888;2181"),
            ErrorCode::BadArguments,
        ),
        (whole("tickTime=5"), ErrorCode::BadArguments),
        // Two of the three stop: a new membership without member 1 has no running quorum.
        (reconfig(None, Some("1"), -1), ErrorCode::NewConfigNoQuorum),
        // A member that is not one: no change, but a new version.
        (reconfig(None, Some("9"), -1), ErrorCode::Ok),
    ];
    h.core.set_running_members([1]);
    for (i, (req, code)) in cases.iter().enumerate() {
        if i == 8 {
            h.core.set_running_members([1, 2, 3]);
        }
        let r = h.reply(c, req);
        assert_eq!(r.err, code.code(), "case {i}: {req:?}");
    }
    h.core.take_reconfig();
    // NOAUTH comes last: a valid change by anyone but the superuser.
    assert_eq!(
        h.reply(anyone, &reconfig(None, Some("9,x"), 12345)).err,
        ErrorCode::BadVersion.code()
    );
    assert_eq!(
        h.reply(anyone, &reconfig(None, Some("3"), -1)).err,
        ErrorCode::NoAuth.code()
    );
    assert!(h.core.take_reconfig().is_none());
    assert!(h
        .core
        .ensemble_config_text()
        .is_some_and(|t| t.contains("server.3=")));
}

#[test]
fn a_new_member_counts_for_the_new_quorum_once_it_runs() {
    let mut h = ensemble(true);
    let c = super_session(&mut h);
    let four = "server.4=127.0.0.1:2891:3891:participant;127.0.0.1:2184";
    // Three of four voters run: a quorum of the new membership.
    assert_eq!(h.reply(c, &reconfig(Some(four), None, -1)).err, 0);
    h.core.take_reconfig();
    // With member 3 stopped, adding a fifth leaves two of five running: refused.
    h.core.set_running_members([1, 2]);
    let five = "server.5=127.0.0.1:2892:3892;127.0.0.1:2185";
    assert_eq!(
        h.reply(c, &reconfig(Some(five), None, -1)).err,
        ErrorCode::NewConfigNoQuorum.code()
    );
    // The whole-membership form: back to three, with member 3 an observer.
    let r = h.reply(
        c,
        &whole(
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181,\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.3=127.0.0.1:2890:3890:observer;127.0.0.1:2183",
        ),
    );
    assert_eq!(r.err, 0);
    let applied = h.core.take_reconfig().expect("a membership");
    assert_eq!(
        applied
            .iter()
            .map(|s| (s.id, s.observer))
            .collect::<Vec<_>>(),
        [(1, false), (2, false), (3, true)]
    );
}

#[test]
fn a_standalone_server_answers_unimplemented_with_reconfig_on() {
    let mut h = Harness::with_config(CoreConfig {
        reconfig_enabled: true,
        ..config()
    });
    let c = super_session(&mut h);
    assert_eq!(
        h.reply(c, &reconfig(None, Some("1"), -1)).err,
        ErrorCode::Unimplemented.code()
    );
    let mut h = Harness::new();
    let c = super_session(&mut h);
    assert_eq!(
        h.reply(c, &reconfig(None, Some("1"), -1)).err,
        ErrorCode::ReconfigDisabled.code()
    );
}

#[test]
fn a_reconfig_is_logged_as_zookeeper_logs_it() {
    let mut h = ensemble(true);
    let c = super_session(&mut h);
    h.core.set_logging(true);
    let bad = h.reply(c, &reconfig(None, Some("3"), 77));
    let good = h.reply(c, &reconfig(None, Some("3"), -1));
    let records: Vec<Bytes> = h.core.take_records().into_iter().map(|(_, r)| r).collect();
    assert_eq!(records.len(), 2);
    let mut r = Reader::new(records[0].clone());
    let header = disk::TxnHeader::read(&mut r).expect("header");
    assert_eq!(
        (header.txn_type, header.zxid),
        (disk::txn_type::ERROR, bad.zxid)
    );
    // The change: a reconfig header over a setData of /zookeeper/config with version -1.
    let mut r = Reader::new(records[1].clone());
    let header = disk::TxnHeader::read(&mut r).expect("header");
    assert_eq!(
        (header.txn_type, header.zxid),
        (disk::txn_type::RECONFIG, good.zxid)
    );
    let body = disk::SetDataTxn::read(&mut r).expect("a setData body");
    assert_eq!(
        (body.path.as_str(), body.version),
        ("/zookeeper/config", -1)
    );
    let reply: GetDataResponse = good.decode();
    assert_eq!(body.data, reply.data);
}
