//! Crate layers hold for tests, benches and examples too: no workspace crate dev-depends on a
//! crate that depends on it (directly or through others). Such a dev-dependency is a cycle
//! `cargo metadata` shows, and it is how a bench or a test of a low crate imports a crate above
//! its own (`schedule`'s bench building the whole `server` App). What needs the whole App is
//! tested or measured in `server` or `cli`; what every crate's tests share is in
//! `test-support`, which depends on no workspace crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

/// The workspace's crate graph, read once from `cargo metadata`: each member's normal and dev
/// dependencies on other members, and its source directory (from its manifest's path, never
/// guessed from its name).
pub struct Graph {
    normal: BTreeMap<String, BTreeSet<String>>,
    dev: BTreeMap<String, BTreeSet<String>>,
    sources: BTreeMap<String, PathBuf>,
}

impl Graph {
    pub fn read(metadata: &Value) -> Result<Graph> {
        let ids: BTreeSet<&str> = metadata["workspace_members"]
            .as_array()
            .context("metadata has no workspace_members")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let packages: Vec<&Value> = metadata["packages"]
            .as_array()
            .context("metadata has no packages")?
            .iter()
            .filter(|p| p["id"].as_str().is_some_and(|id| ids.contains(id)))
            .collect();
        let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
        let mut graph = Graph {
            normal: BTreeMap::new(),
            dev: BTreeMap::new(),
            sources: BTreeMap::new(),
        };
        for p in packages {
            let name = p["name"]
                .as_str()
                .context("a package has no name")?
                .to_owned();
            let deps = p["dependencies"]
                .as_array()
                .context("a package has no dependencies list")?;
            let on = |keep: &dyn Fn(&Value) -> bool| -> BTreeSet<String> {
                deps.iter()
                    .filter(|d| keep(&d["kind"]))
                    .filter_map(|d| d["name"].as_str())
                    .filter(|d| names.contains(d))
                    .map(str::to_owned)
                    .collect()
            };
            graph
                .normal
                .insert(name.clone(), on(&|k| k.is_null() || k == "build"));
            graph.dev.insert(name.clone(), on(&|k| k == "dev"));
            if let Some(manifest) = p["manifest_path"].as_str() {
                let dir = Path::new(manifest)
                    .parent()
                    .context("a manifest has no directory")?;
                graph.sources.insert(name, dir.join("src"));
            }
        }
        Ok(graph)
    }

    /// `krate`'s source directory; a member without one is an error, never a skipped check.
    pub fn sources_of(&self, krate: &str) -> Result<&Path> {
        self.sources
            .get(krate)
            .map(PathBuf::as_path)
            .filter(|d| d.is_dir())
            .with_context(|| format!("{krate} is not a workspace member with a src directory"))
    }
}

/// One line per dev-dependency that closes a cycle: `a dev-depends on b, and b depends on a
/// through b -> … -> a`.
pub fn dev_dependency_cycles(graph: &Graph) -> Vec<String> {
    let mut faults = Vec::new();
    for (crate_name, dev_deps) in &graph.dev {
        for dep in dev_deps.iter().filter(|d| *d != crate_name) {
            if let Some(path) = normal_path(&graph.normal, dep, crate_name) {
                faults.push(format!(
                    "{crate_name} dev-depends on {dep}, and {dep} depends on {crate_name} ({}): \
                     move the test or bench to a crate above both, or what it shares into test-support",
                    path.join(" -> ")
                ));
            }
        }
    }
    faults
}

/// The crates above the ports that are not adapters: the composition root, the binary, the
/// parts that run agents, and this tool.
const NOT_ADAPTERS: &[&str] = &["server", "cli", "dispatch", "xtask"];

/// The surfaces, read from the crate graph: every workspace crate that depends on `commands`
/// (the ports), but the composition root, the binary, the dispatcher and this tool. A new
/// surface crate is checked from its first build, with no list to edit.
pub fn adapters(graph: &Graph) -> Vec<String> {
    graph
        .normal
        .iter()
        .filter(|(name, deps)| deps.contains("commands") && !NOT_ADAPTERS.contains(&name.as_str()))
        .map(|(name, _)| name.clone())
        .collect()
}

/// What an adapter may depend on in the workspace: the ports and the policy, nothing that
/// runs agents or keeps records.
pub const ADAPTER_LAYER: &[&str] = &["authz-core", "commands"];

/// One line per adapter that depends (normally) on a workspace crate beside the ports and
/// the policy, or whose source names the store (`store::`): what a surface needs from the
/// store is a method of `commands`'s `Services`, so it never reaches past the registry. And
/// one per `commands` source that hands a store item on (`pub use store…`, `pub type … store::`).
pub fn adapters_past_the_ports(root: &Path, graph: &Graph) -> Result<Vec<String>> {
    let adapters = adapters(graph);
    let mut faults = adapter_dependency_faults(graph, &adapters);
    for adapter in &adapters {
        for (path, text) in crate::source::rust_sources(graph.sources_of(adapter)?)? {
            if names_the_store(&crate::source::without_tests(&text)) {
                faults.push(format!(
                    "{} names `store::`: reach records through commands' Services, never the store",
                    shown(root, &path)
                ));
            }
        }
    }
    for (path, text) in crate::source::rust_sources(graph.sources_of("commands")?)? {
        if re_exports_the_store(&crate::source::without_tests(&text)) {
            faults.push(format!(
                "{} re-exports a store item to the adapters: move it to authz-core or commands",
                shown(root, &path)
            ));
        }
    }
    Ok(faults)
}

/// An adapter's dependencies beyond [`ADAPTER_LAYER`].
fn adapter_dependency_faults(graph: &Graph, adapters: &[String]) -> Vec<String> {
    adapters
        .iter()
        .flat_map(|adapter| {
            graph
                .normal
                .get(adapter)
                .into_iter()
                .flatten()
                .filter(|d| !ADAPTER_LAYER.contains(&d.as_str()))
                .map(move |dep| {
                    format!(
                        "{adapter} depends on {dep}: an adapter depends only on authz-core and commands (its ports)"
                    )
                })
        })
        .collect()
}

/// One line per place an adapter or the CLI builds a `Caller` by hand: every surface builds
/// it through `commands::identity`, so what an actor holds is resolved one way.
pub fn callers_built_by_hand(root: &Path, graph: &Graph) -> Result<Vec<String>> {
    let mut faults = Vec::new();
    let adapters = adapters(graph);
    for krate in adapters.iter().map(String::as_str).chain(["cli"]) {
        for (path, text) in crate::source::rust_sources(graph.sources_of(krate)?)? {
            if builds_a_caller(&crate::source::without_tests(&text)) {
                faults.push(format!(
                    "{} builds a Caller by hand: use commands::identity",
                    shown(root, &path)
                ));
            }
        }
    }
    Ok(faults)
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `Caller::new` called or named (`<Caller>::new` too), or `Caller` renamed on import (its
/// `new` is the same constructor); `FakeCaller::new` is another type's.
fn builds_a_caller(code: &str) -> bool {
    crate::source::code_lines(code).any(|l| {
        crate::source::after_word(l, "Caller").any(|after| {
            ["::new", ">::new", " as "]
                .iter()
                .any(|n| after.starts_with(n))
        })
    })
}

/// A public item of `commands` that hands on a store item: a `pub use` naming the `store`
/// crate in any form (`store::X`, `::store::X`, `{store::X}`, `store`, `store as db`), or a
/// public alias of a `store::` path. `pub(crate)` and narrower never reach an adapter.
fn re_exports_the_store(code: &str) -> bool {
    crate::source::code_lines(code)
        .map(str::trim_start)
        .any(|l| {
            let Some(item) = l.strip_prefix("pub ") else {
                return false;
            };
            let names_store_crate = item
                .split(|c: char| !crate::source::is_word_char(c))
                .any(|word| word == "store");
            (item.starts_with("use ") && names_store_crate)
                || (item.starts_with("type ") && names_the_store(item))
        })
}

/// `store::` as a path (not inside a longer name such as `kv_store::`), outside comments.
fn names_the_store(code: &str) -> bool {
    crate::source::code_lines(code)
        .any(|line| crate::source::after_word(line, "store::").next().is_some())
}

/// A path of normal dependencies from `from` to `to`, if there is one (breadth first, so
/// the shortest).
fn normal_path(
    normal: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        if at == to {
            let mut path = vec![to.to_owned()];
            let mut step = to;
            while let Some(prev) = came_from.get(step) {
                path.push((*prev).to_owned());
                step = prev;
            }
            path.reverse();
            return Some(path);
        }
        for next in normal.get(at).into_iter().flatten() {
            if next != from && !came_from.contains_key(next.as_str()) {
                came_from.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn package(name: &str, deps: &[(&str, Option<&str>)]) -> Value {
        let deps: Vec<Value> = deps
            .iter()
            .map(|(d, kind)| json!({"name": d, "kind": kind}))
            .collect();
        json!({"id": format!("{name}-id"), "name": name, "dependencies": deps})
    }

    #[test]
    fn a_dev_dependency_on_a_crate_above_is_named_with_its_path() {
        let metadata = json!({
            "workspace_members": ["low-id", "mid-id", "top-id"],
            "packages": [
                package("low", &[("top", Some("dev")), ("low", Some("dev")), ("serde", None)]),
                package("mid", &[("low", None)]),
                package("top", &[("mid", None), ("low", Some("dev"))]),
            ],
        });
        let faults = dev_dependency_cycles(&Graph::read(&metadata).unwrap());
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(
            faults[0]
                .starts_with("low dev-depends on top, and top depends on low (top -> mid -> low)"),
            "{faults:?}"
        );
    }

    #[test]
    fn planted_reaches_past_the_ports_are_named() {
        let metadata = json!({
            "workspace_members": ["chat-id", "commands-id", "store-id", "authz-core-id"],
            "packages": [
                package("chat", &[("commands", None), ("authz-core", None), ("store", None)]),
                package("commands", &[("store", None)]),
                package("store", &[]),
                package("authz-core", &[]),
            ],
        });
        let graph = Graph::read(&metadata).unwrap();
        assert_eq!(adapters(&graph), ["chat"]);
        // A member whose sources cannot be found fails the check, never skips it.
        assert!(graph.sources_of("chat").is_err());
        assert!(adapters_past_the_ports(Path::new("."), &graph).is_err());
        assert_eq!(
            adapter_dependency_faults(&graph, &adapters(&graph)),
            [
                "chat depends on store: an adapter depends only on authz-core and commands (its ports)"
            ]
        );
        for re_export in [
            "pub use store::RunRecord;",
            "pub use store;",
            "pub use store as db;",
            "pub use ::store::RunRecord;",
            "pub use {store::RunRecord};",
            "pub type Record = store::RunRecord;",
        ] {
            assert!(re_exports_the_store(re_export), "{re_export}");
        }
        for fine in [
            "use store::RunRecord;",
            "pub(crate) use store::RunRecord;",
            "pub use kv_store::Item;",
            "pub use authz_core::Timestamp;",
            "// pub use store::X;",
        ] {
            assert!(!re_exports_the_store(fine), "{fine}");
        }
        for by_hand in [
            "let c = Caller::new(actor, Surface::Http);",
            "let c = commands::Caller::new(a, s);",
            "use commands::Caller as C;",
            "let make = Caller::new;",
            "let c = <Caller>::new(a, s);",
        ] {
            assert!(builds_a_caller(by_hand), "{by_hand}");
        }
        for fine in [
            "let c = identity::bearer_caller(&s, surface, t);",
            "// Caller::new is not for here",
        ] {
            assert!(!builds_a_caller(fine), "{fine}");
        }
    }

    #[test]
    fn the_adapters_are_read_from_the_crate_graph() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let graph = Graph::read(&crate::tidy::cargo_metadata(root).unwrap()).unwrap();
        assert_eq!(
            adapters(&graph),
            ["access-api", "http-ingress", "mcp", "schedule", "slack"]
        );
    }

    #[test]
    fn the_store_is_named_only_as_a_path_outside_comments() {
        assert!(names_the_store("let s = store::open(x);"));
        assert!(names_the_store("use store::{RunRecord};"));
        assert!(!names_the_store("let s = kv_store::open(x);"));
        assert!(!names_the_store("// store::open is not for adapters"));
        assert!(!names_the_store("self.down.store(true, Ordering::SeqCst);"));
    }

    #[test]
    fn adapters_depend_only_on_the_ports_and_name_no_store() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let graph = Graph::read(&crate::tidy::cargo_metadata(root).unwrap()).unwrap();
        assert!(!adapters(&graph).is_empty());
        assert_eq!(
            adapters_past_the_ports(root, &graph).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_surface_builds_its_caller_through_identity() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let graph = Graph::read(&crate::tidy::cargo_metadata(root).unwrap()).unwrap();
        assert!(!adapters(&graph).is_empty());
        assert_eq!(
            callers_built_by_hand(root, &graph).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_workspace_has_no_dev_dependency_cycle() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let graph = Graph::read(&crate::tidy::cargo_metadata(&root).unwrap()).unwrap();
        assert!(
            graph.dev.values().any(|d| !d.is_empty()),
            "the graph has dev edges to check"
        );
        assert_eq!(dev_dependency_cycles(&graph), Vec::<String>::new());
    }
}
