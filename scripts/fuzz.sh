#!/usr/bin/env bash
# Fuzzes the parsers of outside input with cargo-fuzz (libFuzzer, on the nightly toolchain).
#
#   scripts/fuzz.sh                 every target, 30 s each
#   scripts/fuzz.sh <target>        one target, 30 s
#   scripts/fuzz.sh <target> <s>    one target, <s> seconds
#   scripts/fuzz.sh all <s>         every target, <s> seconds each
#   scripts/fuzz.sh --budget <s>    every target within <s> seconds in all, unoptimised (CI's run:
#                                   the build is what takes the time, and an unoptimised one is
#                                   half as long; each target still runs thousands of inputs)
#   scripts/fuzz.sh --budget <s> --build-only
#                                   only the build --budget runs on (CI starts it in the
#                                   background at idle priority, then runs --budget <s>)
#   scripts/fuzz.sh --list          the targets
#
# Each run starts from fuzz/corpus/<target>/ (the committed seeds, never written) and keeps
# what it finds in fuzz/working-corpus/<target>/ (ignored by git; copy an input worth keeping
# into the committed corpus). A crash stops the run and leaves its input under fuzz/artifacts/<target>/:
# copy it into fuzz/corpus/<target>/ and fix the parser; crates/server/tests/app/fuzz_corpus.rs
# replays every corpus file on stable, so it stays a regression test.
# Needs: rustup's nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^switchboard-fuzz$')
if [ "${1:-}" = "--list" ]; then
  echo "$targets"
  exit 0
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh: the nightly toolchain is missing; rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh: cargo-fuzz is missing; cargo install cargo-fuzz --locked" >&2
  exit 2
fi

# Optimised with debug assertions on, no sanitizer: the parsers are safe Rust, and a panic is
# what is looked for.
profile=(-O --debug-assertions -s none)
if [ "${1:-}" = "--budget" ]; then
  budget=${2:?scripts/fuzz.sh --budget <total seconds>}
  [[ "$budget" =~ ^[0-9]+$ ]] || { echo "scripts/fuzz.sh: --budget takes whole seconds, not $budget" >&2; exit 2; }
  which=all
  seconds=$((budget / $(wc -w <<<"$targets")))
  [ "$seconds" -ge 1 ] || { echo "scripts/fuzz.sh: a budget of ${budget}s is under a second a target" >&2; exit 2; }
  profile=(--dev -s none)
  if [ "${3:-}" = "--build-only" ]; then
    cargo +nightly fuzz build "${profile[@]}" >&2
    echo "built every target for scripts/fuzz.sh --budget" >&2
    exit 0
  elif [ -n "${3:-}" ]; then
    echo "scripts/fuzz.sh: --budget <s> takes only --build-only after it, not ${3}" >&2
    exit 2
  fi
else
  which="${1:-all}"
  seconds="${2:-30}"
fi
if [ "$which" != all ] && ! grep -qx "$which" <<<"$targets"; then
  echo "scripts/fuzz.sh: no target $which; scripts/fuzz.sh --list names them" >&2
  exit 2
fi
[ "$which" = all ] && run=$targets || run=$which

# One build for every target.
cargo +nightly fuzz build "${profile[@]}" >&2
n=$(wc -w <<<"$run")
i=0
for target in $run; do
  i=$((i + 1))
  echo "[$i/$n] $target: ${seconds}s from $(ls "corpus/$target" | wc -l) corpus inputs" >&2
  mkdir -p "working-corpus/$target"
  log="working-corpus/$target.log"
  status=0
  cargo +nightly fuzz run "${profile[@]}" "$target" "working-corpus/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E '^(stat::number_of_executed_units|stat::new_units_added|==|thread|SUMMARY|Test unit written|panicked)' "$log" >&2 || true
  if [ "$status" -ne 0 ]; then
    echo "scripts/fuzz.sh: $target failed ($log); its input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "fuzzed $n target(s), ${seconds}s each: no crash" >&2
