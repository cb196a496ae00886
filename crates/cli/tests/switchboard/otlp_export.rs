//! Telemetry a `serve` process sends out: an OTLP endpoint that does not take its spans is
//! said on the log, never silently.

use std::time::{Duration, Instant};

use crate::common;

const TOKENS: &str = r#"{"ops-token-0123456789": {"subject": "ops", "channel": "http:ops"}}"#;

const CONFIG: &str = r#"
[agents]
default = "echo"
[agents.echo]
[grants."http:ops"]
actions = ["runs:read", "agent:run:*"]
channels = ["http:ops"]
"#;

fn switchboard(dir: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_INGRESS_TOKENS")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info");
    c
}

/// An OTLP endpoint with nothing listening is warned about on the log (naming it, once a
/// minute while it lasts), never silently; the server goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_otlp_endpoint_nobody_answers_is_warned_about() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!(
            "{}\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n",
            CONFIG
        ),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let mut cmd = switchboard(dir.path());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env("SWITCHBOARD_INGRESS_TOKENS", TOKENS)
        .stderr(std::fs::File::create(&log).unwrap());
    let (child, addr, _) = common::spawn_serve(cmd);
    let server = common::Replica {
        child,
        base: format!("http://{addr}"),
    };
    let client = reqwest::Client::new();
    let warning = format!("the OTLP export to http://127.0.0.1:{port} failed");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut logged = String::new();
    while Instant::now() < deadline && !logged.contains(&warning) {
        // Each request is a trace to export.
        let r = client
            .post(format!("{}/ingress?wait=30", server.base))
            .bearer_auth("ops-token-0123456789")
            .body("hello")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        tokio::time::sleep(Duration::from_millis(500)).await;
        logged = std::fs::read_to_string(&log).unwrap_or_default();
    }
    assert!(logged.contains(&warning), "{logged}");
    // SIGTERM: the exporter is flushed (and fails again) on the way out.
    let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut server = server;
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "serve did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exited, Some(0));
    // Once a minute: the exports that failed since said nothing more.
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(logged.matches(&warning).count(), 1, "{logged}");
}
