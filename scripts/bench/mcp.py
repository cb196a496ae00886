#!/usr/bin/env python3
"""The MCP benchmark driver (scripts/bench.sh mcp). Not a test.

Measures, on one machine in one run, against the release binary over a SQLite store of RUNS
runs (the ingress bench's fixture shape):
  - `tools/call runs_list` (a 50-run page of history) over Streamable HTTP with wrk:
    16 connections, DURATION, requests/s and latency percentiles;
  - side by side, the same page through `POST /ingress` (`runs list --status all`), so the
    MCP layer's cost is a ratio measured in the same run;
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

CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "runs_list", "arguments": {"status": "all", "limit": 50}}})
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def write_config(db):
    with open(ingress.config_path(db), "w") as f:
        f.write(ingress.CONFIG.format(port=PORT, work=WORK, db=db) + "\n[mcp]\nenabled = true\n")


def one_call():
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}/mcp", data=CALL.encode(), method="POST",
                                 headers=HEADERS)
    with urllib.request.urlopen(req) as r:
        answer = json.loads(r.read())
    runs = answer["result"]["structuredContent"]["runs"]
    if answer["result"].get("isError") or len(runs) != 50:
        raise SystemExit(f"expected a full 50-run page from tools/call runs_list, got {answer}")
    print(f"== tools/call runs_list: one request: {len(runs)} runs in structuredContent")


def wrk(path, lua_body, headers):
    lua = os.path.join(WORK, f"post{path.replace('/', '-')}.lua")
    with open(lua, "w") as f:
        f.write(f'wrk.method = "POST"\nwrk.body = {json.dumps(lua_body)}\n')
        for k, v in headers.items():
            f.write(f'wrk.headers["{k}"] = "{v}"\n')
    out = subprocess.run(["wrk", "-t2", f"-c{CONNECTIONS}", "-d", DURATION, "--latency", "-s", lua,
                          f"http://127.0.0.1:{PORT}{path}"], stdout=subprocess.PIPE, text=True, check=True)
    print(out.stdout)
    if "Non-2xx" in out.stdout:
        raise SystemExit(f"{path}: some answers were not 2xx")


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
        print(f"== MCP: tools/call runs_list, {CONNECTIONS} connections, {DURATION}")
        wrk("/mcp", CALL, HEADERS)
        print(f"== ingress, same page: POST /ingress 'runs list --status all --limit 50', {CONNECTIONS} connections")
        wrk("/ingress", "runs list --status all --limit 50",
            {"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain", "Accept": "application/json"})
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
