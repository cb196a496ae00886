//! `help`, `status`, `schedule list|fire`.

use authz_core::{Action, BoxFuture, Predicate, ResourceType, predicate_for};
use serde_json::json;
use store::{Firing, ListRuns, StatusFilter};

use super::runs::table;
use super::{ago, ok, store_failed};

use crate::{
    Args, Ctx, FireError, ManualFiring, RawInput, Reply, ReplyKind, ScheduleView, Timestamp,
};

pub fn help<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let empty = RawInput::Text(String::new());
        let admitted: Vec<_> = ctx
            .registry
            .commands()
            .iter()
            .filter(|c| ctx.registry.admission(ctx.caller, c, &empty).is_allow())
            .collect();
        let rows: Vec<[String; 2]> = admitted
            .iter()
            .map(|c| [c.text_form(), c.summary.to_owned()])
            .collect();
        let text = format!(
            "Commands you can use (add --help to any for its options):\n{}\n\nAnything else is a request for an agent.",
            table(&["COMMAND", "WHAT IT DOES"], &rows)
        );
        let data: Vec<_> = admitted
            .iter()
            .map(|c| json!({"id": c.id.as_str(), "command": c.text_form(), "summary": c.summary}))
            .collect();
        ok(text, json!({"commands": data}))
    })
}

pub fn status<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let s = ctx.services;
        let now = s.clock.now();
        // Live runs the caller may read, through the same predicate as `runs list`.
        let read = Action::parse("runs:read").unwrap_or(Action::TraceRead);
        let p = predicate_for(&ctx.caller.actor, &read, ResourceType::Run);
        let live = if p == Predicate::None {
            Some(0)
        } else {
            match s
                .store
                .get()
                .list_runs(&ListRuns {
                    visible_to: p,
                    status: StatusFilter::Live,
                    limit: 100,
                    before: None,
                })
                .await
            {
                Ok(page) => Some(page.runs.len()),
                Err(e) => {
                    tracing::warn!(target: "store", error = %e.token(), "status: store unreachable");
                    None
                }
            }
        };
        let store_state = if live.is_some() { "ok" } else { "unreachable" };
        let live_text = match live {
            Some(100) => "100+".to_owned(),
            Some(n) => n.to_string(),
            None => "unknown (store unreachable)".to_owned(),
        };
        // The servers that hold the store's lease: whoever asks, from wherever (a one-shot
        // command's own process is no server).
        let since = now.saturating_sub(s.server_lease);
        let servers = s.store.get().servers(since).await.ok();
        let servers_text = match servers.as_deref() {
            None => "servers: unknown (store unreachable)".to_owned(),
            Some([]) => "no server: no `switchboard serve` holds this store's lease (start one with `switchboard serve`)".to_owned(),
            Some(list) => list
                .iter()
                .map(|srv| {
                    format!(
                        "server {} (switchboard {}), up for {}, policy {}",
                        srv.replica.as_str(),
                        srv.version,
                        ago(now, srv.started_at).trim_end_matches(" ago"),
                        srv.policy_hash.as_deref().map_or("unknown", short_hash)
                    )
                })
                .chain(disagreement(list))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let policy = s.policy.now().hash.clone();
        let text = format!(
            "switchboard {}\n{servers_text}\nstore {} ({store_state})\npolicy of this process: {}\nlive runs you can see: {live_text}",
            s.version,
            s.store.get().backend(),
            short_hash(&policy)
        );
        let servers_json: Option<Vec<serde_json::Value>> = servers.map(|list| {
            list.iter()
                .map(|srv| {
                    json!({"replica": srv.replica.as_str(), "version": srv.version, "started_at": srv.started_at.micros(), "heartbeat_at": srv.heartbeat_at.micros(), "policy_hash": srv.policy_hash})
                })
                .collect()
        });
        ok(
            text,
            json!({"version": s.version, "started_at": s.clock.started_at.micros(), "policy_hash": policy, "servers": servers_json, "store": {"backend": s.store.get().backend(), "state": store_state}, "live_runs": live}),
        )
    })
}

/// A policy hash as `status` prints it: its first 12 hex digits (the JSON has it whole).
fn short_hash(hash: &str) -> &str {
    let end = hash
        .char_indices()
        .nth("sha256:".len() + 12)
        .map_or(hash.len(), |(i, _)| i);
    hash.get(..end).unwrap_or(hash)
}

/// The line that says the servers run different policies, when they do.
fn disagreement(servers: &[store::ServerInfo]) -> Option<String> {
    let hashes: std::collections::BTreeSet<Option<&str>> =
        servers.iter().map(|s| s.policy_hash.as_deref()).collect();
    (hashes.len() > 1).then(|| {
        format!(
            "the servers run {} different policies: reload or restart the ones behind (each reads its own config file)",
            hashes.len()
        )
    })
}

pub fn schedule_list<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let now = ctx.services.clock.now();
        let mut rows = Vec::new();
        let mut data = Vec::new();
        for s in ctx.services.schedules.schedules(now) {
            let last = match ctx.services.store.get().recent_firings(&s.name, 1).await {
                Ok(f) => f.into_iter().next(),
                Err(e) => return store_failed(e),
            };
            rows.push([
                s.name.to_string(),
                format!("{} ({})", s.cron, s.time_zone),
                next_text(&s),
                s.runs.clone(),
                last_text(last.as_ref(), now),
            ]);
            data.push(json!({
                "name": s.name.as_str(),
                "cron": s.cron,
                "time_zone": s.time_zone,
                "runs": s.runs,
                "next": s.next.as_ref().map(|(at, local)| json!({"at": at.micros(), "local": local})),
                "misconfigured": s.misconfigured,
                "last": last.map(|f| json!({
                    "status": f.status,
                    "fired_at": f.fired_at.micros(),
                    "manual": f.slot.is_manual(),
                    "run_id": f.run_id.map(|r| r.to_string()),
                    "detail": f.detail,
                })),
            }));
        }
        let text = if rows.is_empty() {
            "no schedules".to_owned()
        } else {
            table(&["NAME", "CRON", "NEXT", "RUNS", "LAST"], &rows)
        };
        ok(text, json!({"schedules": data}))
    })
}

fn next_text(s: &ScheduleView) -> String {
    match (&s.misconfigured, &s.next) {
        (Some(reason), _) => format!("misconfigured: {reason}"),
        (None, Some((_, local))) => local.clone(),
        (None, None) => "never".to_owned(),
    }
}

fn last_text(last: Option<&Firing>, now: Timestamp) -> String {
    let Some(f) = last else {
        return "never".to_owned();
    };
    let how = if f.slot.is_manual() { ", manual" } else { "" };
    match &f.run_id {
        Some(run) => format!("{} {}{how} (run {run})", f.status, ago(now, f.fired_at)),
        None => format!("{} {}{how}", f.status, ago(now, f.fired_at)),
    }
}

/// Fires a schedule now as `schedule:<name>`. The reply is the run id and status only: the
/// firing's output is read through `runs get`, under the caller's own grants.
pub fn schedule_fire<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let name = args.text("name").unwrap_or_default();
        let fired = ctx
            .services
            .schedules
            .fire_now(name, ctx.registry, ctx.services)
            .await;
        match fired {
            Ok(f) => fired_reply(&f),
            Err(e @ FireError::Unknown { .. }) => Reply::of(ReplyKind::Usage, e.to_string()),
            Err(e @ FireError::Store) => Reply::of(ReplyKind::Unavailable, e.to_string()),
        }
    })
}

fn fired_reply(f: &ManualFiring) -> Reply {
    let data = json!({
        "schedule": f.schedule.as_str(),
        "run_id": f.run.as_ref().map(|r| r.to_string()),
        "status": f.status,
        "reason": f.reason,
    });
    match (&f.run, &f.reason) {
        (Some(run), _) => ok(
            format!(
                "fired `{}` as schedule:{}: run {run} {} (read it with `runs get {run}`)",
                f.schedule, f.schedule, f.status
            ),
            data,
        ),
        (None, reason) => Reply {
            kind: ReplyKind::Failed,
            text: format!(
                "`{}` sent nothing ({}): {}",
                f.schedule,
                f.status,
                reason.as_deref().unwrap_or("no reason recorded")
            ),
            data,
        },
    }
}
