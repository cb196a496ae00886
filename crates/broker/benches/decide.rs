//! The broker's two per-call lookups, on this machine, in one run:
//! - `decide` over 100 grants (target: ≤ 1 µs median), for a read the longest path wins, a
//!   fetch matched by a host pattern, and a call no grant covers;
//! - the rule table with 1,000 project rules (target: ≤ 2 µs), for an exact action, an action
//!   only a prefix names, and an action no rule names (falls through to the shipped defaults).
//!
//! Each sample times a batch of 1,000 calls and divides, so the clock's own cost is noise; the
//! median and p99 of 300 samples are printed. Run with `scripts/bench.sh broker` (or
//! `cargo bench -p broker --bench decide`).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::time::Instant;

use broker::rules::{Charset, NamePattern, RuleDecision, RuleKey, RuleTable, ToolRule};
use broker::{
    CallId, DataClass, Grant, GrantId, Mode, SessionId, SessionState, Timestamp, ToolGrants,
    ToolRequest, decide,
};

const BATCH: usize = 1000;
const SAMPLES: usize = 300;

/// Median and p99 per call, in nanoseconds, of `SAMPLES` batches.
fn per_call(mut run_batch: impl FnMut() -> std::time::Duration) -> (f64, f64) {
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| run_batch().as_nanos() as f64 / BATCH as f64)
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[SAMPLES / 2], samples[SAMPLES * 99 / 100])
}

fn print(what: &str, (median, p99): (f64, f64)) {
    println!("{what:<62} median {median:>7.0} ns   p99 {p99:>7.0} ns");
}

/// 100 grants: 40 read_file trees, 20 write_file, 20 http_fetch hosts, 10 shell, 10 MCP.
fn hundred_grants() -> ToolGrants {
    let grant = |i: usize, tool: &str, paths: Vec<String>, hosts: Vec<String>| Grant {
        id: GrantId::new(format!("g{i:03}")).unwrap(),
        tool: tool.to_owned(),
        paths,
        hosts,
        mode: if i.is_multiple_of(7) {
            Mode::Ask
        } else {
            Mode::Auto
        },
        max_taint: DataClass::Secret,
        expires: Some(Timestamp::from_micros(i64::MAX)),
        result_class: DataClass::Private,
        untrusted: false,
    };
    let grants = (0..100).map(|i| match i {
        0..40 => grant(
            i,
            "read_file",
            vec![format!("/srv/ws/r{}/src", i % 10), format!("/srv/ws/r{i}")],
            vec![],
        ),
        40..60 => grant(
            i,
            "write_file",
            vec![format!("/srv/ws/r{}", i - 40)],
            vec![],
        ),
        60..80 => grant(
            i,
            "http_fetch",
            vec![],
            vec![
                format!("*.host{i}.example.com"),
                format!("host{i}.example.com"),
            ],
        ),
        80..90 => grant(i, "shell", vec![format!("/srv/ws/r{}", i - 80)], vec![]),
        _ => grant(i, "mcp.github.*", vec![], vec![]),
    });
    ToolGrants::new(grants).unwrap()
}

fn bench_decide(label: &str, grants: &ToolGrants, tool: &str, arguments: &str) {
    let request = ToolRequest {
        session: SessionId::parse("01JBENCH").unwrap(),
        call: CallId(1),
        tool: tool.to_owned(),
        arguments: arguments.to_owned(),
    };
    let now = Timestamp::from_micros(1_800_000_000_000_000);
    let timing = per_call(|| {
        let requests: Vec<ToolRequest> = (0..BATCH).map(|_| request.clone()).collect();
        let start = Instant::now();
        for request in requests {
            black_box(decide(request, grants, SessionState::default(), now));
        }
        start.elapsed()
    });
    print(label, timing);
}

/// 1,000 rules: exact MCP tool rules, server prefixes, git and net rules narrowed by tool,
/// model and agent kind.
fn thousand_rules() -> Vec<ToolRule> {
    let lower = |t: &str| Some(NamePattern::parse(t, Charset::Lower).unwrap());
    let wide = |t: &str| Some(NamePattern::parse(t, Charset::Wide).unwrap());
    (0..1000)
        .map(|i| {
            let decision = RuleDecision::ALL[i % 5];
            match i % 4 {
                0 => ToolRule {
                    action: lower(&format!("mcp.server{}.tool{i}", i % 50)),
                    tool: None,
                    model: None,
                    agent_kind: None,
                    decision,
                },
                1 => ToolRule {
                    action: lower(&format!("mcp.server{}.*", i % 50)),
                    tool: None,
                    model: wide(&format!("model-{}", i % 7)),
                    agent_kind: None,
                    decision,
                },
                2 => ToolRule {
                    action: lower(&format!("git.sub{i}")),
                    tool: lower("git"),
                    model: None,
                    agent_kind: wide(&format!("kind{}", i % 3)),
                    decision,
                },
                _ => ToolRule {
                    action: lower(&format!("net.fetch.h{i}.*")),
                    tool: None,
                    model: None,
                    agent_kind: wide("main"),
                    decision,
                },
            }
        })
        .collect()
}

fn bench_rules(label: &str, table: &RuleTable, action: &str) {
    let key = RuleKey {
        action,
        tool: "mcp",
        model: Some("model-3"),
        agent_kind: Some("main"),
    };
    let timing = per_call(|| {
        let start = Instant::now();
        for _ in 0..BATCH {
            black_box(table.lookup(black_box(&key)));
        }
        start.elapsed()
    });
    print(label, timing);
}

fn main() {
    let grants = hundred_grants();
    println!("== decide, 100 grants");
    bench_decide(
        "read_file, longest of two covering paths wins",
        &grants,
        "read_file",
        r#"{"path":"/srv/ws/r3/src/lib.rs"}"#,
    );
    bench_decide(
        "http_fetch, a host pattern",
        &grants,
        "http_fetch",
        r#"{"url":"https://api.host71.example.com/v1/x"}"#,
    );
    bench_decide(
        "read_file no grant covers (every grant scanned)",
        &grants,
        "read_file",
        r#"{"path":"/etc/passwd"}"#,
    );
    let table = RuleTable::new(vec![], thousand_rules(), vec![]);
    println!("== rule table, 1,000 project rules");
    bench_rules("an exact action rule", &table, "mcp.server7.tool357");
    bench_rules(
        "an action only a server prefix names",
        &table,
        "mcp.server7.unnamed",
    );
    bench_rules(
        "an action no rule names (shipped default)",
        &table,
        "fs.read",
    );
}
