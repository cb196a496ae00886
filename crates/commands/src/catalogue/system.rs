//! `help`, `status`, `schedule list|fire`.

use authz_core::{Action, BoxFuture, Predicate, ResourceType, predicate_for};
use serde_json::json;
use store::{ListRuns, StatusFilter};

use super::runs::table;
use super::{ago, ok, store_failed};
use crate::{Args, Ctx, RawInput, Reply, ReplyKind, replies};

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
                    tracing::warn!(target: "store", error = %e, "status: store unreachable");
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
        let text = format!(
            "switchboard {}\nup since {}\nstore {} ({store_state})\nlive runs you can see: {live_text}",
            s.version,
            ago(now, s.clock.started_at),
            s.store.backend()
        );
        ok(
            text,
            json!({"version": s.version, "started_at": s.clock.started_at.micros(), "store": {"backend": s.store.backend(), "state": store_state}, "live_runs": live}),
        )
    })
}

pub fn schedule_list<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let now = ctx.services.clock.now();
        let mut rows = Vec::new();
        let mut data = Vec::new();
        for s in &ctx.services.schedules {
            let last = match ctx.services.store.recent_firings(&s.name, 1).await {
                Ok(f) => f.into_iter().next(),
                Err(e) => return store_failed(e),
            };
            let last_text = last
                .as_ref()
                .map(|f| format!("{} {}", f.status, ago(now, f.fired_at)))
                .unwrap_or_else(|| "never".into());
            rows.push([
                s.name.to_string(),
                s.cron.clone(),
                s.runs.clone(),
                last_text,
            ]);
            data.push(json!({
                "name": s.name.as_str(),
                "cron": s.cron,
                "runs": s.runs,
                "last": last.map(|f| json!({"status": f.status, "fired_at": f.fired_at.micros(), "run": f.run_id.map(|r| r.to_string())})),
            }));
        }
        let text = if rows.is_empty() {
            "no schedules".to_owned()
        } else {
            format!(
                "{}\n(next firings are computed by the scheduler, which is not part of this build yet)",
                table(&["NAME", "CRON", "RUNS", "LAST"], &rows)
            )
        };
        ok(text, json!({"schedules": data}))
    })
}

pub fn schedule_fire<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let name = args.text("name").unwrap_or_default();
        if !ctx
            .services
            .schedules
            .iter()
            .any(|s| s.name.as_str() == name)
        {
            let known: Vec<&str> = ctx
                .services
                .schedules
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            return Reply::of(
                ReplyKind::Usage,
                format!(
                    "no schedule `{name}`; the schedules are {}",
                    known.join(", ")
                ),
            );
        }
        Reply::of(ReplyKind::Unavailable, replies::needs_scheduler())
    })
}
