#!/usr/bin/env bash
# Measures start-up time and memory of the test helpers against what they replace, and prints
# the comparison table in docs/testing.md:
#   * Python: zkd.Server (the wheel) against kazoo's own test harness starting ZooKeeper from
#     Debian's jars (1 server, and its default cluster of 3);
#     and zkd.Server(ensemble=3) beside the cluster of 3;
#   * Java:   ZkdTestingServer against Curator's TestingServer, and ZkdTestingCluster(3)
#     against Curator's TestingCluster(3) (Debian's curator-test jar).
#
#   usage: scripts/measure-helpers.sh [HELPER...]
#          (zkd kazoo1 kazoo3 zkd3 java-zkd java-curator java-zkd-cluster java-curator-cluster)
#
# Builds zkd and the wheel in release mode, creates a virtualenv under target/measure with the
# wheel, kazoo and what kazoo's harness imports (pyopenssl, pyjks), and installs Debian's
# libcurator-test-java when it is missing (as root). Not part of the test suite.
#
# Environment: RUNS (default 5), KAZOO_VERSION (2.11.0), ZK_JAVA_LIB (/usr/share/java).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
LIB=${ZK_JAVA_LIB:-/usr/share/java}
WORK=$ROOT/target/measure
KAZOO_VERSION=${KAZOO_VERSION:-2.11.0}
log() { printf '[measure-helpers] %s\n' "$*" >&2; }

if [ ! -f "$LIB/curator-test.jar" ]; then
    log "installing Debian's libcurator-test-java (Curator's TestingServer)"
    apt-get install -y -qq --no-install-recommends libcurator-test-java >&2
fi

log "building the release wheel (the zkd binary inside it is what zkd.Server runs)"
rm -rf "$WORK/wheels"
(cd python && "$PY" -m maturin build --quiet --release --out "$WORK/wheels") >&2
if [ ! -x "$WORK/venv/bin/python" ]; then
    "$PY" -m venv "$WORK/venv"
    # kazoo's harness generates TLS material with pyOpenSSL's pre-24.3 X509 API.
    "$WORK/venv/bin/pip" install --quiet --disable-pip-version-check \
        "kazoo==$KAZOO_VERSION" "pyopenssl==24.0.0" "pyjks==20.0.0" >&2
fi
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check --no-index --force-reinstall \
    "$WORK"/wheels/zkd-*.whl >&2
BIN=$("$WORK/venv/bin/python" -c 'import zkd; print(zkd.find_binary())')
log "zkd binary: $BIN"

log "building zkd-testing and the Java measurement program"
OUT=$WORK/java bash java/zkd-testing/build.sh >&2
CP="$WORK/java/zkd-testing.jar"
for j in zookeeper zookeeper-jute curator-client curator-framework curator-recipes curator-test guava slf4j-api slf4j-nop; do
    CP="$CP:$LIB/$j.jar"
done
mkdir -p "$WORK/java/measure"
javac -nowarn -d "$WORK/java/measure" -cp "$CP" java/zkd-testing/src/measure/java/MeasureJavaHelpers.java

# The server classpath of kazoo's harness configuration: it enables Netty, TLS and the
# AdminServer, so ZooKeeper needs Netty and the servlet API beside its own jar.
ZK_CP="$LIB/zookeeper.jar"
for j in netty-buffer netty-codec netty-common netty-handler netty-resolver netty-transport \
    netty-transport-native-epoll netty-transport-native-unix-common servlet-api slf4j-nop; do
    ZK_CP="$ZK_CP:$LIB/$j.jar"
done

env JAVA_CP="$WORK/java/measure:$CP" ZK_CLASSPATH="$ZK_CP" ZKD_BINARY="$BIN" \
    "$WORK/venv/bin/python" scripts/measure_helpers.py "$@"
