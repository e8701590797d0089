#!/usr/bin/env bash
# Builds and tests what zkd ships (run by scripts/test.sh), all from one build of the static
# release binary (scripts/release.sh all: tarball, wheel and jar):
#   * dist:   the tarball's .sha256 matches; its binary is statically linked (`file`, `ldd`),
#             and serves kazoo started with `env -i` (no environment, empty PATH) and, as
#             root, chrooted into an otherwise empty directory; `zkd --version`, `srvr` and
#             `envi` name the commit and the build date (scripts/check-binary.py);
#   * python: the `zkd` wheel (`pip wheel ./python`: the static binary plus the zkd package and
#             pytest plugin) installed with --no-index into a fresh virtualenv, then
#             python/tests run there with kazoo through the plugin's fixtures;
#   * java:   the jar target/java/zkd-testing-<version>.jar alone, with no zkd on PATH and no
#             ZKD_BINARY: its Curator tests (server and cluster) and the JUnit 5 extension's
#             run on the binary it carries, extracted to a fresh per-user cache, two JVMs
#             starting at once sharing one extraction, and, as root, a second local user's
#             attacks on that cache (java/zkd-testing/build.sh, cache-safety-test.sh);
#   * rust:   `cargo package` of the publishable crates, then `cargo install --offline` of the
#             packaged `zkd` crate (its path dependencies from their packages too) into a
#             temporary root, and that binary serves kazoo.
#
#   usage: scripts/test-packages.sh [dist|python|java|rust]...   (default: all four)
#
# Needs what scripts/install-test-deps.sh installs (maturin, a JDK, Debian's Curator and
# JUnit 5 jars, kazoo). Environment: PYTHON (default python3), KAZOO_VERSION (2.11.0),
# PYTEST_VERSION (9.2.0), ZKD_RELEASE_PROFILE (release; see scripts/release.sh).
#
# Time: the release build (fat LTO) is the long part: 6.5 CPU-minutes from scratch (about 4
# minutes on 2 idle cores), after a new commit only zkd-server, zkd and the final link; the
# wheel and the jar reuse it. The `cargo install` check builds with --debug and no debug info
# in target/packages/install-target: 3.7 CPU-minutes from scratch, after a new commit the
# four zkd crates. The tests themselves take about 2 minutes (mostly the Java suites).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
KAZOO_VERSION=${KAZOO_VERSION:-2.11.0}
PYTEST_VERSION=${PYTEST_VERSION:-9.2.0}
WORK=$ROOT/target/packages

log() { printf '[test-packages] %s\n' "$*"; }

# The commit and build date the release binary must report (release.sh builds it with
# ZKD_BUILD_EPOCH at the commit's date).
commit=$(git rev-parse HEAD)
export ZKD_BUILD_EPOCH=${ZKD_BUILD_EPOCH:-${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}}
built_on=$(date -u -d "@$ZKD_BUILD_EPOCH" '+%Y-%m-%d %H:%M')
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
released=0

release() {
    [ $released = 1 ] && return
    log "release: scripts/release.sh all (tarball, wheel, jar from one build)"
    bash scripts/release.sh all
    released=1
}

dist() {
    release
    local name=zkd-$version-x86_64-linux
    log "dist: $name.tar.gz"
    (cd target/dist && sha256sum --quiet -c "$name.tar.gz.sha256")
    rm -rf "$WORK/dist" && mkdir -p "$WORK/dist"
    tar -xzf "target/dist/$name.tar.gz" -C "$WORK/dist"
    [ "$(cd "$WORK/dist/$name" && ls)" = "$(printf 'LICENSE\nREADME.md\nzkd')" ] \
        || { log "FAIL: the tarball holds $(cd "$WORK/dist/$name" && ls | tr '\n' ' ')"; exit 1; }
    local bin=$WORK/dist/$name/zkd kind deps
    kind=$(file -b "$bin")
    deps=$(ldd "$bin" 2>&1 || true)
    case "$kind" in *"static-pie linked"* | *"statically linked"*) ;; *) log "FAIL: file: $kind"; exit 1 ;; esac
    case "$deps" in *"statically linked"* | *"not a dynamic executable"*) ;; *) log "FAIL: ldd: $deps"; exit 1 ;; esac
    log "dist: file: $kind"
    log "dist: ldd: $deps"
    "$PY" scripts/check-binary.py "$bin" --commit "$commit" --date "$built_on"
    if [ "$(id -u)" = 0 ]; then
        "$PY" scripts/check-binary.py "$bin" --commit "$commit" --date "$built_on" --chroot
    else
        log "dist: not root, so the empty-chroot start is not checked (env -i was)"
    fi
}

python_wheel() {
    "$PY" -m maturin --version >/dev/null 2>&1 \
        || { log "maturin is missing for $PY; run scripts/install-test-deps.sh"; exit 3; }
    release
    rm -rf "$WORK/venv"
    local wheel
    wheel=$(ls target/dist/zkd-*.whl)
    log "python: fresh virtualenv, installing $(basename "$wheel") with --no-index"
    "$PY" -m venv "$WORK/venv"
    local vpy=$WORK/venv/bin/python
    "$vpy" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"
    "$vpy" -m pip install --quiet --disable-pip-version-check \
        "kazoo==$KAZOO_VERSION" "pytest==$PYTEST_VERSION"
    local bin kind
    bin=$("$vpy" -c 'import zkd; print(zkd.find_binary())')
    kind=$(file -b "$bin")
    case "$kind" in *"static-pie linked"* | *"statically linked"*) ;; *) log "FAIL: the wheel's binary: $kind"; exit 1 ;; esac
    log "python: pytest python/tests (binary: $bin, ${kind%%,*})"
    (cd python/tests && env -u ZKD_BINARY PYTHONDONTWRITEBYTECODE=1 \
        timeout -k 10 600 "$vpy" -m pytest -p no:cacheprovider -q .)
}

java_helper() {
    release
    local jar=target/java/zkd-testing-$version.jar
    log "java: $jar alone (no zkd on PATH, no ZKD_BINARY): Curator and JUnit 5 tests"
    OUT=$WORK/java ZKD_TESTING_JAR=$ROOT/$jar bash java/zkd-testing/build.sh test
}

rust_package() {
    log "rust: cargo package for zkd-protocol, zkd-core, zkd-server, zkd"
    rm -f target/package/*.crate
    cargo package --quiet -p zkd-protocol -p zkd-core -p zkd-server -p zkd --allow-dirty \
        --no-verify
    ls target/package/*.crate | sed 's/^/[test-packages]   /'
    # `cargo install` of the packaged zkd, offline; its path dependencies resolve to their
    # packages (unpacked outside this workspace) instead of a registry that lacks them.
    local crates root
    install_tmp=$(mktemp -d)
    trap 'rm -rf "$install_tmp"' EXIT
    crates=$install_tmp/crates root=$install_tmp/root
    mkdir -p "$crates"
    for c in zkd-protocol zkd-core zkd-server zkd; do
        tar -xzf "target/package/$c-$version.crate" -C "$crates"
    done
    log "rust: cargo install --offline --debug of the packaged zkd into a temporary root"
    cargo install --quiet --offline --debug --path "$crates/zkd-$version" --root "$root" \
        --target-dir "$ROOT/target/packages/install-target" \
        --config "patch.crates-io.zkd-server.path=\"$crates/zkd-server-$version\"" \
        --config "patch.crates-io.zkd-core.path=\"$crates/zkd-core-$version\"" \
        --config "patch.crates-io.zkd-protocol.path=\"$crates/zkd-protocol-$version\"" \
        --config 'profile.dev.debug=0'
    # The packaged crate names the commit cargo package recorded; its date is its build's.
    "$PY" scripts/check-binary.py "$root/bin/zkd" --commit "$commit"
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(dist python java rust)
for part in "${parts[@]}"; do
    case "$part" in
        dist) dist ;;
        python) python_wheel ;;
        java) java_helper ;;
        rust) rust_package ;;
        *) echo "usage: $0 [dist|python|java|rust]..." >&2; exit 2 ;;
    esac
done
log "all package checks passed: ${parts[*]}"
