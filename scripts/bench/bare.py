"""The bare server beside Switchboard (imported by access.py and ingress.py). Not a test.

`crates/bare-http` answers every request with fixed bytes from one axum handler; this starts it
with the bytes Switchboard answered a request with, so the same wrk load against both measures
what Switchboard's own work costs: the ratio of requests/s.
"""
import os
import re
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "crates", "bare-http", "target", "release", "bare-http")
PORT = 18199


def requests_per_second(wrk_output):
    return float(re.search(r"Requests/sec:\s+([\d.]+)", wrk_output).group(1))


def serve_bytes(body, content_type):
    """Starts bare-http answering with `body`; returns the process (stop it with .terminate())."""
    if not os.access(BIN, os.X_OK):
        raise SystemExit(f"{BIN} is missing: cargo build --release --manifest-path crates/bare-http/Cargo.toml")
    fd, path = tempfile.mkstemp(prefix="bare-body-")
    with os.fdopen(fd, "wb") as f:
        f.write(body)
    proc = subprocess.Popen([BIN, f"127.0.0.1:{PORT}", path, content_type], stdout=subprocess.DEVNULL)
    for _ in range(100):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/", timeout=1) as r:
                if r.read() == body:
                    os.remove(path)
                    return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("bare-http did not start")


def url_on_bare(url):
    """The same path and query on the bare server."""
    return re.sub(r"^http://[^/]+", f"http://127.0.0.1:{PORT}", url)
