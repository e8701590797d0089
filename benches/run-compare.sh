#!/usr/bin/env bash
# The side-by-side run BENCHMARKS.md is written from: zkd and Apache ZooKeeper (3.9.3, or
# 3.8.0 with ZKD_ZOOKEEPER_VERSION=3.8), every
# group (footprint, throughput, fan-out with its floor, herd, durable writes, and the
# throughput and durable floors: `--only floor`), medians of 3 rounds, every
# target checked. Run it from a checkout of main on a quiet machine. It builds the release
# binaries, then writes bench-results/compare.{txt,md,csv}, the SVG plots and the progress
# lines (bench-results/compare.log).
#
# Duration: one round of every group took about 6 minutes on a busy 2-core machine
# (footprint 1.5, throughput 1.5, fan-out 0.5, herd 2.5; the durable group adds about 1.5:
# three fresh servers x three shapes x 8 s), so 3 rounds take about 22 minutes,
# plus repeats of measurements during which other processes were busy (at most 3 runs each,
# see --max-bystander-cores; on a quiet machine there are few). No new item starts after
# --budget-minutes (90).
#
# Extra arguments go to `zkd-bench compare`, e.g. `--only footprint,fanout`, `--rounds 5`,
# `--attempts 1`, `--server-cpus '0;0,1'` (throughput with the server pinned to each CPU
# set), `--durable-dir DIR` (the disk the durable group writes to).
set -euo pipefail
cd "$(dirname "$0")/.."

# 19 000 idle sessions and the concurrent-sessions probe need 20 000 descriptors.
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 20000 ]; then
    echo "run-compare: the descriptor hard limit is $hard; the footprint needs 20000 (ulimit -Hn)" >&2
    exit 2
fi

# zkd is measured as the README builds it: `cargo build --release`, dynamically linked (the
# release tarball's statically linked binary is smaller still at idle).
cargo build --release -p zkd -p zkd-bench
zkd_bin="$PWD/target/release/zkd"
mkdir -p bench-results
started=$(date +%s)
target/release/zkd-bench compare --zkd-bin "$zkd_bin" --out bench-results "$@" 2>&1 |
    tee bench-results/compare.log
echo "run-compare: $(( ($(date +%s) - started) / 60 )) minutes" >&2
