#!/usr/bin/env bash
# Builds what a release offers, from one build of a statically linked zkd for x86_64 Linux:
#   tarball  target/dist/zkd-<version>-x86_64-linux.tar.gz (zkd, README.md, LICENSE) and its
#            .sha256 (check with `sha256sum -c` in target/dist)
#   wheel    target/dist/zkd-<version>-py3-none-<platform>.whl (`pip wheel ./python`: the same
#            static binary plus the zkd Python package and pytest plugin)
#   jar      target/java/zkd-testing-<version>.jar (scripts/package-java.sh: the Java helper,
#            its JUnit 5 extension and the binary as a resource)
#
#   usage: scripts/release.sh [tarball|wheel|jar|all]...   (default: tarball)
#
# The binary links glibc statically (`-C target-feature=+crt-static`, applied to the final
# link only, exactly as the wheel's build applies it, so the wheel reuses this build) and is
# stripped. It maps no shared library, so it runs on any x86_64 Linux kernel without a Rust
# toolchain or C libraries (see docs/install.md for why glibc rather than musl).
#
# Environment:
#   ZKD_BUILD_EPOCH     build date (seconds since 1970) the binary reports and the tarball's
#                       file times (default: SOURCE_DATE_EPOCH if set, else the date of the
#                       checked-out commit, so every build of a commit reports the same date)
#   ZKD_RELEASE_PROFILE cargo profile (default: release, fat LTO, several minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PROFILE=${ZKD_RELEASE_PROFILE:-release}
DIST=$ROOT/target/dist

log() { printf '[release] %s\n' "$*"; }
fail() { printf 'release: %s\n' "$*" >&2; exit 1; }

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tarball)
want_tarball=0 want_wheel=0 want_jar=0
for part in "${parts[@]}"; do
    case "$part" in
        tarball) want_tarball=1 ;;
        wheel) want_wheel=1 ;;
        jar) want_jar=1 ;;
        all) want_tarball=1 want_wheel=1 want_jar=1 ;;
        *) echo "usage: $0 [tarball|wheel|jar|all]..." >&2; exit 2 ;;
    esac
done

host=$(rustc -vV | sed -n 's/^host: //p')
[ "$host" = x86_64-unknown-linux-gnu ] \
    || fail "builds the x86_64 Linux release only; this toolchain's host is $host"

ZKD_BUILD_EPOCH=${ZKD_BUILD_EPOCH:-${SOURCE_DATE_EPOCH:-}}
if [ -z "$ZKD_BUILD_EPOCH" ] && git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    ZKD_BUILD_EPOCH=$(git -C "$ROOT" log -1 --format=%ct HEAD)
fi
if [ -n "$ZKD_BUILD_EPOCH" ]; then
    export ZKD_BUILD_EPOCH
    log "build date: $(date -u -d "@$ZKD_BUILD_EPOCH" '+%Y-%m-%d %H:%M') UTC (ZKD_BUILD_EPOCH)"
fi
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    log "note: the work tree has uncommitted changes; the binary names commit $(git -C "$ROOT" rev-parse --short HEAD)"
fi

case "$PROFILE" in
    dev) outdir=debug ;;
    *) outdir=$PROFILE ;;
esac
started=$(date +%s)
log "building zkd (profile $PROFILE, glibc linked statically)"
cargo rustc --manifest-path cli/Cargo.toml --profile "$PROFILE" --bin zkd \
    -- -C target-feature=+crt-static -C strip=symbols
bin=$ROOT/target/$outdir/zkd
kind=$(file -b "$bin")
case "$kind" in
    *"statically linked"* | *"static-pie linked"*) ;;
    *) fail "$bin is not statically linked: $kind" ;;
esac
version=$("$bin" --version | awk '{print $2}')
log "built $("$bin" --version) in $(( $(date +%s) - started )) s"

mkdir -p "$DIST"
if [ $want_tarball = 1 ]; then
    name=zkd-$version-x86_64-linux
    stage=$DIST/$name
    rm -rf "$stage" "$DIST/$name.tar.gz" "$DIST/$name.tar.gz.sha256"
    mkdir -p "$stage"
    install -m 0755 "$bin" "$stage/zkd"
    install -m 0644 README.md LICENSE "$stage/"
    # Same inputs, same bytes: sorted names, fixed owners and times, no gzip time stamp.
    tar --sort=name --owner=0 --group=0 --numeric-owner \
        --mtime="@${ZKD_BUILD_EPOCH:-$(date +%s)}" -C "$DIST" -cf - "$name" \
        | gzip -n -9 >"$DIST/$name.tar.gz"
    rm -rf "$stage"
    (cd "$DIST" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
    log "wrote target/dist/$name.tar.gz ($(du -k "$DIST/$name.tar.gz" | cut -f1) KiB) and .sha256"
fi
if [ $want_wheel = 1 ]; then
    PY=${PYTHON:-python3}
    "$PY" -m maturin --version >/dev/null 2>&1 \
        || fail "the wheel needs maturin for $PY (pip install maturin, or scripts/install-test-deps.sh)"
    rm -f "$DIST"/zkd-*.whl
    # Built in place with the installed maturin and the same profile and flags: cargo finds
    # the binary just built and only packs it. `--compatibility pypi`: the manylinux tag PyPI
    # accepts (the static binary asks nothing of the system's glibc).
    "$PY" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$DIST" \
        --config-settings=build-args="--profile $PROFILE --compatibility pypi" ./python
    log "wrote target/dist/$(cd "$DIST" && ls zkd-*.whl)"
fi
if [ $want_jar = 1 ]; then
    ZKD_DIST_BINARY=$bin bash scripts/package-java.sh
fi
