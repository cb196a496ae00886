//! No file circles: within a crate, no two modules name each other (`crate::a` in b and
//! `crate::b` in a, or the same through `super::`). Two modules that each need the other are
//! one concern split in the wrong place; what both need belongs in a third module they share.
//! Inline unit-test modules (`source::without_tests`) are left out: a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};

/// Every pair of modules that name each other, in every crate under `crates/` and in xtask.
pub fn module_circles(root: &Path) -> Result<Vec<String>> {
    let mut sources: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("crates"))
        .with_context(|| format!("reading {}", root.join("crates").display()))?
        .filter_map(|e| e.ok().map(|e| e.path().join("src")))
        .filter(|p| p.is_dir())
        .collect();
    sources.push(root.join("xtask/src"));
    sources.sort();
    let mut faults = Vec::new();
    for src in sources {
        let shown = src.strip_prefix(root).unwrap_or(&src);
        faults.extend(circles_in(shown, &modules_of(&src)?));
    }
    Ok(faults)
}

/// The crate's modules by path (`tools::exec`; the crate root is ``), with their text
/// before any unit-test module.
fn modules_of(src: &Path) -> Result<BTreeMap<String, String>> {
    let mut modules = BTreeMap::new();
    for (path, text) in crate::source::rust_sources(src)? {
        let rel = path.strip_prefix(src).unwrap_or(&path).with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts
            .last()
            .is_some_and(|l| matches!(l.as_str(), "mod" | "lib" | "main"))
        {
            parts.pop();
        }
        modules.insert(
            parts.join("::"),
            crate::source::without_tests(&text).into_owned(),
        );
    }
    Ok(modules)
}

/// The pairs of `modules` that name each other, as `src/a.rs ↔ src/b.rs` lines.
pub fn circles_in(src: &Path, modules: &BTreeMap<String, String>) -> Vec<String> {
    let named: BTreeMap<&str, BTreeSet<String>> = modules
        .iter()
        .map(|(name, text)| (name.as_str(), names_in(name, text, modules)))
        .collect();
    let mut faults = Vec::new();
    for (a, names) in &named {
        for b in names {
            let b_names_a = named.get(b.as_str()).is_some_and(|n| n.contains(*a));
            if *a < b.as_str() && b_names_a {
                faults.push(format!(
                    "{} ↔ {}: each names the other; move what both need into a module of its own",
                    file_of(src, a),
                    file_of(src, b)
                ));
            }
        }
    }
    faults
}

fn file_of(src: &Path, module: &str) -> String {
    if module.is_empty() {
        return src.join("lib.rs").display().to_string();
    }
    src.join(format!("{}.rs", module.replace("::", "/")))
        .display()
        .to_string()
}

/// The other modules of the crate that `module`'s text names through `crate::` or `super::`.
fn names_in(module: &str, text: &str, modules: &BTreeMap<String, String>) -> BTreeSet<String> {
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut found = BTreeSet::new();
    for (prefix, base) in [("crate::", ""), ("super::", parent)] {
        for (i, _) in text.match_indices(prefix) {
            let before = text.get(..i).and_then(|t| t.chars().next_back());
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let path = path_after(text.get(i + prefix.len()..).unwrap_or(""));
            if let Some(target) = longest_module(base, &path, modules)
                && target != module
            {
                found.insert(target);
            }
        }
    }
    found
}

/// The `a::b::c` words after a prefix.
fn path_after(rest: &str) -> Vec<&str> {
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    rest.get(..end)
        .unwrap_or("")
        .split("::")
        .take_while(|w| !w.is_empty())
        .collect()
}

/// The longest prefix of `base::path` that is a module of the crate (not the crate root).
fn longest_module(base: &str, path: &[&str], modules: &BTreeMap<String, String>) -> Option<String> {
    (1..=path.len()).rev().find_map(|k| {
        let tail = path.get(..k)?.join("::");
        let name = if base.is_empty() {
            tail
        } else {
            format!("{base}::{tail}")
        };
        modules.contains_key(&name).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(m, t)| {
                (
                    (*m).to_owned(),
                    crate::source::without_tests(t).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn no_two_modules_of_the_workspace_name_each_other() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let faults = module_circles(root).unwrap();
        assert!(faults.is_empty(), "{faults:#?}");
        let commands = modules_of(&root.join("crates/commands/src")).unwrap();
        assert!(commands.contains_key("ports") && commands.contains_key("catalogue::runs"));
    }

    #[test]
    fn planted_circles_are_named() {
        let src = Path::new("src");
        for files in [
            vec![
                ("a", "use crate::b::X;"),
                ("b", "fn f() { crate::a::g() }"),
                ("", ""),
            ],
            vec![
                ("t::x", "use super::y::Z;"),
                ("t::y", "use super::x;"),
                ("t", ""),
            ],
            vec![("a", "//! ([`crate::b`])"), ("b", "use crate::a::{self};")],
            vec![
                ("p", "use crate::q::r::S;"),
                ("q::r", "use crate::p;"),
                ("q", ""),
            ],
        ] {
            let faults = circles_in(src, &crate_of(&files));
            assert_eq!(faults.len(), 1, "{files:?}: {faults:?}");
        }
    }

    #[test]
    fn one_way_names_tests_and_look_alikes_are_not_circles() {
        let src = Path::new("src");
        for files in [
            vec![("a", "use crate::b::X;"), ("b", "fn f() {}")],
            vec![
                ("a", "use crate::b;"),
                ("b", "fn f() {}\n#[cfg(test)]\nmod tests { use crate::a; }"),
            ],
            vec![
                ("a", "use crate::b;"),
                ("b", "let s = \"mycrate::a\"; other_crate::a();"),
            ],
            vec![
                ("t::x", "use super::y;"),
                ("t::y", "use crate::x;"),
                ("t", ""),
                ("x", ""),
            ],
        ] {
            assert!(circles_in(src, &crate_of(&files)).is_empty(), "{files:?}");
        }
    }
}
