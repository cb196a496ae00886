//! The memory context block: the live records of a request's scopes, newest first, bounded in
//! count and characters, rendered once for every back end.

use authz_core::MemoryKind;
use store::MemoryRecord;

/// What a run is given: the records that fit, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextBlock {
    records: Vec<MemoryRecord>,
}

/// The block's heading; the lines under it are `- [<scope kind>] <text>`.
const HEADING: &str = "What this team asked Switchboard to remember (newest first):";

impl ContextBlock {
    /// Keeps records, in the order given (newest first), while the rendered block stays within
    /// `max_chars`; the first record that does not fit ends the block, so no older record
    /// takes the place of a newer one.
    pub fn bounded(records: Vec<MemoryRecord>, max_chars: usize) -> Self {
        let mut used = HEADING.chars().count();
        let mut kept = Vec::new();
        for record in records {
            let line = line_len(&record);
            if used + line > max_chars {
                break;
            }
            used += line;
            kept.push(record);
        }
        ContextBlock { records: kept }
    }

    pub fn records(&self) -> &[MemoryRecord] {
        &self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The text an agent reads; empty when there is nothing to remember.
    pub fn render(&self) -> String {
        if self.records.is_empty() {
            return String::new();
        }
        let mut out = String::from(HEADING);
        for r in &self.records {
            out.push_str("\n- [");
            out.push_str(r.scope.kind().as_str());
            out.push_str("] ");
            out.push_str(&r.text);
        }
        out
    }

    /// How many records came from each scope kind, in the order org, user, channel, repo,
    /// kinds with none left out.
    pub fn counts(&self) -> Vec<(MemoryKind, usize)> {
        MemoryKind::ALL
            .iter()
            .map(|k| {
                (
                    *k,
                    self.records.iter().filter(|r| r.scope.kind() == *k).count(),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// A record's rendered line: newline, `- [`, kind, `] `, text.
fn line_len(r: &MemoryRecord) -> usize {
    6 + r.scope.kind().as_str().len() + r.text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz_core::{ActorId, RunId, ScopeKey};
    use store::Timestamp;

    fn record(n: i64, scope: ScopeKey, text: &str) -> MemoryRecord {
        MemoryRecord {
            id: RunId::parse(&format!("01J00000000000000000000{n:03}")).unwrap(),
            scope,
            text: text.to_owned(),
            supersedes: None,
            source_run: None,
            created_at: Timestamp::from_micros(n),
            forgotten_at: None,
        }
    }

    fn user() -> ScopeKey {
        ScopeKey::User(ActorId::parse("slack:U1").unwrap())
    }

    #[test]
    fn renders_newest_first_with_the_scope_kind() {
        let block = ContextBlock::bounded(
            vec![
                record(2, ScopeKey::Org, "deploys freeze on Fridays"),
                record(1, user(), "prefers short answers"),
            ],
            10_000,
        );
        assert_eq!(
            block.render(),
            format!("{HEADING}\n- [org] deploys freeze on Fridays\n- [user] prefers short answers")
        );
        assert_eq!(
            block.counts(),
            vec![(MemoryKind::Org, 1), (MemoryKind::User, 1)]
        );
    }

    #[test]
    fn the_character_bound_holds_and_keeps_the_newest() {
        let records: Vec<_> = (0..50)
            .rev()
            .map(|n| record(n, ScopeKey::Org, &"x".repeat(40)))
            .collect();
        for max in [0, 10, 100, 500, 2_000] {
            let block = ContextBlock::bounded(records.clone(), max);
            assert!(block.render().chars().count() <= max, "bound {max}");
            if let Some(first) = block.records().first() {
                assert_eq!(
                    first.created_at,
                    Timestamp::from_micros(49),
                    "newest kept first"
                );
            }
        }
        let block = ContextBlock::bounded(records, 500);
        // Each line is `\n- [org] ` plus 40 characters: 49; as many as fit, no more.
        assert_eq!(block.records().len(), (500 - HEADING.chars().count()) / 49);
    }

    #[test]
    fn an_empty_block_renders_nothing() {
        let block = ContextBlock::bounded(vec![], 100);
        assert!(block.is_empty());
        assert_eq!(block.render(), "");
        assert!(block.counts().is_empty());
    }
}
