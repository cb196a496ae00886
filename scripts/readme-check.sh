#!/usr/bin/env bash
# Runs every ```sh block of README.md, in order, as written, in a fresh temporary directory
# (with a copy of config/, as a clone would have it). `cargo run [--release] -p cli -- ARGS`
# runs the debug binary the tests built (built here if missing), so CI pays for no second
# build. A block fails the check when any command in it fails (curl's --fail-with-body makes
# an HTTP error a failure). What a block leaves running in the background is stopped with
# SIGTERM (a graceful stop) when the block ends.
#
# A line `<!-- readme-check: MODE -->` right before a block says how to run it:
#   server  the block starts a server in the foreground (as a reader would, then Ctrl-C):
#           it runs in the background, must answer /readyz on 127.0.0.1:8080 within 120 s,
#           then gets SIGINT and must exit 0.
#   exit N  the block's commands exit N (an example of a refusal, say); without -e.
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
trap 'rm -rf "$work"' EXIT
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

# The prelude every block runs with: `cargo run -p cli --` is the binary; nothing else of
# cargo is an example a reader runs from the README.
cat > "$work/.prelude.sh" <<PRELUDE
set -euo pipefail
cargo() {
  local args=("\$@")
  if [ "\${args[0]:-}" = run ]; then
    args=("\${args[@]:1}")
    [ "\${args[0]:-}" = --release ] && args=("\${args[@]:1}")
    if [ "\${args[0]:-}" = -p ] && [ "\${args[1]:-}" = cli ] && [ "\${args[2]:-}" = -- ]; then
      # In a subshell (\`cargo run … &\`, \`\$(…)\`) the binary takes its place, so a signal
      # to the job reaches it; in the block's own shell it runs as a child, so the commands
      # after it run too.
      if [ "\$BASHPID" != "\$\$" ]; then exec "$bin" "\${args[@]:3}"; fi
      "$bin" "\${args[@]:3}"
      return
    fi
  fi
  echo "readme-check: only 'cargo run [--release] -p cli -- …' is run from the README, not: cargo \$*" >&2
  return 2
}
PRELUDE

wait_ready() {
  for _ in $(seq 1 600); do
    curl -sf localhost:8080/readyz >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

failed=0
for script in "$blocks"/*.sh; do
  n="$(basename "$script" .sh)"
  mode="$(cat "$blocks/$n.mode")"
  first="$(head -1 "$script")"
  case "$mode" in
    skip)
      echo "== block $n: skipped by its readme-check comment: $first"
      continue
      ;;
    server)
      echo "== block $n (server): $first"
      # Its own process group, so Ctrl-C (SIGINT to the group) reaches the server itself.
      (cd "$work" && exec setsid bash -c "source .prelude.sh; $(cat "$script")") > "$work/.server-$n.log" 2>&1 &
      pid=$!
      if wait_ready && curl -sf localhost:8080/readyz | grep -qx ready; then
        kill -INT -- "-$pid"
        if wait "$pid"; then echo "   ready, and stopped by Ctrl-C"; else
          echo "   FAILED: did not exit 0 on Ctrl-C"; cat "$work/.server-$n.log"; failed=1; fi
      else
        echo "   FAILED: never answered /readyz"; kill -KILL -- "-$pid" 2>/dev/null || true
        cat "$work/.server-$n.log"; failed=1
      fi
      ;;
    exit:*)
      want="${mode#exit:}"
      echo "== block $n (exits $want): $first"
      body="$(cat "$script")"
      set +e
      (cd "$work" && bash -c "source .prelude.sh; set +e
$body")
      got=$?
      set -e
      if [ "$got" != "$want" ]; then
        echo "   FAILED: block $n exited $got, the README says $want" >&2
        failed=1
      fi
      ;;
    run)
      echo "== block $n: $first"
      body="$(cat "$script")"
      if ! (cd "$work" && bash -c "source .prelude.sh
$body
for job in \$(jobs -p); do kill -TERM \$job; wait \$job || true; done"); then
        echo "   FAILED: block $n" >&2
        failed=1
      fi
      ;;
    *)
      echo "readme-check: block $n has an unknown mode '$mode'" >&2
      failed=1
      ;;
  esac
  port_free || { echo "readme-check: block $n left 127.0.0.1:8080 in use" >&2; failed=1; }
done
if [ "$failed" != 0 ]; then
  echo "readme-check: FAILED" >&2
  exit 1
fi
echo "readme-check: every block of README.md ran as written"
