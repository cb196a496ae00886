//! # xtask: the workspace's own chores
//!
//! `cargo xtask tidy`: the checks that keep the architecture true (authz-core stays pure; no
//! hand-made comparisons of caller ids or channels outside authz-core; memory decides through
//! its seam; no document or comment names a page outside the repository; no two modules of a
//! crate name each other; no crate's tests, benches or examples dev-depend on a crate that
//! depends on it; the code map names only paths that exist and tests their files define, and
//! stays within 16 KB; adapters depend only on authz-core and commands, and name no `store::`;
//! `commands` re-exports no store item; adapters and the CLI build every `Caller` through
//! `commands::identity`; no source file passes 700 lines before its unit tests; every saved
//! proptest failure is where proptest reads it). One `git ls-files` and one `cargo metadata`
//! serve every check.
//! `cargo xtask conformance-matrix`: prints docs/conformance-matrix.md.
//! It never ships; `anyhow` is fine here.

mod circles;
mod code_map;
mod file_size;
mod layers;
mod references;
mod regressions;
mod source;
mod tidy;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask <verb>\n\nverbs:\n  tidy                 check the architecture: authz-core stays pure (no async runtime,\n                       database or HTTP crate; no I/O, clock or environment API); no command or\n                       adapter compares caller ids or channels by hand; memory decides through\n                       its seam; nothing names a page outside the repository; no two modules of\n                       a crate name each other; no crate dev-depends on a crate that depends on\n                       it; the code map (docs/ARCHITECTURE.md) names only paths that exist and\n                       tests their files define, within 16 KB; adapters depend only on\n                       authz-core and commands and name no store, and commands re-exports no\n                       store item; adapters and the CLI build callers through\n                       commands::identity; no source file passes 700 lines before its unit\n                       tests; every saved proptest failure is where proptest reads it\n  conformance-matrix   print the conformance matrix (docs/conformance-matrix.md)";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tidy") => {
            let root = workspace_root()?;
            let metadata = tidy::cargo_metadata(&root)?;
            let graph = layers::Graph::read(&metadata)?;
            let tracked = references::tracked_files(&root)?;
            let mut faults = tidy::forbidden_dependencies(&metadata, "authz-core")?;
            faults.extend(tidy::forbidden_apis(graph.sources_of("authz-core")?)?);
            faults.extend(tidy::hand_made_decisions(&graph)?);
            faults.extend(tidy::undecided_memory(&graph)?);
            faults.extend(references::outside_references(&root, &tracked)?);
            faults.extend(circles::module_circles(&root)?);
            faults.extend(layers::dev_dependency_cycles(&graph));
            faults.extend(code_map::map_faults(&root)?);
            faults.extend(layers::adapters_past_the_ports(&root, &graph)?);
            faults.extend(layers::callers_built_by_hand(&root, &graph)?);
            faults.extend(file_size::long_files(&root, &tracked));
            faults.extend(regressions::misplaced_regressions(&tracked));
            if !faults.is_empty() {
                bail!(
                    "tidy found {} fault(s):\n  {}",
                    faults.len(),
                    faults.join("\n  ")
                );
            }
            println!(
                "tidy: authz-core is pure; no hand-made id or channel comparisons in commands or adapters; memory decides only through its seam; nothing names a page outside the repository; no two modules name each other; no crate's tests or benches depend on a crate above it; the code map names only paths that exist and fits in 16 KB; adapters depend only on the ports, name no store and build callers through identity; no source file passes 700 lines before its tests; every saved proptest failure is read"
            );
            Ok(())
        }
        Some("conformance-matrix") => {
            let table = commands::conformance::fixture_table().map_err(anyhow::Error::msg)?;
            let registry = commands::Registry::catalogue();
            let actors = commands::conformance::actor_set(&table);
            print!(
                "{}",
                commands::conformance::render_markdown(&registry, &actors)
            );
            Ok(())
        }
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown verb `{other}`\n\n{USAGE}"),
    }
}

fn workspace_root() -> Result<std::path::PathBuf> {
    let manifest_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(std::path::Path::to_path_buf)
        .context("xtask has no parent directory")
}
