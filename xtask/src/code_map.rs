//! The code map (`docs/ARCHITECTURE.md`) stays true and short: every repository path it names
//! in backticks exists, and it stays within 16 KB (what one crate holds is in that crate's own
//! doc, not here).

use std::path::Path;

use anyhow::{Context, Result};

pub const MAP: &str = "docs/ARCHITECTURE.md";
pub const MAX_BYTES: usize = 16 * 1024;

/// One line per path the map names that does not exist, and one if it is too long.
pub fn map_faults(root: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(root.join(MAP)).with_context(|| format!("reading {MAP}"))?;
    let mut faults: Vec<String> = named_paths(&text)
        .into_iter()
        .filter(|path| !root.join(path).exists())
        .map(|path| format!("{MAP} names `{path}`, which does not exist: correct or remove it"))
        .collect();
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
    fn a_missing_path_and_the_size_are_named() {
        let dir = tempfile_dir();
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        std::fs::write(dir.join("docs/here.md"), "").unwrap();
        let map = format!("`docs/here.md` `docs/gone.md` {}", "x".repeat(MAX_BYTES));
        std::fs::write(dir.join(MAP), map).unwrap();
        let faults = map_faults(&dir).unwrap();
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(faults[0].contains("`docs/gone.md`"), "{faults:?}");
        assert!(faults[1].contains("more than 16384"), "{faults:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_code_map_names_only_paths_that_exist_and_fits() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(map_faults(root).unwrap(), Vec::<String>::new());
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-map-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
