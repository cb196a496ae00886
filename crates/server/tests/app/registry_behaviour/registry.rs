//! The registry's order of work: find, authorize before parsing, audit, deny shape, parse,
//! handle. And the reply texts, byte for byte.

use authz_core::ChannelVisibility as V;
use commands::{RawInput, ReplyKind};

use crate::registry_behaviour::harness::*;

#[tokio::test]
async fn a_refused_caller_is_never_parsed_and_learns_no_usage() {
    let w = sqlite().await;
    let nobody = w.caller("http:nobody");
    for text in [
        "runs list --bogus --limit 0",
        "config set",
        "friction report --days 9999",
        "mcp add",
    ] {
        let r = w.say(&nobody, text).await;
        assert_eq!(r.kind, ReplyKind::Unauthorized, "{text}: {r:?}");
        assert!(
            !r.text.contains("usage"),
            "{text}: a refused caller saw usage: {}",
            r.text
        );
        assert!(
            r.text.starts_with("🚫 You don't have permission to use `"),
            "{}",
            r.text
        );
    }
    for text in [
        "runs get ../../etc/passwd",
        "runs events",
        "memory forget x y z",
    ] {
        let r = w.say(&nobody, text).await;
        assert_eq!(r.kind, ReplyKind::NotFound, "{text}: {r:?}");
    }
    // The same malformed input from an admitted caller gets the usage.
    let admin = w.caller("slack:UADMIN");
    let r = w.say(&admin, "runs list --bogus").await;
    assert_eq!(r.kind, ReplyKind::Usage);
    assert!(
        r.text.contains("unknown option `--bogus`") && r.text.contains("usage: runs list"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn a_deny_writes_one_audit_line_with_the_reason_and_never_the_reply() {
    let w = sqlite().await;
    let run = w.run("slack:G1", "slack:UADMIN", V::Private, 5).await;
    let plain = w.caller("slack:UPLAIN");
    let r = w.say(&plain, &format!("runs get {}", run.id)).await;
    assert_eq!(r.text, "run not found");
    let lines = w.audit.lines();
    assert_eq!(lines.len(), 1);
    let line = lines[0].to_string();
    // A plain Slack user holds no runs:read: refused at admission, before the run was loaded.
    assert_eq!(
        line,
        "[authz] deny actor=slack:UPLAIN action=runs:read resource=command reason=missing-grant subject=runs:read surface=slack (missing grant runs:read)"
    );
    assert!(
        !line.contains(run.id.as_str()),
        "no run id on the audit line"
    );

    let operator = w.caller("access:operator");
    let r = w.say(&operator, &format!("runs get {}", run.id)).await;
    assert_eq!(r.text, "run not found");
    let line = w.audit.lines()[1].to_string();
    assert_eq!(
        line,
        "[authz] deny actor=access:operator action=runs:read resource=run reason=not-member subject=slack:G1 surface=access (not a member of slack:G1)"
    );
    for reply_text in [&r.text, &r.data.to_string()] {
        assert!(
            !reply_text.contains("member") && !reply_text.contains("grant"),
            "the reason leaked: {reply_text}"
        );
    }
}

#[tokio::test]
async fn a_denied_point_read_is_byte_identical_to_a_missing_id() {
    let w = sqlite().await;
    let private = w.run("slack:G1", "slack:UADMIN", V::Private, 5).await;
    let operator = w.caller("access:operator");
    for verb in ["get", "events", "friction", "diff", "stop"] {
        let denied = w
            .say(&operator, &format!("runs {verb} {}", private.id))
            .await;
        let missing = w
            .say(
                &operator,
                &format!("runs {verb} 0000000000000NOSUCHRUN0000"),
            )
            .await;
        assert_eq!(denied, missing, "runs {verb}");
        assert_eq!(denied.kind, ReplyKind::NotFound);
        assert_eq!(
            denied.data.to_string(),
            r#"{"code":"not_found","error":"run not found"}"#
        );
    }
}

#[tokio::test]
async fn an_unknown_command_is_a_hint_and_nothing_is_authorized() {
    let w = sqlite().await;
    let r = w
        .say(&w.caller("http:nobody"), "deploy everything now")
        .await;
    assert_eq!(r.kind, ReplyKind::UnknownCommand);
    assert_eq!(
        r.text,
        "unknown command `deploy`. Try `help` to see the commands you can use."
    );
    assert!(w.audit.lines().is_empty());
    assert!(!w.registry.is_command("please summarise the last deploy"));
    assert!(w.registry.is_command("runs list --status all"));
    assert!(
        w.registry.is_command("runs frobnicate"),
        "a mistyped command is the registry's to answer"
    );
    assert!(w.registry.is_command("runs list 'all"), "an unclosed quote");
    assert!(
        w.registry.is_command("hello \u{7}"),
        "control characters are refused by the registry, whatever the text is for"
    );
    assert!(!w.registry.is_command("say \"hello"));
}

#[tokio::test]
async fn json_input_goes_through_the_same_admission_and_schema() {
    let w = sqlite().await;
    let args = serde_json::json!({"status": "all", "limit": 5});
    let raw = RawInput::Json {
        id: "runs.list".into(),
        args: args.as_object().unwrap().clone(),
    };
    let admin = w.caller("slack:UADMIN");
    assert_eq!(
        w.registry
            .invoke(&admin, raw.clone(), &w.services)
            .await
            .kind,
        ReplyKind::Ok
    );
    assert_eq!(
        w.registry
            .invoke(&w.caller("http:nobody"), raw, &w.services)
            .await
            .kind,
        ReplyKind::Unauthorized
    );
    let bad = RawInput::Json {
        id: "runs.list".into(),
        args: serde_json::json!({"limit": "many"})
            .as_object()
            .unwrap()
            .clone(),
    };
    let r = w.registry.invoke(&admin, bad, &w.services).await;
    assert_eq!(r.kind, ReplyKind::Usage);
    let unknown = RawInput::Json {
        id: "runs.delete".into(),
        args: Default::default(),
    };
    assert_eq!(
        w.registry.invoke(&admin, unknown, &w.services).await.kind,
        ReplyKind::UnknownCommand
    );
}

#[tokio::test]
async fn control_characters_in_command_text_are_refused() {
    let w = sqlite().await;
    let r = w
        .say(&w.caller("slack:UADMIN"), "runs list \u{1b}[2J")
        .await;
    assert_eq!(r.kind, ReplyKind::Usage);
    assert_eq!(r.text, "command text contains control characters");
}

#[tokio::test]
async fn the_admins_hint_names_people_holding_all_never_a_surface() {
    let w = sqlite().await;
    let r = w.say(&w.caller("http:nobody"), "runs list").await;
    assert_eq!(
        r.text,
        "🚫 You don't have permission to use `runs list`. Ask slack:UADMIN."
    );
}

/// Text whose first word is a command group is the registry's, however it is mistyped: an
/// apostrophe inside a word is a letter, and an unclosed quote or a control character gets
/// the registry's reply. None of it starts an agent run. (Before: each of these became one.)
#[tokio::test]
async fn mistyped_command_text_gets_the_registrys_reply_never_an_agent_run() {
    let w = sqlite().await;
    let cli = w.in_channel("cli:local", "cli:local");
    let handle = |text: &'static str| {
        let (w, cli) = (&w, &cli);
        async move { w.registry.handle(cli, text, &w.services).await }
    };
    let proposed = handle("friction propose don't retry").await;
    assert!(proposed.run.is_none());
    assert_eq!(
        proposed.reply.kind,
        ReplyKind::Ok,
        "{}",
        proposed.reply.text
    );
    assert_eq!(proposed.reply.data["text"], "don't retry");
    for (text, kind, want) in [
        (
            "friction propose \"don't retry",
            ReplyKind::Usage,
            "the command text has an unclosed quote\nusage: friction propose",
        ),
        (
            "runs list 'all",
            ReplyKind::Usage,
            "the command text has an unclosed quote\nusage: runs list",
        ),
        (
            "runs list \u{7}",
            ReplyKind::Usage,
            "command text contains control characters",
        ),
        (
            "runs\u{1b}[2J list",
            ReplyKind::Usage,
            "command text contains control characters",
        ),
        (
            "runs lst",
            ReplyKind::UnknownCommand,
            "unknown command `runs lst`; did you mean `runs list`?",
        ),
        (
            "config 'x",
            ReplyKind::Usage,
            "the command text has an unclosed quote\nunknown command `config`",
        ),
    ] {
        let h = handle(text).await;
        assert!(h.run.is_none(), "{text:?} started a run");
        assert_eq!(h.reply.kind, kind, "{text:?}: {}", h.reply.text);
        assert!(h.reply.text.starts_with(want), "{text:?}: {}", h.reply.text);
    }
    let all = store::ListRuns {
        visible_to: authz_core::Predicate::All,
        status: store::StatusFilter::All,
        limit: 10,
        before: None,
    };
    assert!(
        w.store.list_runs(&all).await.unwrap().runs.is_empty(),
        "nothing was recorded"
    );
    // Text for an agent may hold an apostrophe or an unbalanced quote: it is a run.
    for text in ["what's the status of the deploy?", "say \"hello"] {
        let h = handle(text).await;
        assert!(h.run.is_some(), "{text:?}: {}", h.reply.text);
    }
}

/// `@nosuch` names only the agents the caller may run: a caller with no grants learns none,
/// and a restricted agent is never named to someone who may not run it. (Before: every
/// declared agent, restricted ones included.)
#[tokio::test]
async fn an_unknown_agent_names_only_the_agents_the_caller_may_run() {
    let w = sqlite().await;
    for (who, channel, want) in [
        (
            "http:nobody",
            "http:nobody",
            "there is no agent `nosuch` you can run",
        ),
        (
            "slack:UPLAIN",
            "slack:C1",
            "there is no agent `nosuch`; you can run reviewer",
        ),
        (
            "slack:UADMIN",
            "slack:C1",
            "there is no agent `nosuch`; you can run coding, reviewer",
        ),
    ] {
        let h = w
            .registry
            .handle(&w.in_channel(who, channel), "@nosuch hi", &w.services)
            .await;
        assert!(h.run.is_none());
        assert_eq!(
            (h.reply.kind, h.reply.text.as_str()),
            (ReplyKind::Usage, want),
            "{who}"
        );
    }
}
