//! The control plane's operations on everything at once, on a running engine: a big tree
//! is reset, and every session expired, in slices, each under its own hold of the core's
//! lock (a reset slice also its own transaction).

use std::sync::Arc;

use crate::config::Config;
use crate::core::{Core, FixtureKind, FixtureNode, RESET_SLICE};
use crate::engine::Shared;

fn persistent(path: String) -> FixtureNode {
    FixtureNode {
        path,
        data: None,
        acl: Vec::new(),
        kind: FixtureKind::Persistent,
    }
}

#[test]
fn a_big_tree_is_reset_a_slice_at_a_time() {
    let config = Config::default();
    let mut core = Core::new(config.core_config(), 0);
    let mut nodes = vec![persistent("/wide".into()), persistent("/deep".into())];
    nodes.extend((0..3 * RESET_SLICE).map(|i| persistent(format!("/wide/n{i}"))));
    let mut deep = String::from("/deep");
    for i in 0..20 {
        deep.push_str(&format!("/d{i}"));
        nodes.push(persistent(deep.clone()));
    }
    let total = nodes.len();
    core.apply_fixture(&nodes, 0).unwrap();
    let shared = Arc::new(Shared::new(&config, 0, core, None));
    let before = shared.inspect(|c, _| c.last_zxid()).unwrap();
    assert_eq!(shared.inspect(|c, _| c.reset_pending()).unwrap(), total);

    assert_eq!(super::reset(&shared, false).unwrap(), total);

    let after = shared.inspect(|c, _| c.last_zxid()).unwrap();
    assert_eq!(
        (after - before) as usize,
        total.div_ceil(RESET_SLICE),
        "one transaction per slice"
    );
    let (left, pending) = shared
        .inspect(|c, _| (c.summary(0).znode_count, c.reset_pending()))
        .unwrap();
    assert_eq!(pending, 0);
    assert_eq!(left, 4, "/, /zookeeper and its two children");
    assert_eq!(super::reset(&shared, false).unwrap(), 0);
    assert_eq!(shared.inspect(|c, _| c.last_zxid()).unwrap(), after);
}

/// Expiring every session takes the core's lock once per slice of sessions, not once for
/// all of them.
#[test]
fn every_session_is_expired_a_slice_at_a_time() {
    use crate::core::RecordingOutbox;
    let config = Config::default();
    let mut core = Core::new(config.core_config(), 0);
    let sessions = 2 * super::SLICE + 10;
    let mut out = RecordingOutbox::counting();
    for i in 0..sessions {
        // Each from an address of its own, under the per-address connection limit.
        let remote = format!("127.0.{}.{}:5000", i / 200, i % 200 + 1)
            .parse()
            .expect("an address");
        let conn = core.open_connection(remote, 0).expect("a connection");
        let req = zkd_protocol::ConnectRequest::new_session(30_000);
        core.handshake(conn, zkd_protocol::to_bytes(&req), 0, &mut out);
    }
    let shared = Arc::new(Shared::new(&config, 0, core, None));
    assert_eq!(
        shared.inspect(|c, _| c.session_ids().len()).unwrap(),
        sessions
    );
    let before = crate::engine::HOLDS.with(|h| h.get());
    assert_eq!(super::expire_all_sessions(&shared).unwrap(), sessions);
    let holds = crate::engine::HOLDS.with(|h| h.get()) - before;
    // One to list the sessions, one per slice (and at most one more, for the clock).
    let slices = sessions.div_ceil(super::SLICE);
    assert!(
        (1 + slices..=2 + slices).contains(&(holds as usize)),
        "{holds} holds for {slices} slices"
    );
    assert!(shared.inspect(|c, _| c.session_ids().is_empty()).unwrap());
}
