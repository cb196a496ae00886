//! The scopes of one request or run, and the reflection actor over them.

use authz_core::{Actor, ActorId, ChannelId, GrantSet, RepoSlug, ScopeKey};

/// The scopes a request names, derived from the request itself: always org, then its
/// principal's user scope, its channel and its repo when it has them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunScopes {
    pub user: Option<ActorId>,
    pub channel: Option<ChannelId>,
    pub repo: Option<RepoSlug>,
}

impl RunScopes {
    /// A run's scopes: its principal, its channel, its repo.
    pub fn of_run(user: ActorId, channel: ChannelId, repo: Option<RepoSlug>) -> Self {
        RunScopes {
            user: Some(user),
            channel: Some(channel),
            repo,
        }
    }

    /// The scope keys, org first, then user, channel, repo.
    pub fn keys(&self) -> Vec<ScopeKey> {
        let mut keys = vec![ScopeKey::Org];
        keys.extend(self.user.clone().map(ScopeKey::User));
        keys.extend(self.channel.clone().map(ScopeKey::Channel));
        keys.extend(self.repo.clone().map(ScopeKey::Repo));
        keys
    }

    pub fn user_scope(&self) -> Option<ScopeKey> {
        self.user.clone().map(ScopeKey::User)
    }

    pub fn channel_scope(&self) -> Option<ScopeKey> {
        self.channel.clone().map(ScopeKey::Channel)
    }

    pub fn repo_scope(&self) -> Option<ScopeKey> {
        self.repo.clone().map(ScopeKey::Repo)
    }
}

/// `reflection_actor(principal, run)`: the run's principal holding the run's own channel and
/// repo as memberships, facts the dispatcher established before the run (the surface
/// delivered the request from that channel; the repo gate admitted that repo). No action is
/// added, an `all` is left alone, and the principal itself is not mutated.
pub fn reflection_actor(principal: &Actor, run: &RunScopes) -> Actor {
    let mut actor = principal.clone();
    if let Some(channel) = &run.channel {
        actor.grants.channels = with_member(&actor.grants.channels, channel);
    }
    if let Some(repo) = &run.repo {
        actor.grants.repos = with_member(&actor.grants.repos, repo);
    }
    actor
}

fn with_member<T: Ord + Clone>(set: &GrantSet<T>, item: &T) -> GrantSet<T> {
    set.union(&GrantSet::only([item.clone()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz_core::{Action, ActorKind, Grants, NO_GRANTS};

    fn slack_user() -> Actor {
        Actor {
            kind: ActorKind::User,
            id: ActorId::parse("slack:U1").unwrap(),
            grants: Grants::actions([Action::parse("runs:read").unwrap()]),
            on_behalf_of: None,
            memberships: Default::default(),
            groups: Default::default(),
            group_facts: Default::default(),
            outsider: false,
            origin: None,
        }
    }

    fn run() -> RunScopes {
        RunScopes::of_run(
            ActorId::parse("slack:U1").unwrap(),
            ChannelId::parse("slack:G1").unwrap(),
            Some(RepoSlug::parse("acme/web").unwrap()),
        )
    }

    #[test]
    fn the_run_scopes_are_org_user_channel_repo_in_that_order() {
        let keys: Vec<String> = run().keys().iter().map(|k| k.key()).collect();
        assert_eq!(
            keys,
            ["org", "user:slack:U1", "channel:slack:G1", "repo:acme/web"]
        );
        assert_eq!(RunScopes::default().keys(), vec![ScopeKey::Org]);
    }

    #[test]
    fn reflection_actor_adds_the_runs_channel_and_repo_and_nothing_else() {
        let principal = slack_user();
        let before = principal.clone();
        let actor = reflection_actor(&principal, &run());
        assert_eq!(principal, before, "the principal is not mutated");
        assert!(
            actor
                .grants
                .channels
                .contains(&ChannelId::parse("slack:G1").unwrap())
        );
        assert!(
            actor
                .grants
                .repos
                .contains(&RepoSlug::parse("acme/web").unwrap())
        );
        assert_eq!(
            actor.grants.actions, principal.grants.actions,
            "no action added"
        );
        assert_eq!(actor.id, principal.id);
    }

    #[test]
    fn reflection_actor_leaves_all_alone() {
        let mut principal = slack_user();
        principal.grants.channels = GrantSet::All;
        principal.grants.repos = GrantSet::All;
        let actor = reflection_actor(&principal, &run());
        assert!(actor.grants.channels.is_all() && actor.grants.repos.is_all());
        let mut bare = slack_user();
        bare.grants = NO_GRANTS;
        let actor = reflection_actor(&bare, &RunScopes::default());
        assert_eq!(actor, bare, "a run with no channel or repo adds nothing");
    }
}
