//! Where an actor's grants came from: the baseline, its entry, its surface's entry, each
//! group. For `authz explain`, never for a decision (the decision reads the union alone).

use serde::Serialize;

use crate::action::Action;
use crate::actor::Actor;
use crate::config::GrantsTable;
use crate::grants::{ALL_GRANTS, Grants, NO_GRANTS};
use crate::ids::{ActorId, Baseline, ScheduleName};
use crate::surface::Surface;

/// One place grants came from, and what it gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantSource {
    /// How the config spells it: `baseline of slack:`, `grants."slack:U1"`, `grants."slack:*"`,
    /// `group:oncall`, `schedule declaration`.
    pub from: String,
    pub grants: Grants,
}

impl GrantSource {
    fn new(from: impl Into<String>, grants: Grants) -> Option<GrantSource> {
        (!grants.is_empty()).then(|| GrantSource {
            from: from.into(),
            grants,
        })
    }
}

impl GrantsTable {
    /// Where `actor`'s own grants came from (an agent's: its entry or its baseline; its
    /// principal's are the principal's own sources), in the order the resolver unions them.
    pub fn sources(&self, actor: &Actor) -> Vec<GrantSource> {
        let id = &actor.id;
        let mut out = Vec::new();
        if actor.outsider {
            out.extend(self.entry_source(id));
        } else {
            out.extend(self.baseline_source(actor));
            out.extend(self.entry_source(id));
            if let Some(surface) = Surface::entry_of(id) {
                let key = surface.entry_key().unwrap_or_default();
                out.extend(GrantSource::new(
                    format!("grants.{key:?}"),
                    self.surface(id),
                ));
            }
        }
        for group in &actor.groups {
            let grants = self
                .group_entries()
                .get(group)
                .cloned()
                .unwrap_or(NO_GRANTS);
            out.extend(GrantSource::new(group.to_string(), grants));
        }
        out
    }

    fn entry_source(&self, id: &ActorId) -> Option<GrantSource> {
        let grants = self.entry(id).cloned()?;
        GrantSource::new(format!("grants.{:?}", id.as_str()), grants)
    }

    fn baseline_source(&self, actor: &Actor) -> Option<GrantSource> {
        let id = &actor.id;
        let (label, grants) = match id.namespace().baseline() {
            Baseline::ChatPerson => ("baseline", self.chat_person_baseline()),
            Baseline::BrowserPerson => ("baseline", Self::browser_person_baseline()),
            Baseline::EntryOnly if actor.on_behalf_of.is_some() && self.entry(id).is_none() => (
                "baseline (an agent holds all, bounded by its principal)",
                ALL_GRANTS,
            ),
            Baseline::EntryOnly => return None,
            Baseline::Schedule if self.entry(id).is_none() => {
                let declared = ScheduleName::parse(id.subject())
                    .ok()
                    .and_then(|n| self.schedules().get(&n).cloned())?;
                ("schedule declaration", declared)
            }
            Baseline::Schedule => return None,
            Baseline::Everything => ("baseline", ALL_GRANTS),
        };
        let prefix = id.namespace().prefix();
        GrantSource::new(format!("{label} of {prefix}"), grants)
    }

    /// The sources among `actor`'s that hold `action`: what gave it.
    pub fn sources_holding(&self, actor: &Actor, action: &Action) -> Vec<GrantSource> {
        self.sources(actor)
            .into_iter()
            .filter(|s| s.grants.actions.holds(action))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::groups::{GroupFacts, GroupId};
    use crate::{Action, ActorId, GrantsTable};

    fn table(text: &str) -> GrantsTable {
        GrantsTable::from_config(&toml::from_str(text).unwrap(), Default::default()).unwrap()
    }

    #[test]
    fn a_group_grant_is_named_as_the_group_it_came_from() {
        let t = table(
            "[groups]\noncall = [\"slack:U1\"]\n[grants.\"group:oncall\"]\nactions = [\"runs:write\"]\n[grants.\"group:slack:S9\"]\nactions = [\"friction:write\"]\n",
        );
        let facts = GroupFacts {
            member_of: [GroupId::parse("group:slack:S9").unwrap()].into(),
            unresolved: Default::default(),
        };
        let actor = t.resolve(ActorId::parse("slack:U1").unwrap(), facts, false);
        let from = |a: &str| -> Vec<String> {
            t.sources_holding(&actor, &Action::parse(a).unwrap())
                .into_iter()
                .map(|s| s.from)
                .collect()
        };
        assert_eq!(from("runs:write"), ["group:oncall"]);
        assert_eq!(from("friction:write"), ["group:slack:S9"]);
        assert_eq!(from("help:read"), ["baseline of slack:"]);
        assert!(from("config:write").is_empty());
    }
}
