#!/usr/bin/env bash
# Builds and runs the coverage-guided fuzz targets in fuzz/ (libFuzzer, through the pinned
# libfuzzer-sys crate in fuzz/Cargo.lock) on the stable toolchain: the coverage
# instrumentation flags used here are all stable, and no sanitizer is needed for code without
# `unsafe`. fuzz/ is a workspace of its own, so normal builds never compile it.
#
#   scripts/fuzz.sh build                      build every target (instrumented, release)
#   scripts/fuzz.sh run TARGET [SECS] [ARGS]   fuzz one target for SECS seconds (0 = forever),
#                                              extra ARGS go to libFuzzer (e.g. -jobs=2)
#   scripts/fuzz.sh ci [SECS]                  every target for SECS seconds each (default 45)
#   scripts/fuzz.sh seeds                      (re)write the seed corpus from the golden frames
#   scripts/fuzz.sh repro TARGET FILE...       run a target once on saved inputs (crash files)
#
# Targets: frame, request, core. The growing corpus lives in fuzz/corpus/TARGET (not in git),
# crashes in fuzz/artifacts/TARGET. Environment: FUZZ_NICE (default 19), FUZZ_MAX_LEN.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGETS=(frame request core)
HOST="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="$ROOT/fuzz/target"
BIN_DIR="$CARGO_TARGET_DIR/$HOST/release"
NICE="${FUZZ_NICE:-19}"

log() { printf '[fuzz] %s\n' "$*" >&2; }

build() {
    if ! command -v c++ >/dev/null 2>&1; then
        log "a C++ compiler is needed to build libFuzzer (apt-get install g++, or run scripts/install-test-deps.sh)"
        exit 1
    fi
    # --target keeps these flags off build scripts and proc macros.
    RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing -Cdebug-assertions -Coverflow-checks ${RUSTFLAGS:-}" \
        nice -n "$NICE" cargo build --release --manifest-path fuzz/Cargo.toml \
        --target "$HOST" --bins
}

seeds() {
    python3 fuzz/make_seeds.py protocol/tests/fixtures fuzz/seeds
}

run() {
    local target="$1" secs="${2:-0}"
    shift 2 || shift $#
    case " ${TARGETS[*]} " in *" $target "*) ;; *) log "unknown target $target (${TARGETS[*]})"; exit 2 ;; esac
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    local args=(-artifact_prefix="fuzz/artifacts/$target/" -print_final_stats=1)
    if [ "$secs" != 0 ]; then args+=(-max_total_time="$secs"); fi
    if [ -n "${FUZZ_MAX_LEN:-}" ]; then args+=(-max_len="$FUZZ_MAX_LEN"); fi
    log "fuzzing $target for ${secs}s (0 = until stopped)"
    nice -n "$NICE" "$BIN_DIR/$target" "${args[@]}" "$@" "fuzz/corpus/$target" "fuzz/seeds/$target"
}

case "${1:-}" in
    build) build ;;
    seeds) seeds ;;
    run)
        [ $# -ge 2 ] || { log "usage: scripts/fuzz.sh run TARGET [SECS] [LIBFUZZER ARGS]"; exit 2; }
        shift
        seeds
        build
        run "$@"
        ;;
    ci)
        secs="${2:-45}"
        seeds
        build
        passed=0
        failed=0
        for t in "${TARGETS[@]}"; do
            out="fuzz/artifacts/$t.log"
            mkdir -p fuzz/artifacts
            if run "$t" "$secs" >"$out" 2>&1; then
                passed=$((passed + 1))
                log "$t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$out") executions in ${secs}s, no finding"
            else
                failed=$((failed + 1))
                tail -n 60 "$out" >&2
                log "$t: FINDING (input saved under fuzz/artifacts/$t/; replay with scripts/fuzz.sh repro $t FILE)"
            fi
        done
        echo "fuzz: $passed passed, $failed failed"
        [ "$failed" -eq 0 ]
        ;;
    repro)
        [ $# -ge 3 ] || { log "usage: scripts/fuzz.sh repro TARGET FILE..."; exit 2; }
        target="$2"
        shift 2
        build
        "$BIN_DIR/$target" "$@"
        ;;
    *)
        sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
