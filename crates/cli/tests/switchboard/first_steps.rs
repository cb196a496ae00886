//! A new user's first steps, through the binary in fresh directories: a run in a repo on the
//! embedded default and on a config whose `data_dir` is relative (every path made absolute
//! once, where the process started), and what a failed run tells a remote caller (one
//! sentence, no path on the server, no program's own words) beside what the operator's log and
//! the local command line hold (the cause).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;

const TOKEN: &str = "first-steps-token-0123456789";

fn switchboard(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_INGRESS_TOKENS")
        .env_remove("SWITCHBOARD_AGENT_TOKEN_SECRET")
        .env("NO_COLOR", "1");
    c
}

/// The token's actor may read runs in `http:ops`, run any agent and use every repo.
const OPS_BOT: &str = r#"[grants."http:ops-bot"]
actions = ["runs:read", "agent:run:*", "repo:use"]
channels = ["http:ops"]
repos = "all"
"#;

/// `serve` in `dir` with the token map of [`TOKEN`], its stderr to `stderr`; the server and
/// its address.
fn serve(dir: &Path, stderr: Stdio) -> (common::Replica, String) {
    let tokens = format!(r#"{{"{TOKEN}": {{"subject": "ops-bot", "channel": "http:ops"}}}}"#);
    let mut cmd = switchboard(dir);
    cmd.env("SWITCHBOARD_INGRESS_TOKENS", &tokens)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(stderr);
    let (child, addr, _) = common::spawn_serve(cmd);
    let server = common::Replica {
        child,
        base: format!("http://{addr}"),
    };
    (server, addr)
}

fn run(dir: &Path, args: &[&str]) -> Output {
    switchboard(dir).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A git repository with one commit, at `dir/project`.
fn project(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("project");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o.stderr));
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-qm",
        "first",
    ]);
    repo
}

/// With no config file at all (the embedded default: a relative SQLite file and data
/// directory), a run in a repo completes, named by `--repo` or by `in owner/name:`.
#[test]
fn a_run_in_a_repo_completes_on_the_embedded_default() {
    let dir = tempfile::tempdir().unwrap();
    let repo = project(dir.path());
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let added = run(
        &work,
        &["repo", "add", "acme/web", "--path", repo.to_str().unwrap()],
    );
    assert_eq!(added.status.code(), Some(0), "{}", text(&added.stderr));
    for args in [
        &["ask", "--repo", "acme/web", "hello"][..],
        &["ask", "in acme/web: hello"],
    ] {
        let o = run(&work, args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("repo: acme/web"),
            "{}",
            text(&o.stdout)
        );
        assert!(
            text(&o.stderr).contains("kept 0 commits on switchboard/"),
            "{}",
            text(&o.stderr)
        );
    }
    assert!(work.join("switchboard.db").is_file());
    assert!(work.join("switchboard-data").is_dir());
}

/// A config whose `data_dir` is `./relative`, with a `coding` agent and a token's grants:
/// `repo test` from the command line and an `in owner/name:` request over the ingress both
/// complete.
#[test]
fn a_relative_data_dir_serves_repo_test_and_an_ingress_repo_run() {
    let dir = tempfile::tempdir().unwrap();
    let repo = project(dir.path());
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("switchboard.toml"),
        r#"
[server]
data_dir = "./relative"
[store]
url = "sqlite://./relative.db"
[agents]
default = "echo"
[agents.echo]
[agents.coding]
"#
        .to_owned()
            + OPS_BOT,
    )
    .unwrap();
    let added = run(
        &work,
        &["repo", "add", "acme/web", "--path", repo.to_str().unwrap()],
    );
    assert_eq!(added.status.code(), Some(0), "{}", text(&added.stderr));
    let tested = run(&work, &["repo", "test", "acme/web"]);
    assert_eq!(tested.status.code(), Some(0), "{}", text(&tested.stderr));
    assert!(
        text(&tested.stderr).contains("completed"),
        "{}\n{}",
        text(&tested.stdout),
        text(&tested.stderr)
    );
    assert!(work.join("relative").is_dir());

    let (_server, addr) = serve(&work, Stdio::null());
    // The answer itself: the run completed in the repo.
    let reply = ingress(&addr, "in acme/web: hello");
    assert!(reply.contains("request: hello"), "{reply}");
    assert!(reply.contains("repo: acme/web"), "{reply}");
}

/// POSTs `body` to the ingress with `?wait=30`; the reply's text.
fn ingress(addr: &str, body: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        reqwest::Client::new()
            .post(format!("http://{addr}/ingress?wait=30"))
            .bearer_auth(TOKEN)
            .body(body.to_owned())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
}

/// A failed clone and a missing program: the remote caller's reply, the run's events and its
/// friction hold no path and no program's words; the server's log and the local command line
/// hold the cause.
#[test]
fn a_failed_runs_cause_reaches_the_operator_never_the_remote_caller() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let gone = dir.path().join("no-such-remote.git");
    std::fs::write(
        work.join("switchboard.toml"),
        r#"
[agents]
default = "echo"
[agents.echo]
[agents.coding]
backend = "command"
command = ["sb-first-steps-missing-program", "exec"]
sandbox = false
"#
        .to_owned()
            + OPS_BOT,
    )
    .unwrap();
    let url = format!("file://{}", gone.display());
    let added = run(&work, &["repo", "add", "acme/gone", "--url", &url]);
    assert_eq!(added.status.code(), Some(0), "{}", text(&added.stderr));

    let log = work.join("serve.log");
    let (server, addr) = serve(&work, std::fs::File::create(&log).unwrap().into());

    let clone = ingress(&addr, "in acme/gone: hello");
    let program = ingress(&addr, "@coding hello");
    let events = ingress(&addr, "runs list --status all");
    let mut readable = format!("{clone}\n{program}\n{events}\n");
    for id in run_ids(&events) {
        readable.push_str(&ingress(&addr, &format!("runs events {id}")));
        readable.push_str(&ingress(&addr, &format!("runs friction {id}")));
        readable.push_str(&ingress(&addr, &format!("runs get {id}")));
    }
    assert!(
        clone.contains("repo acme/gone could not be cloned"),
        "{clone}"
    );
    assert!(
        program.contains("the agent's program could not be started"),
        "{program}"
    );
    for secret in [
        dir.path().to_str().unwrap(),
        "no-such-remote",
        "fatal:",
        "sb-first-steps-missing-program",
    ] {
        assert!(
            !readable.contains(secret),
            "{secret:?} reached the caller:\n{readable}"
        );
    }

    // The operator's log holds both causes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let logged = loop {
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        let both = logged.contains("no-such-remote")
            && logged.contains("`sb-first-steps-missing-program` was not found");
        if both || Instant::now() > deadline {
            break logged;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(logged.contains("no-such-remote.git"), "{logged}");
    assert!(
        logged.contains("`sb-first-steps-missing-program` was not found"),
        "{logged}"
    );
    drop(server);

    // The local command line shows the cause of its own runs.
    let o = run(&work, &["ask", "--repo", "acme/gone", "hello"]);
    // Nothing started: the repo's source is the config's to fix (exit 2).
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no-such-remote.git"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&work, &["ask", "--agent", "coding", "hello"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("`sb-first-steps-missing-program` was not found"),
        "{}",
        text(&o.stderr)
    );
}

/// The run ids a `runs list` reply names.
fn run_ids(list: &str) -> Vec<String> {
    list.split_whitespace()
        .filter(|w| w.len() == 26 && w.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_owned)
        .collect()
}

/// A Postgres that refuses connections is named as refusing, once, at the first connection,
/// not after the pool's wait as a time-out.
#[test]
fn a_refused_postgres_is_named_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        dir.path().join("switchboard.toml"),
        format!("[store]\nurl = \"postgres://postgres@127.0.0.1:{port}/x\"\n[agents.echo]\n"),
    )
    .unwrap();
    for args in [&["serve", "--listen", "127.0.0.1:0"][..], &["runs", "list"]] {
        let o = run(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let stderr = text(&o.stderr);
        assert!(stderr.contains("Connection refused"), "{args:?}: {stderr}");
        assert!(!stderr.contains("pool timed out"), "{args:?}: {stderr}");
        assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
    }
}
