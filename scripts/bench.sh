#!/usr/bin/env bash
# Benchmarks (never tests). Usage: scripts/bench.sh [authz|review|store|ingress|mcp|memory|schedule|tracing|slack|access|broker|diff|rss|versus|soak]
#
#   authz   authorize and predicate_for, side by side with cedar-policy deciding an equivalent
#           policy on the same requests in the same run (crates/authz-bench, excluded from the
#           workspace so Cedar is built only here).
#   review  `authz diff` over 1,000 grant entries and 100 groups (crates/authz-core/benches)
#   store   a 50-run page for four actor shapes at 10k, 100k and 1M runs on SQLite and Postgres,
#           beside load-then-filter at the largest size. Needs PostgreSQL
#           ($SWITCHBOARD_BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test);
#           fixtures are kept in target/bench/ and schemas sb_bench_<n>. Extra arguments are
#           sizes: scripts/bench.sh store 10000 100000
#
#   ingress `POST /ingress` `runs list` with wrk (64 connections, 20 s) against the release
#           binary over a SQLite store of 1M runs: requests/s and latency percentiles, resident
#           memory idle and under load, and the time from `serve` to ready with an empty store
#           and with 1M runs (scripts/bench/ingress.py). Installs wrk from Debian if missing.
#
#   mcp     `tools/call runs_list` over Streamable HTTP with wrk (16 connections, 20 s) beside
#           the same page through /ingress, in one run, against the release binary over the
#           ingress bench's store; resident memory with 500 open MCP clients
#           (scripts/bench/mcp.py). Installs wrk from Debian if missing.
#
#   memory  memory_context_block over 10k, 100k and 1M records across 1,000 scopes on SQLite and
#           Postgres (p50, p99, and the ratios between sizes), and one reflection of a run with
#           10 candidates (rules extractor, no model). Needs PostgreSQL as for `store`; fixtures
#           in target/bench/memory-<n>.db and schemas sb_bench_mem_<n>. Extra arguments are
#           sizes: scripts/bench.sh memory 10000 100000
#
#   schedule one timer tick with 1,001 declared schedules on SQLite: the steady tick (nothing
#           due), a process's first tick (every last slot read), and a due tick (firings run and
#           recorded).
#
#   tracing `POST /ingress` with wrk (64 connections) against two release `serve` processes on
#           the ingress bench's store, side by side: JSON logs at info with the span log, and
#           RUST_LOG=warn; alternating rounds, the ratio of requests/s (scripts/bench/tracing.py).
#
#   slack   the Slack surface: the release `serve` acknowledging 200 signed events/s for 30 s
#           against a fake Slack Web API on loopback (p50/p99/max, every run recorded exactly
#           once: scripts/bench/slack.py); and the directory: 10,000 stamps over 100 channels
#           and the conversations.info calls they make (crates/slack/benches/directory.rs).
#
#   access  `GET /api/runs.get` with a verified Access JWT, wrk with 64 connections on the same
#           cores: requests/s, latency percentiles, resident memory under load; then 1,000
#           viewers on `/runs/stream`: the memory they add and how long a new run's upsert
#           takes to reach each of them (scripts/bench/access.py). Installs wrk if missing.
#           Both this and `ingress` also run the same wrk load against a bare axum handler
#           answering the same bytes (crates/bare-http) and print Switchboard ÷ bare.
#
#   broker  `decide` over 100 grants (a read, a fetch, a call no grant covers) and the rule
#           table over 1,000 rules (exact, prefix, unnamed), per call, in batches of 1,000
#           (crates/broker/benches/decide.rs); then `sh -c true` bare and under bubblewrap,
#           interleaved (crates/agents/benches/sandbox.rs); a command agent's proxy per
#           connection and per MiB beside direct TCP (crates/agents/benches/proxy.rs); Claude Code's
#           hook per tool call (crates/agents/benches/hook.rs); the peak resident size of the
#           process making a `shell` call that floods 300 MB of output, beside `true` and beside
#           the same flood read whole (crates/agents/benches/flood.rs); and a run's own
#           workspace in a repo of 10,000 files: the base, the working tree and repository,
#           keeping its branch, removing it, on the disk and on a tmpfs
#           (crates/dispatch/benches/workspace.rs). Installs bubblewrap if missing.
#
#   diff    `runs diff` on a run that changed 1,000 files (10,000 lines): the CLI beside `runs
#           get` in alternating rounds, `/api/runs.diff` beside `/api/runs.get`, and the run's
#           page: its bytes, its time to the last byte, and its load in headless Chromium
#           (scripts/bench/diff.py; installs Chromium and the browser venv as the browser check).
#
#   rss     the release `serve` with every surface on (ingress, MCP, Slack against a fake Web
#           API, Access with a key set): idle VmRSS 1 s after the first 200 from /readyz, the
#           median of five starts, with its anonymous and file-backed parts (scripts/bench/rss.py).
#
#   versus  the ingress history page (`runs list --status all`, wrk with 64 connections, 10 s)
#           and MCP `tools/call runs_list` for the same page (16 connections, 10 s)
#           against the release binary and a baseline binary, alternating rounds in one run:
#           each round's ratio and the median (scripts/bench/versus.py). Build the baseline from
#           the commit to compare with and pass it: scripts/bench.sh versus /path/to/switchboard
#
#   soak    the same `serve` under a steady 50 requests/s (half starting echo runs, half `runs
#           list`) for 10 minutes: VmRSS every 5 s and its slope after the first minute
#           (scripts/bench/soak.py; SB_SOAK_SECONDS, SB_SOAK_RATE).
#
# Raw output goes to target/bench/<name>.txt; docs/benchmarks.md records the figures with the
# machine and this command.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/bench
what="${1:-authz}"
shift || true

# Installs a Debian package of the same name when the command is missing.
need() {
  command -v "$1" >/dev/null || apt-get install -y -q "$1" >/dev/null || { apt-get update -q && apt-get install -y -q "$1"; }
}

case "$what" in
  authz)
    echo "== authorize vs cedar-policy (builds Cedar on first run: several minutes)"
    CARGO_TARGET_DIR="$PWD/target" cargo bench --locked \
      --manifest-path crates/authz-bench/Cargo.toml --bench authorize \
      | tee target/bench/authz.txt
    ;;
  store)
    echo "== list pages: SQLite (beside raw SQLite: store ÷ raw per shape) and Postgres (builds fixtures on first run: a few minutes at 1M)"
    cargo bench --locked -p store --features testing --bench list_pages -- "$@" | tee target/bench/store.txt
    ;;
  ingress)
    need wrk
    need sqlite3
    cargo build --locked --release -p cli
    cargo build --locked --release --manifest-path crates/bare-http/Cargo.toml
    python3 scripts/bench/ingress.py | tee target/bench/ingress.txt
    ;;
  mcp)
    need wrk
    need sqlite3
    cargo build --locked --release -p cli
    python3 scripts/bench/mcp.py | tee target/bench/mcp.txt
    ;;
  memory)
    echo "== memory: the context block and reflection (builds fixtures on first run: a minute at 1M)"
    cargo bench --locked -p memory --bench memory -- "$@" | tee target/bench/memory.txt
    ;;
  schedule)
    cargo bench --locked -p server --bench schedule_tick | tee target/bench/schedule.txt
    ;;
  tracing)
    need wrk
    need sqlite3
    cargo build --locked --release -p cli
    python3 scripts/bench/tracing.py | tee target/bench/tracing.txt
    ;;
  slack)
    need sqlite3
    cargo bench --locked -p slack --bench directory | tee target/bench/slack.txt
    cargo build --locked --release -p cli
    python3 scripts/bench/slack.py | tee -a target/bench/slack.txt
    ;;
  access)
    need wrk
    venv="$PWD/target/browser-venv"
    "$venv/bin/python" -c "import jwt, cryptography" 2>/dev/null || {
      python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check "pyjwt[crypto]==2.10.1"
    }
    cargo build --locked --release -p cli
    cargo build --locked --release --manifest-path crates/bare-http/Cargo.toml
    "$venv/bin/python" scripts/bench/access.py | tee target/bench/access.txt
    ;;
  review)
    echo "== authz diff over 1,000 grant entries and 100 groups"
    cargo bench --locked -p authz-core --bench review | tee target/bench/review.txt
    ;;
  broker)
    command -v bwrap >/dev/null || apt-get install -y -q bubblewrap >/dev/null
    echo "== broker: decide over 100 grants, the rule table over 1,000 rules"
    cargo bench --locked -p broker --bench decide | tee target/bench/broker.txt
    echo "== bubblewrap: a shell call sandboxed against a bare spawn"
    cargo bench --locked -p agents --bench sandbox | tee -a target/bench/broker.txt
    echo "== a command agent's proxy: per connection and per MiB, beside direct TCP"
    cargo bench --locked -p agents --bench proxy | tee -a target/bench/broker.txt
    echo "== Claude Code's PreToolUse hook: the decision per tool call, in process and as the binary"
    cargo build --locked --release -p cli
    SWITCHBOARD_BIN="$PWD/target/release/switchboard" cargo bench --locked -p agents --bench hook | tee -a target/bench/broker.txt
    echo "== a flood of output: the peak memory of the process making the call"
    cargo bench --locked -p agents --bench flood | tee -a target/bench/broker.txt
    echo "== a run's own workspace in a repo of 10,000 files"
    cargo bench --locked -p dispatch --bench workspace | tee -a target/bench/broker.txt
    ;;
  diff)
    command -v bwrap >/dev/null || apt-get install -y -q bubblewrap >/dev/null
    command -v chromium >/dev/null || apt-get install -y -q chromium chromium-driver >/dev/null
    venv="$PWD/target/browser-venv"
    "$venv/bin/python" -c "import selenium, jwt, cryptography" 2>/dev/null || {
      python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check "selenium==4.27.1" "pyjwt[crypto]==2.10.1"
    }
    cargo build --locked --release -p cli
    "$venv/bin/python" scripts/bench/diff.py | tee target/bench/diff.txt
    ;;
  rss)
    cargo build --locked --release -p cli
    python3 scripts/bench/rss.py | tee target/bench/rss.txt
    ;;
  versus)
    need wrk
    need sqlite3
    cargo build --locked --release -p cli
    python3 scripts/bench/versus.py "$@" | tee target/bench/versus.txt
    ;;
  soak)
    cargo build --locked --release -p cli
    python3 scripts/bench/soak.py | tee target/bench/soak.txt
    ;;
  *)
    echo "unknown benchmark '$what'; known: authz, review, store, ingress, mcp, memory, schedule, tracing, slack, access, broker, diff, rss, versus, soak" >&2
    exit 2
    ;;
esac
