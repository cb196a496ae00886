#!/usr/bin/env bash
# The official Python MCP SDK (PyPI `mcp`, pinned below) against a real `switchboard serve`:
# two tokens list different tools, runs_list, a denied runs_get (not_found), ask and ask with
# wait; none of the broker's tools offered there. Then the SDK as a sandboxed command agent,
# calling the broker's tools over MCP on its run's own socket ($SWITCHBOARD_BROKER_MCP_URL).
# The SDK is installed into target/mcp-client-venv (kept between runs). .ci/run calls this; it
# fails, never skips, when anything is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
MCP_SDK_VERSION="2.3.0"
venv="$root/target/mcp-client-venv"
if ! "$venv/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$MCP_SDK_VERSION'" 2>/dev/null; then
  echo "mcp-client-check: installing the Python MCP SDK $MCP_SDK_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_SDK_VERSION"
fi
bin="$root/target/debug/switchboard"
[ -x "$bin" ] || cargo build --locked -p cli

work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port="$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat > "$work/switchboard.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
data_dir = "$work/data"
[store]
url = "sqlite://$work/switchboard.db"
[agents]
default = "echo"
[agents.echo]
[mcp]
enabled = true
[grants."mcp:reader"]
actions = ["runs:read"]
[grants."mcp:ops"]
actions = ["runs:read", "runs:write", "agent:run:echo"]
channels = ["mcp:ops"]
[grants."http:tracing"]
actions = ["trace:read"]
TOML
export SWITCHBOARD_INGRESS_TOKENS='{"reader-token-python-0001": {"subject": "reader"}, "ops-token-python-000000001": {"subject": "ops", "channel": "mcp:ops"}, "trace-token-python-00000001": {"subject": "tracing"}}'

# A run the reader may not read: the CLI's own (cli:local, a machine channel it is not granted).
hidden="$("$bin" --config "$work/switchboard.toml" ask --json "a run the reader cannot see" | "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["run_id"])')"

"$bin" --config "$work/switchboard.toml" serve > "$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.2
done
grep -q "on  /mcp" "$work/serve.log" || { echo "mcp-client-check: the start-up summary does not show /mcp on" >&2; cat "$work/serve.log" >&2; exit 1; }

"$venv/bin/python" "$root/scripts/mcp-client/check.py" "http://127.0.0.1:$port/mcp" \
  reader-token-python-0001 ops-token-python-000000001 "$hidden"

# A request whose method is 5,000 characters of request text (rmcp used to log an unknown
# method's name verbatim): answered, and no line of the log quotes it.
long_method="method-text-$(printf 'x%.0s' $(seq 1 5000))"
curl -sS -o /dev/null "http://127.0.0.1:$port/mcp" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-06-18' \
  -H 'authorization: Bearer ops-token-python-000000001' \
  --data "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"$long_method\"}"
sleep 0.3
if grep -q "method-text-xxxx" "$work/serve.log"; then
  echo "mcp-client-check: FAILED: request text (an unknown method's name) reached the log" >&2; exit 1
fi

# The operator's log: none of rmcp's per-request chatter, and never a token.
if grep -q "rmcp::service" "$work/serve.log"; then
  echo "mcp-client-check: FAILED: rmcp's per-request info lines reach the log" >&2; exit 1
fi
if grep -q -e "reader-token-python" -e "ops-token-python" "$work/serve.log"; then
  echo "mcp-client-check: FAILED: a token reached the log" >&2; exit 1
fi
# The span log: each call's root span names the MCP caller and its outcome, and holds no token.
spans="$(curl -fsS "http://127.0.0.1:$port/admin/trace/log?since=0" -H 'Authorization: Bearer trace-token-python-00000001')"
for actor in mcp:ops mcp:reader; do
  grep -q "\"actor\":\"$actor\",\"outcome\":\"ok\",\"route\":\"/mcp\"" <<<"$spans" \
    || { echo "mcp-client-check: FAILED: no span line for $actor's calls:" >&2; echo "$spans" >&2; exit 1; }
done
if grep -q -e "reader-token-python" -e "ops-token-python" <<<"$spans"; then
  echo "mcp-client-check: FAILED: a token reached the span log" >&2; exit 1
fi
echo "mcp-client-check: the span log names every caller; no rmcp chatter and no token in the log"

# The broker's tools over MCP on a run's own socket: a command agent that is the SDK itself
# (scripts/mcp-client/broker_check.py), sandboxed, its network the broker's. Each call is
# decided as the openai loop's are: shell and read_file in the workspace allowed by their
# grants, a read outside refused, a push refused (not one of the git tool's subcommands).
base="$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')"
cat > "$work/broker.toml" <<TOML
[server]
data_dir = "$work/broker-data"
[store]
url = "sqlite://$work/broker.db"
[agents]
default = "sdk"
[agents.sdk]
backend = "command"
command = ["$venv/bin/python", "$root/scripts/mcp-client/broker_check.py"]
sandbox_read_only = ["$venv", "$base", "$root/scripts/mcp-client"]
[agent_policy]
rules = [{ action = "shell.exec", decision = "allow" }]
[[agent_grants]]
id = "workspace-shell"
tool = "shell"
paths = ["{workspace}"]
mode = "auto"
[[agent_grants]]
id = "workspace-read"
tool = "read_file"
paths = ["{workspace}"]
mode = "auto"
TOML
said="$("$bin" --config "$work/broker.toml" ask --json "work through the broker" </dev/null || true)"
answer="$("$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["answer"] or "")' <<<"$said")"
expect() {
  grep -qE -- "$1" <<<"$answer" || { echo "mcp-client-check: FAILED: the broker's MCP tools: no \"$1\" in:" >&2; echo "$said" >&2; exit 1; }
}
expect "tools: git,http_fetch,read_file,restrict_self,shell,widen_self,write_file"
expect "^shell: exit status 0 .*from-the-shell"
expect "^read_file: from-the-shell"
expect "^outside: error refused: fs.read: no-grant"
expect "^push: error refused: .*git push is not offered"
run="$("$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["run_id"])' <<<"$said")"
events="$("$bin" --config "$work/broker.toml" runs events "$run")"
grep -q "shell shell.exec: allowed by grant workspace-shell" <<<"$events" \
  || { echo "mcp-client-check: FAILED: the run's events do not show the shell call's decision:" >&2; echo "$events" >&2; exit 1; }
echo "mcp-client-check: the broker's tools over a run's socket: shell and read_file decided and run, a read outside and a push refused"
