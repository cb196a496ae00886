//! What a run was given: the objects its repository held when Switchboard made it, before the
//! run started. Recorded then, outside the run's reach, as a listing (`<run dir>/given`: every
//! object's name, kind and size) and a repository of the run's start's structure
//! (`<run dir>/given.git`: every tree and commit, the blobs of its symbolic links, the stub).
//! Keeping reads the run's start from these and never from the base's objects, so what it
//! answers depends only on what the run was given and what it wrote.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agents::sandbox::STUB_TEXT;

use super::WorkspaceError;
use super::git::{Git, GitError};
use super::tree::Entry;

/// The `cat-file --batch-check` format of a listing.
pub(super) const SIZED: &str = "--batch-check=%(objectname) %(objecttype) %(objectsize)";

/// Records what the run's repository (`run_git`, just made from a base of `object_format`
/// whose tree is `tree`) holds: the listing at `listing`, and the structure repository at
/// `store`. Called before the run starts.
pub(super) async fn record(
    run_git: &Git,
    object_format: &str,
    tree: &[Entry],
    listing_path: &Path,
    store: &Path,
) -> Result<(), GitError> {
    let listing = run_git
        .run(["cat-file", "--batch-all-objects", SIZED])
        .await?;
    let write = |path: PathBuf, bytes: &[u8]| {
        std::fs::write(&path, bytes).map_err(|e| GitError {
            command: "record".to_owned(),
            detail: format!("{}: {e}", path.display()),
        })
    };
    write(listing_path.to_owned(), &listing)?;
    let stub = run_git
        .input(["hash-object", "--stdin"], STUB_TEXT.as_bytes().to_vec())
        .await
        .map(|out| String::from_utf8_lossy(&out).trim().to_owned())?;
    let links: std::collections::HashSet<&str> = tree
        .iter()
        .filter(|e| e.is_symlink())
        .map(|e| e.oid.as_str())
        .collect();
    let mut structure = String::new();
    for line in String::from_utf8_lossy(&listing).lines() {
        let mut parts = line.split(' ');
        let (Some(oid), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        if kind != "blob" || links.contains(oid) || oid == stub {
            structure.push_str(oid);
            structure.push('\n');
        }
    }
    Git::init(store, object_format, true).await?;
    run_git
        .pipe(
            &["pack-objects", "--stdout", "-q"],
            structure.into_bytes(),
            &Git::at(store),
            &["index-pack", "--stdin"],
        )
        .await
        .map(drop)
}

/// An object's kind, as git names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Blob,
    Tree,
    Commit,
    Tag,
}

impl Kind {
    pub(super) fn parse(word: &str) -> Option<Kind> {
        match word {
            "blob" => Some(Kind::Blob),
            "tree" => Some(Kind::Tree),
            "commit" => Some(Kind::Commit),
            "tag" => Some(Kind::Tag),
            _ => None,
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Blob => "blob",
            Kind::Tree => "tree",
            Kind::Commit => "commit",
            Kind::Tag => "tag",
        }
    }
}

/// One object of a listing: its kind and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sized {
    pub(super) kind: Kind,
    pub(super) size: u64,
}

/// A `cat-file --batch-check` listing ([`SIZED`]) as a map; `<oid> missing` lines are left
/// out, and anything else that does not read is `None`.
pub(super) fn parse_listing(listing: &[u8]) -> Option<HashMap<String, Sized>> {
    let mut found = HashMap::new();
    for line in String::from_utf8_lossy(listing).lines() {
        match line.split(' ').collect::<Vec<_>>().as_slice() {
            [_, "missing"] => {}
            [oid, kind, size] => {
                let sized = Sized {
                    kind: Kind::parse(kind)?,
                    size: size.parse().ok()?,
                };
                found.insert((*oid).to_owned(), sized);
            }
            _ => return None,
        }
    }
    Some(found)
}

/// What the run was given, read back when it ends.
pub(super) struct Given {
    objects: HashMap<String, Sized>,
    /// The structure repository's object directory.
    pub(super) store: PathBuf,
    /// The names [`Given::store`] holds.
    stored: std::collections::HashSet<String>,
}

impl Given {
    /// Reads what [`record`] wrote at `path` and `given` (Switchboard's own files; anything
    /// else is a fault).
    pub(super) async fn load(path: &Path, given: &Path) -> Result<Given, WorkspaceError> {
        let fault = |why: String| WorkspaceError::KeepFault(format!("{}: {why}", path.display()));
        let listing = tokio::fs::read(&path)
            .await
            .map_err(|e| fault(e.to_string()))?;
        let objects =
            parse_listing(&listing).ok_or_else(|| fault("the listing does not read".to_owned()))?;
        let stored = Git::at(given)
            .run(["cat-file", "--batch-all-objects", SIZED])
            .await
            .map_err(|e| WorkspaceError::KeepFault(e.to_string()))?;
        let stored = parse_listing(&stored)
            .ok_or_else(|| fault("the structure repository does not list".to_owned()))?
            .into_keys()
            .collect();
        Ok(Given {
            objects,
            store: given.join("objects"),
            stored,
        })
    }

    /// Whether the run was given an object of this name.
    pub(super) fn names(&self, oid: &str) -> bool {
        self.objects.contains_key(oid)
    }

    /// Whether the run was given exactly this object: its name, kind and size.
    pub(super) fn holds(&self, oid: &str, sized: Sized) -> bool {
        self.objects.get(oid) == Some(&sized)
    }

    /// Whether the run was given a blob of this name.
    pub(super) fn has_blob(&self, oid: &str) -> bool {
        self.objects.get(oid).is_some_and(|o| o.kind == Kind::Blob)
    }

    /// Whether the structure repository holds it (a tree, a commit, a link's blob, the stub).
    pub(super) fn stores(&self, oid: &str) -> bool {
        self.stored.contains(oid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_parse_and_bad_ones_do_not() {
        let listing = parse_listing(b"aa blob 12\nbb tree 40\ncc missing\n").unwrap();
        assert_eq!(listing.len(), 2);
        assert_eq!(
            listing["aa"],
            Sized {
                kind: Kind::Blob,
                size: 12
            }
        );
        assert!(parse_listing(b"aa blob x\n").is_none());
        assert!(parse_listing(b"aa thing 1\n").is_none());
        assert!(parse_listing(b"aa blob 1 2\n").is_none());
        assert_eq!(parse_listing(b"").unwrap().len(), 0);
    }
}
