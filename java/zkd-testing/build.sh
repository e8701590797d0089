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

[ "${1:-}" = test ] || exit 0

if ! JARS=$(bash "$ROOT/scripts/curator-classpath.sh"); then
    echo "$JARS" >&2
    exit 3
fi
CP="$OUT/zkd-testing.jar:$JARS"
javac -nowarn -d "$OUT/test-classes" -cp "$CP" $(find "$HERE/src/test/java" -name '*.java')
export ZKD_BINARY=${ZKD_BINARY:-$ROOT/target/debug/zkd}
[ -x "$ZKD_BINARY" ] || { echo "no zkd binary at $ZKD_BINARY (cargo build -p zkd)" >&2; exit 3; }
for suite in ZkdTestingServerTest ZkdTestingClusterTest; do
    timeout -k 10 300 java -XX:+UseSerialGC -cp "$OUT/test-classes:$CP" "zkd.testing.$suite"
done
