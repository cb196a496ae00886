#!/usr/bin/env python3
"""The resident-memory benchmark (scripts/bench.sh rss). Not a test.

Starts the release `serve` with every surface on: /ingress and /mcp with a token map, Slack
against a fake Web API on loopback (the slack bench's), /api and /runs with an Access key set,
schedules and retention. Idle is VmRSS 1 s after the first 200 from /readyz; the median of
five starts is reported, with its anonymous and file-backed parts (the binary's pages the
start touched count to the second).
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from base64 import urlsafe_b64encode
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(__file__))
from slack import FakeSlack  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "switchboard")
WORK = os.path.join(ROOT, "target", "bench", "rss")
PORT = 18191
STARTS = int(os.environ.get("SB_BENCH_STARTS", "5"))
TOKEN = "bench-token-0123456789"

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
replica_id = "bench"
[store]
url = "sqlite://{work}/rss.db"
[agents]
default = "echo"
[agents.echo]
[mcp]
enabled = true
[slack]
api_url = "{slack}"
[access]
issuer = "https://issuer.bench"
audience = "aud-bench"
jwks_file = "{work}/jwks.json"
"""


def b64(n):
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return urlsafe_b64encode(raw).decode().rstrip("=")


def ready(timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("serve never became ready")


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0])
    return fields


def prepare(extra=""):
    """The fake Slack Web API started, the key set and config written: (config path, env)."""
    os.makedirs(WORK, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeSlack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    slack = f"http://127.0.0.1:{server.server_address[1]}/api/"
    with open(os.path.join(WORK, "jwks.json"), "w") as f:
        key = {"kty": "RSA", "kid": "bench", "alg": "RS256", "use": "sig", "n": b64((1 << 2047) | 0x10001), "e": "AQAB"}
        json.dump({"keys": [key]}, f)
    config = os.path.join(WORK, "switchboard.toml")
    with open(config, "w") as f:
        f.write(CONFIG.format(port=PORT, work=WORK, slack=slack) + extra)
    env = dict(os.environ)
    env.update({
        "SWITCHBOARD_INGRESS_TOKENS": json.dumps({TOKEN: {"subject": "bench", "channel": "http:bench"}}),
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": "bench-signing-secret",
        "NO_COLOR": "1",
    })
    return config, env


def main():
    config, env = prepare()
    samples = []
    for i in range(STARTS):
        proc = subprocess.Popen([BIN, "--config", config, "serve"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            ready()
            time.sleep(1)
            samples.append(status(proc.pid))
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=30)
        if i == 0:
            off = [l.strip() for l in out.splitlines() if l.strip().startswith("off ")]
            on = [l.strip() for l in out.splitlines() if l.strip().startswith("on ")]
            print("surfaces on:", ", ".join(l.split()[1] for l in on))
            print("surfaces off:", ", ".join(l.split()[1] for l in off) or "none")
    median = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    print("idle VmRSS over %d starts (KiB): %s" % (STARTS, sorted(s["VmRSS"] for s in samples)))
    print("idle median: VmRSS %.1f MiB (anonymous %.1f MiB, file-backed %.1f MiB)" % (
        median["VmRSS"] / 1024, median["RssAnon"] / 1024, median["RssFile"] / 1024))


if __name__ == "__main__":
    main()
