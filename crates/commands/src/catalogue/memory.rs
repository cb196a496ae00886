//! `memory list|forget`. Reads are not policy-gated: a list reads the scopes the request itself
//! names, and a repo's scope only for a repo the caller may `repo:use`. Forgetting one's own record is `memory:write` on the user scope (is_self); a shared
//! record is `repo:write` on its scope; a deny is the same not_found as a missing record.

use authz_core::{
    Action, BoxFuture, ChannelVisibility, CommandGroup, Effect, RepoSlug, Resource, RunId,
    ScopeKey, Verdict, authorize,
};
use serde_json::json;

use super::{ok, store_failed, with_list};
use crate::{Args, Ctx, Registry, Reply, ReplyKind, reply_texts};

fn scope_json(s: &ScopeKey) -> serde_json::Value {
    json!({"kind": s.kind().as_str(), "key": s.key()})
}

pub fn list<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let repo = match args.text("repo").map(RepoSlug::parse).transpose() {
            Ok(r) => r,
            Err(e) => {
                return Reply::of(
                    ReplyKind::Usage,
                    reply_texts::usage_error(&format!("`--repo`: {e}"), &ctx.command.usage()),
                );
            }
        };
        let mut scopes = vec![ScopeKey::Org, ScopeKey::User(ctx.caller.actor.id.clone())];
        if let Some(origin) = &ctx.caller.actor.origin {
            scopes.push(ScopeKey::Channel(origin.channel_id.clone()));
        }
        if let Some(r) = repo {
            // A repo's memory is read where the repo may be used: a restricted repo's only
            // by those it is granted to.
            let resource = ctx.services.table().repo(r.clone());
            let verdict = authorize(&ctx.caller.actor, &Action::RepoUse, &resource);
            if let Verdict::Deny(_) = verdict {
                return Registry::refuse(ctx, &Action::RepoUse, &resource, &verdict);
            }
            scopes.push(ScopeKey::Repo(r));
        }
        if let Some(only) = args.text("scope") {
            scopes.retain(|s| s.kind().as_str() == only);
        }
        let records = match ctx.services.store.get().memory_in_scopes(&scopes, 50).await {
            Ok(r) => r,
            Err(e) => return store_failed(e),
        };
        let text = if records.is_empty() {
            "no memory records in these scopes".to_owned()
        } else {
            records
                .iter()
                .map(|m| format!("{}  [{}]  {}", m.id, m.scope.key(), m.text))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let data: Vec<_> = records
            .iter()
            .map(|m| json!({"id": m.id.as_str(), "scope": scope_json(&m.scope), "text": m.text}))
            .collect();
        ok(text, with_list(json!({}), "records", data))
    })
}

pub fn forget<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let Some(id) = args.text("id").and_then(|t| RunId::parse(t).ok()) else {
            return Reply::not_found("memory record");
        };
        let record = match ctx.services.store.get().get_memory(&id).await {
            Ok(Some(r)) if r.forgotten_at.is_none() => r,
            Ok(_) => return Reply::not_found("memory record"),
            Err(e) => return store_failed(e),
        };
        let action = match record.scope {
            ScopeKey::User(_) => Action::command(CommandGroup::Memory, Effect::Write),
            _ => Action::command(CommandGroup::Repo, Effect::Write),
        };
        let resource = Resource::MemoryScope {
            scope: record.scope.clone(),
            origin_visibility: ChannelVisibility::Unknown,
        };
        let verdict = authorize(&ctx.caller.actor, &action, &resource);
        if let Verdict::Deny(_) = verdict {
            return Registry::refuse(ctx, &action, &resource, &verdict);
        }
        match ctx
            .services
            .store
            .get()
            .forget_memory(&id, ctx.services.clock.now())
            .await
        {
            Ok(true) => ok(format!("forgot {id}"), json!({"forgotten": id.as_str()})),
            Ok(false) => Reply::not_found("memory record"),
            Err(e) => store_failed(e),
        }
    })
}
