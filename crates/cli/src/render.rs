//! Human output: aligned tables and colour only on a terminal.

use std::fmt::Write as _;
use std::io::IsTerminal;

use authz_core::{GrantSet, Grants};

/// Whether stdout gets colour: a terminal, and `NO_COLOR` unset.
pub fn colour_on() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Colour on stderr: only when it is a terminal.
pub fn colour_err() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

pub fn paint(text: &str, ansi: &str, on: bool) -> String {
    if on {
        format!("\x1b[{ansi}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// Renders rows under a header, each column as wide as its widest cell; the last column is
/// not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let pad = widths.get(i).copied().unwrap_or(0);
                let _ = write!(out, "{cell:<pad$}  ");
            }
        }
        out.push('\n');
    }
    out
}

/// One axis as text: `all`, `—` for nothing, else the sorted items.
pub fn axis<T: Ord + Clone + std::fmt::Display>(set: &GrantSet<T>) -> String {
    match set {
        GrantSet::All => "all".to_owned(),
        GrantSet::Only(items) if items.is_empty() => "—".to_owned(),
        GrantSet::Only(items) => items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

pub fn grants_cells(g: &Grants) -> [String; 3] {
    [axis(&g.actions), axis(&g.channels), axis(&g.repos)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let t = table(
            &["A", "BB"],
            &[
                vec!["long".into(), "x".into()],
                vec!["s".into(), "yy".into()],
            ],
        );
        assert_eq!(t, "A     BB\nlong  x\ns     yy\n");
    }

    #[test]
    fn axes_render_all_nothing_and_lists() {
        assert_eq!(axis::<i32>(&GrantSet::All), "all");
        assert_eq!(axis::<i32>(&GrantSet::none()), "—");
        assert_eq!(axis(&GrantSet::only([2, 1])), "1, 2");
        assert_eq!(paint("x", "31", false), "x");
    }
}
