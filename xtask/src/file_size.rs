//! Files that each do one thing: no Rust source file has more than 700 lines before its unit
//! tests (the first `#[cfg(test)]` at the start of a line). A file past it holds more than one
//! concern; split it by what its parts do (as `server/src/config/` is split by section).
//! Integration tests, benches and examples count whole: they have no unit-test module.

use std::path::Path;

use anyhow::Result;

pub const MAX_LINES: usize = 700;

/// One line per `.rs` file git tracks that is over the limit (a failed listing is an error,
/// never an empty pass).
pub fn long_files(root: &Path) -> Result<Vec<String>> {
    let mut faults = Vec::new();
    let sources = crate::references::tracked_text_files(root)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"));
    for name in sources {
        let Ok(text) = std::fs::read_to_string(root.join(&name)) else {
            continue; // listed but deleted in the work tree
        };
        let lines = lines_before_tests(&text);
        if lines > MAX_LINES {
            faults.push(format!(
                "{} has {lines} lines before its unit tests, more than {MAX_LINES}: split it by what its parts do",
                name.display()
            ));
        }
    }
    Ok(faults)
}

fn lines_before_tests(text: &str) -> usize {
    crate::tidy::without_tests(text).lines().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_tests_do_not_count_and_the_rest_does() {
        let body = "fn f() {}\n".repeat(MAX_LINES);
        assert_eq!(lines_before_tests(&body), MAX_LINES);
        let with_tests = format!("{body}#[cfg(test)]\nmod tests {{\n{body}}}\n");
        assert_eq!(lines_before_tests(&with_tests), MAX_LINES);
        let longer = format!("{body}fn g() {{}}\n#[cfg(test)]\nmod tests {{}}\n");
        assert_eq!(lines_before_tests(&longer), MAX_LINES + 1);
    }

    #[test]
    fn no_source_file_of_the_workspace_is_too_long() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(long_files(root).unwrap(), Vec::<String>::new());
    }
}
