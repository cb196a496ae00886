//! File names as a case-insensitive file system sees them: one spelling per name for every
//! spelling macOS (HFS+, APFS) or Windows (NTFS) takes as it. The workspace's protected
//! names (deny_read, `.switchboard/`) are compared this way wherever they are matched, so a
//! name in another case or Unicode form never slips past a rule written for it. Folding
//! more names together than one file system does only protects more, never less.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// One component of a path as one name for every spelling a case-insensitive file system
/// takes as it: decomposed (NFD, as HFS+ stores names) with its combining marks dropped, the
/// code points HFS+ ignores dropped, trailing dots and spaces dropped (NTFS), and case-folded
/// through upper and then lower case (so `ſ`, `ı` and `İ` meet `s` and `i`).
pub fn fold(part: &str) -> String {
    // The code points HFS+ drops from a name (git's own list for `.git`).
    let ignored = |c: char| matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}');
    let bare: String = part
        .nfd()
        .filter(|c| !ignored(*c) && !is_combining_mark(*c))
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        // Twice: `ẞ` lowers to `ß`, which only then uppers to `SS`.
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect();
    bare.trim_end_matches(['.', ' ']).to_owned()
}

/// A relative path, `/`-separated, folded component by component ([`fold`]); empty and `.`
/// components are dropped.
pub fn fold_path(path: &str) -> String {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(fold)
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether two relative paths name one file on a case-insensitive file system.
pub fn same_path(a: &str, b: &str) -> bool {
    fold_path(a) == fold_path(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_a_case_insensitive_file_system_takes_as_one_fold_together() {
        for (a, b) in [
            (
                "config/production-secrets.toml",
                "CONFIG/Production-Secrets.TOML",
            ),
            (".switchboard", ".\u{17f}witchboard"),
            (".switchboard", ".switch\u{200c}board"),
            ("secrets.toml", "secrets.toml. "),
            ("stra\u{df}e", "STRASSE"),
            ("\u{1e9e}", "ss"),
            ("caf\u{e9}", "cafe\u{301}"),
            ("config//a", "./config/a"),
        ] {
            assert!(same_path(a, b), "{a:?} and {b:?}");
        }
        for (a, b) in [("config/a", "config/b"), ("a/b", "a"), ("env", ".env")] {
            assert!(!same_path(a, b), "{a:?} and {b:?}");
        }
    }
}
