//! The paths of a repository that git on a person's machine runs or reads as config when
//! they check out, merge, commit or ask the status of a run's branch, worked out from the
//! base repository's own effective config and tree. A run may read them, never change them:
//! they are read-only in its sandbox, refused by the file tools, never kept on its branch and
//! refused again at the base's gate, like `.switchboard/`.
//!
//! - What the base's config names inside the working tree: the files it reads as config (an
//!   `include.path` or `includeIf` target, listed as the origin of the values read from it),
//!   and every path a value names that stays inside the tree (`core.hooksPath`'s directory, a
//!   `core.fsmonitor` program, a filter's or alias's script), whether the tree holds it yet
//!   or not.
//! - The config of the hook managers a repository's hooks run, and Claude Code's project
//!   settings and MCP servers ([`HOOK_MANAGERS`]).
//! - The project's own list (`protected` in `.switchboard/agent-policy.toml`).
//! - Where a symbolic link of the base among them leads, inside the tree.
//!
//! What a build or an editor runs (`.vscode/tasks.json`, `.cargo/config.toml`, `.envrc`,
//! `package.json`'s scripts, the code itself) is not here: that is code review's to see.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::git::Git;
use super::tree::Entry;

/// Files and directories of the repository's root that hook managers read as the hooks to
/// run (husky, pre-commit, lefthook, overcommit, simple-git-hooks), the directory teams
/// point `core.hooksPath` at by convention, and what Claude Code runs from a checkout it is
/// opened in (`.claude/`'s settings hold hooks, `.mcp.json` the MCP servers it starts).
pub(crate) const HOOK_MANAGERS: [&str; 22] = [
    ".claude",
    ".mcp.json",
    ".githooks",
    ".git-hooks",
    ".husky",
    ".pre-commit-config.yaml",
    ".pre-commit-config.yml",
    ".pre-commit-hooks.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    "lefthook.json",
    "lefthook.toml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook",
    ".lefthook-local",
    ".overcommit.yml",
    ".simple-git-hooks.json",
    ".simple-git-hooks.js",
    ".simple-git-hooks.cjs",
];

/// Config whose values name no program or file of the tree (where to fetch, what to merge,
/// who commits): left out, so a path-shaped value there never protects a path by chance.
const NAMING_NOTHING: [&str; 4] = ["remote.", "branch.", "user.", "url."];

/// The protected paths of a base: the project's own list, the hook managers', and what the
/// base repository's effective config names inside `worktree` (none for a bare mirror), each
/// with where a link of `tree` among them leads. `git` reads the config (the operator's
/// global and system config too: the person merging a `--path` repo's branch is on this
/// machine); a config that cannot be read protects what the rest names.
pub(crate) async fn guarded(
    git: &Git,
    worktree: Option<&Path>,
    project: &[String],
    tree: &[Entry],
) -> Vec<String> {
    let mut paths: BTreeSet<String> = project.iter().cloned().collect();
    paths.extend(HOOK_MANAGERS.iter().map(|p| (*p).to_owned()));
    if let Some(worktree) = worktree {
        match git
            .clone()
            .operator()
            .run(["config", "--list", "--show-origin", "--includes", "-z"])
            .await
        {
            Ok(listing) => paths.extend(named_by_config(&listing, worktree)),
            Err(e) => {
                tracing::warn!(error = %e, "[workspace] the base's config could not be read; only the hook managers' files and the project's list are protected");
            }
        }
    }
    let mut with_targets = paths.clone();
    for path in &paths {
        let Some((link, rest)) = link_on_way(path, tree) else {
            continue;
        };
        let Ok(target) = git.run(["cat-file", "blob", &link.oid]).await else {
            continue;
        };
        let target = String::from_utf8_lossy(&target).into_owned();
        let parent = link.path.rsplit_once('/').map_or("", |(dir, _)| dir);
        if let Some(led) = in_tree(parent, &target) {
            with_targets.insert(if rest.is_empty() {
                led
            } else {
                format!("{led}/{rest}")
            });
        }
    }
    with_targets.into_iter().collect()
}

/// The paths inside `worktree` that a `config --list --show-origin -z` listing reads as
/// config or names in a value.
pub(crate) fn named_by_config(listing: &[u8], worktree: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let text = String::from_utf8_lossy(listing);
    let mut records = text.split('\0');
    while let (Some(origin), Some(entry)) = (records.next(), records.next()) {
        let Some(file) = origin.strip_prefix("file:") else {
            continue;
        };
        if let Some(inside) = relative_inside(Path::new(file), worktree, worktree) {
            found.insert(inside);
        }
        let (key, value) = entry.split_once('\n').unwrap_or((entry, ""));
        if NAMING_NOTHING.iter().any(|prefix| key.starts_with(prefix)) {
            continue;
        }
        // An include is read from the directory of the file that names it, whether its
        // condition holds now or not (`onbranch:switchboard/**` holds once the person checks
        // the run's branch out).
        let include =
            key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"));
        if include && !value.starts_with('~') {
            let named_in = worktree.join(file);
            let from = named_in.parent().unwrap_or(worktree);
            if let Some(inside) = relative_inside(Path::new(value), from, worktree) {
                found.insert(inside);
            }
            continue;
        }
        for word in value.split(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            let word = word.trim_start_matches('!');
            if !(word.contains('/') || word.starts_with('.')) || word.starts_with('~') {
                continue;
            }
            if let Some(inside) = relative_inside(Path::new(word), worktree, worktree) {
                found.insert(inside);
            }
        }
    }
    found
}

/// `path` (absolute, or relative to `from`) as a path relative to `worktree`, read lexically,
/// when it lies inside it and outside its `.git`; the working tree itself is not a path of it.
fn relative_inside(path: &Path, from: &Path, worktree: &Path) -> Option<String> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        from.join(path)
    };
    let mut clean = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    let relative = clean.strip_prefix(worktree).ok()?;
    let first = relative.components().next()?;
    if first.as_os_str() == ".git" {
        return None;
    }
    let text = relative.to_str()?.trim_end_matches('/').to_owned();
    (!text.is_empty()).then_some(text)
}

/// `target` read from the directory `parent` of the tree, lexically; `None` when it is
/// absolute or climbs out of the tree.
fn in_tree(parent: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut at: Vec<&str> = parent.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                at.pop()?;
            }
            part => at.push(part),
        }
    }
    (!at.is_empty()).then(|| at.join("/"))
}

/// The symbolic link of the base's tree on the way to `path` (or `path` itself), and what of
/// `path` lies past it.
fn link_on_way<'a>(path: &str, tree: &'a [Entry]) -> Option<(&'a Entry, String)> {
    let parts: Vec<&str> = path.split('/').collect();
    (1..=parts.len()).find_map(|end| {
        let prefix = parts.get(..end)?.join("/");
        let link = tree.iter().find(|e| e.is_symlink() && e.path == prefix)?;
        Some((link, parts.get(end..)?.join("/")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(records: &[(&str, &str)]) -> Vec<u8> {
        records
            .iter()
            .flat_map(|(origin, entry)| format!("{origin}\0{entry}\0").into_bytes())
            .collect()
    }

    #[test]
    fn what_the_config_names_inside_the_tree_is_protected() {
        let worktree = Path::new("/home/u/web");
        let found = named_by_config(
            &listing(&[
                ("file:/home/u/web/.git/config", "core.hookspath\n.githooks"),
                (
                    "file:/home/u/web/.git/config",
                    "include.path\n../.gitconfig.shared",
                ),
                (
                    "file:/home/u/web/.git/../.gitconfig.shared",
                    "core.fsmonitor\n./tools/fsm.sh",
                ),
                (
                    "file:/home/u/web/.git/config",
                    "alias.lint\n!./scripts/lint.sh --fix",
                ),
                (
                    "file:/home/u/web/.git/config",
                    "filter.x.clean\nsh \"bin/clean\" %f",
                ),
                (
                    "file:/home/u/.gitconfig",
                    "core.hookspath\n/home/u/web/hooks",
                ),
                ("file:/home/u/.gitconfig", "core.excludesfile\n~/.gitignore"),
                (
                    "file:/home/u/web/.git/config",
                    "remote.origin.url\n./mirror/web.git",
                ),
                ("file:/home/u/web/.git/config", "core.editor\n../outside.sh"),
                ("command line:", "core.hookspath\n/dev/null"),
                // Not active now (no origin lists it), active on the run's branch.
                (
                    "file:/home/u/web/.git/config",
                    "includeif.onbranch:switchboard/**.path\n../team.gitconfig",
                ),
                (
                    "file:.git/config",
                    "include.path\n../conf/relative.gitconfig",
                ),
            ]),
            worktree,
        );
        let found: Vec<&str> = found.iter().map(String::as_str).collect();
        assert_eq!(
            found,
            [
                ".gitconfig.shared",
                ".githooks",
                "bin/clean",
                "conf/relative.gitconfig",
                "hooks",
                "scripts/lint.sh",
                "team.gitconfig",
                "tools/fsm.sh"
            ]
        );
        // A listing that does not read protects nothing more, and never panics.
        assert!(named_by_config(b"file:/x\0", worktree).is_empty());
        assert!(named_by_config(b"\xff\xfe\0\0\0", worktree).is_empty());
    }

    #[test]
    fn a_link_on_the_way_to_a_protected_path_is_found() {
        let entry = |mode: &str, path: &str| Entry {
            mode: mode.into(),
            kind: "blob".into(),
            oid: "00".into(),
            path: path.into(),
        };
        let tree = vec![entry("120000", "tools/hooks"), entry("100644", "README.md")];
        let (link, rest) = link_on_way("tools/hooks/post-merge", &tree).unwrap();
        assert_eq!(
            (link.path.as_str(), rest.as_str()),
            ("tools/hooks", "post-merge")
        );
        let (link, rest) = link_on_way("tools/hooks", &tree).unwrap();
        assert_eq!((link.path.as_str(), rest.as_str()), ("tools/hooks", ""));
        assert!(link_on_way("README.md", &tree).is_none());
        assert_eq!(in_tree("tools", "../ci/hooks").as_deref(), Some("ci/hooks"));
        assert_eq!(in_tree("", "../outside"), None);
        assert_eq!(in_tree("tools", "/etc"), None);
    }
}
