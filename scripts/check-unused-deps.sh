#!/usr/bin/env bash
# Fails when a crate of the workspace declares a dependency its code does not use. Installs the
# pinned version of cargo-machete first when it is missing (a no-op when it is already there).
set -euo pipefail
cd "$(dirname "$0")/.."
MACHETE_VERSION=0.9.2
if ! cargo machete --version 2>/dev/null | grep -qF "$MACHETE_VERSION"; then
  cargo install cargo-machete --version "$MACHETE_VERSION" --locked
fi
cargo machete
