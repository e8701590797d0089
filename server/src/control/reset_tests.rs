//! The control plane's reset on a running engine: a big tree goes in slices, each its own
//! transaction taken under its own hold of the core's lock.

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
    let shared = Arc::new(Shared::new(&config, 0, core));
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
