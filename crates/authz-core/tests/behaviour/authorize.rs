//! authorize: table shape, fail-closed defaults, effective grants, predicate derivation.

use authz_core::{
    ALL_GRANTS, Action, ActorKind, CATALOGUE_ACTIONS, ChannelVisibility, GrantsTable, NO_GRANTS,
    Predicate, Reason, ResourceType, Verdict, authorize, predicate_for, resolve_actor,
    resolve_agent,
};

use crate::fixtures::*;

fn deny_reason(v: Verdict) -> Reason {
    match v {
        Verdict::Deny(r) => r,
        Verdict::Allow => panic!("expected a deny"),
    }
}

#[test]
fn conditions_and_within_a_row() {
    let private = resource("run:id=r1,channel=slack:G1,user=slack:U2,visibility=private");
    let holder = actor("slack:U1", "runs:read", "", "");
    assert_eq!(
        deny_reason(authorize(&holder, &act("runs:read"), &private)),
        Reason::NotMember {
            channel: "slack:G1".parse().unwrap()
        },
        "a held grant without membership denies, naming the channel"
    );
    let member = actor("slack:U1", "", "slack:G1", "");
    assert_eq!(
        deny_reason(authorize(&member, &act("runs:read"), &private)),
        Reason::MissingGrant {
            action: act("runs:read")
        },
        "membership without the grant denies, naming the grant"
    );
}

#[test]
fn rows_or_any_satisfied_row_allows() {
    let private = resource("run:id=r1,channel=slack:G1,user=slack:U2,visibility=private");
    for who in [
        actor("slack:U1", "runs:read", "slack:G1", ""),
        actor("slack:U1", "runs:read", "all", ""),
        actor("slack:U2", "runs:read", "", ""),
    ] {
        assert!(
            authorize(&who, &act("runs:read"), &private).is_allow(),
            "{who:?}"
        );
    }
}

#[test]
fn no_row_is_a_deny_naming_the_gap() {
    let admin = actor("slack:U1", "all", "all", "all");
    let channel = resource("channel:id=slack:C1,visibility=public");
    assert_eq!(
        deny_reason(authorize(&admin, &act("runs:read"), &channel)),
        Reason::NoRule {
            action: act("runs:read"),
            resource_type: ResourceType::Channel
        }
    );
    let cmd = resource("command:id=runs.list");
    assert!(matches!(
        deny_reason(authorize(&admin, &act("agent:run:coding"), &cmd)),
        Reason::NoRule { .. }
    ));
}

#[test]
fn an_inconsistent_actor_is_denied_first_even_with_every_grant() {
    let cmd = resource("command:id=help");
    let mut agent_with_slack_id = actor("slack:U1", "all", "all", "all");
    agent_with_slack_id.kind = ActorKind::Agent;
    let mut service_cli = actor("cli:local", "all", "all", "all");
    service_cli.kind = ActorKind::Service;
    let mut user_with_principal = actor("slack:U1", "all", "all", "all");
    user_with_principal.on_behalf_of = Some(Box::new(actor("slack:U2", "all", "all", "all")));
    let mut agent_for_agent = resolve_agent(&agent_name("a"), None, &GrantsTable::default());
    agent_for_agent.grants = ALL_GRANTS;
    agent_for_agent.on_behalf_of = Some(Box::new(resolve_agent(
        &agent_name("b"),
        Some(actor("slack:U1", "all", "all", "all")),
        &GrantsTable::default(),
    )));
    for who in [
        agent_with_slack_id,
        service_cli,
        user_with_principal,
        agent_for_agent,
    ] {
        assert!(!who.is_consistent(), "{who:?}");
        assert_eq!(
            authorize(&who, &act("help:read"), &cmd),
            Verdict::Deny(Reason::InconsistentActor)
        );
        assert_eq!(
            predicate_for(&who, &act("runs:read"), ResourceType::Run),
            Predicate::None
        );
    }
}

#[test]
fn no_grants_user_is_denied_everything_but_the_open_rows() {
    let nobody = actor("slack:U9", "", "", "");
    for a in CATALOGUE_ACTIONS.iter().chain([&Action::TraceRead]) {
        let v = authorize(&nobody, a, &resource("command:id=x"));
        let open = *a == act("config:write");
        assert_eq!(
            v.is_allow(),
            open,
            "{a}: only a person's own config scope is open"
        );
    }
    let open = [
        ("config:write", "config-scope:tier=user,id=slack:U9"),
        ("memory:write", "memory-scope:kind=user,key=slack:U9"),
        ("memory:write", "memory-scope:kind=org,origin=public"),
        ("repo:use", "repo:slug=acme/web"),
    ];
    for (a, r) in open {
        assert!(
            authorize(&nobody, &act(a), &resource(r)).is_allow(),
            "{a} on {r}"
        );
    }
    let closed = [
        (
            "runs:read",
            "run:id=r,channel=slack:C1,user=slack:U1,visibility=public",
        ),
        ("config:write", "config-scope:tier=channel,id=slack:C1"),
        ("repo:use", "repo:slug=acme/payments"),
        ("agent:run:coding", "agent:name=coding"),
        ("repo:exec", "agent:name=coding"),
        ("memory:write", "memory-scope:kind=channel,key=slack:C1"),
    ];
    for (a, r) in closed {
        assert!(
            !authorize(&nobody, &act(a), &resource(r)).is_allow(),
            "{a} on {r}"
        );
    }
}

#[test]
fn a_no_grants_credential_is_refused_on_every_command_row() {
    for who in ["http:t", "mcp:t", "access:svc:cn", "schedule:nightly"] {
        let nobody = actor(who, "", "", "");
        for a in CATALOGUE_ACTIONS.iter().chain([&Action::TraceRead]) {
            assert!(
                !authorize(&nobody, a, &resource("command:id=x")).is_allow(),
                "{who} {a}"
            );
        }
    }
}

#[test]
fn public_makes_the_member_not_the_writer() {
    let public = resource("run:id=r,channel=slack:C1,user=slack:U2,visibility=public");
    let reader = actor("slack:U1", "runs:read", "", "");
    assert!(authorize(&reader, &act("runs:read"), &public).is_allow());
    assert!(!authorize(&reader, &act("runs:write"), &public).is_allow());
    for vis in ["private", "dm", "machine", "unknown"] {
        let r = resource(&format!(
            "run:id=r,channel=slack:C1,user=slack:U2,visibility={vis}"
        ));
        assert!(
            !authorize(&reader, &act("runs:read"), &r).is_allow(),
            "{vis}"
        );
    }
}

#[test]
fn a_reason_names_the_actor_never_the_surface_key() {
    let t = table(
        "[grants.\"slack:*\"]\nactions = [\"runs:read\"]\n[restrict]\nagents = [\"coding\"]",
        &["coding"],
    );
    let u = resolve_actor(id("slack:U1"), &t);
    let v = authorize(&u, &act("agent:run:coding"), &resource("agent:name=coding"));
    let text = format!("{}", deny_reason(v));
    assert!(!text.contains('*'), "{text}");
    assert_eq!(text, "missing grant agent:run:coding");
}

#[test]
fn effective_grants_of_an_agent_never_exceed_its_principal() {
    let t = GrantsTable::default();
    let member = actor("slack:U1", "runs:read,help:read", "slack:C1", "acme/web");
    let agent = resolve_agent(&agent_name("coding"), Some(member.clone()), &t);
    assert_eq!(
        *agent.effective_grants(),
        member.grants,
        "all ∩ S = S: exactly the member's grants"
    );

    let admin = actor("slack:U1", "all", "all", "all");
    let narrow_t = table(
        "[grants.\"agent:coding\"]\nactions = [\"runs:read\"]\nchannels = [\"slack:C1\"]",
        &["coding"],
    );
    let narrow = resolve_agent(&agent_name("coding"), Some(admin), &narrow_t);
    assert_eq!(
        *narrow.effective_grants(),
        grants("runs:read", "slack:C1", ""),
        "an entry narrows the agent below its principal, never widening to the admin's"
    );

    let alone = resolve_agent(&agent_name("coding"), None, &t);
    assert_eq!(
        *alone.effective_grants(),
        NO_GRANTS,
        "no principal: its own, nothing"
    );
    let alone_entry = resolve_agent(&agent_name("coding"), None, &narrow_t);
    assert_eq!(
        *alone_entry.effective_grants(),
        grants("runs:read", "slack:C1", "")
    );
}

/// What governs later runs (config values, repos, MCP servers) is never written by an agent,
/// whoever it acts for: nothing a run does changes what any run is governed by.
#[test]
fn an_agent_never_writes_what_governs_runs_even_for_an_admin() {
    let t = GrantsTable::default();
    let admin = actor("slack:U1", "all", "all", "all");
    let agent = resolve_agent(&agent_name("coding"), Some(admin.clone()), &t);
    for (action, target) in [
        ("config:write", "command:id=config.set"),
        ("repo:write", "command:id=repo.add"),
        ("mcp:write", "command:id=mcp.add"),
        ("config:write", "config-scope:tier=org"),
        ("config:write", "config-scope:tier=channel,id=slack:C1"),
        ("config:write", "config-scope:tier=user,id=slack:U1"),
        ("mcp:write", "config-scope:tier=org"),
        ("mcp:write", "config-scope:tier=channel,id=slack:C1"),
    ] {
        let resource = resource(target);
        assert!(
            authorize(&admin, &act(action), &resource).is_allow(),
            "the admin may {action} {target}"
        );
        assert!(
            !authorize(&agent, &act(action), &resource).is_allow(),
            "the admin's agent may {action} {target}"
        );
    }
    // What it reads and runs, it still may.
    assert!(
        authorize(
            &agent,
            &act("config:read"),
            &resource("command:id=config.get")
        )
        .is_allow()
    );
    assert!(authorize(&agent, &act("repo:exec"), &resource("command:id=repo.test")).is_allow());
}

#[test]
fn predicate_for_derivation() {
    let member = actor("slack:U1", "runs:read", "slack:G1,http:ops", "");
    let want = Predicate::Or(vec![
        Predicate::ChannelsIn(vec![
            "http:ops".parse().unwrap(),
            "slack:G1".parse().unwrap(),
        ]),
        Predicate::VisibilityIn(vec![ChannelVisibility::Public]),
        Predicate::UserIs(id("slack:U1")),
    ]);
    assert_eq!(
        predicate_for(&member, &act("runs:read"), ResourceType::Run),
        want
    );

    let no_channels = actor("http:t", "runs:read", "", "");
    assert_eq!(
        predicate_for(&no_channels, &act("runs:read"), ResourceType::Run),
        Predicate::Or(vec![
            Predicate::VisibilityIn(vec![ChannelVisibility::Public]),
            Predicate::UserIs(id("http:t")),
        ]),
        "no channel grants: the public half and its own runs"
    );

    let fleet = actor("access:ops", "runs:read", "all", "");
    assert_eq!(
        predicate_for(&fleet, &act("runs:read"), ResourceType::Run),
        Predicate::All
    );

    let no_grant = actor("access:ops", "runs:write", "all", "all");
    assert_eq!(
        predicate_for(&no_grant, &act("runs:read"), ResourceType::Run),
        Predicate::None
    );
    assert_eq!(
        predicate_for(&fleet, &act("config:write"), ResourceType::Run),
        Predicate::None,
        "no row for the action on runs"
    );

    let agent = resolve_agent(
        &agent_name("coding"),
        Some(actor("slack:U2", "runs:read", "", "")),
        &GrantsTable::default(),
    );
    assert_eq!(
        predicate_for(&agent, &act("runs:read"), ResourceType::Run),
        Predicate::Or(vec![
            Predicate::VisibilityIn(vec![ChannelVisibility::Public]),
            Predicate::UserIs(id("agent:coding")),
            Predicate::UserIs(id("slack:U2")),
        ])
    );
}
