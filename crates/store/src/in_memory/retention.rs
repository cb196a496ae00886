//! The in-memory store's retention: the same pruning, in bounded batches, as the databases.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::InMemoryStore;
use crate::*;

#[async_trait]
impl RetentionStore for InMemoryStore {
    async fn prune(&self, rules: &Retention, now: Timestamp) -> Result<Pruned> {
        let batch = rules.batch.max(1) as usize;
        Ok(self.with(|s| {
            let mut pruned = Pruned::default();
            let keys = oldest(&s.event_ids, cutoff(now, rules.event_ids), batch, |t| {
                Some(t.micros())
            });
            pruned.event_ids = remove_all(&mut s.event_ids, keys);
            let keys = oldest(
                &s.answered_threads,
                cutoff(now, rules.answered_threads),
                batch,
                |t| Some(t.micros()),
            );
            pruned.answered_threads = remove_all(&mut s.answered_threads, keys);
            let keys = oldest(&s.approvals, cutoff(now, rules.approvals), batch, |a| {
                (a.state != ApprovalState::Open).then_some(a.asked_at.micros())
            });
            pruned.approvals = remove_all(&mut s.approvals, keys);
            // Never a schedule's latest firing, nor its latest timer slot.
            let firings: Vec<&Firing> = s.firings.values().collect();
            let kept = |f: &Firing| {
                let name = f.name.to_string();
                let same = || firings.iter().filter(|o| o.name.to_string() == name);
                let latest = !same().any(|o| o.fired_at > f.fired_at);
                let timer = matches!(f.slot, FiringSlot::Timer(_));
                let latest_timer = timer
                    && !same().any(|o| {
                        matches!(o.slot, FiringSlot::Timer(_)) && o.slot.at() > f.slot.at()
                    });
                latest || latest_timer
            };
            let keys = oldest(&s.firings, cutoff(now, rules.firings), batch, |f| {
                (!kept(f)).then_some(f.fired_at.micros())
            });
            drop(firings);
            pruned.firings = remove_all(&mut s.firings, keys);
            let keys = oldest(&s.runs, cutoff(now, rules.runs), batch, |r| {
                r.finished_at
                    .filter(|_| !r.status.is_live())
                    .map(|t| t.micros())
            });
            for id in &keys {
                s.events.remove(id);
                s.friction.retain(|f| &f.run_id != id);
                s.approvals.retain(|_, a| &a.run_id != id);
                s.kept.remove(id);
            }
            pruned.runs = remove_all(&mut s.runs, keys);
            pruned
        }))
    }
}

/// The oldest `batch` keys of `items` older than `before`, by `at`.
fn oldest<K: Clone + Ord, V>(
    items: &BTreeMap<K, V>,
    before: Option<i64>,
    batch: usize,
    at: impl Fn(&V) -> Option<i64>,
) -> Vec<K> {
    let Some(before) = before else {
        return Vec::new();
    };
    let mut old: Vec<(i64, K)> = items
        .iter()
        .filter_map(|(k, v)| at(v).filter(|t| *t < before).map(|t| (t, k.clone())))
        .collect();
    old.sort();
    old.into_iter().take(batch).map(|(_, k)| k).collect()
}

fn remove_all<K: Ord, V>(items: &mut BTreeMap<K, V>, keys: Vec<K>) -> u64 {
    keys.into_iter()
        .filter(|k| items.remove(k).is_some())
        .count() as u64
}
