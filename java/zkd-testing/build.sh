#!/usr/bin/env bash
# Builds zkd-testing with javac and, with `test`, runs its tests against a zkd binary.
#
#   usage: java/zkd-testing/build.sh [test]
#
# Output: OUT/zkd-testing.jar (OUT defaults to target/zkd-testing in the repository). The
# library needs nothing but Java 11+; the tests use Debian's ZooKeeper client and Curator jars.
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
javac --release 11 -Xlint:all -Werror -d "$OUT/classes" $(find "$HERE/src/main/java" -name '*.java')
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
timeout -k 10 300 java -XX:+UseSerialGC -cp "$OUT/test-classes:$CP" zkd.testing.ZkdTestingServerTest
