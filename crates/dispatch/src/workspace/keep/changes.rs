//! Which of a run's changes may be kept: never a denied or protected name, a file that makes
//! git run or fetch, or a symbolic link out of the project or to a protected name.

use agents::names::fold;
use agents::sandbox::POLICY_DIR;

use crate::workspace::WorkspaceError;
use crate::workspace::base::Base;
use crate::workspace::git::Git;

use super::fail;

/// One change of a tree against the base's, from `diff-tree -r -z --raw`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub(super) new_mode: String,
    pub(super) new_oid: String,
    pub(super) deleted: bool,
    pub(super) path: String,
}

/// `:<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0`…
pub(super) fn parse_changes(raw: &[u8]) -> Option<Vec<Change>> {
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut out = Vec::new();
    while let Some(meta) = fields.next() {
        let meta = std::str::from_utf8(meta).ok()?.strip_prefix(':')?;
        let path = std::str::from_utf8(fields.next()?).ok()?;
        let parts: Vec<&str> = meta.split(' ').collect();
        let [_, new_mode, _, new_oid, status] = parts.as_slice() else {
            return None;
        };
        out.push(Change {
            new_mode: (*new_mode).to_owned(),
            new_oid: (*new_oid).to_owned(),
            deleted: status.starts_with('D'),
            path: path.to_owned(),
        });
    }
    Some(out)
}

/// Whether a change at `path` would touch a denied name or `.switchboard/`: the name itself,
/// anything below it, or a directory above it. Names are compared component by component
/// as a case-insensitive file system would see them (macOS and Windows checkouts of the
/// branch): letter case (full Unicode, `ſ` and `K` among it), canonical composition, the
/// characters HFS+ ignores and NTFS's trailing dots and spaces do not make a name new, and a
/// component shaped like an 8.3 short name (`PRODUC~1.TOM`) is taken as naming any protected
/// component at its place, since a Windows volume may have given it that alias. A written
/// path is also split at `\\` and each component cut at `:`, as Windows reads them.
pub(super) fn protected(path: &str, names: &[String]) -> bool {
    // Windows also splits on `\`, and opens `name:stream` (`name::$DATA` is the file itself).
    let written: Vec<String> = path
        .split(['/', '\\'])
        .map(|part| fold(part.split_once(':').map_or(part, |(name, _)| name)))
        .collect();
    let related = |name: &str| {
        let name: Vec<String> = name.split('/').map(fold).collect();
        written
            .iter()
            .zip(&name)
            .all(|(w, p)| w == p || short_name_shaped(w))
    };
    related(POLICY_DIR) || names.iter().any(|d| related(d))
}

/// Whether `path` is a file that makes git on the user's machine run or reach what it names
/// when the branch is checked out: `.gitattributes` (a `filter=`, `diff=` or `merge=`
/// driver; `filter=lfs` runs git-lfs), `.lfsconfig` (where git-lfs fetches from, with the
/// user's credentials) and `.gitmodules` (URLs `submodule update` clones). A run's change to
/// one is never kept, in any directory.
pub(super) fn runs_programs(path: &str) -> bool {
    let last = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let last = fold(last.split_once(':').map_or(last, |(name, _)| name));
    // An 8.3 short name (`GITATT~1`) may be the alias a Windows volume gave one of them.
    matches!(
        last.as_str(),
        ".gitattributes" | ".lfsconfig" | ".gitmodules"
    ) || short_name_shaped(&last)
}

/// The paths that are symbolic links once `changes` apply to the base (the base's links not
/// changed into something else, and every link the changes make), folded as a
/// case-insensitive file system sees them: `UP/..` follows the link `up` there.
pub(super) fn links_after(base: &Base, changes: &[Change]) -> std::collections::HashSet<String> {
    let changed: std::collections::HashSet<&str> =
        changes.iter().map(|c| c.path.as_str()).collect();
    base.tree
        .iter()
        .filter(|e| e.is_symlink() && !changed.contains(e.path.as_str()))
        .map(|e| agents::names::fold_path(&e.path))
        .chain(
            changes
                .iter()
                .filter(|c| !c.deleted && c.new_mode == "120000")
                .map(|c| agents::names::fold_path(&c.path)),
        )
        .collect()
}

/// The longest symbolic link target kept (Linux's PATH_MAX).
pub(super) const MAX_LINK_TARGET: usize = 4096;

/// The target of a change that makes `path` a symbolic link, read from the run's blob (at
/// most [`MAX_LINK_TARGET`] bytes; a longer or unreadable one is a target that is refused).
pub(super) async fn link_target(
    git: &Git,
    change: &Change,
) -> Result<Option<String>, WorkspaceError> {
    if change.deleted || change.new_mode != "120000" {
        return Ok(None);
    }
    let size = git
        .text(["cat-file", "-s", &change.new_oid])
        .await
        .ok()
        .and_then(|s| s.parse::<usize>().ok());
    if size.is_none_or(|size| size > MAX_LINK_TARGET) {
        // Not a link anyone can follow: refused as one that escapes.
        return Ok(Some("/".to_owned()));
    }
    let bytes = git
        .run(["cat-file", "blob", &change.new_oid])
        .await
        .map_err(fail)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Why a symbolic link at `path` to `target` is not kept, if it is not: an absolute target
/// (or a Windows one), one that leaves the repository, or one that reaches a protected name
/// or `.git`, read lexically from the link's directory. A checkout of the branch would
/// otherwise hand whoever follows the link (an editor, a build, a web server serving the
/// tree) a file the run was told to keep out of, or one outside the project.
pub(super) fn escaping_link(
    path: &str,
    target: &str,
    deny_read: &[String],
    links: &std::collections::HashSet<String>,
) -> Option<&'static str> {
    if target.is_empty()
        || target.starts_with(['/', '\\', '~'])
        || target.contains('\0')
        || target.as_bytes().get(1) == Some(&b':')
    {
        return Some("points outside the repository");
    }
    let mut at: Vec<&str> = path.split('/').collect();
    at.pop();
    for part in target.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return Some("points outside the repository");
                }
            }
            part => {
                at.push(part);
                // A link on the way (or at the end) is followed in a checkout, where `..`
                // after it climbs from its target: read lexically, a chain would hide that.
                if links.contains(&agents::names::fold_path(&at.join("/"))) {
                    return Some("goes through another link");
                }
            }
        }
    }
    if at.is_empty() {
        // The repository's root holds `.switchboard/` and every denied name.
        return Some("reaches a protected name");
    }
    let resolved = at.join("/");
    let reaches_git = at.iter().any(|p| fold(p) == ".git");
    (reaches_git || protected(&resolved, deny_read) || runs_programs(&resolved))
        .then_some("reaches a protected name")
}

/// Whether a folded component has the shape of a DOS 8.3 short name: up to six characters,
/// `~`, up to six digits, and an extension of up to three characters.
pub(super) fn short_name_shaped(part: &str) -> bool {
    let Some((stem, rest)) = part.split_once('~') else {
        return false;
    };
    let (digits, extension) = rest.split_once('.').unwrap_or((rest, ""));
    (1..=6).contains(&stem.chars().count())
        && (1..=6).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && extension.chars().count() <= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse_and_bad_listings_do_not() {
        let raw = b":100644 100644 aa bb M\x00src/a.rs\x00:100644 000000 cc 00 D\x00gone\x00";
        let changes = parse_changes(raw).unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].path, "src/a.rs");
        assert!(!changes[0].deleted);
        assert!(changes[1].deleted);
        assert!(parse_changes(b":100644 aa M\x00x\x00").is_none());
        assert!(parse_changes(b":100644 100644 aa bb M\x00").is_none());
        assert!(parse_changes(b"100644 100644 aa bb M\x00x\x00").is_none());
        assert_eq!(parse_changes(b"").unwrap(), vec![]);
    }

    #[test]
    fn denied_names_and_the_policy_directory_are_protected_at_every_depth() {
        let deny = vec!["config/secret.toml".to_owned(), ".env".to_owned()];
        for path in [
            "config/secret.toml",
            "config/secret.toml/inner",
            "config",
            ".env",
            ".switchboard",
            ".switchboard/agent-policy.toml",
            ".switchboard/new",
            ".Switchboard/agent-policy.toml",
            ".SWITCHBOARD",
            ".switch\u{200c}board/agent-policy.toml",
            ".switchboard./agent-policy.toml",
            "Config/Secret.TOML",
            ".ENV",
            ".env ",
            ".\u{17f}witchboard/agent-policy.toml",
            "conf\u{131}g/secret.toml",
            "conf\u{130}g/SECRET.toml",
            "config/secret.to\u{301}ml",
            ".ENV\u{feff}",
            "SWITCH~1/agent-policy.toml",
            "CONFIG/SECRE~1.TOM",
            "CONFIG~2/secret.toml",
            "env~1",
            "config\\secret.toml",
            "config/secret.toml::$DATA",
            "config/secret.toml:hidden",
            ".switchboard:x/agent-policy.toml",
        ] {
            assert!(protected(path, &deny), "{path}");
        }
        for path in [
            "config/other.toml",
            "configs",
            ".envrc",
            "src/.switchboard-notes",
            "src/SWITCH~1/agent-policy.toml",
            "config/a~b",
            "backup~1234567",
            "config/secret~1.toml.old",
            "config/secret.toml.old:x",
        ] {
            assert!(!protected(path, &deny), "{path}");
        }
        // `ẞ`, `ß` and `ss` are one name to a case-insensitive file system.
        let deny = vec!["docs/stra\u{df}e.md".to_owned()];
        for path in [
            "docs/STRA\u{1e9e}E.md",
            "docs/strasse.md",
            "docs/STRASSE.MD",
        ] {
            assert!(protected(path, &deny), "{path}");
        }
    }
}
