//! `runs diff <id>`: what a run in a repo changed, its kept commits against its own start, as
//! a file list with counts, the commits' messages, what was not kept, then the unified diff.
//! Authorized like `runs get` (a denied reader gets the missing-run answer), and for a run in a
//! restricted repo as `repo:use` on it too; read through the
//! [`RunChangesReader`](crate::run_changes::RunChangesReader) port.

use authz_core::{Action, BoxFuture, Resource, Verdict, authorize};
use serde_json::json;
use store::RunRecord;

use super::ok;
use super::runs::load_run;
use crate::run_changes::{ChangesError, DEFAULT_DIFF_LINES, FileChange, FileStatus, RunChanges};
use crate::{Args, Ctx, Registry, Reply, ReplyKind, Services};

pub fn diff<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let run = match load_run(ctx, &args, &ctx.command.action).await {
            Ok(run) => run,
            Err(reply) => return reply,
        };
        // A restricted repo's files are its owners' to read: its runs' diffs too (a reader of
        // the run who may not use the repo gets the missing-run answer).
        if let Some(slug) = &run.repo {
            let resource = ctx.services.table().repo(slug.clone());
            if matches!(
                resource,
                Resource::Repo {
                    restricted: true,
                    ..
                }
            ) {
                let verdict = authorize(&ctx.caller.actor, &Action::RepoUse, &resource);
                if let Verdict::Deny(_) = verdict {
                    return Registry::refuse(ctx, &Action::RepoUse, &resource, &verdict);
                }
            }
        }
        let lines = args
            .int("limit")
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(DEFAULT_DIFF_LINES);
        diff_reply(&run, ctx.services, lines).await
    })
}

/// `runs diff`'s answer for a run the caller may read (or holds the capability of).
pub(crate) async fn diff_reply(run: &RunRecord, services: &Services, lines: usize) -> Reply {
    if run.repo.is_none() {
        return ok(
            format!(
                "run {} worked in no repo: it has no changes to show",
                run.id
            ),
            json!({"run": run.id.as_str(), "repo": null, "files": [], "commits": []}),
        );
    }
    match services.changes.changes(run, lines).await {
        Ok(changes) => {
            let mut data = changes.json();
            if let Some(map) = data.as_object_mut() {
                map.insert("run".to_owned(), json!(run.id.as_str()));
            }
            ok(changes_text(run, &changes), data)
        }
        Err(e) => refused(run, &e),
    }
}

/// Why nothing is shown: the run's state (409), or a fault (its detail on the log only).
fn refused(run: &RunRecord, e: &ChangesError) -> Reply {
    let text = e.to_string().replace("<id>", run.id.as_str());
    match e {
        ChangesError::Failed { .. } => Reply::of(ReplyKind::Failed, text),
        ChangesError::Live | ChangesError::NotKept | ChangesError::Gone(_) => {
            Reply::of(ReplyKind::Conflict, text)
        }
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The text answer: a summary line, the commits, the files, what was not kept, the diff.
fn changes_text(run: &RunRecord, c: &RunChanges) -> String {
    let mut out = match &c.branch {
        Some(branch) => format!(
            "run {} in {}: {} kept on {branch}; {} changed, +{} -{}",
            run.id,
            c.repo,
            plural(c.commits.len() as u64, "commit", "commits"),
            plural(c.files_total as u64, "file", "files"),
            if c.unread {
                "?".to_owned()
            } else {
                c.added.to_string()
            },
            if c.unread {
                "?".to_owned()
            } else {
                c.removed.to_string()
            },
        ),
        None => format!(
            "run {} in {}: no changes were kept (no branch was made)",
            run.id, c.repo
        ),
    };
    if !c.commits.is_empty() {
        out.push_str("\n\ncommits");
        for (n, commit) in c.commits.iter().enumerate() {
            let mut lines = commit.message.lines();
            out.push_str(&format!("\n  {}. {}", n + 1, lines.next().unwrap_or("")));
            for more in lines {
                out.push_str(&format!("\n     {more}"));
            }
        }
    }
    if !c.files.is_empty() {
        out.push_str("\n\nfiles");
        for f in &c.files {
            out.push_str(&format!("\n  {}", file_row(f, c.unread)));
        }
        if c.files.len() < c.files_total {
            out.push_str(&format!(
                "\n  … and {} more files",
                c.files_total - c.files.len()
            ));
        }
    }
    if c.unread {
        out.push_str(&format!(
            "\n\n(the files changed weigh more than the {} MiB a diff reads: listed without their lines)",
            crate::run_changes::MAX_DIFF_INPUT_BYTES >> 20
        ));
    }
    if c.not_kept_count > 0 {
        let more = c.not_kept_count.saturating_sub(c.not_kept.len() as u64);
        out.push_str(&format!(
            "\n\nnot kept ({}; denied, protected, .switchboard/, a submodule or a link out)",
            c.not_kept_count
        ));
        for name in &c.not_kept {
            out.push_str(&format!("\n  {name:?}"));
        }
        if more > 0 {
            out.push_str(&format!("\n  … and {more} more"));
        }
    }
    if !c.unread {
        for f in &c.files {
            out.push_str(&file_diff(f));
        }
    }
    if c.cut {
        out.push_str(&format!(
            "\n\n({} lines of diff shown; more: runs diff {} --limit {})",
            c.lines_shown,
            run.id,
            crate::run_changes::MAX_DIFF_LINES
        ));
    }
    out
}

/// `M  +2 -4  README.md`, or `binary` for a binary file.
fn file_row(f: &FileChange, unread: bool) -> String {
    let counts = if unread {
        "?".to_owned()
    } else if f.binary {
        "binary".to_owned()
    } else {
        format!("+{} -{}", f.added, f.removed)
    };
    format!("{}  {counts:<12} {}", f.status.letter(), shown(&f.path))
}

/// A path as text shows it. The reader quotes a path that would not print as itself; this
/// quotes again any control character left, as a second guard (a newline would start a line
/// that reads as the diff's own, under another file's name).
fn shown(path: &str) -> String {
    if path.chars().any(char::is_control) {
        format!("{path:?}")
    } else {
        path.to_owned()
    }
}

/// One file's unified diff: its `---`/`+++` lines and hunks.
fn file_diff(f: &FileChange) -> String {
    let path = shown(&f.path);
    let (old, new) = match f.status {
        FileStatus::Added => ("/dev/null".to_owned(), format!("b/{path}")),
        FileStatus::Deleted => (format!("a/{path}"), "/dev/null".to_owned()),
        FileStatus::Modified | FileStatus::TypeChanged => {
            (format!("a/{path}"), format!("b/{path}"))
        }
    };
    let mut out = format!("\n\n--- {old}\n+++ {new}");
    if f.binary {
        out.push_str(&format!("\nBinary file {path} changed"));
    }
    for hunk in &f.hunks {
        out.push('\n');
        out.push_str(&hunk.header);
        for line in &hunk.lines {
            out.push('\n');
            out.push_str(line);
        }
    }
    if f.cut {
        out.push_str("\n… (cut)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_changes::Hunk;

    fn file(path: &str) -> FileChange {
        FileChange {
            path: path.to_owned(),
            status: FileStatus::Modified,
            added: 1,
            removed: 0,
            binary: false,
            hunks: vec![Hunk {
                header: "@@ -1 +1,2 @@".into(),
                lines: vec![" a".into(), "+b".into()],
            }],
            cut: false,
        }
    }

    /// A path is the run's choice: one holding a newline would start lines that read as the
    /// diff's own, under another file's name, so it is quoted here too (the reader quotes
    /// first, from the path's bytes: `workspace::diff`'s tests).
    #[test]
    fn a_path_with_a_control_character_is_quoted_again_and_never_forges_a_line() {
        let forged = "ok.rs\n\n--- a/secret.env\n+++ b/secret.env\n@@ -1 +1 @@\n-KEY=1";
        for (path, row, header) in [
            (
                "src/lib.rs",
                "M  +1 -0        src/lib.rs",
                "--- a/src/lib.rs",
            ),
            (
                forged,
                "M  +1 -0        \"ok.rs\\n\\n--- a/secret.env\\n+++ b/secret.env\\n@@ -1 +1 @@\\n-KEY=1\"",
                "--- a/\"ok.rs\\n",
            ),
            (
                "tab\there",
                "M  +1 -0        \"tab\\there\"",
                "+++ b/\"tab\\there\"",
            ),
        ] {
            let f = file(path);
            assert_eq!(file_row(&f, false), row);
            let diff = file_diff(&f);
            assert!(diff.contains(header), "{diff}");
            assert!(!diff.lines().any(|l| l == "--- a/secret.env"), "{diff}");
            assert_eq!(diff.lines().count(), 7, "{diff}");
        }
        assert_eq!(file_row(&file("x"), true), "M  ?            x");
    }
}
