#!/usr/bin/env python3
"""The MCP benchmark driver (scripts/bench.sh mcp). Not a test.

Measures, on one machine in one run, against the release binary over a SQLite store of RUNS
runs (the ingress bench's fixture shape), with wrk on the same 2 cores:
  - `tools/call runs_list` with no arguments (the live runs, 20 a page: what an agent calls
    first), 16 connections in a closed loop (each sends its next call when the last answers):
    requests/s and latency percentiles;
  - `tools/call runs_list` for a 50-run page of history, 16 connections, closed loop;
  - that history page through `/mcp` and through `POST /ingress` (`runs list --status all`),
    alternating in ROUNDS short rounds, so the MCP layer's cost is a ratio of figures measured
    side by side;
  - `tools/call runs_list` with no arguments from 16 clients that each pause THINK_MS between
    calls (about 1,000 calls/s offered): latency below saturation;
  - resident memory (VmRSS) idle, and with 500 open MCP clients: each on its own kept-alive
    connection, having sent `initialize`, `notifications/initialized` and `tools/list`.
    The server is stateless, so an open client costs a connection and nothing else.
"""
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import ingress  # noqa: E402  (the same fixture, spawn and memory helpers)

WORK = ingress.WORK
PORT = ingress.PORT
TOKEN = ingress.TOKEN
DURATION = os.environ.get("SB_BENCH_DURATION", "20s")
CLIENTS = 500
CONNECTIONS = 16

THINK_MS = 15
ROUNDS = 4
ROUND = "8s"

CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "runs_list", "arguments": {"status": "all", "limit": 50}}})
CALL_DEFAULT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "runs_list", "arguments": {}}})
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def write_config(db):
    with open(ingress.config_path(db), "w") as f:
        # The same token as the ingress bench: http:bench there, mcp:bench here, same grants.
        f.write(ingress.CONFIG.format(port=PORT, work=WORK, db=db)
                + '[grants."mcp:bench"]\nactions = ["runs:read"]\nchannels = ["http:ops", "slack:G0000001"]\n'
                + "[mcp]\nenabled = true\n")


def one_call():
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}/mcp", data=CALL.encode(), method="POST",
                                 headers=HEADERS)
    with urllib.request.urlopen(req) as r:
        answer = json.loads(r.read())
    runs = answer.get("result", {}).get("structuredContent", {}).get("runs", [])
    if answer["result"].get("isError") or len(runs) != 50:
        raise SystemExit(f"expected a full 50-run page from tools/call runs_list, got {answer}")
    print(f"== tools/call runs_list: one request: {len(runs)} runs in structuredContent")


def wrk(path, lua_body, headers, think_ms=None, duration=DURATION, quiet=False):
    lua = os.path.join(WORK, f"post{path.replace('/', '-')}.lua")
    with open(lua, "w") as f:
        f.write(f'wrk.method = "POST"\nwrk.body = {json.dumps(lua_body)}\n')
        for k, v in headers.items():
            f.write(f'wrk.headers["{k}"] = "{v}"\n')
        if think_ms is not None:
            f.write(f"function delay()\n  return {think_ms}\nend\n")
    out = subprocess.run(["wrk", "-t2", f"-c{CONNECTIONS}", "-d", duration, "--latency", "-s", lua,
                          f"http://127.0.0.1:{PORT}{path}"], stdout=subprocess.PIPE, text=True, check=True)
    if not quiet:
        print(out.stdout)
    if "Non-2xx" in out.stdout:
        raise SystemExit(f"{path}: some answers were not 2xx")
    return next(float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("Requests/sec:"))


def open_clients(n):
    """n MCP clients, each initialized on its own kept-alive connection, listing tools."""
    conns = []
    init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    for _ in range(n):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        for body in (init, initialized, listing):
            c.request("POST", "/mcp", body=body, headers=HEADERS)
            r = c.getresponse()
            r.read()
            if r.status not in (200, 202):
                raise SystemExit(f"an MCP client was refused: {r.status}")
        conns.append(c)
    return conns


def main():
    os.makedirs(os.path.join(WORK, "data"), exist_ok=True)
    db = os.path.join(WORK, f"runs-{ingress.RUNS}.db")
    ingress.seed(db)
    write_config(db)
    ingress.sh(ingress.BIN, "--config", ingress.config_path(db), "db", "migrate", stdout=subprocess.DEVNULL)
    p = ingress.spawn(db)
    try:
        ingress.ready_after(p)
        time.sleep(1.0)
        idle = ingress.rss_kib(p.pid, "VmRSS")
        one_call()
        print(f"== MCP: tools/call runs_list {{}} (live runs, 20 a page), {CONNECTIONS} connections, closed loop, {DURATION}")
        wrk("/mcp", CALL_DEFAULT, HEADERS)
        print(f"== MCP: tools/call runs_list {{status: all, limit: 50}}, {CONNECTIONS} connections, closed loop, {DURATION}")
        wrk("/mcp", CALL, HEADERS)
        # The same page through /ingress and through /mcp, alternating, so both see the same
        # machine: the MCP layer's cost as a ratio of requests/s.
        ingress_headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain",
                           "Accept": "application/json"}
        print(f"== the same 50-run history page, /mcp and /ingress alternating, {ROUNDS} rounds of {ROUND}")
        for i in range(ROUNDS):
            m = wrk("/mcp", CALL, HEADERS, duration=ROUND, quiet=True)
            n = wrk("/ingress", "runs list --status all --limit 50", ingress_headers, duration=ROUND, quiet=True)
            print(f"round {i + 1}: /mcp {m:.0f} req/s, /ingress {n:.0f} req/s, mcp/ingress {m / n:.2f}")
        print(f"== MCP: tools/call runs_list {{}}, {CONNECTIONS} clients each pausing {THINK_MS} ms between calls")
        wrk("/mcp", CALL_DEFAULT, HEADERS, think_ms=THINK_MS)
        time.sleep(1.0)
        before = ingress.rss_kib(p.pid, "VmRSS")
        conns = open_clients(CLIENTS)
        time.sleep(1.0)
        with_clients = ingress.rss_kib(p.pid, "VmRSS")
        print(f"resident memory: idle {idle / 1024:.1f} MiB; after load {before / 1024:.1f} MiB; "
              f"with {len(conns)} open MCP clients {with_clients / 1024:.1f} MiB "
              f"(+{(with_clients - before) / 1024:.1f} MiB); peak (VmHWM) {ingress.rss_kib(p.pid, 'VmHWM') / 1024:.1f} MiB")
        for c in conns:
            c.close()
    finally:
        ingress.stop(p)


if __name__ == "__main__":
    main()
