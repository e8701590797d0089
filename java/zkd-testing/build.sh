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
CP="$OUT/zkd-testing.jar:$JARS"
javac -nowarn -d "$OUT/test-classes" -cp "$CP" $(find "$HERE/src/test/java" -name '*.java')
export ZKD_BINARY=${ZKD_BINARY:-$ROOT/target/debug/zkd}
[ -x "$ZKD_BINARY" ] || { echo "no zkd binary at $ZKD_BINARY (cargo build -p zkd)" >&2; exit 3; }
for suite in ZkdTestingServerTest ZkdTestingClusterTest; do
    timeout -k 10 300 java -XX:+UseSerialGC -cp "$OUT/test-classes:$CP" "zkd.testing.$suite"
done
rm -rf "$OUT/junit5-test-classes" && mkdir -p "$OUT/junit5-test-classes"
JCP="$OUT/zkd-testing-junit5.jar:$CP:$JUNIT_CP"
javac -nowarn -d "$OUT/junit5-test-classes" -cp "$JCP" $(find "$HERE/src/junit5-test/java" -name '*.java')
timeout -k 10 300 java -XX:+UseSerialGC -jar "$LIB/junit-platform-console-standalone.jar" \
    --disable-banner --disable-ansi-colors --fail-if-no-tests --details=tree \
    --class-path "$OUT/junit5-test-classes:$JCP" --select-package zkd.testing.junit5
