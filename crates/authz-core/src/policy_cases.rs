//! Every row of the built-in table with a positive and a negative case. A positive case is
//! allowed by its row and by the table; a negative case is refused by its row and by the table.
//! The coverage test fails when a row has no case of either sign, or a case names no row.

use std::collections::BTreeSet;

use crate::action::{Action, CATALOGUE_ACTIONS};
use crate::actor::Actor;
use crate::config::{GrantsTable, resolve_agent};
use crate::decide::{RowOutcome, Verdict, authorize};
use crate::grants::{GrantSet, Grants};
use crate::ids::ActorKind;
use crate::ids::{ActorId, AgentName, ChannelId, RepoSlug};
use crate::policy::{Policy, builtin_rules};
use crate::resource::Resource;
use crate::spec::parse_resource_spec;

pub(crate) struct Case {
    pub row: String,
    pub allow: bool,
    pub actor: Actor,
    pub action: Action,
    pub resource: Resource,
    pub why: &'static str,
}

fn axis<T: Ord + Clone>(s: &str, parse: impl Fn(&str) -> T) -> GrantSet<T> {
    match s {
        "all" => GrantSet::All,
        "" => GrantSet::none(),
        list => GrantSet::only(list.split(',').map(parse)),
    }
}

pub(crate) fn grants(actions: &str, channels: &str, repos: &str) -> Grants {
    Grants {
        actions: axis(actions, |a| Action::parse(a).unwrap()),
        channels: axis(channels, |c| ChannelId::parse(c).unwrap()),
        repos: axis(repos, |r| RepoSlug::parse(r).unwrap()),
    }
}

/// An actor built by hand (kind from the id's namespace), holding exactly these grants.
pub(crate) fn actor(id: &str, actions: &str, channels: &str, repos: &str) -> Actor {
    let id = ActorId::parse(id).unwrap();
    Actor {
        kind: ActorKind::of_namespace(id.namespace()),
        id,
        grants: grants(actions, channels, repos),
        on_behalf_of: None,
        memberships: Default::default(),
        groups: Default::default(),
        group_facts: Default::default(),
        outsider: false,
        origin: None,
    }
}

pub(crate) fn resource(spec: &str) -> Resource {
    let doc: toml::Table = toml::from_str("[restrict]\nrepos = [\"acme/payments\"]").unwrap();
    let table = GrantsTable::from_config(&doc, BTreeSet::new()).unwrap();
    parse_resource_spec(spec, &table).unwrap()
}

fn act(s: &str) -> Action {
    Action::parse(s).unwrap()
}

fn case(row: &str, allow: bool, actor: Actor, action: &str, res: &str, why: &'static str) -> Case {
    Case {
        row: row.to_owned(),
        allow,
        actor,
        action: act(action),
        resource: resource(res),
        why,
    }
}

fn all_catalogue_except(a: &Action) -> String {
    let mut others: Vec<String> = CATALOGUE_ACTIONS
        .iter()
        .filter(|x| *x != a)
        .map(|x| x.to_string())
        .collect();
    others.push("trace:read".into());
    others.retain(|x| *x != a.to_string());
    others.join(",")
}

pub(crate) fn cases() -> Vec<Case> {
    let mut c = Vec::new();
    let cmd = "command:id=some.command";

    for a in CATALOGUE_ACTIONS.iter().chain([&Action::TraceRead]) {
        let row = format!("{a} × command");
        let name = a.to_string();
        c.push(case(
            &row,
            true,
            actor("http:t", &name, "", ""),
            &name,
            cmd,
            "holds exactly the action",
        ));
        let others = all_catalogue_except(a);
        c.push(case(
            &row,
            false,
            actor("http:t", &others, "all", "all"),
            &name,
            cmd,
            "holds every other action",
        ));
    }
    let person = "config:write × command (a person)";
    c.push(case(
        person,
        true,
        actor("slack:U1", "", "", ""),
        "config:write",
        cmd,
        "a person has their own scope",
    ));
    c.push(case(
        person,
        true,
        actor("access:alice", "", "", ""),
        "config:write",
        cmd,
        "any user kind",
    ));
    c.push(case(
        person,
        false,
        actor("http:t", "", "", ""),
        "config:write",
        cmd,
        "a credential needs the grant",
    ));
    c.push(case(
        person,
        false,
        actor("schedule:s", "", "", ""),
        "config:write",
        cmd,
        "so does a schedule",
    ));

    let (ch, user_self, user_other, org) = (
        "config-scope:tier=channel,id=slack:C9",
        "config-scope:tier=user,id=slack:U1",
        "config-scope:tier=user,id=slack:U2",
        "config-scope:tier=org",
    );
    let row = "config:write × config-scope{channel}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "config:write", "", ""),
        "config:write",
        ch,
        "membership is not a condition",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "", "slack:C9", ""),
        "config:write",
        ch,
        "membership does not grant",
    ));
    let row = "config:write × config-scope{user} (own scope)";
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "", ""),
        "config:write",
        user_self,
        "own scope",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "", "", ""),
        "config:write",
        user_other,
        "someone else's",
    ));
    let row = "config:write × config-scope{user} (grant)";
    c.push(case(
        row,
        true,
        actor("slack:U1", "config:write", "", ""),
        "config:write",
        user_other,
        "the grant",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "config:read", "all", ""),
        "config:write",
        user_other,
        "read is not write",
    ));
    let row = "config:write × config-scope{org}";
    c.push(case(
        row,
        true,
        actor("access:ops", "config:write", "", ""),
        "config:write",
        org,
        "the grant",
    ));
    c.push(case(
        row,
        false,
        actor("access:ops", "repo:write", "all", "all"),
        "config:write",
        org,
        "other writes",
    ));

    let row = "mcp:write × config-scope{channel}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "config:write", "", ""),
        "mcp:write",
        ch,
        "channel config writers",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "mcp:write", "", ""),
        "mcp:write",
        ch,
        "a person's mcp:write is not enough",
    ));
    let row = "mcp:write × config-scope{channel} (service)";
    c.push(case(
        row,
        true,
        actor("http:t", "mcp:write", "", ""),
        "mcp:write",
        ch,
        "a service with the grant",
    ));
    c.push(case(
        row,
        false,
        actor("http:t", "mcp:read", "", ""),
        "mcp:write",
        ch,
        "read is not write",
    ));
    let row = "mcp:write × config-scope{org}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "repo:write", "", ""),
        "mcp:write",
        org,
        "repo managers",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "config:write,mcp:write", "", ""),
        "mcp:write",
        org,
        "not config writers",
    ));
    let row = "mcp:write × config-scope{org} (service)";
    c.push(case(
        row,
        true,
        actor("mcp:t", "mcp:write", "", ""),
        "mcp:write",
        org,
        "a service with the grant",
    ));
    c.push(case(
        row,
        false,
        actor("schedule:s", "mcp:write", "", ""),
        "mcp:write",
        org,
        "only services",
    ));

    let coding = "agent:name=coding";
    let row = "repo:exec × agent (may run it)";
    c.push(case(
        row,
        true,
        actor("slack:U1", "agent:run:coding", "", ""),
        "repo:exec",
        coding,
        "may run coding",
    ));
    c.push(case(
        row,
        true,
        actor("http:t", "agent:run:*", "", ""),
        "repo:exec",
        coding,
        "every agent",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "agent:run:reviewer", "", ""),
        "repo:exec",
        coding,
        "another agent",
    ));
    let row = "repo:exec × agent (exec grant)";
    c.push(case(
        row,
        true,
        actor("http:t", "repo:exec", "", ""),
        "repo:exec",
        coding,
        "minted with exec",
    ));
    c.push(case(
        row,
        false,
        actor("http:t", "repo:write", "", "all"),
        "repo:exec",
        coding,
        "write never implies exec",
    ));
    let row = "agent:run:<name> × agent";
    c.push(case(
        row,
        true,
        actor("http:t", "agent:run:coding", "", ""),
        "agent:run:coding",
        coding,
        "named",
    ));
    c.push(case(
        row,
        true,
        actor("http:t", "agent:run:*", "", ""),
        "agent:run:coding",
        coding,
        "every agent",
    ));
    c.push(case(
        row,
        false,
        actor("http:t", "repo:exec", "all", "all"),
        "agent:run:coding",
        coding,
        "exec does not run",
    ));

    for a in ["runs:read", "runs:write", "friction:read"] {
        let private_g1 = "run:id=r1,channel=slack:G1,user=slack:U2,visibility=private";
        let public_c1 = "run:id=r2,channel=slack:C1,user=slack:U2,visibility=public";
        let unstamped_c1 = "run:id=r3,channel=slack:C1,user=slack:U2";
        let dm_u2 = "run:id=r4,channel=slack:D1,user=slack:U2,visibility=dm";
        let member = format!("{a} × run (member)");
        c.push(case(
            &member,
            true,
            actor("slack:U1", a, "slack:G1", ""),
            a,
            private_g1,
            "granted the channel",
        ));
        c.push(case(
            &member,
            true,
            actor("slack:U1", a, "", ""),
            a,
            public_c1,
            "public half",
        ));
        c.push(case(
            &member,
            false,
            actor("slack:U1", a, "slack:G2", ""),
            a,
            private_g1,
            "another channel",
        ));
        c.push(case(
            &member,
            false,
            actor("slack:U1", a, "", ""),
            a,
            unstamped_c1,
            "unstamped is never public",
        ));
        c.push(case(
            &member,
            false,
            actor("slack:U1", "", "all", "all"),
            a,
            public_c1,
            "public makes the member, not the grant",
        ));
        let fleet = format!("{a} × run (all channels)");
        c.push(case(
            &fleet,
            true,
            actor("access:ops", a, "all", ""),
            a,
            private_g1,
            "the fleet",
        ));
        c.push(case(
            &fleet,
            false,
            actor("access:ops", a, "slack:G2", ""),
            a,
            private_g1,
            "an operator is membership-bound",
        ));
        let own = format!("{a} × run (own run)");
        c.push(case(
            &own,
            true,
            actor("slack:U2", a, "", ""),
            a,
            dm_u2,
            "their own DM run",
        ));
        let table = GrantsTable::empty(BTreeSet::new());
        let agent = resolve_agent(
            &AgentName::parse("coding").unwrap(),
            Some(actor("slack:U2", a, "", "")),
            &table,
        );
        c.push(case(
            &own,
            true,
            agent,
            a,
            dm_u2,
            "an agent reads its principal's run",
        ));
        c.push(case(
            &own,
            false,
            actor("slack:U1", a, "", ""),
            a,
            dm_u2,
            "someone else's DM",
        ));
    }

    let (payments, web) = ("repo:slug=acme/payments", "repo:slug=acme/web");
    let row = "repo:use × repo (owner)";
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "", "acme/payments"),
        "repo:use",
        payments,
        "named",
    ));
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "", "all"),
        "repo:use",
        payments,
        "all repos",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "repo:write", "all", "acme/web"),
        "repo:use",
        payments,
        "restricted",
    ));
    let row = "repo:use × repo (unrestricted)";
    c.push(case(
        row,
        true,
        actor("http:t", "", "", ""),
        "repo:use",
        web,
        "open to anyone",
    ));
    c.push(case(
        row,
        false,
        actor("http:t", "", "", ""),
        "repo:use",
        payments,
        "restricted",
    ));

    let row = "memory:write × memory-scope{user}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "", ""),
        "memory:write",
        "memory-scope:kind=user,key=slack:U1",
        "own",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "all", "all", "all"),
        "memory:write",
        "memory-scope:kind=user,key=slack:U2",
        "another person's",
    ));
    let row = "memory:write × memory-scope{channel}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "slack:G1", ""),
        "memory:write",
        "memory-scope:kind=channel,key=slack:G1",
        "member",
    ));
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "all", ""),
        "memory:write",
        "memory-scope:kind=channel,key=slack:G1",
        "all channels",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "memory:write", "", ""),
        "memory:write",
        "memory-scope:kind=channel,key=slack:C1,origin=public",
        "a public origin never makes a memory scope public",
    ));
    let row = "memory:write × memory-scope{repo}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "", "acme/web"),
        "memory:write",
        "memory-scope:kind=repo,key=acme/web",
        "owner",
    ));
    c.push(case(
        row,
        false,
        actor("slack:U1", "all", "all", "acme/x"),
        "memory:write",
        "memory-scope:kind=repo,key=acme/web",
        "not owner",
    ));
    let row = "memory:write × memory-scope{org}";
    c.push(case(
        row,
        true,
        actor("slack:U1", "", "", ""),
        "memory:write",
        "memory-scope:kind=org,origin=public",
        "public origin",
    ));
    c.push(case(
        row,
        true,
        actor("http:t", "", "", ""),
        "memory:write",
        "memory-scope:kind=org,origin=machine",
        "machine origin",
    ));
    for (origin, why) in [
        ("dm", "a DM's facts are the person's"),
        ("private", "private narrows"),
        ("unknown", "unstamped never writes org"),
    ] {
        let spec = format!("memory-scope:kind=org,origin={origin}");
        c.push(case(
            row,
            false,
            actor("slack:U1", "all", "all", "all"),
            "memory:write",
            &spec,
            why,
        ));
    }
    for kind in ["org", "channel", "repo"] {
        let row = format!("repo:write × memory-scope{{{kind}}}");
        let key = match kind {
            "org" => "org",
            "channel" => "slack:C1",
            _ => "acme/web",
        };
        let spec = format!("memory-scope:kind={kind},key={key}");
        c.push(case(
            &row,
            true,
            actor("slack:U1", "repo:write", "", ""),
            "repo:write",
            &spec,
            "forgetting shared records",
        ));
        c.push(case(
            &row,
            false,
            actor("slack:U1", "memory:write", "all", "all"),
            "repo:write",
            &spec,
            "memory:write is not repo:write",
        ));
    }
    c
}

#[test]
fn every_row_has_a_positive_and_a_negative_case_and_every_case_names_a_row() {
    let rows: BTreeSet<String> = builtin_rules().into_iter().map(|r| r.id).collect();
    let cases = cases();
    for case in &cases {
        assert!(
            rows.contains(&case.row),
            "case names no row: {:?} ({})",
            case.row,
            case.why
        );
    }
    for row in &rows {
        let has = |allow: bool| cases.iter().any(|c| &c.row == row && c.allow == allow);
        assert!(has(true), "row {row:?} has no positive case");
        assert!(has(false), "row {row:?} has no negative case");
    }
}

#[test]
fn each_case_is_decided_by_its_row_and_by_the_table() {
    let policy = Policy::builtin();
    assert!(
        !policy.rules().is_empty(),
        "the built-in table failed validation"
    );
    for case in cases() {
        let label = format!(
            "{} [{}] {}",
            case.row,
            if case.allow { "allow" } else { "deny" },
            case.why
        );
        let explained = policy.explain(&case.actor, &case.action, &case.resource);
        let trace = explained
            .rows
            .iter()
            .find(|t| t.rule.id == case.row)
            .unwrap_or_else(|| panic!("{label}: the row was not tried for this request"));
        let verdict = authorize(&case.actor, &case.action, &case.resource);
        assert_eq!(
            verdict, explained.verdict,
            "{label}: explain and authorize disagree"
        );
        if case.allow {
            assert_eq!(trace.outcome, RowOutcome::Allowed, "{label}");
            assert_eq!(verdict, Verdict::Allow, "{label}");
        } else {
            assert_ne!(trace.outcome, RowOutcome::Allowed, "{label}");
            assert!(
                matches!(verdict, Verdict::Deny(_)),
                "{label}: the table allowed it"
            );
        }
    }
}
