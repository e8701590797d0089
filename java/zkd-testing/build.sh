#!/usr/bin/env bash
# Builds zkd-testing with javac and, with `test`, runs its tests against a zkd binary.
#
#   usage: java/zkd-testing/build.sh [test]
#
# Output: OUT/zkd-testing.jar (OUT defaults to target/zkd-testing in the repository). The
# library needs Java 11+ and compiles against the ZooKeeper client jar (only
# ZkdTestingCluster.findConnectionInstance uses it); the tests use Debian's ZooKeeper client
# and Curator jars.
#
# Environment:
#   OUT           build directory (default: <repo>/target/zkd-testing)
#   ZK_JAVA_LIB   directory holding zookeeper.jar, curator-*.jar, ... (default /usr/share/java)
#   ZKD_BINARY    zkd binary the tests run (default: <repo>/target/debug/zkd)
#   ZKD_TESTING_JAR  a release jar (scripts/package-java.sh) to test instead of the classes
#                 just built: the tests then run from that jar alone, with no zkd on PATH and
#                 neither ZKD_BINARY nor -Dzkd.binary, so the binary it carries is extracted
#                 to a fresh cache; two JVMs start at the same time and one reuses the other's
#                 copy, and a damaged copy is replaced
#
# `test` also runs cache-safety-test.sh, which must run as root (it adds a second local user
# to attack the extraction cache; about a minute).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$ROOT/target/zkd-testing}

missing() {
    echo "missing dependency: $1; run scripts/install-test-deps.sh" >&2
    exit 3
}
command -v javac >/dev/null 2>&1 || missing "javac (a JDK 11+)"
command -v jar >/dev/null 2>&1 || missing "jar (a JDK 11+)"

rm -rf "$OUT/classes" "$OUT/test-classes"
mkdir -p "$OUT/classes" "$OUT/test-classes"
# ZkdTestingCluster.findConnectionInstance takes the ZooKeeper client; nothing else needs it.
ZK_JAR=${ZK_JAVA_LIB:-/usr/share/java}/zookeeper.jar
[ -f "$ZK_JAR" ] || missing "$ZK_JAR (the ZooKeeper client)"
javac --release 11 -Xlint:all,-path -Werror -cp "$ZK_JAR" -d "$OUT/classes" $(find "$HERE/src/main/java" -name '*.java')
jar --create --file "$OUT/zkd-testing.jar" -C "$OUT/classes" .
echo "built $OUT/zkd-testing.jar"

# The JUnit 5 extension, a jar of its own, built when Debian's JUnit 5 jars are there.
LIB=${ZK_JAVA_LIB:-/usr/share/java}
JUNIT_CP="$LIB/junit-jupiter-api.jar:$LIB/junit-platform-commons.jar:$LIB/apiguardian-api.jar:$LIB/opentest4j.jar"
if [ -f "$LIB/junit-jupiter-api.jar" ]; then
    rm -rf "$OUT/junit5-classes" && mkdir -p "$OUT/junit5-classes"
    javac --release 11 -Xlint:all,-path -Werror -d "$OUT/junit5-classes" \
        -cp "$OUT/zkd-testing.jar:$JUNIT_CP" $(find "$HERE/src/junit5/java" -name '*.java')
    jar --create --file "$OUT/zkd-testing-junit5.jar" -C "$OUT/junit5-classes" .
    echo "built $OUT/zkd-testing-junit5.jar"
elif [ "${1:-}" = test ]; then
    missing "$LIB/junit-jupiter-api.jar (Debian's junit5)"
fi

[ "${1:-}" = test ] || exit 0

if ! JARS=$(bash "$ROOT/scripts/curator-classpath.sh"); then
    echo "$JARS" >&2
    exit 3
fi
if [ -n "${ZKD_TESTING_JAR:-}" ]; then
    [ -f "$ZKD_TESTING_JAR" ] || { echo "ZKD_TESTING_JAR=$ZKD_TESTING_JAR is not a file" >&2; exit 3; }
    LIB_CP=$ZKD_TESTING_JAR
else
    LIB_CP="$OUT/zkd-testing.jar"
fi
CP="$LIB_CP:$JARS"
javac -nowarn -d "$OUT/test-classes" -cp "$CP" $(find "$HERE/src/test/java" -name '*.java')
JAVA=(timeout -k 10 300 java -XX:+UseSerialGC -cp "$OUT/test-classes:$CP")
if [ -n "${ZKD_TESTING_JAR:-}" ]; then
    # The jar alone: no zkd on PATH, no ZKD_BINARY, no -Dzkd.binary, an empty cache.
    unset ZKD_BINARY
    source "$HERE/path-without-zkd.sh"
    PATH=$(path_without_zkd)
    export PATH
    ! command -v zkd >/dev/null || { echo "zkd is still on PATH: $(command -v zkd)" >&2; exit 1; }
    XDG_CACHE_HOME=$(mktemp -d)
    export XDG_CACHE_HOME
    trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
    extracted="extracted the bundled zkd binary to $XDG_CACHE_HOME/zkd-testing/"
    # The server suite and a second JVM start at the same time on the empty cache: exactly
    # one extracts the binary, the other waits for it and reuses that copy.
    "${JAVA[@]}" zkd.testing.ZkdTestingServerTest >"$OUT/suite.out" 2>&1 &
    suite=$!
    "${JAVA[@]}" zkd.testing.ZkdBinaryProbe >"$OUT/probe.out" 2>&1 &
    probe=$!
    suite_rc=0 probe_rc=0
    wait $suite || suite_rc=$?
    wait $probe || probe_rc=$?
    cat "$OUT/suite.out" "$OUT/probe.out"
    [ $suite_rc = 0 ] && [ $probe_rc = 0 ] || { echo "FAIL: suite exit $suite_rc, probe exit $probe_rc" >&2; exit 1; }
    n=$(cat "$OUT/suite.out" "$OUT/probe.out" | grep -c -F "$extracted" || true)
    [ "$n" = 1 ] || { echo "FAIL: the binary was extracted $n times by two JVMs starting together" >&2; exit 1; }
    bin=$(sed -n 's/^binary //p' "$OUT/probe.out")
    case "$bin" in
        "$XDG_CACHE_HOME"/zkd-testing/*/zkd) ;;
        *) echo "FAIL: the probe ran $bin, not the extracted binary" >&2; exit 1 ;;
    esac
    echo "PASS twoJvmsExtractOnce (one extraction to $bin, shared by both)"
    # A damaged copy in the cache is found by its hash and replaced.
    printf 'damaged' | dd of="$bin" bs=1 seek=4096 conv=notrunc status=none
    "${JAVA[@]}" zkd.testing.ZkdBinaryProbe >"$OUT/probe.out" 2>&1 \
        || { cat "$OUT/probe.out"; echo "FAIL: the probe failed on a damaged cache" >&2; exit 1; }
    grep -q -F "$extracted" "$OUT/probe.out" \
        || { cat "$OUT/probe.out"; echo "FAIL: a damaged copy was not replaced" >&2; exit 1; }
    echo "PASS damagedCopyIsReplaced"
    "${JAVA[@]}" zkd.testing.ZkdTestingClusterTest
    JCP="$CP:$JUNIT_CP"
else
    export ZKD_BINARY=${ZKD_BINARY:-$ROOT/target/debug/zkd}
    [ -x "$ZKD_BINARY" ] || { echo "no zkd binary at $ZKD_BINARY (cargo build -p zkd)" >&2; exit 3; }
    for suite in ZkdTestingServerTest ZkdTestingClusterTest; do
        "${JAVA[@]}" "zkd.testing.$suite"
    done
    JCP="$OUT/zkd-testing-junit5.jar:$CP:$JUNIT_CP"
fi
# The extraction cache against a second local user (needs root, as CI runs; fails otherwise):
# the library's classes with a stand-in binary that runs the real one.
if [ -n "${ZKD_TESTING_JAR:-}" ]; then real_zkd=$bin; else real_zkd=$ZKD_BINARY; fi
bash "$HERE/cache-safety-test.sh" "$LIB_CP" "$OUT/test-classes" "$real_zkd"
rm -rf "$OUT/junit5-test-classes" && mkdir -p "$OUT/junit5-test-classes"
javac -nowarn -d "$OUT/junit5-test-classes" -cp "$JCP:$LIB/junit-platform-launcher.jar:$LIB/junit-platform-engine.jar" $(find "$HERE/src/junit5-test/java" -name '*.java')
timeout -k 10 300 java -XX:+UseSerialGC -jar "$LIB/junit-platform-console-standalone.jar" \
    --disable-banner --disable-ansi-colors --fail-if-no-tests --details=tree \
    --class-path "$OUT/junit5-test-classes:$JCP" --select-package zkd.testing.junit5
