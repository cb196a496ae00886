#!/usr/bin/env python3
"""The Access benchmark driver (scripts/bench.sh access). Not a test.

Against the release `switchboard serve` on a SQLite store, with an RS256 token minted here
(an RSA key from `cryptography`, PyJWT, the key set in a file):
  - `GET /api/runs.get?id=…` with the token in Cf-Access-Jwt-Assertion, wrk with 64
    connections on the same two cores: requests/s, latency percentiles, and the server's
    resident memory (VmRSS) sampled under that load;
  - 1,000 viewers holding `/runs/stream` open: the memory they add, and the time from starting
    a run (POST /ingress) until its `upsert` reaches each viewer (p50, p99, max).
"""
import asyncio
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import bare  # noqa: E402

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "switchboard")
WORK = os.path.join(ROOT, "target", "bench", "access")
PORT = 18191
DURATION = os.environ.get("SB_BENCH_DURATION", "20s")
VIEWERS = int(os.environ.get("SB_BENCH_VIEWERS", "1000"))
ISSUER = "https://issuer.bench"
AUDIENCE = "aud-bench"
OPS = "ops-token-bench-0123456789"

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
[store]
url = "sqlite://{work}/switchboard.db"
[agents]
default = "echo"
[agents.echo]
[agents.staller]
behaviour = "stall"
[grants."http:ops"]
actions = ["agent:run:staller"]
[grants."access:bench"]
actions = ["runs:read"]
channels = ["cli:local", "http:ops"]
[access]
issuer = "{issuer}"
audience = "{audience}"
jwks_file = "{work}/jwks.json"
"""


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def token():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "bench", "alg": "RS256"})
    with open(os.path.join(WORK, "jwks.json"), "w") as f:
        json.dump({"keys": [jwk]}, f)
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "iat": now, "exp": now + 3 * 3600}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench"})


def wrk(url, header):
    out = subprocess.run(
        ["wrk", "-t2", "-c64", f"-d{DURATION}", "--latency", "-H", header, url],
        capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    pct = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, pct, int(non2xx.group(1)) if non2xx else 0


async def viewer(jwt_token, ready, started, arrivals, run_id_box):
    reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
    writer.write(
        f"GET /runs/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nCf-Access-Jwt-Assertion: {jwt_token}\r\n\r\n".encode()
    )
    await writer.drain()
    seen = b""
    while b"event: sync" not in seen:
        seen += await reader.read(4096)
    ready.release()
    await started.wait()
    seen = b""
    while True:
        chunk = await reader.read(4096)
        if not chunk:
            return
        seen += chunk
        if run_id_box and run_id_box[0].encode() in seen and b"event: upsert" in seen:
            arrivals.append(time.monotonic())
            writer.close()
            return


async def feed_bench(pid, jwt_token):
    base = rss_kib(pid)
    ready = asyncio.Semaphore(0)
    started = asyncio.Event()
    arrivals, box = [], []
    tasks = [asyncio.create_task(viewer(jwt_token, ready, started, arrivals, box)) for _ in range(VIEWERS)]
    for _ in range(VIEWERS):
        await ready.acquire()
    await asyncio.sleep(1)
    held = rss_kib(pid)
    t0 = time.monotonic()
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}/ingress",
        data=b"@staller a live update",
        headers={"authorization": f"Bearer {OPS}", "accept": "application/json"},
    )
    loop = asyncio.get_running_loop()
    body = await loop.run_in_executor(None, lambda: urllib.request.urlopen(request, timeout=10).read())
    box.append(json.loads(body)["run_id"])
    started.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    delays = sorted((a - t0) * 1000 for a in arrivals)
    return base, held, delays


def main():
    os.makedirs(WORK, exist_ok=True)
    for name in ("switchboard.db", "switchboard.db-wal", "switchboard.db-shm"):
        path = os.path.join(WORK, name)
        if os.path.exists(path):
            os.remove(path)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, VIEWERS + 512)), hard))
    jwt_token = token()
    config = os.path.join(WORK, "switchboard.toml")
    with open(config, "w") as f:
        f.write(CONFIG.format(port=PORT, work=WORK, issuer=ISSUER, audience=AUDIENCE))
    env = dict(os.environ, SWITCHBOARD_INGRESS_TOKENS=json.dumps({OPS: {"subject": "ops", "channel": "http:ops"}}), NO_COLOR="1", RUST_LOG="warn")
    asked = subprocess.run([BIN, "--config", config, "ask", "--json", "a run to read"], capture_output=True, text=True, env=env, check=True)
    run_id = json.loads(asked.stdout)["run_id"]
    server = subprocess.Popen([BIN, "--config", config, "serve"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        url = f"http://127.0.0.1:{PORT}/api/runs.get?id={run_id}"
        check = urllib.request.Request(url, headers={"Cf-Access-Jwt-Assertion": jwt_token})
        with urllib.request.urlopen(check) as answered:
            body, content_type = answered.read(), answered.headers["Content-Type"]
        assert json.loads(body)["id"] == run_id
        idle = rss_kib(server.pid)
        peak = [0]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_kib(server.pid))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample)
        sampler.start()
        rps, pct, non2xx = wrk(url, f"Cf-Access-Jwt-Assertion: {jwt_token}")
        stop.set()
        sampler.join()
        print(f"GET /api/runs.get with a verified JWT, wrk -t2 -c64 -d{DURATION}:")
        print(f"  requests/s      {rps:,.0f}   (non-2xx: {non2xx})")
        print(f"  latency         p50 {pct.get('50')}  p75 {pct.get('75')}  p90 {pct.get('90')}  p99 {pct.get('99')}")
        print(f"  resident memory idle {idle / 1024:.1f} MB, under load max {peak[0] / 1024:.1f} MB")
        # The same load against one axum handler answering the same bytes, in this run.
        server.send_signal(signal.SIGSTOP)
        bare_server = bare.serve_bytes(body, content_type)
        try:
            bare_rps, bare_pct, _ = wrk(bare.url_on_bare(url), f"Cf-Access-Jwt-Assertion: {jwt_token}")
        finally:
            bare_server.terminate()
            bare_server.wait()
            server.send_signal(signal.SIGCONT)
        print(f"  a bare axum handler answering the same {len(body)} bytes: {bare_rps:,.0f} requests/s, p50 {bare_pct.get('50')}")
        print(f"  Switchboard ÷ bare: {rps / bare_rps:.3f} (goal ≥ 0.8)")
        base, held, delays = asyncio.run(feed_bench(server.pid, jwt_token))
        print(f"/runs/stream with {VIEWERS} open viewers:")
        print(f"  resident memory before {base / 1024:.1f} MB, holding them {held / 1024:.1f} MB (added {(held - base) / 1024:.1f} MB)")
        if len(delays) != VIEWERS:
            print(f"  only {len(delays)} of {VIEWERS} viewers received the update")
        p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]
        print(f"  a new run's upsert reached {len(delays)} viewers: p50 {statistics.median(delays):.1f} ms  p99 {p99:.1f} ms  max {delays[-1]:.1f} ms (from POST /ingress)")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
