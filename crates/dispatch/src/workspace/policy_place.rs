//! Where the project's policy is in the base's tree, found as a case-insensitive checkout
//! (macOS, Windows) would find it: an entry another spelling of `.switchboard` or of
//! `agent-policy.toml` is what such a checkout reads as the policy, so it is never passed
//! over as no policy. Only the exact file, committed as a file in a directory, is read.

use agents::names::fold;
use agents::sandbox::POLICY_DIR;

use super::tree::Entry;

/// The policy file's name inside [`POLICY_DIR`].
const POLICY_NAME: &str = "agent-policy.toml";

/// Why the base's policy cannot be read as it is committed: the entry, spelled as the
/// repository spells it, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misplaced {
    pub(crate) path: String,
    pub(crate) why: String,
}

/// The policy file's entry (none: the project has no policy), or why the tree holds one that
/// cannot be read as committed.
pub(crate) fn policy_entry(tree: &[Entry]) -> Result<Option<&Entry>, Misplaced> {
    let misplaced = |entry: &Entry, why: &str| Misplaced {
        path: entry.path.clone(),
        why: why.to_owned(),
    };
    let dir_key = fold(POLICY_DIR);
    let mut dir = None;
    for entry in tree.iter().filter(|e| !e.path.contains('/')) {
        if fold(&entry.path) != dir_key {
            continue;
        }
        if entry.path != POLICY_DIR {
            return Err(misplaced(
                entry,
                "is another spelling of .switchboard, which a case-insensitive checkout reads as the policy's directory; rename it .switchboard (the policy is .switchboard/agent-policy.toml)",
            ));
        }
        if entry.kind != "tree" {
            let what = match entry.mode.as_str() {
                "120000" => "a symbolic link",
                "160000" => "a submodule",
                _ => "a file",
            };
            return Err(misplaced(
                entry,
                &format!(
                    "is {what}; .switchboard must be a directory committed in the repository, holding agent-policy.toml"
                ),
            ));
        }
        dir = Some(entry);
    }
    if dir.is_none() {
        return Ok(None);
    }
    let name_key = fold(POLICY_NAME);
    let mut found = None;
    for entry in tree {
        let Some(name) = entry
            .path
            .strip_prefix(POLICY_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|rest| !rest.contains('/'))
        else {
            continue;
        };
        if fold(name) != name_key {
            continue;
        }
        if name != POLICY_NAME {
            return Err(misplaced(
                entry,
                "is another spelling of agent-policy.toml, which a case-insensitive checkout reads as the policy; rename it .switchboard/agent-policy.toml",
            ));
        }
        if entry.kind != "blob" || entry.is_symlink() {
            return Err(misplaced(
                entry,
                "must be a file committed as it is, not a link, a directory or a submodule",
            ));
        }
        found = Some(entry);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mode: &str, path: &str) -> Entry {
        let kind = match mode {
            "040000" => "tree",
            "160000" => "commit",
            _ => "blob",
        };
        Entry {
            mode: mode.into(),
            kind: kind.into(),
            oid: "00".into(),
            path: path.into(),
        }
    }

    #[test]
    fn the_policy_is_found_at_its_place_and_nowhere_else() {
        let tree = vec![
            entry("040000", ".switchboard"),
            entry("100644", ".switchboard/README.md"),
            entry("100644", ".switchboard/agent-policy.toml"),
            entry("100644", "src/.switchboard"),
        ];
        let found = policy_entry(&tree).unwrap().unwrap();
        assert_eq!(found.path, ".switchboard/agent-policy.toml");
        assert_eq!(policy_entry(&[entry("100644", "README.md")]).unwrap(), None);
        assert_eq!(
            policy_entry(&[entry("040000", ".switchboard")]).unwrap(),
            None
        );
    }

    #[test]
    fn another_spelling_or_another_kind_is_refused_naming_the_entry() {
        for (tree, named) in [
            (
                vec![
                    entry("040000", ".Switchboard"),
                    entry("100644", ".Switchboard/agent-policy.toml"),
                ],
                ".Switchboard",
            ),
            (vec![entry("040000", ".switchboard.")], ".switchboard."),
            (
                vec![entry("040000", ".switch\u{200c}board")],
                ".switch\u{200c}board",
            ),
            (
                vec![entry("040000", ".\u{17f}witchboard")],
                ".\u{17f}witchboard",
            ),
            (
                vec![
                    entry("040000", ".switchboard"),
                    entry("100644", ".switchboard/agent-policy.toml"),
                    entry("040000", ".SWITCHBOARD"),
                ],
                ".SWITCHBOARD",
            ),
            (vec![entry("120000", ".switchboard")], ".switchboard"),
            (vec![entry("160000", ".switchboard")], ".switchboard"),
            (vec![entry("100644", ".switchboard")], ".switchboard"),
            (
                vec![
                    entry("040000", ".switchboard"),
                    entry("100644", ".switchboard/Agent-Policy.TOML"),
                ],
                ".switchboard/Agent-Policy.TOML",
            ),
            (
                vec![
                    entry("040000", ".switchboard"),
                    entry("120000", ".switchboard/agent-policy.toml"),
                ],
                ".switchboard/agent-policy.toml",
            ),
            (
                vec![
                    entry("040000", ".switchboard"),
                    entry("040000", ".switchboard/agent-policy.toml"),
                ],
                ".switchboard/agent-policy.toml",
            ),
        ] {
            let refused = policy_entry(&tree).unwrap_err();
            assert_eq!(refused.path, named, "{refused:?}");
            let said = format!("{}: {}", refused.path, refused.why);
            assert!(said.contains("agent-policy.toml"), "{said}");
        }
    }
}
