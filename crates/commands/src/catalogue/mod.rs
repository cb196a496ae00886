//! The command catalogue: every command, defined once.

mod config;
pub(crate) mod diff;
mod friction;
mod memory;
mod repo;
pub(crate) mod runs;
mod system;

pub use config::MCP_PREFIX;

use authz_core::{Action, AgentName, CommandId, Resource};
use serde_json::Value;
use store::StoreError;

use crate::args::{ArgSpec, ArgsSchema};
use crate::{
    Caller, Command, DenyShape, Handler, RawInput, Reply, ReplyKind, ResourceFn, reply_texts,
};

/// A command row. Ids and actions are literals of the catalogue; a typo fails the catalogue
/// test (every id parses, every action has a policy row), so they are checked once there.
fn def(
    id: &str,
    summary: &'static str,
    action: &str,
    deny: DenyShape,
    args: Vec<ArgSpec>,
    handler: Handler,
) -> Option<Command> {
    Some(Command {
        id: CommandId::parse(id).ok()?,
        summary,
        action: Action::parse(action).ok()?,
        resource: None,
        deny,
        args: ArgsSchema::new(args),
        handler,
    })
}

fn with_resource(c: Option<Command>, resource: ResourceFn) -> Option<Command> {
    c.map(|mut c| {
        c.resource = Some(resource);
        c
    })
}

/// The agent `repo test|build` admit on and run ([`crate::CODING_AGENT`]).
pub(crate) fn coding_agent_name() -> Option<AgentName> {
    AgentName::parse(crate::CODING_AGENT).ok()
}

/// `repo test|build` are admitted on the coding agent: `agent:run:coding` or `repo:exec`.
fn coding_agent(_: &RawInput, _: &Caller) -> Resource {
    match coding_agent_name() {
        Some(name) => Resource::Agent { name },
        // A literal that parses; were it ever not to, a resource no `repo:exec` row answers
        // for denies everyone (fail closed).
        None => Resource::ConfigScope(authz_core::ConfigTier::Org),
    }
}

pub(crate) fn store_failed(e: StoreError) -> Reply {
    tracing::warn!(target: "store", error = %e.token(), "a command's store call failed");
    let kind = if e.is_transient() {
        ReplyKind::Unavailable
    } else {
        ReplyKind::Failed
    };
    Reply::of(kind, reply_texts::store_failed())
}

/// `object` with `items` moved in under `key`. (`json!` serializes every value it is handed
/// into a new one, so a list of already-built values put inside it is copied whole: for a
/// page of runs, most of the cost of its JSON.)
pub(crate) fn with_list(mut object: Value, key: &str, items: Vec<Value>) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.insert(key.to_owned(), Value::Array(items));
    }
    object
}

pub(crate) fn ok(text: String, data: Value) -> Reply {
    Reply::ok(text, data)
}

/// A relative time for humans: `12s ago`, `5m ago`, `3h ago`, `2d ago`.
pub(crate) fn ago(now: store::Timestamp, then: store::Timestamp) -> String {
    let s = (now.micros() - then.micros()).max(0) / 1_000_000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// Every command, in the order `help` lists them.
pub fn all() -> Vec<Command> {
    use DenyShape::{NotFound, Unauthorized};
    let run_id = || ArgSpec::positional("id", "run-id", "the run's id");
    let tier = || {
        vec![
            ArgSpec::value(
                "channel",
                "CHANNEL",
                "the channel tier (default: where you are asking)",
            )
            .in_group("tier"),
            ArgSpec::flag("user", "your own user tier").in_group("tier"),
            ArgSpec::flag("org", "the org tier").in_group("tier"),
        ]
    };
    let with = |mut head: Vec<ArgSpec>, tail: Vec<ArgSpec>| {
        head.extend(tail);
        head
    };
    let channel_or_org = || {
        vec![
            ArgSpec::value(
                "channel",
                "CHANNEL",
                "the channel tier (default: where you are asking)",
            )
            .in_group("tier"),
            ArgSpec::flag("org", "the org tier").in_group("tier"),
        ]
    };
    let repo_slug = || ArgSpec::positional("repo", "owner/name", "the repository");
    vec![
        def(
            "help",
            "the commands you can use",
            "help:read",
            Unauthorized,
            vec![],
            system::help,
        ),
        def(
            "status",
            "version, uptime, store and the live runs you can see",
            "status:read",
            Unauthorized,
            vec![],
            system::status,
        ),
        def(
            "runs.list",
            "a page of runs you can see, newest first",
            "runs:read",
            Unauthorized,
            vec![
                ArgSpec::value("status", "STATUS", "live (default), finished or all")
                    .choices(&["live", "finished", "all"]),
                ArgSpec::value("limit", "N", "runs per page (default 20)").int(1, 100),
                ArgSpec::value(
                    "before",
                    "CURSOR",
                    "continue after the page that gave this cursor",
                ),
            ],
            runs::list,
        ),
        def(
            "runs.get",
            "one run: request, status, answer",
            "runs:read",
            NotFound("run"),
            vec![run_id()],
            runs::get,
        ),
        def(
            "runs.events",
            "a run's events, in order",
            "runs:read",
            NotFound("run"),
            vec![run_id()],
            runs::events,
        ),
        def(
            "runs.friction",
            "a run's friction",
            "runs:read",
            NotFound("run"),
            vec![run_id()],
            runs::friction,
        ),
        def(
            "runs.diff",
            "what a run changed in its repo: files, kept commits, the diff",
            "runs:read",
            NotFound("run"),
            vec![
                run_id(),
                ArgSpec::value(
                    "limit",
                    "N",
                    "lines of diff to show (default 200, at most 20000)",
                )
                .int(1, crate::run_changes::MAX_DIFF_LINES as i64),
            ],
            diff::diff,
        ),
        def(
            "runs.stop",
            "stop a live run",
            "runs:write",
            NotFound("run"),
            vec![run_id()],
            runs::stop,
        ),
        def(
            "friction.report",
            "friction patterns over the runs you can see",
            "friction:read",
            Unauthorized,
            vec![ArgSpec::value("days", "N", "how far back (default 7)").int(1, 90)],
            friction::report,
        ),
        def(
            "friction.propose",
            "record a proposed fix for a friction pattern",
            "friction:write",
            Unauthorized,
            vec![ArgSpec::rest("text", "proposal", "the proposed fix")],
            friction::propose,
        ),
        def(
            "config.get",
            "read a config value (your user, this channel, then the org)",
            "config:read",
            Unauthorized,
            with(
                vec![ArgSpec::positional("key", "key", "the config key")],
                tier(),
            ),
            config::get,
        ),
        def(
            "config.set",
            "set a config value on a tier",
            "config:write",
            Unauthorized,
            with(
                vec![
                    ArgSpec::positional("key", "key", "the config key"),
                    ArgSpec::positional("value", "value", "the value"),
                ],
                tier(),
            ),
            config::set,
        ),
        def(
            "repo.list",
            "the configured repos, marked by whether you may use them",
            "repo:read",
            Unauthorized,
            vec![],
            repo::list,
        ),
        def(
            "repo.add",
            "configure a repo (a local path or a git URL)",
            "repo:write",
            Unauthorized,
            vec![
                repo_slug(),
                ArgSpec::value("path", "PATH", "a local checkout").in_group("source"),
                ArgSpec::value("url", "URL", "a git URL to clone").in_group("source"),
            ],
            repo::add,
        ),
        def(
            "repo.remove",
            "remove a configured repo",
            "repo:write",
            Unauthorized,
            vec![repo_slug()],
            repo::remove,
        ),
        with_resource(
            def(
                "repo.test",
                "run the repo's tests with the coding agent",
                "repo:exec",
                Unauthorized,
                vec![repo_slug()],
                repo::test,
            ),
            coding_agent,
        ),
        with_resource(
            def(
                "repo.build",
                "build the repo with the coding agent",
                "repo:exec",
                Unauthorized,
                vec![repo_slug()],
                repo::build,
            ),
            coding_agent,
        ),
        def(
            "memory.list",
            "memory records of the scopes this request names",
            "memory:read",
            Unauthorized,
            vec![
                ArgSpec::value("scope", "SCOPE", "only this scope")
                    .choices(&["org", "user", "channel", "repo"]),
                ArgSpec::value("repo", "owner/name", "the repo scope to include"),
            ],
            memory::list,
        ),
        def(
            "memory.forget",
            "forget a memory record",
            "memory:write",
            NotFound("memory record"),
            vec![ArgSpec::positional("id", "record-id", "the record's id")],
            memory::forget,
        ),
        def(
            "mcp.list",
            "MCP servers on the tiers you can see",
            "mcp:read",
            Unauthorized,
            vec![],
            config::mcp_list,
        ),
        def(
            "mcp.add",
            "add an MCP server on a channel or the org",
            "mcp:write",
            Unauthorized,
            with(
                vec![
                    ArgSpec::positional("name", "name", "the server's name"),
                    ArgSpec::positional("url", "url", "its URL"),
                ],
                channel_or_org(),
            ),
            config::mcp_add,
        ),
        def(
            "mcp.remove",
            "remove an MCP server",
            "mcp:write",
            Unauthorized,
            with(
                vec![ArgSpec::positional("name", "name", "the server's name")],
                channel_or_org(),
            ),
            config::mcp_remove,
        ),
        def(
            "schedule.list",
            "the schedules: cron, last result",
            "schedule:read",
            Unauthorized,
            vec![],
            system::schedule_list,
        ),
        def(
            "schedule.fire",
            "fire a schedule now, as its own actor",
            "schedule:exec",
            Unauthorized,
            vec![ArgSpec::positional("name", "name", "the schedule")],
            system::schedule_fire,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}
