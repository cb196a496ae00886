#!/usr/bin/env python3
"""The soak benchmark (scripts/bench.sh soak). Not a test.

The release `serve` with every surface on (the rss bench's config), under a steady load for
SB_SOAK_SECONDS (default 600): RATE requests a second, half `POST /ingress` starting an echo
run, half `runs list`. VmRSS is sampled every 5 s; the slope is a least-squares fit over the
samples after the first minute (warm-up), in KiB a minute, with the first, last and highest
samples.
"""
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import rss  # noqa: E402

SECONDS = int(os.environ.get("SB_SOAK_SECONDS", "600"))
RATE = int(os.environ.get("SB_SOAK_RATE", "50"))


def request(body):
    req = urllib.request.Request(f"http://127.0.0.1:{rss.PORT}/ingress", data=body.encode(),
                                 headers={"authorization": f"Bearer {rss.TOKEN}", "accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def main():
    db = os.path.join(rss.WORK, "rss.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    config, env = rss.prepare(
        '[grants."http:bench"]\nactions = ["runs:read", "runs:write", "agent:run:echo"]\nchannels = ["http:bench"]\n')
    proc = subprocess.Popen([rss.BIN, "--config", config, "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rss.ready()
        samples, codes = [], {}
        start = time.time()
        n = 0
        next_sample = start
        while time.time() - start < SECONDS:
            n += 1
            code = request(f"soak {n}" if n % 2 else "runs list")
            codes[code] = codes.get(code, 0) + 1
            now = time.time()
            if now >= next_sample:
                samples.append((now - start, rss.status(proc.pid)["VmRSS"]))
                next_sample += 5
                if len(samples) % 12 == 0:
                    print(f"  {int(now - start)} s: VmRSS {samples[-1][1] / 1024:.1f} MiB, {n} requests", flush=True)
            time.sleep(max(0.0, start + n / RATE - time.time()))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    steady = [(t, v) for t, v in samples if t >= 60] or samples
    mean_t = sum(t for t, _ in steady) / len(steady)
    mean_v = sum(v for _, v in steady) / len(steady)
    var = sum((t - mean_t) ** 2 for t, _ in steady) or 1
    slope = sum((t - mean_t) * (v - mean_v) for t, v in steady) / var * 60
    print(f"{n} requests in {SECONDS} s ({n / SECONDS:.0f}/s), answers {dict(sorted(codes.items()))}")
    print(f"VmRSS first {samples[0][1] / 1024:.1f} MiB, last {samples[-1][1] / 1024:.1f} MiB, "
          f"highest {max(v for _, v in samples) / 1024:.1f} MiB")
    print(f"slope after the first minute: {slope:+.1f} KiB/min ({slope * 60 / 1024:+.2f} MiB/h)")


if __name__ == "__main__":
    main()
