//! Helpers shared by the binary's test modules.

pub mod project;
pub mod prompted;

/// A `[store]` section on the Postgres of `SWITCHBOARD_TEST_POSTGRES_URL`, in a schema of its
/// own so concurrent tests never see each other's runs.
pub fn postgres_store_section() -> String {
    test_support::postgres::store_section("cli")
}

/// Spawns `cmd` (a `switchboard serve` with its stdout piped) and waits up to 60 s for its
/// start-up summary (through the `schedules` line); the child, its address and the summary.
/// A server that prints none is killed, never left behind.
pub fn spawn_serve(mut cmd: std::process::Command) -> (std::process::Child, String, String) {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawning switchboard serve");
    let stdout = child.stdout.take().expect("a piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut summary = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            summary.push_str(&line);
            summary.push('\n');
            if line.split_whitespace().nth(1) == Some("schedules") {
                let _ = tx.send(summary.clone());
            }
        }
    });
    let Ok(summary) = rx.recv_timeout(std::time::Duration::from_secs(60)) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("serve printed no summary within 60 s");
    };
    let addr = summary
        .split("serving on http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("the summary names the address")
        .to_owned();
    (child, addr, summary)
}

/// One `switchboard serve` of a replica test, killed when dropped.
pub struct Replica {
    pub child: std::process::Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `config` to `dir/switchboard.toml` and serves it from `dir` on a free loopback port,
/// with only `env` of Switchboard's own variables set; the replica and its start-up summary.
pub fn start_replica(
    dir: &std::path::Path,
    config: &str,
    env: &[(&str, &str)],
) -> (Replica, String) {
    std::fs::write(dir.join("switchboard.toml"), config).expect("writing the config");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.current_dir(dir)
        .env_remove("SWITCHBOARD_CONFIG")
        .env_remove("SWITCHBOARD_INGRESS_TOKENS")
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::null());
    let (child, addr, summary) = spawn_serve(cmd);
    let replica = Replica {
        child,
        base: format!("http://{addr}"),
    };
    (replica, summary)
}
