//! # xtask: the workspace's own chores
//!
//! `cargo xtask tidy`: the checks that keep the architecture true (authz-core stays pure).
//! More verbs arrive with the parts they serve (conformance-matrix, bench drivers).
//! It never ships; `anyhow` is fine here.

mod tidy;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask <verb>\n\nverbs:\n  tidy    check that authz-core depends on no async runtime, database or HTTP crate,\n          and that its source touches no I/O, clock or environment API";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tidy") => {
            let root = workspace_root()?;
            let metadata = tidy::cargo_metadata(&root)?;
            let mut faults = tidy::forbidden_dependencies(&metadata, "authz-core")?;
            faults.extend(tidy::forbidden_apis(&root.join("crates/authz-core/src"))?);
            if !faults.is_empty() {
                bail!(
                    "tidy found {} fault(s):\n  {}",
                    faults.len(),
                    faults.join("\n  ")
                );
            }
            println!(
                "tidy: authz-core is pure (no runtime, database or HTTP crate; no I/O, clock or env API)"
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
