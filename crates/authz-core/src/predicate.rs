//! `predicate_for`: the policy rows for a list read, compiled to a filter the store applies in
//! its own query; and `matches`, the one truth table for that filter.

use serde::Serialize;

use crate::action::Action;
use crate::actor::Actor;
use crate::grants::Grants;
use crate::ids::{ActorId, ChannelId, RepoSlug};
use crate::policy::{Condition, GrantTemplate, Policy, Rule};
use crate::resource::{ChannelVisibility, ResourceType, RunFacts};

/// A list filter. `None` matches nothing (and never reaches a store); `All` matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "op", content = "args")]
pub enum Predicate {
    None,
    All,
    ChannelsIn(Vec<ChannelId>),
    ReposIn(Vec<RepoSlug>),
    UserIs(ActorId),
    VisibilityIn(Vec<ChannelVisibility>),
    And(Vec<Predicate>),
    Or(Vec<Predicate>),
}

/// Why a predicate is refused by a store. A malformed predicate is an error, never `All`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MalformedPredicate {
    #[error("an empty {0} has no meaning")]
    EmptyConnective(&'static str),
    #[error("a list of {len} values is wider than the bound of {max}")]
    TooWide { len: usize, max: usize },
    #[error("predicate nesting deeper than {0}")]
    TooDeep(usize),
}

/// How deep `And`/`Or` may nest; `predicate_for` produces at most three levels.
pub const MAX_PREDICATE_DEPTH: usize = 8;

impl Predicate {
    /// Checks the shape a store relies on: no empty `And`/`Or`, no list wider than
    /// `max_width`, bounded nesting.
    pub fn check(&self, max_width: usize) -> Result<(), MalformedPredicate> {
        self.check_at(max_width, 0)
    }

    fn check_at(&self, max_width: usize, depth: usize) -> Result<(), MalformedPredicate> {
        if depth > MAX_PREDICATE_DEPTH {
            return Err(MalformedPredicate::TooDeep(MAX_PREDICATE_DEPTH));
        }
        let width = |len: usize| {
            if len > max_width {
                Err(MalformedPredicate::TooWide {
                    len,
                    max: max_width,
                })
            } else {
                Ok(())
            }
        };
        match self {
            Predicate::None | Predicate::All | Predicate::UserIs(_) => Ok(()),
            Predicate::ChannelsIn(v) => width(v.len()),
            Predicate::ReposIn(v) => width(v.len()),
            Predicate::VisibilityIn(v) => width(v.len()),
            Predicate::And(v) | Predicate::Or(v) => {
                if v.is_empty() {
                    let name = if matches!(self, Predicate::And(_)) {
                        "And"
                    } else {
                        "Or"
                    };
                    return Err(MalformedPredicate::EmptyConnective(name));
                }
                width(v.len())?;
                v.iter().try_for_each(|p| p.check_at(max_width, depth + 1))
            }
        }
    }
}

/// The one truth table: does `run` pass `predicate`? A missing stamp is `unknown`, which never
/// matches `VisibilityIn[public]`. An empty `And`/`Or` matches nothing (fail closed).
pub fn matches(predicate: &Predicate, run: &RunFacts) -> bool {
    match predicate {
        Predicate::None => false,
        Predicate::All => true,
        Predicate::ChannelsIn(ids) => ids.contains(&run.channel_id),
        Predicate::ReposIn(repos) => run.repo.as_ref().is_some_and(|r| repos.contains(r)),
        Predicate::UserIs(id) => run.user_id == *id,
        Predicate::VisibilityIn(v) => v.contains(&run.channel_visibility),
        Predicate::And(ps) => !ps.is_empty() && ps.iter().all(|p| matches(p, run)),
        Predicate::Or(ps) => ps.iter().any(|p| matches(p, run)),
    }
}

/// `predicate_for` over the built-in table.
pub fn predicate_for(actor: &Actor, action: &Action, ty: ResourceType) -> Predicate {
    Policy::builtin().predicate_for(actor, action, ty)
}

impl Policy {
    /// Compiles the rows for `action` on `ty` against `actor`. Actor-side conditions are
    /// decided now (true drops out, false kills the row); resource-side ones become leaves; the
    /// surviving rows OR into one flat disjunction. Point-only rows (resource-side selectors,
    /// kinded resources, templated grants) are never compiled: they can only narrow.
    pub fn predicate_for(&self, actor: &Actor, action: &Action, ty: ResourceType) -> Predicate {
        if !actor.is_consistent() {
            return Predicate::None;
        }
        let grants = actor.effective_grants();
        let mut branches: Vec<Predicate> = Vec::new();
        for rule in self
            .rows_for(action, ty, None)
            .filter(|r| !r.is_point_only())
        {
            if let Some(kinds) = &rule.selectors.actor_kinds
                && !kinds.contains(&actor.kind)
            {
                continue;
            }
            match compile_row(rule, actor, &grants) {
                None => {}
                Some(Predicate::All) => return Predicate::All,
                Some(Predicate::Or(parts)) => parts
                    .into_iter()
                    .for_each(|p| push_unique(&mut branches, p)),
                Some(p) => push_unique(&mut branches, p),
            }
        }
        match branches.len() {
            0 => Predicate::None,
            1 => branches.pop().unwrap_or(Predicate::None),
            _ => Predicate::Or(branches),
        }
    }
}

fn push_unique(into: &mut Vec<Predicate>, p: Predicate) {
    if !into.contains(&p) {
        into.push(p);
    }
}

/// One row's conjunction, or `None` when an actor-side condition is false.
fn compile_row(rule: &Rule, actor: &Actor, grants: &Grants) -> Option<Predicate> {
    let mut leaves = Vec::new();
    for condition in &rule.when {
        match condition {
            Condition::HasGrant(GrantTemplate::Action(a)) => {
                if !grants.actions.holds(a) {
                    return None;
                }
            }
            // Point-only; such rows were skipped above.
            Condition::HasGrant(GrantTemplate::AgentRunOfResource) => return None,
            Condition::AllChannels => {
                if !grants.channels.is_all() {
                    return None;
                }
            }
            Condition::MemberOf => {
                if let Some(channels) = grants.channels.items() {
                    let public = Predicate::VisibilityIn(vec![ChannelVisibility::Public]);
                    leaves.push(if channels.is_empty() {
                        public
                    } else {
                        Predicate::Or(vec![
                            Predicate::ChannelsIn(channels.iter().cloned().collect()),
                            public,
                        ])
                    });
                }
            }
            Condition::IsSelf => {
                let mut ids: Vec<Predicate> = Vec::new();
                actor
                    .self_ids()
                    .for_each(|id| push_unique(&mut ids, Predicate::UserIs(id.clone())));
                leaves.push(if ids.len() == 1 {
                    ids.pop()?
                } else {
                    Predicate::Or(ids)
                });
            }
            Condition::OwnerOf => {
                if let Some(repos) = grants.repos.items() {
                    if repos.is_empty() {
                        return None;
                    }
                    leaves.push(Predicate::ReposIn(repos.iter().cloned().collect()));
                }
            }
        }
    }
    Some(match leaves.len() {
        0 => Predicate::All,
        1 => leaves.pop()?,
        _ => Predicate::And(leaves),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_empty_connectives_and_wide_lists() {
        assert_eq!(
            Predicate::And(vec![]).check(10),
            Err(MalformedPredicate::EmptyConnective("And"))
        );
        assert_eq!(
            Predicate::Or(vec![]).check(10),
            Err(MalformedPredicate::EmptyConnective("Or"))
        );
        let wide = Predicate::VisibilityIn(vec![ChannelVisibility::Public; 11]);
        assert_eq!(
            wide.check(10),
            Err(MalformedPredicate::TooWide { len: 11, max: 10 })
        );
        let mut deep = Predicate::All;
        for _ in 0..=MAX_PREDICATE_DEPTH + 1 {
            deep = Predicate::And(vec![deep]);
        }
        assert_eq!(
            deep.check(10),
            Err(MalformedPredicate::TooDeep(MAX_PREDICATE_DEPTH))
        );
        assert_eq!(Predicate::All.check(0), Ok(()));
    }
}
