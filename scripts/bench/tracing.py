#!/usr/bin/env python3
"""The tracing benchmark driver (scripts/bench.sh tracing). Not a test.

Two `serve` processes over the ingress bench's SQLite store of RUNS runs, side by side in one
run, each its own port and replica:
  - "on":  JSON logs at info (RUST_LOG=info, [telemetry] log_format = "json"): every request's
           root span, its log line (written to a file), and the span log's ring buffer;
  - "warn": RUST_LOG=warn: no request span, no per-request line.
wrk loads one at a time (64 connections), alternating in ROUNDS rounds of ROUND, so both see
the same machine; the cost of tracing is the ratio of their requests/s. Two requests: the
viewer's live runs (`runs list`, cheap: the tracing share is largest) and a 50-run history
page (`runs list --status all --limit 50`).
"""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import ingress  # noqa: E402  (the same fixture, spawn and memory helpers)

WORK = ingress.WORK
TOKEN = ingress.TOKEN
ROUNDS = int(os.environ.get("SB_BENCH_ROUNDS", "5"))
ROUND = os.environ.get("SB_BENCH_ROUND", "8s")
PORTS = {"on": ingress.PORT + 10, "warn": ingress.PORT + 11}
BODIES = ("runs list", "runs list --status all --limit 50")


def spawn(db, mode):
    port = PORTS[mode]
    cfg = os.path.join(WORK, f"tracing-{mode}.toml")
    telemetry = '[telemetry]\nlog_format = "json"\nspan_log_capacity = 1000\n' if mode == "on" else ""
    with open(cfg, "w") as f:
        f.write(ingress.CONFIG.format(port=port, work=WORK, db=db).replace(
            'replica_id = "bench"', f'replica_id = "bench-{mode}"') + telemetry)
    env = dict(os.environ, SWITCHBOARD_INGRESS_TOKENS=json.dumps({TOKEN: {"subject": "bench"}}),
               RUST_LOG="info" if mode == "on" else "warn")
    log = open(os.path.join(WORK, f"serve-tracing-{mode}.log"), "w")
    return subprocess.Popen([ingress.BIN, "--config", cfg, "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=log, cwd=WORK)


def ready(port):
    import time
    t = time.monotonic()
    while time.monotonic() - t < 30:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.01)
    raise SystemExit(f"serve on {port} did not become ready")


def wrk(port, body):
    lua = os.path.join(WORK, "tracing-post.lua")
    with open(lua, "w") as f:
        f.write(f'wrk.method = "POST"\nwrk.body = "{body}"\n'
                f'wrk.headers["Authorization"] = "Bearer {TOKEN}"\n'
                'wrk.headers["Content-Type"] = "text/plain"\n')
    out = subprocess.run(["wrk", "-t2", "-c64", "-d", ROUND, "--latency", "-s", lua,
                          f"http://127.0.0.1:{port}/ingress"], stdout=subprocess.PIPE, text=True, check=True)
    if "Non-2xx" in out.stdout:
        raise SystemExit(f"{body}: some answers were not 2xx")
    rps = next(float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("Requests/sec:"))
    p99 = next(line.split()[1] for line in out.stdout.splitlines() if line.strip().startswith("99%"))
    return rps, p99


def main():
    os.makedirs(os.path.join(WORK, "data"), exist_ok=True)
    db = os.path.join(WORK, f"runs-{ingress.RUNS}.db")
    ingress.seed(db)
    ingress.write_config(db)
    ingress.sh(ingress.BIN, "--config", ingress.config_path(db), "db", "migrate", stdout=subprocess.DEVNULL)
    procs = {mode: spawn(db, mode) for mode in PORTS}
    try:
        for mode, port in PORTS.items():
            ready(port)
        for body in BODIES:
            print(f"== POST /ingress '{body}', 64 connections, tracing on (JSON logs + span log) vs at warn, "
                  f"{ROUNDS} alternating rounds of {ROUND}")
            ratios = []
            for i in range(ROUNDS):
                on, on_p99 = wrk(PORTS["on"], body)
                warn, warn_p99 = wrk(PORTS["warn"], body)
                ratios.append(on / warn)
                print(f"round {i + 1}: on {on:.0f} req/s (p99 {on_p99}), warn {warn:.0f} req/s (p99 {warn_p99}), "
                      f"on/warn {on / warn:.3f}")
            ratios.sort()
            print(f"on/warn: median {ratios[len(ratios) // 2]:.3f}, min {ratios[0]:.3f}, max {ratios[-1]:.3f}")
        lines = sum(1 for _ in open(os.path.join(WORK, "serve-tracing-on.log")))
        print(f"the 'on' process wrote {lines} log lines")
    finally:
        for p in procs.values():
            ingress.stop(p)


if __name__ == "__main__":
    main()
