//! The project's policy is found however it is spelled: a `.switchboard` that is a link, a
//! submodule or a file, or a policy under another spelling of its name (which a macOS or
//! Windows checkout reads as the policy), refuses the run before it starts.

use super::*;

/// A project with no policy at its exact place, and `layout` (a shell script run in the
/// repository) committed.
fn laid_out(layout: &str) -> Project {
    let mut project = Project::new(false);
    let out = Command::new("sh")
        .arg("-c")
        .arg(layout)
        .current_dir(&project.repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(&project.repo, &["add", "-A"]);
    git(
        &project.repo,
        &["commit", "-q", "-m", "a policy, spelled otherwise"],
    );
    project.head = git(&project.repo, &["rev-parse", "HEAD"]);
    project
}

/// Each layout refuses the run before its agent is asked anything, and says why, naming the
/// entry as the repository spells it.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_spelled_or_placed_otherwise_refuses_the_run_before_it_starts() {
    let policy = format!("deny_read = [\\\"{SECRET}\\\"]\\n");
    let write =
        |dir: &str, file: &str| format!("mkdir -p '{dir}' && printf \"{policy}\" > '{dir}/{file}'");
    let submodule = "git init -q inner && git -C inner -c user.name=a -c user.email=b commit -q --allow-empty -m i && \
         git update-index --add --cacheinfo 160000,$(git -C inner rev-parse HEAD),.switchboard && rm -rf inner && mkdir .switchboard"
        .to_owned();
    let cases: Vec<(String, &str)> = vec![
        (write(".Switchboard", "agent-policy.toml"), ".Switchboard"),
        (write(".SWITCHBOARD", "agent-policy.toml"), ".SWITCHBOARD"),
        (
            write(".switch\u{200c}board", "agent-policy.toml"),
            ".switch\u{200c}board",
        ),
        (write(".switchboard.", "agent-policy.toml"), ".switchboard."),
        (
            write(".switchboard", "Agent-Policy.toml"),
            "Agent-Policy.toml",
        ),
        (
            write(".switchboard", "agent-policy.toml."),
            "agent-policy.toml.",
        ),
        (
            format!(
                "{} && {}",
                write(".switchboard", "agent-policy.toml"),
                write(".Switchboard", "agent-policy.toml")
            ),
            ".Switchboard",
        ),
        (
            format!(
                "{} && ln -s policy .switchboard",
                write("policy", "agent-policy.toml")
            ),
            ".switchboard",
        ),
        ("printf x > .switchboard".to_owned(), ".switchboard"),
        (submodule, ".switchboard"),
    ];
    for (layout, named) in cases {
        let project = laid_out(&layout);
        let model = Model::serve(vec![shell(&format!("cat {SECRET}"))]).await;
        let sb = Switchboard::new(&model, PERMISSIVE);
        sb.add(&project);
        let out = tokio::task::spawn_blocking(move || sb.run(&["repo", "test", "acme/web"]))
            .await
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{layout}: {said}");
        assert!(said.contains(named), "{layout}: {said}");
        assert!(said.contains("agent-policy.toml"), "{layout}: {said}");
        assert_eq!(model.seen(), "", "{layout}: the model was asked");
    }
}

/// The policy at its exact place, beside files of other names in `.switchboard/`: read, and
/// the run starts under it.
#[tokio::test(flavor = "multi_thread")]
async fn the_policy_at_its_place_is_read_beside_other_files() {
    let project = laid_out(&format!(
        "mkdir -p .switchboard && printf 'deny_read = [\"{SECRET}\"]\\n' > .switchboard/agent-policy.toml && echo notes > .switchboard/README.md"
    ));
    let (_, _, seen) = attack(
        &project,
        PERMISSIVE,
        vec![(
            "read_file",
            json!({"path": format!("{{workspace}}/{SECRET}")}),
        )],
    )
    .await;
    assert!(seen.contains("is denied by this project"), "{seen}");
}
