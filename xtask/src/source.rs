//! What the architecture checks read of a source file: its text without inline unit-test
//! modules (line numbers kept), its lines outside them, word-bounded matches, and every `.rs`
//! file under a directory. Text, not the syntax tree: a check built on it names what rustfmt
//! writes, and says where it reads less.

use std::path::Path;

use anyhow::{Context, Result};

/// A source file's text without its inline unit-test modules (a `#[cfg(test)]` line, any
/// further attributes, then `mod … {` up to the `}` that closes it at the same indentation,
/// as rustfmt writes it): what the architecture checks read, since a test may reach anywhere.
/// A `#[cfg(test)]` on anything else (a helper, a `mod x;` line) removes nothing, and the
/// code after a test module is read. Each removed line is left empty, so a fault's line
/// number is its line in the file.
pub fn without_tests(text: &str) -> std::borrow::Cow<'_, str> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let in_tests = test_module_lines(&lines);
    if !in_tests.contains(&true) {
        return std::borrow::Cow::Borrowed(text);
    }
    let kept = lines.iter().zip(&in_tests).map(|(line, &test)| match test {
        true if line.ends_with('\n') => "\n",
        true => "",
        false => line,
    });
    std::borrow::Cow::Owned(kept.collect())
}

/// How many of a file's lines are outside its inline unit-test modules.
pub fn shipped_line_count(text: &str) -> usize {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    test_module_lines(&lines).iter().filter(|t| !**t).count()
}

/// For each line, whether it belongs to an inline unit-test module.
fn test_module_lines(lines: &[&str]) -> Vec<bool> {
    let mut in_tests = vec![false; lines.len()];
    let mut at = 0;
    while at < lines.len() {
        match test_module_end(lines, at) {
            Some(end) => {
                if let Some(module) = in_tests.get_mut(at..=end) {
                    module.fill(true);
                }
                at = end + 1;
            }
            None => at += 1,
        }
    }
    in_tests
}

/// Each line's code outside a `//` comment.
pub fn code_lines(code: &str) -> impl Iterator<Item = &str> {
    code.lines()
        .map(|line| line.split("//").next().unwrap_or(line))
}

/// What follows each place `word` starts in `line` with no letter, digit or `_` before it
/// (so `kv_store::` is not `store::` and `FakeCaller` is not `Caller`).
pub fn after_word<'a>(line: &'a str, word: &'a str) -> impl Iterator<Item = &'a str> {
    line.match_indices(word).filter_map(move |(at, _)| {
        let before = line.get(..at).and_then(|b| b.chars().next_back());
        (!before.is_some_and(is_word_char)).then(|| line.get(at + word.len()..).unwrap_or(""))
    })
}

pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// When `lines[at]` is `#[cfg(test)]` opening an inline module, the index of its last line.
fn test_module_end(lines: &[&str], at: usize) -> Option<usize> {
    let cfg = lines.get(at)?;
    if cfg.trim() != "#[cfg(test)]" {
        return None;
    }
    let indent = cfg.len() - cfg.trim_start().len();
    let mut head = at + 1;
    while lines.get(head)?.trim_start().starts_with("#[") {
        head += 1;
    }
    let item = lines.get(head)?.trim();
    let item = match item.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => rest.split_once(')')?.1.trim_start(),
        Some(rest) => rest.trim_start(),
        None => item,
    };
    if !item.starts_with("mod ") || !item.contains('{') {
        return None;
    }
    if item.ends_with('}') {
        return Some(head); // `mod tests { … }` on one line
    }
    let close = format!("{}}}", " ".repeat(indent));
    (head + 1..lines.len()).find(|&i| lines.get(i).is_some_and(|l| l.trim_end() == close))
}

/// Every `.rs` file under `dir`, with its text.
pub fn rust_sources(dir: &Path) -> Result<Vec<(std::path::PathBuf, String)>> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                found.push((path, text));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_inline_test_module_is_cut_and_what_follows_other_test_items_is_read() {
        let live = "#[cfg(test)]\nfn helper() {}\n\nfn shipped() { std::fs::read(\"x\"); }\n";
        assert_eq!(without_tests(live), live);
        let declared = "#[cfg(test)]\nmod cases;\npub use a::b;\n";
        assert_eq!(without_tests(declared), declared);
        let inline = "fn shipped() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
        assert_eq!(without_tests(inline), "fn shipped() {}\n\n\n\n\n");
        let first = "#[cfg(test)]\n#[allow(x)]\npub(super) mod tests {\n}\n";
        assert_eq!(without_tests(first), "\n\n\n\n");
        let after = "#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n\npub enum Live {}\n";
        assert_eq!(without_tests(after), "\n\n\n\n\npub enum Live {}\n");
        let one_line = "#[cfg(test)]\nmod t { fn b() {} }\nfn live() {}";
        assert_eq!(without_tests(one_line), "\n\nfn live() {}");
        let below =
            "#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn live() { std::fs::read(\"x\"); }\n";
        assert_eq!(shipped_line_count(below), 1);
        assert_eq!(shipped_line_count(inline), 1);
        assert_eq!(shipped_line_count(live), 4);
    }

    #[test]
    fn a_word_is_matched_only_at_its_start() {
        let after: Vec<&str> = after_word("kv_store::a store::b", "store::").collect();
        assert_eq!(after, ["b"]);
        assert_eq!(after_word("FakeCaller::new", "Caller").count(), 0);
    }
}
