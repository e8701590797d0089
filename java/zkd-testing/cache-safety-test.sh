#!/usr/bin/env bash
# The bundled binary's extraction cache against another local user (run by build.sh test).
#
#   usage: java/zkd-testing/cache-safety-test.sh LIB_CLASSPATH TEST_CLASSES REAL_ZKD
#
# Needs root: it creates a second local user (useradd; removed on exit) who plays the attacker
# on a shared cache root (XDG_CACHE_HOME on a sticky 1777 folder, as /tmp is). The jar under
# test carries a stand-in for the zkd binary: a script that runs REAL_ZKD. The attacker's
# binary runs REAL_ZKD too, after writing a marker file, so a run it wins looks like success
# except for the marker. Each case runs ZkdCacheProbe (a ZkdTestingServer on the binary
# ZkdBinary.find() names: no -Dzkd.binary, no ZKD_BINARY, no zkd on PATH) as root:
#   foreignFolderRefused        the attacker's 0777 folders at the cache path, holding a good
#                               copy: the jar runs a copy in a folder only root can write;
#   lockLinkNotFollowed         `.lock` a symbolic link to a file root may create, in the
#                               attacker's folder and in root's own: neither is created;
#   swappedBinaryNeverRuns      40 runs while the attacker, in a loop, makes the folders and
#                               swaps a good copy and its own binary in and out: its binary
#                               never runs (the marker never appears); the first 20 find its
#                               folders and run a private copy, the last 20 root's cache;
#   stickyRootGetsPrivateFolder on a sticky 1777 root the jar makes zkd-testing/ owned by root
#                               with mode 0700, and a second JVM reuses the copy there;
#   privateFoldersRemoved       the per-JVM private folders are gone when the JVMs exit.
# ZKD_CACHE_TEST_CASES names the cases to run (default: all, in this order).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
    echo "FAIL: cache-safety-test.sh must run as root: it creates a second local user (useradd) to" \
        "attack the jar's extraction cache; run java/zkd-testing/build.sh test as root (CI does)" >&2
    exit 1
fi
[ $# = 3 ] || { echo "usage: $0 LIB_CLASSPATH TEST_CLASSES REAL_ZKD" >&2; exit 2; }
LIB_CP=$1 TEST_CLASSES=$2 REAL=$(realpath "$3")
[ -x "$REAL" ] || { echo "cache-safety-test: $REAL is not an executable" >&2; exit 3; }
for tool in useradd userdel setpriv jar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || { echo "cache-safety-test: missing $tool" >&2; exit 3; }
done

W=$(mktemp -d /tmp/zkd-cache-test.XXXXXX)
chmod 755 "$W"
ATK=zkdatk$$
loop=
cleanup() {
    [ -z "$loop" ] || kill "$loop" 2>/dev/null || true
    [ -z "$loop" ] || kill -CONT "$loop" 2>/dev/null || true
    [ -z "$loop" ] || wait "$loop" 2>/dev/null || true
    # userdel refuses while a copy the killed loop started is still running: retry a little.
    local tries=0
    while id "$ATK" >/dev/null 2>&1 && ! userdel "$ATK" 2>/dev/null; do
        tries=$((tries + 1))
        [ $tries -lt 50 ] || { echo "cache-safety-test: could not remove the user $ATK" >&2; break; }
        sleep 0.1
    done
    rm -rf "$W"
}
trap cleanup EXIT
useradd --no-create-home --user-group --shell /usr/sbin/nologin "$ATK"
atk_uid=$(id -u "$ATK") atk_gid=$(id -g "$ATK")
as_attacker() { setpriv --reuid="$atk_uid" --regid="$atk_gid" --clear-groups -- "$@"; }

# The jar's stand-in binary, its hash and version, put first on the class path so its
# resources are the ones ZkdBinary finds (a release jar's own come after it).
res=$W/res/zkd/testing/bin/linux-x86_64
mkdir -p "$res"
printf '#!/bin/sh\nexec %q "$@"\n' "$REAL" >"$res/zkd"
chmod 755 "$res/zkd"
sha=$(sha256sum "$res/zkd" | cut -d' ' -f1)
echo "$sha" >"$res/zkd.sha256"
echo cachetest >"$res/version"
jar --create --file "$W/stand-in.jar" -C "$W/res" .
V=cachetest-${sha:0:16}

# The attacker's files: a good copy (the jar is public) and its own binary.
MARKER=$W/attacker-binary-ran
mkdir -m 755 "$W/atk"
cp "$res/zkd" "$W/atk/good"
printf '#!/bin/sh\necho "$$" >>%q\nexec %q "$@"\n' "$MARKER" "$REAL" >"$W/atk/evil"
chmod 755 "$W/atk/good" "$W/atk/evil"
chown -R "$ATK:$ATK" "$W/atk"
# Link targets the attacker wants root to create.
mkdir -m 700 "$W/root-only"
# java.io.tmpdir, a sticky 1777 folder like /tmp, where the private folders go.
mkdir -m 1777 "$W/tmp"

# PATH without zkd, so ZkdBinary.find() comes to the bundled binary.
source "$(dirname "${BASH_SOURCE[0]}")/path-without-zkd.sh"
PROBE_PATH=$(path_without_zkd)
runs=0
# probe CACHE_ROOT: runs one JVM as root; its output is in $W/probe.out, the binary in $bin.
probe() {
    runs=$((runs + 1))
    if ! env -u ZKD_BINARY PATH="$PROBE_PATH" XDG_CACHE_HOME="$1" timeout -k 5 60 \
        java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.io.tmpdir="$W/tmp" \
        -cp "$W/stand-in.jar:$LIB_CP:$TEST_CLASSES" zkd.testing.ZkdCacheProbe >"$W/probe.out" 2>&1; then
        cat "$W/probe.out"
        echo "FAIL: the probe failed (run $runs, cache root $1)" >&2
        exit 1
    fi
    bin=$(sed -n 's/^binary //p' "$W/probe.out")
}
fail() {
    cat "$W/probe.out"
    echo "FAIL: $*" >&2
    exit 1
}
# Whether the probe's binary (a regular file) and the folders from its own up to / were, while
# it ran, root's and writable by no one else, but for sticky folders above its own (the stat
# lines the probe prints: uid, octal mode with the file type, path).
binary_is_private() {
    local n=0 uid mode path
    while read -r uid mode path; do
        mode=$((8#$mode))
        [ "$uid" = 0 ] || return 1
        case $n in
            0) [ $((mode & 8#170000)) = $((8#100000)) ] && [ $((mode & 8#22)) = 0 ] || return 1 ;;
            1) [ $((mode & 8#170000)) = $((8#40000)) ] && [ $((mode & 8#7777)) = $((8#700)) ] || return 1 ;;
            *) [ $((mode & 8#170000)) = $((8#40000)) ] || return 1
               [ $((mode & 8#1000)) != 0 ] || [ $((mode & 8#22)) = 0 ] || return 1 ;;
        esac
        n=$((n + 1))
    done < <(sed -n 's/^stat //p' "$W/probe.out")
    [ $n -ge 3 ]
}
marker_absent() {
    [ ! -e "$MARKER" ] || fail "the attacker's binary ran (run $runs): $(wc -l <"$MARKER") time(s)"
}
# A cache root shared with the attacker: a sticky 1777 folder owned by root.
shared_root() {
    mkdir -m 1777 "$W/$1"
    echo "$W/$1"
}

foreignFolderRefused() {
    local C
    C=$(shared_root shared1)
    as_attacker mkdir -m 777 "$C/zkd-testing" "$C/zkd-testing/$V"
    as_attacker cp "$W/atk/good" "$C/zkd-testing/$V/zkd"
    for _ in 1 2; do
        probe "$C"
        case "$bin" in "$C"/zkd-testing/*) fail "the jar ran $bin, in the attacker's folder" ;; esac
        binary_is_private || fail "the jar ran $bin, which is not in folders only root can write"
        grep -q 'not using the cache' "$W/probe.out" || fail "no warning names why the cache was not used"
    done
    marker_absent
    echo "PASS foreignFolderRefused (runs $bin, warns: $(grep -o 'not using the cache.*' "$W/probe.out" | head -1 | cut -c1-160))"
}

lockLinkNotFollowed() {
    local C
    C=$(shared_root shared2)
    as_attacker mkdir -m 777 "$C/zkd-testing" "$C/zkd-testing/$V"
    as_attacker ln -s "$W/root-only/made-through-foreign-link" "$C/zkd-testing/$V/.lock"
    probe "$C"
    [ ! -e "$W/root-only/made-through-foreign-link" ] || fail "the jar followed the attacker's .lock link"
    binary_is_private || fail "the jar ran $bin, which is not in folders only root can write"
    OWN=$W/own
    mkdir -m 700 "$OWN" "$OWN/zkd-testing" "$OWN/zkd-testing/$V"
    ln -s "$W/root-only/made-through-own-link" "$OWN/zkd-testing/$V/.lock"
    probe "$OWN"
    [ ! -e "$W/root-only/made-through-own-link" ] || fail "the jar followed a .lock link in its own cache folder"
    [ -L "$OWN/zkd-testing/$V/.lock" ] || fail "the .lock link was replaced"
    binary_is_private || fail "the jar ran $bin, which is not in folders only root can write"
    marker_absent
    echo "PASS lockLinkNotFollowed (neither link target created; runs $bin)"
}

swappedBinaryNeverRuns() {
    local C
    C=$(shared_root shared3)
    # setpriv runs sh in its own process, so $! is the loop itself.
    setpriv --reuid="$atk_uid" --regid="$atk_gid" --clear-groups -- sh -c '
        d=$1/zkd-testing/$2
        while :; do
            mkdir -p "$d" 2>/dev/null && chmod 777 "$1/zkd-testing" "$d" 2>/dev/null
            cp "$3/evil" "$d/.e" 2>/dev/null && mv -f "$d/.e" "$d/zkd" 2>/dev/null
            cp "$3/good" "$d/.g" 2>/dev/null && mv -f "$d/.g" "$d/zkd" 2>/dev/null
        done' attacker "$C" "$V" "$W/atk" &
    loop=$!
    sleep 0.3
    local private=0 exposed=0 ran=0 i
    for i in $(seq 1 40); do
        if [ "$i" = 21 ]; then
            # From here on the cache's folders are root's: made while the loop is stopped, then
            # the loop goes on trying to swap the binary there.
            kill -STOP "$loop"
            sleep 0.2
            rm -rf "$C/zkd-testing"
            probe "$C"
            kill -CONT "$loop"
        else
            probe "$C"
        fi
        if [ -e "$MARKER" ]; then
            ran=$((ran + 1))
            rm -f "$MARKER"
        fi
        binary_is_private || exposed=$((exposed + 1))
        case "$bin" in "$C"/*) ;; *) private=$((private + 1)) ;; esac
    done
    kill "$loop"
    wait "$loop" 2>/dev/null || true
    loop=
    [ $ran = 0 ] || fail "the attacker's binary ran in $ran of 40 runs"
    [ $exposed = 0 ] || fail "the jar ran a binary the attacker could replace in $exposed of 40 runs"
    [ $private = 20 ] || fail "$private of 40 runs used a private copy, not the 20 while the attacker owned the folders"
    echo "PASS swappedBinaryNeverRuns (40 runs against a swapping loop: $private ran a private copy, $((40 - private)) the cache's own)"
}

stickyRootGetsPrivateFolder() {
    local C
    C=$(shared_root shared4)
    probe "$C"
    [ "$bin" = "$C/zkd-testing/$V/zkd" ] || fail "the jar ran $bin, not its copy in the cache"
    grep -q 'extracted the bundled zkd binary to' "$W/probe.out" || fail "the first JVM did not extract"
    for d in "$C/zkd-testing" "$C/zkd-testing/$V"; do
        [ "$(stat -c '%u %a' "$d")" = "0 700" ] || fail "$d is $(stat -c 'owned by %U with mode %a' "$d"), not root's with 0700"
    done
    [ "$(stat -c '%u %a' "$bin")" = "0 500" ] || fail "$bin is $(stat -c 'owned by %U with mode %a' "$bin"), not root's read-only 0500"
    probe "$C"
    [ "$bin" = "$C/zkd-testing/$V/zkd" ] || fail "the second JVM ran $bin, not the cached copy"
    ! grep -q 'extracted the bundled zkd binary' "$W/probe.out" || fail "the second JVM extracted again"
    echo "PASS stickyRootGetsPrivateFolder ($C/zkd-testing owned by root, 0700; reused by a second JVM)"
}

privateFoldersRemoved() {
    left=$(find "$W/tmp" -mindepth 1 -maxdepth 1 | wc -l)
    [ "$left" = 0 ] || { ls -la "$W/tmp"; echo "FAIL: $left folders left in java.io.tmpdir after $runs JVMs" >&2; exit 1; }
    echo "PASS privateFoldersRemoved ($runs JVMs, nothing left in java.io.tmpdir)"
}

cases=${ZKD_CACHE_TEST_CASES:-foreignFolderRefused lockLinkNotFollowed swappedBinaryNeverRuns stickyRootGetsPrivateFolder privateFoldersRemoved}
for case in $cases; do
    "$case"
done
