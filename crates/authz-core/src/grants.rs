//! Grants: exactly three axes (actions, channels, repos), each a set or `all`.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::action::Action;
use crate::ids::{ChannelId, RepoSlug};

/// One axis of grants. An axis absent from config is `Only(empty)`; `All` is always explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantSet<T: Ord> {
    All,
    Only(BTreeSet<T>),
}

impl<T: Ord + Clone> GrantSet<T> {
    pub const fn none() -> Self {
        GrantSet::Only(BTreeSet::new())
    }

    pub fn only(items: impl IntoIterator<Item = T>) -> Self {
        GrantSet::Only(items.into_iter().collect())
    }

    pub fn is_all(&self) -> bool {
        matches!(self, GrantSet::All)
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, GrantSet::Only(s) if s.is_empty())
    }

    /// Set membership, with `All` containing everything.
    pub fn contains(&self, item: &T) -> bool {
        match self {
            GrantSet::All => true,
            GrantSet::Only(s) => s.contains(item),
        }
    }

    /// `All ∪ S = All`, `S ∪ T` set-wise.
    pub fn union(&self, other: &Self) -> Self {
        match (self, other) {
            (GrantSet::All, _) | (_, GrantSet::All) => GrantSet::All,
            (GrantSet::Only(a), GrantSet::Only(b)) => GrantSet::Only(a.union(b).cloned().collect()),
        }
    }

    /// `All ∩ S = S`, `S ∩ T` set-wise.
    pub fn intersect(&self, other: &Self) -> Self {
        match (self, other) {
            (GrantSet::All, x) | (x, GrantSet::All) => x.clone(),
            (GrantSet::Only(a), GrantSet::Only(b)) => {
                GrantSet::Only(a.intersection(b).cloned().collect())
            }
        }
    }

    /// The listed items, or `None` for `All`.
    pub fn items(&self) -> Option<&BTreeSet<T>> {
        match self {
            GrantSet::All => None,
            GrantSet::Only(s) => Some(s),
        }
    }
}

impl GrantSet<Action> {
    /// `has_grant`: the set holds `action`, or is `all`; `agent:run:*` satisfies every
    /// `agent:run:<name>`. Nothing else implies anything.
    pub fn holds(&self, action: &Action) -> bool {
        match self {
            GrantSet::All => true,
            GrantSet::Only(s) => {
                s.contains(action)
                    || (matches!(action, Action::AgentRun(_)) && s.contains(&Action::AgentRunAny))
            }
        }
    }

    /// Intersection of two action sets under `holds`: an action survives when both sides hold
    /// it, so `{agent:run:*} ∩ {agent:run:coding} = {agent:run:coding}`. For every action `a`,
    /// `x.intersect_actions(y).holds(a) == x.holds(a) && y.holds(a)`.
    pub fn intersect_actions(&self, other: &Self) -> Self {
        match (self, other) {
            (GrantSet::All, x) | (x, GrantSet::All) => x.clone(),
            (GrantSet::Only(a), GrantSet::Only(b)) => GrantSet::Only(
                a.iter()
                    .filter(|x| other.holds(x))
                    .chain(b.iter().filter(|x| self.holds(x)))
                    .cloned()
                    .collect(),
            ),
        }
    }
}

impl<T: Ord + Serialize> Serialize for GrantSet<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            GrantSet::All => s.serialize_str("all"),
            GrantSet::Only(set) => set.serialize(s),
        }
    }
}

/// What an actor holds, on exactly three axes. Which agents an actor may run is an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grants {
    pub actions: GrantSet<Action>,
    pub channels: GrantSet<ChannelId>,
    pub repos: GrantSet<RepoSlug>,
}

/// Nothing on every axis: what anything unresolvable holds.
pub const NO_GRANTS: Grants = Grants {
    actions: GrantSet::none(),
    channels: GrantSet::none(),
    repos: GrantSet::none(),
};

/// Everything on every axis (`cli:local`, an agent's baseline when it acts for someone).
pub const ALL_GRANTS: Grants = Grants {
    actions: GrantSet::All,
    channels: GrantSet::All,
    repos: GrantSet::All,
};

impl Grants {
    pub fn actions(actions: impl IntoIterator<Item = Action>) -> Self {
        Grants {
            actions: GrantSet::only(actions),
            ..NO_GRANTS
        }
    }

    pub fn union(&self, other: &Grants) -> Grants {
        Grants {
            actions: self.actions.union(&other.actions),
            channels: self.channels.union(&other.channels),
            repos: self.repos.union(&other.repos),
        }
    }

    /// Axis-by-axis intersection: an agent's effective grants never exceed its principal's.
    pub fn intersect(&self, other: &Grants) -> Grants {
        Grants {
            actions: self.actions.intersect_actions(&other.actions),
            channels: self.channels.intersect(&other.channels),
            repos: self.repos.intersect(&other.repos),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.channels.is_empty() && self.repos.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentName;

    fn act(s: &str) -> Action {
        Action::parse(s).unwrap()
    }

    #[test]
    fn all_intersected_with_a_set_is_the_set() {
        let s = GrantSet::only([1, 2]);
        assert_eq!(GrantSet::All.intersect(&s), s);
        assert_eq!(s.intersect(&GrantSet::All), s);
        assert_eq!(s.intersect(&GrantSet::only([2, 3])), GrantSet::only([2]));
        assert_eq!(
            GrantSet::<i32>::All.intersect(&GrantSet::All),
            GrantSet::All
        );
    }

    #[test]
    fn agent_run_star_holds_every_agent_and_survives_intersection_as_the_narrower_side() {
        let star = GrantSet::only([Action::AgentRunAny]);
        let coding = GrantSet::only([act("agent:run:coding")]);
        assert!(star.holds(&act("agent:run:coding")));
        assert!(!coding.holds(&Action::AgentRunAny));
        assert_eq!(star.intersect_actions(&coding), coding);
        assert_eq!(coding.intersect_actions(&star), coding);
        assert!(!star.holds(&act("repo:use")));
    }

    #[test]
    fn write_never_implies_exec_nor_read() {
        let w = GrantSet::only([act("repo:write")]);
        assert!(!w.holds(&act("repo:exec")));
        assert!(!w.holds(&act("repo:read")));
        assert!(!w.holds(&Action::AgentRun(AgentName::parse("coding").unwrap())));
    }

    #[test]
    fn no_grants_is_empty_on_every_axis() {
        assert!(NO_GRANTS.is_empty());
        assert!(!ALL_GRANTS.is_empty());
        assert_eq!(NO_GRANTS.union(&ALL_GRANTS), ALL_GRANTS);
        assert_eq!(NO_GRANTS.intersect(&ALL_GRANTS), NO_GRANTS);
    }
}
