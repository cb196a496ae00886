//! Over generated runs (origin visibility × the scopes a run has × audience × who the
//! principal is), the gate never writes a scope wider than the origin allows, never
//! reroutes a non-org candidate, and never narrows to a repo.

use authz_core::{
    Actor, ActorId, ActorKind, ChannelId, ChannelVisibility, GrantSet, Grants, MemoryKind,
    RepoSlug, ScopeKey, authorize,
};
use memory::{Audience, Candidate, Route, RunScopes, reflection_actor, route};
use proptest::prelude::*;

fn visibility() -> impl Strategy<Value = ChannelVisibility> {
    prop::sample::select(ChannelVisibility::ALL.to_vec())
}

fn audience() -> impl Strategy<Value = Audience> {
    prop::sample::select(vec![
        Audience::Org,
        Audience::User,
        Audience::Channel,
        Audience::Repo,
    ])
}

/// A principal: a person or a machine, with grants from nothing to everything, and sometimes
/// a user scope that is someone else's.
fn principal() -> impl Strategy<Value = Actor> {
    (
        prop::sample::select(vec![
            "slack:U1",
            "access:ops@example.com",
            "http:ci",
            "cli:local",
        ]),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec!["runs:read", "memory:write", "repo:write"]),
    )
        .prop_map(|(id, all_channels, all_repos, action)| {
            let id = ActorId::parse(id).unwrap();
            let mut grants = Grants::actions([authz_core::Action::parse(action).unwrap()]);
            if all_channels {
                grants.channels = GrantSet::All;
            }
            if all_repos {
                grants.repos = GrantSet::All;
            }
            Actor {
                kind: ActorKind::of_namespace(id.namespace()),
                id,
                grants,
                on_behalf_of: None,
                memberships: Default::default(),
                groups: Default::default(),
                group_facts: Default::default(),
                outsider: false,
                origin: None,
            }
        })
}

fn run_scopes() -> impl Strategy<Value = RunScopes> {
    (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(user, own_user, channel, repo)| RunScopes {
            user: user
                .then(|| ActorId::parse(if own_user { "slack:U1" } else { "slack:U9" }).unwrap()),
            channel: channel.then(|| ChannelId::parse("slack:G1").unwrap()),
            repo: repo.then(|| RepoSlug::parse("acme/web").unwrap()),
        },
    )
}

fn resolved(audience: Audience, run: &RunScopes) -> Option<ScopeKey> {
    match audience {
        Audience::Org => Some(ScopeKey::Org),
        Audience::User => run.user_scope(),
        Audience::Channel => run.channel_scope(),
        Audience::Repo => run.repo_scope(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(4096)
    ))]

    #[test]
    fn the_gate_never_writes_wider_than_the_origin_allows(
        origin in visibility(),
        audience in audience(),
        run in run_scopes(),
        principal in principal(),
    ) {
        let actor = reflection_actor(&principal, &run);
        let got = route(&Candidate::new("f", audience), &run, origin, &actor, &authorize);
        let org_origin = matches!(origin, ChannelVisibility::Public | ChannelVisibility::Machine);
        match got {
            Route::Drop(_) => {}
            Route::Write { scope, narrowed } => {
                prop_assert!(run.keys().contains(&scope), "{scope:?} is not one of the run's scopes");
                if scope == ScopeKey::Org {
                    prop_assert!(org_origin, "org written from a {origin} origin");
                }
                match narrowed {
                    false => prop_assert_eq!(Some(scope), resolved(audience, &run), "rerouted"),
                    true => {
                        prop_assert_eq!(audience, Audience::Org);
                        prop_assert!(!org_origin);
                        prop_assert!(matches!(scope.kind(), MemoryKind::User | MemoryKind::Channel),
                            "narrowed to {scope:?}");
                        let first = if origin == ChannelVisibility::Dm {
                            run.user_scope().or(run.channel_scope())
                        } else {
                            run.channel_scope().or(run.user_scope())
                        };
                        prop_assert_eq!(Some(scope), first);
                    }
                }
            }
        }
        // An org fact from a public or machine origin is written to org: the gate narrows
        // only what the origin may not write.
        if audience == Audience::Org && org_origin {
            let to_org = Route::Write { scope: ScopeKey::Org, narrowed: false };
            prop_assert_eq!(
                route(&Candidate::new("f", audience), &run, origin, &actor, &authorize),
                to_org
            );
        }
    }
}
