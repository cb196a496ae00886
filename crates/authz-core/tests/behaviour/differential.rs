//! The load-bearing differential: for any actor and any runs, filtering by `predicate_for`
//! equals point `authorize` run by run. Plus: explain agrees with authorize, and an agent's
//! effective grants never exceed its principal's.

use authz_core::{
    Action, Actor, ActorId, ActorKind, ChannelId, ChannelVisibility, GrantSet, Grants, GrantsTable,
    NO_GRANTS, Policy, RepoSlug, Resource, ResourceType, RunFacts, RunId, authorize, matches,
    predicate_for, resolve_actor, resolve_agent,
};
use proptest::prelude::*;
use proptest::sample::subsequence;

use crate::fixtures::{act, agent_name, id, table};

const CHANNELS: [&str; 10] = [
    "slack:C1",
    "slack:C2",
    "slack:G1",
    "slack:D1",
    "http:ops",
    "http:billing",
    "mcp:ci",
    "cli:local",
    "schedule:self-improvement",
    "access:svc:deploy",
];
const USERS: [&str; 7] = [
    "slack:U1",
    "slack:U2",
    "http:ops-bot",
    "access:alice",
    "cli:local",
    "schedule:self-improvement",
    "agent:coding",
];
const REPOS: [&str; 2] = ["acme/web", "acme/payments"];
const ACTIONS: [&str; 8] = [
    "runs:read",
    "runs:write",
    "friction:read",
    "friction:write",
    "config:write",
    "agent:run:*",
    "repo:exec",
    "help:read",
];
/// The list actions the store filters runs by; config:write has no run row (→ None).
const LIST_ACTIONS: [&str; 4] = ["runs:read", "runs:write", "friction:read", "config:write"];

fn channel_set() -> impl Strategy<Value = GrantSet<ChannelId>> {
    prop_oneof![
        1 => Just(GrantSet::All),
        4 => subsequence(CHANNELS.to_vec(), 0..=4)
            .prop_map(|v| GrantSet::only(v.into_iter().map(|c| c.parse().unwrap()))),
    ]
}

fn repo_set() -> impl Strategy<Value = GrantSet<RepoSlug>> {
    prop_oneof![
        1 => Just(GrantSet::All),
        3 => subsequence(REPOS.to_vec(), 0..=2)
            .prop_map(|v| GrantSet::only(v.into_iter().map(|r| r.parse().unwrap()))),
    ]
}

fn action_set() -> impl Strategy<Value = GrantSet<Action>> {
    prop_oneof![
        1 => Just(GrantSet::All),
        5 => subsequence(ACTIONS.to_vec(), 0..=5)
            .prop_map(|v| GrantSet::only(v.into_iter().map(act))),
    ]
}

fn grants() -> impl Strategy<Value = Grants> {
    (action_set(), channel_set(), repo_set()).prop_map(|(actions, channels, repos)| Grants {
        actions,
        channels,
        repos,
    })
}

/// Membership facts a directory may supply: none most of the time, else a few channels.
fn memberships() -> impl Strategy<Value = Vec<ChannelId>> {
    prop_oneof![
        2 => Just(Vec::new()),
        1 => subsequence(CHANNELS.to_vec(), 1..=3)
            .prop_map(|v| v.into_iter().map(|c| c.parse().unwrap()).collect()),
    ]
}

fn plain(raw: &str, g: Grants) -> Actor {
    let i = id(raw);
    Actor {
        kind: ActorKind::of_namespace(i.namespace()),
        id: i,
        grants: g,
        on_behalf_of: None,
        memberships: Default::default(),
        groups: Default::default(),
        group_facts: Default::default(),
        outsider: false,
        origin: None,
    }
}

/// One axis as a grants entry's TOML value.
fn axis<T: Ord + Clone + ToString>(set: &GrantSet<T>) -> String {
    match set.items() {
        None => "\"all\"".to_owned(),
        Some(items) => format!("{:?}", items.iter().map(T::to_string).collect::<Vec<_>>()),
    }
}

/// A member of a declared group (or not, when `listed` is false) who is also, as the surface
/// learned it (when `learned`), in a Slack or identity provider's group: resolved through a
/// real table, whose grants for the learned group a Slack group could legally hold.
fn grouped(user: &str, declared: &Grants, learned: &Grants, listed: bool, knows: bool) -> Actor {
    let members = if listed {
        format!("{user:?}")
    } else {
        String::new()
    };
    let (group, mut learned) = match user.starts_with("slack:") {
        true => ("group:slack:S1", learned.clone()),
        false => ("group:access:eng", learned.clone()),
    };
    if group.starts_with("group:slack:") {
        let refused = authz_core::groups::slack_group_refused();
        learned.actions = match learned.actions.items() {
            None => GrantSet::none(),
            Some(a) => GrantSet::only(a.iter().filter(|x| !refused.contains(x)).cloned()),
        };
        learned.channels = learned
            .channels
            .items()
            .map_or(GrantSet::none(), |c| GrantSet::Only(c.clone()));
        learned.repos = learned
            .repos
            .items()
            .map_or(GrantSet::none(), |r| GrantSet::Only(r.clone()));
    }
    let entry = |g: &Grants| {
        format!(
            "actions = {}\nchannels = {}\nrepos = {}\n",
            axis(&g.actions),
            axis(&g.channels),
            axis(&g.repos)
        )
    };
    let text = format!(
        "[groups]\nteam = [{members}]\n[grants.\"group:team\"]\n{}[grants.\"{group}\"]\n{}",
        entry(declared),
        entry(&learned)
    );
    let t = table(&text, &["coding"]);
    let facts = authz_core::GroupFacts {
        member_of: knows
            .then(|| authz_core::GroupId::parse(group).unwrap())
            .into_iter()
            .collect(),
        unresolved: Default::default(),
    };
    t.resolve(id(user), facts, false)
}

fn group_member() -> impl Strategy<Value = Actor> {
    (
        proptest::sample::select(["slack:U1", "slack:U2", "http:ops-bot", "access:alice"].to_vec()),
        grants(),
        grants(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(u, d, l, listed, knows)| grouped(u, &d, &l, listed, knows))
}

/// The actor shapes the spec names, each with random parts.
fn actors() -> impl Strategy<Value = Actor> {
    let any_user = proptest::sample::select(USERS[..6].to_vec());
    let principal =
        (proptest::sample::select(USERS[..6].to_vec()), grants()).prop_map(|(u, g)| plain(u, g));
    prop_oneof![
        // admin holding all
        Just(plain("slack:U1", authz_core::ALL_GRANTS)),
        // operator bound by membership
        channel_set().prop_map(|c| plain(
            "access:alice",
            Grants {
                actions: GrantSet::only([
                    act("runs:read"),
                    act("runs:write"),
                    act("friction:read")
                ]),
                channels: c,
                repos: GrantSet::none(),
            }
        )),
        // member / non-member: Slack users resolved through a real table, with membership
        // facts a directory supplied for the request
        (channel_set(), any::<bool>(), memberships()).prop_map(|(c, member, facts)| {
            let t = GrantsTable::default();
            let mut a = resolve_actor(id("slack:U2"), &t).with_memberships(facts);
            a.grants.actions = a.grants.actions.union(&GrantSet::only([act("runs:read")]));
            if member {
                a.grants.channels = c;
            }
            a
        }),
        // pinned token: one channel
        proptest::sample::select(CHANNELS.to_vec()).prop_map(|c| plain(
            "http:ops-bot",
            Grants {
                actions: GrantSet::only([act("runs:read"), act("friction:read")]),
                channels: GrantSet::only([c.parse().unwrap()]),
                repos: GrantSet::none(),
            }
        )),
        // the self-improvement schedule
        Just(plain(
            "schedule:self-improvement",
            Grants {
                actions: GrantSet::only([act("friction:read"), act("friction:write")]),
                channels: GrantSet::All,
                repos: GrantSet::none(),
            }
        )),
        // an agent on behalf of a principal (with membership facts or none), with or without
        // its own narrowing entry
        (principal, proptest::option::of(grants()), memberships()).prop_map(|(p, own, facts)| {
            let p = p.with_memberships(facts);
            let mut a = resolve_agent(&agent_name("coding"), Some(p), &GrantsTable::default());
            if let Some(g) = own {
                a.grants = g;
            }
            a
        }),
        // a member of groups, resolved through a table: a declared one, a learned one
        group_member(),
        // an agent acting for a member of groups
        group_member().prop_map(|p| resolve_agent(
            &agent_name("coding"),
            Some(p),
            &GrantsTable::default()
        )),
        // an agent with no principal
        grants().prop_map(|g| {
            let mut a = resolve_agent(&agent_name("coding"), None, &GrantsTable::default());
            a.grants = g;
            a
        }),
        // NO_GRANTS
        any_user.clone().prop_map(|u| plain(u, NO_GRANTS)),
        // anything, including inconsistent kinds, with or without membership facts
        (
            any_user,
            grants(),
            proptest::sample::select(ActorKind::ALL.to_vec()),
            memberships(),
        )
            .prop_map(|(u, g, k, facts)| {
                let mut a = plain(u, g).with_memberships(facts);
                a.kind = k;
                a
            }),
    ]
}

fn runs() -> impl Strategy<Value = Vec<RunFacts>> {
    let run = (
        proptest::sample::select(CHANNELS.to_vec()),
        proptest::sample::select(USERS.to_vec()),
        proptest::option::of(proptest::sample::select(REPOS.to_vec())),
        proptest::sample::select(ChannelVisibility::ALL.to_vec()),
    );
    proptest::collection::vec(run, 1..16).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (c, u, r, vis))| RunFacts {
                id: RunId::parse(&format!("r{i}")).unwrap(),
                channel_id: c.parse().unwrap(),
                user_id: u.parse::<ActorId>().unwrap(),
                repo: r.map(|r| r.parse().unwrap()),
                channel_visibility: vis,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn predicate_filter_equals_point_authorize(actor in actors(), runs in runs()) {
        for a in LIST_ACTIONS.map(act) {
            let predicate = predicate_for(&actor, &a, ResourceType::Run);
            prop_assert!(predicate.check(1000).is_ok(), "{predicate:?}");
            for run in &runs {
                let listed = matches(&predicate, run);
                let point = authorize(&actor, &a, &Resource::Run(run.clone())).is_allow();
                prop_assert_eq!(listed, point, "{} on {:?} via {:?}", a, run, predicate);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn explain_agrees_with_authorize(actor in actors(), runs in runs()) {
        let policy = Policy::builtin();
        for a in LIST_ACTIONS.map(act) {
            for run in &runs {
                let r = Resource::Run(run.clone());
                prop_assert_eq!(policy.explain(&actor, &a, &r).verdict, authorize(&actor, &a, &r));
            }
        }
    }

    #[test]
    fn an_agent_never_exceeds_its_principal(own in grants(), principal in grants()) {
        let p = plain("slack:U1", principal.clone());
        let mut agent = resolve_agent(&agent_name("coding"), Some(p), &GrantsTable::default());
        agent.grants = own.clone();
        let eff = agent.effective_grants().into_owned();
        for a in ACTIONS.map(act).into_iter().chain([act("agent:run:coding"), act("agent:run:other")]) {
            prop_assert_eq!(eff.actions.holds(&a), own.actions.holds(&a) && principal.actions.holds(&a), "{}", a);
        }
        for c in CHANNELS {
            let c: ChannelId = c.parse().unwrap();
            prop_assert_eq!(eff.channels.contains(&c), own.channels.contains(&c) && principal.channels.contains(&c));
        }
        prop_assert_eq!(eff.channels.is_all(), own.channels.is_all() && principal.channels.is_all());
        prop_assert_eq!(eff.repos.is_all(), own.repos.is_all() && principal.repos.is_all());
    }
}

#[test]
fn a_membership_fact_opens_a_private_channel_for_member_of_and_nothing_else() {
    let t = table("", &[]);
    let mut base = resolve_actor(id("slack:U2"), &t);
    base.grants.actions = GrantSet::only([act("runs:read")]);
    let private = RunFacts {
        id: RunId::parse("r").unwrap(),
        channel_id: "slack:G1".parse().unwrap(),
        user_id: id("slack:U3"),
        repo: None,
        channel_visibility: ChannelVisibility::Private,
    };
    let read = act("runs:read");
    let run = Resource::Run(private.clone());
    assert!(!authorize(&base, &read, &run).is_allow());
    let member = base.clone().with_memberships(["slack:G1".parse().unwrap()]);
    assert!(authorize(&member, &read, &run).is_allow());
    assert!(matches(
        &predicate_for(&member, &read, ResourceType::Run),
        &private
    ));
    assert!(!matches(
        &predicate_for(&base, &read, ResourceType::Run),
        &private
    ));
    // A fact is not a grant: the member still lacks runs:write and all-channels.
    assert!(!authorize(&member, &act("runs:write"), &run).is_allow());
    assert!(!member.effective_grants().channels.is_all());
    assert!(member.grants.channels.items().is_some_and(|c| c.is_empty()));
    // An agent acting for the member sees it only through the member.
    let agent = resolve_agent(&agent_name("coding"), Some(member), &GrantsTable::default());
    assert!(authorize(&agent, &read, &run).is_allow());
    let agent = resolve_agent(&agent_name("coding"), Some(base), &GrantsTable::default());
    assert!(!authorize(&agent, &read, &run).is_allow());
}

#[test]
fn the_actor_shapes_include_the_named_fixtures() {
    // The table-driven fixtures the spec names decide as expected on a private run.
    let t = table(
        "[grants.\"slack:U1\"]\nactions = \"all\"\nchannels = \"all\"\nrepos = \"all\"",
        &[],
    );
    let admin = resolve_actor(id("slack:U1"), &t);
    let plain_user = resolve_actor(id("slack:U2"), &t);
    let private = RunFacts {
        id: RunId::parse("r").unwrap(),
        channel_id: "slack:G1".parse().unwrap(),
        user_id: id("slack:U3"),
        repo: None,
        channel_visibility: ChannelVisibility::Private,
    };
    let read = act("runs:read");
    assert!(matches(
        &predicate_for(&admin, &read, ResourceType::Run),
        &private
    ));
    assert!(!matches(
        &predicate_for(&plain_user, &read, ResourceType::Run),
        &private
    ));
}
