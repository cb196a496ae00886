//! Every reply text, in one place; each has a golden test (tests/goldens/).
//!
//! A refusal never carries its reason: not_found is byte-identical to a missing resource, and
//! 🚫 names the command and who to ask, nothing else.

use authz_core::ActorId;

/// not_found on text surfaces: `run not found`, `memory record not found`.
pub fn not_found(what: &str) -> String {
    format!("{what} not found")
}

/// The same on HTTP/API surfaces (status 404).
pub fn not_found_json(what: &str) -> String {
    format!("{{\"error\":\"{what} not found\",\"code\":\"not_found\"}}")
}

/// The HTTP/API body of a 🚫 (status 403).
pub const UNAUTHORIZED_JSON: &str =
    "{\"error\":\"unauthorized\",\"code\":\"unauthorized\",\"ask\":[]}";

/// `🚫 You don't have permission to use `<command>`. Ask <admins>.`; with no admin configured
/// the sentence ends after the command, naming nobody.
pub fn unauthorized(command: &str, admins: &[ActorId]) -> String {
    match ask(admins) {
        Some(who) => format!("🚫 You don't have permission to use `{command}`. Ask {who}."),
        None => format!("🚫 You don't have permission to use `{command}`."),
    }
}

/// The channel tier of `config set` has its own refusal.
pub fn channel_config_denied(channel: &str, admins: &[ActorId]) -> String {
    match ask(admins) {
        Some(who) => format!("🚫 You can't change the config of {channel}. Ask {who}."),
        None => format!("🚫 You can't change the config of {channel}."),
    }
}

/// The admins hint: their ids as they are, joined as a sentence. (A chat surface that can
/// mention people turns the ids the reply's data lists under `ask` into mentions; the text
/// itself is plain on every surface.)
fn ask(admins: &[ActorId]) -> Option<String> {
    let names: Vec<String> = admins.iter().map(ToString::to_string).collect();
    match names.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        [init @ .., last] => Some(format!("{} or {last}", init.join(", "))),
    }
}

/// A repo a request names that is not configured, or that the caller may not use: the two
/// read the same.
pub fn repo_not_configured(slug: &str) -> String {
    format!("repo {slug} is not configured; add it with `repo add {slug} --path P` or `--url U`")
}

pub fn unknown_command(word: &str) -> String {
    format!("unknown command `{word}`. Try `help` to see the commands you can use.")
}

/// `unknown command `<words>``, with the nearest command when one is near.
pub fn unknown_command_near(words: &str, near: Option<&str>) -> String {
    match near {
        Some(near) => format!(
            "unknown command `{words}`; did you mean `{near}`? Try `help` to see the commands you can use."
        ),
        None => unknown_command(words),
    }
}

/// A command group named alone: its commands.
pub fn group_alone(group: &str, members: &[&str]) -> String {
    let commands: Vec<String> = members.iter().map(|m| format!("{group} {m}")).collect();
    format!(
        "`{group}` needs a command: {}. Add `--help` to one for its options.",
        commands.join(", ")
    )
}

pub fn usage_error(problem: &str, usage: &str) -> String {
    format!("{problem}\n{usage}")
}

pub fn already_finished(status: &str) -> String {
    format!("that run already finished ({status})")
}

/// A stop of a run live in this process.
pub fn stopping(id: &str) -> String {
    format!("stopping run {id}")
}

/// A stop of a run another process owns: asked through the store.
pub fn stop_requested(id: &str, owner: &str) -> String {
    format!("stopping run {id}: asked its process ({owner}), which stops it within 2 s")
}

/// A run that started.
pub fn run_started(id: &str, agent: &str, channel: &str) -> String {
    format!("started run {id} with agent `{agent}` in {channel}; follow it with `runs get {id}`")
}

/// 🚫 for an agent the caller may not run.
pub fn agent_refused(agent: &str, admins: &[ActorId]) -> String {
    match ask(admins) {
        Some(who) => format!("🚫 You don't have permission to run the `{agent}` agent. Ask {who}."),
        None => format!("🚫 You don't have permission to run the `{agent}` agent."),
    }
}

/// `@name` naming no agent: the agents this caller may run, or none.
pub fn unknown_agent(name: &str, runnable: &[String]) -> String {
    if runnable.is_empty() {
        format!("there is no agent `{name}` you can run")
    } else {
        format!(
            "there is no agent `{name}`; you can run {}",
            runnable.join(", ")
        )
    }
}

/// A caller with no origin channel: nowhere to record a run.
pub fn no_run_channel() -> String {
    "this request has no channel to record a run in; nothing was started".to_owned()
}

pub fn store_failed() -> String {
    "the store could not answer; try again shortly (the operator log has the details)".to_owned()
}

pub fn config_set(key: &str, tier: &str) -> String {
    format!("set `{key}` on {tier}")
}

pub fn config_unset(key: &str, tier: &str) -> String {
    format!("`{key}` is not set on {tier}")
}

pub fn need_tier(command: &str) -> String {
    format!("`{command}` needs a tier here: --org, --user or --channel <channel>")
}

#[cfg(test)]
mod tests {
    use authz_core::ActorId;

    use super::*;

    /// The goldens in `tests/goldens/` are the texts people read; a change to one is a
    /// change to what they see, made on purpose in both places.
    fn golden(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/goldens")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn reply_texts_match_their_goldens() {
        let admins: Vec<ActorId> = ["slack:U024BE7LH", "access:ops"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let one: Vec<ActorId> = vec!["slack:U024BE7LH".parse().unwrap()];
        let cases = [
            ("not_found.txt", not_found("run")),
            ("not_found_memory.txt", not_found("memory record")),
            ("not_found.json", not_found_json("run")),
            ("unauthorized.txt", unauthorized("runs list", &one)),
            (
                "unauthorized_two_admins.txt",
                unauthorized("config set", &admins),
            ),
            ("unauthorized_no_admins.txt", unauthorized("runs list", &[])),
            ("unauthorized.json", UNAUTHORIZED_JSON.to_owned()),
            (
                "channel_config_denied.txt",
                channel_config_denied("slack:C024", &one),
            ),
            (
                "channel_config_denied_no_admins.txt",
                channel_config_denied("slack:C024", &[]),
            ),
            ("unknown_command.txt", unknown_command("deploy")),
            (
                "unknown_command_near.txt",
                unknown_command_near("runs lst", Some("runs list")),
            ),
            ("group_alone.txt", group_alone("runs", &["list", "get"])),
            ("already_finished.txt", already_finished("completed")),
            (
                "stop_requested.txt",
                stop_requested("01JABCDEFGHJKMNPQRSTVWXYZ0", "replica-web-1"),
            ),
            (
                "unknown_agent.txt",
                unknown_agent("nosuch", &["echo".into(), "reviewer".into()]),
            ),
            ("unknown_agent_none.txt", unknown_agent("nosuch", &[])),
            ("stopping.txt", stopping("01JABCDEFGHJKMNPQRSTVWXYZ0")),
            (
                "run_started.txt",
                run_started("01JABCDEFGHJKMNPQRSTVWXYZ0", "echo", "http:ops"),
            ),
            ("agent_refused.txt", agent_refused("coding", &one)),
            ("agent_refused_no_admins.txt", agent_refused("coding", &[])),
            ("no_run_channel.txt", no_run_channel()),
        ];
        for (file, text) in cases {
            assert_eq!(text, golden(file).trim_end_matches('\n'), "{file}");
        }
    }
}
