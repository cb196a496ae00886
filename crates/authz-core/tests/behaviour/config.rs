//! grants/restrict parsing (fail closed, one row per failure), the baselines, surface entries,
//! schedules, and the helpers that answer from the table.

use std::collections::BTreeSet;

use authz_core::{
    ALL_GRANTS, AgentName, ChannelVisibility, GrantSet, Grants, GrantsTable, NO_GRANTS,
    ScheduleName, resolve_actor, resolve_agent,
};

use crate::fixtures::*;

fn parse(text: &str) -> Result<GrantsTable, authz_core::ConfigError> {
    let doc: toml::Table = toml::from_str(text).unwrap();
    let agents: BTreeSet<AgentName> = ["coding", "reviewer"].map(agent_name).into_iter().collect();
    GrantsTable::from_config(&doc, agents)
}

#[test]
fn every_parse_failure_names_the_key_and_field() {
    // (config, the key path the error names, a phrase of the problem)
    let rows: &[(&str, &str, &str)] = &[
        (
            "[grants.\"foo:bar\"]\nactions = []",
            "grants.\"foo:bar\"",
            "unknown id prefix",
        ),
        (
            "[grants.\"U024\"]\nactions = []",
            "grants.\"U024\"",
            "unknown id prefix",
        ),
        (
            "[grants.\"slack:\"]\nactions = []",
            "grants.\"slack:\"",
            "name after the prefix is empty",
        ),
        (
            "[grants.\"http:\"]\nactions = []",
            "grants.\"http:\"",
            "name after the prefix is empty",
        ),
        (
            "[grants.\"slack:C024\"]\nactions = []",
            "grants.\"slack:C024\"",
            "Slack user id",
        ),
        (
            "[grants.\"slack:U1\"]\nchannels = \"All\"",
            "grants.\"slack:U1\".channels",
            "`All` is not \"all\"",
        ),
        (
            "[grants.\"slack:U1\"]\nactions = \"*\"",
            "grants.\"slack:U1\".actions",
            "`*` is not \"all\"",
        ),
        (
            "[grants.\"slack:U1\"]\nrepos = \"any\"",
            "grants.\"slack:U1\".repos",
            "`any` is not \"all\"",
        ),
        (
            "[grants.\"slack:U1\"]\nchannels = [\"all\"]",
            "grants.\"slack:U1\".channels[0]",
            "is not \"all\"",
        ),
        (
            "[grants.\"slack:U1\"]\nagents = [\"coding\"]",
            "grants.\"slack:U1\".agents",
            "agent:run:<name>",
        ),
        (
            "[grants.\"slack:U1\"]\nscopes = [\"runs:read\"]",
            "grants.\"slack:U1\".scopes",
            "unknown field `scopes`",
        ),
        (
            "[grants]\n\"slack:U1\" = \"all\"",
            "grants.\"slack:U1\"",
            "must be a table",
        ),
        ("grants = [\"slack:U1\"]", "grants", "must be a table"),
        (
            "[grants.\"slack:U1\"]\nactions = [\"runs:delete\"]",
            "grants.\"slack:U1\".actions[0]",
            "\"runs:delete\" is not an action",
        ),
        (
            "[grants.\"slack:U1\"]\nactions = [\"runs:read\", 3]",
            "grants.\"slack:U1\".actions[1]",
            "must be a string",
        ),
        (
            "[grants.\"slack:U1\"]\nactions = \"runs:read\"",
            "grants.\"slack:U1\".actions",
            "must be a list",
        ),
        (
            "[grants.\"slack:U1\"]\nactions = [\"agent:run:deploy\"]",
            "grants.\"slack:U1\".actions[0]",
            "no [agents.deploy] table declares",
        ),
        (
            "[grants.\"slack:U1\"]\nchannels = [\"C024\"]",
            "grants.\"slack:U1\".channels[0]",
            "not a valid channel id",
        ),
        (
            "[grants.\"slack:U1\"]\nrepos = [\"acme\"]",
            "grants.\"slack:U1\".repos[0]",
            "not a valid repo slug",
        ),
        (
            "[grants.\"slack:U*\"]\nactions = []",
            "grants.\"slack:U*\"",
            "`*` only stands for a whole surface",
        ),
        (
            "[grants.\"schedule:*\"]\nactions = []",
            "grants.\"schedule:*\"",
            "`*` only stands for a whole surface",
        ),
        (
            "[grants.\"access:svc:*\"]\nactions = []",
            "grants.\"access:svc:*\"",
            "`*` only stands for a whole surface",
        ),
        (
            "[grants.\"agent:*\"]\nactions = []",
            "grants.\"agent:*\"",
            "`*` only stands for a whole surface",
        ),
        (
            "[grants.\"cli:*\"]\nactions = []",
            "grants.\"cli:*\"",
            "`*` only stands for a whole surface",
        ),
        (
            "[grants.\"cli:local\"]\nactions = \"all\"",
            "grants.\"cli:local\"",
            "already holds everything",
        ),
        (
            "[restrict]\nagents = [\"deploy\"]",
            "restrict.agents[0]",
            "not a declared agent",
        ),
        (
            "[restrict]\nagents = \"coding\"",
            "restrict.agents",
            "must be a list",
        ),
        (
            "[restrict]\nrepos = [\"acme\"]",
            "restrict.repos[0]",
            "not a valid repo slug",
        ),
        (
            "[restrict]\nrepos = [1]",
            "restrict.repos[0]",
            "must be a string",
        ),
        (
            "[restrict]\nchannels = [\"slack:C1\"]",
            "restrict.channels",
            "unknown field `channels`",
        ),
        ("restrict = [\"coding\"]", "restrict", "must be a table"),
        (
            "[permissions]\nadmins = [\"slack:U1\"]",
            "permissions",
            "grants, groups and restrict are the only authorization keys",
        ),
        (
            "admins = [\"slack:U1\"]",
            "admins",
            "only authorization keys",
        ),
        ("[scopes]\nx = 1", "scopes", "only authorization keys"),
        // Groups: members are people and credentials of the surfaces, never nested.
        (
            "[groups]\noncall = [\"agent:coding\"]",
            "groups.\"oncall\"[0]",
            "never a group member",
        ),
        (
            "[groups]\noncall = [\"schedule:nightly\"]",
            "groups.\"oncall\"[0]",
            "never a group member",
        ),
        (
            "[groups]\noncall = [\"cli:local\"]",
            "groups.\"oncall\"[0]",
            "already holds everything",
        ),
        (
            "[groups]\noncall = [\"group:other\"]",
            "groups.\"oncall\"[0]",
            "do not nest",
        ),
        (
            "[groups]\noncall = [\"U024\"]",
            "groups.\"oncall\"[0]",
            "no known namespace",
        ),
        (
            "[groups]\noncall = \"slack:U1\"",
            "groups.\"oncall\"",
            "list of actor ids",
        ),
        (
            "[groups]\n\"on call\" = []",
            "groups.\"on call\"",
            "letters, digits",
        ),
        ("[groups]\nslack = []", "groups.\"slack\"", "name the kinds"),
        ("groups = 1", "groups", "must be a table"),
        (
            "[grants.\"group:oncall\"]\nactions = [\"runs:read\"]",
            "grants.\"group:oncall\"",
            "not declared; list its members under [groups]",
        ),
        (
            "[grants.\"group:slack:U1\"]\nactions = []",
            "grants.\"group:slack:U1\"",
            "Slack user group",
        ),
        (
            "[grants.\"group:\"]\nactions = []",
            "grants.\"group:\"",
            "group name is empty",
        ),
        // A Slack user group may hold nothing a workspace member could hand themself.
        (
            "[grants.\"group:slack:S1\"]\nactions = \"all\"",
            "grants.\"group:slack:S1\"",
            "may not hold actions = \"all\"",
        ),
        (
            "[grants.\"group:slack:S1\"]\nchannels = \"all\"",
            "grants.\"group:slack:S1\"",
            "may not hold channels",
        ),
        (
            "[grants.\"group:slack:S1\"]\nrepos = \"all\"",
            "grants.\"group:slack:S1\"",
            "may not hold repos",
        ),
        (
            "[grants.\"group:slack:S1\"]\nactions = [\"config:write\"]",
            "grants.\"group:slack:S1\"",
            "may not hold config:write",
        ),
        (
            "[grants.\"group:slack:S1\"]\nactions = [\"runs:read\", \"repo:write\"]",
            "grants.\"group:slack:S1\"",
            "may not hold repo:write",
        ),
        (
            "[grants.\"group:slack:S1\"]\nactions = [\"trace:read\"]",
            "grants.\"group:slack:S1\"",
            "may not hold trace:read",
        ),
    ];
    for (text, key, phrase) in rows {
        let e = parse(text).expect_err(text);
        assert_eq!(e.key, *key, "{text}");
        let shown = e.to_string();
        assert!(shown.starts_with(key), "{shown}");
        assert!(shown.contains(phrase), "{text}: {shown:?} lacks {phrase:?}");
    }
}

#[test]
fn absent_axes_are_empty_and_all_is_explicit() {
    let t = parse("[grants.\"http:ops\"]\nactions = [\"runs:read\"]\n[grants.\"http:all\"]\nchannels = \"all\"").unwrap();
    let ops = &t.entries()[&id("http:ops")];
    assert_eq!(ops.channels, GrantSet::none());
    assert_eq!(ops.repos, GrantSet::none());
    assert!(t.entries()[&id("http:all")].channels.is_all());
    assert!(t.entries()[&id("http:all")].actions.is_empty());
}

#[test]
fn the_baselines_by_namespace() {
    let t = parse("[restrict]\nagents = [\"coding\"]").unwrap();
    let slack = t.grants_for(&id("slack:U1"));
    for a in [
        "help:read",
        "status:read",
        "config:read",
        "repo:read",
        "friction:read",
        "memory:read",
        "mcp:read",
        "schedule:read",
        "memory:write",
        "mcp:write",
        "agent:run:reviewer",
    ] {
        assert!(slack.actions.holds(&act(a)), "slack baseline lacks {a}");
    }
    for a in [
        "config:write",
        "repo:write",
        "runs:read",
        "runs:write",
        "trace:read",
        "agent:run:coding",
        "repo:exec",
    ] {
        assert!(!slack.actions.holds(&act(a)), "slack baseline holds {a}");
    }
    assert!(slack.channels.is_empty() && slack.repos.is_empty());

    let browser = t.grants_for(&id("access:alice"));
    assert!(
        browser.actions.holds(&act("runs:read")),
        "an unlisted browser session lists public runs"
    );
    for a in [
        "runs:write",
        "config:write",
        "repo:exec",
        "schedule:exec",
        "agent:run:reviewer",
    ] {
        assert!(
            !browser.actions.holds(&act(a)),
            "a browser session holds {a}"
        );
    }
    for credential in [
        "http:t",
        "mcp:t",
        "access:svc:cn",
        "schedule:unknown",
        "agent:coding",
    ] {
        assert_eq!(t.grants_for(&id(credential)), NO_GRANTS, "{credential}");
    }
    assert_eq!(t.grants_for(&id("cli:local")), ALL_GRANTS);
}

#[test]
fn entries_add_for_people_and_are_exact_for_credentials() {
    let t = parse(
        "[grants.\"slack:U1\"]\nactions = [\"runs:read\"]\nchannels = [\"slack:G1\"]\n\
         [grants.\"http:ops\"]\nactions = [\"runs:read\"]\nchannels = [\"http:ops\"]\n\
         [grants.\"access:bob\"]\nactions = [\"config:write\"]\n\
         [grants.\"slack:U2\"]\nactions = \"all\"",
    )
    .unwrap();
    let u1 = t.grants_for(&id("slack:U1"));
    assert!(u1.actions.holds(&act("runs:read")) && u1.actions.holds(&act("help:read")));
    assert!(u1.channels.contains(&"slack:G1".parse().unwrap()));
    assert_eq!(
        t.grants_for(&id("http:ops")),
        grants("runs:read", "http:ops", "")
    );
    let bob = t.grants_for(&id("access:bob"));
    assert!(bob.actions.holds(&act("config:write")) && bob.actions.holds(&act("runs:read")));
    assert!(
        t.grants_for(&id("slack:U2")).actions.is_all(),
        "all absorbs the baseline"
    );
}

#[test]
fn surface_entries_union_into_their_surface_only() {
    let t = parse(
        "[grants.\"slack:*\"]\nactions = [\"agent:run:coding\"]\n\
         [grants.\"slack:U1\"]\nactions = [\"runs:read\"]\n\
         [grants.\"access:*\"]\nactions = [\"config:write\"]\nchannels = [\"slack:C1\"]\n\
         [grants.\"http:*\"]\nactions = [\"help:read\"]\n\
         [grants.\"mcp:*\"]\nactions = [\"status:read\"]\n\
         [grants.\"mcp:narrow\"]\nactions = []\n\
         [restrict]\nagents = [\"coding\"]",
    )
    .unwrap();
    let u1 = t.grants_for(&id("slack:U1"));
    assert!(
        u1.actions.holds(&act("agent:run:coding")),
        "the surface entry opens a restricted agent"
    );
    assert!(
        u1.actions.holds(&act("runs:read")),
        "beside a personal entry"
    );
    assert!(
        t.grants_for(&id("slack:U9"))
            .actions
            .holds(&act("agent:run:coding")),
        "alone"
    );
    let browser = t.grants_for(&id("access:alice"));
    assert!(browser.actions.holds(&act("config:write")));
    assert!(browser.channels.contains(&"slack:C1".parse().unwrap()));
    assert_eq!(
        t.grants_for(&id("access:svc:cn")),
        NO_GRANTS,
        "access:* never reaches access:svc:"
    );
    assert_eq!(t.grants_for(&id("http:t")), grants("help:read", "", ""));
    assert_eq!(
        t.grants_for(&id("mcp:narrow")),
        grants("status:read", "", ""),
        "a narrower personal entry never narrows the surface entry"
    );
    for other in ["schedule:x", "agent:coding", "cli:local"] {
        let g = t.grants_for(&id(other));
        assert!(
            !g.actions.holds(&act("help:read")) || g == ALL_GRANTS,
            "{other}"
        );
    }
    assert!(
        t.admins_hint().is_empty(),
        "a surface entry is never an admin"
    );
}

#[test]
fn schedules_hold_their_declared_grants_unless_an_entry_replaces_them_whole() {
    let mut t = parse("[grants.\"schedule:nightly\"]\nactions = [\"help:read\"]").unwrap();
    let si = ScheduleName::parse("self-improvement").unwrap();
    let declared = Grants {
        actions: GrantSet::only([act("friction:read"), act("friction:write")]),
        channels: GrantSet::All,
        repos: GrantSet::none(),
    };
    t.declare_schedule(si.clone(), declared.clone());
    t.declare_schedule(ScheduleName::parse("nightly").unwrap(), declared.clone());
    assert_eq!(t.grants_for(&si.actor_id()), declared);
    assert_eq!(
        t.grants_for(&id("schedule:nightly")),
        grants("help:read", "", "")
    );
    let actor = resolve_actor(si.actor_id(), &t);
    let run = resource("run:id=r,channel=http:ops,user=http:ops,visibility=machine");
    assert!(
        authz_core::authorize(&actor, &act("friction:read"), &run).is_allow(),
        "the fleet"
    );
}

#[test]
fn admins_hint_and_the_can_helpers_answer_from_the_table() {
    let t = parse(
        "[grants.\"slack:U1\"]\nactions = \"all\"\nchannels = \"all\"\n\
         [grants.\"access:ops\"]\nactions = \"all\"\n\
         [grants.\"http:robot\"]\nactions = \"all\"\n\
         [grants.\"slack:U2\"]\nactions = [\"repo:write\", \"config:write\", \"agent:run:coding\"]\nrepos = [\"acme/payments\"]\n\
         [restrict]\nagents = [\"coding\"]\nrepos = [\"Acme/Payments\"]",
    )
    .unwrap();
    assert_eq!(
        t.admins_hint(),
        vec![id("access:ops"), id("slack:U1")],
        "people only"
    );
    let plain = resolve_actor(id("slack:U3"), &t);
    let u2 = resolve_actor(id("slack:U2"), &t);
    let c1 = "slack:C1".parse().unwrap();
    let coding = agent_name("coding");
    let payments = "acme/payments".parse().unwrap();
    let web = "acme/web".parse().unwrap();
    assert!(!t.can_edit_channel_config(&plain, &c1) && t.can_edit_channel_config(&u2, &c1));
    assert!(!t.can_run_agent(&plain, &coding) && t.can_run_agent(&u2, &coding));
    assert!(
        t.can_run_agent(&plain, &agent_name("reviewer")),
        "unrestricted agents are open"
    );
    assert!(!t.can_use_repo(&plain, &payments) && t.can_use_repo(&u2, &payments));
    assert!(t.can_use_repo(&plain, &web), "unrestricted repos are open");
    assert_eq!(t.restricted_agents_for(&plain), vec![coding.clone()]);
    assert!(t.restricted_agents_for(&u2).is_empty());
}

#[test]
fn an_agent_entry_replaces_its_baseline() {
    let t = parse("[grants.\"agent:coding\"]\nactions = [\"runs:read\"]").unwrap();
    let admin = resolve_actor(
        id("slack:U1"),
        &parse("[grants.\"slack:U1\"]\nactions = \"all\"").unwrap(),
    );
    let a = resolve_agent(&agent_name("coding"), Some(admin), &t);
    assert_eq!(a.grants, grants("runs:read", "", ""));
    let r = resolve_agent(&agent_name("reviewer"), None, &t);
    assert_eq!(r.grants, NO_GRANTS);
    // A stamp is never read from config: the default visibility is unknown.
    assert_eq!(ChannelVisibility::default(), ChannelVisibility::Unknown);
}

/// A person of another workspace (Slack Connect) holds only their own entry: no Slack
/// baseline, no `slack:*` surface entry; without an entry, nothing.
#[test]
fn an_outsider_holds_only_their_own_entry() {
    let t = parse(
        "[grants.\"slack:*\"]\nactions = [\"runs:read\"]\n\
         [grants.\"slack:UGUEST\"]\nactions = [\"status:read\"]",
    )
    .unwrap();
    let member = resolve_actor(id("slack:UMEMBER"), &t);
    assert!(member.grants.actions.contains(&act("runs:read")));
    assert!(member.grants.actions.contains(&act("help:read")));
    let guest = authz_core::resolve_outsider(id("slack:UGUEST"), &t);
    assert!(guest.grants.actions.contains(&act("status:read")));
    for not in ["runs:read", "help:read", "memory:write"] {
        assert!(!guest.grants.actions.contains(&act(not)), "{not}");
    }
    let stranger = authz_core::resolve_outsider(id("slack:USTRANGER"), &t);
    assert_eq!(stranger.grants, NO_GRANTS);
}

mod groups {
    use super::*;
    use authz_core::{Action, GroupFacts, GroupId, resolve_outsider};

    const TEAM: &str = "[groups]\noncall = [\"slack:U1\", \"access:alice@example.com\", \"http:ops\"]\n\
        [grants.\"group:oncall\"]\nactions = [\"runs:write\"]\nchannels = [\"slack:C9\"]\n\
        [grants.\"group:slack:S1\"]\nactions = [\"friction:write\"]\n\
        [grants.\"group:access:eng\"]\nactions = [\"memory:exec\"]\nrepos = [\"acme/api\"]\n";

    fn facts(groups: &[&str]) -> GroupFacts {
        GroupFacts {
            member_of: groups.iter().map(|g| GroupId::parse(g).unwrap()).collect(),
            unresolved: Default::default(),
        }
    }

    fn holds(t: &GrantsTable, who: &str, f: &[&str], action: &str) -> bool {
        t.resolve(id(who), facts(f), false)
            .grants
            .actions
            .holds(&Action::parse(action).unwrap())
    }

    #[test]
    fn a_groups_grants_are_added_to_each_members_own_and_to_nobody_else() {
        let t = parse(TEAM).unwrap();
        for member in ["slack:U1", "access:alice@example.com", "http:ops"] {
            assert!(holds(&t, member, &[], "runs:write"), "{member}");
            let a = resolve_actor(id(member), &t);
            assert!(
                a.grants
                    .channels
                    .contains(&authz_core::ChannelId::parse("slack:C9").unwrap()),
                "{member}"
            );
            assert_eq!(a.groups, [GroupId::parse("group:oncall").unwrap()].into());
        }
        assert!(!holds(&t, "slack:U2", &[], "runs:write"));
        // Added, never replacing: the member keeps its baseline.
        assert!(holds(&t, "slack:U1", &[], "help:read"));
    }

    #[test]
    fn learned_groups_count_only_when_named_and_of_the_members_own_surface() {
        let t = parse(TEAM).unwrap();
        assert!(holds(&t, "slack:U2", &["group:slack:S1"], "friction:write"));
        assert!(!holds(
            &t,
            "slack:U2",
            &["group:slack:S2"],
            "friction:write"
        ));
        assert!(holds(
            &t,
            "access:bob@example.com",
            &["group:access:eng"],
            "memory:exec"
        ));
        // A fact about a group of another surface is no fact about this actor.
        assert!(!holds(&t, "slack:U2", &["group:access:eng"], "memory:exec"));
        assert!(!holds(
            &t,
            "access:bob@example.com",
            &["group:slack:S1"],
            "friction:write"
        ));
        // A declared group's members are listed, never learned.
        assert!(!holds(&t, "slack:U2", &["group:oncall"], "runs:write"));
        // An agent holds no group; acting for a member it holds the group's grant through it.
        let principal = t.resolve(id("slack:U2"), facts(&["group:slack:S1"]), false);
        let agent = resolve_agent(&agent_name("coding"), Some(principal), &t);
        assert!(agent.groups.is_empty());
        assert!(
            agent
                .effective_grants()
                .actions
                .holds(&Action::parse("friction:write").unwrap())
        );
    }

    #[test]
    fn an_inconsistent_actor_resolved_again_holds_nothing() {
        let t = parse(TEAM).unwrap();
        let mut odd = resolve_actor(id("http:ops"), &t);
        odd.on_behalf_of = Some(Box::new(resolve_actor(id("slack:U1"), &t)));
        assert_eq!(t.resolve_again(&odd).grants, NO_GRANTS);
        let mut kind = resolve_actor(id("slack:U1"), &t);
        kind.kind = authz_core::ActorKind::Agent;
        assert_eq!(t.resolve_again(&kind).grants, NO_GRANTS);
    }

    #[test]
    fn an_outsider_holds_only_its_entry_and_the_declared_groups_listing_it() {
        let t = parse(TEAM).unwrap();
        let listed = resolve_outsider(id("slack:U1"), &t);
        assert!(
            listed
                .grants
                .actions
                .holds(&Action::parse("runs:write").unwrap())
        );
        assert!(
            !listed
                .grants
                .actions
                .holds(&Action::parse("help:read").unwrap())
        );
        let learned = t.resolve(id("slack:U7"), facts(&["group:slack:S1"]), true);
        assert_eq!(learned.grants, NO_GRANTS);
    }

    #[test]
    fn an_actor_resolved_again_under_a_new_table_holds_what_the_new_one_gives() {
        let old = parse(TEAM).unwrap();
        let new = parse("[groups]\noncall = [\"slack:U2\"]\n[grants.\"group:oncall\"]\nactions = [\"runs:write\"]\n").unwrap();
        let member = old.resolve(id("slack:U1"), facts(&["group:slack:S1"]), false);
        let agent = resolve_agent(&agent_name("coding"), Some(member.clone()), &old);
        let again = new.resolve_again(&agent);
        let p = again.on_behalf_of.as_deref().unwrap();
        assert!(
            !p.grants
                .actions
                .holds(&Action::parse("runs:write").unwrap())
        );
        assert!(
            !p.grants
                .actions
                .holds(&Action::parse("friction:write").unwrap())
        );
        assert_eq!(p.group_facts, member.group_facts, "the facts are kept");
        // And back: the same facts under the old table give the old grants.
        assert_eq!(old.resolve_again(p).grants, member.grants);
    }
}
