//! The write gate (docs/memory.md, "How facts are written: reflection", steps 1–5), as a pure routing of one candidate: resolve its
//! audience to one of the run's scopes, ask `authorize(reflection_actor, memory:write,
//! memory-scope{scope, origin_visibility})`, narrow an org candidate the origin may not write,
//! and drop anything else the table denies. Nothing here widens: the only other scope a
//! candidate can reach is a narrower one of the run's own.

use std::collections::BTreeMap;
use std::fmt;

use authz_core::{
    Action, Actor, ChannelVisibility, CommandGroup, Effect, MemoryKind, Reason, Resource, ScopeKey,
    Verdict,
};

use crate::extract::{Audience, Candidate};
use crate::scopes::RunScopes;

/// The one decision function, injectable so a test can spy on it. Production passes
/// `authz_core::authorize`.
pub type Decide = dyn Fn(&Actor, &Action, &Resource) -> Verdict + Send + Sync;

/// Where one candidate goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Written to `scope`; `narrowed` when the extractor meant org (the only audience the
    /// gate narrows).
    Write { scope: ScopeKey, narrowed: bool },
    /// Not written, with the reason token for the log line.
    Drop(&'static str),
}

/// The action every reflection write asks.
pub fn memory_write() -> Action {
    Action::Command(CommandGroup::Memory, Effect::Write)
}

/// Step 1: the audience as one of the run's scopes, exactly as the extractor said.
fn resolve(audience: Audience, run: &RunScopes) -> Option<ScopeKey> {
    match audience {
        Audience::Org => Some(ScopeKey::Org),
        Audience::User => run.user_scope(),
        Audience::Channel => run.channel_scope(),
        Audience::Repo => run.repo_scope(),
    }
}

/// Step 3: where an org candidate narrows to from an origin that may not write org. A dm's
/// facts are its person's (falling to the channel); a private or unknown origin's belong to
/// its audience, the channel (falling to the user). Never a repo: a repo scope is read from
/// every channel the repo is used in.
fn narrowing_target(origin: ChannelVisibility, run: &RunScopes) -> Option<ScopeKey> {
    match origin {
        ChannelVisibility::Dm => run.user_scope().or_else(|| run.channel_scope()),
        ChannelVisibility::Private | ChannelVisibility::Unknown => {
            run.channel_scope().or_else(|| run.user_scope())
        }
        ChannelVisibility::Public | ChannelVisibility::Machine => None,
    }
}

fn ask(decide: &Decide, actor: &Actor, scope: &ScopeKey, origin: ChannelVisibility) -> Verdict {
    let resource = Resource::MemoryScope {
        scope: scope.clone(),
        origin_visibility: origin,
    };
    decide(actor, &memory_write(), &resource)
}

/// Steps 1–3 and 5 for one candidate. `actor` is the reflection actor.
pub fn route(
    candidate: &Candidate,
    run: &RunScopes,
    origin: ChannelVisibility,
    actor: &Actor,
    decide: &Decide,
) -> Route {
    let Some(scope) = resolve(candidate.audience, run) else {
        return Route::Drop("no-scope");
    };
    match ask(decide, actor, &scope, origin) {
        Verdict::Allow => Route::Write {
            scope,
            narrowed: false,
        },
        Verdict::Deny(Reason::OriginVisibility { .. }) if scope == ScopeKey::Org => {
            let Some(target) = narrowing_target(origin, run) else {
                return Route::Drop("no-narrower-scope");
            };
            match ask(decide, actor, &target, origin) {
                Verdict::Allow => Route::Write {
                    scope: target,
                    narrowed: true,
                },
                Verdict::Deny(reason) => Route::Drop(reason.token()),
            }
        }
        Verdict::Deny(reason) => Route::Drop(reason.token()),
    }
}

/// Whether a record of `scope` may be retired (forgotten by `forget that …`, or superseded by
/// a correction): the same write question, never narrowed (retiring elsewhere would retire
/// something else), and for a shared record (org, channel, repo) also `repo:write` on its
/// scope, as `memory forget <id>` asks. A person's own record needs only the write (`is_self`).
pub fn may_retire(
    scope: &ScopeKey,
    origin: ChannelVisibility,
    actor: &Actor,
    decide: &Decide,
) -> Result<(), &'static str> {
    if let Verdict::Deny(reason) = ask(decide, actor, scope, origin) {
        return Err(reason.token());
    }
    if matches!(scope, ScopeKey::User(_)) {
        return Ok(());
    }
    let resource = Resource::MemoryScope {
        scope: scope.clone(),
        origin_visibility: origin,
    };
    match decide(actor, &shared_retire(), &resource) {
        Verdict::Allow => Ok(()),
        Verdict::Deny(reason) => Err(reason.token()),
    }
}

/// What retiring a shared record asks besides the write.
fn shared_retire() -> Action {
    Action::Command(CommandGroup::Repo, Effect::Write)
}

/// What one reflection did, in counts and reason tokens only: never a fact's text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub written: usize,
    pub forgotten: usize,
    /// `org → user (origin-visibility)` and the like, with how many.
    pub narrowed: BTreeMap<String, usize>,
    /// `dropped (not-member)`, `forget dropped (no-match)`, `supersedes dropped (other-scope)`.
    pub dropped: BTreeMap<String, usize>,
}

impl Report {
    /// An org candidate written to the narrower `to`.
    pub fn narrow(&mut self, to: MemoryKind) {
        let key = format!("org → {} (origin-visibility)", to.as_str());
        *self.narrowed.entry(key).or_default() += 1;
    }

    pub fn drop(&mut self, what: &str, reason: &str) {
        *self
            .dropped
            .entry(format!("{what} ({reason})"))
            .or_default() += 1;
    }

    /// True when the reflection narrowed or dropped anything: then it gets its log line.
    pub fn is_notable(&self) -> bool {
        !self.narrowed.is_empty() || !self.dropped.is_empty()
    }
}

/// `2× org → user (origin-visibility), 1× dropped (not-member)`.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .narrowed
            .iter()
            .chain(&self.dropped)
            .map(|(what, n)| format!("{n}× {what}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz_core::{ActorId, ActorKind, ChannelId, Grants, RepoSlug, authorize};

    fn principal() -> Actor {
        Actor {
            kind: ActorKind::User,
            id: ActorId::parse("slack:U1").unwrap(),
            grants: Grants::actions([memory_write()]),
            on_behalf_of: None,
            memberships: Default::default(),
            groups: Default::default(),
            group_facts: Default::default(),
            outsider: false,
            origin: None,
        }
    }

    fn run(user: bool, channel: bool) -> RunScopes {
        RunScopes {
            user: user.then(|| ActorId::parse("slack:U1").unwrap()),
            channel: channel.then(|| ChannelId::parse("slack:G1").unwrap()),
            repo: Some(RepoSlug::parse("acme/web").unwrap()),
        }
    }

    fn routed(audience: Audience, origin: ChannelVisibility, run: &RunScopes) -> Route {
        let actor = crate::reflection_actor(&principal(), run);
        route(
            &Candidate::new("f", audience),
            run,
            origin,
            &actor,
            &authorize,
        )
    }

    fn to(scope: ScopeKey, narrowed: bool) -> Route {
        Route::Write { scope, narrowed }
    }

    #[test]
    fn the_org_routing_by_origin() {
        let r = run(true, true);
        let user = r.user_scope().unwrap();
        let channel = r.channel_scope().unwrap();
        use ChannelVisibility::*;
        assert_eq!(routed(Audience::Org, Public, &r), to(ScopeKey::Org, false));
        assert_eq!(routed(Audience::Org, Machine, &r), to(ScopeKey::Org, false));
        assert_eq!(routed(Audience::Org, Dm, &r), to(user.clone(), true));
        assert_eq!(
            routed(Audience::Org, Private, &r),
            to(channel.clone(), true)
        );
        assert_eq!(
            routed(Audience::Org, Unknown, &r),
            to(channel.clone(), true)
        );
        // The fallbacks when the first target is missing.
        assert_eq!(
            routed(Audience::Org, Dm, &run(false, true)),
            to(channel, true)
        );
        assert_eq!(
            routed(Audience::Org, Private, &run(true, false)),
            to(user, true)
        );
        assert_eq!(
            routed(Audience::Org, Dm, &run(false, false)),
            Route::Drop("no-narrower-scope")
        );
    }

    #[test]
    fn narrower_audiences_stay_where_they_are() {
        let r = run(true, true);
        for origin in ChannelVisibility::ALL {
            assert_eq!(
                routed(Audience::User, origin, &r),
                to(r.user_scope().unwrap(), false)
            );
            assert_eq!(
                routed(Audience::Channel, origin, &r),
                to(r.channel_scope().unwrap(), false)
            );
            assert_eq!(
                routed(Audience::Repo, origin, &r),
                to(r.repo_scope().unwrap(), false)
            );
        }
        assert_eq!(
            routed(
                Audience::Channel,
                ChannelVisibility::Public,
                &run(true, false)
            ),
            Route::Drop("no-scope")
        );
    }

    #[test]
    fn another_denial_is_dropped_with_its_reason_never_rerouted() {
        let r = run(true, true);
        // A principal that is not who the user scope names.
        let mut other = principal();
        other.id = ActorId::parse("slack:U2").unwrap();
        let got = route(
            &Candidate::new("f", Audience::User),
            &r,
            ChannelVisibility::Public,
            &other,
            &authorize,
        );
        assert_eq!(got, Route::Drop("not-self"));
        // A channel the actor is not a member of (no reflection membership added).
        let got = route(
            &Candidate::new("f", Audience::Channel),
            &r,
            ChannelVisibility::Private,
            &principal(),
            &authorize,
        );
        assert_eq!(got, Route::Drop("not-member"));
    }

    #[test]
    fn the_report_line_holds_counts_and_tokens() {
        let mut report = Report::default();
        report.narrow(MemoryKind::User);
        report.narrow(MemoryKind::User);
        report.drop("dropped", "not-member");
        assert!(report.is_notable());
        assert_eq!(
            report.to_string(),
            "2× org → user (origin-visibility), 1× dropped (not-member)"
        );
        assert!(!Report::default().is_notable());
    }
}
