//! Documents and comments name only what is in the repository. A reader who clones it must
//! find every page a comment points at: a design document kept elsewhere (a `spec/` page, a
//! numbered seed document, a sibling directory of the checkout) is a dead end for them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Text files git tracks, by extension (corpora, images and lock files are not prose).
const TEXT_EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "sh", "py", "yaml", "yml", "sql", "html", "css", "js", "service",
];

/// Every reference outside the repository in the files git tracks: `file:line: what`.
pub fn outside_references(root: &Path, tracked: &[PathBuf]) -> Result<Vec<String>> {
    let mut faults = Vec::new();
    for path in text_files(tracked) {
        let Ok(text) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        faults.extend(scan(path, &text));
    }
    Ok(faults)
}

/// The text files among `tracked`, by extension.
pub fn text_files(tracked: &[PathBuf]) -> impl Iterator<Item = &PathBuf> {
    tracked.iter().filter(|p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| TEXT_EXTENSIONS.contains(&e))
            || p.file_name().is_some_and(|n| n == "Dockerfile")
    })
}

/// Every file git tracks, relative to `root` (a failed listing is an error, never an empty
/// pass).
pub fn tracked_files(root: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .context("running git ls-files (tidy reads the files git tracks)")?;
    if !out.status.success() {
        bail!(
            "git ls-files failed in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect())
}

/// The references outside the repository in one file's text.
pub fn scan(path: &Path, text: &str) -> Vec<String> {
    let mut faults = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        for what in outside_in(&lower) {
            faults.push(format!("{}:{}: names {what}", path.display(), n + 1));
        }
    }
    faults
}

/// What one (lower-cased) line names outside the repository.
fn outside_in(line: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    if spec_page(line) {
        found.push("a `spec/` page (not in this repository; point at docs/ or say it here)");
    }
    if line.contains(concat!("../", "shared")) {
        found.push("a sibling directory of the repository (outside it)");
    }
    if numbered_seed(line) {
        found.push("a numbered seed document (not in this repository)");
    }
    found
}

/// `spec/<name>.md`, not inside a longer path segment (`openapi-spec/` is someone else's).
fn spec_page(line: &str) -> bool {
    let needle = concat!("spec", "/");
    line.match_indices(needle).any(|(i, _)| {
        let before_ok = line[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let rest = &line[i + needle.len()..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        before_ok && name_len > 0 && rest[name_len..].starts_with(".md")
    })
}

/// A seed document by its number: they were numbered with three digits.
fn numbered_seed(line: &str) -> bool {
    let needle = concat!("seed", " ");
    line.match_indices(needle).any(|(i, _)| {
        let digits: String = line[i + needle.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.len() == 3
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_names_nothing_outside_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let tracked = tracked_files(root).unwrap();
        let faults = outside_references(root, &tracked).unwrap();
        assert!(faults.is_empty(), "{faults:#?}");
        assert!(
            text_files(&tracked).any(|p| p.ends_with("docs/ARCHITECTURE.md")),
            "the scan reads the code map"
        );
    }

    #[test]
    fn planted_references_are_named_and_look_alikes_are_not() {
        let spec = concat!("spec", "/");
        let seed = concat!("seed", " ");
        let shared = concat!("../", "shared");
        for planted in [
            format!("//! The broker ({spec}broker.md)."),
            format!("see `{spec}architecture.md`"),
            format!("Goals ({spec}quality.md):"),
            format!("the rule table ({seed}002)"),
            format!("As {}003 says", "Seed "),
            format!("read {shared}/seeds/"),
        ] {
            assert_eq!(scan(Path::new("x.rs"), &planted).len(), 1, "{planted}");
        }
        for fine in [
            "an openapi-spec/ folder".to_owned(),
            format!("the {spec} directory alone"),
            format!("a {seed}of 42 for the generator"),
            format!("{seed}12345 is a number, not a document"),
            "docs/broker.md, \"Rules\"".to_owned(),
        ] {
            assert!(scan(Path::new("x.rs"), &fine).is_empty(), "{fine}");
        }
    }
}
