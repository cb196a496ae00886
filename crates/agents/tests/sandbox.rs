//! The bubblewrap sandbox, for real: a program under it reads the stub for a denied file (one
//! that exists and one that does not yet), cannot write the policy file, can write the
//! workspace, sees nothing of the host beyond the toolchain, and with the network unshared
//! cannot reach a server on the host's loopback that the same call with the network shared
//! reaches. Needs Debian's bubblewrap (.ci/run installs it); without it these tests fail.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use agents::sandbox::{Network, STUB_TEXT, Sandbox, SandboxSpec};

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
        deny_read: vec![".env".into(), "config/later.env".into()],
        read_only_in_workspace: vec![".switchboard/agent-policy.toml".into()],
        read_only: vec![],
        configured: Vec::new(),
        network,
        scratch: place.scratch.path().to_owned(),
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
                ..spec(&place, Network::Unshared)
            },
        ),
        (
            "an absolute denied name",
            SandboxSpec {
                deny_read: vec!["/etc/passwd".into()],
                ..spec(&place, Network::Unshared)
            },
        ),
        (
            "a climbing denied name",
            SandboxSpec {
                deny_read: vec!["../x".into()],
                ..spec(&place, Network::Unshared)
            },
        ),
        (
            "a denied directory",
            SandboxSpec {
                deny_read: vec![".switchboard".into()],
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
            ..spec(&place, Network::Unshared)
        };
        assert!(
            Sandbox::prepare(&linked).is_err(),
            "a denied symlink was accepted"
        );
    }
}
