//! A kept branch makes git on the person's machine run nothing: what the checkout's own config
//! names inside the tree (its hooks directory, a config file it includes), the hook
//! managers' config and the project's `protected` list are never kept, and are read-only
//! in the sandbox.

use super::*;

/// The person's side: `git merge` of the run's branch into their checkout, then `git commit`
/// and `git status` there, as the docs say to take a run's work.
fn merge_as_the_person(project: &Project, run: &Value) {
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    git(
        &project.repo,
        &["merge", "--no-edit", "-m", "take the run's work", &branch],
    );
    git(&project.repo, &["commit", "--allow-empty", "-m", "after"]);
    git(&project.repo, &["status", "--short"]);
}

/// The checkout's config points `core.hooksPath` at `.githooks` (as husky and many teams
/// do); a run writes hooks there. None is kept, so the person's merge, commit and status
/// run nothing; the hooks are listed as not kept.
#[tokio::test(flavor = "multi_thread")]
async fn hooks_a_run_writes_where_the_checkouts_config_looks_are_never_kept() {
    let project = Project::new(true);
    git(&project.repo, &["config", "core.hooksPath", ".githooks"]);
    let host = tempfile::tempdir().unwrap();
    let witness = host.path().join("ran");
    let plant = format!(
        "mkdir -p .githooks && for h in post-merge pre-commit post-commit; do printf '#!/bin/sh\\ntouch {w}\\n' > .githooks/$h; chmod +x .githooks/$h; done; \
         mkdir -p .husky && cp .githooks/pre-commit .husky/pre-commit; echo kept > notes.txt; ls .githooks",
        w = witness.display()
    );
    let (run, events, seen) = attack(&project, PERMISSIVE, vec![shell(&plant)]).await;
    assert!(seen.contains("post-merge"), "{seen}");
    assert!(events.contains(".githooks/post-merge"), "{events}");
    assert!(events.contains(".husky/pre-commit"), "{events}");
    merge_as_the_person(&project, &run);
    assert!(
        !witness.exists(),
        "a hook the run wrote ran on the person's machine"
    );
    assert_eq!(
        std::fs::read_to_string(project.repo.join("notes.txt")).unwrap(),
        "kept\n",
        "the run's other change was not merged"
    );
}

/// The checkout's config includes a committed `.gitconfig.shared`; a run tries to name a
/// file-system monitor there (by the shell, by `write_file`, and by a commit of its own). The
/// file is read-only in the sandbox and never kept: the person's `git status` runs nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_config_file_the_checkout_includes_is_read_only_and_never_kept() {
    let mut project = Project::new(true);
    std::fs::write(
        project.repo.join(".gitconfig.shared"),
        "[core]\n\tautocrlf = false\n",
    )
    .unwrap();
    git(&project.repo, &["add", ".gitconfig.shared"]);
    git(&project.repo, &["commit", "-q", "-m", "shared config"]);
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    git(
        &project.repo,
        &["config", "include.path", "../.gitconfig.shared"],
    );
    let host = tempfile::tempdir().unwrap();
    let witness = host.path().join("ran");
    let monitor = "[core]\\n\\tfsmonitor = ./fsm.sh\\n";
    let plant = format!(
        "printf '#!/bin/sh\\ntouch {w}\\n' > fsm.sh; chmod +x fsm.sh; \
         printf '{monitor}' >> .gitconfig.shared || echo refused-by-the-sandbox; \
         b=$(printf '{monitor}' | git hash-object -w --stdin) && git update-index --cacheinfo 100644,$b,.gitconfig.shared && \
         git add fsm.sh && git -c user.name=a -c user.email=b commit -qm monitor && git show --stat HEAD | tail -3",
        w = witness.display()
    );
    let (run, events, seen) = attack(
        &project,
        PERMISSIVE,
        vec![
            shell(&plant),
            (
                "write_file",
                json!({"path": "{workspace}/.gitconfig.shared", "content": "[core]\n\tfsmonitor = ./fsm.sh\n"}),
            ),
        ],
    )
    .await;
    assert!(seen.contains("refused-by-the-sandbox"), "{seen}");
    assert!(seen.contains("which this project protects"), "{seen}");
    assert!(events.contains(".gitconfig.shared"), "{events}");
    merge_as_the_person(&project, &run);
    assert!(
        !witness.exists(),
        "a monitor the run named ran on the person's machine"
    );
    assert_eq!(
        std::fs::read_to_string(project.repo.join(".gitconfig.shared")).unwrap(),
        "[core]\n\tautocrlf = false\n"
    );
}

/// The project's own `protected` list: a path it names is read-only in the sandbox, refused
/// by `write_file`, and never kept, however the run changes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_path_the_project_protects_is_never_kept() {
    let mut project = Project::new(true);
    std::fs::create_dir_all(project.repo.join("scripts")).unwrap();
    std::fs::write(project.repo.join("scripts/release.sh"), "echo release\n").unwrap();
    std::fs::write(
        project.repo.join(".switchboard/agent-policy.toml"),
        format!("deny_read = [\"{SECRET}\"]\nprotected = [\"scripts\"]\n"),
    )
    .unwrap();
    git(&project.repo, &["add", "-A"]);
    git(
        &project.repo,
        &["commit", "-q", "-m", "protect the scripts"],
    );
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    let turns = vec![
        shell(
            "echo evil >> scripts/release.sh || echo refused-by-the-sandbox; echo kept > notes.txt",
        ),
        (
            "write_file",
            json!({"path": "{workspace}/scripts/new.sh", "content": "evil"}),
        ),
        shell(
            "git rm -q --cached scripts/release.sh && git -c user.name=a -c user.email=b commit -qm gone; git log --oneline -1",
        ),
    ];
    let (run, events, seen) = attack(&project, PERMISSIVE, turns).await;
    assert!(seen.contains("refused-by-the-sandbox"), "{seen}");
    assert!(seen.contains("which this project protects"), "{seen}");
    let branch = format!("switchboard/{}", run["id"].as_str().unwrap());
    let changed = git(
        &project.repo,
        &["diff", "--name-only", &project.head, &branch],
    );
    assert_eq!(changed, "notes.txt", "{events}");
}
