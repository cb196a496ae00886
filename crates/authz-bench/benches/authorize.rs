//! `authorize` side by side with `cedar-policy` deciding an equivalent policy on the same
//! requests, in one run. Four shapes of a run read:
//!
//! - `member_of_50`: an operator granted 50 channels reads a private run in the 50th (allow);
//! - `admin`: an actor holding all on every axis reads a private run (allow);
//! - `slack_user_public`: a Slack user whose `slack:*` surface entry grants runs:read reads a
//!   public run (allow);
//! - `token_denied`: a token pinned to http:ops reads a run in http:billing (deny);
//! - `group_member`: a Slack user whose runs:read comes from a declared group and whose
//!   channel comes from a Slack user group the surface learned it is in reads a private run
//!   there (allow). Groups are resolved into the actor's grants, so the decision reads them
//!   as it reads any grant.
//!
//! Before timing, every shape's Cedar decision is checked against `authorize`'s, so the two
//! engines are compared on the same answers. Also timed: `predicate_for` for the same actors.

use std::str::FromStr;

use authz_core::{
    Action, Actor, GrantsTable, GroupFacts, GroupId, Resource, ResourceType, RunFacts, authorize,
    predicate_for,
};
use cedar_policy::{Authorizer, Context, Decision, Entities, EntityUid, PolicySet, Request};

fn main() {
    for shape in Shape::ALL {
        let f = fixture(shape);
        let ours = authorize(&f.actor, &f.action, &f.resource).is_allow();
        let theirs = CEDAR.with(|c| c.decide(&f.cedar_request));
        assert_eq!(ours, theirs, "{shape:?}: authorize and Cedar disagree");
        assert_eq!(ours, shape.allows(), "{shape:?}: unexpected decision");
    }
    divan::main();
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    MemberOf50,
    Admin,
    SlackUserPublic,
    TokenDenied,
    GroupMember,
}

impl Shape {
    const ALL: [Shape; 5] = [Shape::MemberOf50, Shape::Admin, Shape::SlackUserPublic, Shape::TokenDenied, Shape::GroupMember];

    fn allows(self) -> bool {
        !matches!(self, Shape::TokenDenied)
    }
}

struct Fixture {
    actor: Actor,
    action: Action,
    resource: Resource,
    cedar_request: Request,
}

const CONFIG: &str = r#"
[grants."slack:U1"]
actions = "all"
channels = "all"
repos = "all"

[grants."slack:*"]
actions = ["runs:read"]

[grants."http:ops-bot"]
actions = ["runs:read"]
channels = ["http:ops"]

[groups]
oncall = ["slack:U8"]

[grants."group:oncall"]
actions = ["runs:read"]

[grants."group:slack:S0ONCALL"]
channels = ["slack:G049"]
"#;

/// `who` as its surface resolves it: slack:U8 with the Slack user group the directory says
/// it is in.
fn resolved(t: &GrantsTable, who: &str) -> Actor {
    let mut facts = GroupFacts::default();
    if who == "slack:U8" {
        facts.member_of.insert(GroupId::parse("group:slack:S0ONCALL").expect("group id"));
    }
    t.resolve(who.parse().expect("actor id"), facts, false)
}

fn operator_config() -> String {
    let channels: Vec<String> = (0..50).map(|i| format!("\"slack:G{i:03}\"")).collect();
    format!(
        "{CONFIG}\n[grants.\"access:operator\"]\nactions = [\"runs:read\"]\nchannels = [{}]\n",
        channels.join(", ")
    )
}

fn table() -> GrantsTable {
    let doc: toml::Table = toml::from_str(&operator_config()).expect("bench config parses");
    GrantsTable::from_config(&doc, Default::default()).expect("bench config is valid")
}

fn run(id: &str, channel: &str, user: &str, visibility: &str) -> Resource {
    Resource::Run(RunFacts {
        id: id.parse().expect("run id"),
        channel_id: channel.parse().expect("channel id"),
        user_id: user.parse().expect("user id"),
        repo: None,
        channel_visibility: authz_core::ChannelVisibility::parse(visibility).expect("visibility"),
    })
}

fn fixture(shape: Shape) -> Fixture {
    let t = table();
    let (who, resource, run_id) = match shape {
        Shape::MemberOf50 => ("access:operator", run("r1", "slack:G049", "slack:U2", "private"), "r1"),
        Shape::Admin => ("slack:U1", run("r1", "slack:G049", "slack:U2", "private"), "r1"),
        Shape::SlackUserPublic => ("slack:U7", run("r2", "slack:C1", "slack:U2", "public"), "r2"),
        Shape::TokenDenied => ("http:ops-bot", run("r3", "http:billing", "http:billing", "machine"), "r3"),
        Shape::GroupMember => ("slack:U8", run("r1", "slack:G049", "slack:U2", "private"), "r1"),
    };
    let actor = resolved(&t, who);
    let principal = cedar_uid(actor_type(who), who);
    let request = Request::new(
        principal,
        cedar_uid("Action", "runs:read"),
        cedar_uid("Run", run_id),
        Context::empty(),
        None,
    )
    .expect("cedar request");
    Fixture {
        actor,
        action: Action::parse("runs:read").expect("action"),
        resource,
        cedar_request: request,
    }
}

fn actor_type(id: &str) -> &'static str {
    if id.starts_with("http:") { "Service" } else { "User" }
}

fn cedar_uid(ty: &str, id: &str) -> EntityUid {
    EntityUid::from_str(&format!("{ty}::{id:?}")).expect("cedar uid")
}

/// The three runs:read rows, written as Cedar: grant ∧ (member ∨ public), grant ∧ all
/// channels, grant ∧ own run. `all` actions/channels are booleans on the principal.
const CEDAR_POLICY: &str = r#"
permit(principal, action == Action::"runs:read", resource is Run)
when {
  (principal.all_actions || principal.actions.contains("runs:read")) &&
  (principal.channels.contains(resource.channel) || resource.visibility == "public")
};
permit(principal, action == Action::"runs:read", resource is Run)
when {
  (principal.all_actions || principal.actions.contains("runs:read")) && principal.all_channels
};
permit(principal, action == Action::"runs:read", resource is Run)
when {
  (principal.all_actions || principal.actions.contains("runs:read")) && resource.user == principal
};
"#;

struct Cedar {
    policies: PolicySet,
    entities: Entities,
    authorizer: Authorizer,
}

impl Cedar {
    fn decide(&self, request: &Request) -> bool {
        self.authorizer
            .is_authorized(request, &self.policies, &self.entities)
            .decision()
            == Decision::Allow
    }
}

/// Entities equivalent to `table()`: each principal's effective grants, and the three runs.
fn cedar_entities() -> Entities {
    let t = table();
    let principal = |id: &str| {
        let g = resolved(&t, id).grants;
        let actions: Vec<String> = g.actions.items().map(|s| s.iter().map(ToString::to_string).collect()).unwrap_or_default();
        let channels: Vec<String> = g.channels.items().map(|s| s.iter().map(ToString::to_string).collect()).unwrap_or_default();
        format!(
            r#"{{"uid": {{"type": "{}", "id": "{id}"}}, "parents": [], "attrs": {{"actions": {actions:?}, "all_actions": {}, "channels": {channels:?}, "all_channels": {}}}}}"#,
            actor_type(id),
            g.actions.is_all(),
            g.channels.is_all(),
        )
    };
    let run = |id: &str, channel: &str, user: &str, vis: &str| {
        format!(
            r#"{{"uid": {{"type": "Run", "id": "{id}"}}, "parents": [], "attrs": {{"channel": "{channel}", "visibility": "{vis}", "user": {{"__entity": {{"type": "{}", "id": "{user}"}}}}}}}}"#,
            actor_type(user)
        )
    };
    let all = [
        principal("access:operator"),
        principal("slack:U1"),
        principal("slack:U7"),
        principal("http:ops-bot"),
        principal("slack:U8"),
        run("r1", "slack:G049", "slack:U2", "private"),
        run("r2", "slack:C1", "slack:U2", "public"),
        run("r3", "http:billing", "http:billing", "machine"),
    ];
    Entities::from_json_str(&format!("[{}]", all.join(",")), None).expect("cedar entities")
}

thread_local! {
    static CEDAR: Cedar = Cedar {
        policies: PolicySet::from_str(CEDAR_POLICY).expect("cedar policy parses"),
        entities: cedar_entities(),
        authorizer: Authorizer::new(),
    };
}

#[divan::bench(args = Shape::ALL)]
fn authorize_switchboard(bencher: divan::Bencher, shape: Shape) {
    let f = fixture(shape);
    bencher.bench_local(|| authorize(divan::black_box(&f.actor), divan::black_box(&f.action), divan::black_box(&f.resource)));
}

#[divan::bench(args = Shape::ALL)]
fn authorize_cedar(bencher: divan::Bencher, shape: Shape) {
    let f = fixture(shape);
    CEDAR.with(|c| bencher.bench_local(|| c.decide(divan::black_box(&f.cedar_request))));
}

#[divan::bench(args = Shape::ALL)]
fn predicate_for_runs_read(bencher: divan::Bencher, shape: Shape) {
    let f = fixture(shape);
    bencher.bench_local(|| predicate_for(divan::black_box(&f.actor), divan::black_box(&f.action), ResourceType::Run));
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Shape::MemberOf50 => "member_of_50",
            Shape::Admin => "admin",
            Shape::SlackUserPublic => "slack_user_public",
            Shape::TokenDenied => "token_denied",
            Shape::GroupMember => "group_member",
        })
    }
}
