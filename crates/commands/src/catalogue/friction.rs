//! `friction report|propose`. The report analyses exactly the runs
//! `predicate_for(caller, friction:read, run)` admits, filtered in the store's query.

use std::collections::BTreeMap;
use std::time::Duration;

use authz_core::{BoxFuture, ConfigTier, Predicate, ResourceType, predicate_for};
use serde_json::json;
use store::ConfigValue;

use super::{ok, store_failed};
use crate::{Args, Ctx, Reply};

/// The key family proposals are kept under (org tier of config values).
pub(crate) const PROPOSAL_PREFIX: &str = "friction.proposal.";

fn top(counts: &BTreeMap<String, u64>, n: usize) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = counts.iter().map(|(k, c)| (k.clone(), *c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

fn line(label: &str, items: &[(String, u64)]) -> String {
    let shown: Vec<String> = items.iter().map(|(k, c)| format!("{k} ×{c}")).collect();
    format!(
        "{label}: {}",
        if shown.is_empty() {
            "—".to_owned()
        } else {
            shown.join(", ")
        }
    )
}

pub fn report<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let days = args.int("days").unwrap_or(7);
        let since = ctx.services.clock.now().saturating_sub(Duration::from_secs(
            u64::try_from(days).unwrap_or(7) * 86_400,
        ));
        let visible_to = predicate_for(&ctx.caller.actor, &ctx.command.action, ResourceType::Run);
        let (analysed, entries) = if visible_to == Predicate::None {
            (0, vec![])
        } else {
            let analysed = match ctx
                .services
                .store
                .get()
                .count_runs_since(&visible_to, since)
                .await
            {
                Ok(n) => n,
                Err(e) => return store_failed(e),
            };
            match ctx
                .services
                .store
                .get()
                .friction_recent(&visible_to, since, 1000)
                .await
            {
                Ok(entries) => (analysed, entries),
                Err(e) => return store_failed(e),
            }
        };
        let mut by_kind = BTreeMap::new();
        let mut by_channel = BTreeMap::new();
        let mut by_agent = BTreeMap::new();
        for e in &entries {
            *by_kind.entry(e.friction.kind.clone()).or_insert(0) += 1;
            *by_channel.entry(e.channel_id.to_string()).or_insert(0) += 1;
            *by_agent.entry(e.agent.clone()).or_insert(0) += 1;
        }
        let text = format!(
            "🔍 {analysed} runs analysed over the last {days} days; {} friction entries.\n{}\n{}\n{}",
            entries.len(),
            line("Top friction", &top(&by_kind, 5)),
            line("By channel", &top(&by_channel, 5)),
            line("By agent", &top(&by_agent, 5)),
        );
        let pairs = |v: Vec<(String, u64)>| {
            v.into_iter()
                .map(|(k, c)| json!({"name": k, "count": c}))
                .collect::<Vec<_>>()
        };
        ok(
            text,
            json!({
                "runs_analysed": analysed,
                "friction_entries": entries.len(),
                "days": days,
                "by_kind": pairs(top(&by_kind, 20)),
                "by_channel": pairs(top(&by_channel, 20)),
                "by_agent": pairs(top(&by_agent, 20)),
            }),
        )
    })
}

pub fn propose<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let text = args.text("text").unwrap_or_default().trim().to_owned();
        let now = ctx.services.clock.now();
        let id = store::new_id(now);
        let value = ConfigValue {
            tier: ConfigTier::Org,
            key: format!("{PROPOSAL_PREFIX}{}", id.to_ascii_lowercase()),
            value: text.clone(),
            updated_by: ctx.caller.actor.id.clone(),
            updated_at: now,
        };
        if let Err(e) = ctx.services.store.get().set_config(value).await {
            return store_failed(e);
        }
        ok(
            format!("recorded proposal {}", id.to_ascii_lowercase()),
            json!({"id": id.to_ascii_lowercase(), "text": text}),
        )
    })
}
