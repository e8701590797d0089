#!/usr/bin/env bash
# Starts or stops a real Apache ZooKeeper 3.8 standalone server (Debian's package) in the
# background, with the test kit's launcher (testkit/src/oracle.rs), so it runs with exactly the
# settings the tests use: loopback only, free port, tickTime=2000, all four-letter words,
# forceSync=no, no admin server, no per-address connection limit, extended types (TTL nodes).
#
#   scripts/zookeeper-oracle.sh start DIR   # prints HOST:PORT; writes DIR/pid and DIR/addr
#   scripts/zookeeper-oracle.sh stop DIR    # stops the server started in DIR
#   scripts/zookeeper-oracle.sh status DIR  # prints HOST:PORT if running, exit 1 otherwise
#
# DIR is created if needed and holds zoo.cfg, data/, zookeeper.log and stdout.log. A port can
# be forced with PORT=NNNN. Environment: ZKD_ZOOKEEPER_JARS (default /usr/share/java),
# JAVA_HOME.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec cargo run --quiet --manifest-path "$root/Cargo.toml" -p zkd-testkit \
    --bin zookeeper-oracle -- "$@"
