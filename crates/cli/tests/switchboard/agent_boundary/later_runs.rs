//! What a run leaves never governs a later run: a policy file, a moved ref, its workspace.

use super::*;

/// A repo with no policy file: a run writes one allowing `shell.exec` and `git.push`; another
/// moves its `.switchboard` aside and writes an empty deny list. Neither governs a later run:
/// the policy is the committed one.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_a_run_writes_governs_a_later_run() {
    // No policy committed: the run writes one.
    let project = Project::new(false);
    let written = "mkdir -p .switchboard && printf '[policy]\\nrules = [{ action = \"git.push\", decision = \"allow\" }, { action = \"shell.exec\", decision = \"allow\" }]\\n' > .switchboard/agent-policy.toml; cat .switchboard/agent-policy.toml";
    attack(&project, PERMISSIVE, vec![shell(written)]).await;
    // The later run's org names no shell.exec: the committed policy (none) leaves it `ask`,
    // which nobody answers within the second the org gives it.
    let (_, events, seen) = attack(
        &project,
        STRICT,
        vec![shell("echo ran"), git_tool("push", &["origin", "main"])],
    )
    .await;
    assert!(
        seen.contains("refused: shell.exec needs a person's approval"),
        "a later run obeyed a policy a run wrote: {events}"
    );
    assert!(!seen.contains("ran\\n"), "{seen}");

    // A committed policy: a run replaces the directory that holds it.
    let project = Project::new(true);
    let replace = "mv .switchboard .old; mkdir -p .switchboard; printf 'deny_read = []\\n' > .switchboard/agent-policy.toml; ls -la .switchboard .old";
    attack(&project, PERMISSIVE, vec![shell(replace)]).await;
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![
            (
                "read_file",
                json!({"path": format!("{{workspace}}/{SECRET}")}),
            ),
            shell(&format!("cat {SECRET}")),
        ],
    )
    .await;
    assert!(seen.contains("is denied by this project"), "{seen}");
}

/// A run that force-moves `main` (and writes objects) changes nothing the next run sees.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_cannot_move_a_ref_outside_its_own_branch() {
    let project = Project::new(true);
    let turns = vec![
        shell(
            "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m evil && git branch -f main HEAD && git update-ref refs/heads/main HEAD && git log --oneline -3 main",
        ),
        git_tool("branch", &["-f", "main", "HEAD~1"]),
    ];
    attack(&project, PERMISSIVE, turns).await;
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![git_tool("log", &["--format=%s", "-1"])],
    )
    .await;
    assert!(seen.contains("rotate the token"), "{seen}");
    assert!(!seen.contains("evil"), "{seen}");
}

/// A repo whose path is a run's own workspace is never a base: what a run wrote is not the
/// user's history (its alternates could name the user's objects).
#[tokio::test(flavor = "multi_thread")]
async fn a_runs_workspace_is_never_a_repo() {
    let model = Model::serve(vec![]).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    let inside = sb.data().join("runs/01JSOMEWHERE/work");
    std::fs::create_dir_all(&inside).unwrap();
    git(&inside, &["init", "-q"]);
    git(&inside, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let added = sb.run(&[
        "repo",
        "add",
        "acme/own",
        "--path",
        inside.to_str().unwrap(),
    ]);
    assert!(added.status.success());
    let out = sb.run(&["ask", "--agent", "echo", "--repo", "acme/own", "hi"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("inside Switchboard's data directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A run that nests directories 30,000 deep is removed when it ends, and the process goes on:
/// removing a workspace holds one directory at a time (the recursive removal overflowed the
/// worker's stack, and every later start crashed on the same leftover).
#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_nested_beyond_any_stack_is_removed_and_the_next_run_starts() {
    let project = Project::new(true);
    // A shell's `cd` builds the whole path (past PATH_MAX it fails); python's is relative.
    let deep = "python3 -c \"import os\nfor i in range(30000):\n  os.mkdir('d'); os.chdir('d')\nprint('levels', i + 1)\"";
    let model = Model::serve(vec![shell(deep)]).await;
    let sb = Switchboard::new(&model, PERMISSIVE);
    sb.add(&project);
    let (first, second, left) = tokio::task::spawn_blocking(move || {
        let first = sb.repo_run();
        let second = sb.repo_run();
        // Read while the data directory still exists (it goes with `sb`).
        let left: Vec<_> = std::fs::read_dir(sb.data().join("runs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        (first, second, left)
    })
    .await
    .unwrap();
    assert!(model.seen().contains("levels 30000"), "{}", model.seen());
    assert_ne!(first, second);
    assert!(left.is_empty(), "workspaces left: {left:?}");
}
