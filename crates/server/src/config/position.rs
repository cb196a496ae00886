//! Where a fault is: line and column from a byte offset, and the dotted key path there, read
//! from the parser's spans. So every fault names file, line, column and key.

use toml::de::{DeTable, DeValue};

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The line and column of the deepest key along `path` that the text defines.
pub fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut found = None;
    for segment in path {
        // A missing key is located at the deepest table that holds it.
        let Some((key, value)) = table.get_key_value(*segment) else {
            break;
        };
        found = Some(line_col(text, key.span().start));
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    found
}

/// The dotted path of the deepest key whose name or value holds `offset`
/// (`server.listen`), or `None` when the offset is in no key.
pub fn path_at(text: &str, offset: usize) -> Option<String> {
    let root = DeTable::parse(text).ok()?;
    let mut best: Option<Vec<String>> = None;
    walk(root.get_ref(), &mut Vec::new(), offset, &mut best);
    best.map(|p| dotted(&p))
}

fn walk(
    table: &DeTable<'_>,
    path: &mut Vec<String>,
    offset: usize,
    best: &mut Option<Vec<String>>,
) {
    for (key, value) in table.iter() {
        path.push(key.get_ref().to_string());
        let holds = key.span().contains(&offset) || value.span().contains(&offset);
        if holds && best.as_ref().is_none_or(|b| b.len() < path.len()) {
            *best = Some(path.clone());
        }
        match value.get_ref() {
            DeValue::Table(t) => walk(t, path, offset, best),
            // An array of tables (`[[schedules]]`): `schedules[1].cron`.
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(t) = item.get_ref() {
                        path.push(format!("[{i}]"));
                        if item.span().contains(&offset)
                            && best.as_ref().is_none_or(|b| b.len() < path.len())
                        {
                            *best = Some(path.clone());
                        }
                        walk(t, path, offset, best);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
        path.pop();
    }
}

/// `["grants", "slack:U1", "actions"]` → `grants."slack:U1".actions`.
pub fn dotted(path: &[String]) -> String {
    let mut out = String::new();
    for s in path {
        let index = s.starts_with('[') && s.ends_with(']');
        if !out.is_empty() && !index {
            out.push('.');
        }
        if index
            || s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            out.push_str(s);
        } else {
            out.push_str(&format!("{s:?}"));
        }
    }
    out
}

/// `grants."slack:U1".channels[0]` → `["grants", "slack:U1", "channels"]`.
pub fn key_segments(key: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = key;
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            out.push(quoted.get(..end).unwrap_or(quoted));
            rest = quoted.get(end + 1..).unwrap_or_default();
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end > 0 {
                out.push(rest.get(..end).unwrap_or(rest));
            }
            rest = rest.get(end..).unwrap_or_default();
            if rest.starts_with('[') {
                break;
            }
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_offset_and_by_path() {
        let text = "[server]\nlisten = \"x\"\n\n[agents.a]\nbackend = \"echo\"\n";
        let at = |needle: &str| text.find(needle).unwrap();
        assert_eq!(
            path_at(text, at("listen")).as_deref(),
            Some("server.listen")
        );
        assert_eq!(path_at(text, at("\"x\"")).as_deref(), Some("server.listen"));
        assert_eq!(
            path_at(text, at("\"echo\"")).as_deref(),
            Some("agents.a.backend")
        );
        assert_eq!(locate(text, &["agents", "a", "backend"]), Some((5, 1)));
        assert_eq!(locate(text, &["agents", "a", "model"]), Some((4, 9)));
        assert_eq!(line_col(text, 0), (1, 1));
    }

    #[test]
    fn key_segments_split_quoted_ids() {
        assert_eq!(
            key_segments("grants.\"slack:U1\".channels[0]"),
            vec!["grants", "slack:U1", "channels"]
        );
        assert_eq!(
            key_segments("restrict.agents[1]"),
            vec!["restrict", "agents"]
        );
        assert_eq!(key_segments("permissions"), vec!["permissions"]);
        assert_eq!(
            dotted(&["grants".into(), "slack:U1".into()]),
            "grants.\"slack:U1\""
        );
    }
}
