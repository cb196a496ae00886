//! `config get|set` on the tiers, and `mcp list|add|remove`.

use super::*;

on_both!(
    config_get_and_set_on_the_tiers,
    mcp_servers_on_channel_and_org,
);

async fn config_get_and_set_on_the_tiers(w: World) {
    let plain_here = w.in_channel("slack:UPLAIN", "slack:C1");
    // A person always owns their own scope; the channel tier needs config:write.
    assert_eq!(
        w.say(&plain_here, "config set agent reviewer --user")
            .await
            .kind,
        ReplyKind::Ok
    );
    let denied = w.say(&plain_here, "config set agent coding").await;
    assert_eq!(
        denied.text,
        "🚫 You can't change the config of slack:C1. Ask slack:UADMIN."
    );
    assert_eq!(w.audit.lines().last().unwrap().reason, "missing-grant");
    let config_writer = w.in_channel("slack:UCONFIG", "slack:C1");
    assert_eq!(
        w.say(&config_writer, "config set agent coding").await.kind,
        ReplyKind::Ok,
        "the origin channel is the default tier"
    );
    assert_eq!(
        w.say(&config_writer, "config set greeting \"hello there\" --org")
            .await
            .kind,
        ReplyKind::Ok
    );
    let mine = w.say(&plain_here, "config get agent").await;
    assert_eq!(mine.text, "agent = reviewer (from user slack:UPLAIN)");
    let channel = w
        .say(&w.in_channel("slack:UREPO", "slack:C1"), "config get agent")
        .await;
    assert_eq!(channel.text, "agent = coding (from channel slack:C1)");
    assert_eq!(
        w.say(&plain_here, "config get greeting").await.text,
        "greeting = hello there (from the org)"
    );
    assert_eq!(
        w.say(&plain_here, "config get missing --org").await.text,
        "`missing` is not set on the org"
    );
    refused(&w, &w.caller("http:reader"), "config set agent x --org").await;
    let nobody_in_cli = w.caller("slack:UCONFIG");
    assert!(
        w.say(&nobody_in_cli, "config set agent x")
            .await
            .text
            .contains("needs a tier"),
        "no origin: a tier must be named"
    );
    for bad in [
        "config get Bad-Key",
        "config get mcp.github",
        "config set agent x --org --user",
        "config set agent x --channel C1",
    ] {
        assert_eq!(
            w.say(&config_writer, bad).await.kind,
            ReplyKind::Usage,
            "{bad}"
        );
    }
}

async fn mcp_servers_on_channel_and_org(w: World) {
    let plain_here = w.in_channel("slack:UPLAIN", "slack:C1");
    refused(&w, &plain_here, "mcp add github https://mcp.example/gh").await;
    let cw = w.in_channel("slack:UCONFIG", "slack:C1");
    assert_eq!(
        w.say(&cw, "mcp add github https://mcp.example/gh")
            .await
            .kind,
        ReplyKind::Ok,
        "config:write holders manage a channel's servers"
    );
    refused(&w, &cw, "mcp add linear https://mcp.example/linear --org").await;
    let rw = w.caller("slack:UREPO");
    assert_eq!(
        w.say(&rw, "mcp add linear https://mcp.example/linear --org")
            .await
            .kind,
        ReplyKind::Ok,
        "repo:write holders manage the org's"
    );
    let token = w.caller("http:writer");
    assert_eq!(
        w.say(&token, "mcp add sentry https://mcp.example/sentry --org")
            .await
            .kind,
        ReplyKind::Ok,
        "a service with mcp:write"
    );
    let listed = w.say(&plain_here, "mcp list").await;
    assert_eq!(
        listed.data["servers"].as_array().unwrap().len(),
        3,
        "{}",
        listed.text
    );
    assert!(
        w.say(&w.caller("slack:UPLAIN"), "mcp list")
            .await
            .text
            .contains("linear"),
        "no origin: the org's only"
    );
    assert_eq!(w.say(&cw, "mcp remove github").await.kind, ReplyKind::Ok);
    for bad in [
        "mcp add Bad https://x",
        "mcp add x ftp://x",
        "mcp add x",
        "mcp remove x --org --channel slack:C1",
    ] {
        assert_eq!(w.say(&cw, bad).await.kind, ReplyKind::Usage, "{bad}");
    }
}
