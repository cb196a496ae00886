//! The ratchet: promises an agent makes with `restrict_self`, folded out of the run's
//! event log and its ancestors' logs. Narrowing is free; the one way back up is `policy.widen`,
//! decided by the rule table like any other action, after which the broker (never the agent)
//! writes the event that replaces the named promise.
//!
//! Three properties hold by construction:
//! 1. the effective ceiling of an action is the minimum over every promise covering it, so one
//!    more promise can only lower it;
//! 2. the fold only appends: no event removes a promise; a widening replaces exactly the promise
//!    it names, which must exist;
//! 3. a proposal asking for more than the agent holds is refused before anything is written.
//!    For a class (`net.*`), what the agent holds is the most restrictive decision the table
//!    and the promises give any action under it, an action no rule names counting as `ask`:
//!    a promise of `net.*=allow` while one `net` action asks would be a promise the ratchet
//!    cannot keep.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::args::tool_for_action;
use crate::rules::{Charset, NamePattern, RuleDecision, RuleKey, RuleTable};

/// Who holds the decisions a promise is weighed against: the agent's model and kind, as the
/// rule table's key reads them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Holder<'a> {
    pub model: Option<&'a str>,
    pub agent_kind: Option<&'a str>,
}

/// A name under `prefix` that no rule can name exactly (`~` is outside every action's
/// charset): what an action no rule names answers.
fn unnamed_below(prefix: &str) -> String {
    format!("{prefix}.~")
}

/// Whether `name` lies below `prefix` (`net.fetch` below `net`).
fn is_below(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1)
}

/// One promise: the most the agent may still do with an action or a class of actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Promise {
    pub target: NamePattern,
    pub most: RuleDecision,
}

impl Promise {
    /// `fs.write=ask`, `net.*=deny`: the text a widening must name exactly.
    pub fn parse(text: &str) -> Result<Promise, RatchetError> {
        let (target, most) = text
            .split_once('=')
            .ok_or_else(|| RatchetError::Shape(text.to_owned()))?;
        let target = NamePattern::parse(target.trim(), Charset::Lower)
            .map_err(|e| RatchetError::Target(e.to_string()))?;
        let most =
            RuleDecision::parse(most.trim()).ok_or_else(|| RatchetError::Shape(text.to_owned()))?;
        Ok(Promise { target, most })
    }

    fn covers_action(&self, action: &str) -> bool {
        self.target.matches(action)
    }
}

impl fmt::Display for Promise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.target, self.most)
    }
}

/// What the run's log holds, as the body of a `restriction` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RatchetEvent {
    /// `restrict_self`: one more promise.
    Restricted { promise: String },
    /// Written by the broker after `policy.widen` was allowed: `promise` (exactly as written)
    /// is replaced by `now`.
    Widened { promise: String, now: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RatchetError {
    #[error(
        "{0:?}: expected <action or class>=<decision>, like \"fs.write=ask\" or \"net.*=deny\""
    )]
    Shape(String),
    #[error("{0}")]
    Target(String),
    #[error(
        "{asked} asks for more than you hold: you may do at most `{holds}` there already; a promise can only narrow"
    )]
    MoreThanHeld { asked: String, holds: RuleDecision },
    #[error("there is no promise {0:?} to widen; name a promise exactly as it was written")]
    NoSuchPromise(String),
    #[error(
        "{now} does not widen {promise}: a widening names the same action or class as the promise it lifts"
    )]
    OtherTarget { promise: String, now: String },
    #[error("{now} is not wider than {promise}; to narrow, use restrict_self")]
    NotWider { promise: String, now: String },
    #[error("a restriction event does not parse: {0}")]
    Event(String),
}

/// The promises in force, folded from the events of every ancestor (oldest first) then the run's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ratchet {
    promises: Vec<Promise>,
}

impl Ratchet {
    /// Folds events in order. An event that does not parse is an error, never skipped: a
    /// promise that cannot be read must not silently stop binding.
    pub fn fold<'e>(
        events: impl IntoIterator<Item = &'e RatchetEvent>,
    ) -> Result<Ratchet, RatchetError> {
        let mut ratchet = Ratchet::default();
        for event in events {
            ratchet.apply(event)?;
        }
        Ok(ratchet)
    }

    /// Folds one more event in (what the broker does right after writing it). On an error the
    /// ratchet is unchanged.
    pub fn apply(&mut self, event: &RatchetEvent) -> Result<(), RatchetError> {
        match event {
            RatchetEvent::Restricted { promise } => self.promises.push(Promise::parse(promise)?),
            RatchetEvent::Widened { promise, now } => {
                let named = Promise::parse(promise)?;
                let now = Promise::parse(now)?;
                let slot = self
                    .promises
                    .iter_mut()
                    .find(|p| **p == named)
                    .ok_or_else(|| RatchetError::NoSuchPromise(promise.clone()))?;
                *slot = now;
            }
        }
        Ok(())
    }

    pub fn promises(&self) -> &[Promise] {
        &self.promises
    }

    /// The most the agent may do with `action`: the minimum over the promises covering it.
    pub fn ceiling(&self, action: &str) -> Option<RuleDecision> {
        self.promises
            .iter()
            .filter(|p| p.covers_action(action))
            .map(|p| p.most)
            .min()
    }

    /// The rule table's answer for `action`, lowered by the promises.
    pub fn bound(&self, action: &str, answer: RuleDecision) -> RuleDecision {
        self.ceiling(action)
            .map_or(answer, |ceiling| ceiling.min(answer))
    }

    /// The most the agent holds for `target` now: for an action, the table's answer lowered by
    /// the promises; for a class, the most restrictive of that over every action under it (each
    /// action a rule or a promise names, and one no rule names, which answers `ask` unless a
    /// class rule says otherwise).
    pub fn held(
        &self,
        table: &RuleTable,
        target: &NamePattern,
        holder: Holder<'_>,
    ) -> RuleDecision {
        let mut names: Vec<String> = Vec::new();
        match target {
            NamePattern::Exact(action) => names.push(action.clone()),
            NamePattern::Below(prefix) => {
                names.push(unnamed_below(prefix));
                let named = table
                    .named_actions()
                    .chain(self.promises.iter().map(|p| &p.target));
                for pattern in named {
                    match pattern {
                        NamePattern::Exact(action) if is_below(action, prefix) => {
                            names.push(action.clone())
                        }
                        NamePattern::Below(class) if class == prefix || is_below(class, prefix) => {
                            names.push(unnamed_below(class))
                        }
                        _ => {}
                    }
                }
            }
        }
        names
            .iter()
            .map(|action| {
                let key = RuleKey {
                    action,
                    tool: tool_for_action(action),
                    model: holder.model,
                    agent_kind: holder.agent_kind,
                };
                self.bound(action, table.lookup(&key).decision)
            })
            .min()
            .unwrap_or(RuleDecision::Ask)
    }

    /// `restrict_self`: the event to write, or the refusal when the proposal asks for more than
    /// the agent holds ([`Ratchet::held`]) anywhere it covers.
    pub fn propose(
        &self,
        text: &str,
        table: &RuleTable,
        holder: Holder<'_>,
    ) -> Result<RatchetEvent, RatchetError> {
        let promise = Promise::parse(text)?;
        let holds = self.held(table, &promise.target, holder);
        if promise.most > holds {
            return Err(RatchetError::MoreThanHeld {
                asked: promise.to_string(),
                holds,
            });
        }
        Ok(RatchetEvent::Restricted {
            promise: promise.to_string(),
        })
    }

    /// Checks a `policy.widen` request before it goes to the rule table: it names a promise in
    /// force exactly as written, and asks for more on that same target (a widening lifts
    /// exactly the promise it names, never another action or class).
    pub fn widen_request(&self, promise: &str, now: &str) -> Result<RatchetEvent, RatchetError> {
        let named = Promise::parse(promise)?;
        let now = Promise::parse(now)?;
        if !self.promises.contains(&named) {
            return Err(RatchetError::NoSuchPromise(promise.to_owned()));
        }
        if now.target != named.target {
            return Err(RatchetError::OtherTarget {
                promise: named.to_string(),
                now: now.to_string(),
            });
        }
        if now.most <= named.most {
            return Err(RatchetError::NotWider {
                promise: named.to_string(),
                now: now.to_string(),
            });
        }
        Ok(RatchetEvent::Widened {
            promise: named.to_string(),
            now: now.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RuleDecision::*;

    fn restricted(text: &str) -> RatchetEvent {
        RatchetEvent::Restricted {
            promise: text.into(),
        }
    }

    #[test]
    fn the_ceiling_is_the_minimum_over_covering_promises() {
        let ratchet = Ratchet::fold(&[
            restricted("net.*=ask"),
            restricted("net.fetch=agent_review"),
            restricted("fs.write=deny"),
        ])
        .unwrap();
        assert_eq!(ratchet.ceiling("net.fetch"), Some(Ask));
        assert_eq!(ratchet.ceiling("net.dns"), Some(Ask));
        assert_eq!(ratchet.ceiling("fs.write"), Some(Deny));
        assert_eq!(ratchet.ceiling("fs.read"), None);
        assert_eq!(ratchet.bound("net.fetch", Allow), Ask);
        assert_eq!(ratchet.bound("net.fetch", Deny), Deny);
        assert_eq!(ratchet.bound("fs.read", Allow), Allow);
    }

    #[test]
    fn one_more_promise_can_only_lower_a_ceiling() {
        let actions = ["net.fetch", "fs.write", "git.push", "mcp.gh.list"];
        let promises = [
            "net.*=allow",
            "fs.write=ask",
            "git.*=deny",
            "net.fetch=agent_then_human",
            "mcp.*=agent_review",
        ];
        let mut events = Vec::new();
        let mut before = Ratchet::default();
        for promise in promises {
            events.push(restricted(promise));
            let after = Ratchet::fold(&events).unwrap();
            for action in actions {
                let (b, a) = (before.bound(action, Allow), after.bound(action, Allow));
                assert!(a <= b, "{promise} raised {action} from {b} to {a}");
            }
            before = after;
        }
    }

    fn rule(action: &str, decision: RuleDecision) -> crate::rules::ToolRule {
        crate::rules::ToolRule::for_action(
            NamePattern::parse(action, Charset::Lower).unwrap(),
            decision,
        )
    }

    fn holder() -> Holder<'static> {
        Holder {
            model: Some("m"),
            agent_kind: Some("main"),
        }
    }

    #[test]
    fn a_proposal_for_more_than_is_held_is_refused_before_anything_is_written() {
        let open = RuleTable::new(vec![rule("net.*", Allow)], vec![], vec![]);
        let ratchet = Ratchet::fold(&[restricted("net.*=ask")]).unwrap();
        let propose = |text: &str| ratchet.propose(text, &open, holder());
        assert_eq!(propose("net.fetch=deny"), Ok(restricted("net.fetch=deny")));
        assert_eq!(propose("net.fetch=ask"), Ok(restricted("net.fetch=ask")));
        assert!(matches!(
            propose("net.fetch=allow"),
            Err(RatchetError::MoreThanHeld { holds: Ask, .. })
        ));
        assert!(matches!(
            propose("net.fetch.*=agent_review"),
            Err(RatchetError::MoreThanHeld { .. })
        ));
        // What the table gives counts too: the shipped fs.write=ask.
        let shipped = RuleTable::new(vec![], vec![], vec![]);
        let fresh = Ratchet::default();
        assert!(matches!(
            fresh.propose("fs.write=allow", &shipped, holder()),
            Err(RatchetError::MoreThanHeld { holds: Ask, .. })
        ));
        assert!(fresh.propose("fs.write=deny", &shipped, holder()).is_ok());
        for bad in ["net.fetch", "*=deny", "net.*.x=deny", "net.fetch=never"] {
            assert!(propose(bad).is_err(), "{bad}");
        }
    }

    /// A class promise is weighed against every action under it: the most restrictive
    /// decision the table gives any of them, an action no rule names counting as `ask`.
    #[test]
    fn a_class_promise_above_any_action_under_it_is_refused() {
        let shipped = RuleTable::new(vec![], vec![], vec![]);
        let fresh = Ratchet::default();
        let propose = |table: &RuleTable, text: &str| fresh.propose(text, table, holder());
        // net.fetch asks (shipped); net.* = allow promises more than that.
        assert!(matches!(
            propose(&shipped, "net.*=allow"),
            Err(RatchetError::MoreThanHeld { holds: Ask, .. })
        ));
        assert!(propose(&shipped, "net.*=ask").is_ok());
        // fs.read is allowed but fs.write asks: fs.* holds ask.
        assert!(propose(&shipped, "fs.*=allow").is_err());
        // An org allowing every net action: an action no rule names is covered by the class.
        let open = RuleTable::new(vec![rule("net.*", Allow)], vec![], vec![]);
        assert!(propose(&open, "net.*=allow").is_ok());
        // ... unless one action under it is held lower by a rule.
        let one_asks = RuleTable::new(
            vec![rule("net.*", Allow)],
            vec![rule("net.fetch.upload", Ask)],
            vec![],
        );
        assert!(propose(&one_asks, "net.*=allow").is_err());
        assert!(propose(&one_asks, "net.fetch.*=allow").is_err());
        // A deeper class rule counts: mcp.github.* = deny under an mcp.* = allow org.
        let deep = RuleTable::new(
            vec![rule("mcp.*", Allow)],
            vec![rule("mcp.github.*", Deny)],
            vec![],
        );
        assert!(matches!(
            propose(&deep, "mcp.*=agent_review"),
            Err(RatchetError::MoreThanHeld { holds: Deny, .. })
        ));
        assert!(propose(&deep, "mcp.*=deny").is_ok());
        // A promise already made binds the class.
        let promised = Ratchet::fold(&[restricted("git.push=deny")]).unwrap();
        let all_git = RuleTable::new(vec![rule("git.*", Allow)], vec![], vec![]);
        assert!(matches!(
            promised.propose("git.*=allow", &all_git, holder()),
            Err(RatchetError::MoreThanHeld { holds: Deny, .. })
        ));
    }

    #[test]
    fn a_widening_replaces_exactly_the_promise_it_names() {
        let mut events = vec![restricted("net.*=deny"), restricted("fs.write=ask")];
        let ratchet = Ratchet::fold(&events).unwrap();
        assert!(matches!(
            ratchet.widen_request("net.*=ask", "net.*=allow"),
            Err(RatchetError::NoSuchPromise(_))
        ));
        let widen = ratchet.widen_request("net.*=deny", "net.*=ask").unwrap();
        events.push(widen);
        let after = Ratchet::fold(&events).unwrap();
        assert_eq!(after.ceiling("net.fetch"), Some(Ask));
        assert_eq!(
            after.ceiling("fs.write"),
            Some(Ask),
            "every other promise is untouched"
        );
        // A widening lifts exactly the promise it names: the same target, and wider.
        assert!(matches!(
            ratchet.widen_request("net.*=deny", "fs.*=allow"),
            Err(RatchetError::OtherTarget { .. })
        ));
        assert!(matches!(
            ratchet.widen_request("net.*=deny", "net.fetch=allow"),
            Err(RatchetError::OtherTarget { .. })
        ));
        assert!(matches!(
            ratchet.widen_request("net.*=deny", "net.*=deny"),
            Err(RatchetError::NotWider { .. })
        ));
        // A widening event naming nothing in force does not fold.
        let forged = [RatchetEvent::Widened {
            promise: "git.*=deny".into(),
            now: "git.*=allow".into(),
        }];
        assert!(Ratchet::fold(&forged).is_err());
    }

    #[test]
    fn events_round_trip_as_json_and_bad_bodies_are_refused() {
        let event = restricted("net.*=ask");
        let json = serde_json::to_string(&event).unwrap();
        assert_eq!(json, r#"{"kind":"restricted","promise":"net.*=ask"}"#);
        assert_eq!(serde_json::from_str::<RatchetEvent>(&json).unwrap(), event);
        for bad in [
            r#"{"kind":"lifted","promise":"net.*=ask"}"#,
            r#"{"kind":"restricted"}"#,
            r#"{"kind":"restricted","promise":"x=ask","by":"agent"}"#,
        ] {
            assert!(serde_json::from_str::<RatchetEvent>(bad).is_err(), "{bad}");
        }
    }
}
