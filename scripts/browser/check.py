"""The /runs pages in a real browser: headless Chromium (Debian's package) over WebDriver.

An issuer made here (an RSA key from `cryptography`, RS256 tokens from PyJWT, the JWKS on a
loopback HTTP server) signs the viewer's CF_Authorization cookie for a real `switchboard
serve`. The browser loads /runs, opens a run, sees a new run appear through the feed without a
reload, never sees a run the viewer may not read (in the DOM or in the feed's raw bytes),
stops a live run from its page, and approves an agent's tool call from the run's page opened
through the capability link of the person who started the run (a Slack member, whose mention
is signed here with the app's signing secret; the link comes back through a Web API double on
loopback, as Slack would show it to them; the agent's model is scripted here too). A
machine's link never answers: a run started by an ingress token has nobody to ask. A
sandboxed command agent edits a repo, and the finished run's page shows its Changes: the kept
commits, the file list, each file's diff collapsible, agent text escaped (a `<script>` and a
`<!channel>` in a diff line are text); a run that changed 1,000 files (10,000 lines) keeps its
page bounded, the rest one link away as text.
Screenshots go to target/browser-check/.

Every failure exits non-zero, including a browser that does not start.
"""

import hashlib
import hmac
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "debug", "switchboard")
SHOTS = os.path.join(ROOT, "target", "browser-check")
ISSUER = "https://issuer.browser.test"
AUDIENCE = "aud-browser-check"
KID = "browser-key-1"
OPS = "ops-token-browser-0000001"
SECRET = "secret-token-browser-00001"
SLACK_SIGNING_SECRET = "browser-check-signing-secret"
SLACK_SCOPES = "app_mentions:read,channels:read,groups:read,mpim:read,im:history,chat:write"
# A sandboxed agent that commits one change and leaves another uncommitted.
EDITOR = """set -e
echo "<script>window.__injected = 1</script> hello <!channel>" >> README.md
git add -A
git -c user.name=Agent -c user.email=agent@example.com commit -qm "Greet the channel"
echo "a second file" > second.txt
echo edited"""
# 1,000 files of 10 lines each: 10,000 changed lines.
BULK = """set -e
mkdir -p many
for i in $(seq 1 1000); do seq 1 10 > many/file-$i.txt; done
echo bulk"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(message):
    print(f"browser-check: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


class Quiet(http.server.BaseHTTPRequestHandler):
    """A handler that logs nothing."""

    def log_message(self, *args):
        pass


def serve_on_loopback(handler):
    """Serves `handler` on a free loopback port in a daemon thread; the port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def serve_jwks(public_key):
    jwk = json.loads(RSAAlgorithm.to_jwk(public_key))
    jwk.update({"kid": KID, "alg": "RS256", "use": "sig"})
    body = json.dumps({"keys": [jwk]}).encode()

    class Handler(Quiet):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    return f"http://127.0.0.1:{serve_on_loopback(Handler)}/certs"


def make_repo(work):
    """A user's repository with one commit."""
    repo = os.path.join(work, "web")
    os.makedirs(repo)
    git = ["git", "-C", repo, "-c", "user.name=Owner", "-c", "user.email=owner@example.com"]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write("# web\n")
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "first"], check=True)
    return repo


def finished_run(base, token, text):
    """POST /ingress?wait=120; the run's id once it completed."""
    request = urllib.request.Request(
        f"{base}/ingress?wait=120",
        data=text.encode(),
        headers={"authorization": f"Bearer {token}", "accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=150) as response:
        outcome = json.load(response)
    if outcome.get("status") != "completed":
        fail(f"the run did not complete: {outcome}")
    return outcome["run_id"]


def check_changes(driver, base, cookie):
    """A finished repo run's page shows its Changes, escaped and collapsible; a run of 10,000
    changed lines keeps its page bounded and the rest one link away."""
    edited = finished_run(base, OPS, "@editor in acme/web: edit")
    driver.add_cookie({"name": "CF_Authorization", "value": cookie, "path": "/"})
    driver.get(f"{base}/runs/{edited}")
    WebDriverWait(driver, 15).until(lambda d: d.find_elements(By.ID, "changes"))
    summary = driver.find_element(By.ID, "changes-summary").text
    if "2 commit(s) kept" not in summary or "2 file(s) changed" not in summary:
        fail(f"the Changes summary is wrong: {summary}")
    if "Greet the channel" not in driver.find_element(By.ID, "commits").text:
        fail("the kept commit's message is not on the page")
    rows = driver.find_elements(By.CSS_SELECTOR, "#files tr")
    if [r.text.split()[-1] for r in rows] != ["README.md", "second.txt"]:
        fail(f"the file list is wrong: {[r.text for r in rows]}")
    readme = driver.find_element(By.ID, "file-0")
    if "+<script>window.__injected = 1</script> hello <!channel>" not in readme.text:
        fail(f"the diff line is not shown as text: {readme.text}")
    if driver.execute_script("return window.__injected") is not None:
        fail("a diff line ran as a script")
    if driver.find_elements(By.CSS_SELECTOR, "#changes script"):
        fail("a diff line became an element")
    # Each file collapses and opens again.
    readme.find_element(By.TAG_NAME, "summary").click()
    if readme.get_attribute("open") is not None:
        fail("a file's diff did not collapse")
    readme.find_element(By.TAG_NAME, "summary").click()
    if readme.get_attribute("open") is None:
        fail("a file's diff did not open again")
    os.makedirs(SHOTS, exist_ok=True)
    driver.save_screenshot(os.path.join(SHOTS, "changes.png"))

    bulk = finished_run(base, OPS, "@bulk in acme/web: many files")
    page = urllib.request.urlopen(urllib.request.Request(
        f"{base}/runs/{bulk}", headers={"cookie": f"CF_Authorization={cookie}"}), timeout=30).read()
    if len(page) > 2 * 1024 * 1024:
        fail(f"the page of a 10,000-line run weighs {len(page)} bytes")
    started = time.time()
    driver.get(f"{base}/runs/{bulk}")
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "changes-cut"))
    loaded = time.time() - started
    if len(driver.find_elements(By.CSS_SELECTOR, "#files tr")) != 1000:
        fail("the page does not list the 1,000 files")
    link = driver.find_element(By.CSS_SELECTOR, "#changes-cut a").get_attribute("href")
    whole = urllib.request.urlopen(urllib.request.Request(
        link, headers={"cookie": f"CF_Authorization={cookie}"}), timeout=30).read().decode()
    if "many/file-1000.txt" not in whole or "+10" not in whole.splitlines()[-1]:
        fail("the whole diff is not one link away: " + whole[-300:])
    driver.save_screenshot(os.path.join(SHOTS, "changes-bulk.png"))
    print(f"browser-check: a 10,000-line run's page: {len(page)} bytes, loaded in {loaded:.2f} s; its whole diff {len(whole)} bytes as text")
    return edited


def start_run(base, token, text):
    return start(base, token, text)["run_id"]


def start(base, token, text):
    """POST /ingress; its JSON reply (run_id, and the capability link)."""
    request = urllib.request.Request(
        f"{base}/ingress",
        data=text.encode(),
        headers={"authorization": f"Bearer {token}", "accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def serve_model():
    """A scripted chat-completions model: it asks to write notes.md in the workspace it was
    told about, then answers with what the tool call returned."""

    class Handler(Quiet):
        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["content-length"])))
            messages = request["messages"]
            last = messages[-1]
            if last["role"] == "tool":
                delta = {"content": "tool said: " + last["content"]}
            else:
                workspace = next(
                    m["content"][len("Your workspace is "):].split(". ")[0]
                    for m in messages
                    if (m.get("content") or "").startswith("Your workspace is ")
                )
                args = json.dumps({"path": workspace + "/notes.md", "content": "from the browser check"})
                delta = {"tool_calls": [{"index": 0, "id": "call-1", "type": "function",
                                         "function": {"name": "write_file", "arguments": args}}]}
            body = f"data: {json.dumps({'choices': [{'delta': delta}]})}\n\ndata: [DONE]\n\n".encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return f"http://127.0.0.1:{serve_on_loopback(Handler)}/v1"


def serve_slack_api(posted):
    """A Slack Web API double: auth.test (with the scopes the app needs), the chat methods,
    conversations.info (every channel public) and users.conversations (none). Each call's
    method and parameters are appended to `posted`."""

    class Handler(Quiet):
        def do_POST(self):
            method = self.path.rsplit("/", 1)[-1].split("?")[0]
            raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
            if (self.headers.get("content-type") or "").startswith("application/json"):
                params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in json.loads(raw or "{}").items()}
            else:
                params = dict(urllib.parse.parse_qsl(raw))
            posted.append((method, params))
            answers = {
                "auth.test": {"ok": True, "url": "https://acme.slack.com/", "team": "Acme", "user": "switchboard",
                              "team_id": "T1", "user_id": "UBOT", "bot_id": "B1"},
                "chat.postMessage": {"ok": True, "channel": params.get("channel"), "ts": "1700000002.000100",
                                     "message": {"ts": "1700000002.000100", "text": params.get("text", "")}},
                "chat.update": {"ok": True, "channel": params.get("channel"), "ts": params.get("ts")},
                "chat.postEphemeral": {"ok": True, "message_ts": "1700000003.000100"},
                "conversations.info": {"ok": True, "channel": {"id": params.get("channel"), "created": 1600000000,
                                                               "name": "c", "is_channel": True, "is_private": False}},
                "users.conversations": {"ok": True, "channels": [], "response_metadata": {"next_cursor": ""}},
            }
            body = json.dumps(answers.get(method, {"ok": False, "error": "unknown_method"})).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            if method == "auth.test":
                self.send_header("x-oauth-scopes", SLACK_SCOPES)
            self.end_headers()
            self.wfile.write(body)

    return f"http://127.0.0.1:{serve_on_loopback(Handler)}/api/"


def slack_mention(base, user, channel, text):
    """An app_mention from `user`, signed now with the app's signing secret, as Slack posts it."""
    now = int(time.time())
    body = json.dumps({"token": "unused", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
                       "event_id": f"Ev{now}", "event_time": now,
                       "event": {"type": "app_mention", "user": user, "channel": channel,
                                 "ts": f"{now}.000100", "text": f"<@UBOT> {text}"}}).encode()
    signature = hmac.new(SLACK_SIGNING_SECRET.encode(), f"v0:{now}:".encode() + body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        f"{base}/slack/events",
        data=body,
        headers={"content-type": "application/json", "x-slack-request-timestamp": str(now),
                 "x-slack-signature": f"v0={signature}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        if response.status != 200:
            fail(f"/slack/events answered {response.status}")


def read_feed(base, cookie, seconds, out):
    """The feed's raw bytes for `seconds`, as the viewer."""
    request = urllib.request.Request(f"{base}/runs/stream", headers={"cookie": f"CF_Authorization={cookie}"})
    deadline = time.time() + seconds
    try:
        with urllib.request.urlopen(request, timeout=seconds) as response:
            while time.time() < deadline:
                chunk = response.read1(4096)
                if not chunk:
                    break
                out.append(chunk)
    except (TimeoutError, socket.timeout):
        pass


def main():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks_url = serve_jwks(key.public_key())
    now = int(time.time())
    cookie = jwt.encode(
        {"iss": ISSUER, "aud": [AUDIENCE], "sub": "viewer", "iat": now, "nbf": now, "exp": now + 3600},
        key,
        algorithm="RS256",
        headers={"kid": KID},
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    model_url = serve_model()
    slack_posted = []
    slack_api = serve_slack_api(slack_posted)
    work = tempfile.mkdtemp(prefix="browser-check-")
    config = os.path.join(work, "switchboard.toml")
    with open(config, "w") as f:
        f.write(
            f"""
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
public_url = "{base}"
[store]
url = "sqlite://{work}/switchboard.db"
[agents]
default = "echo"
[agents.echo]
[agents.staller]
behaviour = "stall"
[agents.writer]
backend = "openai"
base_url = "{model_url}"
model = "scripted"
[[agent_grants]]
id = "writer-notes"
agent = "writer"
tool = "write_file"
paths = ["{{workspace}}"]
mode = "auto"
[agents.editor]
backend = "command"
command = ["sh", "-c", '''{EDITOR}''']
[agents.bulk]
backend = "command"
command = ["sh", "-c", '''{BULK}''']
[grants."http:ops"]
actions = ["agent:run:staller", "agent:run:writer", "agent:run:editor", "agent:run:bulk", "repo:use"]
# The Slack member who asks the writer to take notes.
[grants."slack:UPERSON"]
actions = ["agent:run:writer"]
[grants."http:secret"]
actions = ["agent:run:staller"]
# The viewer reads and stops the ops channel's runs, and nothing of the secret one.
[grants."access:viewer"]
actions = ["runs:read", "runs:write"]
channels = ["http:ops", "slack:CNOTES"]
[slack]
mode = "events"
api_url = "{slack_api}"
[access]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_url = "{jwks_url}"
"""
        )
    repo = make_repo(work)
    added = subprocess.run([BIN, "--config", config, "repo", "add", "acme/web", "--path", repo],
                           capture_output=True, text=True)
    if added.returncode != 0:
        fail("repo add: " + added.stderr)
    env = dict(os.environ)
    env["SWITCHBOARD_INGRESS_TOKENS"] = json.dumps(
        {OPS: {"subject": "ops", "channel": "http:ops"}, SECRET: {"subject": "secret", "channel": "http:secret"}}
    )
    env["SLACK_BOT_TOKEN"] = "xoxb-browser-check"
    env["SLACK_SIGNING_SECRET"] = SLACK_SIGNING_SECRET
    env["NO_COLOR"] = "1"
    log = open(os.path.join(work, "serve.log"), "w")
    server = subprocess.Popen([BIN, "--config", config, "serve"], stdout=log, stderr=log, env=env)
    driver = None
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"{base}/readyz", timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    fail("serve exited: " + open(os.path.join(work, "serve.log")).read())
                time.sleep(0.2)
        else:
            fail("serve did not become ready")

        first = start_run(base, OPS, "@staller the first run")
        hidden = start_run(base, SECRET, "@staller a run the viewer may not read")

        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"]:
            options.add_argument(arg)
        try:
            driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        except Exception as e:  # the browser must start: no skip
            fail(f"headless Chromium did not start: {e}")
        wait = WebDriverWait(driver, 15)
        driver.get(f"{base}/runs/assets/style.css")
        driver.add_cookie({"name": "CF_Authorization", "value": cookie, "path": "/"})

        # The index: the live run the viewer may read, not the other.
        driver.get(f"{base}/runs")
        wait.until(lambda d: d.find_elements(By.ID, f"run-{first}"))
        if hidden in driver.page_source:
            fail("a run the viewer may not read is in the index")

        # Open the run.
        driver.find_element(By.LINK_TEXT, first).click()
        wait.until(lambda d: d.find_elements(By.ID, "request"))
        if "the first run" not in driver.find_element(By.ID, "request").text:
            fail("the run page does not show the request")
        driver.back()
        wait.until(lambda d: d.find_elements(By.ID, f"run-{first}"))

        # A new run appears through the feed, without a reload (the marker survives).
        driver.execute_script("window.__noReload = 'still here';")
        raw = []
        feed = threading.Thread(target=read_feed, args=(base, cookie, 6, raw))
        feed.start()
        time.sleep(1)
        second = start_run(base, OPS, "@staller the second run")
        hidden_too = start_run(base, SECRET, "@staller another run the viewer may not read")
        wait.until(lambda d: d.find_elements(By.ID, f"run-{second}"))
        if driver.execute_script("return window.__noReload") != "still here":
            fail("the page reloaded instead of updating from the feed")
        time.sleep(1.5)
        feed.join()
        raw_bytes = b"".join(raw).decode(errors="replace")
        for secret_run in (hidden, hidden_too):
            if secret_run in driver.page_source:
                fail("a run the viewer may not read reached the DOM")
            if secret_run in raw_bytes:
                fail("a run the viewer may not read reached the feed's bytes")
        if second not in raw_bytes or "event: sync" not in raw_bytes:
            fail(f"the feed did not carry the viewer's runs: {raw_bytes[:500]}")
        os.makedirs(SHOTS, exist_ok=True)
        driver.save_screenshot(os.path.join(SHOTS, "runs.png"))

        # Stop a live run from its page.
        driver.get(f"{base}/runs/{first}")
        wait.until(lambda d: d.find_elements(By.ID, "stop"))
        driver.find_element(By.ID, "stop").click()

        def stopped(d):
            cells = d.find_elements(By.ID, "run-status")
            return cells and cells[0].text == "stopped"

        try:
            wait.until(stopped)
        except Exception:
            driver.refresh()
            WebDriverWait(driver, 10).until(stopped)
        driver.save_screenshot(os.path.join(SHOTS, "stopped-run.png"))

        approve = (By.CSS_SELECTOR, "form.approval button[value=approve]")
        # A machine's run has nobody to ask: its agent's write is refused at once and the run
        # ends; its link (made for a machine) never shows the form.
        machine = start(base, OPS, "@writer take notes")
        driver.delete_all_cookies()
        for _ in range(40):
            driver.get(machine["link"])
            if driver.find_elements(*approve):
                fail("a machine's capability link showed the approval form")
            if "This run has ended" in driver.page_source:
                break
            time.sleep(0.25)
        else:
            fail("a machine's run that asked for a write did not end: " + driver.page_source[:800])

        # An agent's tool call waits for the person who started the run: a Slack member's
        # mention starts it, the link Slack shows only them opens the Approve / Deny form, and
        # Approve lets the write happen and the run finish.
        slack_mention(base, "UPERSON", "CNOTES", "@writer take notes")
        writer = None
        for _ in range(100):
            for method, params in list(slack_posted):
                found = re.search(r"(https?://[^\s>|]+/runs/([0-9A-Za-z]+)\?token=[^\s>|]+)", params.get("text", ""))
                if method == "chat.postEphemeral" and params.get("user") == "UPERSON" and found:
                    writer = {"link": found.group(1), "run_id": found.group(2)}
            if writer:
                break
            time.sleep(0.1)
        else:
            fail(f"Slack was never sent the member's capability link: {slack_posted}")
        driver.get(writer["link"])
        for _ in range(3):
            try:
                WebDriverWait(driver, 5).until(lambda d: d.find_elements(*approve))
                break
            except Exception:
                driver.refresh()
        else:
            fail("the run page never showed the approval form: " + driver.page_source[:800])
        if "fs.write" not in driver.page_source:
            fail("the approval form does not say what the agent asks")
        driver.save_screenshot(os.path.join(SHOTS, "approval.png"))
        driver.find_element(*approve).click()
        run_id = writer["run_id"]

        def completed(d):
            cells = d.find_elements(By.ID, "run-status")
            return cells and cells[0].text == "completed"

        try:
            WebDriverWait(driver, 15).until(completed)
        except Exception:
            # The capability link opens only a live run; once it ended, the viewer's own page.
            driver.add_cookie({"name": "CF_Authorization", "value": cookie, "path": "/"})
            driver.get(f"{base}/runs/{run_id}")
            WebDriverWait(driver, 10).until(completed)
        answer = driver.find_elements(By.ID, "answer")
        if not answer or "tool said: wrote" not in answer[0].text:
            fail("the approved write did not reach the agent: " + driver.page_source[:800])
        driver.save_screenshot(os.path.join(SHOTS, "approved-run.png"))
        edited = check_changes(driver, base, cookie)
        print(
            f"browser-check: Chromium loaded /runs, followed the feed, stopped {first}, approved a tool call of {run_id}, showed the changes of {edited}; screenshots in {SHOTS}"
        )
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
