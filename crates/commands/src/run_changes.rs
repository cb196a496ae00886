//! What a run changed in its repo, as `runs diff` shows it, and the port that reads it
//! ([`RunChangesReader`], which `dispatch` implements from the repo's own repository).
//!
//! Invariants each implementation keeps: the changes are read between the two commits the
//! server recorded when the run ended (the run's start and its last kept commit), never
//! through a ref anyone may move; with no rename or copy detection (a new file is never paired
//! with another, hidden one, whose name or lines would then be shown); with no program a
//! repository's config or attributes name (no external diff, no text conversion); every path,
//! line and commit message cleaned like any agent text; and bounded: at most
//! [`MAX_DIFF_LINES`] lines of diff and [`MAX_DIFF_BYTES`] bytes read, no more than
//! [`MAX_DIFF_INPUT_BYTES`] of files compared (a file past [`MAX_DIFF_FILE_BYTES`] compared as
//! binary), a line cut at [`MAX_DIFF_LINE_CHARS`], a binary file shown as such, never its
//! bytes; a path holding what would not print as itself (a control or format character, a
//! quote, a backslash) shown quoted and escaped, as the run wrote it.
//! No commit id is shown (see [`KeptCommit`]).

use authz_core::{BoxFuture, RepoSlug};
use serde_json::{Value, json};
use store::RunRecord;

/// The lines of diff `runs diff` shows unless `--limit` says otherwise.
pub const DEFAULT_DIFF_LINES: usize = 200;
/// The most lines of diff one answer carries, whatever `--limit` says.
pub const MAX_DIFF_LINES: usize = 20_000;
/// The most bytes of diff read for one answer.
pub const MAX_DIFF_BYTES: usize = 8 * 1024 * 1024;
/// The most files one answer lists (their counts; the lines go first to the first files).
pub const MAX_DIFF_FILES: usize = 5_000;
/// The most bytes of files (before and after) a diff reads to count and show lines: past it,
/// the files are listed without them.
pub const MAX_DIFF_INPUT_BYTES: u64 = 8 * 1024 * 1024;
/// A file larger than this is compared as binary (its lines are never read).
pub const MAX_DIFF_FILE_BYTES: u64 = 1024 * 1024;
/// The most characters of one diff line shown (the rest is cut, and the file marked so).
pub const MAX_DIFF_LINE_CHARS: usize = 1_000;

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    /// A file became a link, or a link a file.
    TypeChanged,
}

impl FileStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Added => "added",
            FileStatus::Modified => "modified",
            FileStatus::Deleted => "deleted",
            FileStatus::TypeChanged => "type_changed",
        }
    }

    /// One letter, as `git status --short` shows it.
    pub fn letter(self) -> char {
        match self {
            FileStatus::Added => 'A',
            FileStatus::Modified => 'M',
            FileStatus::Deleted => 'D',
            FileStatus::TypeChanged => 'T',
        }
    }
}

/// One hunk: its `@@ … @@` header and its lines, each with its ` `, `+`, `-` or `\` mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub header: String,
    pub lines: Vec<String>,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub status: FileStatus,
    /// Lines added and removed (0 for a binary file).
    pub added: u64,
    pub removed: u64,
    pub binary: bool,
    /// The hunks shown (fewer than the file has when `cut`).
    pub hunks: Vec<Hunk>,
    /// Some of its lines are not shown (past the limit or the cap).
    pub cut: bool,
}

/// A kept commit: its message (agent text, cleaned). Never its id: a kept commit's id hashes
/// the base's whole tree, hidden files included, so with the rest of the tree known it would
/// confirm a guess of a hidden file's bytes. The same holds for the base commit's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptCommit {
    pub message: String,
}

/// What a run changed: its kept commits against its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunChanges {
    pub repo: RepoSlug,
    /// `switchboard/<run id>` when a commit was kept (the branch was made then).
    pub branch: Option<String>,
    /// Oldest first.
    pub commits: Vec<KeptCommit>,
    /// In path order; the first [`MAX_DIFF_FILES`].
    pub files: Vec<FileChange>,
    /// How many files changed, listed or not.
    pub files_total: usize,
    /// Lines added and removed over every file, listed or not (0 when `unread`).
    pub added: u64,
    pub removed: u64,
    /// The first names of the changes the run made that were not kept (cleaned).
    pub not_kept: Vec<String>,
    pub not_kept_count: u64,
    /// Lines of diff shown, and whether some were left out.
    pub lines_shown: usize,
    pub cut: bool,
    /// The files changed weigh more than a diff reads ([`MAX_DIFF_INPUT_BYTES`]): they are
    /// listed, without counts or lines.
    pub unread: bool,
}

impl RunChanges {
    /// `runs diff --json`'s `files`, `stats`, `commits` and `not_kept`.
    pub fn json(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| {
                json!({
                    "path": f.path,
                    "status": f.status.as_str(),
                    "added": f.added,
                    "removed": f.removed,
                    "binary": f.binary,
                    "cut": f.cut,
                    "hunks": f.hunks.iter().map(|h| json!({"header": h.header, "lines": h.lines})).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "repo": self.repo.as_str(),
            "branch": self.branch,
            "commits": self.commits.iter().map(|c| json!({"message": c.message})).collect::<Vec<_>>(),
            "stats": {
                "files": self.files_total,
                "added": (!self.unread).then_some(self.added),
                "removed": (!self.unread).then_some(self.removed),
                "lines_shown": self.lines_shown,
                "cut": self.cut,
                "unread": self.unread,
            },
            "files": files,
            "not_kept": {"names": self.not_kept, "count": self.not_kept_count},
        })
    }
}

/// Why a run's changes cannot be shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangesError {
    #[error("the run is still going; what it changed is kept, and shown here, when it ends")]
    Live,
    /// The run ended in a repo and nothing of keeping was recorded (keeping failed, or the run
    /// ended before its workspace was made).
    #[error(
        "nothing the run changed was kept; its events say why (`runs events <id>`, kind branch)"
    )]
    NotKept,
    /// The kept commits are no longer in the repo's repository (its branch was deleted and
    /// collected, or the repo now points elsewhere).
    #[error(
        "the run's kept commits are not in repo {0}'s repository here (its branch was deleted, the repo was set to another source, or this server has no mirror of it)"
    )]
    Gone(RepoSlug),
    /// A fault reading them: the detail is for the operator's log only.
    #[error("the run's changes could not be read; the operator's log has the details")]
    Failed { detail: String },
}

/// Reads a run's kept changes.
pub trait RunChangesReader: Send + Sync {
    /// The changes of `run` (in a repo: `run.repo` is set), at most `lines` lines of diff
    /// (never more than [`MAX_DIFF_LINES`]).
    fn changes<'a>(
        &'a self,
        run: &'a RunRecord,
        lines: usize,
    ) -> BoxFuture<'a, Result<RunChanges, ChangesError>>;
}
