#!/usr/bin/env bash
# Starts or stops a real Apache ZooKeeper standalone server (3.9.3 by default, 3.8.0 with
# ZKD_ZOOKEEPER_VERSION=3.8; both installed by scripts/install-test-deps.sh) in the
# background, with the test kit's launcher (testkit/src/oracle.rs), so it runs with exactly the
# settings the tests use: loopback only, free port, tickTime=2000, all four-letter words,
# forceSync=no, no admin server, no per-address connection limit, extended types (TTL nodes).
#
#   scripts/zookeeper-oracle.sh start DIR   # prints HOST:PORT; writes DIR/pid and DIR/addr
#   scripts/zookeeper-oracle.sh stop DIR    # stops the server started in DIR
#   scripts/zookeeper-oracle.sh status DIR  # prints HOST:PORT if running, exit 1 otherwise
#
# DIR is created if needed and holds zoo.cfg, data/, zookeeper.log and stdout.log. A port can
# be forced with PORT=NNNN. Environment: ZKD_ZOOKEEPER_VERSION (3.8 or 3.9, default 3.9),
# ZKD_ZOOKEEPER_JARS (3.8 and dependency jars, default /usr/share/java), ZKD_ZOOKEEPER_39_JARS
# (default /opt/zkd-test/zookeeper-3.9.3/usr/share/java), JAVA_HOME.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec cargo run --quiet --manifest-path "$root/Cargo.toml" -p zkd-testkit \
    --bin zookeeper-oracle -- "$@"
