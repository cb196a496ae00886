//! Policy reloads through the binary: SIGHUP installs a file that passes the check and refuses
//! one with faults (the policy in force stays); a Kubernetes ConfigMap's symlink swap is seen
//! by the poll; two replicas on Postgres, each reloading its own file, report one hash.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const OPS: &str = "ops-token-reload-0123456789";

fn tokens() -> String {
    json!({OPS: {"subject": "ops", "channel": "http:ops"}}).to_string()
}

/// A config whose `http:ops` holds `status:read` or not, with `extra` sections.
fn config(granted: bool, extra: &str) -> String {
    let grant = if granted {
        "[grants.\"http:ops\"]\nactions = [\"status:read\"]\n"
    } else {
        ""
    };
    format!("[agents]\ndefault = \"echo\"\n[agents.echo]\n{grant}{extra}")
}

/// Replaces `path`'s content whole (a rename), as an editor or a deploy does.
fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn status_code(base: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/ingress"))
        .bearer_auth(OPS)
        .header("content-type", "text/plain")
        .body("status")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The `policy:` line of `/readyz`.
async fn ready_policy(base: &str) -> String {
    let body = reqwest::get(format!("{base}/readyz"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix("policy: "))
        .unwrap_or_else(|| panic!("no policy line on /readyz: {body}"))
        .to_owned()
}

/// Waits (30 s at most) until `/ingress` answers `status` with `want`.
async fn until_status(base: &str, want: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if status_code(base).await == want {
            return;
        }
        assert!(Instant::now() < deadline, "status never answered {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (30 s at most) until `file` holds every one of `parts` on one line.
fn until_line(file: &Path, parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return l.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no line with {parts:?} in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn hangup(server: &common::Replica) {
    let ok = Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP failed");
}

/// `serve` from `dir` (its `switchboard.toml`), its log lines in `dir/serve.log`.
fn serve(dir: &Path, env: &[(&str, &str)]) -> common::Replica {
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::from(log));
    let (child, addr, _) = common::spawn_serve(cmd);
    common::Replica {
        child,
        base: format!("http://{addr}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_installs_a_checked_file_and_a_faulty_one_leaves_the_policy_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("switchboard.toml");
    let audit = dir.path().join("audit.log");
    // The poll is off: only SIGHUP reloads here.
    let extra = format!("[server]\nconfig_poll_ms = 0\n[telemetry]\naudit_file = {audit:?}\n");
    std::fs::write(&file, config(true, &extra)).unwrap();
    let tokens = tokens();
    let server = serve(dir.path(), &[("SWITCHBOARD_INGRESS_TOKENS", &tokens)]);
    assert_eq!(status_code(&server.base).await, 200);
    let first = ready_policy(&server.base).await;

    // A revocation: saved, and in force once the server is told.
    write_atomically(&file, &config(false, &extra));
    assert_eq!(
        status_code(&server.base).await,
        200,
        "no reload before SIGHUP"
    );
    hangup(&server);
    until_status(&server.base, 403).await;
    let second = ready_policy(&server.base).await;
    assert_ne!(first, second);
    let line = until_line(&audit, &["[policy] reloaded", &second]);
    assert!(line.contains(&format!("previous={first}")), "{line}");
    // `status`, from any process on the store, names the hash the server runs.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .current_dir(dir.path())
        .env_remove("SWITCHBOARD_CONFIG")
        .args(["status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        status["servers"][0]["policy_hash"],
        json!(second),
        "{status}"
    );

    // A file at fault is refused whole, its faults on the log; the policy in force stays.
    let faulty = format!(
        "{}[grants.\"group:nobody\"]\nactions = [\"status:read\"]\n",
        config(true, &extra)
    );
    // So is a file that declares other agents than the server runs: the table it would build
    // is about agents this process does not have.
    let more_agents = format!("{}[agents.other]\n", config(true, &extra));
    for (text, why) in [(faulty, "group:nobody"), (more_agents, "other agents")] {
        write_atomically(&file, &text);
        hangup(&server);
        until_line(&dir.path().join("serve.log"), &["reload refused", why]);
        assert_eq!(status_code(&server.base).await, 403, "{why}");
        assert_eq!(ready_policy(&server.base).await, second, "{why}");
    }

    // Fixed, with a change a reload does not install: the policy is, the rest is named.
    let fixed = config(
        true,
        &extra.replace(
            "config_poll_ms = 0",
            "config_poll_ms = 0\nshutdown_grace_seconds = 3",
        ),
    );
    write_atomically(&file, &fixed);
    hangup(&server);
    until_status(&server.base, 200).await;
    until_line(
        &dir.path().join("serve.log"),
        &["[server]", "a reload does not install"],
    );
}

/// Points `dir/..data` at a new directory holding `text`, as the kubelet updates a mounted
/// ConfigMap: `switchboard.toml` is a link through `..data`, swapped in one rename.
fn configmap_update(dir: &Path, version: u32, text: &str) {
    let target = dir.join(format!("..v{version}"));
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("switchboard.toml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..v{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_see_their_configmap_swapped_and_report_one_hash() {
    let store = common::postgres_store_section();
    let tokens = tokens();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let text = |i: usize, granted: bool| {
        config(
            granted,
            &format!("[server]\nreplica_id = \"reload-{i}\"\nconfig_poll_ms = 200\n{store}"),
        )
    };
    let replicas: Vec<common::Replica> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            configmap_update(d.path(), 1, &text(i, false));
            std::os::unix::fs::symlink(
                "..data/switchboard.toml",
                d.path().join("switchboard.toml"),
            )
            .unwrap();
            serve(d.path(), &[("SWITCHBOARD_INGRESS_TOKENS", &tokens)])
        })
        .collect();
    for r in &replicas {
        assert_eq!(status_code(&r.base).await, 403);
    }
    let before = ready_policy(&replicas[0].base).await;
    // Each replica's own file differs (its replica id) but says the same policy: one hash.
    assert_eq!(ready_policy(&replicas[1].base).await, before);
    for (i, d) in dirs.iter().enumerate() {
        configmap_update(d.path(), 2, &text(i, true));
    }
    for r in &replicas {
        until_status(&r.base, 200).await;
    }
    let after = ready_policy(&replicas[0].base).await;
    assert_ne!(after, before);
    assert_eq!(ready_policy(&replicas[1].base).await, after);
    // `status` on the shared store lists both servers with the one hash, and no disagreement.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .current_dir(dirs[0].path())
        .env_remove("SWITCHBOARD_CONFIG")
        .args(["status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let short = &after[..("sha256:".len() + 12)];
    let servers: Vec<&str> = text.lines().filter(|l| l.starts_with("server ")).collect();
    assert!(
        servers.iter().any(|l| l.contains("reload-0"))
            && servers.iter().any(|l| l.contains("reload-1")),
        "{text}"
    );
    assert!(servers.iter().all(|l| l.ends_with(short)), "{text}");
    assert!(!text.contains("different policies"), "{text}");
}
