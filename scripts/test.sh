#!/usr/bin/env bash
# Every test: unit, integration (behaviour) and doc tests, for the whole workspace.
# nextest runs the unit and integration tests; it does not run doctests, so cargo test does.
# Benchmarks are not tests: scripts/bench.sh runs them.
#
# The Postgres tests run against $SWITCHBOARD_TEST_POSTGRES_URL (each in its own schema).
# Unset, they are left out and this script says so; .ci/run always sets it and fails when
# Postgres cannot be reached.
set -euo pipefail
cd "$(dirname "$0")/.."

filter=()
skip=()
if [ -z "${SWITCHBOARD_TEST_POSTGRES_URL:-}" ]; then
  echo "NOTE: SWITCHBOARD_TEST_POSTGRES_URL is unset: the Postgres tests are NOT run." >&2
  echo "      e.g. SWITCHBOARD_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test scripts/test.sh" >&2
  filter=(-E 'not test(/postgres/)')
  skip=(--skip postgres)
fi

# The Claude Code tests drive the real CLI: the pinned version is installed into target/ (npm).
SWITCHBOARD_TEST_CLAUDE="$(scripts/claude-code.sh)"
export SWITCHBOARD_TEST_CLAUDE

# Most tests wait on programs, sockets and databases rather than the CPU: two per core keep the
# cores busy (SWITCHBOARD_TEST_THREADS overrides).
threads="${SWITCHBOARD_TEST_THREADS:-$(( $(nproc) * 2 ))}"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --lib --bins --tests --locked --no-fail-fast --test-threads "$threads" "${filter[@]}"
else
  echo "cargo-nextest not found; running the same tests with cargo test" >&2
  cargo test --workspace --lib --bins --tests --locked --no-fail-fast -- "${skip[@]}"
fi
cargo test --workspace --doc --locked
