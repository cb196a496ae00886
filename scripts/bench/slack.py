#!/usr/bin/env python3
"""The Slack surface benchmark driver (scripts/bench.sh slack). Not a test.

Against the release `switchboard serve` with the Slack surface on, pointed at a fake Slack Web
API served by this script on loopback (auth.test, chat.postMessage, chat.update,
chat.postEphemeral, conversations.info, users.conversations, answered as Slack does), on a
fresh SQLite store:

  - sends RATE signed `app_mention` events per second for SECONDS seconds (open loop: each
    event is due at t0 + i/RATE, sent by a pool of keep-alive connections), from 50 users in
    100 channels, and measures the acknowledgement latency of each (from when it was due to
    its 200), p50/p99/max;
  - then waits for every run to finish and checks, in the store, that every event's run is
    recorded exactly once and that every run's outcome was posted (chat.update).

The bench config's concurrency limits admit the load (max_concurrent, max_per_actor).
"""
import hashlib
import hmac
import http.client
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "switchboard")
WORK = os.path.join(ROOT, "target", "bench", "slack")
PORT = 18191
RATE = int(os.environ.get("SB_BENCH_RATE", "200"))
SECONDS = int(os.environ.get("SB_BENCH_SECONDS", "30"))
SECRET = "bench-signing-secret"
SENDERS = 32
USERS = 50
CHANNELS = 100

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
replica_id = "bench"
[store]
url = "sqlite://{work}/slack.db"
[agents]
default = "echo"
max_concurrent = 2000
max_per_actor = 500
[agents.echo]
[slack]
api_url = "http://127.0.0.1:{api_port}/api/"
"""


class FakeSlack(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    calls = {}
    lock = threading.Lock()
    ts = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.answer()

    def answer(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlparse(self.path)
        method = url.path.rsplit("/", 1)[-1]
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        if body and (self.headers.get("content-type") or "").startswith("application/json"):
            params.update({k: str(v) for k, v in json.loads(body).items()})
        with FakeSlack.lock:
            FakeSlack.calls[method] = FakeSlack.calls.get(method, 0) + 1
            FakeSlack.ts += 1
            ts = "1700000000.%06d" % FakeSlack.ts
        headers = {}
        if method == "auth.test":
            reply = {"ok": True, "user_id": "UBOT", "team_id": "T1", "user": "switchboard"}
            headers["x-oauth-scopes"] = "app_mentions:read,channels:read,groups:read,mpim:read,im:history,chat:write"
        elif method in ("chat.postMessage", "chat.update"):
            t = params.get("ts", ts) if method == "chat.update" else ts
            reply = {"ok": True, "channel": params.get("channel"), "ts": t, "message": {"ts": t, "text": ""}}
        elif method == "chat.postEphemeral":
            reply = {"ok": True, "message_ts": ts}
        elif method == "conversations.info":
            reply = {"ok": True, "channel": {"id": params.get("channel"), "created": 1600000000, "is_channel": True, "is_private": False}}
        elif method == "users.conversations":
            reply = {"ok": True, "channels": [], "response_metadata": {"next_cursor": ""}}
        else:
            reply = {"ok": False, "error": "unknown_method"}
        out = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)


def event_body(i):
    user = "U%06d" % (i % USERS)
    channel = "C%06d" % ((i * 7) % CHANNELS)
    return json.dumps({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": "EvBench%08d" % i, "event_time": 1700000000,
        "event": {"type": "app_mention", "user": user, "channel": channel,
                  "ts": "1700000000.%06d" % i, "text": "<@UBOT> bench event %d" % i},
    }).encode()


def sign(body, ts):
    base = b"v0:" + str(ts).encode() + b":" + body
    return "v0=" + hmac.new(SECRET.encode(), base, hashlib.sha256).hexdigest()


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, round((len(sorted_values) - 1) * p))]


def main():
    if os.path.exists(WORK):
        shutil.rmtree(WORK)
    os.makedirs(WORK)
    api = ThreadingHTTPServer(("127.0.0.1", 0), FakeSlack)
    api.daemon_threads = True
    threading.Thread(target=api.serve_forever, daemon=True).start()
    config = os.path.join(WORK, "switchboard.toml")
    with open(config, "w") as f:
        f.write(CONFIG.format(port=PORT, work=WORK, api_port=api.server_address[1]))
    env = dict(os.environ, SLACK_BOT_TOKEN="xoxb-bench", SLACK_SIGNING_SECRET=SECRET, RUST_LOG="warn")
    server = subprocess.Popen([BIN, "--config", config, "serve"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in server.stdout:
            if line.split()[1:2] == ["slack"] and "events at POST /slack/events" not in line:
                sys.exit("the Slack surface did not start: " + line)
            if line.split()[1:2] == ["schedules"]:
                break
        threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
        total = RATE * SECONDS
        due = queue.Queue()
        latencies = []
        statuses = {}
        lat_lock = threading.Lock()
        t0 = time.monotonic() + 0.5

        def sender():
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
            while True:
                item = due.get()
                if item is None:
                    return
                i, when = item
                body = event_body(i)
                ts = int(time.time())
                headers = {"content-type": "application/json", "x-slack-request-timestamp": str(ts),
                           "x-slack-signature": sign(body, ts)}
                try:
                    conn.request("POST", "/slack/events", body, headers)
                    r = conn.getresponse()
                    r.read()
                    status = r.status
                except (OSError, http.client.HTTPException):
                    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
                    status = "error"
                took = time.monotonic() - when
                with lat_lock:
                    latencies.append(took)
                    statuses[status] = statuses.get(status, 0) + 1

        threads = [threading.Thread(target=sender, daemon=True) for _ in range(SENDERS)]
        for t in threads:
            t.start()
        for i in range(total):
            when = t0 + i / RATE
            delay = when - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            due.put((i, when))
        for _ in threads:
            due.put(None)
        for t in threads:
            t.join()
        sent_for = time.monotonic() - t0
        lat = sorted(latencies)
        print(f"== Slack events: {total} signed app_mention events at {RATE}/s for {SECONDS} s "
              f"({USERS} users, {CHANNELS} channels), {SENDERS} keep-alive connections, release build")
        print(f"statuses: {statuses}; sent in {sent_for:.1f} s")
        print(f"ack latency (from when each event was due): p50 {percentile(lat, 0.5) * 1e3:.2f} ms   "
              f"p99 {percentile(lat, 0.99) * 1e3:.2f} ms   max {lat[-1] * 1e3:.2f} ms   (goal: p99 <= 50 ms)")
        # Every run recorded once, and every outcome posted.
        deadline = time.monotonic() + 120
        db = os.path.join(WORK, "slack.db")
        while True:
            out = subprocess.run(["sqlite3", db,
                                  "SELECT count(*), count(DISTINCT request), sum(status IN ('queued','running')) FROM runs"],
                                 capture_output=True, text=True, check=True).stdout.strip()
            runs, distinct, live = (int(x or 0) for x in out.split("|"))
            updates = FakeSlack.calls.get("chat.update", 0)
            if (live == 0 and runs >= total and updates >= total) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        print(f"runs recorded: {runs} ({distinct} distinct requests) for {total} events; live left: {live}; "
              f"chat.update (outcomes posted): {updates}; conversations.info calls: {FakeSlack.calls.get('conversations.info', 0)}")
        ok = runs == total and distinct == total and statuses.get(200) == total
        print("every event's run recorded exactly once: " + ("yes" if ok else "NO"))
        if not ok:
            sys.exit(1)
    finally:
        server.terminate()
        server.wait(timeout=30)
        api.shutdown()


if __name__ == "__main__":
    main()
