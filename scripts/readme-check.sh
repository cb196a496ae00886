#!/usr/bin/env bash
# Runs every ```sh block of README.md, in order, as written, in ONE shell in a fresh temporary
# directory (with a copy of config/, as a clone would have it), as a reader pasting them into
# one terminal would: what a block defines or leaves running is there for the next. Nothing is
# stopped between blocks, so a block that leaves a server running fails the check (the next
# block's server could not bind, and its readiness loop would answer from the old one).
# `cargo run [--release] -p cli -- ARGS` runs the debug binary the tests built (built here if
# missing), so CI pays for no second build. A failing command fails the check (curl's
# --fail-with-body makes an HTTP error a failure).
#
# A line `<!-- readme-check: MODE -->` right before a block says how to run it:
#   server  the block starts a server in the foreground (as a reader would, then Ctrl-C): it
#           runs in the background, must answer /readyz on 127.0.0.1:8080 within 120 s, then
#           gets SIGINT at the end of the block and must exit 0.
#   exit N  the block's commands exit N (an example of a refusal, say); run without -e.
#   skip    not run here; the comment says why (the test command is CI's own step).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/debug/switchboard"
if [ ! -x "$bin" ]; then
  echo "readme-check: building the debug binary"
  (cd "$root" && cargo build --locked -p cli)
fi

port_free() { ! (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; }
if ! port_free; then
  echo "readme-check: 127.0.0.1:8080 is in use; the README's examples listen there. Stop what holds it." >&2
  exit 1
fi

work="$(mktemp -d)"
runner=""
# Whatever the blocks leave when one fails is stopped here (the script's process group: its
# background jobs and a foreground server's own group), so CI never hangs on it.
cleanup() {
  if [ -n "$runner" ]; then kill -KILL -- "-$runner" 2>/dev/null || true; fi
  if [ -f "$work/.server.pid" ]; then kill -KILL -- "-$(cat "$work/.server.pid")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cp -r "$root/config" "$work/config"
blocks="$work/.blocks"
mkdir -p "$blocks"

# Extract the blocks: blocks/NN.sh and blocks/NN.mode.
awk -v dir="$blocks" '
  /^<!-- readme-check: / { mode = $3; if ($3 == "exit") mode = "exit:" $4; next }
  /^```sh$/ { n++; file = sprintf("%s/%02d.sh", dir, n); printf "%s", (mode == "" ? "run" : mode) > sprintf("%s/%02d.mode", dir, n); mode = ""; inblock = 1; next }
  /^```$/ && inblock { inblock = 0; close(file); next }
  inblock { print > file }
  /^[^<]/ && !inblock { mode = "" }
' "$root/README.md"

# The one script: the prelude, then every block in order, each followed by the check that it
# left 127.0.0.1:8080 free.
script="$work/.readme.sh"
cat > "$script" <<PRELUDE
set -euo pipefail
# A fresh terminal: none of Switchboard's own variables from the caller's environment.
unset SWITCHBOARD_CONFIG SWITCHBOARD_INGRESS_TOKENS SWITCHBOARD_AGENT_TOKEN_SECRET
# \`cargo run -p cli --\` is the binary; nothing else of cargo is an example a reader runs.
cargo() {
  local args=("\$@")
  if [ "\${args[0]:-}" = run ]; then
    args=("\${args[@]:1}")
    [ "\${args[0]:-}" = --release ] && args=("\${args[@]:1}")
    if [ "\${args[0]:-}" = -p ] && [ "\${args[1]:-}" = cli ] && [ "\${args[2]:-}" = -- ]; then
      # In a subshell (\`cargo run … &\`, \`\$(…)\`) the binary takes its place, as \`cargo run\`
      # execs it, so a signal to the job reaches it; in the shell itself it runs as a child.
      if [ "\$BASHPID" != "\$\$" ]; then exec "$bin" "\${args[@]:3}"; fi
      "$bin" "\${args[@]:3}"
      return
    fi
  fi
  echo "readme-check: only 'cargo run [--release] -p cli -- …' is run from the README, not: cargo \$*" >&2
  return 2
}
port_free() { ! (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; }
wait_ready() {
  for _ in \$(seq 1 600); do
    curl -sf localhost:8080/readyz >/dev/null 2>&1 && return 0
    kill -0 "\$1" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
left_free() {
  port_free || { echo "   FAILED: block \$1 left a server on 127.0.0.1:8080 (every block that starts a server must stop it)" >&2; exit 1; }
}
block=none
trap 'echo "   FAILED: block \$block (line \$LINENO of its script)" >&2' ERR
PRELUDE

for file in "$blocks"/*.sh; do
  n="$(basename "$file" .sh)"
  mode="$(cat "$blocks/$n.mode")"
  first="$(head -1 "$file" | sed "s/'/'\\\\''/g")"
  case "$mode" in
    skip)
      echo "echo '== block $n: skipped by its readme-check comment: $first'" >> "$script"
      continue
      ;;
    server)
      # Its own process group, so Ctrl-C (SIGINT to the group) reaches the server itself.
      cat >> "$script" <<BLOCK
block=$n
echo '== block $n (server): $first'
setsid bash -c 'source "$work/.prelude.sh"; source "$file"' > "$work/.server-$n.log" 2>&1 &
server_pid=\$!
echo "\$server_pid" > "$work/.server.pid"
if ! { wait_ready "\$server_pid" && curl -sf localhost:8080/readyz | grep -qx ready; }; then
  echo "   FAILED: never answered /readyz" >&2; kill -KILL -- "-\$server_pid" 2>/dev/null || true
  cat "$work/.server-$n.log" >&2; exit 1
fi
kill -INT -- "-\$server_pid"
if wait "\$server_pid"; then echo "   ready, and stopped by Ctrl-C"; else
  echo "   FAILED: did not exit 0 on Ctrl-C" >&2; cat "$work/.server-$n.log" >&2; exit 1; fi
left_free $n
BLOCK
      ;;
    exit:*)
      want="${mode#exit:}"
      cat >> "$script" <<BLOCK
block=$n
echo '== block $n (exits $want): $first'
got=0
(set +e; source "$file") || got=\$?
if [ "\$got" != "$want" ]; then echo "   FAILED: block $n exited \$got, the README says $want" >&2; exit 1; fi
left_free $n
BLOCK
      ;;
    run)
      cat >> "$script" <<BLOCK
block=$n
echo '== block $n: $first'
source "$file"
left_free $n
BLOCK
      ;;
    *)
      echo "readme-check: block $n has an unknown mode '$mode'" >&2
      exit 1
      ;;
  esac
done
echo 'echo "readme-check: every block of README.md ran as written, in one shell"' >> "$script"

# The prelude alone, for the server blocks' own shells.
sed -n '/^cargo() {/,/^}/p' "$script" > "$work/.prelude.sh"

# Its own process group, so what it leaves can be stopped whole.
set -m
(cd "$work" && exec bash "$script") &
runner=$!
set +m
if ! wait "$runner"; then
  echo "readme-check: FAILED" >&2
  exit 1
fi
