#!/usr/bin/env bash
# Builds and tests what zkd ships to other ecosystems (run by scripts/test.sh):
#   * python: the `zkd` wheel (the binary plus the zkd package and pytest plugin), built with
#     maturin from the debug profile, installed with --no-index into a fresh virtualenv, then
#     python/tests run there with kazoo through the plugin's fixtures;
#   * java:   java/zkd-testing compiled with javac, its Curator tests (server and cluster) and
#             the JUnit 5 extension test run against the binary;
#   * rust:   `cargo package` of the publishable crates (metadata, versions of path dependencies).
#
#   usage: scripts/test-packages.sh [python|java|rust]...   (default: all three)
#
# Needs what scripts/install-test-deps.sh installs (maturin, a JDK, Debian's Curator jars).
# Environment: PYTHON (default python3), KAZOO_VERSION (2.11.0), PYTEST_VERSION (9.2.0).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
KAZOO_VERSION=${KAZOO_VERSION:-2.11.0}
PYTEST_VERSION=${PYTEST_VERSION:-9.2.0}
WORK=$ROOT/target/packages

log() { printf '[test-packages] %s\n' "$*"; }

python_wheel() {
    "$PY" -m maturin --version >/dev/null 2>&1 \
        || { log "maturin is missing for $PY; run scripts/install-test-deps.sh"; exit 3; }
    rm -rf "$WORK/wheels" "$WORK/venv"
    log "python: building the wheel (maturin $("$PY" -m maturin --version | cut -d' ' -f2), dev profile)"
    (cd python && "$PY" -m maturin build --quiet --profile dev --out "$WORK/wheels")
    local wheel
    wheel=$(ls "$WORK"/wheels/zkd-*.whl)
    log "python: fresh virtualenv, installing $(basename "$wheel") with --no-index"
    "$PY" -m venv "$WORK/venv"
    local vpy=$WORK/venv/bin/python
    "$vpy" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"
    "$vpy" -m pip install --quiet --disable-pip-version-check \
        "kazoo==$KAZOO_VERSION" "pytest==$PYTEST_VERSION"
    log "python: pytest python/tests (binary: $("$vpy" -c 'import zkd; print(zkd.find_binary())'))"
    (cd python/tests && env -u ZKD_BINARY PYTHONDONTWRITEBYTECODE=1 \
        timeout -k 10 600 "$vpy" -m pytest -p no:cacheprovider -q .)
}

java_helper() {
    log "java: building zkd-testing and running its tests"
    cargo build --quiet -p zkd
    OUT=$WORK/java ZKD_BINARY=$ROOT/target/debug/zkd bash java/zkd-testing/build.sh test
}

rust_package() {
    log "rust: cargo package for zkd-protocol, zkd-server, zkd"
    cargo package --quiet -p zkd-protocol -p zkd-server -p zkd --allow-dirty --no-verify
    ls target/package/*.crate | sed 's/^/[test-packages]   /'
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(python java rust)
for part in "${parts[@]}"; do
    case "$part" in
        python) python_wheel ;;
        java) java_helper ;;
        rust) rust_package ;;
        *) echo "usage: $0 [python|java|rust]..." >&2; exit 2 ;;
    esac
done
log "all package checks passed: ${parts[*]}"
