//! Making a run's workspace, `<data_dir>/runs/<run id>/work`, before its agent starts.
//!
//! In a repo, the working tree is the base commit's files with each denied file's bytes left
//! out (its stub is what is on disk, and git is told not to look at it: skip-worktree), and
//! `work/.git` is a repository of the run's own holding the base commit and its trees, and
//! every blob but the denied ones: no object store in the run's reach can produce a denied
//! file's bytes. It is marked a partial clone of nowhere, so git treats the missing blobs as
//! promised (committing works) and can never fetch them. Its config is Switchboard's, and the
//! sandbox keeps it read-only. The run's branch `switchboard/<run id>` starts at the base.

use std::path::{Path, PathBuf};

use agents::Workspace;
use agents::sandbox::{POLICY_DIR, STUB_TEXT};
use authz_core::RunId;

use super::WorkspaceError;
use super::base::Base;
use super::git::Git;

/// The name git is told the run's missing blobs are promised by; it names no reachable place.
const PROMISOR: &str = "switchboard-denied";

/// The branch a run's changes are kept on.
pub(crate) fn branch(run: &RunId) -> String {
    commands::run_branch(run)
}

/// A run's directory and what lives in it.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
}

impl RunDir {
    pub fn new(data_dir: &Path, run: &RunId) -> RunDir {
        RunDir {
            root: runs_dir(data_dir).join(run.as_str()),
        }
    }

    /// The working tree (and its `.git`).
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    /// Where the run's changes are gathered when it ends.
    pub fn keep(&self) -> PathBuf {
        self.root.join("keep.git")
    }
}

/// Where every run's directory lives.
pub(crate) fn runs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("runs")
}

/// A run without a repo: an empty directory of its own (with an empty, read-only-in-the-
/// sandbox `.switchboard/`).
pub(crate) async fn scratch(dir: &RunDir) -> Result<Workspace, WorkspaceError> {
    let work = dir.work();
    tokio::fs::create_dir_all(work.join(POLICY_DIR))
        .await
        .map_err(|e| WorkspaceError::Make(format!("{}: {e}", work.display())))?;
    Ok(Workspace {
        dir: work,
        repository: false,
        deny_read: Vec::new(),
    })
}

/// A run in a repo: its working tree and repository, made from `base`.
pub(crate) async fn repo(
    base: &Base,
    run: &RunId,
    dir: &RunDir,
) -> Result<Workspace, WorkspaceError> {
    let fail = |e: super::git::GitError| WorkspaceError::Make(e.to_string());
    let io =
        |path: &Path, e: std::io::Error| WorkspaceError::Make(format!("{}: {e}", path.display()));
    let work = dir.work();
    let git_dir = work.join(".git");
    tokio::fs::create_dir_all(&work)
        .await
        .map_err(|e| io(&work, e))?;
    Git::init(&work, &base.object_format, false)
        .await
        .map_err(fail)?;
    tokio::fs::write(git_dir.join("config"), config(run, &base.object_format))
        .await
        .map_err(|e| io(&git_dir, e))?;
    let run_git = Git::at(&git_dir);
    let denied: Vec<&str> = base
        .denied_entries
        .iter()
        .map(|e| e.path.as_str())
        .collect();
    // The objects the run's repository holds: the commit, every tree, every blob but the
    // denied ones (a submodule's commit is not an object of this repository).
    let mut list = format!("{}\n{}\n", base.commit, base.root_tree);
    for entry in &base.tree {
        let is_denied = entry.kind == "blob" && denied.contains(&entry.path.as_str());
        if (entry.kind == "blob" || entry.kind == "tree") && !is_denied {
            list.push_str(&entry.oid);
            list.push('\n');
        }
    }
    let base_git = base.git();
    let copy = base_git.pipe(
        &["pack-objects", "--stdout", "-q"],
        list.into_bytes(),
        &run_git,
        &["index-pack", "--stdin"],
    );
    // The files come straight from the base's objects (with Switchboard's config, so no
    // filter or hook of the base's runs), while the pack is copied.
    let checkout = Git::at(&git_dir)
        .objects(&base.objects)
        .work_tree(&work)
        .index(&git_dir.join("index"));
    let files = async {
        checkout.run(["read-tree", &base.commit]).await?;
        if !denied.is_empty() {
            let mut args = vec!["update-index", "--skip-worktree", "--"];
            args.extend(denied.iter().copied());
            checkout.run(args).await?;
        }
        // Writing files waits on the disk more than the CPU: parallel workers (git's own
        // `checkout--worker`) hide that wait.
        checkout
            .run([
                "-c",
                "checkout.workers=16",
                "checkout-index",
                "-a",
                "-u",
                "-q",
            ])
            .await
    };
    let (copied, checked_out) = tokio::join!(copy, files);
    let pack = copied.map_err(fail)?;
    checked_out.map_err(fail)?;
    // The pack's objects are promised to have company that is not here: git may refer to
    // the missing blobs (a commit keeps their entries) and never fetches them.
    let pack = String::from_utf8_lossy(&pack);
    let name = pack
        .split_whitespace()
        .last()
        .ok_or_else(|| WorkspaceError::Make("index-pack named no pack".to_owned()))?;
    let promisor = git_dir.join(format!("objects/pack/pack-{name}.promisor"));
    tokio::fs::write(&promisor, b"")
        .await
        .map_err(|e| io(&promisor, e))?;
    tokio::fs::write(git_dir.join("shallow"), format!("{}\n", base.commit))
        .await
        .map_err(|e| io(&git_dir, e))?;
    let branch_ref = format!("refs/heads/{}", branch(run));
    run_git
        .run(["update-ref", &branch_ref, &base.commit])
        .await
        .map_err(fail)?;
    run_git
        .run(["symbolic-ref", "HEAD", &branch_ref])
        .await
        .map_err(fail)?;
    stubs(&work, &git_dir, &base.policy.deny_read).await?;
    tokio::fs::create_dir_all(work.join(POLICY_DIR))
        .await
        .map_err(|e| io(&work, e))?;
    Ok(Workspace {
        dir: work,
        repository: true,
        deny_read: base.policy.deny_read.clone(),
    })
}

/// Each denied name holds the stub (a name the base does not have too: a file made later is
/// covered as well), and git is told to leave those names alone.
async fn stubs(work: &Path, git_dir: &Path, deny_read: &[String]) -> Result<(), WorkspaceError> {
    let io =
        |path: &Path, e: std::io::Error| WorkspaceError::Make(format!("{}: {e}", path.display()));
    let mut exclude = String::new();
    for name in deny_read {
        let path = work.join(name);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io(parent, e))?;
        }
        tokio::fs::write(&path, STUB_TEXT)
            .await
            .map_err(|e| io(&path, e))?;
        exclude.push('/');
        exclude.push_str(name);
        exclude.push('\n');
    }
    let info = git_dir.join("info");
    tokio::fs::create_dir_all(&info)
        .await
        .map_err(|e| io(&info, e))?;
    tokio::fs::write(info.join("exclude"), exclude)
        .await
        .map_err(|e| io(&info, e))
}

/// The run's repository config: Switchboard's, naming no program (no hooks, no monitor, no
/// pager, no editor, no signing), no remote that can be reached, and the run as its author.
fn config(run: &RunId, object_format: &str) -> String {
    let format_line = if object_format == "sha1" {
        String::new()
    } else {
        format!("\tobjectFormat = {object_format}\n")
    };
    format!(
        "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n\
         \thooksPath = /dev/null\n\tfsmonitor = false\n\tpager = cat\n\teditor = false\n\
         [extensions]\n\tpartialClone = {PROMISOR}\n{format_line}\
         [remote \"{PROMISOR}\"]\n\turl = {PROMISOR}:nowhere\n\tpromisor = true\n\
         [protocol]\n\tallow = never\n\
         [credential]\n\thelper =\n\
         [gc]\n\tauto = 0\n\
         [maintenance]\n\tauto = false\n\
         [commit]\n\tgpgSign = false\n\
         [tag]\n\tgpgSign = false\n\
         [advice]\n\tdetachedHead = false\n\
         [user]\n\tname = Switchboard run {run}\n\temail = run-{run}@switchboard.invalid\n"
    )
}
