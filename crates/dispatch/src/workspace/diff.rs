//! A run's kept changes read back for `runs diff`: between the two commits recorded when the
//! run ended (its start and its last kept commit), in the repo's repository as configured now.
//!
//! - Read with plumbing (`diff-tree`, `rev-list`, `cat-file`) and `--no-renames`, never a
//!   rename or copy search, which would pair a file the run wrote with one the base hides and
//!   show that file's name and lines; with `--no-ext-diff --no-textconv`, so no program a
//!   repository's config or attributes name runs (and [`Git`] reads no system or user config).
//! - The kept commits hold only the run's kept changes on the base's own tree, so nothing the
//!   run was denied appears in them, whatever the run wrote.
//! - Attributes come from an empty tree (`--attr-source`), never from the checkout's index,
//!   its files or the server's directory (a hidden `.gitattributes` would otherwise change
//!   what is shown), and replace refs are not followed (they would swap the commits compared).
//! - Bounded: the files' sizes are read first, and past [`MAX_DIFF_INPUT_BYTES`] of them no
//!   file is compared (they are listed alone); [`MAX_DIFF_BYTES`] of patch read, the lines
//!   asked for (at most [`MAX_DIFF_LINES`]) shown, [`MAX_DIFF_FILES`] files listed, a binary
//!   file shown as such.
//! - No commit id is shown, the base's or a kept one's (each hashes the base's whole tree,
//!   hidden files included).
//! - Every path, line and message is cleaned like any agent text, one file's patch at a time
//!   (a key across lines is redacted whole).

use std::path::Path;

use agents::Sanitizer;
use commands::run_changes::{
    ChangesError, FileChange, FileStatus, Hunk, KeptCommit, MAX_DIFF_BYTES, MAX_DIFF_FILE_BYTES,
    MAX_DIFF_FILES, MAX_DIFF_INPUT_BYTES, MAX_DIFF_LINE_CHARS, MAX_DIFF_LINES, RunChanges,
};
use store::{KeptChanges, Store};

use super::WorkspaceError;
use super::base::repository;
use super::git::Git;

/// The most bytes of one commit message shown.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// Config for every read here: paths quoted the one way this parser reads them.
const QUOTED_PATHS: &str = "core.quotePath=true";

/// Diffs read at once in this process: each holds up to a few hundred MB of git's memory at
/// the bounds, and every view of a run page asks for one.
static READING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// The changes `kept` recorded, at most `lines` lines of diff.
pub async fn read(
    store: &dyn Store,
    data_dir: &Path,
    kept: &KeptChanges,
    lines: usize,
    clean: &Sanitizer,
) -> Result<RunChanges, ChangesError> {
    read_within(store, data_dir, kept, lines, clean, MAX_DIFF_INPUT_BYTES).await
}

/// [`read`], comparing files only while they weigh at most `budget` bytes.
async fn read_within(
    store: &dyn Store,
    data_dir: &Path,
    kept: &KeptChanges,
    lines: usize,
    clean: &Sanitizer,
    budget: u64,
) -> Result<RunChanges, ChangesError> {
    let _turn = READING.acquire().await.map_err(|e| ChangesError::Failed {
        detail: e.to_string(),
    })?;
    let not_kept = kept.not_kept.iter().map(|n| clean.clean(n)).collect();
    let mut changes = RunChanges {
        repo: kept.repo.clone(),
        branch: kept
            .tip
            .as_ref()
            .map(|_| commands::run_branch(&kept.run_id)),
        commits: Vec::new(),
        files: Vec::new(),
        files_total: 0,
        added: 0,
        removed: 0,
        not_kept,
        not_kept_count: kept.not_kept_count,
        lines_shown: 0,
        cut: false,
        unread: false,
    };
    let Some(tip) = &kept.tip else {
        return Ok(changes);
    };
    let gone = || ChangesError::Gone(kept.repo.clone());
    if !is_object_id(&kept.start) || !is_object_id(tip) {
        return Err(ChangesError::Failed {
            detail: format!("run {}: a recorded commit id is malformed", kept.run_id),
        });
    }
    let git_dir = repository(store, data_dir, &kept.repo)
        .await
        .map_err(|e| match e {
            WorkspaceError::Store(_) => ChangesError::Failed {
                detail: e.to_string(),
            },
            _ => gone(),
        })?;
    let git = Git::at(git_dir)
        .with_config(QUOTED_PATHS)
        .with_config(&format!("core.bigFileThreshold={MAX_DIFF_FILE_BYTES}"));
    let failed = |e: super::git::GitError| ChangesError::Failed {
        detail: e.to_string(),
    };
    for commit in [&kept.start, tip] {
        if !git
            .holds(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .await
            .map_err(failed)?
        {
            return Err(gone());
        }
    }
    changes.commits = commits(&git, &kept.start, tip, clean)
        .await
        .map_err(failed)?;
    let no_attributes = format!("--attr-source={}", empty_tree(&git).await.map_err(failed)?);
    let diff_tree =
        |format: &[&str]| diff_tree_args(&no_attributes, format, &kept.start, tip.as_str());
    let listing = git.run(diff_tree(&["--raw"])).await.map_err(failed)?;
    let mut entries = parse_raw(&listing).map_err(|detail| ChangesError::Failed { detail })?;
    changes.files_total = entries.len();
    if weight(&git, &entries).await.map_err(failed)? > budget {
        changes.unread = true;
        changes.cut = true;
        changes.files = entries
            .into_iter()
            .take(MAX_DIFF_FILES)
            .map(|e| listed_only(e, clean))
            .collect();
        return Ok(changes);
    }
    let counts = git.run(diff_tree(&["--numstat"])).await.map_err(failed)?;
    add_counts(&counts, &mut entries).map_err(|detail| ChangesError::Failed { detail })?;
    for (added, removed) in entries.iter().filter_map(|e| e.counts) {
        changes.added += added;
        changes.removed += removed;
    }
    let mut patch_args = diff_tree(&["-p", "-U3", "--no-color"]);
    patch_args.retain(|a| a != "-z");
    let (patch, cut) = git.head(patch_args, MAX_DIFF_BYTES).await.map_err(failed)?;
    let shown = shown_files(entries, &patch, cut, lines.min(MAX_DIFF_LINES), clean);
    changes.lines_shown = shown.lines;
    changes.cut = shown.cut;
    changes.files = shown.files;
    Ok(changes)
}

/// `diff-tree` between `start` and `tip` in `format`: recursive, NUL-separated, no rename or
/// copy search, no program a repository names, attributes from an empty tree.
fn diff_tree_args(no_attributes: &str, format: &[&str], start: &str, tip: &str) -> Vec<String> {
    let mut args = vec![
        no_attributes,
        "diff-tree",
        "-r",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
    ];
    args.extend_from_slice(format);
    args.extend([start, tip]);
    args.into_iter().map(str::to_owned).collect()
}

/// A path as the run wrote it, for showing: as it is when it prints as itself, else quoted
/// and escaped (a control or format character, a quote or a backslash), so no path reads as
/// another's or starts a line of its own.
fn display_path(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let quoted = format!("{text:?}");
    let invisible = |c: char| {
        matches!(c, '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}')
    };
    let prints_as_itself = quoted.get(1..quoted.len() - 1) == Some(&*text)
        && !text.chars().any(invisible)
        && !matches!(text, std::borrow::Cow::Owned(_));
    if prints_as_itself {
        text.into_owned()
    } else {
        let escaped: String = quoted
            .chars()
            .flat_map(|c| {
                if invisible(c) {
                    c.escape_unicode().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect();
        escaped
    }
}

fn is_object_id(oid: &str) -> bool {
    matches!(oid.len(), 40 | 64) && oid.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The kept commits from `start` to `tip`, oldest first, following first parents.
async fn commits(
    git: &Git,
    start: &str,
    tip: &str,
    clean: &Sanitizer,
) -> Result<Vec<KeptCommit>, super::git::GitError> {
    let listed = git
        .text([
            "rev-list",
            "--first-parent",
            "--reverse",
            &format!("{start}..{tip}"),
        ])
        .await?;
    let ids: Vec<&str> = listed.lines().collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let input: String = ids.iter().map(|id| format!("{id}\n")).collect();
    let out = git
        .input(["cat-file", "--batch"], input.into_bytes())
        .await?;
    Ok(parse_batch(&out)
        .into_iter()
        .map(|(_, body)| KeptCommit {
            message: clean.clean(&agents::cap(&message_of(&body), MAX_MESSAGE_BYTES)),
        })
        .collect())
}

/// `cat-file --batch` output: each object's id and bytes.
fn parse_batch(out: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut objects = Vec::new();
    let mut rest = out;
    while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
        let (head, after) = rest.split_at(nl);
        let after = after.get(1..).unwrap_or_default();
        let head = String::from_utf8_lossy(head);
        let mut parts = head.split(' ');
        let (Some(id), Some(_kind), Some(size)) = (parts.next(), parts.next(), parts.next()) else {
            break;
        };
        let Ok(size) = size.parse::<usize>() else {
            break;
        };
        let Some(body) = after.get(..size) else {
            break;
        };
        objects.push((id.to_owned(), body.to_vec()));
        rest = after.get(size + 1..).unwrap_or_default();
    }
    objects
}

/// A commit object's message: what follows its headers' blank line.
fn message_of(commit: &[u8]) -> String {
    let text = String::from_utf8_lossy(commit);
    text.split_once("\n\n")
        .map_or("", |(_, message)| message)
        .trim_end()
        .to_owned()
}

/// One changed path as `diff-tree --raw -z` lists it, with its `--numstat` counts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: Vec<u8>,
    status: FileStatus,
    /// The blobs before and after (all zeros for none).
    blobs: [String; 2],
    /// `None` for a binary file (or before the counts are read).
    counts: Option<(u64, u64)>,
}

/// The id of the empty tree in this repository's format.
async fn empty_tree(git: &Git) -> Result<String, super::git::GitError> {
    let out = git
        .input(["hash-object", "-t", "tree", "--stdin"], Vec::new())
        .await?;
    Ok(String::from_utf8_lossy(&out).trim().to_owned())
}

/// The bytes of every blob before and after, as the repository stores them.
async fn weight(git: &Git, entries: &[Entry]) -> Result<u64, super::git::GitError> {
    let ids: String = entries
        .iter()
        .flat_map(|e| &e.blobs)
        .filter(|oid| oid.bytes().any(|b| b != b'0'))
        .map(|oid| format!("{oid}\n"))
        .collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let out = git
        .input(["cat-file", "--batch-check"], ids.into_bytes())
        .await?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum())
}

/// A file listed without its counts or lines.
fn listed_only(entry: Entry, clean: &Sanitizer) -> FileChange {
    FileChange {
        path: clean.clean(&display_path(&entry.path)),
        status: entry.status,
        added: 0,
        removed: 0,
        binary: false,
        hunks: Vec::new(),
        cut: true,
    }
}

/// Parses `--raw -z`: `:<old mode> <new mode> <old id> <new id> <status>\0<path>\0` each.
fn parse_raw(raw: &[u8]) -> Result<Vec<Entry>, String> {
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut entries = Vec::new();
    while let Some(record) = fields.next() {
        let record = String::from_utf8_lossy(record);
        let parts: Vec<&str> = record.trim_start_matches(':').split(' ').collect();
        let [_, _, old, new, status] = parts.as_slice() else {
            return Err(format!(
                "diff-tree listed a record of another shape: {record:?}"
            ));
        };
        let status = match *status {
            "A" => FileStatus::Added,
            "D" => FileStatus::Deleted,
            "T" => FileStatus::TypeChanged,
            "M" => FileStatus::Modified,
            other => return Err(format!("diff-tree listed an unknown status {other:?}")),
        };
        let path = fields.next().ok_or("a raw record without its path")?;
        entries.push(Entry {
            path: path.to_vec(),
            status,
            blobs: [(*old).to_owned(), (*new).to_owned()],
            counts: None,
        });
    }
    Ok(entries)
}

/// Adds `--numstat -z`'s counts (`<added>\t<removed>\t<path>\0` each, in the raw records'
/// order) to `entries`.
fn add_counts(raw: &[u8], entries: &mut [Entry]) -> Result<(), String> {
    let mut records = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    for entry in entries.iter_mut() {
        let record = records
            .next()
            .ok_or("fewer numstat records than raw ones")?;
        let mut parts = record.splitn(3, |b| *b == b'\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err("a numstat record of another shape".to_owned());
        };
        if path != entry.path.as_slice() {
            return Err("numstat and raw records in another order".to_owned());
        }
        let number = |n: &[u8]| String::from_utf8_lossy(n).parse::<u64>().ok();
        entry.counts = match (number(added), number(removed)) {
            (Some(a), Some(r)) => Some((a, r)),
            _ if added == b"-" && removed == b"-" => None,
            _ => return Err("a numstat count that is not a number".to_owned()),
        };
    }
    if records.next().is_some() {
        return Err("more numstat records than raw ones".to_owned());
    }
    Ok(())
}

/// Each file's patch sections: a patch split before each `diff --git ` line (every other line
/// of a patch starts with a mark, a header word, or `@@`).
fn sections(patch: &[u8]) -> Vec<&[u8]> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in patch.split_inclusive(|b| *b == b'\n') {
        if line.starts_with(b"diff --git ") {
            starts.push(at);
        }
        at += line.len();
    }
    starts
        .iter()
        .enumerate()
        .filter_map(|(i, start)| patch.get(*start..starts.get(i + 1).copied().unwrap_or(at)))
        .collect()
}

/// What is shown of the files.
struct Shown {
    files: Vec<FileChange>,
    lines: usize,
    cut: bool,
}

/// The listed files with the hunks of their sections, up to `budget` lines in all. A type
/// change is two sections (the old file removed, the new one added); every other change one.
fn shown_files(
    entries: Vec<Entry>,
    patch: &[u8],
    patch_cut: bool,
    budget: usize,
    clean: &Sanitizer,
) -> Shown {
    let mut parts = sections(patch).into_iter();
    let mut shown = Shown {
        files: Vec::new(),
        lines: 0,
        cut: patch_cut,
    };
    for (i, entry) in entries.into_iter().enumerate() {
        if i >= MAX_DIFF_FILES {
            shown.cut = true;
            break;
        }
        let (added, removed) = entry.counts.unwrap_or((0, 0));
        let mut file = FileChange {
            path: clean.clean(&display_path(&entry.path)),
            status: entry.status,
            added,
            removed,
            binary: entry.counts.is_none(),
            hunks: Vec::new(),
            cut: false,
        };
        let count = if entry.status == FileStatus::TypeChanged {
            2
        } else {
            1
        };
        let mut got = 0;
        for part in parts.by_ref().take(count) {
            got += 1;
            let left = budget.saturating_sub(shown.lines);
            let (hunks, used, cut) = hunks_of(&clean.clean(&String::from_utf8_lossy(part)), left);
            file.hunks.extend(hunks);
            file.cut |= cut;
            shown.lines += used;
        }
        // A file whose sections the bounded read did not reach, or only partly.
        let has_lines = !file.binary && added + removed > 0;
        if got < count && has_lines {
            file.cut = true;
        }
        if patch_cut && has_lines && got == count && parts.len() == 0 {
            // The last section read may itself have been cut short.
            file.cut |= shown_body(&file) < added + removed;
        }
        shown.cut |= file.cut;
        shown.files.push(file);
    }
    shown
}

/// Lines shown of a file's hunks that are additions or removals.
fn shown_body(file: &FileChange) -> u64 {
    file.hunks
        .iter()
        .flat_map(|h| &h.lines)
        .filter(|l| l.starts_with('+') || l.starts_with('-'))
        .count() as u64
}

/// A section's hunks, at most `left` lines of them: the hunks, the lines used, and whether
/// some were left out.
fn hunks_of(section: &str, left: usize) -> (Vec<Hunk>, usize, bool) {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut used = 0;
    let mut cut = false;
    for line in section.lines() {
        if line.starts_with("@@") {
            if used >= left {
                cut = true;
                break;
            }
            hunks.push(Hunk {
                header: line.to_owned(),
                lines: Vec::new(),
            });
            continue;
        }
        // Header lines (before the first hunk) are not shown: the file's entry says it all.
        let Some(hunk) = hunks.last_mut() else {
            continue;
        };
        if used >= left {
            cut = true;
            break;
        }
        match line.char_indices().nth(MAX_DIFF_LINE_CHARS) {
            Some((end, _)) => {
                hunk.lines
                    .push(format!("{}…", line.get(..end).unwrap_or(line)));
                cut = true;
            }
            None => hunk.lines.push(line.to_owned()),
        }
        used += 1;
    }
    (hunks, used, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, status: FileStatus, counts: Option<(u64, u64)>) -> Entry {
        Entry {
            path: path.as_bytes().to_vec(),
            status,
            blobs: ["aa".into(), "bb".into()],
            counts,
        }
    }

    #[test]
    fn a_listing_pairs_each_raw_record_with_its_counts() {
        let raw = b":100644 100644 aa bb M\0bin\0:120000 100644 aa bb T\0l\0:000000 100644 aa bb A\0sp ace\"q.txt\0";
        let mut entries = parse_raw(raw).unwrap();
        add_counts(
            b"-\t-\tbin\x001\t1\tl\x001\t0\tsp ace\"q.txt\0",
            &mut entries,
        )
        .unwrap();
        assert_eq!(
            entries,
            vec![
                entry("bin", FileStatus::Modified, None),
                entry("l", FileStatus::TypeChanged, Some((1, 1))),
                entry("sp ace\"q.txt", FileStatus::Added, Some((1, 0))),
            ]
        );
        assert_eq!(parse_raw(b"").unwrap(), vec![]);
    }

    #[test]
    fn a_malformed_listing_is_an_error_never_a_shorter_one() {
        for bad in [
            &b":100644 100644 aa bb M\0"[..],
            b":100644 100644 aa bb R\0f\0",
            b":100644 aa bb M\0f\0",
            b"junk\0f\0",
        ] {
            assert!(
                parse_raw(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let raw = b":100644 100644 aa bb M\0f\0";
        for bad in [
            &b""[..],
            b"1\t2\tg\0",
            b"x\t2\tf\0",
            b"1\t2\0",
            b"1\t2\tf\x001\t1\tg\0",
        ] {
            let mut entries = parse_raw(raw).unwrap();
            assert!(
                add_counts(bad, &mut entries).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    const PATCH: &str = "diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n a\n+c\ndiff --git a/l b/l\ndeleted file mode 120000\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-f\n\\ No newline at end of file\ndiff --git a/l b/l\nnew file mode 100644\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+b\n";

    fn entries() -> Vec<Entry> {
        vec![
            entry("f", FileStatus::Modified, Some((1, 0))),
            entry("l", FileStatus::TypeChanged, Some((1, 1))),
        ]
    }

    #[test]
    fn a_type_change_takes_its_two_sections_and_the_limit_cuts_lines() {
        let clean = Sanitizer::default();
        let all = shown_files(entries(), PATCH.as_bytes(), false, 100, &clean);
        assert!(!all.cut);
        assert_eq!(all.lines, 5);
        assert_eq!(all.files[0].hunks[0].lines, [" a", "+c"]);
        assert_eq!(all.files[1].hunks.len(), 2);
        assert_eq!(all.files[1].hunks[1].lines, ["+b"]);
        let some = shown_files(entries(), PATCH.as_bytes(), false, 3, &clean);
        assert!(some.cut);
        assert_eq!(some.lines, 3);
        assert!(!some.files[0].cut);
        assert!(some.files[1].cut);
    }

    #[test]
    fn a_patch_read_short_marks_the_files_it_did_not_reach() {
        let clean = Sanitizer::default();
        let short = &PATCH.as_bytes()[..60];
        let shown = shown_files(entries(), short, true, 100, &clean);
        assert!(shown.cut);
        assert!(shown.files[1].cut);
        assert!(shown.files[1].hunks.is_empty());
    }

    #[test]
    fn a_line_that_looks_like_a_header_inside_a_hunk_stays_a_line() {
        let patch = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+diff --git a/x b/x\n+@@ not a hunk\n";
        let (hunks, used, cut) = hunks_of(patch, 10);
        assert_eq!(sections(patch.as_bytes()).len(), 1);
        // A `+@@` line is an added line, not a hunk.
        assert_eq!(hunks.len(), 1);
        assert_eq!(used, 2);
        assert!(!cut);
    }

    #[test]
    fn a_commit_batch_reads_each_message() {
        let body = b"tree t\nparent p\nauthor a <a> 1 +0000\ncommitter c <c> 1 +0000\n\nAdd the thing\n\nwhy\n";
        let mut out = format!("{} commit {}\n", "a".repeat(40), body.len()).into_bytes();
        out.extend_from_slice(body);
        out.push(b'\n');
        let read = parse_batch(&out);
        assert_eq!(read.len(), 1);
        assert_eq!(message_of(&read[0].1), "Add the thing\n\nwhy");
        assert!(parse_batch(b"junk").is_empty());
    }

    #[test]
    fn a_path_prints_as_itself_or_quoted_and_escaped() {
        for (bytes, shown) in [
            (&b"src/lib.rs"[..], "src/lib.rs"),
            (b"sp ace.txt", "sp ace.txt"),
            ("ünï.txt".as_bytes(), "ünï.txt"),
            (
                b"config/production-secrets.toml\x01",
                "\"config/production-secrets.toml\\u{1}\"",
            ),
            ("a\u{200b}.toml".as_bytes(), "\"a\\u{200b}.toml\""),
            ("\u{3164}".as_bytes(), "\"\\u{3164}\""),
            ("x\u{202e}txt.exe".as_bytes(), "\"x\\u{202e}txt.exe\""),
            (b"ok\n--- a/x", "\"ok\\n--- a/x\""),
            (b"q\"uote", "\"q\\\"uote\""),
            (b"back\\slash", "\"back\\\\slash\""),
            (b"bad\xff", "\"bad\u{fffd}\""),
        ] {
            assert_eq!(
                display_path(bytes),
                shown,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    /// What keeps a hidden file out of a diff of a file the run wrote is that no rename or
    /// copy is searched for, and no program a repository names runs: every read says so.
    #[test]
    fn every_diff_tree_read_searches_no_renames_and_runs_nothing_a_repository_names() {
        for format in [&["--raw"][..], &["--numstat"], &["-p", "-U3", "--no-color"]] {
            let args = diff_tree_args("--attr-source=E", format, "s", "t");
            assert_eq!(args[..2], ["--attr-source=E", "diff-tree"]);
            for must in ["--no-renames", "--no-ext-diff", "--no-textconv"] {
                assert!(args.iter().any(|a| a == must), "{args:?}");
            }
            assert!(
                !args
                    .iter()
                    .any(|a| a.starts_with("-M") || a.starts_with("-C") || a.starts_with("--find")),
                "{args:?}"
            );
            assert_eq!(args[args.len() - 2..], ["s", "t"]);
        }
    }

    #[test]
    fn a_long_line_is_cut() {
        let long = format!("+{}", "x".repeat(5_000));
        let patch = format!("@@ -0,0 +1 @@\n{long}\n");
        let (hunks, used, cut) = hunks_of(&patch, 10);
        assert_eq!(used, 1);
        assert!(cut);
        assert_eq!(hunks[0].lines[0].chars().count(), MAX_DIFF_LINE_CHARS + 1);
    }

    /// `git` in `dir` as a test's author.
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A repo whose base has a `.gitattributes` calling every `.txt` binary, a file `a.txt`
    /// and `b.txt`; the kept commit adds `copy.txt` equal to `b.txt` and changes `a.txt`.
    async fn kept_repo() -> (tempfile::TempDir, std::sync::Arc<dyn Store>, KeptChanges) {
        let repo = tempfile::tempdir().unwrap();
        git(repo.path(), &["init", "-q"]);
        std::fs::write(repo.path().join(".gitattributes"), "*.txt -diff\n").unwrap();
        std::fs::write(repo.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(repo.path().join("b.txt"), "hidden words\n").unwrap();
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-qm", "base"]);
        let start = git(repo.path(), &["rev-parse", "HEAD"]);
        std::fs::write(repo.path().join("a.txt"), "two\n").unwrap();
        std::fs::write(repo.path().join("copy.txt"), "hidden words\n").unwrap();
        std::fs::write(repo.path().join("b.txt\u{200b}"), "looks like b\n").unwrap();
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-qm", "kept"]);
        let tip = git(repo.path(), &["rev-parse", "HEAD"]);
        let store = store::open("memory:").await.unwrap();
        let slug = authz_core::RepoSlug::parse("acme/web").unwrap();
        store::repos::set(
            store.as_ref(),
            &slug,
            &store::repos::RepoSource::Path(repo.path().display().to_string()),
            &authz_core::ActorId::cli_local(),
            store::wall_clock(),
        )
        .await
        .unwrap();
        let kept = KeptChanges {
            run_id: authz_core::RunId::parse(&store::new_id(store::wall_clock())).unwrap(),
            repo: slug,
            start,
            tip: Some(tip),
            commits: 1,
            not_kept: vec![],
            not_kept_count: 0,
            kept_at: store::wall_clock(),
        };
        (repo, store, kept)
    }

    #[tokio::test]
    async fn a_copy_is_its_own_new_file_and_the_checkouts_attributes_and_replace_refs_decide_nothing()
     {
        let (repo, store, kept) = kept_repo().await;
        // A replace ref in the checkout would swap the tip for the base (an empty diff).
        let tip = kept.tip.clone().unwrap();
        git(repo.path(), &["replace", &tip, &kept.start]);
        let data = tempfile::tempdir().unwrap();
        let clean = Sanitizer::default();
        let changes = read(store.as_ref(), data.path(), &kept, 100, &clean)
            .await
            .unwrap();
        let files: Vec<(&str, FileStatus, bool)> = changes
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status, f.binary))
            .collect();
        assert_eq!(
            files,
            [
                ("a.txt", FileStatus::Modified, false),
                ("\"b.txt\\u{200b}\"", FileStatus::Added, false),
                ("copy.txt", FileStatus::Added, false),
            ]
        );
        assert_eq!(changes.files[2].hunks[0].lines, ["+hidden words"]);
        assert_eq!((changes.added, changes.removed), (3, 1));
        assert_eq!(
            changes.commits,
            [KeptCommit {
                message: "kept".into()
            }]
        );
        let listed = format!("{changes:?}");
        assert!(
            !listed.contains("b.txt\"") && !listed.contains("b.txt,"),
            "{listed}"
        );
        assert!(!listed.contains(&kept.start[..12]) && !listed.contains(&tip[..12]));
    }

    #[tokio::test]
    async fn files_past_the_budget_are_listed_without_being_compared() {
        let (_repo, store, kept) = kept_repo().await;
        let data = tempfile::tempdir().unwrap();
        let clean = Sanitizer::default();
        let changes = read_within(store.as_ref(), data.path(), &kept, 100, &clean, 8)
            .await
            .unwrap();
        assert!(changes.unread && changes.cut);
        assert_eq!(changes.files.len(), 3);
        assert!(
            changes
                .files
                .iter()
                .all(|f| f.hunks.is_empty() && f.added == 0 && f.cut)
        );
        let gone = KeptChanges {
            tip: Some("f".repeat(40)),
            ..kept
        };
        assert_eq!(
            read(store.as_ref(), data.path(), &gone, 100, &clean).await,
            Err(ChangesError::Gone(gone.repo.clone()))
        );
    }
}
