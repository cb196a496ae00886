//! Making a run's workspace, `<data_dir>/runs/<run id>/work`, before its agent starts.
//!
//! In a repo, the working tree is the base commit's files with each denied file's bytes left
//! out (its stub is what is on disk, and git is told not to look at it: skip-worktree), and
//! `work/.git` is a repository of the run's own. When the base has no denied file, it holds
//! the base commit, its trees and its blobs. When it has one, the run starts from a commit
//! of its own instead, the **start**: the base's tree with the stub's blob at each denied
//! name, and no parent. Neither the denied blobs nor any tree or commit naming them (the
//! base's root tree, the trees above a denied file, the base commit) is in the run's
//! repository, so no listing in the run's reach (`ls-tree`, `ls-files -s`, `log --raw`)
//! shows a denied file's blob id, which would let a short secret be guessed and checked
//! against it, and no object store in its reach can produce a denied file's bytes. It is
//! marked a partial clone of nowhere, so git never fetches. Its config is Switchboard's, and
//! the sandbox keeps it read-only. The run's branch `switchboard/<run id>` starts at the
//! start; keeping rebuilds the run's commits on the base commit itself. The start's id, and
//! what the run was given (every object's name, kind and size, and the start's trees and
//! commit), are written in the run's directory, outside the sandbox ([`RunDir::start`],
//! [`RunDir::given_listing`], [`RunDir::given_git`]).

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

    /// The data directory it is in (`<data_dir>/runs/<run id>`).
    pub fn data_dir(&self) -> Option<&Path> {
        self.root.parent().and_then(Path::parent)
    }

    /// The working tree (and its `.git`).
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    /// Where the run's object files are gathered when it ends (linked, as the run left them).
    pub fn gather(&self) -> PathBuf {
        self.root.join("gather.git")
    }

    /// Where the objects the run wrote are hashed again when it ends, and its changes read.
    pub fn keep(&self) -> PathBuf {
        self.root.join("keep.git")
    }

    /// The listing of every object the run's repository held when it was made (Switchboard
    /// writes it before the run starts; the run cannot reach it).
    pub fn given_listing(&self) -> PathBuf {
        self.root.join("given")
    }

    /// The trees, commits, links' blobs and stub the run's repository held when it was made.
    pub fn given_git(&self) -> PathBuf {
        self.root.join("given.git")
    }

    /// Host paths no bind of an agent's config may reach during this run: the data directory
    /// (every run's workspace, the mirrors, a SQLite store beside them) and the repository
    /// the base is read from (a `--path` repo's checkout holds the denied files' bytes).
    pub fn private(&self, base: Option<&Base>) -> Vec<PathBuf> {
        let mut private: Vec<PathBuf> = self
            .root
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .into_iter()
            .collect();
        if let Some(base) = base {
            private.push(base.git_dir.clone());
            private.push(base.objects.clone());
            if base.git_dir.file_name().is_some_and(|n| n == ".git")
                && let Some(checkout) = base.git_dir.parent()
            {
                private.push(checkout.to_path_buf());
            }
        }
        private
    }

    /// The file naming the commit the run started from and its tree (Switchboard writes it;
    /// the run cannot reach it).
    pub fn start(&self) -> PathBuf {
        self.root.join("start")
    }
}

/// The commit a run in a repo started from, and its tree: the base commit itself, or the
/// base with its denied files' blobs replaced by the stub's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub commit: String,
    pub tree: String,
}

impl Start {
    /// Reads what [`repo`] wrote; anything else is a fault (the file is Switchboard's).
    pub(crate) fn read(dir: &RunDir, base: &Base) -> Result<Start, WorkspaceError> {
        let path = dir.start();
        let fault = |why: &str| WorkspaceError::KeepFault(format!("{}: {why}", path.display()));
        let text = std::fs::read_to_string(&path).map_err(|e| fault(&e.to_string()))?;
        match text.split_whitespace().collect::<Vec<_>>().as_slice() {
            [commit, tree] if base.is_object_id(commit) && base.is_object_id(tree) => Ok(Start {
                commit: (*commit).to_owned(),
                tree: (*tree).to_owned(),
            }),
            _ => Err(fault("expected a commit id and a tree id")),
        }
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
        protected: Vec::new(),
        private: dir.private(None),
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
    let naming = naming_denied(base);
    // The objects the run's repository holds: every tree and blob but the denied blobs and
    // the trees above them, and the base commit only when nothing is denied (a submodule's
    // commit is not an object of this repository).
    let mut list = if denied.is_empty() {
        format!("{}\n{}\n", base.commit, base.root_tree)
    } else {
        String::new()
    };
    for entry in &base.tree {
        let held = match entry.kind.as_str() {
            "blob" => !denied.contains(&entry.path.as_str()),
            "tree" => !naming.contains(entry.path.as_str()),
            _ => false,
        };
        if held {
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
            // The index names the stub's blob at each denied name, never the file's own.
            let stub = checkout
                .input(["hash-object", "--stdin"], STUB_TEXT.as_bytes().to_vec())
                .await?;
            let stub = String::from_utf8_lossy(&stub).trim().to_owned();
            let info: String = base
                .denied_entries
                .iter()
                .map(|e| format!("{} {stub}\t{}\0", e.mode, e.path))
                .collect();
            checkout
                .input(["update-index", "-z", "--index-info"], info.into_bytes())
                .await?;
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
    let start = if denied.is_empty() {
        tokio::fs::write(git_dir.join("shallow"), format!("{}\n", base.commit))
            .await
            .map_err(|e| io(&git_dir, e))?;
        Start {
            commit: base.commit.clone(),
            tree: base.root_tree.clone(),
        }
    } else {
        start_commit(&run_git, &git_dir, base).await.map_err(fail)?
    };
    tokio::fs::write(dir.start(), format!("{} {}\n", start.commit, start.tree))
        .await
        .map_err(|e| io(&dir.start(), e))?;
    // What the run is given, recorded before it starts: keeping reads its start from this.
    super::given::record(
        &run_git,
        &base.object_format,
        &base.tree,
        &dir.given_listing(),
        &dir.given_git(),
    )
    .await
    .map_err(fail)?;
    let branch_ref = format!("refs/heads/{}", branch(run));
    run_git
        .run(["update-ref", &branch_ref, &start.commit])
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
        protected: base.protected.clone(),
        private: dir.private(Some(base)),
    })
}

/// The paths of the base's trees that hold a denied file, however deep: the directories
/// above each denied name, and the root (as "").
pub(super) fn naming_denied(base: &Base) -> std::collections::HashSet<&str> {
    let mut naming = std::collections::HashSet::new();
    if base.denied_entries.is_empty() {
        return naming;
    }
    naming.insert("");
    for entry in &base.denied_entries {
        let mut at = entry.path.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            naming.insert(parent);
            at = parent;
        }
    }
    naming
}

/// The run's start when the base has denied files: the stub's blob written into the run's
/// repository, the tree of the run's index (which names the stub at each denied name)
/// written there, and a commit of it with no parent, authored and worded as the base commit
/// was, with a trailer saying what it is.
async fn start_commit(
    run_git: &Git,
    git_dir: &Path,
    base: &Base,
) -> Result<Start, super::git::GitError> {
    run_git
        .input(
            ["hash-object", "-w", "--stdin"],
            STUB_TEXT.as_bytes().to_vec(),
        )
        .await?;
    let tree = run_git
        .clone()
        .index(&git_dir.join("index"))
        .text(["write-tree"])
        .await?;
    // The base's own author and message, so the run reads its history as the team wrote it,
    // and a trailer saying what this commit is.
    let raw = base
        .git()
        .run([
            "log",
            "-1",
            "--format=%an%x00%ae%x00%aI%x00%B",
            &base.commit,
        ])
        .await?;
    let text = String::from_utf8_lossy(&raw);
    let mut fields = text.splitn(4, '\0');
    let mut field = || fields.next().unwrap_or_default().to_owned();
    let (name, email, date, body) = (field(), field(), field(), field());
    // Never the base commit's id: it hashes the base's root tree, so with the rest of the
    // commit known it would check guesses of a denied file as the blob's id would.
    let message = format!(
        "{}\n\nSwitchboard: the base of this run, with each file deny_read names holding a stub; their contents, their ids and the history before this commit are not in this repository\n",
        body.trim_end(),
    );
    let mut commit = run_git
        .clone()
        .with_env("GIT_AUTHOR_NAME", name)
        .with_env("GIT_AUTHOR_EMAIL", email)
        .with_env("GIT_COMMITTER_NAME", "Switchboard".to_owned())
        .with_env(
            "GIT_COMMITTER_EMAIL",
            "switchboard@switchboard.invalid".to_owned(),
        );
    if !date.is_empty() {
        commit = commit.with_env("GIT_AUTHOR_DATE", date);
    }
    let commit = commit
        .input(["commit-tree", &tree], message.into_bytes())
        .await?;
    Ok(Start {
        commit: String::from_utf8_lossy(&commit).trim().to_owned(),
        tree,
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
