#!/usr/bin/env bash
# Benchmarks (never tests). Usage: scripts/bench.sh [authz]
#
#   authz   authorize and predicate_for, side by side with cedar-policy deciding an equivalent
#           policy on the same requests in the same run (crates/authz-bench, excluded from the
#           workspace so Cedar is built only here).
#
# Raw output goes to target/bench/<name>.txt; docs/benchmarks.md records the figures with the
# machine and this command.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/bench
what="${1:-authz}"

case "$what" in
  authz)
    echo "== authorize vs cedar-policy (builds Cedar on first run: several minutes)"
    CARGO_TARGET_DIR="$PWD/target" cargo bench --locked \
      --manifest-path crates/authz-bench/Cargo.toml --bench authorize \
      | tee target/bench/authz.txt
    ;;
  *)
    echo "unknown benchmark '$what'; known: authz" >&2
    exit 2
    ;;
esac
