#!/usr/bin/env bash
# The real Claude Code CLI for the tests that drive it (crates/cli/tests/switchboard/
# claude_code.rs): the npm package @anthropic-ai/claude-code at the version pinned below,
# installed into target/claude-code (kept between runs). Prints the binary's path. Needs npm;
# the package's native binary needs no Node.js to run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
CLAUDE_CODE_VERSION="2.1.337"
prefix="$root/target/claude-code"
bin="$prefix/node_modules/.bin/claude"
if ! [ -x "$bin" ] || [ "$("$bin" --version 2>/dev/null | cut -d' ' -f1)" != "$CLAUDE_CODE_VERSION" ]; then
  command -v npm >/dev/null || { echo "claude-code.sh: npm is needed to install Claude Code (apt-get install -y npm)" >&2; exit 1; }
  echo "claude-code.sh: installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION into $prefix" >&2
  mkdir -p "$prefix"
  npm install --silent --no-audit --no-fund --prefix "$prefix" "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2
fi
"$bin" --version >/dev/null
echo "$bin"
