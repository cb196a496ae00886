//! Saved property-test failures are where proptest reads them. proptest finds a test's file of
//! failing seeds from the test's source path: beside it (`property.proptest-regressions`) only
//! when no `lib.rs` or `main.rs` is in a directory above it; otherwise under
//! `proptest-regressions/` beside the directory that holds that root, named for the source's
//! path below it (`tests/proptest-regressions/property.txt` for `tests/broker/property.rs`,
//! whose binary root is `tests/broker/main.rs`). A file anywhere else is never read, so its
//! seeds are silently not replayed: moving a test into a binary directory must move its file.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

const SIBLING_EXTENSION: &str = "proptest-regressions";
const DIRECTORY: &str = "proptest-regressions";

/// One line per regression file of `tracked` (what git tracks) proptest would not read.
pub fn misplaced_regressions(tracked: &[PathBuf]) -> Vec<String> {
    let tracked: BTreeSet<PathBuf> = tracked.iter().cloned().collect();
    tracked.iter().filter_map(|p| fault(p, &tracked)).collect()
}

/// Why proptest would not read `path`, if it is a regression file at all.
fn fault(path: &Path, tracked: &BTreeSet<PathBuf>) -> Option<String> {
    if path.extension().is_some_and(|e| e == SIBLING_EXTENSION) {
        let source = path.with_extension("rs");
        if !tracked.contains(&source) {
            return Some(format!(
                "{} is never read: its test {} is gone (move it with its test, or delete it)",
                path.display(),
                source.display()
            ));
        }
        let read = read_from(&source, tracked);
        return (read.as_deref() != Some(path)).then(|| {
            format!(
                "{} is never read: proptest reads {}'s seeds from {} (move it there)",
                path.display(),
                source.display(),
                read.map_or_else(|| "nowhere".to_owned(), |r| r.display().to_string()),
            )
        });
    }
    let (parent, suffix) = split_at_directory(path)?;
    if suffix.extension().is_none_or(|e| e != "txt") {
        return None;
    }
    let source = suffix.with_extension("rs");
    let read = roots_below(&parent, tracked).any(|root| {
        let candidate = root.join(&source);
        tracked.contains(&candidate) && read_from(&candidate, tracked).as_deref() == Some(path)
    });
    (!read).then(|| {
        format!(
            "{} is never read: no {} under a lib.rs or main.rs directory of {} has its seeds there (move it with its test, or delete it)",
            path.display(),
            source.display(),
            parent.display(),
        )
    })
}

/// The file proptest reads `source`'s seeds from (its `SourceParallel` rule).
fn read_from(source: &Path, tracked: &BTreeSet<PathBuf>) -> Option<PathBuf> {
    let is_root =
        |d: &Path| tracked.contains(&d.join("lib.rs")) || tracked.contains(&d.join("main.rs"));
    let mut dir = source.parent()?.to_path_buf();
    loop {
        if is_root(&dir) {
            let mut read = dir
                .parent()?
                .join(DIRECTORY)
                .join(source.strip_prefix(&dir).ok()?);
            read.set_extension("txt");
            return Some(read);
        }
        if !dir.pop() || dir.as_os_str().is_empty() {
            return Some(source.with_extension(SIBLING_EXTENSION));
        }
    }
}

/// The directories right below `parent` that hold a `lib.rs` or `main.rs`.
fn roots_below<'a>(
    parent: &'a Path,
    tracked: &'a BTreeSet<PathBuf>,
) -> impl Iterator<Item = PathBuf> + 'a {
    tracked
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n == "lib.rs" || n == "main.rs")
        })
        .filter_map(|p| p.parent())
        .filter(move |d| d.parent() == Some(parent))
        .map(Path::to_path_buf)
}

/// `a/b/proptest-regressions/c/d.txt` as (`a/b`, `c/d.txt`).
fn split_at_directory(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let parts: Vec<Component<'_>> = path.components().collect();
    let at = parts.iter().rposition(|c| c.as_os_str() == DIRECTORY)?;
    let parent: PathBuf = parts.get(..at)?.iter().collect();
    let suffix: PathBuf = parts.get(at + 1..)?.iter().collect();
    Some((parent, suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(paths: &[&str]) -> BTreeSet<PathBuf> {
        paths.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_file_is_read_only_where_proptest_looks() {
        // A test binary directory: seeds under tests/proptest-regressions/.
        let binary = set(&[
            "c/tests/broker/main.rs",
            "c/tests/broker/property.rs",
            "c/tests/proptest-regressions/property.txt",
        ]);
        assert_eq!(
            fault(
                Path::new("c/tests/proptest-regressions/property.txt"),
                &binary
            ),
            None
        );
        // The same test with its file beside it: never read.
        let beside = set(&[
            "c/tests/broker/main.rs",
            "c/tests/broker/property.rs",
            "c/tests/broker/property.proptest-regressions",
        ]);
        let f = fault(
            Path::new("c/tests/broker/property.proptest-regressions"),
            &beside,
        )
        .unwrap();
        assert!(
            f.contains("c/tests/proptest-regressions/property.txt"),
            "{f}"
        );
        // A single-file test with no root above it: beside it is right.
        let single = set(&[
            "c/tests/property.rs",
            "c/tests/property.proptest-regressions",
        ]);
        assert_eq!(
            fault(Path::new("c/tests/property.proptest-regressions"), &single),
            None
        );
        // A file in the directory whose test moved away.
        let orphan = set(&[
            "c/tests/proptest-regressions/gone.txt",
            "c/tests/broker/main.rs",
        ]);
        assert!(fault(Path::new("c/tests/proptest-regressions/gone.txt"), &orphan).is_some());
        // Unit tests in a library: seeds under the crate's proptest-regressions/.
        let unit = set(&[
            "c/src/lib.rs",
            "c/src/a/b.rs",
            "c/proptest-regressions/a/b.txt",
        ]);
        assert_eq!(
            fault(Path::new("c/proptest-regressions/a/b.txt"), &unit),
            None
        );
        assert_eq!(fault(Path::new("c/src/a/b.rs"), &unit), None);
    }

    #[test]
    fn every_regression_file_of_the_workspace_is_read() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let tracked = crate::references::tracked_files(root).unwrap();
        assert!(
            tracked
                .iter()
                .any(|p| p.starts_with("crates/broker/tests/proptest-regressions")),
            "the workspace has regression files to check"
        );
        assert_eq!(misplaced_regressions(&tracked), Vec::<String>::new());
    }
}
