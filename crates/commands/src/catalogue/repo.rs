//! `repo list|add|remove|test|build`. Repos are configured on the org tier (`repo.<slug>`);
//! whether a caller may use one is `authorize(repo:use, repo)`, with `restricted` from config.

use authz_core::{Action, BoxFuture, ConfigTier, RepoSlug, Verdict, authorize};
use serde_json::json;
use store::ConfigValue;

use super::{ok, store_failed};
use crate::{Args, Ctx, Registry, Reply, ReplyKind, replies};

pub(crate) const REPO_PREFIX: &str = "repo.";

fn slug(ctx: &Ctx<'_>, args: &Args) -> Result<RepoSlug, Reply> {
    RepoSlug::parse(args.text("repo").unwrap_or_default()).map_err(|e| {
        Reply::of(
            ReplyKind::Usage,
            replies::usage_error(&e.to_string(), &ctx.command.usage()),
        )
    })
}

/// A repo's source as shown: a clone URL's credentials (`https://<token>@host/…`) never leave
/// the config store.
fn shown_source(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://…@{}", &rest[at + 1..]),
        None => value.to_owned(),
    }
}

pub fn list<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let values = match ctx
            .services
            .store
            .list_config(&ConfigTier::Org, REPO_PREFIX)
            .await
        {
            Ok(v) => v,
            Err(e) => return store_failed(e),
        };
        let mut lines = Vec::new();
        let mut data = Vec::new();
        for v in values {
            let Ok(slug) = RepoSlug::parse(v.key.trim_start_matches(REPO_PREFIX)) else {
                continue;
            };
            let restricted = ctx.services.table.restrict().repos.contains(&slug);
            let usable = ctx.services.table.can_use_repo(&ctx.caller.actor, &slug);
            let mark = if usable { "✓" } else { "✗" };
            let note = match (restricted, usable) {
                (true, true) => " (restricted; granted to you)",
                (true, false) => " (restricted)",
                _ => "",
            };
            let source = shown_source(&v.value);
            lines.push(format!(
                "{mark} {slug}  {}{note}",
                if source.is_empty() { "—" } else { &source }
            ));
            data.push(json!({"repo": slug.as_str(), "source": source, "restricted": restricted, "you_may_use": usable}));
        }
        let text = if lines.is_empty() {
            "no repos configured (repo add <owner/name> --path P | --url U)".to_owned()
        } else {
            lines.join("\n")
        };
        ok(text, json!({"repos": data}))
    })
}

pub fn add<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let slug = match slug(ctx, &args) {
            Ok(s) => s,
            Err(r) => return r,
        };
        let source = match (args.text("path"), args.text("url")) {
            (Some(p), _) => format!("path:{p}"),
            (_, Some(u)) => format!("url:{u}"),
            _ => String::new(),
        };
        let v = ConfigValue {
            tier: ConfigTier::Org,
            key: format!("{REPO_PREFIX}{slug}"),
            value: source.clone(),
            updated_by: ctx.caller.actor.id.clone(),
            updated_at: (ctx.services.now)(),
        };
        if let Err(e) = ctx.services.store.set_config(v).await {
            return store_failed(e);
        }
        ok(
            format!("added repo {slug}"),
            json!({"repo": slug.as_str(), "source": shown_source(&source)}),
        )
    })
}

pub fn remove<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let slug = match slug(ctx, &args) {
            Ok(s) => s,
            Err(r) => return r,
        };
        match ctx
            .services
            .store
            .delete_config(&ConfigTier::Org, &format!("{REPO_PREFIX}{slug}"))
            .await
        {
            Ok(true) => ok(
                format!("removed repo {slug}"),
                json!({"removed": slug.as_str()}),
            ),
            Ok(false) => ok(
                format!("repo {slug} is not configured"),
                json!({"removed": null}),
            ),
            Err(e) => store_failed(e),
        }
    })
}

/// `repo test|build`: the registry admitted the coding agent (`repo:exec` on
/// `agent{coding}`, which is the agent admission); the repo must be usable by the caller
/// (restricted repos); then a coding-agent run in the repo's workspace.
async fn exec(ctx: &Ctx<'_>, args: &Args, task: dispatch::RepoTask) -> Reply {
    let slug = match slug(ctx, args) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let resource = ctx.services.table.repo(slug.clone());
    let verdict = authorize(&ctx.caller.actor, &Action::RepoUse, &resource);
    if let Verdict::Deny(_) = verdict {
        return Registry::refuse(ctx, &Action::RepoUse, &resource, &verdict);
    }
    let Some(dispatcher) = &ctx.services.dispatcher else {
        return Reply::of(
            ReplyKind::Unavailable,
            replies::needs_dispatcher(&format!("`{}`", ctx.command.text_form())),
        );
    };
    let Some(origin) = ctx.caller.actor.origin.clone() else {
        return Reply::of(ReplyKind::Failed, replies::no_run_channel());
    };
    let request = dispatch::RunRequest {
        actor: ctx.caller.actor.clone(),
        surface: ctx.caller.surface.as_str(),
        channel: origin.channel_id,
        thread_key: origin.thread_key,
        text: String::new(),
        agent: None,
    };
    // The command was admitted on `agent{coding}` (its resource); that agent is the one run.
    let Some(agent) = super::coding_agent_name() else {
        return Reply::of(
            ReplyKind::Failed,
            "the coding agent's name is not a valid agent name",
        );
    };
    let admitted = dispatch::RegistryAdmitted::after_repo_exec_admission(agent);
    match dispatcher.start_repo(request, slug, task, admitted).await {
        Ok(started) => crate::started_reply(&started),
        Err(e) => crate::dispatch_refusal(ctx.caller, e, ctx.services),
    }
}

pub fn test<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move { exec(ctx, &args, dispatch::RepoTask::Test).await })
}

pub fn build<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move { exec(ctx, &args, dispatch::RepoTask::Build).await })
}

#[cfg(test)]
mod tests {
    use super::shown_source;

    #[test]
    fn clone_url_credentials_are_not_shown() {
        assert_eq!(
            shown_source("url:https://x-access-token:ghs_secret@github.com/acme/web.git"),
            "url:https://…@github.com/acme/web.git"
        );
        assert_eq!(
            shown_source("url:https://ghp_token@github.com/a/b"),
            "url:https://…@github.com/a/b"
        );
        assert_eq!(
            shown_source("url:https://github.com/a/b@v1"),
            "url:https://github.com/a/b@v1"
        );
        assert_eq!(shown_source("path:/srv/web"), "path:/srv/web");
        assert_eq!(shown_source(""), "");
    }
}
