//! Architecture checks: authz-core's dependency closure and its use of impure APIs.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::source::{after_word, is_word_char, rust_sources, without_tests};
use serde_json::Value;

/// Crates whose presence in authz-core's normal dependency closure means it gained an async
/// runtime, a database or an HTTP stack.
const FORBIDDEN_CRATES: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "mio",
    "futures-executor",
    "sqlx",
    "rusqlite",
    "postgres",
    "tokio-postgres",
    "diesel",
    "sea-orm",
    "redis",
    "hyper",
    "http",
    "reqwest",
    "ureq",
    "axum",
    "tower",
    "actix-web",
    "warp",
    "rmcp",
    "slack-morphism",
];

/// Source patterns that mean I/O, a clock, the environment or spawning.
const FORBIDDEN_APIS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::io::stdin",
    "std::thread",
    "SystemTime",
    "Instant::now",
    "println!",
    "eprintln!",
];

/// The crates that must never decide by hand besides the adapters (read from the crate
/// graph): the registry, the dispatcher and the composition root.
const DECISION_FREE_CRATES: &[&str] = &["commands", "dispatch", "server"];

/// Hand-made comparisons of caller ids or channels: what `authorize` exists to replace.
const HAND_MADE: &[&str] = &[
    "actor.id ==",
    "actor.id !=",
    "== caller",
    "!= caller",
    "channel_id ==",
    "channel_id !=",
    "user_id ==",
    "user_id !=",
    "origin ==",
    "starts_with(\"slack:",
    "starts_with(\"http:",
    "starts_with(\"mcp:",
    "starts_with(\"access:",
    "starts_with(\"cli:",
    "is_admin",
    "admins.contains",
];

/// Names every hand-made comparison in the sources of the registry, the dispatcher, the
/// composition root and every adapter (tests included: a test that compares ids by hand to
/// decide is as wrong as code that does). A crate without sources is an error, never a
/// skipped check.
pub fn hand_made_decisions(graph: &crate::layers::Graph) -> Result<Vec<String>> {
    let adapters = crate::layers::adapters(graph);
    let crates = DECISION_FREE_CRATES
        .iter()
        .copied()
        .chain(adapters.iter().map(String::as_str));
    let mut faults = Vec::new();
    for krate in crates {
        for (path, text) in rust_sources(graph.sources_of(krate)?)? {
            faults.extend(scan_hand_made(&path, &text));
        }
    }
    Ok(faults)
}

/// Every use of `authorize` in the memory crate's code (its test modules aside) but the
/// one default of its `decide` seam, which its tests spy on: a call, or `authorize` handed
/// on as a value, renamed or glob-imported, could decide around the seam unnoticed.
pub fn undecided_memory(graph: &crate::layers::Graph) -> Result<Vec<String>> {
    let mut faults = Vec::new();
    for (path, text) in rust_sources(graph.sources_of("memory")?)? {
        faults.extend(scan_around_the_seam(&path, &text));
    }
    Ok(faults)
}

/// The seam's default: with the import it needs, the only place `authorize` may stand.
const SEAM: &str = "decide: Arc::new(authorize),";

fn scan_around_the_seam(path: &Path, text: &str) -> Vec<String> {
    let names_authorize =
        |code: &str| after_word(code, "authorize").any(|after| !after.starts_with(is_word_char));
    without_tests(text)
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.trim().split(" // ").next().unwrap_or_default();
            let code = if code.starts_with("//") { "" } else { code };
            let glob = code.contains("authz_core::*");
            let import = code.starts_with("use authz_core::{")
                && code.ends_with("};")
                && !code.contains(" as ");
            let seam = code == SEAM || import;
            glob || (names_authorize(code) && !seam)
        })
        .map(|(n, _)| {
            format!(
                "{}:{}: decides around the seam (`authorize` used directly); decide through `self.decide`, which the tests watch",
                path.display(),
                n + 1
            )
        })
        .collect()
}

fn scan_hand_made(path: &Path, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .flat_map(|(n, line)| {
            let code = line.split("//").next().unwrap_or_default();
            HAND_MADE
                .iter()
                .filter(move |p| code.contains(*p))
                .map(move |p| {
                    format!(
                        "{}:{}: compares by hand (`{p}`); ask authz-core",
                        path.display(),
                        n + 1
                    )
                })
        })
        .collect()
}

pub fn cargo_metadata(root: &Path) -> Result<Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("parsing cargo metadata")
}

/// Names every forbidden crate in `package`'s normal (non-dev, non-build) dependency closure.
pub fn forbidden_dependencies(metadata: &Value, package: &str) -> Result<Vec<String>> {
    Ok(dependency_closure(metadata, package)?
        .into_iter()
        .filter(|name| FORBIDDEN_CRATES.contains(&name.as_str()))
        .map(|name| {
            format!("{package} depends on `{name}` (an async runtime, database or HTTP crate)")
        })
        .collect())
}

/// The package names in `package`'s normal dependency closure, itself included.
pub fn dependency_closure(metadata: &Value, package: &str) -> Result<BTreeSet<String>> {
    let names: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .context("metadata has no packages")?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let nodes: HashMap<&str, &Value> = metadata
        .pointer("/resolve/nodes")
        .unwrap_or(&Value::Null)
        .as_array()
        .context("metadata has no resolve graph")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let root = names
        .iter()
        .find(|(_, name)| **name == package)
        .map(|(id, _)| *id)
        .with_context(|| format!("package {package} not in metadata"))?;
    let mut seen = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let deps = nodes
            .get(id)
            .and_then(|n| n["deps"].as_array())
            .into_iter()
            .flatten();
        for dep in deps {
            let normal = dep["dep_kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()));
            if let (true, Some(pkg)) = (normal, dep["pkg"].as_str()) {
                stack.push(pkg);
            }
        }
    }
    Ok(seen
        .into_iter()
        .filter_map(|id| names.get(id).map(|n| (*n).to_owned()))
        .collect())
}

/// Names every use of an impure API in the `.rs` files under `src`, outside comments.
pub fn forbidden_apis(src: &Path) -> Result<Vec<String>> {
    let mut faults = Vec::new();
    for (path, text) in rust_sources(src)? {
        faults.extend(scan(&path, &text));
    }
    Ok(faults)
}

fn scan(path: &Path, text: &str) -> Vec<String> {
    let mut faults = Vec::new();
    // Unit tests may use anything; the check is about what ships.
    for (n, line) in without_tests(text).lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for api in FORBIDDEN_APIS {
            if code.contains(api) {
                faults.push(format!("{}:{}: uses `{api}`", path.display(), n + 1));
            }
        }
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    fn graph() -> crate::layers::Graph {
        crate::layers::Graph::read(&cargo_metadata(&root()).unwrap()).unwrap()
    }

    #[test]
    fn authz_core_depends_on_no_runtime_database_or_http_crate() {
        let metadata = cargo_metadata(&root()).unwrap();
        let faults = forbidden_dependencies(&metadata, "authz-core").unwrap();
        assert!(faults.is_empty(), "{faults:#?}");
        // The closure really was walked, through normal dependencies only.
        let closure = dependency_closure(&metadata, "authz-core").unwrap();
        for expected in ["serde", "thiserror", "toml", "serde_core"] {
            assert!(
                closure.contains(expected),
                "{expected} missing from {closure:?}"
            );
        }
        assert!(
            !closure.contains("proptest"),
            "a dev-dependency is not shipped"
        );
    }

    #[test]
    fn a_forbidden_crate_in_the_closure_is_named() {
        let metadata = serde_json::json!({
            "packages": [
                {"id": "a", "name": "authz-core"},
                {"id": "s", "name": "serde"},
                {"id": "t", "name": "tokio"},
                {"id": "p", "name": "proptest"},
                {"id": "h", "name": "hyper"}
            ],
            "resolve": {"nodes": [
                {"id": "a", "deps": [
                    {"pkg": "s", "dep_kinds": [{"kind": null}]},
                    {"pkg": "p", "dep_kinds": [{"kind": "dev"}]}
                ]},
                {"id": "s", "deps": [{"pkg": "t", "dep_kinds": [{"kind": null}]}]},
                {"id": "p", "deps": [{"pkg": "h", "dep_kinds": [{"kind": null}]}]},
                {"id": "t", "deps": []},
                {"id": "h", "deps": []}
            ]}
        });
        let faults = forbidden_dependencies(&metadata, "authz-core").unwrap();
        assert_eq!(
            faults.len(),
            1,
            "{faults:?}: tokio through serde, not hyper through a dev-dependency"
        );
        assert!(faults[0].contains("`tokio`"));
    }

    #[test]
    fn authz_core_source_uses_no_io_clock_or_env_api() {
        let faults = forbidden_apis(&root().join("crates/authz-core/src")).unwrap();
        assert!(faults.is_empty(), "{faults:#?}");
    }

    #[test]
    fn memory_decides_only_through_its_seam() {
        assert!(undecided_memory(&graph()).unwrap().is_empty());
        let file = Path::new("lib.rs");
        for around in [
            "let v = authorize(&actor, &Action::MemoryRead, &r);",
            "let w = authz_core::authorize (a, b, c);",
            "gate(&authorize, scope)",
            "use authz_core::{Actor, authorize as ok};",
            "use authz_core::*;",
            "decide: Arc::new(authorize), let x = authorize(a, b, c);",
        ] {
            assert_eq!(scan_around_the_seam(file, around).len(), 1, "{around}");
        }
        let seam = "use authz_core::{Actor, authorize};\n            decide: Arc::new(authorize),\n// never calls authorize(…)\nfn pre_authorize_hint() {}\nlet s = \"https://x\"; // authorize(";
        assert!(scan_around_the_seam(file, seam).is_empty());
        let tests = "#[cfg(test)]\nmod tests {\n    gate(&authorize, scope);\n}";
        assert!(scan_around_the_seam(file, tests).is_empty());
    }

    #[test]
    fn no_command_or_adapter_compares_ids_or_channels_by_hand() {
        let faults = hand_made_decisions(&graph()).unwrap();
        assert!(faults.is_empty(), "{faults:#?}");
        assert!(
            root().join("crates/commands/src").exists(),
            "the scan reaches the registry"
        );
    }

    #[test]
    fn the_hand_made_scan_flags_a_planted_comparison() {
        let text = "fn f(c: &Caller) -> bool { c.actor.id == admin_id }\n// actor.id == in a comment\nfn g(r: &Run) -> bool { r.channel_id == here }\n";
        let faults = scan_hand_made(Path::new("x.rs"), text);
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(faults[0].starts_with("x.rs:1:") && faults[1].starts_with("x.rs:3:"));
    }

    #[test]
    fn the_api_scan_names_a_fault_at_its_line_in_the_file() {
        let live = "#[cfg(test)]\nfn helper() {}\n\nfn shipped() { std::fs::read(\"x\"); }\n";
        assert_eq!(
            scan(Path::new("x.rs"), live),
            vec!["x.rs:4: uses `std::fs`".to_owned()]
        );
        let below =
            "#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn live() { std::fs::read(\"x\"); }\n";
        assert_eq!(
            scan(Path::new("x.rs"), below),
            vec!["x.rs:5: uses `std::fs`".to_owned()]
        );
    }

    #[test]
    fn the_api_scan_flags_impure_calls_but_not_comments_or_unit_tests() {
        let text = "fn a() { let _ = std::env::var(\"X\"); }\n// std::fs is mentioned\n#[cfg(test)]\nmod t { fn b() { std::fs::read(\"x\"); } }\n";
        let faults = scan(Path::new("x.rs"), text);
        assert_eq!(faults, vec!["x.rs:1: uses `std::env`".to_owned()]);
    }
}
