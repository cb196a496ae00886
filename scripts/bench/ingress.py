#!/usr/bin/env python3
"""The ingress benchmark driver (scripts/bench.sh ingress). Not a test.

Measures, on one machine in one run:
  - time from spawning `switchboard serve` to the first 200 from /readyz, over an empty store
    and over a store holding 1M runs (median of several starts each);
  - resident memory (VmRSS) of the idle server, and its peak (VmHWM) under load;
  - `POST /ingress` `runs list` with wrk: 64 connections, 20 s, requests/s and latency
    percentiles, for a 50-run page of live runs (LIVE of them, owned by a replica that stays
    alive) and a 50-run page of history (`--status all`) over every run.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import bare  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "switchboard")
WORK = os.path.join(ROOT, "target", "bench", "ingress")
TOKEN = "bench-token-0123456789abcdef"
PORT = 18181
RUNS = int(os.environ.get("SB_BENCH_RUNS", "1000000"))
STARTS = int(os.environ.get("SB_BENCH_STARTS", "7"))
DURATION = os.environ.get("SB_BENCH_DURATION", "20s")
LIVE = 500

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
replica_id = "bench"
[store]
url = "sqlite://{db}"
[agents]
default = "echo"
[agents.echo]
[grants."http:bench"]
actions = ["runs:read"]
channels = ["http:ops", "slack:G0000001"]
"""


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def seed(db):
    """A store of RUNS runs over public, private, dm and machine channels (SQL, in seconds)."""
    if os.path.exists(db):
        out = subprocess.run(["sqlite3", db, "SELECT count(*) FROM runs"], capture_output=True, text=True)
        if out.stdout.strip() == str(RUNS + LIVE):
            return
        os.remove(db)
    write_config(db)
    sh(BIN, "--config", config_path(db), "db", "migrate", stdout=subprocess.DEVNULL)
    t = time.monotonic()
    sql = f"""
PRAGMA journal_mode=WAL;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {RUNS} - 1)
INSERT INTO runs (id, surface, channel_id, user_id, agent, status, request, created_at, channel_visibility)
SELECT printf('B%025d', i), 'http',
       CASE i % 4 WHEN 0 THEN 'slack:C' || printf('%07d', i % 50)
                  WHEN 1 THEN 'slack:G' || printf('%07d', i % 20)
                  WHEN 2 THEN 'slack:D' || printf('%07d', i % 100)
                  ELSE 'http:' || CASE i % 3 WHEN 0 THEN 'ops' ELSE 'ci' END END,
       'slack:U' || printf('%07d', i % 500), 'echo', 'completed', 'bench request',
       1700000000000000 + i * 1000,
       CASE i % 4 WHEN 0 THEN 'public' WHEN 1 THEN 'private' WHEN 2 THEN 'dm' ELSE 'machine' END
FROM n;
-- Live runs of a replica whose lease never expires, so no sweep tombstones them.
INSERT INTO replicas (id, heartbeat_at) VALUES ('bench-other', 9000000000000000000);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {LIVE} - 1)
INSERT INTO runs (id, surface, channel_id, user_id, agent, status, request, created_at, channel_visibility, owner)
SELECT printf('L%025d', i), 'http',
       CASE i % 2 WHEN 0 THEN 'slack:C' || printf('%07d', i % 50) ELSE 'http:ops' END,
       'slack:U' || printf('%07d', i % 500), 'echo', 'running', 'bench live request',
       1700000000000000 + {RUNS} * 1000 + i * 1000,
       CASE i % 2 WHEN 0 THEN 'public' ELSE 'machine' END, 'bench-other'
FROM n;
COMMIT;
ANALYZE;
"""
    sh("sqlite3", db, input=sql, text=True, stdout=subprocess.DEVNULL)
    print(f"seeded {RUNS} runs in {time.monotonic() - t:.1f}s", file=sys.stderr)


def config_path(db):
    return db + ".toml"


def write_config(db):
    with open(config_path(db), "w") as f:
        f.write(CONFIG.format(port=PORT, work=WORK, db=db))


def spawn(db):
    env = dict(os.environ, SWITCHBOARD_INGRESS_TOKENS=json.dumps({TOKEN: {"subject": "bench"}}))
    log = open(os.path.join(WORK, "serve.log"), "a")
    return subprocess.Popen([BIN, "--config", config_path(db), "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=log, cwd=WORK)


def ready_after(proc):
    """Seconds from spawn to the first 200 from /readyz."""
    t = time.monotonic()
    while time.monotonic() - t < 30:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited with {proc.returncode} before it was ready; see {WORK}/serve.log")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/readyz", timeout=1) as r:
                if r.status == 200:
                    return time.monotonic() - t
        except OSError:
            time.sleep(0.001)
    raise SystemExit("serve did not become ready in 30s")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main():
    os.makedirs(os.path.join(WORK, "data"), exist_ok=True)
    big = os.path.join(WORK, f"runs-{RUNS}.db")
    empty = os.path.join(WORK, "runs-empty.db")
    seed(big)
    # Apply any migration the fixture predates before timing start-ups.
    write_config(big)
    sh(BIN, "--config", config_path(big), "db", "migrate", stdout=subprocess.DEVNULL)
    if os.path.exists(empty):
        os.remove(empty)
    write_config(empty)
    sh(BIN, "--config", config_path(empty), "db", "migrate", stdout=subprocess.DEVNULL)

    # Ready time, side by side: empty store and 1M runs, alternating.
    empty_t, big_t = [], []
    for _ in range(STARTS):
        for db, acc in ((empty, empty_t), (big, big_t)):
            p = spawn(db)
            acc.append(ready_after(p))
            stop(p)
    ms = lambda xs: f"median {statistics.median(xs) * 1000:.1f} ms (min {min(xs) * 1000:.1f}, max {max(xs) * 1000:.1f}, n={len(xs)})"
    print(f"serve → ready, empty store: {ms(empty_t)}")
    print(f"serve → ready, {RUNS} runs:  {ms(big_t)}")

    # Memory and throughput over the 1M-run store.
    p = spawn(big)
    ready_after(p)
    time.sleep(1.0)
    idle = rss_kib(p.pid, "VmRSS")
    samples = []
    for body in ("runs list --limit 50", "runs list --status all --limit 50"):
        lua = os.path.join(WORK, "post.lua")
        with open(lua, "w") as f:
            f.write(f'wrk.method = "POST"\nwrk.body = "{body}"\n'
                    f'wrk.headers["Authorization"] = "Bearer {TOKEN}"\n'
                    'wrk.headers["Content-Type"] = "text/plain"\n')
        # One check that the request is answered (200 with runs) before loading it.
        req = urllib.request.Request(f"http://127.0.0.1:{PORT}/ingress", data=body.encode(), method="POST",
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain",
                                              "Accept": "application/json"})
        with urllib.request.urlopen(req) as r:
            page = json.loads(r.read())
            print(f"== POST /ingress '{body}': one request: {r.status}, {len(page['runs'])} runs in the page")
            if len(page["runs"]) != 50:
                raise SystemExit(f"expected a full 50-run page for '{body}'")
        # What wrk's requests are answered with (no Accept header: the text reply).
        as_wrk = urllib.request.Request(f"http://127.0.0.1:{PORT}/ingress", data=body.encode(), method="POST",
                                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
        with urllib.request.urlopen(as_wrk) as r:
            answer, content_type = r.read(), r.headers["Content-Type"]
        wrk = subprocess.Popen(["wrk", "-t2", "-c64", "-d", DURATION, "--latency", "-s", lua,
                                f"http://127.0.0.1:{PORT}/ingress"], stdout=subprocess.PIPE, text=True)
        while wrk.poll() is None:
            samples.append(rss_kib(p.pid, "VmRSS"))
            time.sleep(0.5)
        out = wrk.stdout.read()
        print(out)
        # The same load against one axum handler answering the same bytes, in this run.
        p.send_signal(signal.SIGSTOP)
        bare_server = bare.serve_bytes(answer, content_type)
        try:
            bare_out = subprocess.run(["wrk", "-t2", "-c64", "-d", DURATION, "-s", lua,
                                       f"http://127.0.0.1:{bare.PORT}/ingress"],
                                      capture_output=True, text=True, check=True).stdout
        finally:
            bare_server.terminate()
            bare_server.wait()
            p.send_signal(signal.SIGCONT)
        rps, bare_rps = bare.requests_per_second(out), bare.requests_per_second(bare_out)
        print(f"a bare axum handler answering the same {len(answer)} bytes: {bare_rps:,.0f} req/s; "
              f"Switchboard ÷ bare: {rps / bare_rps:.3f}")
    peak = rss_kib(p.pid, "VmHWM")
    stop(p)
    print(f"resident memory: idle {idle / 1024:.1f} MiB; under load max sampled {max(samples) / 1024:.1f} MiB, "
          f"peak (VmHWM) {peak / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
