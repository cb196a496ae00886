//! Repos: `repo:exec`, a restricted repo, and the repo a request names or its channel's default.

use super::*;

impl Server {
    /// Repos configured with a local directory each, as `repo add --path` would.
    async fn add_repos(&self, repos: &[&str]) {
        for repo in repos {
            let local = self.workspace.path().join(repo.replace('/', "-"));
            std::fs::create_dir_all(&local).unwrap();
            // A git repository with one commit: a run starts from its HEAD.
            agents::testing::init_repository(&local).unwrap();
            store::repos::set(
                self.store.as_ref(),
                &repo.parse().unwrap(),
                &store::repos::RepoSource::Path(local.display().to_string()),
                &authz_core::ActorId::cli_local(),
                store::wall_clock(),
            )
            .await
            .unwrap();
        }
    }
}

#[tokio::test]
async fn repo_exec_alone_runs_the_coding_agent_in_the_repo() {
    let s = start(Some(token_map()), 64 * 1024).await;
    s.add_repos(&["acme/web", "acme/secret"]).await;
    let a = s.say(token("builder"), "repo test acme/web").await;
    assert_eq!(a.status, 200, "{}", a.body);
    let id = a.json()["run_id"].as_str().unwrap().to_owned();
    let run = s
        .store
        .get_run(&id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.agent, "coding");
    assert_eq!(run.repo.as_ref().map(|r| r.as_str()), Some("acme/web"));
    assert_eq!(run.channel_id.as_str(), "http:builds");
    // The requester is told where to watch, as for any run it starts.
    let link = a.json()["link"].as_str().unwrap_or_default().to_owned();
    assert!(
        link.starts_with(&format!("https://sb.example.com/runs/{id}?token=sbm_")),
        "{}",
        a.body
    );
    // Without repo:exec (nor agent:run:coding): refused before anything starts.
    assert_eq!(s.say(token("ci"), "repo test acme/web").await.status, 403);
}

/// Fault 5: `repo test|build` of a restricted repo is refused to a token whose repos axis does
/// not name it, though `repo:exec` admitted the command: 🚫, one audit line for `repo:use`,
/// nothing recorded. A token that owns the repo runs it.
#[tokio::test]
async fn a_restricted_repo_is_refused_to_a_token_that_does_not_own_it() {
    let s = start(Some(token_map()), 64 * 1024).await;
    s.add_repos(&["acme/web", "acme/secret"]).await;
    for verb in ["test", "build"] {
        let refused = s
            .post_typed(
                token("builder"),
                "text/plain",
                &format!("repo {verb} acme/secret"),
            )
            .await;
        assert_eq!(
            (refused.status, refused.body.as_str()),
            (
                403,
                format!("🚫 You don't have permission to use `repo {verb}`.\n").as_str()
            )
        );
    }
    let lines = s.audit.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for l in &lines {
        assert_eq!(
            l.to_string(),
            "[authz] deny actor=http:builder action=repo:use resource=repo reason=not-owner subject=acme/secret surface=http (repos do not include acme/secret)"
        );
    }
    assert!(
        s.listed(token("fleet")).await.is_empty(),
        "nothing was recorded"
    );
    let allowed = s
        .say(token("secret-builder"), "repo test acme/secret")
        .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert_eq!(s.listed(token("fleet")).await.len(), 1);
}

/// A request names its repo in its text (`in <owner/name>: …`), or the channel's
/// `repo.default` names it; a repo the token may not use reads exactly as one that is not
/// configured, and its refusal is audited.
#[tokio::test]
async fn a_request_names_its_repo_in_its_text_or_by_its_channels_default() {
    let s = start(Some(token_map()), 64 * 1024).await;
    s.add_repos(&["acme/web", "acme/secret"]).await;
    let run_of = |body: &str| {
        let reply: serde_json::Value = serde_json::from_str(body).unwrap();
        reply["run_id"]
            .as_str()
            .unwrap()
            .parse::<authz_core::RunId>()
            .unwrap()
    };
    let started = s
        .say(token("opsbot"), "in acme/web: fix the flaky test")
        .await;
    assert_eq!(started.status, 202, "{}", started.body);
    let run = s
        .store
        .get_run(&run_of(&started.body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.repo.unwrap().as_str(), "acme/web");
    assert_eq!(run.request, "fix the flaky test");
    let secret = s.say(token("opsbot"), "in acme/secret: read it").await;
    let ghost = s.say(token("opsbot"), "in acme/ghost: read it").await;
    assert_eq!(secret.status, ghost.status);
    assert_eq!(secret.body.replace("secret", "ghost"), ghost.body);
    assert!(
        ghost.body.contains("repo acme/ghost is not configured"),
        "{}",
        ghost.body
    );
    assert!(
        s.audit
            .lines()
            .iter()
            .any(|l| l.to_string().contains("action=repo:use")
                && l.to_string().contains("actor=http:opsbot")),
        "{:?}",
        s.audit.lines()
    );
    // The channel's default repo, set by the local operator.
    store::ConfigStore::set_config(
        s.store.as_ref(),
        store::ConfigValue {
            tier: authz_core::ConfigTier::Channel("http:ops".parse().unwrap()),
            key: "repo.default".into(),
            value: "acme/web".into(),
            updated_by: authz_core::ActorId::cli_local(),
            updated_at: store::wall_clock(),
        },
    )
    .await
    .unwrap();
    let defaulted = s.say(token("opsbot"), "hello").await;
    assert_eq!(defaulted.status, 202, "{}", defaulted.body);
    let run = s
        .store
        .get_run(&run_of(&defaulted.body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.repo.unwrap().as_str(), "acme/web");
}
