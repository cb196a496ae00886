//! Policy review against brute force: for random pairs of policies over a small universe,
//! `diff` lists exactly the (actor, action, resource) triples on which `authorize` differs
//! (no missed change, no false one), and `who_can` agrees with `authorize`.

use std::collections::BTreeSet;

use authz_core::review::{
    ActorClass, Change, UNNAMED_CHANNELS, UNNAMED_REPO, actions, actor_classes, diff, spec_of,
    who_can,
};
use authz_core::{
    Actor, ActorId, ChannelId, ChannelVisibility, ConfigTier, GrantsTable, RepoSlug, Resource,
    RunFacts, RunId, ScopeKey, authorize, parse_resource_spec,
};
use proptest::prelude::*;
use proptest::sample::subsequence;

use crate::fixtures::table;

const IDS: [&str; 4] = ["slack:U1", "slack:U2", "http:a", "access:x"];
const CHANNELS: [&str; 3] = ["slack:C1", "slack:G1", "http:a"];
const REPOS: [&str; 2] = ["acme/web", "acme/api"];
const ACTIONS: [&str; 8] = [
    "runs:read",
    "runs:write",
    "friction:read",
    "config:write",
    "repo:use",
    "memory:write",
    "agent:run:coding",
    "trace:read",
];

fn list(v: &[&str]) -> String {
    format!("{v:?}")
}

/// One grants entry's body, with `all` now and then (never for a Slack group).
fn entry(all_allowed: bool) -> impl Strategy<Value = String> {
    let axis = move |items: &'static [&'static str]| -> BoxedStrategy<String> {
        let some = subsequence(items.to_vec(), 0..=items.len()).prop_map(|v| list(&v));
        match all_allowed {
            true => prop_oneof![4 => some, 1 => Just("\"all\"".to_owned())].boxed(),
            false => some.boxed(),
        }
    };
    let actions: &'static [&'static str] = if all_allowed { &ACTIONS } else { &ACTIONS[..7] };
    let actions = subsequence(
        actions
            .iter()
            .copied()
            .filter(|a| all_allowed || *a != "config:write")
            .collect::<Vec<_>>(),
        0..=4,
    )
    .prop_map(|v| list(&v));
    (actions, axis(&CHANNELS), axis(&REPOS))
        .prop_map(|(a, c, r)| format!("actions = {a}\nchannels = {c}\nrepos = {r}\n"))
}

/// A policy over the universe's names: entries, a surface entry, a declared group, a Slack
/// user group and an identity provider's group, and restricted repos.
fn policy() -> impl Strategy<Value = String> {
    (
        subsequence(IDS.to_vec(), 0..=3),
        proptest::collection::vec(entry(true), 3),
        proptest::option::of(entry(true)),
        subsequence(IDS.to_vec(), 0..=2),
        entry(true),
        entry(false),
        entry(true),
        subsequence(REPOS.to_vec(), 0..=2),
    )
        .prop_map(
            |(ids, bodies, surface, team, team_g, slack_g, access_g, restricted)| {
                let mut text = format!("[groups]\nteam = {}\n", list(&team));
                for (id, body) in ids.iter().zip(&bodies) {
                    text.push_str(&format!("[grants.{id:?}]\n{body}"));
                }
                if let Some(body) = surface {
                    text.push_str(&format!("[grants.\"slack:*\"]\n{body}"));
                }
                text.push_str(&format!("[grants.\"group:team\"]\n{team_g}"));
                text.push_str(&format!("[grants.\"group:slack:S1\"]\n{slack_g}"));
                text.push_str(&format!("[grants.\"group:access:eng\"]\n{access_g}"));
                text.push_str(&format!("[restrict]\nrepos = {}\n", list(&restricted)));
                text
            },
        )
}

/// Every resource of the universe: the named channels and repos, the review's unnamed ones
/// and one more of each that no table names, every owner the classes have and others.
fn universe(class: &ActorClass) -> Vec<Resource> {
    let mut channels: Vec<&str> = CHANNELS.to_vec();
    channels.extend(UNNAMED_CHANNELS);
    channels.extend(["slack:C7EXTRA", "slack:G0MEMBER"]);
    let mut users: Vec<String> = vec!["slack:U1".to_owned(), "http:a".to_owned()];
    users.extend([
        class.id.to_string(),
        "slack:U7EXTRA".to_owned(),
        "cli:local".to_owned(),
    ]);
    users.extend(class.principal.as_ref().map(|p| p.id.to_string()));
    let mut repos: Vec<&str> = REPOS.to_vec();
    repos.extend([UNNAMED_REPO, "other/extra"]);
    let ch = |c: &str| ChannelId::parse(c).unwrap();
    let mut out = Vec::new();
    for c in &channels {
        for v in ChannelVisibility::ALL {
            for u in &users {
                for r in repos.iter().map(Some).chain([None]) {
                    out.push(Resource::Run(RunFacts {
                        id: RunId::parse("r1").unwrap(),
                        channel_id: ch(c),
                        user_id: ActorId::parse(u).unwrap(),
                        repo: r.map(|r| RepoSlug::parse(r).unwrap()),
                        channel_visibility: v,
                    }));
                }
            }
            out.push(Resource::Channel {
                id: ch(c),
                visibility: v,
            });
            out.push(Resource::MemoryScope {
                scope: ScopeKey::Channel(ch(c)),
                origin_visibility: v,
            });
        }
        out.push(Resource::ConfigScope(ConfigTier::Channel(ch(c))));
    }
    for u in &users {
        let u = ActorId::parse(u).unwrap();
        out.push(Resource::ConfigScope(ConfigTier::User(u.clone())));
        for v in ChannelVisibility::ALL {
            out.push(Resource::MemoryScope {
                scope: ScopeKey::User(u.clone()),
                origin_visibility: v,
            });
        }
    }
    for r in &repos {
        let slug = RepoSlug::parse(r).unwrap();
        out.push(Resource::Repo {
            slug: slug.clone(),
            restricted: false,
        });
        for v in ChannelVisibility::ALL {
            out.push(Resource::MemoryScope {
                scope: ScopeKey::Repo(slug.clone()),
                origin_visibility: v,
            });
        }
    }
    for v in ChannelVisibility::ALL {
        out.push(Resource::MemoryScope {
            scope: ScopeKey::Org,
            origin_visibility: v,
        });
    }
    out.push(Resource::ConfigScope(ConfigTier::Org));
    out.push(Resource::Agent {
        name: "coding".parse().unwrap(),
    });
    out.push(Resource::Command {
        id: "any".parse().unwrap(),
    });
    out
}

/// The shape the review names a concrete resource by, for a class whose actors are `actors`:
/// a channel, repo or owner the class does not tell apart becomes the review's stand-in.
fn shape_of(
    r: &Resource,
    class: &ActorClass,
    actors: &[&Actor],
    tables: &[&GrantsTable],
) -> Resource {
    let channels = authz_core::review::named_channels(actors);
    let repos = authz_core::review::named_repos(actors, tables);
    let users = authz_core::review::named_users(class, actors);
    let ch = |c: &ChannelId| -> ChannelId {
        if channels.contains(c) {
            return c.clone();
        }
        let stand_in = UNNAMED_CHANNELS
            .iter()
            .find(|u| u.split(':').next() == Some(c.namespace()))
            .unwrap();
        ChannelId::parse(stand_in).unwrap()
    };
    let repo = |s: &RepoSlug| {
        if repos.contains(s) {
            s.clone()
        } else {
            RepoSlug::parse(UNNAMED_REPO).unwrap()
        }
    };
    let user = |u: &ActorId| {
        if users.contains(u) {
            u.clone()
        } else {
            "slack:U0SOMEONEELSE".parse().unwrap()
        }
    };
    match r {
        Resource::Run(run) => Resource::Run(RunFacts {
            id: run.id.clone(),
            channel_id: ch(&run.channel_id),
            user_id: user(&run.user_id),
            repo: run.repo.as_ref().map(repo),
            channel_visibility: run.channel_visibility,
        }),
        Resource::Channel { id, visibility } => Resource::Channel {
            id: ch(id),
            visibility: *visibility,
        },
        Resource::MemoryScope {
            scope,
            origin_visibility,
        } => Resource::MemoryScope {
            scope: match scope {
                ScopeKey::Channel(c) => ScopeKey::Channel(ch(c)),
                ScopeKey::User(u) => ScopeKey::User(user(u)),
                ScopeKey::Repo(s) => ScopeKey::Repo(repo(s)),
                ScopeKey::Org => ScopeKey::Org,
            },
            origin_visibility: *origin_visibility,
        },
        Resource::ConfigScope(ConfigTier::Channel(c)) => {
            Resource::ConfigScope(ConfigTier::Channel(ch(c)))
        }
        Resource::ConfigScope(ConfigTier::User(u)) => {
            Resource::ConfigScope(ConfigTier::User(user(u)))
        }
        Resource::Repo { slug, restricted } => Resource::Repo {
            slug: repo(slug),
            restricted: *restricted,
        },
        other => other.clone(),
    }
}

fn stamp(r: &Resource, t: &GrantsTable) -> Resource {
    match r {
        Resource::Repo { slug, .. } => t.repo(slug.clone()),
        other => other.clone(),
    }
}

fn key(c: &Change) -> (String, String, String, String) {
    (
        c.actor.clone(),
        c.action.clone(),
        c.resource.clone(),
        c.change.to_owned(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn diff_lists_exactly_the_triples_on_which_authorize_differs(a in policy(), b in policy()) {
        let (old, new) = (table(&a, &["coding"]), table(&b, &["coding"]));
        let tables = [&old, &new];
        let listed: BTreeSet<_> = diff(&old, &new).iter().map(key).collect();
        // No false change: each listed one differs, as it says.
        for (actor, action, spec, change) in &listed {
            let class = actor_classes(&tables).into_iter().find(|c| &c.label == actor).unwrap();
            let action = action.parse().unwrap();
            let before = authorize(&class.resolve(&old), &action, &parse_resource_spec(spec, &old).unwrap()).is_allow();
            let after = authorize(&class.resolve(&new), &action, &parse_resource_spec(spec, &new).unwrap()).is_allow();
            prop_assert!(before != after, "{actor} {action} {spec}: listed but alike");
            prop_assert_eq!(change == "granted", after);
        }
        // No missed change: every differing triple of the universe is listed, by its shape.
        let mut found = BTreeSet::new();
        for class in actor_classes(&tables) {
            let (x, y) = (class.resolve(&old), class.resolve(&new));
            for r in universe(&class) {
                let (rx, ry) = (stamp(&r, &old), stamp(&r, &new));
                for action in actions(&tables) {
                    let (before, after) = (authorize(&x, &action, &rx).is_allow(), authorize(&y, &action, &ry).is_allow());
                    if before != after {
                        let shape = shape_of(&r, &class, &[&x, &y], &tables);
                        let k = (class.label.clone(), action.to_string(), spec_of(&shape), if after { "granted" } else { "revoked" }.to_owned());
                        prop_assert!(listed.contains(&k), "missed: {k:?}\n{a}\n---\n{b}");
                        found.insert(k);
                    }
                }
            }
        }
        prop_assert_eq!(found.len(), listed.len(), "every listed change is one of the universe's");
    }

    #[test]
    fn who_can_agrees_with_authorize(a in policy()) {
        let t = table(&a, &["coding"]);
        let classes = actor_classes(&[&t]);
        for action in ACTIONS.map(|s| s.parse().unwrap()) {
            for r in universe(&classes[0]).into_iter().step_by(7) {
                let r = stamp(&r, &t);
                let allowed: BTreeSet<String> = who_can(&t, &action, Some(&r)).into_iter().map(|w| w.actor).collect();
                for class in &classes {
                    let allow = authorize(&class.resolve(&t), &action, &r).is_allow();
                    prop_assert_eq!(allowed.contains(&class.label), allow, "{} {} {:?}", class.label, action, r);
                }
            }
        }
    }
}

#[test]
fn a_table_against_itself_changes_nothing_and_one_channel_more_is_exactly_its_reads() {
    let text = "[grants.\"http:a\"]\nactions = [\"runs:read\"]\nchannels = [\"http:a\"]\n";
    let t = table(text, &["coding"]);
    assert!(diff(&t, &t).is_empty());
    let wider = table(
        &text.replace("[\"http:a\"]\n", "[\"http:a\", \"slack:G1\"]\n"),
        &["coding"],
    );
    let changes = diff(&t, &wider);
    assert!(!changes.is_empty());
    for c in &changes {
        assert_eq!(c.change, "granted");
        // Its reads there, and the channel's memory (a member of a channel writes it).
        assert!(
            ["runs:read", "memory:write"].contains(&c.action.as_str()),
            "{c:?}"
        );
        assert!(c.resource.contains("slack:G1"), "{c:?}");
        assert!(
            c.actor_id == "http:a" || c.on_behalf_of.as_deref() == Some("http:a"),
            "{c:?}"
        );
    }
    assert!(diff(&wider, &t).iter().all(|c| c.change == "revoked"));
}

#[test]
fn an_outsiders_entry_is_reviewed_even_when_an_insider_would_hold_it_anyway() {
    let old = table("[grants.\"slack:*\"]\nactions = \"all\"\n", &["coding"]);
    let new = table(
        "[grants.\"slack:*\"]\nactions = \"all\"\n[grants.\"slack:U0EXT\"]\nactions = [\"runs:read\"]\n",
        &["coding"],
    );
    let changes = diff(&old, &new);
    assert!(
        changes
            .iter()
            .any(|c| c.actor == "slack:U0EXT (from another workspace)"
                && c.action == "runs:read"
                && c.change == "granted"),
        "{changes:#?}"
    );
}

#[test]
fn a_planted_entry_for_a_stand_in_hides_no_change_of_the_unlisted() {
    // Both files hold everything for the id the review would stand in for any unlisted Slack
    // user; the new one gives every Slack user trace:read.
    let planted =
        "[grants.\"slack:U0UNLISTED\"]\nactions = \"all\"\nchannels = \"all\"\nrepos = \"all\"\n";
    let old = table(planted, &["coding"]);
    let new = table(
        &format!("{planted}[grants.\"slack:*\"]\nactions = [\"trace:read\"]\n"),
        &["coding"],
    );
    let changes = diff(&old, &new);
    assert!(
        changes
            .iter()
            .any(|c| c.actor == "any unlisted Slack user" && c.action == "trace:read"),
        "{changes:#?}"
    );
}

#[test]
fn who_can_counts_a_resources_own_user_and_its_channels_members() {
    let t = table("", &["coding"]);
    let own = parse_resource_spec("config-scope:tier=user,id=slack:U9", &t).unwrap();
    let allowed: Vec<String> = who_can(&t, &"config:write".parse().unwrap(), Some(&own))
        .into_iter()
        .map(|a| a.actor)
        .collect();
    assert!(allowed.contains(&"slack:U9".to_owned()), "{allowed:?}");
    let private =
        parse_resource_spec("memory-scope:kind=channel,key=slack:G7,origin=private", &t).unwrap();
    let allowed: Vec<String> = who_can(&t, &"memory:write".parse().unwrap(), Some(&private))
        .into_iter()
        .map(|a| a.actor)
        .collect();
    assert!(
        allowed
            .iter()
            .any(|a| a.contains("in the private channel slack:G7")),
        "{allowed:?}"
    );
}
