//! What a lagging member costs in memory: builds a tree in an embedded core, measures the
//! process's resident memory before and after one member starts lagging (its replica), and
//! after writes it has not applied yet (the history kept for it). Run with
//! `cargo run --release -p zkd-bench --example lag_memory [NODES [WRITES]]`.

use bytes::Bytes;
use zkd_core::{open_test_session, Core, CoreConfig, Handshake, Lag, RecordingOutbox};
use zkd_protocol::{Acl, Create, OpCode, Request, SetDataRequest};

fn rss_bytes() -> u64 {
    let pid = std::process::id();
    zkd_bench::proc::rss_bytes(pid).unwrap_or(0)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let nodes = args.next().and_then(Result::ok).unwrap_or(100_000);
    let writes = args.next().and_then(Result::ok).unwrap_or(10_000);
    let mut core = Core::new(CoreConfig::default(), 1_000);
    // Counts only: what the core sends must not add to the memory measured.
    let out = &mut RecordingOutbox::counting();
    let (conn, hs) = open_test_session(&mut core, 1, 30_000, 1_000, out);
    assert_eq!(hs, Handshake::Established);
    let send = |core: &mut Core, req: Request| {
        let frame = req.to_frame(1);
        core.request(
            conn,
            frame.slice(4..),
            1_000,
            &mut RecordingOutbox::counting(),
        );
    };
    let create = |path: String, data: Bytes| {
        Request::Create(Create {
            op: OpCode::Create,
            path,
            data: Some(data),
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: -1,
        })
    };
    let payload = Bytes::from(vec![b'x'; 100]);
    let dirs = nodes.div_ceil(1000);
    for d in 0..dirs {
        send(&mut core, create(format!("/d{d}"), Bytes::new()));
    }
    for i in 0..nodes {
        send(
            &mut core,
            create(format!("/d{}/n{i}", i / 1000), payload.clone()),
        );
    }
    let base = rss_bytes();
    core.set_member_lag(2, Lag::Stalled, 1_000, out);
    let replica = rss_bytes();
    for i in 0..writes {
        let req = Request::SetData(SetDataRequest {
            path: format!("/d{}/n{}", (i % nodes) / 1000, i % nodes),
            data: Some(payload.clone()),
            version: -1,
        });
        send(&mut core, req);
    }
    let history = rss_bytes();
    let total = core.node_count() as u64;
    println!(
        "nodes in the tree: {total} (100-byte data each), process RSS {:.1} MiB",
        mib(base)
    );
    println!(
        "replica of one lagging member: +{:.1} MiB, {} bytes per node",
        mib(replica - base),
        (replica - base) / total
    );
    println!(
        "history kept for it: {writes} unapplied setData: +{:.1} MiB, {} bytes per transaction",
        mib(history.saturating_sub(replica)),
        history.saturating_sub(replica) / writes.max(1) as u64
    );
}
