//! `authz diff` over a large config: 1,000 grant entries and 100 declared groups of 10 members,
//! old against new where one group gains a channel and one entry loses an action (goal: under a
//! second). Each sample is one whole `diff`; the median and the slowest of 9 are printed. Run
//! with `scripts/bench.sh review` (or `cargo bench -p authz-core --bench review`).
// A bench binary: a broken fixture stops it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::Instant;

use authz_core::GrantsTable;
use authz_core::review::diff;

/// 1,000 entries (500 Slack users, 500 tokens) and 100 groups; `changed` widens one group and
/// narrows one entry.
fn config(changed: bool) -> String {
    let mut text = String::from("[agents.coding]\n[agents.reviewer]\n[groups]\n");
    for g in 0..100 {
        let members: Vec<String> = (0..10)
            .map(|m| format!("\"slack:U{:05}\"", (g * 10 + m) % 500))
            .collect();
        text.push_str(&format!("team{g} = [{}]\n", members.join(", ")));
    }
    for i in 0..500 {
        let actions = if changed && i == 7 {
            "[\"friction:read\"]"
        } else {
            "[\"runs:read\", \"friction:read\"]"
        };
        text.push_str(&format!(
            "[grants.\"slack:U{i:05}\"]\nactions = {actions}\nchannels = [\"slack:C{i:05}\"]\n[grants.\"http:bot{i}\"]\nactions = [\"runs:read\"]\nchannels = [\"http:bot{i}\"]\n"
        ));
    }
    for g in 0..100 {
        let extra = if changed && g == 3 {
            ", \"slack:G99999\""
        } else {
            ""
        };
        text.push_str(&format!(
            "[grants.\"group:team{g}\"]\nactions = [\"runs:write\"]\nchannels = [\"slack:G{g:05}\"{extra}]\n"
        ));
    }
    text
}

fn table(text: &str) -> GrantsTable {
    let doc: toml::Table = toml::from_str(text).unwrap();
    let agents = ["coding", "reviewer"]
        .map(|a| a.parse().unwrap())
        .into_iter()
        .collect();
    GrantsTable::from_config(&doc, agents).unwrap()
}

fn main() {
    let (old, new) = (table(&config(false)), table(&config(true)));
    let mut samples = Vec::new();
    let mut changes = 0;
    for _ in 0..9 {
        let at = Instant::now();
        changes = diff(&old, &new).len();
        samples.push(at.elapsed());
    }
    samples.sort();
    println!(
        "authz diff, 1,000 entries and 100 groups (one group widened, one entry narrowed): median {:.1} ms, slowest {:.1} ms, {changes} changes",
        samples[4].as_secs_f64() * 1e3,
        samples[8].as_secs_f64() * 1e3
    );
    assert!(changes > 0, "the change must show");
}
