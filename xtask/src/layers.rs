//! Crate layers hold for tests, benches and examples too: no workspace crate dev-depends on a
//! crate that depends on it (directly or through others). Such a dev-dependency is a cycle
//! `cargo metadata` shows, and it is how a bench or a test of a low crate imports a crate above
//! its own (`schedule`'s bench building the whole `server` App). What needs the whole App is
//! tested or measured in `server` or `cli`; what every crate's tests share is in
//! `test-support`, which depends on no workspace crate.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use serde_json::Value;

/// One line per dev-dependency that closes a cycle: `a dev-depends on b, and b depends on a
/// through b -> … -> a`.
pub fn dev_dependency_cycles(metadata: &Value) -> Result<Vec<String>> {
    let members = workspace_members(metadata)?;
    let normal = edges(&members, |kind| kind.is_null() || kind == "build");
    let dev = edges(&members, |kind| kind == "dev");
    let mut faults = Vec::new();
    for (crate_name, dev_deps) in &dev {
        for dep in dev_deps.iter().filter(|d| *d != crate_name) {
            if let Some(path) = normal_path(&normal, dep, crate_name) {
                faults.push(format!(
                    "{crate_name} dev-depends on {dep}, and {dep} depends on {crate_name} ({}): \
                     move the test or bench to a crate above both, or what it shares into test-support",
                    path.join(" -> ")
                ));
            }
        }
    }
    Ok(faults)
}

/// The crates above the ports that are not adapters: the composition root, the binary, the
/// parts that run agents, and this tool.
const NOT_ADAPTERS: &[&str] = &["server", "cli", "dispatch", "xtask"];

/// The surfaces, read from the crate graph: every workspace crate that depends on `commands`
/// (the ports), but the composition root, the binary, the dispatcher and this tool. A new
/// surface crate is checked from its first build, with no list to edit.
pub fn adapters(metadata: &Value) -> Result<Vec<String>> {
    let members = workspace_members(metadata)?;
    let normal = edges(&members, |kind| kind.is_null() || kind == "build");
    Ok(normal
        .iter()
        .filter(|(name, deps)| deps.contains("commands") && !NOT_ADAPTERS.contains(&name.as_str()))
        .map(|(name, _)| name.clone())
        .collect())
}

/// What an adapter may depend on in the workspace: the ports and the policy, nothing that
/// runs agents or keeps records.
pub const ADAPTER_LAYER: &[&str] = &["authz-core", "commands"];

/// One line per adapter that depends (normally) on a workspace crate beside the ports and
/// the policy, or whose source names the store (`store::`): what a surface needs from the
/// store is a method of `commands`'s `Services`, so it never reaches past the registry.
pub fn adapters_past_the_ports(
    root: &std::path::Path,
    metadata: &Value,
    adapters: &[String],
) -> Result<Vec<String>> {
    let members = workspace_members(metadata)?;
    let normal = edges(&members, |kind| kind.is_null() || kind == "build");
    let mut faults = Vec::new();
    for adapter in adapters {
        let deps = normal
            .get(adapter.as_str())
            .with_context(|| format!("adapter {adapter} is not a workspace member"))?;
        for dep in deps.iter().filter(|d| !ADAPTER_LAYER.contains(&d.as_str())) {
            faults.push(format!(
                "{adapter} depends on {dep}: an adapter depends only on authz-core and commands (its ports)"
            ));
        }
        let src = root.join("crates").join(adapter).join("src");
        for (path, text) in crate::tidy::rust_sources(&src)? {
            let code = crate::tidy::without_tests(&text);
            if names_the_store(code) {
                faults.push(format!(
                    "{} names `store::`: reach records through commands' Services, never the store",
                    path.strip_prefix(root).unwrap_or(&path).display()
                ));
            }
        }
    }
    // What the ports hand adapters is the ports' own or authz-core's, never a store type
    // passed through: `commands` re-exports nothing of the store.
    for (path, text) in crate::tidy::rust_sources(&root.join("crates/commands/src"))? {
        if text
            .lines()
            .any(|l| l.trim_start().starts_with("pub use store::"))
        {
            faults.push(format!(
                "{} re-exports a store type to the adapters: move it to authz-core or commands",
                path.strip_prefix(root).unwrap_or(&path).display()
            ));
        }
    }
    Ok(faults)
}

/// One line per place an adapter or the CLI builds a `Caller` by hand: every surface builds
/// it through `commands::identity`, so what an actor holds is resolved one way.
pub fn callers_built_by_hand(root: &std::path::Path, adapters: &[String]) -> Result<Vec<String>> {
    let mut faults = Vec::new();
    for krate in adapters.iter().map(String::as_str).chain(["cli"]) {
        let src = root.join("crates").join(krate).join("src");
        for (path, text) in crate::tidy::rust_sources(&src)? {
            let code = crate::tidy::without_tests(&text);
            if code.contains("Caller::new(") {
                faults.push(format!(
                    "{} builds a Caller by hand: use commands::identity",
                    path.strip_prefix(root).unwrap_or(&path).display()
                ));
            }
        }
    }
    Ok(faults)
}

/// `store::` as a path (not inside a longer name such as `kv_store::`), outside comments.
fn names_the_store(code: &str) -> bool {
    code.lines()
        .map(|line| line.split("//").next().unwrap_or(line))
        .any(|line| {
            line.match_indices("store::").any(|(i, _)| {
                !line
                    .get(..i)
                    .and_then(|before| before.chars().next_back())
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
}

/// Each workspace member's name and its declared dependencies (name, kind).
fn workspace_members(metadata: &Value) -> Result<BTreeMap<String, Vec<(String, Value)>>> {
    let ids: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .context("metadata has no workspace_members")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let packages = metadata["packages"]
        .as_array()
        .context("metadata has no packages")?;
    Ok(packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| ids.contains(id)))
        .filter_map(|p| {
            let deps = p["dependencies"]
                .as_array()?
                .iter()
                .filter_map(|d| Some((d["name"].as_str()?.to_owned(), d["kind"].clone())))
                .collect();
            Some((p["name"].as_str()?.to_owned(), deps))
        })
        .collect())
}

/// The edges between members whose dependency kind `keep` accepts.
fn edges(
    members: &BTreeMap<String, Vec<(String, Value)>>,
    keep: impl Fn(&Value) -> bool,
) -> BTreeMap<String, BTreeSet<String>> {
    members
        .iter()
        .map(|(name, deps)| {
            let to = deps
                .iter()
                .filter(|(dep, kind)| members.contains_key(dep) && keep(kind))
                .map(|(dep, _)| dep.clone())
                .collect();
            (name.clone(), to)
        })
        .collect()
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
        let faults = dev_dependency_cycles(&metadata).unwrap();
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(
            faults[0]
                .starts_with("low dev-depends on top, and top depends on low (top -> mid -> low)"),
            "{faults:?}"
        );
    }

    #[test]
    fn the_adapters_are_read_from_the_crate_graph() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let metadata = crate::tidy::cargo_metadata(root).unwrap();
        assert_eq!(
            adapters(&metadata).unwrap(),
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
        let metadata = crate::tidy::cargo_metadata(root).unwrap();
        let adapters = adapters(&metadata).unwrap();
        assert_eq!(
            adapters_past_the_ports(root, &metadata, &adapters).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_surface_builds_its_caller_through_identity() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let metadata = crate::tidy::cargo_metadata(root).unwrap();
        let adapters = adapters(&metadata).unwrap();
        assert_eq!(
            callers_built_by_hand(root, &adapters).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_workspace_has_no_dev_dependency_cycle() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let metadata = crate::tidy::cargo_metadata(&root).unwrap();
        assert_eq!(
            dev_dependency_cycles(&metadata).unwrap(),
            Vec::<String>::new()
        );
    }
}
