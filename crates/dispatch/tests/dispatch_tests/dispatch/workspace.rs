//! Repo runs: a workspace of their own made from the base, and the repos refused.

use super::*;

async fn add_repo(w: &World, slug: &str, source: store::repos::RepoSource) {
    store::repos::set(
        w.store.as_ref(),
        &slug.parse().unwrap(),
        &source,
        &ActorId::cli_local(),
        store::wall_clock(),
    )
    .await
    .unwrap();
}

/// `git` in `dir` as a test's author.
fn git_in(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with one commit.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git_in(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("README"), "hi").unwrap();
    git_in(dir.path(), &["add", "README"]);
    git_in(dir.path(), &["commit", "-qm", "init"]);
    dir
}

#[tokio::test]
async fn repo_runs_work_in_a_copy_of_their_own_made_from_the_base() {
    let w = world().await;
    let data = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.settings.data_dir = data.path().to_path_buf();
    let d = dispatcher(&w, &o);
    let local = repository();
    let local_path = std::fs::canonicalize(local.path()).unwrap();
    add_repo(
        &w,
        "acme/web",
        store::repos::RepoSource::Path(local_path.display().to_string()),
    )
    .await;
    let slug = RepoSlug::parse("acme/web").unwrap();
    // The admission is asked again here: without repo:exec or agent:run:coding, nothing starts.
    let e = d
        .start_repo(
            request(&w, "http:viewer", "http:ops", ""),
            slug.clone(),
            RepoTask::Test,
        )
        .await
        .err()
        .unwrap();
    assert!(matches!(e, LaunchError::Refused(_)), "{e}");
    assert!(all_runs(&w).await.is_empty());
    let req = request(&w, "http:coder", "http:ops", "");
    let s = d
        .start_repo(req.clone(), slug.clone(), RepoTask::Test)
        .await
        .unwrap();
    let run = record(&w, s.id()).await;
    assert_eq!(run.repo.as_ref(), Some(&slug));
    assert!(run.request.starts_with("Run the test suite of acme/web"));
    let id = s.id().clone();
    let r = s.finished().await.unwrap();
    let own = std::fs::canonicalize(data.path())
        .unwrap()
        .join(format!("runs/{id}/work"));
    assert_eq!(
        r.answer(),
        Some(own.to_str().unwrap()),
        "ran in a workspace of its own"
    );
    assert!(!own.exists(), "the workspace is removed when the run ends");
    // It changed nothing: no branch was made in the user's repository, and what keeping left
    // says so, from the base commit.
    let head = git_in(&local_path, &["rev-parse", "HEAD"]);
    assert_eq!(
        git_in(&local_path, &["branch", "--list", "switchboard/*"]),
        ""
    );
    let kept = w.store.kept(&id).await.unwrap().unwrap();
    assert_eq!(
        (kept.start.as_str(), kept.tip, kept.commits),
        (head.as_str(), None, 0)
    );

    // A URL: mirrored into the data directory; each run gets its own copy too.
    let origin = repository();
    add_repo(
        &w,
        "acme/api",
        store::repos::RepoSource::Url(format!("file://{}", origin.path().display())),
    )
    .await;
    let api = RepoSlug::parse("acme/api").unwrap();
    let s = d
        .start_repo(req.clone(), api.clone(), RepoTask::Build)
        .await
        .unwrap();
    let id = s.id().clone();
    let r = s.finished().await.unwrap();
    let mirror = data.path().join("repos/acme/api.git");
    assert!(mirror.join("switchboard-fetched").is_file());
    assert!(r.answer().unwrap().ends_with(&format!("runs/{id}/work")));

    let ghost = RepoSlug::parse("acme/ghost").unwrap();
    let e = d
        .start_repo(req.clone(), ghost, RepoTask::Test)
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("repo acme/ghost is not configured"),
        "{e}"
    );
    // A path that is not a git repository is refused for runs, saying why.
    let plain = tempfile::tempdir().unwrap();
    add_repo(
        &w,
        "acme/plain",
        store::repos::RepoSource::Path(plain.path().display().to_string()),
    )
    .await;
    let e = d
        .start_repo(req, RepoSlug::parse("acme/plain").unwrap(), RepoTask::Test)
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("is not the top of a git repository"),
        "{e}"
    );
}

/// Keeping makes a run's branch only where no ref of its name is: a branch someone else made
/// under that name is never moved, and keeping says it kept nothing. Without one, the branch
/// is made at the kept commit.
#[tokio::test]
async fn keeping_never_moves_a_branch_it_did_not_make() {
    use dispatch::workspace::{Fetching, MirrorLocks, RunDir, keep, make, remove, resolve};
    let w = world().await;
    let local = repository();
    let source = store::repos::RepoSource::Path(local.path().display().to_string());
    add_repo(&w, "acme/web", source).await;
    let slug = RepoSlug::parse("acme/web").unwrap();
    let head = git_in(local.path(), &["rev-parse", "HEAD"]);
    let data = tempfile::tempdir().unwrap();
    let fetching = Fetching {
        interval: std::time::Duration::from_secs(60),
    };
    for taken in [true, false] {
        let run = authz_core::RunId::parse(&store::new_id(store::wall_clock())).unwrap();
        let branch = format!("switchboard/{run}");
        if taken {
            git_in(local.path(), &["branch", &branch, &head]);
        }
        let locks = MirrorLocks::default();
        let base = resolve(w.store.as_ref(), data.path(), &locks, fetching, &slug)
            .await
            .unwrap();
        let dir = RunDir::new(data.path(), &run);
        let workspace = make(Some(&base), &run, &dir).await.unwrap();
        std::fs::write(workspace.dir.join("notes.txt"), "kept?\n").unwrap();
        let kept = keep(&base, &run, &dir).await;
        remove(&dir).await;
        let at = git_in(local.path(), &["rev-parse", &branch]);
        if taken {
            assert!(kept.is_err(), "{kept:?}");
            assert_eq!(at, head, "a branch it did not make was moved");
        } else {
            let kept = kept.unwrap();
            assert_eq!((kept.commits, kept.tip.as_deref()), (1, Some(at.as_str())));
            assert_eq!(
                git_in(local.path(), &["show", &format!("{branch}:notes.txt")]),
                "kept?"
            );
        }
    }
}
