//! How fast the transaction log's and snapshot's Adler-32 checksum runs: zkd's own
//! (`zkd_protocol::Adler32`), a copy of the byte-at-a-time loop it used before, and the
//! `adler2` and `simd-adler32` crates, on the same buffers, taking turns within each round.
//! Prints the median ns/byte per implementation and its speed relative to the byte loop,
//! with the machine's load. Run with
//! `cargo run --release -p zkd-bench --example adler32 [ROUNDS]`.

use std::hint::black_box;
use std::time::Instant;

use zkd_bench::proc::Bystanders;
use zkd_bench::util::median;
use zkd_testkit::frame::garbage;

/// The byte-at-a-time loop with the modulo deferred every `NMAX` bytes, as zkd had it.
struct ByteLoop {
    a: u32,
    b: u32,
}

impl ByteLoop {
    fn new() -> ByteLoop {
        ByteLoop { a: 1, b: 0 }
    }

    fn update(&mut self, data: &[u8]) {
        for chunk in data.chunks(5552) {
            for &byte in chunk {
                self.a += u32::from(byte);
                self.b += self.a;
            }
            self.a %= 65521;
            self.b %= 65521;
        }
    }

    fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

/// One implementation: sums `pieces` of `buf` in order, from a fresh state, and returns the
/// checksum.
struct Imp {
    name: &'static str,
    sum: fn(&[u8], &[usize]) -> u32,
}

fn byte_loop(buf: &[u8], pieces: &[usize]) -> u32 {
    let mut s = ByteLoop::new();
    each_piece(buf, pieces, |p| s.update(p));
    s.value()
}

fn zkd(buf: &[u8], pieces: &[usize]) -> u32 {
    let mut s = zkd_protocol::disk::Adler32::new();
    each_piece(buf, pieces, |p| s.update(p));
    s.value()
}

fn adler2(buf: &[u8], pieces: &[usize]) -> u32 {
    let mut s = adler2::Adler32::new();
    each_piece(buf, pieces, |p| s.write_slice(p));
    s.checksum()
}

fn simd(buf: &[u8], pieces: &[usize]) -> u32 {
    let mut s = simd_adler32::Adler32::new();
    each_piece(buf, pieces, |p| s.write(p));
    s.finish()
}

/// Calls `f` on consecutive pieces of `buf` whose lengths cycle through `pieces` (the whole
/// buffer at once when `pieces` is empty).
fn each_piece(buf: &[u8], pieces: &[usize], mut f: impl FnMut(&[u8])) {
    if pieces.is_empty() {
        f(buf);
        return;
    }
    let mut at = 0;
    for &n in pieces.iter().cycle() {
        if at >= buf.len() {
            break;
        }
        let end = (at + n).min(buf.len());
        f(&buf[at..end]);
        at = end;
    }
}

struct Case {
    name: &'static str,
    len: usize,
    pieces: &'static [usize],
}

/// The sizes a snapshot reader passes per znode: path length and path, data length and
/// data, ACL reference, then the stat's fields one by one.
const SNAPSHOT_READS: &[usize] = &[4, 24, 4, 100, 8, 8, 8, 8, 8, 8, 4, 4, 4, 8, 4, 8];

const CASES: &[Case] = &[
    Case {
        name: "log entry 150 B",
        len: 150,
        pieces: &[],
    },
    Case {
        name: "log entry 1 KiB",
        len: 1024,
        pieces: &[],
    },
    Case {
        name: "snapshot 1 MiB, one call",
        len: 1 << 20,
        pieces: &[],
    },
    Case {
        name: "snapshot 1 MiB, per field",
        len: 1 << 20,
        pieces: SNAPSHOT_READS,
    },
];

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(201);
    let imps = [
        Imp {
            name: "byte loop (old)",
            sum: byte_loop,
        },
        Imp {
            name: "zkd Adler32",
            sum: zkd,
        },
        Imp {
            name: "adler2 2.0",
            sum: adler2,
        },
        Imp {
            name: "simd-adler32 0.3",
            sum: simd,
        },
    ];
    let load_before = loadavg();
    let others = Bystanders::start(&[]);
    println!("Adler-32, {rounds} rounds, implementations in turn (rotating order) within each round; ~4 MiB summed per timing");
    println!("load average before: {load_before}");
    for (ci, case) in CASES.iter().enumerate() {
        let buf = garbage(case.len, (0x9E37_79B9_7F4A_7C15 ^ ci as u64) | 1);
        let expected = byte_loop(&buf, &[]);
        for imp in &imps {
            assert_eq!(
                (imp.sum)(&buf, case.pieces),
                expected,
                "{} disagrees on {}",
                imp.name,
                case.name
            );
        }
        let iters = ((4 << 20) / case.len).max(1);
        let mut ns_per_byte = vec![Vec::with_capacity(rounds); imps.len()];
        for round in 0..rounds {
            for k in 0..imps.len() {
                let i = (round + k) % imps.len();
                let f = imps[i].sum;
                let start = Instant::now();
                let mut acc = 0u32;
                for _ in 0..iters {
                    acc ^= f(black_box(&buf), black_box(case.pieces));
                }
                black_box(acc);
                let ns = start.elapsed().as_nanos() as f64;
                ns_per_byte[i].push(ns / (iters * case.len) as f64);
            }
        }
        println!("\n{}:", case.name);
        let base = median(&ns_per_byte[0]);
        for (imp, samples) in imps.iter().zip(&ns_per_byte) {
            let m = median(samples);
            println!(
                "  {:<18} {:>7.4} ns/B  {:>6.2} GB/s  {:>5.2}x the byte loop",
                imp.name,
                m,
                1.0 / m,
                base / m
            );
        }
    }
    let busy = others.map(|o| o.cores(&[])).unwrap_or(f64::NAN);
    println!(
        "\nload average after: {}; other processes kept {busy:.2} of {} cores busy during the run",
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
