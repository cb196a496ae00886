//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, on nightly) and for their
//! corpora replayed as ordinary tests (`tests/app/fuzz_corpus.rs`, on stable): one function per
//! parser of outside input, each taking arbitrary bytes. Each parser refuses or accepts; none
//! may panic, and what a parser promises beyond that is asserted here (the sanitiser never
//! lets a secret through).

use std::path::Path;

/// A target's body: arbitrary bytes in, a refusal or an acceptance, never a panic.
pub type Body = fn(&[u8]);

/// Every target: its name (the file under `fuzz/fuzz_targets/` and the directory under
/// `fuzz/corpus/`) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("config", config),
    ("token_map", token_map),
    ("command_text", command_text),
    ("slack_envelope", slack_envelope),
    ("slack_signature", slack_signature),
    ("slack_interaction", slack_interaction),
    ("jwt_header", jwt_header),
    ("jwt_claims", jwt_claims),
    ("mcp_envelope", mcp_envelope),
    ("agent_policy", agent_policy),
    ("grants", grants),
    ("tool_args", tool_args),
    ("resource_spec", resource_spec),
    ("sanitizer", sanitizer),
    ("policy_rules", policy_rules),
];

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A whole config file.
pub fn config(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = crate::config::parse(crate::config::Source::File("fuzz.toml".into()), text);
    }
}

/// `[ingress] tokens`' JSON token map.
pub fn token_map(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = commands::TokenMap::parse(text);
    }
}

/// A command's text as a person types it: words, the command they name, its arguments.
pub fn command_text(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(words) = commands::args::words(text) else {
        return;
    };
    let registry = commands::Registry::catalogue();
    if let Some((command, n)) = registry.by_words(&words) {
        let _ = command.args.parse_words(words.get(n..).unwrap_or_default());
    }
}

/// A Slack Events API body (its signature already held).
pub fn slack_envelope(data: &[u8]) {
    let _ = slack::event::read(data, "UBOT");
}

/// Slack's two signature headers and the body: the first line the timestamp, the second
/// the signature, the rest the body.
pub fn slack_signature(data: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == b'\n');
    let timestamp = parts.next().and_then(text);
    let signature = parts.next().and_then(text);
    let body = parts.next().unwrap_or_default();
    let secret = slack::SigningSecret::new("fuzz-signing-secret");
    let _ = secret.verify(timestamp, signature, body, 1_700_000_000);
}

/// An interaction payload (a button's click).
pub fn slack_interaction(data: &[u8]) {
    let _ = slack::approvals::read_payload(data);
}

/// An Access JWT as it arrives: its header read before any key.
pub fn jwt_header(data: &[u8]) {
    if let Some(token) = text(data) {
        let _ = access_api::verify::fuzzing::header(token);
    }
}

/// An Access JWT's claims, as read once its signature held.
pub fn jwt_claims(data: &[u8]) {
    let _ = access_api::verify::fuzzing::claims(data);
}

/// A body posted to `/mcp`, as the gate reads it before rmcp.
pub fn mcp_envelope(data: &[u8]) {
    let _ = mcp::fuzz_envelope(data);
}

/// A project's `.switchboard/agent-policy.toml`.
pub fn agent_policy(data: &[u8]) {
    if let Some(text) = text(data) {
        let is_dir = |name: &str| name == "config" || name == "src";
        let _ = broker::file::parse_project(text, Path::new("agent-policy.toml"), &is_dir);
    }
}

/// A grants document (`[[grants]]`, `[restrict]`, …).
pub fn grants(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(doc) = text.parse::<toml::Table>() {
        let agents = ["echo", "coding"]
            .into_iter()
            .filter_map(|n| authz_core::AgentName::parse(n).ok())
            .collect();
        let _ = authz_core::config::GrantsTable::from_config(&doc, agents);
    }
}

/// A tool call's JSON arguments: the first byte picks the tool.
pub fn tool_args(data: &[u8]) {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let tools = broker::args::ToolName::ALL;
    let Some(tool) = tools.get(usize::from(*first) % tools.len()).copied() else {
        return;
    };
    if let Some(raw) = text(rest) {
        let _ = broker::args::parse(tool, raw);
    }
}

/// A resource spec (`run:<id>`, `channel:slack:C1`, …) against a small table.
pub fn resource_spec(data: &[u8]) {
    let Some(spec) = text(data) else { return };
    let table = authz_core::config::GrantsTable::empty(Default::default());
    let _ = authz_core::spec::parse_resource_spec(spec, &table);
}

/// The sanitiser: never panics, and never lets a configured secret through.
pub fn sanitizer(data: &[u8]) {
    const SECRET: &str = "fuzz-secret-value-0123456789";
    let text = String::from_utf8_lossy(data);
    let clean = agents::sanitize::Sanitizer::new(vec![SECRET.to_owned()]).clean(&text);
    assert!(
        !clean.contains(SECRET),
        "the sanitiser let the secret through"
    );
    let _ = agents::sanitize::strip_controls(&text);
}

/// A run's `--policy-rule`, a ratchet promise, a cron expression: one line each.
pub fn policy_rules(data: &[u8]) {
    let Some(text) = text(data) else { return };
    for line in text.lines() {
        let _ = broker::rules::parse_run_rule(line);
        let _ = broker::ratchet::Promise::parse(line);
        let _ = schedule::CronSpec::parse(line, "Europe/Berlin");
    }
}

/// xorshift64*: a fixed seed gives the same numbers on every run, so a generated input that
/// fails is the same input next time (the stable mutations, the HTTP pass).
pub struct SeededRng(pub u64);

impl SeededRng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 for 0).
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        if n == 0 {
            0
        } else {
            (self.next_u64() % n) as usize
        }
    }

    /// One of `items` (none of none).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let at = self.below(items.len());
        items.get(at)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// `input` changed one to five times: a bit flipped, a byte that means something to a parser
/// inserted, a run cut, the input truncated, a piece of `other` spliced in, a piece repeated.
pub fn mutate(rng: &mut SeededRng, input: &[u8], other: &[u8]) -> Vec<u8> {
    const MEANINGFUL: &[u8] = b"{}[]\":,\\\n\0=.%@ \xff";
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 => {
                let at = rng.below(out.len());
                let bit = 1 << rng.below(8);
                if let Some(byte) = out.get_mut(at) {
                    *byte ^= bit;
                }
            }
            1 => {
                let at = rng.below(out.len() + 1);
                if let Some(byte) = rng.pick(MEANINGFUL) {
                    out.insert(at, *byte);
                }
            }
            2 => {
                let at = rng.below(out.len());
                let end = (at + rng.below(16) + 1).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 => {
                let cut = rng.below(out.len() + 1);
                out.truncate(cut);
            }
            4 => {
                let at = rng.below(out.len() + 1);
                let from = rng.below(other.len());
                let end = (from + rng.below(64) + 1).min(other.len());
                out.splice(
                    at..at,
                    other.get(from..end).unwrap_or_default().iter().copied(),
                );
            }
            _ => {
                let at = rng.below(out.len() + 1);
                let n = rng.below(8) + 1;
                let repeat = out
                    .get(at..(at + n).min(out.len()))
                    .unwrap_or_default()
                    .repeat(rng.below(64) + 1);
                out.splice(at..at, repeat);
            }
        }
    }
    out
}
