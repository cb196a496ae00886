//! validate_policy: each fault the spec lists fails, naming the row.

use std::collections::BTreeSet;

use authz_core::policy::{
    ActionPattern, Condition, Fault, GrantTemplate, Rule, Target, builtin_rules,
};
use authz_core::{
    Action, ActorKind, CATALOGUE_ACTIONS, ChannelVisibility, ConfigKind, MemoryKind, Policy,
    validate_policy,
};

use crate::fixtures::act;

fn declared() -> BTreeSet<Action> {
    CATALOGUE_ACTIONS.into_iter().collect()
}

fn with(extra: Rule) -> Vec<Rule> {
    let mut rules = builtin_rules();
    rules.push(extra);
    rules
}

fn exact(a: &str) -> ActionPattern {
    ActionPattern::Exact(act(a))
}

/// The faults of a table, as (row, fault).
fn faults(rules: &[Rule], declared: &BTreeSet<Action>) -> Vec<(String, Fault)> {
    validate_policy(rules, declared)
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|f| (f.row, f.fault))
        .collect()
}

#[test]
fn the_builtin_table_is_valid() {
    assert_eq!(validate_policy(&builtin_rules(), &declared()), Ok(()));
    assert_eq!(Policy::builtin().rules().len(), builtin_rules().len());
}

#[test]
fn an_action_no_command_declares_fails_naming_the_row() {
    let mut fewer = declared();
    fewer.remove(&act("schedule:exec"));
    let f = faults(&builtin_rules(), &fewer);
    assert_eq!(
        f,
        vec![(
            "schedule:exec × command".to_owned(),
            Fault::UndeclaredAction(act("schedule:exec"))
        )]
    );
    let odd = Rule::new("help:exec × command", exact("help:exec"), Target::Command)
        .when([Condition::has_grant("help:exec").unwrap()]);
    let f = faults(&with(odd), &declared());
    assert_eq!(
        f,
        vec![(
            "help:exec × command".to_owned(),
            Fault::UndeclaredAction(act("help:exec"))
        )]
    );
    // Non-command actions need no command.
    let ok = Rule::new("repo:use × repo (grant)", exact("repo:use"), Target::Repo)
        .when([Condition::has_grant("repo:use").unwrap()]);
    assert_eq!(faults(&with(ok), &declared()), vec![]);
}

#[test]
fn a_condition_on_an_attribute_the_resource_cannot_carry_fails() {
    let cases = [
        (Target::Repo, Condition::IsSelf),
        (Target::Command, Condition::MemberOf),
        (Target::Agent, Condition::OwnerOf),
        (
            Target::ConfigScope(ConfigKind::Channel),
            Condition::MemberOf,
        ),
        (Target::ConfigScope(ConfigKind::Org), Condition::IsSelf),
        (Target::MemoryScope(MemoryKind::Org), Condition::AllChannels),
        (Target::MemoryScope(MemoryKind::User), Condition::OwnerOf),
        (Target::MemoryScope(MemoryKind::Repo), Condition::MemberOf),
        (
            Target::Run,
            Condition::HasGrant(GrantTemplate::AgentRunOfResource),
        ),
    ];
    for (target, condition) in cases {
        let rule = Rule::new("odd row", exact("repo:write"), target).when([condition.clone()]);
        assert_eq!(
            faults(&with(rule), &declared()),
            vec![(
                "odd row".to_owned(),
                Fault::UnreadableCondition { condition, target }
            )],
            "{target}"
        );
    }
}

#[test]
fn a_selector_on_the_wrong_resource_or_empty_fails() {
    let rule = Rule::new("odd", exact("runs:read"), Target::Run)
        .origin_visibility([ChannelVisibility::Public]);
    assert_eq!(
        faults(&with(rule), &declared()),
        vec![(
            "odd".to_owned(),
            Fault::UnreadableSelector {
                selector: "origin_visibility",
                target: Target::Run
            }
        )]
    );
    let rule = Rule::new("odd", exact("runs:read"), Target::Command).unrestricted_only();
    assert_eq!(
        faults(&with(rule), &declared()),
        vec![(
            "odd".to_owned(),
            Fault::UnreadableSelector {
                selector: "unrestricted_only",
                target: Target::Command
            }
        )]
    );
    let rule =
        Rule::new("odd", exact("runs:read"), Target::Command).actor_kinds(Vec::<ActorKind>::new());
    assert_eq!(
        faults(&with(rule), &declared()),
        vec![("odd".to_owned(), Fault::EmptySelector("actor_kinds"))]
    );
}

#[test]
fn a_duplicate_row_fails_naming_both() {
    let copy = Rule::new(
        "runs:read × run (member) again",
        exact("runs:read"),
        Target::Run,
    )
    .when([
        Condition::MemberOf,
        Condition::has_grant("runs:read").unwrap(),
    ]);
    assert_eq!(
        faults(&with(copy), &declared()),
        vec![(
            "runs:read × run (member) again".to_owned(),
            Fault::DuplicateRow("runs:read × run (member)".to_owned())
        )],
        "the same row with its conditions reordered is a duplicate"
    );
    let same_name = Rule::new(
        "runs:read × run (member)",
        exact("runs:read"),
        Target::Command,
    )
    .when([Condition::has_grant("trace:read").unwrap()]);
    assert_eq!(
        faults(&with(same_name), &declared()),
        vec![("runs:read × run (member)".to_owned(), Fault::DuplicateName)]
    );
}

#[test]
fn a_declared_command_action_without_a_row_fails_and_is_refused_for_everyone() {
    let rules: Vec<Rule> = builtin_rules()
        .into_iter()
        .filter(|r| r.action != exact("friction:write"))
        .collect();
    assert_eq!(
        faults(&rules, &declared()),
        vec![(
            "friction:write × command".to_owned(),
            Fault::NoRows(act("friction:write"))
        )]
    );
    assert!(
        Policy::new(rules, &declared()).is_err(),
        "an invalid table never serves"
    );
}

#[test]
fn every_fault_is_reported_not_just_the_first() {
    let mut rules =
        with(Rule::new("a", exact("runs:read"), Target::Repo).when([Condition::IsSelf]));
    rules.push(Rule::new("b", exact("help:write"), Target::Command));
    let f = faults(&rules, &declared());
    assert_eq!(f.len(), 2, "{f:?}");
    let shown = validate_policy(&rules, &declared()).unwrap_err()[0].to_string();
    assert_eq!(
        shown,
        "policy row `a`: condition is_self cannot be read on repo"
    );
}
