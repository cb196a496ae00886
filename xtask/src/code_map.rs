//! The code map (`docs/ARCHITECTURE.md`) stays true and short: every repository path it names
//! in backticks exists, every test it names as pinning an invariant (`` `file`: `test` ``) is
//! defined in that file, and it stays within 16 KB (what one crate holds is in that crate's own
//! doc, not here).

use std::path::Path;

use anyhow::{Context, Result};

pub const MAP: &str = "docs/ARCHITECTURE.md";
pub const MAX_BYTES: usize = 16 * 1024;

/// One line per path the map names that does not exist, per test it names that its file does
/// not define, and one if it is too long.
pub fn map_faults(root: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(root.join(MAP)).with_context(|| format!("reading {MAP}"))?;
    let mut faults: Vec<String> = named_paths(&text)
        .into_iter()
        .filter(|path| !root.join(path).exists())
        .map(|path| format!("{MAP} names `{path}`, which does not exist: correct or remove it"))
        .collect();
    for (path, test) in named_tests(&text) {
        let defined = std::fs::read_to_string(root.join(&path))
            .is_ok_and(|source| defines_fn(&source, &test));
        if !defined {
            faults.push(format!(
                "{MAP} says `{path}` holds `{test}`, which it does not define: point at the file that does"
            ));
        }
    }
    if text.len() > MAX_BYTES {
        faults.push(format!(
            "{MAP} is {} bytes, more than {MAX_BYTES}: move what one crate holds into its crate doc",
            text.len()
        ));
    }
    Ok(faults)
}

/// The repository paths among the map's backticked spans: a span with a `/` and no space,
/// not a URL or a route (`/api`), read up to any `:` (a line or an item after it).
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.contains('/') && !span.contains(' ') && !span.contains("://"))
        .filter(|span| !span.starts_with('/') && !span.starts_with("http"))
        .map(|span| span.split(':').next().unwrap_or(span).to_owned())
        .filter(|path| {
            path.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        })
        .collect()
}

/// The `` `file`: `test`, `test` `` pairs of the map's table rows (`; ` between files).
fn named_tests(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for row in text.lines().filter(|l| l.starts_with("| ")) {
        for part in row.split("; ").flat_map(|p| p.split(" | ")) {
            let Some((file, tests)) = part.trim_start_matches("| ").split_once("`: ") else {
                continue;
            };
            let Some(file) = file.strip_prefix('`').filter(|f| f.ends_with(".rs")) else {
                continue;
            };
            for test in tests.split(", ") {
                let name = test.trim().trim_end_matches(" |").trim_matches('`');
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    pairs.push((file.to_owned(), name.to_owned()));
                }
            }
        }
    }
    pairs
}

fn defines_fn(source: &str, name: &str) -> bool {
    source.match_indices(&format!("fn {name}")).any(|(i, m)| {
        source
            .get(i + m.len()..)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| c == '(' || c == '<')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_backticks_and_routes_are_not() {
        let text = "see `crates/store/src/lib.rs`, `docs/x.md:12`, `/api/runs.get`, \
                    `https://a/b`, `runs list`, `a/b c`, `Registry::handle`";
        assert_eq!(
            named_paths(text),
            vec!["crates/store/src/lib.rs", "docs/x.md"]
        );
    }

    #[test]
    fn tests_are_read_from_rows_and_must_be_defined_where_named() {
        let row = "| x | `a/b.rs`: `one`, `two`; `c/d.rs`: `three` |\nnot `e/f.rs`: `four`";
        assert_eq!(
            named_tests(row),
            vec![
                ("a/b.rs".to_owned(), "one".to_owned()),
                ("a/b.rs".to_owned(), "two".to_owned()),
                ("c/d.rs".to_owned(), "three".to_owned()),
            ]
        );
        assert!(defines_fn("async fn one() {}", "one"));
        assert!(!defines_fn("fn one_more() {}", "one"));
    }

    #[test]
    fn a_missing_path_and_the_size_are_named() {
        let dir = tempfile_dir();
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        std::fs::write(dir.join("docs/here.md"), "").unwrap();
        std::fs::write(dir.join("docs/pins.rs"), "#[test]\nfn pinned() {}\n").unwrap();
        let map = format!(
            "`docs/here.md` `docs/gone.md`\n| x | `docs/pins.rs`: `pinned`, `unpinned` |\n{}",
            "x".repeat(MAX_BYTES)
        );
        std::fs::write(dir.join(MAP), map).unwrap();
        let faults = map_faults(&dir).unwrap();
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert!(faults[0].contains("`docs/gone.md`"), "{faults:?}");
        assert!(
            faults[1].contains("`unpinned`, which it does not define"),
            "{faults:?}"
        );
        assert!(faults[2].contains("more than 16384"), "{faults:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_code_map_names_only_paths_that_exist_and_fits() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let map = std::fs::read_to_string(root.join(MAP)).unwrap();
        assert!(
            named_paths(&map).len() > 20 && named_tests(&map).len() > 20,
            "the map is read"
        );
        assert_eq!(map_faults(root).unwrap(), Vec::<String>::new());
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-map-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
