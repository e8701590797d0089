//! The core's own cost per request, without sockets or a runtime: an embedded core with 64
//! nodes of 1 KiB answers `N` getData or setData requests (one session, frames encoded
//! beforehand). Run it under an instruction counter and subtract a run with `N` = 0:
//! `valgrind --tool=callgrind target/release/examples/core_cost set 100000`
//! (`cargo build --release -p zkd-bench --example core_cost` first).

use bytes::Bytes;
use zkd_core::{open_test_session, ConnId, Core, CoreConfig, Handshake, Outbox, Release};
use zkd_protocol::{Acl, Create, OpCode, PathWatchRequest, Request, SetDataRequest};

/// Counts the bytes the core sends and keeps nothing.
struct Discard(usize);

impl Outbox for Discard {
    fn send(&mut self, _conn: ConnId, frame: Bytes, _release: Release) {
        self.0 += frame.len();
    }
    fn close(&mut self, _conn: ConnId, _release: Release) {}
}

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_else(|| "set".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    if op != "get" && op != "set" {
        eprintln!("usage: core_cost get|set [REQUESTS]");
        std::process::exit(2);
    }
    let mut core = Core::new(CoreConfig::default(), 1_000);
    let out = &mut Discard(0);
    let (conn, hs) = open_test_session(&mut core, 1, 30_000, 1_000, out);
    assert_eq!(hs, Handshake::Established);
    let payload = Bytes::from(vec![b'x'; 1024]);
    for i in 0..64 {
        let req = Request::Create(Create {
            op: OpCode::Create,
            path: format!("/n{i}"),
            data: Some(payload.clone()),
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: -1,
        });
        core.request(conn, req.to_frame(1).slice(4..), 1_000, out);
    }
    let frames: Vec<Bytes> = (0..64)
        .map(|i| {
            let path = format!("/n{i}");
            let req = if op == "set" {
                Request::SetData(SetDataRequest {
                    path,
                    data: Some(payload.clone()),
                    version: -1,
                })
            } else {
                Request::GetData(PathWatchRequest { path, watch: false })
            };
            req.to_frame(i + 2).slice(4..)
        })
        .collect();
    let before = out.0;
    for i in 0..n {
        core.request(conn, frames[i % frames.len()].clone(), 1_000, out);
    }
    println!("{n} {op} requests, {} reply bytes", out.0 - before);
}
