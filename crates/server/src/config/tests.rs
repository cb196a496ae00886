//! The config file's faults, each named with file, line, column and key, and what loads: the
//! tests that cross sections (each section's own are at the end of its file), and `ok` and
//! `err`, which they share.

use std::time::Duration;

use super::*;

pub(crate) fn err(text: &str) -> String {
    parse(Source::File("t.toml".into()), text)
        .unwrap_err()
        .to_string()
}

pub(crate) fn ok(text: &str) -> LoadedConfig {
    parse(Source::File("t.toml".into()), text).unwrap()
}

#[test]
fn the_embedded_default_and_the_example_load() {
    let default = ok(EMBEDDED_DEFAULT);
    assert_eq!(
        default.default_agent.as_ref().map(|a| a.as_str()),
        Some("echo")
    );
    assert_eq!(default.server.listen.to_string(), "127.0.0.1:8080");
    // The default's relative file, made absolute under the working directory as it loaded.
    let start = std::env::current_dir().unwrap();
    assert_eq!(
        default.store.url,
        store::StoreUrl::parse(DEFAULT_STORE_URL)
            .unwrap()
            .absolute_in(&start)
    );
    let example = ok(include_str!("../../../../config/switchboard.example.toml"));
    assert!(
        !example.table.entries().is_empty(),
        "the example shows grants"
    );
    assert!(!example.table.restrict().agents.is_empty(), "and restrict");
    assert_eq!(example.server.replica_id.unwrap().as_str(), "switchboard-1");
    let tools = &example.tool_policy;
    assert_eq!(
        (tools.grants.len(), tools.org_rules.len()),
        (7, 2),
        "and the broker's"
    );
    assert_eq!(tools.approval_timeout, Duration::from_secs(300));
    let write = tools
        .grants
        .iter()
        .find(|g| g.tool == "write_file" && g.agent.as_deref() == Some("local"))
        .unwrap();
    let resolved = write.resolve(std::path::Path::new("/srv/ws")).unwrap();
    assert_eq!(resolved.paths, ["/srv/ws/docs"]);
    assert!(resolved.expires.is_some());
    assert!(default.tool_policy.grants.is_empty() && default.tool_policy.org_rules.is_empty());
    // The example writes out the `[agents]` limits' defaults; both read as the dispatcher's.
    for limits in [&default.limits, &example.limits] {
        assert_eq!(
            (
                limits.max_concurrent,
                limits.max_per_actor,
                limits.channel_directory_timeout
            ),
            (
                dispatch::DEFAULT_MAX_CONCURRENT,
                dispatch::DEFAULT_MAX_PER_ACTOR,
                dispatch::DEFAULT_CHANNEL_DIRECTORY_TIMEOUT
            )
        );
    }
}

/// Every fault: the file, the line and column of the key or value at fault, the dotted key,
/// and what to write instead. One row per fault, in the order a reader meets the sections.
#[test]
fn every_fault_names_file_line_column_key_and_fix() {
    let cases: &[(&str, &str)] = &[
        // Syntax and the top level.
        ("[grants\nx = 1", "t.toml:1:8: not valid TOML: "),
        (
            "[serverr]\nlisten = 1\n",
            "t.toml:1:2: serverr: unknown field `serverr`, expected one of `server`, `store`",
        ),
        (
            "[server]\n\n[permissions]\nx = 1\n",
            "t.toml:3:2: permissions: `permissions` is not a configuration key; grants, groups and restrict are the only authorization keys",
        ),
        (
            "admins = [\"slack:U1\"]",
            "t.toml:1:1: admins: `admins` is not a configuration key",
        ),
        (
            "store = \"sqlite://x\"",
            "t.toml:1:9: store: invalid type: string \"sqlite://x\", expected struct StoreSection",
        ),
        // [server]
        (
            "[server]\nlisten = \"localhost\"",
            "t.toml:2:10: server.listen: \"localhost\" is not an address; use host:port with an IP, like \"127.0.0.1:8080\"",
        ),
        (
            "[server]\nport = 1",
            "t.toml:2:1: server.port: unknown field `port`, expected one of `listen`, `replica_id`, `data_dir`",
        ),
        (
            "[server]\nreplica_id = \"web 1\"",
            "t.toml:2:14: server.replica_id: replica id \"web 1\": use 1-128 letters, digits",
        ),
        (
            "[server]\nshutdown_grace_seconds = 0",
            "t.toml:2:26: server.shutdown_grace_seconds: must be a whole number above 0",
        ),
        (
            "[server]\nheartbeat_seconds = 30\nlease_seconds = 30",
            "t.toml:3:17: server.lease_seconds: must be longer than heartbeat_seconds",
        ),
        (
            "[server]\nheartbeat_seconds = 60",
            "t.toml:2:1: server.heartbeat_seconds: must be shorter than lease_seconds",
        ),
        // [store]
        (
            "[store]\nurl = \"mysql://u:pw@x\"",
            "t.toml:2:7: store.url: must be sqlite://path/to/switchboard.db, postgres://user@host/db or memory:",
        ),
        (
            "[store]\nurl = 5",
            "t.toml:2:7: store.url: invalid type: integer `5`, expected a string",
        ),
        (
            "[store]\npath = \"x.db\"",
            "t.toml:2:1: store.path: unknown field `path`, expected one of `url`, `schema`, `max_connections`",
        ),
        (
            "[store]\nurl = \"sqlite://x.db\"\nschema = \"sb\"",
            "t.toml:3:10: store.schema: only a postgres:// store has schemas",
        ),
        // [ingress]
        (
            "[ingress]\ntokens = \"x\"",
            "t.toml:2:1: ingress.tokens: unknown field `tokens`, expected `tokens_file` or `max_body_bytes`",
        ),
        (
            "[ingress]\nmax_body_bytes = -1",
            "t.toml:2:18: ingress.max_body_bytes: must be a whole number above 0",
        ),
        // [agents]
        (
            "agents = 3",
            "t.toml:1:10: agents: invalid type: integer `3`, expected a table of settings and [agents.<name>] tables",
        ),
        (
            "[agents]\ncoding = \"x\"",
            "t.toml:2:10: agents.coding: invalid type: string \"x\", expected an [agents.<name>] table (the settings of [agents] are default, max_concurrent",
        ),
        (
            "[agents]\nmax_concurent = 3",
            "t.toml:2:17: agents.max_concurent: invalid type: integer `3`, expected an [agents.<name>] table",
        ),
        (
            "[agents]\ndefault = \"ghost\"",
            "t.toml:2:11: agents.default: `ghost` is not a declared agent; declare [agents.ghost] or name one that is",
        ),
        (
            "[agents]\ndefault = 1",
            "t.toml:2:11: agents.default: invalid type: integer `1`, expected a string",
        ),
        (
            "[agents.\"bad name\"]",
            "t.toml:1:2: agents.\"bad name\": \"bad name\" is not a valid agent name",
        ),
        (
            "[agents.a]\nbackend = \"gpt\"",
            "t.toml:2:11: agents.a.backend: unknown variant `gpt`, expected one of `echo`, `command`, `claude-code`, `openai`",
        ),
        (
            "[agents.a]\nbackend = \"command\"",
            "t.toml:1:9: agents.a.command: is required by the command back end, like command = [\"claude\", \"-p\"]",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\" \"]",
            "t.toml:3:11: agents.a.command: name the program and its arguments",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\"x\"]\nrequest_via = \"env\"",
            "t.toml:4:15: agents.a.request_via: unknown variant `env`, expected `stdin` or `argument`",
        ),
        (
            "[agents.a]\nbackend = \"echo\"\nmodel = \"m\"",
            "t.toml:3:9: agents.a.model: `model` is not a setting of the echo back end; it takes behaviour, delay_ms",
        ),
        (
            "[agents.a]\nbackend = \"openai\"\nmodel = \"m\"",
            "t.toml:1:9: agents.a.base_url: is required by the openai back end, like base_url = \"https://api.openai.com/v1\"",
        ),
        (
            "[agents.a]\nbackend = \"openai\"\nbase_url = \"http://x\"",
            "t.toml:1:9: agents.a.model: is required by the openai back end",
        ),
        (
            "[agents.a]\ntimeout = 3",
            "t.toml:2:1: agents.a.timeout: unknown field `timeout`, expected one of `backend`, `timeout_seconds`",
        ),
        (
            "[agents.a]\nbehaviour = \"explode\"",
            "t.toml:2:13: agents.a.behaviour: unknown variant `explode`, expected one of `answer`, `fail`, `stall`",
        ),
        (
            "[agents.a]\ndelay_ms = -5",
            "t.toml:2:12: agents.a.delay_ms: must be a whole number, 0 or more",
        ),
        (
            "[agents.a]\nsandbox = true",
            "t.toml:2:11: agents.a.sandbox: `sandbox` is not a setting of the echo back end",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\"x\"]\nsandbox = \"yes\"",
            "t.toml:4:11: agents.a.sandbox: invalid type: string \"yes\", expected a boolean",
        ),
        (
            "[agents.a]\nsandbox_bind = [\"/x\"]",
            "t.toml:2:16: agents.a.sandbox_bind: `sandbox_bind` is not a setting of the echo back end",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\"x\"]\nsandbox_bind = [\".claude\"]",
            "t.toml:4:17: agents.a.sandbox_bind: `.claude` must be an absolute path or one under ~/",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\"x\"]\nsandbox_read_only = [\"/opt\", \"~/a/../../etc\"]",
            "t.toml:4:30: agents.a.sandbox_read_only: `~/a/../../etc` must be an absolute path or one under ~/, without `..`",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\"x\"]\nsandbox_bind = [\"~/\"]",
            "t.toml:4:17: agents.a.sandbox_bind: `~/` must be",
        ),
        (
            "[agents.a]\nbackend = \"command\"\ncommand = [\"x\"]\nsandbox_bind = \"~/.claude\"",
            "t.toml:4:16: agents.a.sandbox_bind: invalid type: string \"~/.claude\", expected a sequence",
        ),
        (
            "[agents.a]\nkind = \"Main\"",
            "t.toml:2:8: agents.a.kind: an agent kind is one name of [a-z0-9_-]",
        ),
        (
            "[agents.a]\nkind = \"reviewer.*\"",
            "t.toml:2:8: agents.a.kind: an agent kind is one name of [a-z0-9_-]",
        ),
        (
            "[agents.a]\nparent = \"ghost\"",
            "t.toml:2:10: agents.a.parent: names ghost, which is not a declared agent; declare [agents.ghost] or remove parent",
        ),
        (
            "[agents.a]\nparent = \"a\"",
            "t.toml:2:10: agents.a.parent: an agent cannot be its own parent",
        ),
        (
            "[agents.a]\nparent = \"b\"\n[agents.b]\nparent = \"a\"",
            "t.toml:2:10: agents.a.parent: agent a's parents lead back to a: parents cannot form a cycle",
        ),
        (
            "[agents.a]\nparent = \"Bad Name\"",
            "t.toml:2:10: agents.a.parent: ",
        ),
        // [[schedules]]
        (
            "[[schedules]]\nname = \"n\"\ncron = \"61 * * * *\"\ncommand = \"help\"",
            "t.toml:3:8: schedules[0].cron: schedule `n`: `61 * * * *` is not a cron expression: ",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncron = \"0 9 * * * *\"\ncommand = \"help\"",
            "t.toml:3:8: schedules[0].cron: schedule `n`: `0 9 * * * *` is not a cron expression: ",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncron = \"0 9 * * *\"\ntime_zone = \"Mars/Olympus\"\ncommand = \"help\"",
            "t.toml:4:13: schedules[0].time_zone: schedule `n`: `Mars/Olympus` is not an IANA time zone",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncron = \"0 9 * * *\"\nagent = \"ghost\"\nprompt = \"p\"",
            "t.toml:4:9: schedules[0].agent: `ghost` is not a declared agent; declare [agents.ghost] or name one that is",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncron = \"0 9 * * *\"\nagent = \"echo\"\n[agents.echo]",
            "t.toml:1:1: schedules[0]: schedule `n` runs either `command = \"…\"` or `agent = \"…\"` with `prompt = \"…\"`, exactly one of them",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncron = \"0 9 * * *\"\ncommand = \"help\"\nprompt = \"p\"",
            "t.toml:1:1: schedules[0]: schedule `n` runs either",
        ),
        (
            "[[schedules]]\nname = \"self-improvement\"\ncron = \"0 9 * * *\"\ncommand = \"help\"",
            "t.toml:2:8: schedules[0].name: `self-improvement` is already a schedule",
        ),
        (
            "[[schedules]]\nname = \"a\"\ncron = \"0 9 * * *\"\ncommand = \"help\"\n[[schedules]]\nname = \"a\"\ncron = \"0 9 * * *\"\ncommand = \"help\"",
            "t.toml:6:8: schedules[1].name: `a` is already a schedule",
        ),
        (
            "[[schedules]]\nname = \"Bad Name\"\ncron = \"0 9 * * *\"\ncommand = \"help\"",
            "t.toml:2:8: schedules[0].name: \"Bad Name\" is not a valid schedule name",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncommand = \"help\"",
            "t.toml:1:1: schedules[0]: missing field `cron`",
        ),
        (
            "[[schedules]]\nname = \"n\"\ncron = \"0 9 * * *\"\ncommand = \"help\"\nevery = \"day\"",
            "t.toml:5:1: schedules[0].every: unknown field `every`, expected one of `name`, `cron`, `time_zone`, `command`, `agent`, `prompt`",
        ),
        // [telemetry]
        (
            "[telemetry]\notlp_endpoint = \"grpc://x:4317\"",
            "t.toml:2:17: telemetry.otlp_endpoint: must be the collector's http(s) base URL, like \"http://127.0.0.1:4318\"",
        ),
        (
            "[telemetry]\notlp_endpoint = \"http://\"",
            "t.toml:2:17: telemetry.otlp_endpoint: must be the collector's http(s) base URL",
        ),
        (
            "[telemetry]\notlp_endpoint = \"http://c:4318/?token=x\"",
            "t.toml:2:17: telemetry.otlp_endpoint: must be the collector's http(s) base URL",
        ),
        (
            "[telemetry]\nspan_log_capacity = 0",
            "t.toml:2:21: telemetry.span_log_capacity: must be a whole number above 0",
        ),
        (
            "[telemetry]\nservice_name = \" \"",
            "t.toml:2:16: telemetry.service_name: must not be empty",
        ),
        (
            "[telemetry]\nlog_level = \"debug\"",
            "t.toml:2:1: telemetry.log_level: unknown field `log_level`, expected one of `log_format`, `otlp_endpoint`, `span_log_capacity`, `audit_file`, `service_name`",
        ),
        (
            "[telemetry]\nlog_format = \"xml\"",
            "t.toml:2:14: telemetry.log_format: unknown variant `xml`, expected `human` or `json`",
        ),
        // grants and restrict (authz-core's parser, located here).
        (
            "[grants.\"slack:U1\"]\nactions = [\"runs:read\"]\nchannels = \"All\"\n",
            "t.toml:3:1: grants.\"slack:U1\".channels: `All` is not \"all\"",
        ),
        (
            "[agents.coding]\n[grants.\"slack:U1\"]\nagents = [\"coding\"]\n",
            "t.toml:3:1: grants.\"slack:U1\".agents: unknown field `agents`",
        ),
        (
            "[restrict]\nagents = [\"ghost\"]",
            "t.toml:2:1: restrict.agents[0]: `ghost` is not a declared agent",
        ),
        // [mcp]
        (
            "[mcp]\nenabled = \"yes\"",
            "t.toml:2:11: mcp.enabled: invalid type: string \"yes\", expected a boolean",
        ),
        (
            "[mcp]\nallowed_hosts = [\"localhost\", \"a b\"]",
            "t.toml:2:17: mcp.allowed_hosts: \"a b\" is not a host: write a host name or address",
        ),
        (
            "[mcp]\nagent_url = \"ftp://x\"",
            "t.toml:2:13: mcp.agent_url: \"ftp://x\" is not an http(s) URL",
        ),
        (
            "[mcp]\nmax_body_bytes = 0",
            "t.toml:2:18: mcp.max_body_bytes: must be a whole number above 0",
        ),
        (
            "[mcp]\nsessions = true",
            "t.toml:2:1: mcp.sessions: unknown field `sessions`, expected one of `enabled`",
        ),
        // [slack] and the links' public URL.
        (
            "[slack]\nmode = \"webhook\"",
            "t.toml:2:8: slack.mode: unknown variant `webhook`, expected `events` or `socket`",
        ),
        (
            "[slack]\napi_url = \"slack.com/api\"",
            "t.toml:2:11: slack.api_url: must be the Web API's https base URL",
        ),
        (
            "[slack]\napi_url = \"https://slack.com/api/?x=1\"",
            "t.toml:2:11: slack.api_url: must be the Web API's https base URL",
        ),
        (
            "[slack]\napi_url = \"http://slack.example.com/api/\"",
            "t.toml:2:11: slack.api_url: must be the Web API's https base URL",
        ),
        (
            "[slack]\napi_url = \"http://localhost:80@slack.example.com/api/\"",
            "t.toml:2:11: slack.api_url: must be the Web API's https base URL",
        ),
        (
            "[slack]\napi_url = \"http://127.0.0.1.example.com/api/\"",
            "t.toml:2:11: slack.api_url: must be the Web API's https base URL",
        ),
        (
            "[slack]\napi_url = \"https://user@slack.com/api/\"",
            "t.toml:2:11: slack.api_url: must be the Web API's https base URL",
        ),
        (
            "[slack]\ndirectory_ttl_seconds = 0",
            "t.toml:2:25: slack.directory_ttl_seconds: must be a whole number above 0",
        ),
        (
            "[slack]\nbot_token = \"xoxb-1\"",
            "t.toml:2:1: slack.bot_token: unknown field `bot_token`, expected one of `mode`, `api_url`, `directory_ttl_seconds`, `allow_external_users`",
        ),
        (
            "[server]\npublic_url = \"sb.example.com\"",
            "t.toml:2:14: server.public_url: must be where people reach this server",
        ),
        // [agent_policy] and [[agent_grants]].
        (
            "[[agent_grants]]\nid = \"x\"",
            "t.toml:1:1: agent_grants[0]: missing field `tool`",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"read_file\"\nmode = \"sometimes\"",
            "t.toml:4:8: agent_grants[0].mode: unknown variant `sometimes`, expected one of `deny`, `ask`, `auto`",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"read_file\"\nmode = \"auto\"",
            "t.toml:1:1: agent_grants[0]: grant \"x\": a file or git grant needs paths",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"read_file\"\nmode = \"auto\"\npaths = [\"relative\"]",
            "t.toml:1:1: agent_grants[0]: grant \"x\": path \"relative\" must be absolute (or start with {workspace})",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"http_fetch\"\nmode = \"auto\"\nhosts = [\"*\"]",
            "t.toml:1:1: agent_grants[0]: grant \"x\": host \"*\" must be a host name or *.<domain>, with a port after a colon to name one alone (example.com:443)",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"rm\"\nmode = \"auto\"",
            "t.toml:1:1: agent_grants[0]: grant \"x\": tool \"rm\" is not a tool",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"shell\"\nmode = \"ask\"\nexpires = \"tomorrow\"",
            "t.toml:1:1: agent_grants[0]: grant \"x\": expires \"tomorrow\" must be an RFC 3339 time",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"shell\"\nmode = \"ask\"\nagent = \"ghost\"",
            "t.toml:1:1: agent_grants[0]: grant \"x\": agent \"ghost\" is not a declared agent",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"shell\"\nmode = \"ask\"\n[[agent_grants]]\nid = \"x\"\ntool = \"shell\"\nmode = \"auto\"",
            "t.toml:5:1: agent_grants[1]: grant id \"x\" appears twice",
        ),
        (
            "[[agent_grants]]\nid = \"x\"\ntool = \"shell\"\nmode = \"ask\"\nwhen = 1",
            "t.toml:5:1: agent_grants[0].when: unknown field `when`",
        ),
        (
            "[agent_policy]\nrules = [{ action = \"*\", decision = \"deny\" }]",
            "t.toml:2:21: agent_policy.rules[0].action: a bare \"*\" is not a pattern",
        ),
        (
            "[agent_policy]\nrules = [{ action = \"git.push\", decision = \"never\" }]",
            "t.toml:2:44: agent_policy.rules[0].decision: unknown variant `never`",
        ),
        (
            "[agent_policy]\nreviewer = \"ghost\"",
            "t.toml:2:1: agent_policy.reviewer: `ghost` is not a declared agent; declare [agents.ghost] or remove reviewer",
        ),
        (
            "[agent_policy]\napproval_timeout_seconds = 0",
            "t.toml:2:1: agent_policy.approval_timeout_seconds: must be at least 1",
        ),
        (
            "[agent_policy]\ndeny_read = [\".env\"]",
            "t.toml:2:1: agent_policy.deny_read: unknown field `deny_read`",
        ),
        // [access].
        (
            "[access]\ngroups_claim = \"custom..groups\"",
            "t.toml:2:16: access.groups_claim: must be a claim name, or a dotted path to one",
        ),
        (
            "[access]\ngroups_claim = \"\"",
            "t.toml:2:16: access.groups_claim: must be a claim name",
        ),
        (
            "[server]\nconfig_poll_ms = -1",
            "t.toml:2:18: server.config_poll_ms: invalid value: integer `-1`",
        ),
        // [groups] and a group's grants (authz-core's parser, located here).
        (
            "[groups]\noncall = [\"agent:coding\"]",
            "t.toml:2:1: groups.\"oncall\"[0]: an agent is never a group member",
        ),
        (
            "[grants.\"group:slack:S1\"]\nactions = [\"config:write\"]",
            "t.toml:1:9: grants.\"group:slack:S1\": a Slack user group's grants may not hold config:write",
        ),
        (
            "[access]\nissuer = \"acme\"\naudience = \"a\"",
            "t.toml:2:10: access.issuer: is not an https URL, so the key set cannot be found from it; set jwks_url or jwks_file",
        ),
        (
            "[access]\nissuer = \"\"",
            "t.toml:2:10: access.issuer: must not be empty",
        ),
        (
            "[access]\njwks_url = \"http://keys.example.com/certs\"",
            "t.toml:2:12: access.jwks_url: must be the issuer's https key-set URL",
        ),
        (
            "[access]\njwks_url = \"https://k.example/certs\"\njwks_file = \"/k.json\"",
            "t.toml:2:12: access.jwks_url: set jwks_url or jwks_file, not both",
        ),
        (
            "[access]\nheader = \"bad header\"",
            "t.toml:2:10: access.header: must be an HTTP header name",
        ),
        (
            "[access]\ncookie = \"a=b\"",
            "t.toml:2:10: access.cookie: must be a cookie name",
        ),
        (
            "[access]\njwks_ttl_seconds = 0",
            "t.toml:2:20: access.jwks_ttl_seconds: must be a whole number above 0",
        ),
        (
            "[access]\ntoken = \"x\"",
            "t.toml:2:1: access.token: unknown field `token`",
        ),
        // [memory].
        (
            "[memory]\nextractor = \"llm\"",
            "t.toml:2:13: memory.extractor: unknown variant `llm`, expected `rules` or `model`",
        ),
        (
            "[memory]\nextractor = \"model\"",
            "t.toml:2:1: memory.extractor: the model extractor needs `model_agent`",
        ),
        (
            "[agents.echo]\n[memory]\nextractor = \"model\"\nmodel_agent = \"nosuch\"",
            "t.toml:4:15: memory.model_agent: `nosuch` is not a declared agent; declare [agents.nosuch]",
        ),
        (
            "[agents.echo]\n[memory]\nmodel_agent = \"echo\"",
            "t.toml:3:15: memory.model_agent: is read only by the model extractor; set extractor = \"model\"",
        ),
        (
            "[memory]\ncontext_max_records = 1001",
            "t.toml:2:23: memory.context_max_records: must be at most 1000",
        ),
        (
            "[memory]\ncontext_max_chars = 0",
            "t.toml:2:21: memory.context_max_chars: must be a whole number above 0",
        ),
        (
            "[memory]\nreflection_timeout_seconds = -1",
            "t.toml:2:30: memory.reflection_timeout_seconds: must be a whole number above 0",
        ),
        (
            "[memory]\nscopes = [\"org\"]",
            "t.toml:2:1: memory.scopes: unknown field `scopes`, expected one of `extractor`",
        ),
        (
            "memory = 3",
            "t.toml:1:10: memory: invalid type: integer `3`, expected struct MemorySection",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, want) in cases {
        let got = err(text);
        if !got.starts_with(want) {
            wrong.push(format!("{text:?}\n  got:  {got}\n  want: {want}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    ok("schedules = []\n[slack]\n[mcp]\n");
}

#[test]
fn the_server_store_ingress_and_telemetry_sections_are_read() {
    let c = ok(r#"
[server]
listen = "0.0.0.0:9000"
replica_id = "web-1"
shutdown_grace_seconds = 3
heartbeat_seconds = 5
lease_seconds = 20
[store]
url = "postgres://sb@db/sb"
schema = "switchboard"
max_connections = 16
[ingress]
tokens_file = "/etc/switchboard/tokens.json"
max_body_bytes = 1024
[telemetry]
log_format = "json"
"#);
    assert_eq!(c.server.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(c.server.shutdown_grace, Duration::from_secs(3));
    assert_eq!(
        (c.server.heartbeat, c.server.lease),
        (Duration::from_secs(5), Duration::from_secs(20))
    );
    assert_eq!(c.store.url.as_str(), "postgres://sb@db/sb");
    assert_eq!(c.store.schema.as_deref(), Some("switchboard"));
    assert_eq!(c.store.max_connections, Some(16));
    assert_eq!(c.ingress.max_body_bytes, 1024);
    assert!(c.telemetry.json_logs);
    let start = std::env::current_dir().unwrap();
    assert_eq!(
        ok("").store.url.sqlite_file(),
        start.join("switchboard.db").to_str()
    );
}

#[test]
fn the_builtin_schedule_holds_the_fleet_friction_grants() {
    let c = ok("");
    let id = "schedule:self-improvement".parse().unwrap();
    let g = c.table.grants_for(&id);
    assert!(g.channels.is_all());
    assert!(g.actions.holds(&"friction:read".parse().unwrap()));
    let replaced = ok("[grants.\"schedule:self-improvement\"]\nactions = [\"help:read\"]");
    assert!(
        replaced.table.grants_for(&id).channels.is_empty(),
        "an entry replaces it whole"
    );
}

/// Every key `CORE_KEYS` lists is read by a section (or by authz-core): a listed name nothing
/// read would be accepted and ignored.
#[test]
fn every_core_key_is_read_by_a_section() {
    for key in super::sections::CORE_KEYS {
        // `key = 0` is refused for its type by whatever reads the key.
        let e = err(&format!("{key} = 0"));
        assert!(
            e.starts_with("t.toml:1:")
                && (e.contains("invalid type") || e.contains("must be a table")),
            "{key} is listed as a core key but nothing reads it: {e}"
        );
        assert!(!e.contains("unknown field"), "{key}: {e}");
    }
    assert!(
        err("nope = 0").contains("unknown field `nope`"),
        "the check above can fail"
    );
}

/// An unknown top-level key and a bad value elsewhere are both named, in file order.
#[test]
fn an_unknown_section_and_a_bad_value_are_both_named() {
    let text = "[server]\nlisten = 1\n\n[serverr]\n";
    let e = err(text);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].starts_with("t.toml:2:10: server.listen: invalid type"),
        "{e}"
    );
    assert!(
        lines[1].starts_with("t.toml:4:2: serverr: unknown field `serverr`"),
        "{e}"
    );
}
