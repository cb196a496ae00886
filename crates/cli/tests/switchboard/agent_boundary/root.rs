//! No sandboxed program is host root: under a root `serve` (CI runs as root; this test fails,
//! never skips, when it cannot), a `shell` call's program is an unprivileged host user as the
//! host sees it, the kernel's settings are read-only to it, and nothing in its
//! `/proc/self/mountinfo` names the server's data directory.

use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// Every process on the host whose command line holds `marker`, with its `Uid:` and `Gid:`
/// lines (real, effective, saved, file system), read from the host's `/proc`.
fn holders(marker: &str) -> Vec<(Vec<String>, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !argv.iter().any(|a| a.contains(marker)) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        let ids = status
            .lines()
            .filter(|l| l.starts_with("Uid:") || l.starts_with("Gid:"))
            .collect::<Vec<_>>()
            .join(" ");
        found.push((argv, ids));
    }
    found
}

/// Waits (60 s at most) until the sandboxed `/bin/sh -c program` runs, then asserts that no
/// process holding `marker` in its command line (the program, its sandbox's launchers) has
/// uid or gid 0 as the host sees it.
async fn no_holder_is_root(marker: &str, program: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let found = holders(marker);
        let program_runs = found
            .iter()
            .any(|(argv, _)| argv.len() >= 3 && argv[1] == "-c" && argv[2] == program);
        if program_runs {
            break found;
        }
        assert!(Instant::now() < deadline, "the sandboxed program never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for (argv, ids) in &seen {
        let root = ids
            .split_whitespace()
            .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
            .any(|id| id == "0");
        assert!(
            !root,
            "a process of the sandbox is host root: {argv:?} {ids}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_sandboxed_program_is_host_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test runs serve as root, as CI does: run it as root"
    );
    let project = Project::new(true);
    let marker = format!("root-probe-{}", std::process::id());
    let program = format!("sleep 8 # {marker}");
    let sysctl = "/proc/sys/kernel/printk_ratelimit";
    let value = std::fs::read_to_string(sysctl).unwrap().trim().to_owned();
    let turns = vec![
        shell(&program),
        shell(&format!(
            "echo {value} > {sysctl} 2>/dev/null && echo sysctl-written || echo sysctl-refused; \
             if (: >> /proc/sys/kernel/core_pattern) 2>/dev/null; then echo core-open; else echo core-refused; fi; \
             echo uid=$(id -u); cat /proc/self/mountinfo"
        )),
    ];
    let model = Model::serve(turns).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    sb.add(&project);
    std::fs::create_dir_all(sb.data()).unwrap();
    let data = sb.data().canonicalize().unwrap();
    let run = tokio::task::spawn_blocking(move || {
        let id = sb.repo_run();
        let record = sb.record(&id);
        drop(sb);
        record
    });
    // While the first call's program runs: the sandboxed shell, and every process holding
    // its command line, as the host sees them.
    no_holder_is_root(&marker, &program).await;
    let (run, events) = run.await.unwrap();
    project.assert_clean("a run event", &events);
    project.assert_clean("the answer", &run.to_string());
    let all = model.seen();
    // The second call's result (the system prompt names the host's workspace, by design).
    let said = all
        .rsplit("sysctl-")
        .next()
        .and_then(|rest| rest.split('"').next())
        .map(|rest| format!("sysctl-{rest}"))
        .unwrap_or_default();
    assert!(said.contains("sysctl-refused"), "{all}");
    assert!(!said.contains("sysctl-written"), "{said}");
    assert!(said.contains("core-refused"), "{said}");
    assert!(!said.contains("uid=0"), "{said}");
    assert_eq!(
        std::fs::read_to_string(sysctl).unwrap().trim(),
        value,
        "the host's setting changed"
    );
    // Nothing in mountinfo names the server's data directory: the workspace is /workspace,
    // an overlay whose layers are staging paths, and every other source is the toolchain's
    // or a staging copy.
    assert!(said.contains("/workspace"), "{said}");
    assert!(said.contains("switchboard-workspace"), "{said}");
    for dir in [data.as_path(), Path::new("/tmp/switchboard-sandbox")] {
        assert!(
            !said.contains(&*dir.to_string_lossy()),
            "{} is a mount point in the sandbox: {said}",
            dir.display()
        );
    }
}

/// A sandboxed `command` agent under a root `serve`: its program is the unprivileged host user
/// as the host sees it, and the kernel's settings are read-only to it.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_agent_under_a_root_server_is_not_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test runs serve as root, as CI does: run it as root"
    );
    let sb = Switchboard::with_agents(&[], PERMISSIVE, "");
    let config = sb.dir.path().join("switchboard.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    let marker = format!("root-agent-{}", std::process::id());
    let script = format!(
        "sleep 6 # {marker}\nid -u; (: >> /proc/sys/kernel/core_pattern) 2>/dev/null && echo core-open || echo core-refused"
    );
    std::fs::write(
        &config,
        format!(
            "{base}[agents.coding]\nbackend = \"command\"\nsandbox = true\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    let run = tokio::task::spawn_blocking(move || {
        let out = sb.run(&["ask", "--agent", "coding", "hello"]);
        drop(sb);
        out
    });
    no_holder_is_root(&marker, &script).await;
    let out = run.await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("core-refused"), "{said}");
    // Inside, it is the host user bubblewrap mapped (the default 65534), never 0.
    assert!(said.lines().any(|l| l.trim() == "65534"), "{said}");
    assert!(!said.lines().any(|l| l.trim() == "0"), "{said}");
}
