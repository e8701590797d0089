#!/usr/bin/env bash
# Runs the whole test suite: installs what the end-to-end tests need (Debian's ZooKeeper 3.8.0,
# ZooKeeper 3.9.3, Curator, the C client, kazoo), then runs every test of the workspace.
#
# zkd behaves as ZooKeeper 3.9 by default; ZKD_ZOOKEEPER_VERSION (3.8 or 3.9) picks the release
# both the embedded zkd and the real ZooKeeper of the end-to-end tests are. The workspace runs
# once with the default (3.9; the differential and AdminServer tests cover both releases
# themselves), then the client suites and the second pass run for the other release too.
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
# The client suites (Java/Curator, kazoo, the C client, zkCli) against zkd behaving as 3.8.
ZKD_ZOOKEEPER_VERSION=3.8 cargo test -p zkd-client-tests --test external_suites "$@" -- \
  --skip ensemble
# The same end-to-end scenarios against Apache ZooKeeper, 3.9.3 and 3.8.0: a test that passes
# on zkd must pass there too, so this checks the expectations themselves.
for release in 3.9 3.8; do
  ZKD_ZOOKEEPER_VERSION=$release ZKD_TEST_TARGET=zookeeper cargo test -p zkd-client-tests \
    --test both_targets "$@"
  # The client suites against the real server of that release.
  ZKD_ZOOKEEPER_VERSION=$release ZKD_TEST_TARGET=zookeeper cargo test -p zkd-client-tests \
    --test external_suites "$@" -- --skip ensemble
done
# The ensemble client suites (Curator failover and LeaderLatch, kazoo failover, read-only mode
# and an observer) against Apache ZooKeeper 3.9.3 servers whose JVMs are killed and restarted;
# the partition suites (LeaderLatch, kazoo's election and lock across a cut) against servers in
# network namespaces (root only).
ZKD_TEST_TARGET=zookeeper cargo test -p zkd-client-tests --test external_suites "$@" ensemble
