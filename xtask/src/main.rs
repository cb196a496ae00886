//! # xtask: the workspace's own chores
//!
//! `cargo xtask tidy`: the checks that keep the architecture true (authz-core stays pure; no
//! hand-made comparisons of caller ids or channels outside authz-core; memory decides through
//! its seam; no document or comment names a page outside the repository; no two modules of a
//! crate name each other; no crate's tests, benches or examples dev-depend on a crate that
//! depends on it; the code map names only paths that exist and stays within 16 KB; adapters depend only
//! on authz-core and commands, name no `store::`, and build every `Caller` through
//! `commands::identity`; no source file passes 700 lines before its
//! unit tests; every saved proptest failure is where proptest reads it).
//! `cargo xtask conformance-matrix`: prints docs/conformance-matrix.md.
//! It never ships; `anyhow` is fine here.

mod circles;
mod code_map;
mod file_size;
mod layers;
mod references;
mod regressions;
mod tidy;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask <verb>\n\nverbs:\n  tidy                 check that authz-core depends on no async runtime, database or HTTP\n                       crate and touches no I/O, clock or environment API, and that no\n                       command or adapter compares caller ids or channels by hand, and that no\n                       document or comment names a page outside the repository, and that no two\n                       modules of a crate name each other, and that no crate dev-depends on a\n                       crate that depends on it, and that the code map\n                       (docs/ARCHITECTURE.md) names only paths that exist and fits in 16 KB, and that adapters\n                       depend only on authz-core and commands and name no store, and that no\n                       source file passes 700 lines before its unit tests, and that every saved\n                       proptest failure is where proptest reads it\n  conformance-matrix   print the conformance matrix (docs/conformance-matrix.md)";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tidy") => {
            let root = workspace_root()?;
            let metadata = tidy::cargo_metadata(&root)?;
            let mut faults = tidy::forbidden_dependencies(&metadata, "authz-core")?;
            faults.extend(tidy::forbidden_apis(&root.join("crates/authz-core/src"))?);
            let adapters = layers::adapters(&metadata)?;
            faults.extend(tidy::hand_made_decisions(&root, &adapters)?);
            faults.extend(tidy::undecided_memory(&root)?);
            faults.extend(references::outside_references(&root)?);
            faults.extend(circles::module_circles(&root)?);
            faults.extend(layers::dev_dependency_cycles(&metadata)?);
            faults.extend(code_map::map_faults(&root)?);
            faults.extend(layers::adapters_past_the_ports(
                &root, &metadata, &adapters,
            )?);
            faults.extend(layers::callers_built_by_hand(&root, &adapters)?);
            faults.extend(file_size::long_files(&root)?);
            faults.extend(regressions::misplaced_regressions(&root)?);
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
