//! Runs the fuzz targets' checks (the files in `fuzz/src/`, which the libFuzzer targets call)
//! in the normal test suite: on the golden frames captured from ZooKeeper, on every saved
//! input in `fuzz/regressions/TARGET/` (findings and a minimized corpus), and on a batch of
//! pseudo-random inputs. Long fuzzing is `scripts/fuzz.sh` (docs/fuzzing.md).

#[path = "../../fuzz/src/core_program.rs"]
mod core_program;
#[path = "../../fuzz/src/frame.rs"]
mod frame;
#[path = "../../fuzz/src/request.rs"]
mod request;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One fixture's client frames (with length prefixes) per connection.
type Connections = BTreeMap<String, Vec<Vec<u8>>>;

/// Client frames of each golden fixture.
fn golden() -> Vec<(String, Connections)> {
    let dir = repo().join("protocol/tests/fixtures");
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .collect();
    names.sort();
    for path in names {
        let mut conns = Connections::new();
        for line in std::fs::read_to_string(&path).expect("fixture").lines() {
            let Some((tag, hex)) = line.split_once(' ') else {
                continue;
            };
            if let Some(conn) = tag.strip_suffix('>') {
                let bytes = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                    .collect();
                conns.entry(conn.to_string()).or_default().push(bytes);
            }
        }
        out.push((path.display().to_string(), conns));
    }
    assert!(out.len() >= 5, "golden fixtures missing");
    out
}

/// Every saved input of one target.
fn saved(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = repo().join("fuzz/regressions").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries.map(|e| e.expect("entry").path()).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).expect("saved input");
            (p, data)
        })
        .collect()
}

/// Deterministic pseudo-random inputs.
fn random_inputs(count: usize, max_len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..count)
        .map(|_| {
            let len = (next() as usize) % max_len;
            (0..len).map(|_| next() as u8).collect()
        })
        .collect()
}

fn replay(target: &str, run: fn(&[u8]), extra: Vec<Vec<u8>>) {
    for (path, data) in saved(target) {
        let ok = std::panic::catch_unwind(|| run(&data));
        assert!(ok.is_ok(), "{target}: saved input {} fails", path.display());
    }
    for data in extra {
        run(&data);
    }
}

#[test]
fn frame_checks_hold() {
    let mut inputs = random_inputs(2000, 300, 11);
    for (_, conns) in golden() {
        for frames in conns.values() {
            let stream: Vec<u8> = frames.concat();
            for (cap, chunk) in [(5u8, 0u8), (5, 1), (5, 7), (4, 3), (1, 2)] {
                inputs.push([&[cap, chunk][..], &stream].concat());
            }
        }
    }
    replay("frame", frame::run, inputs);
}

#[test]
fn request_checks_hold() {
    let mut inputs = random_inputs(2000, 200, 12);
    for (_, conns) in golden() {
        for frames in conns.values() {
            inputs.extend(frames.iter().map(|f| f[4..].to_vec()));
        }
    }
    replay("request", request::run, inputs);
}

#[test]
fn core_checks_hold() {
    let mut inputs = random_inputs(300, 2000, 13);
    for (_, conns) in golden() {
        // The fixture's connections replayed as raw frames (the core target's input format).
        let mut program = Vec::new();
        for (idx, frames) in conns.values().enumerate() {
            program.extend([0, idx as u8]);
            for f in frames {
                let payload = &f[4..];
                program.extend([1, idx as u8]);
                program.extend((payload.len() as u16).to_be_bytes());
                program.extend(payload);
                program.extend([3, 0, 40]);
            }
        }
        inputs.push(program);
    }
    replay("core", core_program::run, inputs);
}
