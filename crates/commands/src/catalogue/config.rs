//! `config get|set` on the three tiers and `mcp list|add|remove` on the channel and org tiers.
//! Writes `authorize` the config scope they touch; the caller's origin channel is only the
//! default tier, never authority.

use authz_core::{Action, BoxFuture, ChannelId, ConfigTier, Resource, Verdict, authorize};
use serde_json::json;
use store::ConfigValue;

use super::friction::PROPOSAL_PREFIX;
use super::{ok, store_failed};
use crate::agent_run::DEFAULT_REPO_KEY;
use crate::{Args, Ctx, Refusal, Registry, Reply, ReplyKind, reply_texts};

/// The config keys `mcp add` writes: `mcp.<server name>`, valued the server's URL.
pub const MCP_PREFIX: &str = "mcp.";

fn usage(ctx: &Ctx<'_>, problem: &str) -> Reply {
    Reply::of(
        ReplyKind::Usage,
        reply_texts::usage_error(problem, &ctx.command.usage()),
    )
}

fn tier_name(tier: &ConfigTier) -> String {
    match tier {
        ConfigTier::Org => "the org".to_owned(),
        ConfigTier::Channel(c) => format!("channel {c}"),
        ConfigTier::User(u) => format!("user {u}"),
    }
}

fn tier_json(tier: &ConfigTier) -> serde_json::Value {
    match tier {
        ConfigTier::Org => json!({"tier": "org"}),
        ConfigTier::Channel(c) => json!({"tier": "channel", "id": c.as_str()}),
        ConfigTier::User(u) => json!({"tier": "user", "id": u.as_str()}),
    }
}

/// The tier the flags name, if any.
fn named_tier(ctx: &Ctx<'_>, args: &Args) -> Result<Option<ConfigTier>, Reply> {
    if args.flag("org") {
        return Ok(Some(ConfigTier::Org));
    }
    if args.flag("user") {
        return Ok(Some(ConfigTier::User(ctx.caller.actor.id.clone())));
    }
    match args.text("channel") {
        Some(c) => ChannelId::parse(c)
            .map(|c| Some(ConfigTier::Channel(c)))
            .map_err(|e| usage(ctx, &format!("`--channel`: {e}"))),
        None => Ok(None),
    }
}

/// The named tier, else the channel the request came from.
fn write_tier(ctx: &Ctx<'_>, args: &Args) -> Result<ConfigTier, Reply> {
    if let Some(t) = named_tier(ctx, args)? {
        return Ok(t);
    }
    match &ctx.caller.actor.origin {
        Some(origin) => Ok(ConfigTier::Channel(origin.channel_id.clone())),
        None => Err(Reply::of(
            ReplyKind::Usage,
            reply_texts::need_tier(&ctx.command.text_form()),
        )),
    }
}

fn check_key(ctx: &Ctx<'_>, key: &str) -> Result<(), Reply> {
    let ok = !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
    if !ok {
        return Err(usage(
            ctx,
            &format!("`{key}` is not a config key (lower-case letters, digits, '_', '.', '-')"),
        ));
    }
    for (prefix, owner) in [
        (MCP_PREFIX, "mcp add|remove"),
        (store::repos::KEY_PREFIX, "repo add|remove"),
        (PROPOSAL_PREFIX, "friction propose"),
    ] {
        // `repo.default` is a channel's repo, not a repo of the family (no slug is `default`).
        if key.starts_with(prefix) && key != DEFAULT_REPO_KEY {
            return Err(usage(
                ctx,
                &format!("`{prefix}*` keys are managed with `{owner}`"),
            ));
        }
    }
    Ok(())
}

pub fn get<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let key = args.text("key").unwrap_or_default().to_owned();
        if let Err(r) = check_key(ctx, &key) {
            return r;
        }
        let tiers = match named_tier(ctx, &args) {
            Ok(Some(t)) => vec![t],
            Ok(None) => {
                // The effective value: the caller's own tier, the channel asked from, the org.
                let mut t = vec![ConfigTier::User(ctx.caller.actor.id.clone())];
                if let Some(origin) = &ctx.caller.actor.origin {
                    t.push(ConfigTier::Channel(origin.channel_id.clone()));
                }
                t.push(ConfigTier::Org);
                t
            }
            Err(r) => return r,
        };
        for tier in &tiers {
            match ctx.services.store.get().get_config(tier, &key).await {
                Ok(Some(v)) => {
                    return ok(
                        format!("{key} = {} (from {})", v.value, tier_name(tier)),
                        json!({"key": key, "value": v.value, "from": tier_json(tier), "updated_by": v.updated_by.as_str()}),
                    );
                }
                Ok(None) => {}
                Err(e) => return store_failed(e),
            }
        }
        let where_ = match tiers.as_slice() {
            [one] => tier_name(one),
            _ => "any tier".to_owned(),
        };
        ok(
            reply_texts::config_unset(&key, &where_),
            json!({"key": key, "value": null}),
        )
    })
}

/// Authorizes `action` on the tier; the channel tier's refusal has its own text.
fn admit(ctx: &Ctx<'_>, action: &Action, tier: &ConfigTier) -> Option<Reply> {
    let resource = Resource::ConfigScope(tier.clone());
    match authorize(&ctx.caller.actor, action, &resource) {
        Verdict::Allow => None,
        deny => Some(match tier {
            ConfigTier::Channel(c)
                if action == &ctx.command.action && ctx.command.id.as_str() == "config.set" =>
            {
                let refusal = Refusal {
                    action: action.clone(),
                    resource,
                    verdict: deny,
                };
                Registry::refuse_channel_config(ctx, &refusal, c.as_str())
            }
            _ => Registry::refuse(ctx, action, &resource, &deny),
        }),
    }
}

pub fn set<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let key = args.text("key").unwrap_or_default().to_owned();
        if let Err(r) = check_key(ctx, &key) {
            return r;
        }
        let tier = match write_tier(ctx, &args) {
            Ok(t) => t,
            Err(r) => return r,
        };
        if let Some(refused) = admit(ctx, &ctx.command.action, &tier) {
            return refused;
        }
        let value = args.text("value").unwrap_or_default().to_owned();
        if key == DEFAULT_REPO_KEY {
            if matches!(tier, ConfigTier::User(_)) {
                return usage(
                    ctx,
                    &format!(
                        "`{DEFAULT_REPO_KEY}` is set on a channel (`--channel C`) or the org (`--org`), not a user"
                    ),
                );
            }
            if let Err(e) = authz_core::RepoSlug::parse(value.trim()) {
                return usage(ctx, &format!("`{DEFAULT_REPO_KEY}` names a repo: {e}"));
            }
        }
        let v = ConfigValue {
            tier: tier.clone(),
            key: key.clone(),
            value: value.clone(),
            updated_by: ctx.caller.actor.id.clone(),
            updated_at: ctx.services.clock.now(),
        };
        if let Err(e) = ctx.services.store.get().set_config(v).await {
            return store_failed(e);
        }
        ok(
            reply_texts::config_set(&key, &tier_name(&tier)),
            json!({"key": key, "value": value, "tier": tier_json(&tier)}),
        )
    })
}

/// The tiers whose MCP servers the caller sees: the org, and the channel asked from.
fn visible_mcp_tiers(ctx: &Ctx<'_>) -> Vec<ConfigTier> {
    let mut tiers = vec![ConfigTier::Org];
    if let Some(origin) = &ctx.caller.actor.origin {
        tiers.push(ConfigTier::Channel(origin.channel_id.clone()));
    }
    tiers
}

pub fn mcp_list<'a>(ctx: &'a Ctx<'a>, _args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let mut lines = Vec::new();
        let mut data = Vec::new();
        for tier in visible_mcp_tiers(ctx) {
            let values = match ctx
                .services
                .store
                .get()
                .list_config(&tier, MCP_PREFIX)
                .await
            {
                Ok(v) => v,
                Err(e) => return store_failed(e),
            };
            for v in values {
                let name = v.key.trim_start_matches(MCP_PREFIX).to_owned();
                lines.push(format!("{name}  {}  ({})", v.value, tier_name(&tier)));
                data.push(json!({"name": name, "url": v.value, "tier": tier_json(&tier)}));
            }
        }
        let text = if lines.is_empty() {
            "no MCP servers configured".to_owned()
        } else {
            lines.join("\n")
        };
        ok(text, json!({"servers": data}))
    })
}

fn check_mcp_name(ctx: &Ctx<'_>, name: &str) -> Result<(), Reply> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(usage(
            ctx,
            &format!("`{name}` is not a server name (lower-case letters, digits, '-', '_')"),
        ))
    }
}

fn mcp_tier(ctx: &Ctx<'_>, args: &Args) -> Result<ConfigTier, Reply> {
    let tier = write_tier(ctx, args)?;
    if matches!(tier, ConfigTier::User(_)) {
        return Err(usage(ctx, "MCP servers live on a channel or the org"));
    }
    Ok(tier)
}

pub fn mcp_add<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let name = args.text("name").unwrap_or_default().to_owned();
        let url = args.text("url").unwrap_or_default().to_owned();
        if let Err(r) = check_mcp_name(ctx, &name) {
            return r;
        }
        if !(url.starts_with("https://") || url.starts_with("http://"))
            || url.chars().any(char::is_whitespace)
        {
            return usage(ctx, &format!("`{url}` is not an http(s) URL"));
        }
        let tier = match mcp_tier(ctx, &args) {
            Ok(t) => t,
            Err(r) => return r,
        };
        if let Some(refused) = admit(ctx, &ctx.command.action, &tier) {
            return refused;
        }
        let v = ConfigValue {
            tier: tier.clone(),
            key: format!("{MCP_PREFIX}{name}"),
            value: url.clone(),
            updated_by: ctx.caller.actor.id.clone(),
            updated_at: ctx.services.clock.now(),
        };
        if let Err(e) = ctx.services.store.get().set_config(v).await {
            return store_failed(e);
        }
        ok(
            format!("added MCP server {name} on {}", tier_name(&tier)),
            json!({"name": name, "url": url, "tier": tier_json(&tier)}),
        )
    })
}

pub fn mcp_remove<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let name = args.text("name").unwrap_or_default().to_owned();
        if let Err(r) = check_mcp_name(ctx, &name) {
            return r;
        }
        let tier = match mcp_tier(ctx, &args) {
            Ok(t) => t,
            Err(r) => return r,
        };
        if let Some(refused) = admit(ctx, &ctx.command.action, &tier) {
            return refused;
        }
        match ctx
            .services
            .store
            .get()
            .delete_config(&tier, &format!("{MCP_PREFIX}{name}"))
            .await
        {
            Ok(true) => ok(
                format!("removed MCP server {name} from {}", tier_name(&tier)),
                json!({"removed": name}),
            ),
            Ok(false) => ok(
                format!("no MCP server {name} on {}", tier_name(&tier)),
                json!({"removed": null}),
            ),
            Err(e) => store_failed(e),
        }
    })
}
