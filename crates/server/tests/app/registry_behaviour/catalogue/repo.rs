//! `repo list|add|remove|test|build`.

use super::*;

on_both!(repos_and_their_restriction);

async fn repos_and_their_restriction(w: World) {
    let repo_writer = w.caller("slack:UREPO");
    assert_eq!(
        w.say(
            &repo_writer,
            "repo add acme/web --url https://git.example/acme/web.git"
        )
        .await
        .kind,
        ReplyKind::Ok
    );
    assert_eq!(
        w.say(&repo_writer, "repo add Acme/Payments --path /srv/payments")
            .await
            .kind,
        ReplyKind::Ok
    );
    let listed = w.say(&w.caller("slack:UPLAIN"), "repo list").await;
    assert!(
        listed.text.contains("✓ acme/web") && listed.text.contains("acme/payments"),
        "{}",
        listed.text
    );
    refused(&w, &w.caller("slack:UPLAIN"), "repo add acme/x").await;
    assert_eq!(
        w.say(&repo_writer, "repo add not-a-slug").await.kind,
        ReplyKind::Usage
    );
    assert_eq!(
        w.say(&repo_writer, "repo add acme/x --path a --url b")
            .await
            .kind,
        ReplyKind::Usage
    );
    // repo test: admitted on the coding agent (restricted here: only the admin may run it),
    // which then runs in the repo's workspace, recorded in the channel asked from.
    let workspace = agents::testing::git_repository().unwrap();
    let add = format!("repo add acme/tools --path {}", workspace.path().display());
    assert_eq!(w.say(&repo_writer, &add).await.kind, ReplyKind::Ok);
    refused(&w, &w.caller("slack:UPLAIN"), "repo test acme/tools").await;
    let admin = w.in_channel("slack:UADMIN", "slack:C1");
    let started = w.say(&admin, "repo test acme/tools").await;
    assert_eq!(started.kind, ReplyKind::Ok, "{}", started.text);
    assert!(
        started.text.contains("with agent `coding` in slack:C1"),
        "{}",
        started.text
    );
    let id: authz_core::RunId = started.data["run_id"].as_str().unwrap().parse().unwrap();
    let run = wait_finished(&w, &id).await;
    assert_eq!(run.repo.unwrap().as_str(), "acme/tools");
    assert_eq!(run.status, RunStatus::Completed, "{:?}", run.error);
    let missing = w.say(&admin, "repo build acme/web").await;
    assert_eq!(
        missing.kind,
        ReplyKind::Usage,
        "git cannot reach the URL here: {}",
        missing.text
    );
    assert_eq!(
        w.say(&repo_writer, "repo remove acme/web").await.text,
        "removed repo acme/web"
    );
    assert_eq!(
        w.say(&repo_writer, "repo remove acme/web").await.text,
        "repo acme/web is not configured"
    );
}

/// The run's final record (the dispatcher finishes echo runs at once).
async fn wait_finished(w: &World, id: &authz_core::RunId) -> store::RunRecord {
    for _ in 0..3000 {
        let run = w.store.get_run(id).await.unwrap().unwrap();
        if !run.status.is_live() {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("run {id} did not finish");
}
