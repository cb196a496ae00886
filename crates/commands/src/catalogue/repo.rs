//! `repo list|add|remove|test|build`. Repos are the store's `repos` key family (its one
//! owner); whether a caller may use one is `authorize(repo:use, repo)`, with `restricted`
//! from config.

use authz_core::{Action, BoxFuture, RepoSlug, Verdict, authorize};
use serde_json::json;
use store::repos::{self, RepoSource};

use super::{ok, store_failed};
use crate::agent_run::{launch_refusal, run_request};
use crate::{Args, Ctx, Registry, Reply, ReplyKind, RepoTask, reply_texts};

fn slug(ctx: &Ctx<'_>, args: &Args) -> Result<RepoSlug, Reply> {
    RepoSlug::parse(args.text("repo").unwrap_or_default()).map_err(|e| {
        Reply::of(
            ReplyKind::Usage,
            reply_texts::usage_error(&e.to_string(), &ctx.command.usage()),
        )
    })
}

pub fn list<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let configured = match repos::all(ctx.services.store.get().as_ref()).await {
            Ok(v) => v,
            Err(e) => return store_failed(e),
        };
        let mut lines = Vec::new();
        let mut data = Vec::new();
        for (slug, source) in configured {
            let restricted = ctx.services.table().restrict().repos.contains(&slug);
            let usable = ctx.services.table().can_use_repo(&ctx.caller.actor, &slug);
            let mark = if usable { "✓" } else { "✗" };
            let note = match (restricted, usable) {
                (true, true) => " (restricted; granted to you)",
                (true, false) => " (restricted)",
                _ => "",
            };
            let shown = source.shown();
            lines.push(format!(
                "{mark} {slug}  {}{note}",
                if shown.is_empty() { "—" } else { &shown }
            ));
            data.push(json!({"repo": slug.as_str(), "source": shown, "restricted": restricted, "you_may_use": usable}));
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
            // Read where the server runs, whoever asked: relative to nothing it could know.
            (Some(p), _) if !std::path::Path::new(p).is_absolute() => {
                return Reply::of(
                    ReplyKind::Usage,
                    reply_texts::usage_error(
                        "--path must be an absolute path (from a shell in the checkout: --path \"$(pwd)\")",
                        &ctx.command.usage(),
                    ),
                );
            }
            (Some(p), _) => RepoSource::Path(p.to_owned()),
            (_, Some(u)) => RepoSource::Url(u.to_owned()),
            _ => RepoSource::Unset,
        };
        let s = ctx.services;
        if let Err(e) = repos::set(
            s.store.get().as_ref(),
            &slug,
            &source,
            &ctx.caller.actor.id,
            s.clock.now(),
        )
        .await
        {
            return store_failed(e);
        }
        ok(
            format!("added repo {slug}"),
            json!({"repo": slug.as_str(), "source": source.shown()}),
        )
    })
}

pub fn remove<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let slug = match slug(ctx, &args) {
            Ok(s) => s,
            Err(r) => return r,
        };
        match repos::remove(ctx.services.store.get().as_ref(), &slug).await {
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
/// `agent{coding}`, which is the agent admission, and the launcher asks it again); the repo
/// must be usable by the caller (restricted repos); then a coding-agent run in the repo's
/// workspace.
async fn exec(ctx: &Ctx<'_>, args: &Args, task: RepoTask) -> Reply {
    let slug = match slug(ctx, args) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let resource = ctx.services.table().repo(slug.clone());
    let verdict = authorize(&ctx.caller.actor, &Action::RepoUse, &resource);
    if let Verdict::Deny(_) = verdict {
        return Registry::refuse(ctx, &Action::RepoUse, &resource, &verdict);
    }
    let Some(request) = run_request(ctx.caller, String::new(), None) else {
        return Reply::of(ReplyKind::Failed, reply_texts::no_run_channel());
    };
    match ctx.services.runs.start_repo(request, slug, task).await {
        // Like an agent run's: the one who asked is told where to watch, unless an agent asked.
        Ok(started) if ctx.caller.acting_in().is_some() => started.reply(),
        Ok(started) => started.reply_with_link(ctx.services.public_url.as_deref()),
        Err(e) => launch_refusal(ctx.caller, e, ctx.services),
    }
}

pub fn test<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move { exec(ctx, &args, RepoTask::Test).await })
}

pub fn build<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move { exec(ctx, &args, RepoTask::Build).await })
}
