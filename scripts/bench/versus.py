#!/usr/bin/env python3
"""Two builds side by side (scripts/bench.sh versus <baseline binary>). Not a test.

Two pages over the ingress bench's store of 1M runs, against the release binary and against a
baseline binary given on the command line, in alternating rounds on the same machine in one
run: the ingress history page (`POST /ingress` `runs list --status all --limit 50`, wrk with
64 connections) and MCP `tools/call runs_list` for the same 50-run page (wrk with 16
connections, closed loop). Each round's ratios (release ÷ baseline) and their medians are
printed. Used to check that a change of allocator or build profile keeps throughput
(docs/benchmarks.md, "Resident memory with every surface on"), and that a refactor costs
nothing on the two hottest read paths ("Before and after the refactor").
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import bare  # noqa: E402
import ingress  # noqa: E402
import mcp  # noqa: E402

ROUNDS = int(os.environ.get("SB_BENCH_ROUNDS", "3"))
DURATION = os.environ.get("SB_BENCH_DURATION", "10s")
BODY = "runs list --status all --limit 50"


def requests_per_second(binary, db, lua):
    """The ingress page's and MCP `runs_list`'s requests/s on one `serve` of `binary`."""
    ingress.BIN = binary
    proc = ingress.spawn(db)
    try:
        ingress.ready_after(proc)
        # A short warm-up, so the page cache and the pool are as warm for each build.
        subprocess.run(["wrk", "-t2", "-c64", "-d", "2s", "-s", lua, f"http://127.0.0.1:{ingress.PORT}/ingress"],
                       check=True, capture_output=True)
        out = subprocess.run(["wrk", "-t2", "-c64", "-d", DURATION, "-s", lua,
                              f"http://127.0.0.1:{ingress.PORT}/ingress"],
                             check=True, capture_output=True, text=True).stdout
        mcp.one_call()
        mcp.wrk("/mcp", mcp.CALL, mcp.HEADERS, duration="2s", quiet=True)
        mcp_rps = mcp.wrk("/mcp", mcp.CALL, mcp.HEADERS, duration=DURATION, quiet=True)
    finally:
        ingress.stop(proc)
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"{binary}: errors under load:\n{out}")
    return bare.requests_per_second(out), mcp_rps


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        raise SystemExit("usage: scripts/bench.sh versus <baseline switchboard binary>")
    baseline, release = os.path.abspath(sys.argv[1]), ingress.BIN
    os.makedirs(os.path.join(ingress.WORK, "data"), exist_ok=True)
    # Each build gets its own copy of one store, migrated by that build: a baseline from before
    # a migration cannot open a store the release has migrated past it.
    seeded = os.path.join(ingress.WORK, f"versus-{ingress.RUNS}.db")
    ingress.BIN = baseline
    ingress.seed(seeded)
    dbs = {}
    for name, binary in (("baseline", baseline), ("release", release)):
        db = os.path.join(ingress.WORK, f"versus-{name}-{ingress.RUNS}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        subprocess.run(["sqlite3", seeded, f".backup '{db}'"], check=True)
        mcp.write_config(db)
        subprocess.run([binary, "--config", ingress.config_path(db), "db", "migrate"], check=True,
                       stdout=subprocess.DEVNULL)
        dbs[name] = db
    lua = os.path.join(ingress.WORK, "versus.lua")
    with open(lua, "w") as f:
        f.write(f'wrk.method = "POST"\nwrk.body = "{BODY}"\n'
                f'wrk.headers["Authorization"] = "Bearer {ingress.TOKEN}"\n'
                'wrk.headers["Content-Type"] = "text/plain"\n')
    print(f"POST /ingress '{BODY}', wrk -c64 {DURATION}, then MCP tools/call runs_list (the same page), "
          f"wrk -c{mcp.CONNECTIONS} {DURATION}, per build per round; release {release}, baseline {baseline}")
    ratios = {"ingress": [], "mcp": []}
    for r in range(ROUNDS):
        # Alternate which build goes first, so neither always meets a warmer machine.
        order = [("release", release), ("baseline", baseline)]
        if r % 2:
            order.reverse()
        rps = {name: requests_per_second(binary, dbs[name], lua) for name, binary in order}
        for i, page in enumerate(("ingress", "mcp")):
            ratios[page].append(rps["release"][i] / rps["baseline"][i])
            print(f"round {r + 1} {page}: release {rps['release'][i]:.0f} req/s, "
                  f"baseline {rps['baseline'][i]:.0f} req/s, ratio {ratios[page][-1]:.3f}")
        time.sleep(1)
    for page, values in ratios.items():
        print(f"{page} release ÷ baseline: median {statistics.median(values):.3f} (rounds: "
              + ", ".join(f"{x:.3f}" for x in values) + ")")


if __name__ == "__main__":
    main()
