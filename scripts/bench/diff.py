"""`runs diff` on a run that changed 1,000 files (10 lines each: 10,000 changed lines), and
that run's page, against the release binary.

- The CLI: `runs diff <id> --json` (the default 200 lines, and --limit 20000) beside `runs get
  <id> --json` in alternating rounds: both start a process and open the store, so the
  difference is the diff's own cost.
- The server: `GET /api/runs.diff?id=…&limit=20000` and `GET /api/runs.get?id=…` with a
  verified Access JWT, alternating, p50 and p90.
- The page: `GET /runs/<id>` (it carries 5,000 lines of diff): its bytes, its time to the
  last byte, and its time to the load event in headless Chromium (Navigation Timing), p50.

Run through `scripts/bench.sh diff` (the browser venv holds Selenium and PyJWT).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "browser"))
import check  # noqa: E402  (the browser check's issuer and helpers)

import jwt  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

ROOT = check.ROOT
BIN = os.path.join(ROOT, "target", "release", "switchboard")
ROUNDS = 15


def p(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main():
    work = tempfile.mkdtemp(prefix="bench-diff-")
    repo = check.make_repo(work)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks_url = check.serve_jwks(key.public_key())
    now = int(time.time())
    token = jwt.encode(
        {"iss": check.ISSUER, "aud": [check.AUDIENCE], "sub": "viewer", "iat": now, "nbf": now, "exp": now + 3600},
        key, algorithm="RS256", headers={"kid": check.KID},
    )
    port = check.free_port()
    base = f"http://127.0.0.1:{port}"
    config = os.path.join(work, "switchboard.toml")
    with open(config, "w") as f:
        f.write(f"""
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
[store]
url = "sqlite://{work}/switchboard.db"
[agents]
default = "bulk"
[agents.bulk]
backend = "command"
command = ["sh", "-c", '''{check.BULK}''']
[grants."access:viewer"]
actions = ["runs:read"]
channels = "all"
[access]
issuer = "{check.ISSUER}"
audience = "{check.AUDIENCE}"
jwks_url = "{jwks_url}"
""")
    cli = lambda *args: subprocess.run([BIN, "--config", config, *args], capture_output=True, text=True)  # noqa: E731
    if cli("repo", "add", "acme/web", "--path", repo).returncode != 0:
        sys.exit("repo add failed")
    spent, asked = timed(lambda: cli("ask", "--json", "--repo", "acme/web", "many files"))
    run = json.loads(asked.stdout)["run_id"]
    print(f"the run: 1,000 files of 10 lines written and kept in {spent:.2f} s (ask, end to end)")

    cases = {
        "runs get --json": ["runs", "get", run, "--json"],
        "runs diff --json (200 lines)": ["runs", "diff", run, "--json"],
        "runs diff --json --limit 20000": ["runs", "diff", run, "--json", "--limit", "20000"],
    }
    times = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, args in cases.items():
            spent, out = timed(lambda: cli(*args))
            if out.returncode != 0:
                sys.exit(f"{name} failed: {out.stderr}")
            times[name].append(spent)
    print(f"\nCLI, {ROUNDS} alternating rounds (each a process start and a store open):")
    for name, values in times.items():
        print(f"  {name:32} p50 {ms(p(values, 0.5)):>10}  p90 {ms(p(values, 0.9)):>10}")
    diff_json = json.loads(cli("runs", "diff", run, "--json", "--limit", "20000").stdout)
    print(f"  ({diff_json['stats']['files']} files, +{diff_json['stats']['added']}, {diff_json['stats']['lines_shown']} lines shown)")

    log = open(os.path.join(work, "serve.log"), "w")
    server = subprocess.Popen([BIN, "--config", config, "serve"], stdout=log, stderr=log)
    driver = None
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"{base}/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        get = lambda path: urllib.request.urlopen(urllib.request.Request(  # noqa: E731
            f"{base}{path}", headers={"cf-access-jwt-assertion": token}), timeout=60).read()
        routes = {
            "GET /api/runs.get": f"/api/runs.get?id={run}",
            "GET /api/runs.diff (20,000 lines)": f"/api/runs.diff?id={run}&limit=20000",
            "GET /runs/<id> (the page)": f"/runs/{run}",
        }
        times = {name: [] for name in routes}
        sizes = {}
        for _ in range(ROUNDS):
            for name, path in routes.items():
                spent, body = timed(lambda: get(path))
                times[name].append(spent)
                sizes[name] = len(body)
        print(f"\nserve, {ROUNDS} alternating rounds (to the last byte):")
        for name, values in times.items():
            print(f"  {name:34} p50 {ms(p(values, 0.5)):>10}  p90 {ms(p(values, 0.9)):>10}  {sizes[name]:>9} bytes")

        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"]:
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        driver.get(f"{base}/runs/assets/style.css")
        driver.add_cookie({"name": "CF_Authorization", "value": token, "path": "/"})
        loads, parsed = [], []
        for _ in range(10):
            driver.get(f"{base}/runs/{run}")
            timing = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return [n.loadEventEnd - n.startTime, n.domContentLoadedEventEnd - n.startTime];")
            loads.append(timing[0] / 1000)
            parsed.append(timing[1] / 1000)
        print("\nheadless Chromium, the page, 10 loads (Navigation Timing):")
        print(f"  DOMContentLoaded p50 {ms(p(parsed, 0.5))}; load event p50 {ms(p(loads, 0.5))}, p90 {ms(p(loads, 0.9))}")
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
