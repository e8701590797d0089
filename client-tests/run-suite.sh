#!/usr/bin/env bash
# Runs one external client suite against a server.
#
#   usage: client-tests/run-suite.sh NAME HOST:PORT
#
#   NAME   java    Java client + Curator recipes   (client-tests/java/, compiled here with javac)
#          python  kazoo and its recipes            (client-tests/python/)
#          c       the C client's cli_mt shell      (client-tests/c/)
#          cli     zkCli.sh, ZooKeeper's shell      (client-tests/cli/)
#          java-ensemble    Curator against an ensemble  (client-tests/java/EnsembleSuite.java)
#          python-ensemble  kazoo against an ensemble    (client-tests/python/kazoo_ensemble.py)
#          python-observer  kazoo against an ensemble with an observer
#                                                        (client-tests/python/kazoo_observer.py)
#          java-reconfig    Curator's reconfig API       (client-tests/java/ReconfigSuite.java)
#          python-reconfig  kazoo's reconfig API         (client-tests/python/kazoo_reconfig.py)
#          java-partition   Curator's LeaderLatch across a partition
#                                                        (client-tests/java/PartitionSuite.java)
#          python-partition kazoo's election and lock across a partition
#                                                        (client-tests/python/kazoo_partition.py)
#
#   The reconfig suites need an ensemble with reconfiguration on and the superuser
#   super:secret (zkd: --reconfig-enabled --super-digest; ZooKeeper: reconfigEnabled=true and
#   -Dzookeeper.DigestAuthenticationProvider.superDigest).
#   The partition suite needs a control URL that answers /zkd/partition and /zkd/heal: zkd's
#   admin listener, or the test kit's endpoint over ZooKeeper servers in network namespaces.
#
#   The ensemble suites take the whole connection string (HOST:PORT,HOST:PORT,...) and stop and
#   start members through zkd's admin listener, given as ZKD_CONTROL_URL (http://HOST:PORT).
#
# Suites print `PASS name` / `FAIL name: reason` lines and end with `N passed, M failed`; the
# exit status is the suite's (0 = all passed). A missing tool or library prints
# `missing dependency: <what>; run scripts/install-test-deps.sh` and exits 3.
#
# Environment:
#   SUITE_TIMEOUT   overall limit in seconds (default 300)
#   ZK_JAVA_LIB     directory holding zookeeper.jar, curator-*.jar, ... (default /usr/share/java)
#   ZKCLI           zkCli.sh (default: /usr/share/zookeeper/bin/zkCli.sh, else from PATH)
#   CLI_MT          the C client's cli_mt (default: from PATH, else /usr/lib/zookeeper/bin/cli_mt)
#   PYTHON          Python interpreter with kazoo installed (default python3)

set -u

usage() {
    echo "usage: $0 {java|python|c|cli|java-ensemble|python-ensemble|python-observer|java-reconfig|python-reconfig|java-partition|python-partition} HOST:PORT[,HOST:PORT...]" >&2
    exit 2
}

[ $# -eq 2 ] || usage
NAME=$1
ADDR=$2
case "$ADDR" in
    *:[0-9]*) ;;
    *) echo "address must be HOST:PORT, got '$ADDR'" >&2; exit 2 ;;
esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUITE_TIMEOUT=${SUITE_TIMEOUT:-300}

missing() {
    echo "missing dependency: $1; run scripts/install-test-deps.sh"
    exit 3
}

need_cmd() {
    command -v "$1" >/dev/null 2>&1 || missing "$1 (${2:-command not found})"
}

need_cmd timeout "coreutils"

# run CMD...: runs the suite under the overall time limit and reports a limit overrun.
run() {
    timeout -k 10 "$SUITE_TIMEOUT" "$@"
    local rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "FAIL run-suite: the $NAME suite did not finish within ${SUITE_TIMEOUT}s"
    fi
    return "$rc"
}

# java_suite DIR CLASS ARGS...: compiles DIR/*.java against the client jars and runs CLASS.
java_suite() {
    local dir=$1 class=$2
    shift 2
    need_cmd java "a Java runtime (JDK 11+)"
    need_cmd javac "a JDK (javac)"
    if ! CP=$(bash "$HERE/../scripts/curator-classpath.sh"); then
        echo "$CP"
        exit 3
    fi
    BUILD=$(mktemp -d "${TMPDIR:-/tmp}/zk-java-suite.XXXXXX")
    trap 'rm -rf "$BUILD"' EXIT
    if ! timeout 120 javac -nowarn -d "$BUILD" -cp "$CP" "$dir"/*.java; then
        echo "FAIL compile: javac failed for $dir"
        echo "0 passed, 1 failed"
        exit 1
    fi
    run java -XX:+UseSerialGC -cp "$BUILD:$CP" "$class" "$@"
}

need_control_url() {
    [ -n "${ZKD_CONTROL_URL:-}" ] || { echo "the $NAME suite needs ZKD_CONTROL_URL (zkd's admin listener, http://HOST:PORT)" >&2; exit 2; }
}

case "$NAME" in
java)
    java_suite "$HERE/java" JavaClientSuite "$ADDR"
    ;;
java-ensemble)
    need_control_url
    java_suite "$HERE/java" EnsembleSuite "$ADDR" "$ZKD_CONTROL_URL"
    ;;
java-reconfig)
    need_control_url
    java_suite "$HERE/java" ReconfigSuite "$ADDR" "$ZKD_CONTROL_URL"
    ;;
java-partition)
    need_control_url
    java_suite "$HERE/java" PartitionSuite "$ADDR" "$ZKD_CONTROL_URL"
    ;;
python)
    PY=${PYTHON:-python3}
    need_cmd "$PY" "Python 3"
    "$PY" -c 'import kazoo' >/dev/null 2>&1 || missing "the kazoo Python package (pip install kazoo)"
    run "$PY" "$HERE/python/kazoo_suite.py" "$ADDR"
    ;;
python-ensemble | python-observer | python-reconfig | python-partition)
    PY=${PYTHON:-python3}
    need_cmd "$PY" "Python 3"
    "$PY" -c 'import kazoo' >/dev/null 2>&1 || missing "the kazoo Python package (pip install kazoo)"
    need_control_url
    run "$PY" "$HERE/python/kazoo_${NAME#python-}.py" "$ADDR" "$ZKD_CONTROL_URL"
    ;;
c)
    if [ -z "${CLI_MT:-}" ]; then
        CLI_MT=$(command -v cli_mt || command -v zookeeper_cli_mt || true)
        [ -z "$CLI_MT" ] && [ -x /usr/lib/zookeeper/bin/cli_mt ] && CLI_MT=/usr/lib/zookeeper/bin/cli_mt
    fi
    [ -n "${CLI_MT:-}" ] && [ -x "$CLI_MT" ] || missing "cli_mt (the ZooKeeper C client shell, Debian package zookeeper-bin)"
    export CLI_MT
    run bash "$HERE/c/cli-mt-suite.sh" "$ADDR"
    ;;
cli)
    need_cmd java "a Java runtime (needed by zkCli.sh)"
    if [ -z "${ZKCLI:-}" ]; then
        if [ -x /usr/share/zookeeper/bin/zkCli.sh ]; then
            ZKCLI=/usr/share/zookeeper/bin/zkCli.sh
        else
            ZKCLI=$(command -v zkCli.sh || true)
        fi
    fi
    [ -n "${ZKCLI:-}" ] && [ -x "$ZKCLI" ] || missing "zkCli.sh (Debian package zookeeper)"
    export ZKCLI
    run bash "$HERE/cli/zkcli-suite.sh" "$ADDR"
    ;;
*)
    usage
    ;;
esac
