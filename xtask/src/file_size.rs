//! Files that each do one thing: no Rust source file has more than 700 lines outside its
//! inline unit-test modules (`source::shipped_line_count`). A file past it holds more than one
//! concern; split it by what its parts do (as `server/src/config/` is split by section).

use std::path::{Path, PathBuf};

pub const MAX_LINES: usize = 700;

/// One line per `.rs` file of `tracked` (what git tracks) that is over the limit.
pub fn long_files(root: &Path, tracked: &[PathBuf]) -> Vec<String> {
    let mut faults = Vec::new();
    let sources = tracked
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"));
    for name in sources {
        let Ok(text) = std::fs::read_to_string(root.join(name)) else {
            continue; // listed but deleted in the work tree
        };
        let lines = crate::source::shipped_line_count(&text);
        if lines > MAX_LINES {
            faults.push(format!(
                "{} has {lines} lines outside its unit tests, more than {MAX_LINES}: split it by what its parts do",
                name.display()
            ));
        }
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> usize {
        crate::source::shipped_line_count(text)
    }

    #[test]
    fn unit_tests_do_not_count_and_the_rest_does() {
        let body = "fn f() {}\n".repeat(MAX_LINES);
        assert_eq!(lines(&body), MAX_LINES);
        let with_tests = format!("{body}#[cfg(test)]\nmod tests {{\n{body}}}\n");
        assert_eq!(lines(&with_tests), MAX_LINES);
        let longer = format!("{body}fn g() {{}}\n#[cfg(test)]\nmod tests {{}}\n");
        assert_eq!(lines(&longer), MAX_LINES + 1);
    }

    #[test]
    fn no_source_file_of_the_workspace_is_too_long() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let tracked = crate::references::tracked_files(root).unwrap();
        assert!(
            tracked.iter().any(|p| p.ends_with("main.rs")),
            "git listed the sources"
        );
        assert_eq!(long_files(root, &tracked), Vec::<String>::new());
    }
}
