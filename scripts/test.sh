#!/usr/bin/env bash
# The keyplane test suite: everything a change must pass. Installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs first" >&2
  exit 1
fi
cargo test --workspace --all-targets
cargo test --workspace --doc
