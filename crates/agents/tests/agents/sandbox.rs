//! The bubblewrap sandbox, for real: a program under it reads the stub for a denied file (one
//! that exists and one that does not yet), cannot write, rename or replace `.switchboard/`,
//! cannot move the run's `.git` or write its config, can write the workspace, sees nothing of
//! the host beyond the toolchain, fills its `/tmp` only to its size, starts no more processes
//! than its limit, and with the network unshared cannot reach a server on the host's
//! loopback that the same call with the network shared reaches. Needs Debian's bubblewrap
//! (.ci/run installs it); without it these tests fail.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use agents::sandbox::{
    ConfiguredBind, Network, STUB_TEXT, Sandbox, SandboxError, SandboxLimits, SandboxSpec,
};

struct Place {
    workspace: tempfile::TempDir,
    scratch: tempfile::TempDir,
}

fn place() -> Place {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::write(workspace.path().join("README.md"), "hello\n").unwrap();
    std::fs::create_dir_all(workspace.path().join(".switchboard")).unwrap();
    std::fs::write(
        workspace.path().join(".switchboard/agent-policy.toml"),
        "deny_read = [\".env\"]\n",
    )
    .unwrap();
    Place {
        workspace,
        scratch: tempfile::tempdir().unwrap(),
    }
}

fn spec(place: &Place, network: Network) -> SandboxSpec {
    SandboxSpec {
        workspace: place.workspace.path().to_owned(),
        workspace_read_only: false,
        repository: false,
        deny_read: vec![".env".into(), "config/later.env".into()],
        protected: Vec::new(),
        read_only: vec![],
        memory: None,
        configured: Vec::new(),
        private: Vec::new(),
        network,
        proxy_socket: None,
        files: Vec::new(),
        scratch: place.scratch.path().to_owned(),
        limits: SandboxLimits::default(),
    }
}

async fn sh(sandbox: &Sandbox, script: &str) -> (bool, String, String) {
    let output = sandbox
        .command("/bin/sh", ["-c", script])
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_denied_file_reads_as_the_stub_even_before_it_exists() {
    let place = place();
    let sandbox = Sandbox::prepare(&spec(&place, Network::Unshared)).unwrap();
    let (ok, out, err) = sh(&sandbox, "cat .env; cat config/later.env; cat README.md").await;
    assert!(ok, "{err}");
    assert_eq!(out, format!("{STUB_TEXT}{STUB_TEXT}hello\n"));
    assert!(!out.contains("hunter2"));
    // Outside, the file keeps its bytes; the name that did not exist is an empty file.
    assert_eq!(
        std::fs::read_to_string(place.workspace.path().join(".env")).unwrap(),
        "API_KEY=hunter2\n"
    );
    assert_eq!(
        std::fs::read_to_string(place.workspace.path().join("config/later.env")).unwrap(),
        ""
    );
    // Writing through the stub fails too.
    let (ok, _, _) = sh(&sandbox, "echo x > .env").await;
    assert!(!ok);
}

#[tokio::test]
async fn the_policy_file_is_read_only_and_the_workspace_is_not() {
    let place = place();
    let sandbox = Sandbox::prepare(&spec(&place, Network::Unshared)).unwrap();
    let (ok, out, _) = sh(
        &sandbox,
        "cat .switchboard/agent-policy.toml; echo more >> .switchboard/agent-policy.toml",
    )
    .await;
    assert!(!ok, "the policy file was writable");
    assert_eq!(out, "deny_read = [\".env\"]\n");
    let (ok, _, err) = sh(
        &sandbox,
        "echo made > notes.txt && mkdir -p src && echo x > src/a.rs",
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read_to_string(place.workspace.path().join("notes.txt")).unwrap(),
        "made\n"
    );
}

/// The whole `.switchboard/` is read-only: no new file, no rename, no replaced directory.
#[tokio::test]
async fn the_policy_directory_cannot_be_written_renamed_or_replaced() {
    let here = place();
    let sandbox = Sandbox::prepare(&spec(&here, Network::Unshared)).unwrap();
    for attempt in [
        "echo x > .switchboard/new.toml",
        "mv .switchboard .old",
        "mv .switchboard/agent-policy.toml .switchboard/x",
        "rm -rf .switchboard",
        "rm .switchboard/agent-policy.toml",
        "mkdir .switchboard/inner",
    ] {
        let (ok, _, _) = sh(&sandbox, attempt).await;
        assert!(!ok, "{attempt} succeeded");
    }
    let (_, out, _) = sh(
        &sandbox,
        "ls -A .switchboard; cat .switchboard/agent-policy.toml",
    )
    .await;
    assert_eq!(out, "agent-policy.toml\ndeny_read = [\".env\"]\n");
    // A workspace without the directory gets an empty one, read-only as well.
    let bare = place();
    std::fs::remove_dir_all(bare.workspace.path().join(".switchboard")).unwrap();
    let sandbox = Sandbox::prepare(&spec(&bare, Network::Unshared)).unwrap();
    let (ok, _, _) = sh(
        &sandbox,
        "mkdir -p .switchboard && printf 'deny_read = []' > .switchboard/agent-policy.toml",
    )
    .await;
    assert!(!ok, "a policy file was written");
    assert!(
        !bare
            .workspace
            .path()
            .join(".switchboard/agent-policy.toml")
            .exists()
    );
}

/// A run's repository is pinned in place and its config is read-only; the rest of it (its
/// objects, refs and index) is the run's to write.
#[tokio::test]
async fn the_runs_repository_stays_in_place_with_its_config_read_only() {
    let place = place();
    let ws = place.workspace.path();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(ws)
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    let sandbox = Sandbox::prepare(&SandboxSpec {
        repository: true,
        ..spec(&place, Network::Unshared)
    })
    .unwrap();
    for attempt in [
        "mv .git .git-old",
        "rmdir .git",
        "echo '[core]\nhooksPath = /tmp' >> .git/config",
        "mv .git/config .git/c2",
        "rm .git/config",
        "git config core.fsmonitor true",
    ] {
        let (ok, _, _) = sh(&sandbox, attempt).await;
        assert!(!ok, "{attempt} succeeded");
    }
    let (ok, _, err) = sh(
        &sandbox,
        "echo x > a && git add a && git -c user.name=r -c user.email=r@r commit -qm a",
    )
    .await;
    assert!(ok, "{err}");
    assert!(ws.join(".git/config").is_file());
}

/// The sandbox's own `/tmp` and `/dev/shm` hold at most their size; the rest of `/dev` is
/// read-only.
#[tokio::test]
async fn tmp_is_bounded() {
    let place = place();
    let sandbox = Sandbox::prepare(&SandboxSpec {
        limits: SandboxLimits {
            tmp_bytes: 1024 * 1024,
            shm_bytes: 1024 * 1024,
            ..SandboxLimits::default()
        },
        ..spec(&place, Network::Unshared)
    })
    .unwrap();
    let (ok, _, err) = sh(&sandbox, "head -c 2000000 /dev/zero > /tmp/fill").await;
    assert!(!ok, "2 MB fit in a 1 MiB /tmp");
    assert!(err.contains("No space left"), "{err}");
    let (ok, _, err) = sh(&sandbox, "head -c 500000 /dev/zero > /tmp/fits").await;
    assert!(ok, "{err}");
    let (ok, _, err) = sh(&sandbox, "head -c 2000000 /dev/zero > /dev/shm/fill").await;
    assert!(!ok, "2 MB fit in a 1 MiB /dev/shm");
    assert!(err.contains("No space left"), "{err}");
    let (ok, _, _) = sh(&sandbox, "echo x > /dev/new").await;
    assert!(!ok, "/dev was writable");
    let (ok, _, err) = sh(&sandbox, "echo x > /dev/null").await;
    assert!(ok, "{err}");
}

/// The process limit is set inside the sandbox, and a program past it cannot fork. The kernel
/// does not hold root to it, and no sandboxed program is root: as root this runs as the
/// sandbox's host user.
#[tokio::test]
async fn a_sandbox_starts_no_more_processes_than_its_limit() {
    let place = place();
    let limits = SandboxLimits {
        processes: 16,
        ..SandboxLimits::default()
    };
    let sandbox = Sandbox::prepare(&SandboxSpec {
        limits,
        ..spec(&place, Network::Unshared)
    })
    .unwrap();
    let (_, out, _) = sh(&sandbox, "grep 'Max processes' /proc/self/limits").await;
    assert!(
        out.split_whitespace().filter(|w| *w == "16").count() == 2,
        "{out}"
    );
    let bomb = "n=0; for i in $(seq 60); do sleep 3 & n=$((n+1)); done; wait; echo started $n";
    // Under a root test run the sandbox itself is the unprivileged host user, whom the
    // limit binds.
    let out = sandbox
        .command("/bin/sh", ["-c", bomb])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fork") || err.contains("Resource temporarily unavailable"),
        "60 processes started under a limit of 16: {err} {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test]
async fn nothing_of_the_host_but_the_toolchain_is_there() {
    let place = place();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "x").unwrap();
    let sandbox = Sandbox::prepare(&spec(&place, Network::Unshared)).unwrap();
    let script = format!(
        "test -e /etc/shadow && echo shadow; test -e {}/secret && echo outside; test -d /root && ls /root; test -x /usr/bin/env && echo toolchain",
        outside.path().display()
    );
    let (_, out, _) = sh(&sandbox, &script).await;
    assert_eq!(out, "toolchain\n");
}

/// A one-shot HTTP server on the host's loopback.
fn serve_once() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nreached");
        }
    });
    port
}

#[tokio::test]
async fn with_the_network_unshared_the_hosts_loopback_is_out_of_reach() {
    assert!(
        Path::new("/usr/bin/curl").exists(),
        "curl is needed (apt-get install curl)"
    );
    let place = place();
    let port = serve_once();
    let fetch = format!("curl -sS --max-time 5 http://127.0.0.1:{port}/");
    let unshared = Sandbox::prepare(&spec(&place, Network::Unshared)).unwrap();
    let (ok, out, err) = sh(&unshared, &fetch).await;
    assert!(!ok, "reached the host from an unshared network: {out}");
    assert!(
        err.contains("Failed to connect") || err.contains("Couldn't connect"),
        "{err}"
    );
    // The same call with the network shared reaches it, so the refusal above is the sandbox's.
    let shared = Sandbox::prepare(&spec(&place, Network::Shared)).unwrap();
    let (ok, out, err) = sh(&shared, &fetch).await;
    assert!(ok, "{err}");
    assert_eq!(out, "reached");
}

#[test]
fn bad_specs_are_refused_before_anything_runs() {
    let place = place();
    let cases: Vec<(&str, SandboxSpec)> = vec![
        (
            "a missing workspace",
            SandboxSpec {
                workspace: place.workspace.path().join("nope"),
                workspace_read_only: false,
                ..spec(&place, Network::Unshared)
            },
        ),
        (
            "an absolute denied name",
            SandboxSpec {
                deny_read: vec!["/etc/passwd".into()],
                protected: Vec::new(),
                ..spec(&place, Network::Unshared)
            },
        ),
        (
            "a climbing denied name",
            SandboxSpec {
                deny_read: vec!["../x".into()],
                protected: Vec::new(),
                ..spec(&place, Network::Unshared)
            },
        ),
        (
            "a denied directory",
            SandboxSpec {
                deny_read: vec![".switchboard".into()],
                protected: Vec::new(),
                ..spec(&place, Network::Unshared)
            },
        ),
    ];
    for (what, spec) in cases {
        assert!(Sandbox::prepare(&spec).is_err(), "{what} was accepted");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/hostname", place.workspace.path().join("linked")).unwrap();
        let linked = SandboxSpec {
            deny_read: vec!["linked".into()],
            protected: Vec::new(),
            ..spec(&place, Network::Unshared)
        };
        assert!(
            Sandbox::prepare(&linked).is_err(),
            "a denied symlink was accepted"
        );
    }
}

/// A configured bind that is, holds or lies in a private path (the data directory, a
/// repository's checkout), by any spelling of it (a link to it), never makes a sandbox.
#[test]
fn a_configured_bind_reaching_a_private_path_is_refused() {
    let place = place();
    let host = tempfile::tempdir().unwrap();
    let data = host.path().join("data");
    std::fs::create_dir_all(data.join("runs/r1")).unwrap();
    std::fs::create_dir_all(host.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(&data, host.path().join("link")).unwrap();
    let refused = |bind: PathBuf| {
        Sandbox::prepare(&SandboxSpec {
            configured: vec![ConfiguredBind {
                path: bind,
                writable: true,
                at: None,
            }],
            private: vec![data.clone()],
            ..spec(&place, Network::Unshared)
        })
        .err()
    };
    for bind in [
        data.clone(),
        host.path().to_owned(),
        data.join("runs/r1"),
        host.path().join("link"),
    ] {
        let err = refused(bind.clone()).unwrap_or_else(|| panic!("{} was bound", bind.display()));
        assert!(
            err.to_string()
                .contains("bind a directory that holds neither"),
            "{err}"
        );
    }
    assert!(
        !refused(host.path().join("elsewhere"))
            .is_some_and(|e| matches!(e, SandboxError::ConfiguredPrivate { .. })),
    );
}
