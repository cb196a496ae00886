//! The nearest command to a mistyped one (`runs lst` → `runs list`), for the unknown-command
//! reply: the catalogue's own words only, within two edits.

/// Edits (insert, delete, substitute, or swap two neighbours) from `a` to `b`.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        if let Some(first) = row.first_mut() {
            *first = i;
        }
    }
    if let Some(first) = rows.first_mut() {
        for (j, cell) in first.iter_mut().enumerate() {
            *cell = j;
        }
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a.get(i - 1) != b.get(j - 1));
            let at = |r: usize, c: usize| {
                rows.get(r)
                    .and_then(|row| row.get(c))
                    .copied()
                    .unwrap_or(usize::MAX - 1)
            };
            let mut best = (at(i - 1, j) + 1)
                .min(at(i, j - 1) + 1)
                .min(at(i - 1, j - 1) + cost);
            if i > 1 && j > 1 && a.get(i - 1) == b.get(j - 2) && a.get(i - 2) == b.get(j - 1) {
                best = best.min(at(i - 2, j - 2) + 1);
            }
            if let Some(cell) = rows.get_mut(i).and_then(|row| row.get_mut(j)) {
                *cell = best;
            }
        }
    }
    rows.get(a.len())
        .and_then(|row| row.get(b.len()))
        .copied()
        .unwrap_or(usize::MAX)
}

/// The one of `candidates` nearest to `word`, if it is within two edits (and nearer than
/// half the word: `ls` is not a misspelling of `list`'s neighbours).
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = 2.min(word.chars().count().div_ceil(2)).max(1);
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_word_finds_its_nearest_and_a_stranger_finds_none() {
        let members = ["list", "get", "events", "friction", "stop"];
        assert_eq!(nearest("lst", members), Some("list"));
        assert_eq!(nearest("lsit", members), Some("list"));
        assert_eq!(nearest("evnets", members), Some("events"));
        assert_eq!(nearest("stp", members), Some("stop"));
        assert_eq!(nearest("frobnicate", members), None);
        assert_eq!(nearest("x", members), None);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
