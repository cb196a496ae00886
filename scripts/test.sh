#!/usr/bin/env bash
# Every test: unit, integration (behaviour) and doc tests, for the whole workspace.
# nextest runs the unit and integration tests; it does not run doctests, so cargo test does.
set -euo pipefail
cd "$(dirname "$0")/.."

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --all-targets --locked --no-fail-fast
else
  echo "cargo-nextest not found; running the same tests with cargo test" >&2
  cargo test --workspace --all-targets --locked --no-fail-fast
fi
cargo test --workspace --doc --locked
