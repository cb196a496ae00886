//! The conformance matrix: for every fixed actor × every registered command, the registry's
//! admission (observed through `invoke` with input the command cannot parse) equals
//! `authorize`; the printed matrix is the committed golden; every command's action has rows.

use std::collections::BTreeSet;

use authz_core::{Verdict, authorize, policy::builtin_rules, validate_policy};
use commands::conformance::{actor_set, render_markdown};
use commands::{DenyShape, RawInput, ReplyKind};

use crate::registry_behaviour::harness::*;

#[tokio::test]
async fn admission_through_the_registry_equals_authorize_for_every_pair() {
    let w = sqlite().await;
    let actors = actor_set(&w.table);
    assert_eq!(actors.len(), 13);
    for a in &actors {
        for c in w.registry.commands() {
            let expected = authorize(
                &a.caller.actor,
                &c.action,
                &c.resource_for(&RawInput::Text(String::new()), &a.caller),
            );
            // Input no command accepts: admitted callers get the usage, refused ones the deny shape.
            let reply = w
                .say(&a.caller, &format!("{} --no-such-flag", c.text_form()))
                .await;
            let want = match (&expected, c.deny) {
                (Verdict::Allow, _) => ReplyKind::Usage,
                (Verdict::Deny(_), DenyShape::NotFound(_)) => ReplyKind::NotFound,
                (Verdict::Deny(_), DenyShape::Unauthorized) => ReplyKind::Unauthorized,
            };
            assert_eq!(reply.kind, want, "{} × {}: {reply:?}", a.label, c.id);
        }
    }
}

#[test]
fn the_committed_matrix_is_current() {
    let table = commands::conformance::fixture_table().unwrap();
    let registry = commands::Registry::catalogue();
    let printed = render_markdown(&registry, &actor_set(&table));
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/conformance-matrix.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        printed == committed,
        "docs/conformance-matrix.md is stale: run `cargo xtask conformance-matrix > docs/conformance-matrix.md` and review the diff"
    );
}

#[test]
fn every_registered_command_has_policy_rows() {
    let registry = commands::Registry::catalogue();
    if let Err(faults) = validate_policy(&builtin_rules(), &registry.declared_actions()) {
        let named: Vec<String> = faults.iter().map(ToString::to_string).collect();
        panic!(
            "the policy table does not serve the registry:\n{}",
            named.join("\n")
        );
    }
}

#[test]
fn the_catalogue_is_complete_and_distinct() {
    let registry = commands::Registry::catalogue();
    let ids: BTreeSet<&str> = registry.commands().iter().map(|c| c.id.as_str()).collect();
    let want = [
        "help",
        "status",
        "runs.list",
        "runs.get",
        "runs.events",
        "runs.friction",
        "runs.diff",
        "runs.stop",
        "friction.report",
        "friction.propose",
        "config.get",
        "config.set",
        "repo.list",
        "repo.add",
        "repo.remove",
        "repo.test",
        "repo.build",
        "memory.list",
        "memory.forget",
        "mcp.list",
        "mcp.add",
        "mcp.remove",
        "schedule.list",
        "schedule.fire",
    ];
    assert_eq!(
        ids,
        want.into_iter().collect(),
        "every catalogue row parsed (ids and actions are literals)"
    );
    assert_eq!(registry.commands().len(), want.len(), "no duplicate ids");
    for c in registry.commands() {
        let schema = c.args.json_schema();
        assert_eq!(schema["type"], "object", "{}", c.id);
        assert!(c.usage().starts_with(&format!("usage: {}", c.text_form())));
    }
}
