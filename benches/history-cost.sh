#!/usr/bin/env bash
# The history's cost: zkd with the history on (the default) and off (--history-events 0),
# taking turns, each measured by `zkd-bench throughput` (getData and setData, 64 sessions x 8
# in flight) on a fresh server, ROUNDS times; prints one line per run and the on/off ratio of
# the medians, and each server's peak RSS.
#
# With PIN=1 the server runs on CPU 0 alone and the load generator on the other CPUs, so the
# server's CPU is what limits a run and rounds do not trade CPUs between the two.
#
#   usage: [PIN=1] benches/history-cost.sh [ROUNDS] > bench-results/.../history-cost.txt
#   (needs target/release/zkd and target/release/zkd-bench: cargo build --release -p zkd -p zkd-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SERVER_ON=()
CLIENT_ON=()
if [ "${PIN:-0}" = 1 ]; then
    last=$(($(nproc) - 1))
    if [ "$last" -lt 1 ]; then
        echo "PIN=1 needs two CPUs or more" >&2
        exit 2
    fi
    SERVER_ON=(taskset -c 0)
    CLIENT_ON=(taskset -c "1-$last")
fi
ZKD=target/release/zkd
BENCH=target/release/zkd-bench
run() { # mode workload -> ops/s
    local mode=$1 workload=$2 args=() out pid port
    [ "$mode" = off ] && args=(--history-events 0)
    out=$(mktemp)
    "${SERVER_ON[@]}" "$ZKD" --port 0 --log warn --max-client-cnxns 0 --max-total-outbound-bytes 17179869184 "${args[@]}" >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/^zkd listening on [^ ]*:\([0-9]*\)$/\1/p' "$out" | head -1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    local report ops cpu rss
    report=$("${CLIENT_ON[@]}" "$BENCH" throughput --addr "127.0.0.1:$port" --pid "$pid" --workload "$workload" \
        --warmup 2 --duration 5 2>/dev/null)
    ops=$(echo "$report" | awk '$4 == "ops/s" {print $5}')
    cpu=$(echo "$report" | awk '/server CPU per op/ {print $(NF-1)}')
    rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -f "$out"
    echo "$mode $workload ${ops:-?} ops/s cpu_per_op_us=${cpu:-?} peak_rss_kib=$rss"
}
declare -A all
for r in $(seq "$ROUNDS"); do
    for workload in get set; do
        for mode in on off; do
            line=$(run "$mode" "$workload")
            echo "round $r: $line"
            all[$mode-$workload]+="$(echo "$line" | awk '{print $3}') "
        done
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for workload in get set; do
    on=$(echo "${all[on-$workload]}" | median)
    off=$(echo "${all[off-$workload]}" | median)
    echo "$workload: median ops/s history on $on, off $off, on/off $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a/b}')"
done
