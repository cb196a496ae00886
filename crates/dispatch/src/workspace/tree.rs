//! The base commit's tree as `git ls-tree -r -t` lists it: one [`Entry`] per file, link,
//! submodule and directory, recursively.

/// A tree entry of the base commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub mode: String,
    /// `blob`, `tree` or `commit` (a submodule).
    pub kind: String,
    pub oid: String,
    pub path: String,
}

impl Entry {
    pub fn is_symlink(&self) -> bool {
        self.mode == "120000"
    }
}

/// `ls-tree -r -t -z` output: `<mode> <type> <oid>\t<path>\0`…
pub(crate) fn parse_tree(listing: &[u8]) -> Option<Vec<Entry>> {
    listing
        .split(|b| *b == 0)
        .filter(|record| !record.is_empty())
        .map(|record| {
            let record = std::str::from_utf8(record).ok()?;
            let (meta, path) = record.split_once('\t')?;
            let mut parts = meta.split(' ');
            let (mode, kind, oid) = (parts.next()?, parts.next()?, parts.next()?);
            Some(Entry {
                mode: mode.to_owned(),
                kind: kind.to_owned(),
                oid: oid.to_owned(),
                path: path.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_listings_parse_and_bad_ones_do_not() {
        let listing =
            b"040000 tree aa\tsrc\x00100644 blob bb\tsrc/a b.rs\x00120000 blob cc\tlink\x00";
        let tree = parse_tree(listing).unwrap();
        assert_eq!(tree.len(), 3);
        assert_eq!(tree[1].path, "src/a b.rs");
        assert!(tree[2].is_symlink());
        assert!(parse_tree(b"100644 blob\x00").is_none());
        assert!(parse_tree(b"\xff\xfe\t\x00").is_none());
        assert_eq!(parse_tree(b"").unwrap(), vec![]);
    }
}
