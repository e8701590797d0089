#!/usr/bin/env bash
# Runs the whole test suite: installs what the end-to-end tests need (Debian's ZooKeeper,
# Curator, the C client, kazoo), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then
  bash scripts/install-test-deps.sh
elif command -v sudo >/dev/null 2>&1; then
  sudo bash scripts/install-test-deps.sh
else
  echo "note: not root and no sudo; assuming the test dependencies are installed" >&2
fi
cargo test --workspace "$@"
# The Python wheel (fresh virtualenv, kazoo through the pytest fixtures), the Java helper with
# Curator, and the crates as packaged (scripts/test-packages.sh).
bash scripts/test-packages.sh
# The same end-to-end scenarios against Apache ZooKeeper: a test that passes on zkd must
# pass there too, so this checks the expectations themselves.
ZKD_TEST_TARGET=zookeeper cargo test -p zkd-client-tests \
  --test rust_client --test acl_auth --test hostile --test watch_acl "$@"
# The ensemble client suites (Curator failover and LeaderLatch, kazoo failover and read-only
# mode) against three Apache ZooKeeper servers whose JVMs are killed and restarted.
ZKD_TEST_TARGET=zookeeper cargo test -p zkd-client-tests --test external_suites "$@" ensemble
