//! `switchboard serve` and `switchboard ask` as real processes: a fresh directory with no
//! config, recorded runs, graceful shutdown, and a kill -9 followed by a restart that leaves
//! `interrupted` tombstones rather than ghosts.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use authz_core::Surface;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TOKENS: &str = r#"{"ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#;

const STALL_CONFIG: &str = r#"
[server]
replica_id = "replica-a"
shutdown_grace_seconds = 1
[agents]
default = "staller"
[agents.staller]
behaviour = "stall"
[agents.echo]
[grants."http:ops"]
actions = ["runs:read", "agent:run:*"]
channels = ["http:ops"]
"#;

fn switchboard(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_INGRESS_TOKENS")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info");
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    switchboard(dir).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A running `switchboard serve`.
struct Served {
    child: Child,
    addr: String,
    summary: String,
}

impl Served {
    fn start(dir: &Path, tokens: bool) -> Served {
        let mut cmd = switchboard(dir);
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .stderr(Stdio::null());
        if tokens {
            cmd.env("SWITCHBOARD_INGRESS_TOKENS", TOKENS);
        }
        let (child, addr, summary) = common::spawn_serve(cmd);
        Served {
            child,
            addr,
            summary,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn signal(&self, s: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), s).unwrap();
    }

    fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("serve did not exit within {within:?}");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_run(client: &reqwest::Client, s: &Served, text: &str) -> String {
    let r = client
        .post(s.url("/ingress"))
        .bearer_auth("ops-token-0123456789")
        .header("accept", "application/json")
        .body(text.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    v["run_id"].as_str().unwrap().to_owned()
}

/// The wall clock in the unit a run's record uses (microseconds since the epoch).
fn micros_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_micros()).unwrap()
}

fn run_json(dir: &Path, id: &str) -> serde_json::Value {
    let o = run(dir, &["runs", "get", id, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[tokio::test]
async fn serve_on_a_fresh_directory_with_no_config_works() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Served::start(dir.path(), false);
    assert!(
        s.summary.contains("config  (embedded default)"),
        "{}",
        s.summary
    );
    // The default's relative file, made absolute where serve started.
    let db = dir.path().canonicalize().unwrap().join("switchboard.db");
    assert!(
        s.summary
            .contains(&format!("store   sqlite://{} (sqlite)", db.display())),
        "{}",
        s.summary
    );
    assert!(s.summary.contains("agents  echo (echo, default)"));
    assert!(s.summary.contains("off /ingress"));
    assert!(
        s.summary
            .contains("off tool broker        no agent calls tools"),
        "{}",
        s.summary
    );
    assert!(
        s.summary.lines().any(|l| l.contains("off /api /runs")
            && l.contains("needs an [access] section with issuer and audience")),
        "{}",
        s.summary
    );
    let client = reqwest::Client::new();
    let h = client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(h.status().as_u16(), 200);
    let r = client.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let i = client
        .post(s.url("/ingress"))
        .body("help")
        .send()
        .await
        .unwrap();
    assert_eq!(i.status().as_u16(), 503);
    assert!(dir.path().join("switchboard.db").exists());
    // `status` from another process names the server holding the store, not its own uptime.
    let status = run(dir.path(), &["status"]);
    let said = text(&status.stdout);
    assert!(
        said.contains("server ") && said.contains(", up for ") && !said.contains("no server"),
        "{said}"
    );
    s.signal(Signal::SIGTERM);
    assert_eq!(s.wait_exit(Duration::from_secs(20)), Some(0));
    let status = run(dir.path(), &["status"]);
    assert!(
        text(&status.stdout).contains("no server"),
        "{}",
        text(&status.stdout)
    );
}

#[test]
fn ask_shows_progress_then_the_answer_and_records_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["ask", "hello", "there"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("request: hello there"),
        "{}",
        text(&o.stdout)
    );
    assert!(text(&o.stdout).contains("runs no model"));
    let progress = text(&o.stderr);
    assert!(progress.contains("· agent echo · cli:local"), "{progress}");
    assert!(
        progress.contains("│ received a request of 11 characters"),
        "{progress}"
    );
    let list = run(dir.path(), &["runs", "list", "--status", "all", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["channel"], "cli:local");
    assert_eq!(runs[0]["visibility"], "machine");
    assert_eq!(runs[0]["user"], "cli:local");
    assert_eq!(runs[0]["status"], "completed");
    let json = run(dir.path(), &["ask", "--json", "again"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["status"], "completed");
    assert!(v.get("link").is_none(), "no public_url, no link: {v}");
    std::fs::write(
        dir.path().join("switchboard.toml"),
        "[server]\npublic_url = \"https://sb.example.com\"\n[agents]\ndefault = \"echo\"\n[agents.echo]\n",
    )
    .unwrap();
    let linked = run(dir.path(), &["ask", "--json", "with a link"]);
    let v: serde_json::Value = serde_json::from_slice(&linked.stdout).unwrap();
    let id = v["run_id"].as_str().unwrap();
    let link = v["link"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(
        link.starts_with(&format!("https://sb.example.com/runs/{id}?token=")),
        "{link}"
    );
    let human = run(dir.path(), &["ask", "and", "in", "text"]);
    assert!(
        text(&human.stderr).contains("follow it live: https://sb.example.com/runs/"),
        "{}",
        text(&human.stderr)
    );
    let unknown = run(dir.path(), &["ask", "--agent", "nope", "hi"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("there is no agent `nope`; you can run echo"));
    std::fs::write(
        dir.path().join("switchboard.toml"),
        "[agents]\ndefault = \"failer\"\n[agents.failer]\nbehaviour = \"fail\"\n",
    )
    .unwrap();
    let failed = run(dir.path(), &["ask", "break", "please"]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        text(&failed.stderr).contains("failed: the echo agent was told to fail"),
        "{}",
        text(&failed.stderr)
    );
}

/// The model extractor through a real back end (a program that takes a second to answer):
/// `ask` waits for its run's reflection before it exits, so the fact is kept; an answer that
/// is not the JSON asked for writes nothing and is one friction entry on the run.
#[test]
fn ask_keeps_what_its_run_said_and_a_malformed_extraction_is_friction() {
    let dir = tempfile::tempdir().unwrap();
    let config = |model: &str| {
        format!(
            "[agents]\ndefault = \"echo\"\n[agents.echo]\n[agents.extractor]\nbackend = \"command\"\n\
             command = [\"/bin/sh\", \"-c\", \"sleep 1; printf '%s' '{{\\\"facts\\\": [{{\\\"text\\\": \\\"the build box is ci-7\\\", \\\"audience\\\": \\\"org\\\"}}], \\\"summary\\\": null}}'\"]\n\
             [memory]\nextractor = \"model\"\nmodel_agent = \"{model}\"\n"
        )
    };
    std::fs::write(dir.path().join("switchboard.toml"), config("extractor")).unwrap();
    let o = run(dir.path(), &["ask", "where do builds run?"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("memory reflection"),
        "{}",
        text(&o.stderr)
    );
    let list = run(dir.path(), &["memory", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(v["records"][0]["text"], "the build box is ci-7", "{v}");
    assert_eq!(
        v["records"][0]["scope"]["kind"], "org",
        "cli:local is a machine channel"
    );

    std::fs::write(dir.path().join("switchboard.toml"), config("echo")).unwrap();
    let o = run(dir.path(), &["ask", "--json", "anything"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let id = serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let f = run(dir.path(), &["runs", "friction", &id, "--json"]);
    let f: serde_json::Value = serde_json::from_slice(&f.stdout).unwrap();
    assert_eq!(f["friction"][0]["kind"], "memory_extraction", "{f}");
    let list = run(dir.path(), &["memory", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        v["records"].as_array().unwrap().len(),
        1,
        "nothing more written: {v}"
    );
}

#[tokio::test]
async fn a_killed_server_leaves_no_ghosts_after_restart_and_sigterm_interrupts_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("switchboard.toml"), STALL_CONFIG).unwrap();
    let client = reqwest::Client::new();
    let mut first = Served::start(dir.path(), true);
    let id = start_run(&client, &first, "wait forever").await;
    // Killed only once the run is running and has said so (it is recorded queued first).
    let deadline = Instant::now() + Duration::from_secs(30);
    while run_json(dir.path(), &id)["status"] != "running"
        || !text(&run(dir.path(), &["runs", "events", &id]).stdout)
            .contains("stalling until stopped")
    {
        assert!(Instant::now() < deadline, "the run never started stalling");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.signal(Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(10));
    assert_eq!(
        run_json(dir.path(), &id)["status"],
        "running",
        "the dead server left it live"
    );

    let mut second = Served::start(dir.path(), true);
    let v = run_json(dir.path(), &id);
    assert_eq!(v["status"], "interrupted", "the restart tombstoned it: {v}");
    let events = run(dir.path(), &["runs", "events", &id]);
    assert!(
        text(&events.stdout).contains("stalling until stopped"),
        "its events are kept"
    );

    // Graceful: SIGTERM lets a live run have its grace, then interrupts it; exit 0.
    let live = start_run(&client, &second, "also forever").await;
    let quick = start_run(&client, &second, "@echo quick").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while run_json(dir.path(), &live)["status"] != "running" {
        assert!(Instant::now() < deadline, "the live run never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    second.signal(Signal::SIGTERM);
    assert_eq!(second.wait_exit(Duration::from_secs(20)), Some(0));
    assert_eq!(run_json(dir.path(), &live)["status"], "interrupted");
    assert_eq!(run_json(dir.path(), &quick)["status"], "completed");
}

/// Fault 9: `switchboard runs stop` from another process stops a run that `serve` owns: the
/// request goes through the store, and the owner's watch stops the run within 2 s. (Before:
/// the CLI answered that the run was live elsewhere, and it ran on.)
async fn a_stop_from_another_process_ends_the_run_stopped(dir: &Path) {
    let client = reqwest::Client::new();
    let mut served = Served::start(dir, true);
    let id = start_run(&client, &served, "wait for me").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while run_json(dir, &id)["status"] != "running" {
        assert!(Instant::now() < deadline, "the run never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let asked = Instant::now();
    let asked_micros = micros_now();
    let stop = run(dir, &["runs", "stop", &id]);
    assert_eq!(stop.status.code(), Some(0), "{}", text(&stop.stderr));
    assert_eq!(
        text(&stop.stdout).trim(),
        format!("stopping run {id}: asked its process (replica-a), which stops it within 2 s")
    );
    let status = loop {
        let v = run_json(dir, &id);
        if v["status"] != "running" || asked.elapsed() > Duration::from_secs(10) {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status["status"], "stopped", "{status}");
    // Timed by the run's own record, not by this loop's polls (each one a CLI process).
    let took = status["finished_at"].as_i64().unwrap() - asked_micros;
    assert!(
        took < 2_500_000,
        "stopped {took} µs after it was asked (the `runs stop` process itself takes a few hundred ms)"
    );
    let again = run(dir, &["runs", "stop", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("already finished (stopped)"));
    served.signal(Signal::SIGTERM);
    assert_eq!(served.wait_exit(Duration::from_secs(20)), Some(0));
}

#[tokio::test]
async fn runs_stop_from_another_process_stops_a_run_serve_owns_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("switchboard.toml"), STALL_CONFIG).unwrap();
    a_stop_from_another_process_ends_the_run_stopped(dir.path()).await;
}

#[tokio::test]
async fn runs_stop_from_another_process_stops_a_run_serve_owns_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!("{STALL_CONFIG}\n{}", common::postgres_store_section()),
    )
    .unwrap();
    a_stop_from_another_process_ends_the_run_stopped(dir.path()).await;
}

/// A server whose stdout and stderr are closed (its log piped into `head`, which exited)
/// still serves and still stops on SIGTERM: a log line it cannot write is dropped, never a
/// panic in the task that wrote it. (Before: the shutdown task panicked in the log
/// subscriber's `eprintln!` and the process never exited.)
#[test]
fn serve_with_closed_stdout_and_stderr_still_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = switchboard(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read until the summary is out, then close both ends.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("serving on"), "{first}");
    drop(child.stderr.take());
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "serve did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A minimal OTLP/HTTP collector: it decodes each protobuf export and keeps its spans as
/// (name, attributes) pairs.
type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<(String, String)>)>>>;

async fn collector() -> (std::net::SocketAddr, Received) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use prost::Message;
    let received: Received = Default::default();
    let keep = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| async move {
            let Ok(export) = ExportTraceServiceRequest::decode(body) else {
                return axum::http::StatusCode::BAD_REQUEST;
            };
            let spans = export
                .resource_spans
                .into_iter()
                .flat_map(|r| r.scope_spans)
                .flat_map(|s| s.spans);
            for span in spans {
                let attrs = span
                    .attributes
                    .into_iter()
                    .map(|kv| {
                        let v = match kv.value.and_then(|v| v.value) {
                            Some(Value::StringValue(s)) => s,
                            Some(Value::BoolValue(b)) => b.to_string(),
                            Some(Value::IntValue(i)) => i.to_string(),
                            other => format!("{other:?}"),
                        };
                        (kv.key, v)
                    })
                    .collect();
                keep.lock().unwrap().push((span.name, attrs));
            }
            axum::http::StatusCode::OK
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, received)
}

/// `serve` exports its spans over OTLP/HTTP to a real receiver: an allowed request's trace
/// arrives (its root naming the surface, route, actor and outcome, its run's back end and
/// store writes as spans of their own), and a denied request's trace never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_collector_and_a_denied_trace_never_does() {
    let (addr, received) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!(
            "{}\n[telemetry]\notlp_endpoint = \"http://{addr}\"\nservice_name = \"sb-test\"\n",
            STALL_CONFIG.replace("default = \"staller\"", "default = \"echo\"")
        ),
    )
    .unwrap();
    let mut s = Served::start(dir.path(), true);
    assert!(
        s.summary.contains(&format!(
            "spans exported to http://{addr}/v1/traces (OTLP/HTTP)"
        )),
        "{}",
        s.summary
    );
    let client = reqwest::Client::new();
    let post = |token: Option<&'static str>, body: &'static str| {
        let mut r = client.post(s.url("/ingress?wait=30")).body(body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let allowed = post(Some("ops-token-0123456789"), "hello collector")
        .await
        .unwrap();
    assert_eq!(allowed.status().as_u16(), 200);
    let refused = post(
        Some("ops-token-0123456789"),
        "schedule fire self-improvement",
    )
    .await
    .unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let anonymous = post(None, "runs list").await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    // SIGTERM: the exporter is flushed on the way out.
    s.signal(Signal::SIGTERM);
    assert_eq!(s.wait_exit(Duration::from_secs(20)), Some(0));
    let spans = received.lock().unwrap().clone();
    let attr = |attrs: &[(String, String)], key: &str| {
        attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    let roots: Vec<(Option<String>, Option<String>, Option<String>)> = spans
        .iter()
        .filter(|(name, _)| name == "request")
        .map(|(_, a)| (attr(a, "route"), attr(a, "actor"), attr(a, "outcome")))
        .collect();
    assert_eq!(
        roots,
        [(
            Some("/ingress".to_owned()),
            Some("http:ops".to_owned()),
            Some("ok".to_owned())
        )],
        "the allowed request only: {spans:?}"
    );
    let names: std::collections::BTreeSet<&str> = spans.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["run", "backend", "store.start_run", "store.finish_run"] {
        assert!(names.contains(want), "{want} missing from {names:?}");
    }
    let all = format!("{spans:?}");
    assert!(
        !all.contains("denied") && !all.contains("schedule:exec"),
        "{all}"
    );
    assert!(!all.contains("ops-token"), "{all}");
}

/// `serve` prunes in the background from its start: chat event ids older than
/// `[retention] slack_event_days` go, in batches of `batch` until none is left, and the recent
/// one stays; the summary says what is in force.
#[tokio::test(flavor = "multi_thread")]
async fn serve_prunes_what_is_past_its_retention_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        "[store]\nurl = \"sqlite://./sb.db\"\n[retention]\nslack_event_days = 1\nbatch = 2\n",
    )
    .unwrap();
    let url = format!("sqlite://{}", dir.path().join("sb.db").display());
    let day = 86_400_000_000;
    let now = store::wall_clock().micros();
    {
        let s = store::open(&url).await.unwrap();
        for i in 0..5 {
            let at = store::Timestamp::from_micros(now - 10 * day);
            assert!(
                s.first_sighting(Surface::Slack, &format!("Ev-old-{i}"), at)
                    .await
                    .unwrap()
            );
        }
        let recent = store::Timestamp::from_micros(now - day / 2);
        assert!(
            s.first_sighting(Surface::Slack, "Ev-recent", recent)
                .await
                .unwrap()
        );
    }
    let mut served = Served::start(dir.path(), false);
    let line = served
        .summary
        .lines()
        .find(|l| l.contains("retention"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        line.contains("chat event ids 1 d")
            && line.contains("runs kept")
            && line.contains("batches of 2"),
        "{}",
        served.summary
    );
    let db = dir.path().join("sb.db");
    let count = || {
        let out = Command::new("python3")
            .args([
                "-c",
                "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM surface_events').fetchone()[0])",
                db.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        text(&out.stdout).trim().parse::<i64>().unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while count() != 1 {
        assert!(
            Instant::now() < deadline,
            "{} event ids left after 10 s",
            count()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What is left is the recent id: its retry is still refused.
    let s = store::open(&url).await.unwrap();
    assert!(
        !s.first_sighting(Surface::Slack, "Ev-recent", store::wall_clock())
            .await
            .unwrap()
    );
    let client = reqwest::Client::new();
    let ready = client.get(served.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    served.signal(Signal::SIGTERM);
    assert_eq!(served.wait_exit(Duration::from_secs(20)), Some(0));
}

/// The driven clock is a test-only build's (cargo feature `driven-clock`): the shipped binary
/// reads no time from its environment, so a run it records carries the wall clock's instant.
#[tokio::test]
async fn the_shipped_build_takes_no_clock_from_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let day = 86_400_000_000_i64;
    std::fs::write(
        dir.path().join("switchboard.toml"),
        "[agents]\ndefault = \"echo\"\n[agents.echo]\n[grants.\"http:ops\"]\nactions = [\"runs:read\", \"agent:run:echo\"]\nchannels = [\"http:ops\"]\n",
    )
    .unwrap();
    let mut cmd = switchboard(dir.path());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::null())
        .env("SWITCHBOARD_INGRESS_TOKENS", TOKENS)
        // Honoured, this would put the clock 599 days ahead.
        .env("SWITCHBOARD_DRIVEN_CLOCK", format!("600@{}", now - day));
    let (child, addr, summary) = common::spawn_serve(cmd);
    let s = Served {
        child,
        addr,
        summary,
    };
    let id = start_run(&reqwest::Client::new(), &s, "hello").await;
    let run = run_json(dir.path(), &id);
    let created = run["created_at"]
        .as_i64()
        .unwrap_or_else(|| panic!("{run}"));
    assert!(
        (created - now).abs() < 600_000_000,
        "the run was recorded at {created}, not about now ({now}): {run}"
    );
}
